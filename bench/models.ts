/**
 * Benchmark models, created on demand under the gitignored `.cache/bench/`.
 *
 * - `stories260K`: the bundled model (`models/stories260K`) for Weft and the TS CPU
 *   reference; for transformers.js, the shared ONNX export
 *   (`../shared/peers/stories260K-onnx`, override with WEFT_BENCH_PEERS_DIR) copied to
 *   `.cache/bench/stories260K-onnx/` so the product never reads outside the repo.
 * - `llama20m`: a random ~24M-parameter Llama (hidden 512, 8 layers, 8 heads, 4 kv heads,
 *   intermediate 1408, vocab 512, untied head, the stories260K tokenizer) written as an
 *   HF folder (config.json + f32 model.safetensors, weights N(0, 1) * 0.02 from a fixed
 *   seed, norm weights 1) into `.cache/bench/llama20m/`, then exported to ONNX in the
 *   transformers.js layout (`onnx/model.onnx` in the same folder) by
 *   `scripts/bench/export_llama_onnx.py` (needs /usr/bin/python3 with torch).
 *
 * Each model dir is both a Weft model (config.json + model.safetensors) and, for
 * transformers.js, `onnxRoot/onnxName` (env.localModelPath + model id).
 */
import { execFile } from 'node:child_process';
import { chmod, copyFile, mkdir, readdir, readFile, rename, stat, writeFile } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { writeSafetensors, type SafetensorsTensorInput } from '../core/formats/safetensors.ts';

const run = promisify(execFile);

export const REPO = resolve(dirname(fileURLToPath(import.meta.url)), '..');
export const BENCH_CACHE = join(REPO, '.cache', 'bench');
export const STORIES_DIR = join(REPO, 'models', 'stories260K');
export const SHARED_PEERS = process.env.WEFT_BENCH_PEERS_DIR ?? resolve(REPO, '..', 'shared', 'peers');
export const PYTHON = process.env.WEFT_BENCH_PYTHON ?? '/usr/bin/python3';
const EXPORTER = join(REPO, 'scripts', 'bench', 'export_llama_onnx.py');

export type ModelId = 'stories260K' | 'llama20m';
export const MODEL_IDS: ModelId[] = ['stories260K', 'llama20m'];

export interface BenchModel {
  id: ModelId;
  /** Human label for tables. */
  label: string;
  /** HF folder Weft and the TS reference load. */
  weftDir: string;
  /** transformers.js: env.localModelPath ... */
  onnxRoot: string;
  /** ... and the model id under it (a folder with config.json, tokenizer, onnx/model.onnx). */
  onnxName: string;
  /** Parameter count (from config.json). */
  params: number;
}

async function exists(p: string): Promise<boolean> {
  try {
    await stat(p);
    return true;
  } catch {
    return false;
  }
}

async function mtime(p: string): Promise<number> {
  try {
    return (await stat(p)).mtimeMs;
  } catch {
    return -1;
  }
}

/** Parameters of a Llama config (embeddings + layers + final norm + untied head). */
export function llamaParams(cfg: Record<string, unknown>): number {
  const n = (k: string, d?: number): number => (typeof cfg[k] === 'number' ? (cfg[k] as number) : d!);
  const D = n('hidden_size');
  const H = n('num_attention_heads');
  const KV = n('num_key_value_heads', H);
  const hd = n('head_dim', D / H) || D / H;
  const I = n('intermediate_size');
  const V = n('vocab_size');
  const L = n('num_hidden_layers');
  const layer = D * H * hd + 2 * D * KV * hd + H * hd * D + 3 * D * I + 2 * D;
  return V * D + L * layer + D + (cfg.tie_word_embeddings ? 0 : V * D);
}

/** Deterministic N(0,1) samples * scale (mulberry32 + Box–Muller). */
export function randn(n: number, seed: number, scale: number): Float32Array {
  let a = seed >>> 0;
  const r = (): number => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const out = new Float32Array(n);
  for (let i = 0; i < n; i += 2) {
    const u = Math.max(r(), 1e-12);
    const v = 2 * Math.PI * r();
    const m = Math.sqrt(-2 * Math.log(u)) * scale;
    out[i] = m * Math.cos(v);
    if (i + 1 < n) out[i + 1] = m * Math.sin(v);
  }
  return out;
}

export const LLAMA20M_CONFIG = {
  architectures: ['LlamaForCausalLM'],
  model_type: 'llama',
  hidden_size: 512,
  intermediate_size: 1408,
  num_hidden_layers: 8,
  num_attention_heads: 8,
  num_key_value_heads: 4,
  head_dim: 64,
  vocab_size: 512,
  max_position_embeddings: 512,
  rms_norm_eps: 1e-5,
  rope_theta: 10000.0,
  hidden_act: 'silu',
  tie_word_embeddings: false,
  attention_bias: false,
  mlp_bias: false,
  bos_token_id: 1,
  eos_token_id: 2,
  torch_dtype: 'float32',
  use_cache: true,
  pad_token_id: null,
  'transformers.js_config': { dtype: 'fp32', use_external_data_format: false },
};

/** Writes the random Llama's HF folder (idempotent: skipped when model.safetensors exists). */
async function createLlama20m(dir: string, log: (s: string) => void): Promise<void> {
  const st = join(dir, 'model.safetensors');
  if (await exists(st)) return;
  log(`bench: creating random Llama (${(llamaParams(LLAMA20M_CONFIG) / 1e6).toFixed(1)}M params) in ${dir}`);
  await mkdir(dir, { recursive: true });
  const c = LLAMA20M_CONFIG;
  const D = c.hidden_size;
  const hd = c.head_dim;
  const I = c.intermediate_size;
  const V = c.vocab_size;
  const tensors: SafetensorsTensorInput[] = [];
  let seed = 20240601;
  const normal = (name: string, shape: number[]): void => {
    const n = shape.reduce((a, b) => a * b, 1);
    tensors.push({ name, dtype: 'F32', shape, data: randn(n, seed++, 0.02) });
  };
  const ones = (name: string, n: number): void => {
    tensors.push({ name, dtype: 'F32', shape: [n], data: new Float32Array(n).fill(1) });
  };
  normal('model.embed_tokens.weight', [V, D]);
  for (let l = 0; l < c.num_hidden_layers; l++) {
    const p = `model.layers.${l}.`;
    ones(`${p}input_layernorm.weight`, D);
    normal(`${p}self_attn.q_proj.weight`, [c.num_attention_heads * hd, D]);
    normal(`${p}self_attn.k_proj.weight`, [c.num_key_value_heads * hd, D]);
    normal(`${p}self_attn.v_proj.weight`, [c.num_key_value_heads * hd, D]);
    normal(`${p}self_attn.o_proj.weight`, [D, c.num_attention_heads * hd]);
    ones(`${p}post_attention_layernorm.weight`, D);
    normal(`${p}mlp.gate_proj.weight`, [I, D]);
    normal(`${p}mlp.up_proj.weight`, [I, D]);
    normal(`${p}mlp.down_proj.weight`, [D, I]);
  }
  ones('model.norm.weight', D);
  normal('lm_head.weight', [V, D]);
  await writeFile(join(dir, 'config.json'), JSON.stringify(c, null, 2));
  await writeFile(join(dir, 'generation_config.json'), JSON.stringify({ bos_token_id: 1, eos_token_id: 2, max_length: 512 }, null, 2));
  for (const f of ['tokenizer.json', 'tokenizer_config.json']) {
    await copyFile(join(STORIES_DIR, f), join(dir, f));
    await chmod(join(dir, f), 0o644);
  }
  await writeFile(`${st}.tmp`, writeSafetensors(tensors, { format: 'pt', generator: 'weft bench/models.ts' }));
  await rename(`${st}.tmp`, st);
}

/** Runs the exporter unless onnx/model.onnx is newer than the safetensors. */
async function ensureOnnx(dir: string, log: (s: string) => void): Promise<void> {
  const onnx = join(dir, 'onnx', 'model.onnx');
  if ((await mtime(onnx)) > (await mtime(join(dir, 'model.safetensors')))) return;
  log(`bench: exporting ${dir} to ONNX with ${PYTHON} ${EXPORTER}`);
  try {
    const { stdout } = await run(PYTHON, [EXPORTER, dir], { maxBuffer: 1 << 24 });
    log(`bench: ${stdout.trim().split('\n').pop()}`);
  } catch (e) {
    const err = e as { stderr?: string; message: string };
    throw new Error(`ONNX export failed (${PYTHON} ${EXPORTER} ${dir}): ${err.stderr?.trim().split('\n').slice(-5).join('\n') ?? err.message}`);
  }
}

/** Copies a folder tree (small files only; used for the shared ONNX peer). */
async function copyTree(src: string, dst: string): Promise<void> {
  await mkdir(dst, { recursive: true });
  for (const e of await readdir(src, { withFileTypes: true })) {
    const s = join(src, e.name);
    const d = join(dst, e.name);
    if (e.isDirectory()) await copyTree(s, d);
    else {
      await copyFile(s, d);
      await chmod(d, 0o644); // the shared folder is read-only; keep the copy writable
    }
  }
}

async function readConfig(dir: string): Promise<Record<string, unknown>> {
  return JSON.parse(await readFile(join(dir, 'config.json'), 'utf8')) as Record<string, unknown>;
}

/**
 * Makes sure a benchmark model exists and returns where it lives.
 * `onnx: false` skips the ONNX side (no Python needed).
 */
export async function ensureModel(id: ModelId, opts: { onnx?: boolean; log?: (s: string) => void } = {}): Promise<BenchModel> {
  const log = opts.log ?? ((s: string) => process.stderr.write(`${s}\n`));
  const wantOnnx = opts.onnx ?? true;
  if (id === 'stories260K') {
    const name = 'stories260K-onnx';
    const dst = join(BENCH_CACHE, name);
    if (wantOnnx && !(await exists(join(dst, 'onnx', 'model.onnx')))) {
      const src = join(SHARED_PEERS, name);
      if (!(await exists(join(src, 'onnx', 'model.onnx')))) {
        throw new Error(`stories260K ONNX peer not found at ${src} (set WEFT_BENCH_PEERS_DIR)`);
      }
      log(`bench: copying ${src} -> ${dst}`);
      await copyTree(src, dst);
    }
    return { id, label: 'stories260K', weftDir: STORIES_DIR, onnxRoot: BENCH_CACHE, onnxName: name, params: llamaParams(await readConfig(STORIES_DIR)) };
  }
  const name = 'llama20m';
  const dir = join(BENCH_CACHE, name);
  await createLlama20m(dir, log);
  if (wantOnnx) await ensureOnnx(dir, log);
  const params = llamaParams(await readConfig(dir));
  return { id, label: `random Llama ${(params / 1e6).toFixed(1)}M`, weftDir: dir, onnxRoot: BENCH_CACHE, onnxName: name, params };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  for (const id of process.argv.slice(2).length ? (process.argv.slice(2) as ModelId[]) : MODEL_IDS) {
    console.log(JSON.stringify(await ensureModel(id)));
  }
}

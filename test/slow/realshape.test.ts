/**
 * Real shapes against independent PyTorch goldens (slow group: `npx vitest run -c
 * vitest.slow.config.ts`). scripts/make_realshape.py writes, from a fixed seed, a bf16
 * checkpoint with the exact published config of Qwen2.5-0.5B (all 24 layers), of
 * Llama-3.2-1B (4 of its 16 layers; every other dimension exact) and of Gemma-2-2B (2 of its
 * 26 layers: one sliding, one global; soft-caps, sandwich norms, GeGLU, 256k vocabulary;
 * Gemma 3's tokenizer, see the script), the real tokenizer.json,
 * and the logits / greedy tokens of its own plain-PyTorch forward (float32 on the bf16
 * weights). Weft loads the folder as users would (`auto`: f16 on the device) and must match:
 *   logits of the first positions: max |diff| <= 1e-2 * max |golden logit|
 *     (f16 storage of bf16 weights is exact except f16 subnormals; f32 accumulation order);
 *   greedy ids: equal wherever the golden top-1/top-2 gap exceeds twice that tolerance.
 * The same weights as a GGUF file (written by hfToGguf, as llama.cpp's converter lays it out):
 *   F16: the same 1e-2; Q8_0: 5e-2 of max |golden logit| (8-bit weight rounding, against the
 *   golden of the unquantized weights), greedy ids where the gap exceeds twice that.
 * Quantized GGUFs are also checked against the plain-TS reference on the file's own
 * dequantized weights (the kernels' error alone): within 1e-4 of max |reference logit|.
 * Checkpoints are cached under .cache/realshape/ (about 1 GB each).
 */
import { execFile, execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { loadDecoder, type LoadedDecoder } from '../../core/api/load_decoder.ts';
import type { ModelSource } from '../../core/formats/source.ts';
import { dirSource, fileSource, openModelPath } from '../../server/fs_source.ts';
import { hfToGgufName, openGguf } from '../../core/formats/gguf.ts';
import { parseDecoderConfig } from '../../core/formats/hf_config.ts';
import { openSafetensorsModel } from '../../core/formats/safetensors.ts';
import { openGgufWeights } from '../../core/models/gguf_weights.ts';
import { hostToF32 } from '../../core/models/host_tensor.ts';
import { ggufOf, MIX_LAYERS, REALSHAPE_GGUF } from '../../bench/memory.ts';
import { GpuContext } from '../../core/gpu/context.ts';
import { gpuFor, TEST_BACKENDS } from '../helpers/gpu.ts';
import { absMax, allPositionLogits, maxAbsDiff, referenceRun } from '../helpers/tiny_decoder.ts';
import { loadTokenizerFromSource } from '../../core/tokenizer/tokenizer.ts';
import { post, startTestService, type TestService } from '../server/helpers.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const TOL = 1e-2;

interface Golden {
  prompt_ids: number[];
  positions: number;
  vocab: number;
  greedy_ids: number[];
  top2_gaps: number[];
  max_abs_logit: number;
}

/** The checkpoint folder for (model, layers), written by the script on first use. */
function checkpoint(model: string, layers: number): string {
  const dir = join(ROOT, '.cache', 'realshape', `${model}-L${layers}-s1234`);
  if (!existsSync(join(dir, 'golden.json'))) {
    execFileSync('/usr/bin/python3', [join(ROOT, 'scripts', 'make_realshape.py'), '--model', model, '--out', dir, ...(layers ? ['--layers', String(layers)] : [])], { stdio: 'inherit' });
  }
  return dir;
}

const CASES: [string, number][] = [
  ['qwen2.5-0.5b', 0],
  ['llama-3.2-1b', 4],
  ['gemma-2-2b', 2],
];

/**
 * Loads `ms`, checks the first logits and the greedy ids against the golden within `tol` of max
 * |golden|. `gpuPlan`: on a context of the gpu kernel variant (the plan a GPU host runs: sgemv
 * with the fused norms, rope and KV store, split-K attention, step graphs), and the greedy ids
 * also through the engine's decode steps.
 */
async function checkAgainstGolden(backend: string, dir: string, open: () => Promise<ModelSource>, tol: number, what: string, gpuPlan = false): Promise<void> {
  const g = JSON.parse(readFileSync(join(dir, 'golden.json'), 'utf8')) as Golden;
  const golden = new Float32Array(readFileSync(join(dir, 'golden_logits.f32')).buffer.slice(0));
  const ctx = gpuPlan ? await GpuContext.create({ backend, variant: 'gpu' }) : await gpuFor(backend);
  const d = await loadDecoder(ctx, await open(), { maxSeqs: 8, maxContext: 64, maxTokensPerStep: 16, ...(gpuPlan ? { decode: { decodeMegakernel: 'off' as const } } : {}) });
  try {
    const V = g.vocab;
    const all = await allPositionLogits(d, g.prompt_ids);
    const err = maxAbsDiff(all.subarray(0, g.positions * V), golden) / g.max_abs_logit;
    console.info(`${what}: max |Δlogit| / max|golden| = ${err.toExponential(2)} (max|golden| ${g.max_abs_logit.toFixed(3)}); weights ${d.weights.layers[0]!.qkv.w.dtype}, device ${(d.loadStats.deviceWeightBytes / 2 ** 20).toFixed(0)} MiB, host peak ${(d.loadStats.peakHostBytes / 2 ** 20).toFixed(0)} MiB, load ${d.loadStats.loadMs} ms`);
    expect(err).toBeLessThan(tol);
    // Greedy: the argmax after the prompt, then after each golden token.
    const ids = [...g.prompt_ids];
    for (let i = 0; i < g.greedy_ids.length; i++) {
      const rows = i === 0 ? all : await allPositionLogits(d, ids);
      const last = rows.subarray((ids.length - 1) * V, ids.length * V);
      let best = 0;
      for (let v = 1; v < V; v++) if (last[v]! > last[best]!) best = v;
      if (g.top2_gaps[i]! > 2 * tol * absMax(golden)) expect(best, `greedy step ${i}`).toBe(g.greedy_ids[i]);
      ids.push(g.greedy_ids[i]!);
    }
    if (gpuPlan) {
      expect(d.decodePlan.ropeKv.decode).toBe(ctx.gpu.caps.subgroups ? 'fused' : 'separate');
      // Decode steps (one token each) up to the first step whose golden gap is within the tolerance.
      let sure = 0;
      while (sure < g.greedy_ids.length && g.top2_gaps[sure]! > 2 * tol * absMax(golden)) sure++;
      const r = await d.engine.complete(g.prompt_ids, { maxNewTokens: Math.max(sure, 1), sampling: { temperature: 0 }, stop: [] });
      expect(r.tokenIds.slice(0, sure)).toEqual(g.greedy_ids.slice(0, sure));
    }
  } finally {
    d.destroy();
    if (gpuPlan) ctx.destroy();
  }
}

/** Kernels against the reference on the file's weights: measured 1.3e-6 .. 1.6e-6 of max |logit| (Q4_K, Q5_K, Q6_K, Q8_0). */
const FILE_WEIGHTS_TOL = 1e-4;

/**
 * Weft's logits for the golden prompt from the GGUF at `path` against the plain-TS reference
 * (core/models/llama/reference.ts) on the file's own weights, dequantized: the kernels' error
 * alone, without the quantization's. Within `tol` of max |reference logit| (the kernels decode
 * blocks in registers in their own f32 operation order).
 */
async function checkAgainstFileWeights(backend: string, dir: string, path: string, tol: number, what: string): Promise<void> {
  const g = JSON.parse(readFileSync(join(dir, 'golden.json'), 'utf8')) as Golden;
  const cfg = parseDecoderConfig(JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8')) as Record<string, unknown>);
  const names = [...(await openSafetensorsModel(dirSource(dir))).tensors.keys()];
  const file = await openGgufWeights(await fileSource(path));
  const weights = new Map<string, Float32Array>();
  for (const n of names) if (file.weights.has(n)) weights.set(n, hostToF32(await file.weights.load(n)));
  const get = (n: string): Float32Array => {
    const v = weights.get(n);
    if (!v) throw new Error(`${what}: no ${n} in the file`);
    return v;
  };
  const ids = g.prompt_ids.slice(0, g.positions);
  const ref = referenceRun(cfg, get, ids, 0).logits;
  weights.clear();
  const ctx = await gpuFor(backend);
  const d = await loadDecoder(ctx, await openModelPath(path), { maxSeqs: 8, maxContext: 64, maxTokensPerStep: 16 });
  try {
    const err = maxAbsDiff(await allPositionLogits(d, ids), ref) / absMax(ref);
    console.info(`${what} vs the reference on the file's weights: max |Δlogit| / max|ref| = ${err.toExponential(2)}`);
    expect(err).toBeLessThan(tol);
  } finally {
    d.destroy();
  }
}

/**
 * PyTorch logits of the GGUF file's own weights (scripts/gguf_golden.py: its own GGUF reader and
 * numpy dequantizers, make_realshape.py's forward), for the golden prompt's first positions;
 * written next to the file once.
 */
function dequantGolden(dir: string, path: string): { logits: Float32Array; maxAbs: number; positions: number; vocab: number; types: string[] } {
  const g = JSON.parse(readFileSync(join(dir, 'golden.json'), 'utf8')) as Golden;
  const prefix = path.replace(/\.gguf$/, '.golden');
  if (!existsSync(`${prefix}.json`)) {
    execFileSync('/usr/bin/python3', [join(ROOT, 'scripts', 'gguf_golden.py'), '--gguf', path, '--config', join(dir, 'config.json'), '--ids', g.prompt_ids.join(','), '--positions', String(g.positions), '--out', prefix], { stdio: 'inherit' });
  }
  const meta = JSON.parse(readFileSync(`${prefix}.json`, 'utf8')) as { positions: number; vocab: number; max_abs_logit: number; types: string[] };
  return { logits: new Float32Array(readFileSync(`${prefix}.f32`).buffer.slice(0)), maxAbs: meta.max_abs_logit, positions: meta.positions, vocab: meta.vocab, types: meta.types };
}

/**
 * Weft on the GGUF at `path` against the PyTorch forward of the same file's dequantized weights:
 * max |Δlogit| over the first positions within `tol` of max |golden logit|. Both compute in f32
 * on identical weight values, so `tol` bounds the kernels' own error (operation order, blocks
 * decoded in registers), not the quantization's.
 */
async function checkAgainstDequantGolden(backend: string, dir: string, path: string, tol: number, what: string, loaded?: (d: LoadedDecoder) => void): Promise<number> {
  const golden = dequantGolden(dir, path);
  const g = JSON.parse(readFileSync(join(dir, 'golden.json'), 'utf8')) as Golden;
  const ctx = await gpuFor(backend);
  const d = await loadDecoder(ctx, await openModelPath(path), { maxSeqs: 8, maxContext: 64, maxTokensPerStep: 16 });
  try {
    loaded?.(d);
    const all = await allPositionLogits(d, g.prompt_ids);
    const err = maxAbsDiff(all.subarray(0, golden.positions * golden.vocab), golden.logits) / golden.maxAbs;
    console.info(`${what} vs PyTorch on the file's dequantized weights (${golden.types.join(', ')}): max |Δlogit| / max|golden| = ${err.toExponential(2)}`);
    expect(err).toBeLessThan(tol);
    return err;
  } finally {
    d.destroy();
  }
}

/** Kernels against PyTorch on the file's own dequantized weights (f32 both sides): measured 2.6e-6 .. 3.3e-6. */
const DEQUANT_TOL = 1e-4;

describe.each(CASES)('%s shape (%i layers; 0: all of them) against its PyTorch golden', (model, layers) => {
  const backend = TEST_BACKENDS[0]!;
  it(`bf16 safetensors (f16 on the device) on ${backend}`, async () => {
    const dir = checkpoint(model, layers);
    await checkAgainstGolden(backend, dir, async () => dirSource(dir), TOL, `${model} L${layers || 'all'} safetensors`);
  });
});

// The plan a GPU host runs, on the emulator's adapter (sgemv needs SwiftShader's subgroups).
describe('llama-3.2-1b shape (4 layers) on the gpu kernel variant against its PyTorch golden', () => {
  const backend = TEST_BACKENDS[0]!;
  it(`bf16 safetensors, gpu variant, on ${backend}`, async () => {
    const dir = checkpoint('llama-3.2-1b', 4);
    await checkAgainstGolden(backend, dir, async () => dirSource(dir), TOL, 'llama-3.2-1b L4 safetensors, gpu variant', true);
  });
});

// GGUF of the Qwen2.5-0.5B shape (Llama 3.x GGUF files carry a rope_freqs tensor, applied by the
// GGUF loader and checked on the tiny Llama fixture in test/models/gguf.test.ts).
describe('qwen2.5-0.5b shape as GGUF against its PyTorch golden', () => {
  const backend = TEST_BACKENDS[0]!;
  it.each([
    ['F16', TOL],
    ['Q8_0', 5e-2],
  ] as const)(`GGUF %s of the same weights on ${backend}`, async (type, tol) => {
    const dir = checkpoint('qwen2.5-0.5b', 0);
    const path = await ggufOf(dir, type);
    await checkAgainstGolden(backend, dir, () => openModelPath(path), tol, `qwen2.5-0.5b GGUF ${type}`);
  });
});

// K-quants of the Qwen2.5-0.5B shape (2 of its 24 layers): hfToGguf's Q4_K / Q5_K / Q6_K
// writers. Rows of 896 (the hidden size: embedding, q/k/v/o, gate/up) are not whole 256-element
// super-blocks and fall back to Q8_0 (gguf_kquant_write.ts kquantFallback); down_proj (rows of
// 4864) is K-quant. Against the golden of the unquantized weights (which the f16 run matches
// to ~1e-6), so the tolerance is the quantization's: measured 6.6e-2 / 4.2e-2 / 2.4e-2.
describe('qwen2.5-0.5b shape (2 layers) as K-quant GGUF against its PyTorch golden', () => {
  const backend = TEST_BACKENDS[0]!;
  it.each([
    ['Q4_K', 1e-1],
    ['Q5_K', 7e-2],
    ['Q6_K', 5e-2],
  ] as const)(`GGUF %s of the same weights on ${backend}`, async (type, tol) => {
    const dir = checkpoint('qwen2.5-0.5b', 2);
    const path = await ggufOf(dir, type);
    const g = await openGguf(await fileSource(path));
    expect(g.tensors.get('blk.0.ffn_down.weight')!.type).toBe(type);
    expect(g.tensors.get('blk.0.attn_q.weight')!.type).toBe('Q8_0');
    await checkAgainstGolden(backend, dir, () => openModelPath(path), tol, `qwen2.5-0.5b L2 GGUF ${type}`);
    await checkAgainstFileWeights(backend, dir, path, FILE_WEIGHTS_TOL, `qwen2.5-0.5b L2 GGUF ${type}`);
    await checkAgainstDequantGolden(backend, dir, path, DEQUANT_TOL, `qwen2.5-0.5b L2 GGUF ${type}`);
  });
});

// The Llama-3.2-1B shape (4 of its 16 layers) as a Q8_0 GGUF: llama.cpp's converter adds
// rope_freqs (Llama 3.1 rope scaling), which the GGUF loader applies in place of the config's.
describe('llama-3.2-1b shape (4 layers) as a Q8_0 GGUF against its PyTorch golden', () => {
  const backend = TEST_BACKENDS[0]!;
  it(`GGUF Q8_0 of the same weights on ${backend}`, async () => {
    const dir = checkpoint('llama-3.2-1b', 4);
    const path = await ggufOf(dir, 'Q8_0');
    const g = await openGguf(await fileSource(path));
    expect(g.tensors.get('blk.0.attn_q.weight')!.type).toBe('Q8_0');
    expect(g.tensors.has('rope_freqs.weight')).toBe(true);
    await checkAgainstGolden(backend, dir, () => openModelPath(path), 5e-2, 'llama-3.2-1b L4 GGUF Q8_0');
    await checkAgainstFileWeights(backend, dir, path, FILE_WEIGHTS_TOL, 'llama-3.2-1b L4 GGUF Q8_0');
  });
});

// Every GGUF weight type with a kernel, at the Llama-3.2-1B and Gemma-2-2B shapes (1 layer each;
// every other dimension exact, the 128k / 256k vocabularies included), against PyTorch on the
// file's own weights. Every matrix of these shapes is whole 256-element super-blocks, so no
// K-quant falls back. Uniform files (every matrix and the tied embedding, which is also the LM
// head, in one type), and mixed ones as llama.cpp's _M mixtures are: a type per tensor, which
// puts all five kernel types through one load (a GGUF of the 256k x 2304 embedding costs a
// minute of CI per file, and the JS K-quant writer does 2-4 M elements/s). As in a real Q4_K_M,
// the matrices Weft fuses (q/k/v, gate/up) differ in type within a mix: each part runs from its
// own blocks into its columns of the fused output (LinearWeight.parts). The files
// (bench/memory.ts REALSHAPE_GGUF) are also the memory bench's GGUF rows.
describe('real shapes (1 layer) as GGUF of every kernel type against PyTorch on the dequantized weights', () => {
  const backend = TEST_BACKENDS[0]!;
  it.each(REALSHAPE_GGUF.map(([model, type, mix]) => [model, mix ? `${mix.tag} (${Object.values(mix.layers).join(' ')}; embedding ${mix.embed})` : type, type, mix] as const))(`%s %s on ${backend}`, async (model, _label, type, mix) => {
    const dir = checkpoint(model, 1);
    const path = await ggufOf(dir, type, mix ?? undefined);
    const g = await openGguf(await fileSource(path));
    for (const l of MIX_LAYERS) {
      const name = hfToGgufName(`model.layers.0.${l}.weight`)!;
      expect(g.tensors.get(name)!.type, name).toBe(mix?.layers[l] ?? type);
    }
    expect(g.tensors.get('token_embd.weight')!.type).toBe(mix?.embed ?? type);
    let fileBytes = 0;
    for (const t of g.tensors.values()) fileBytes += t.end - t.begin;
    await checkAgainstDequantGolden(backend, dir, path, DEQUANT_TOL, `${model} L1 GGUF ${mix ? mix.tag : type}`, (d) => {
      // No weight expanded at load: every type keeps the file's blocks (Q8_0 / Q4_0 quants and
      // f16 scales side by side; only buffer alignment and word padding are added).
      const ratio = d.loadStats.deviceWeightBytes / fileBytes;
      console.info(`${model} L1 GGUF ${mix ? mix.tag : type}: device ÷ file tensor bytes ${ratio.toFixed(4)}`);
      expect(ratio).toBeLessThan(1.01);
    });
  });
});

// The Qwen2.5-0.5B-shaped folder (all 24 layers) as users run it on this machine's SwiftShader:
// `weft generate` (the real bin/weft.js in a child process) and the server's OpenAI chat route
// (a reader on the same folder).
describe('qwen2.5-0.5b shape served: weft generate and the OpenAI chat route', () => {
  const backend = TEST_BACKENDS[0]!;
  const WEFT = fileURLToPath(new URL('../../bin/weft.js', import.meta.url));
  let service: TestService | undefined;
  afterAll(async () => {
    await service?.svc.close();
  });
  const weft = (args: string[]): Promise<{ code: number; stdout: string; stderr: string }> =>
    new Promise((resolve) => {
      execFile(process.execPath, [WEFT, ...args], { env: process.env, timeout: 600_000, maxBuffer: 1 << 24 }, (err, stdout, stderr) => {
        resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr });
      });
    });

  it('weft generate continues the golden prompt with the golden greedy tokens', async () => {
    const dir = checkpoint('qwen2.5-0.5b', 0);
    const g = JSON.parse(readFileSync(join(dir, 'golden.json'), 'utf8')) as Golden;
    const tok = await loadTokenizerFromSource(dirSource(dir));
    const prompt = tok.decode(g.prompt_ids);
    expect(tok.encode(prompt)).toEqual(g.prompt_ids); // the text is the golden's prompt
    const r = await weft(['generate', '--json', '--model', dir, '--backend', backend, '--max-new-tokens', String(g.greedy_ids.length), prompt]);
    expect(r.code, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout.trim().split('\n').pop()!) as { text: string; token_ids: number[]; usage: { promptTokens: number } };
    expect(out.usage.promptTokens).toBe(g.prompt_ids.length);
    expect(out.text).toBe(tok.decode(out.token_ids));
    // Free-running greedy: equal to the golden up to the first step whose top-1/top-2 gap is
    // within the logit tolerance (past it the two runs may take different paths).
    const golden = new Float32Array(readFileSync(join(dir, 'golden_logits.f32')).buffer.slice(0));
    for (let i = 0; i < g.greedy_ids.length && g.top2_gaps[i]! > 2 * TOL * absMax(golden); i++) expect(out.token_ids[i], `greedy step ${i}`).toBe(g.greedy_ids[i]);
  }, 600_000);

  it('the OpenAI chat route answers through the model\'s chat template', async () => {
    const dir = checkpoint('qwen2.5-0.5b', 0);
    const tok = await loadTokenizerFromSource(dirSource(dir));
    const messages = [{ role: 'user' as const, content: 'Name a colour.' }];
    const templated = tok.encode(tok.applyChatTemplate(messages, { addGenerationPrompt: true }));
    service = await startTestService({ model: dir, backend });
    const res = await service.apps.openai.request('/v1/chat/completions', post({ model: 'primary', messages, max_tokens: 2, temperature: 0 }));
    expect(res.status).toBe(200);
    const chat = (await res.json()) as { choices: { message: { role: string; content: string }; finish_reason: string }[]; usage: { prompt_tokens: number; completion_tokens: number } };
    expect(chat.usage.prompt_tokens).toBe(templated.length);
    expect(chat.usage.completion_tokens).toBeGreaterThan(0);
    expect(chat.choices[0]!.message.role).toBe('assistant');
    expect(typeof chat.choices[0]!.message.content).toBe('string');
  }, 600_000);
});

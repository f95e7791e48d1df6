/**
 * Weft's side of the GPU benchmark kit (scripts/gpu_bench.sh), bundled into the
 * kit archive as lib/gpu_kit.js. Two commands:
 *
 *   run --model DIR --out FILE.json [--name NAME] [--backend B] [--dtype f16]
 *       [--batches 1,16,64] [--new-tokens 64] [--prefill 512] [--ttft-prompt 32]
 *       [--budget-s 150] [--copy-mib 1024] [--seed 1234]
 *     loads the folder checkpoint through the engine API (createEngine, the same
 *     path as the library and the server's readers) and measures, after an
 *     untimed warm-up of every shape: aggregate decode tok/s with N concurrent
 *     requests for each batch size (steady window, gpu_kit_report.ts), prefill
 *     tok/s of a `--prefill`-token prompt (prompt tokens / time to its first
 *     token; median of up to 3), TTFT of a `--ttft-prompt`-token prompt (median of
 *     up to 5), and the adapter's buffer-to-buffer copy bandwidth. Greedy, EOS
 *     ignored, every request a distinct prompt (no prefix-cache hits). Tokens
 *     per request shrink to fit `--budget-s` (the whole run's, load included;
 *     from the warm-up's step time), never below what outlasts the prompts'
 *     admission. Writes EngineFigures as JSON.
 *   table FILE.json ... [--batches 1,16,64]
 *     prints the kit's table (Weft, PyTorch and roofline rows per model).
 *
 * Prompt ids are the formula promptIds() (gpu_kit_report.ts), which scripts/torch_bench.py
 * repeats, so both engines see the same tokens.
 */
import { closeSync, openSync, readdirSync, readFileSync, readSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { GpuContext } from '../core/gpu/context.ts';
import { createEngine, type WeftEngine } from '../server/library.ts';
import { prepareGpuEnv } from '../core/gpu/device.ts';
import { type EngineFigures, promptIds, renderTable, safetensorsEntries, steadyDecodeTokS, type TensorEntry, weightBytesPerToken } from './gpu_kit_report.ts';
import { median } from './stats.ts';

function log(msg: string): void {
  process.stderr.write(`gpu_kit: ${msg}\n`);
}

/** Tensors of every safetensors file of a model folder (headers only). */
function folderTensors(dir: string): TensorEntry[] {
  const out: TensorEntry[] = [];
  for (const f of readdirSync(dir).filter((n) => n.endsWith('.safetensors'))) {
    const fd = openSync(join(dir, f), 'r');
    try {
      const len8 = new Uint8Array(8);
      readSync(fd, len8, 0, 8, 0);
      const len = Number(new DataView(len8.buffer).getBigUint64(0, true));
      const head = new Uint8Array(8 + len);
      readSync(fd, head, 0, 8 + len, 0);
      out.push(...safetensorsEntries(head));
    } finally {
      closeSync(fd);
    }
  }
  return out;
}

/**
 * Device copy bandwidth: `reps` copies of a `bytes` buffer into another in one
 * submission, timed from submit to onSubmittedWorkDone after one untimed copy;
 * bytes/s counting each byte read and written.
 */
async function copyBandwidth(ctx: GpuContext, wantBytes: number): Promise<{ bytesPerS: number; note: string }> {
  const dev = ctx.device;
  const bytes = Math.min(wantBytes, Math.floor(dev.limits.maxBufferSize / 4) * 4);
  const usage = GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST;
  const a = dev.createBuffer({ size: bytes, usage });
  const b = dev.createBuffer({ size: bytes, usage });
  const run = async (reps: number): Promise<number> => {
    const enc = dev.createCommandEncoder();
    for (let i = 0; i < reps; i++) enc.copyBufferToBuffer(i % 2 ? b : a, 0, i % 2 ? a : b, 0, bytes);
    const t = performance.now();
    dev.queue.submit([enc.finish()]);
    await dev.queue.onSubmittedWorkDone();
    return performance.now() - t;
  };
  try {
    await run(1);
    // Grow the repetitions until one submission takes 100 ms or more (or 64 copies).
    let reps = 2;
    let ms = await run(reps);
    while (ms < 100 && reps < 64) {
      reps *= 4;
      ms = await run(reps);
    }
    ctx.gpu.check();
    return { bytesPerS: (2 * bytes * reps) / (ms / 1000), note: `WebGPU copyBufferToBuffer ${Math.round(bytes / 2 ** 20)} MiB x ${reps}` };
  } finally {
    a.destroy();
    b.destroy();
  }
}

/** Token arrival times of one greedy request (ms, performance.now()), and the time it was issued. */
async function timedRequest(engine: WeftEngine, prompt: number[], maxNewTokens: number): Promise<{ issued: number; tokens: number[] }> {
  const issued = performance.now();
  const tokens: number[] = [];
  for await (const ev of engine.generate({ prompt, maxNewTokens, ignoreEos: true, sampling: { temperature: 0 } })) {
    if (ev.type === 'token') tokens.push(performance.now());
  }
  return { issued, tokens };
}

async function run(argv: string[]): Promise<void> {
  const { values: v } = parseArgs({
    args: argv,
    options: {
      model: { type: 'string' },
      name: { type: 'string' },
      out: { type: 'string' },
      backend: { type: 'string', default: 'auto' },
      dtype: { type: 'string', default: 'f16' },
      batches: { type: 'string', default: '1,16,64' },
      'new-tokens': { type: 'string', default: '64' },
      prefill: { type: 'string', default: '512' },
      'ttft-prompt': { type: 'string', default: '32' },
      'budget-s': { type: 'string', default: '150' },
      'copy-mib': { type: 'string', default: '1024' },
      seed: { type: 'string', default: '1234' },
    },
  });
  if (!v.model || !v.out) throw new Error('run needs --model DIR and --out FILE.json');
  const batches = v.batches!.split(',').map(Number);
  const newTokens = Number(v['new-tokens']);
  const prefillTokens = Number(v.prefill);
  const ttftTokens = Number(v['ttft-prompt']);
  const seed = Number(v.seed);
  const deadline = performance.now() + Number(v['budget-s']) * 1000;
  const cfg = JSON.parse(readFileSync(join(v.model, 'config.json'), 'utf8')) as { vocab_size: number };
  const vocab = cfg.vocab_size;
  const bytesPerParam = v.dtype === 'f32' ? 4 : 2;
  const weightBytes = weightBytesPerToken(folderTensors(v.model), bytesPerParam);

  prepareGpuEnv();
  const probe = await GpuContext.create({ backend: v.backend! });
  const info = probe.gpu.info;
  const device = `${info.name} (Dawn ${info.backend}${info.isCpu ? ', CPU emulation' : ''}; features: ${info.features.filter((f) => /f16|subgroups|timestamp/.test(f)).join(', ') || 'none of f16/subgroups/timestamps'})`;
  log(`adapter: ${device}`);
  const copy = await copyBandwidth(probe, Number(v['copy-mib']) * 2 ** 20);
  log(`copy bandwidth ${(copy.bytesPerS / 1e9).toFixed(1)} GB/s (${copy.note})`);
  probe.destroy();

  const maxBatch = Math.max(...batches);
  const maxContext = Math.max(prefillTokens, ttftTokens + newTokens) + 16;
  const t0 = performance.now();
  const engine = await createEngine({ model: v.model, gpuBackend: v.backend!, dtype: v.dtype as 'f16', maxSeqs: maxBatch, maxContext });
  log(`loaded ${v.model} as ${v.dtype} in ${((performance.now() - t0) / 1000).toFixed(1)} s on ${engine.info().device}`);
  let k = 0; // distinct prompt per request across the whole run
  const batchOf = (n: number, promptLen: number, tokens: number): Promise<{ issued: number; tokens: number[] }[]> =>
    Promise.all(Array.from({ length: n }, () => timedRequest(engine, promptIds(promptLen, k++, vocab, seed), tokens)));

  // Warm-up: every batch size (each may compile its own kernel variants) and the long prompt.
  const stepMs = new Map<number, number>();
  for (const n of batches) {
    const res = await batchOf(n, ttftTokens, 4);
    const r0 = res[0]!.tokens;
    stepMs.set(n, r0.length > 1 ? (r0[r0.length - 1]! - r0[0]!) / (r0.length - 1) : 1000);
    log(`warm-up b${n}: ~${stepMs.get(n)!.toFixed(1)} ms per decode step`);
  }
  const warmPrefill = await batchOf(1, prefillTokens, 1);
  const prefillEstMs = (warmPrefill[0]!.tokens[0] ?? performance.now()) - warmPrefill[0]!.issued;
  log(`warm-up prefill ${prefillTokens}: ${prefillEstMs.toFixed(0)} ms`);

  // Budget: prefill and TTFT runs first claim their share, the rest goes to decode levels.
  const left = (): number => deadline - performance.now();
  const decode: Record<string, number> = {};
  const notes: string[] = [];
  const levels = [...batches];
  for (let i = 0; i < levels.length; i++) {
    const n = levels[i]!;
    const share = (left() - 3 * prefillEstMs - 5 * 2000) / (levels.length - i);
    // N prompts enter over several steps (256 prompt tokens per step by default): every
    // request must outlast that stagger for the steady window to hold N decoding sequences.
    const floor = 8 + 2 * Math.ceil((n * ttftTokens) / 256);
    const tokens = Math.max(floor, Math.min(newTokens, Math.floor(share / stepMs.get(n)!)));
    if (tokens < newTokens) notes.push(`b${n}: ${tokens} tokens per request (budget)`);
    const res = await batchOf(n, ttftTokens, tokens);
    decode[String(n)] = steadyDecodeTokS(res.map((r) => r.tokens));
    log(`decode b${n}: ${decode[String(n)]!.toFixed(1)} tok/s aggregate (${tokens} tokens per request)`);
  }
  const prefillMs: number[] = [];
  for (let i = 0; i < 3 && (i === 0 || left() > prefillEstMs * 2); i++) {
    const [r] = await batchOf(1, prefillTokens, 1);
    prefillMs.push(r!.tokens[0]! - r!.issued);
  }
  const ttft: number[] = [];
  for (let i = 0; i < 5 && (i === 0 || left() > 0); i++) {
    const [r] = await batchOf(1, ttftTokens, 1);
    ttft.push(r!.tokens[0]! - r!.issued);
  }
  const figures: EngineFigures = {
    engine: 'weft',
    model: v.name ?? v.model,
    device,
    dtype: v.dtype!,
    decode,
    prefillTokens,
    prefillTokS: prefillTokens / (median(prefillMs) / 1000),
    ttftPromptTokens: ttftTokens,
    ttftMs: median(ttft),
    copyBytesPerS: copy.bytesPerS,
    copyNote: copy.note,
    weightBytesPerToken: weightBytes,
    notes,
  };
  log(`prefill ${prefillTokens}: ${figures.prefillTokS.toFixed(1)} tok/s; TTFT ${ttftTokens}: ${figures.ttftMs.toFixed(1)} ms`);
  writeFileSync(v.out, `${JSON.stringify(figures, null, 1)}\n`);
  await engine.unload();
}

function table(argv: string[]): void {
  const { values, positionals } = parseArgs({ args: argv, allowPositionals: true, options: { batches: { type: 'string', default: '1,16,64' } } });
  const figures = positionals.map((f) => JSON.parse(readFileSync(f, 'utf8')) as EngineFigures);
  process.stdout.write(`${renderTable(figures, values.batches!.split(',').map(Number))}\n`);
}

const [cmd, ...rest] = process.argv.slice(2);
if (cmd === 'run') {
  await run(rest);
  // Dawn may keep the event loop alive after the device is gone.
  setTimeout(() => process.exit(0), 100).unref();
} else if (cmd === 'table') table(rest);
else {
  process.stderr.write('usage: gpu_kit run --model DIR --out FILE.json [options] | gpu_kit table FILE.json ...\n');
  process.exitCode = 2;
}

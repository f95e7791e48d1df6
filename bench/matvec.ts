/**
 * Matrix-vector benchmark (the decode case): y[1, N] = x[1, K] · W[N, K]ᵀ with K = N = 2048,
 * for every weight dtype and kernel variant, against the same product in plain TypeScript
 * on the CPU (straightforward loops over the packed/quantized weights).
 * Reports ms per product (completion time over `iters` submissions after warm-up), GFLOP/s
 * (2·M·N·K / t) and effective GB/s (weight bytes incl. scales / t), plus process CPU ms per
 * product (all threads, so CPU emulators' worker threads count): on a busy machine wall time
 * swings with load, CPU time much less.
 * Run: `npx tsx bench/matvec.ts` (WEFT_BENCH_BACKENDS=swiftshader,opengles to pick backends).
 */
import { GpuContext } from '../core/gpu/context.ts';
import type { DType, Tensor } from '../core/gpu/tensor.ts';
import { matmul } from '../core/ops/matmul.ts';
import { encodeWeight, f16ToF32, uploadEncoded, type QuantBlocks } from '../core/ops/quant.ts';
import { VARIANTS, type Variant } from '../core/ops/variant.ts';

export interface Row {
  backend: string;
  dtype: DType;
  variant: Variant;
  /** Milliseconds per matrix-vector product on the GPU (completion time). */
  ms: number;
  gflops: number;
  /** Weight bytes read (quants + scales) per second, GB/s. */
  gbps: number;
  /** Process CPU milliseconds per product (all threads; NaN outside Node). */
  cpuMs: number;
  /** Milliseconds per product in plain TypeScript (wall, and CPU). */
  tsMs: number;
  tsCpuMs: number;
  tsGflops: number;
  /** GPU throughput / TypeScript throughput. */
  ratio: number;
}

export interface BenchOptions {
  backends?: string[];
  K?: number;
  N?: number;
  M?: number;
  iters?: number;
}

const DTYPES: DType[] = ['f32', 'f16', 'q8_0', 'q4_0'];

type Encoded = QuantBlocks | Uint32Array | Float32Array;

let halfTable: Float32Array | undefined;
/** f16 bits -> f32 lookup, the usual way to read halves in plain JS. */
function halves(): Float32Array {
  if (!halfTable) {
    halfTable = new Float32Array(65536);
    for (let h = 0; h < 65536; h++) halfTable[h] = f16ToF32(h);
  }
  return halfTable;
}

/** The TypeScript peer: y = x · Wᵀ straight from the encoded weight, one row of W at a time. */
function tsMatvec(dtype: DType, enc: Encoded, x: Float32Array, M: number, K: number, N: number, y: Float32Array): void {
  for (let m = 0; m < M; m++) {
    const xo = m * K;
    for (let n = 0; n < N; n++) {
      let s = 0;
      if (dtype === 'f32') {
        const w = enc as Float32Array;
        const o = n * K;
        for (let k = 0; k < K; k++) s += x[xo + k]! * w[o + k]!;
      } else if (dtype === 'f16') {
        const w = enc as Uint32Array;
        const t = halves();
        const o = n * (K >> 1);
        for (let i = 0; i < K >> 1; i++) {
          const v = w[o + i]!;
          s += x[xo + 2 * i]! * t[v & 0xffff]! + x[xo + 2 * i + 1]! * t[v >>> 16]!;
        }
      } else {
        const { data, scales } = enc as QuantBlocks;
        const nb = K >> 5;
        if (dtype === 'q8_0') {
          const q = new Int8Array(data.buffer, data.byteOffset, data.byteLength);
          for (let b = 0; b < nb; b++) {
            let bs = 0;
            const o = (n * nb + b) * 32;
            for (let j = 0; j < 32; j++) bs += x[xo + b * 32 + j]! * q[o + j]!;
            s += bs * scales[n * nb + b]!;
          }
        } else {
          for (let b = 0; b < nb; b++) {
            let bs = 0;
            const o = (n * nb + b) * 16;
            const xb = xo + b * 32;
            for (let j = 0; j < 16; j++) {
              const v = data[o + j]!;
              bs += x[xb + j]! * ((v & 15) - 8) + x[xb + j + 16]! * ((v >> 4) - 8);
            }
            s += bs * scales[n * nb + b]!;
          }
        }
      }
      y[m * N + n] = s;
    }
  }
}

function weightBytes(enc: Encoded): number {
  return 'scales' in enc ? enc.data.byteLength + enc.scales.byteLength : enc.byteLength;
}

/** Process CPU time in ms (user + system, all threads); NaN where unavailable. */
function cpuNow(): number {
  const u = (globalThis as { process?: { cpuUsage?: () => { user: number; system: number } } }).process?.cpuUsage?.();
  return u ? (u.user + u.system) / 1000 : NaN;
}

interface Timing {
  ms: number;
  cpuMs: number;
}

async function timeGpu(ctx: GpuContext, x: Tensor, w: Tensor, y: Tensor, variant: Variant, iters: number): Promise<Timing> {
  const run = async (n: number): Promise<void> => {
    for (let i = 0; i < n; i++) {
      const rec = ctx.recorder();
      await matmul(rec, x, { w }, y, { variant });
      rec.submit();
    }
    await ctx.device.queue.onSubmittedWorkDone();
  };
  await run(3); // warm-up (pipeline compile, first-touch)
  const c0 = cpuNow();
  const t0 = performance.now();
  await run(iters);
  return { ms: (performance.now() - t0) / iters, cpuMs: (cpuNow() - c0) / iters };
}

function timeTs(fn: () => void, minMs = 300): Timing {
  fn();
  let n = 0;
  const c0 = cpuNow();
  const t0 = performance.now();
  do {
    fn();
    n++;
  } while (performance.now() - t0 < minMs);
  return { ms: (performance.now() - t0) / n, cpuMs: (cpuNow() - c0) / n };
}

export async function benchMatvec(opts: BenchOptions = {}): Promise<Row[]> {
  const env = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env;
  const backends = opts.backends ?? (env?.WEFT_BENCH_BACKENDS ?? 'auto').split(',').map((s) => s.trim());
  const { K = 2048, N = 2048, M = 1, iters = 20 } = opts;
  const rows: Row[] = [];
  let seed = 12345;
  const rand = (): number => ((seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 2 ** 32) * 2 - 1;
  const x = Float32Array.from({ length: M * K }, rand);
  const wf = Float32Array.from({ length: N * K }, () => rand() * 0.05);
  const encoded = new Map(DTYPES.map((d) => [d, encodeWeight(wf, N, K, d)] as const));
  const yTs = new Float32Array(M * N);
  const flops = 2 * M * N * K;
  for (const backend of backends) {
    const ctx = await GpuContext.create({ backend });
    const tx = ctx.tensor(x, [M, K], 'f32');
    const ty = ctx.scratch([M, N]);
    for (const dtype of DTYPES) {
      const enc = encoded.get(dtype)!;
      const tw = uploadEncoded(ctx, enc, N, K, dtype);
      // The TS peer is timed next to its GPU rows so both see similar machine load.
      const t = timeTs(() => tsMatvec(dtype, enc, x, M, K, N, yTs));
      for (const variant of VARIANTS) {
        const { ms, cpuMs } = await timeGpu(ctx, tx, tw, ty, variant, iters);
        const got = new Float32Array(await ctx.read(ty));
        let err = 0;
        for (let i = 0; i < yTs.length; i++) err = Math.max(err, Math.abs(got[i]! - yTs[i]!));
        if (!(err < 1e-3)) console.warn(`matvec ${dtype}/${variant} on ${backend}: max |gpu - ts| = ${err}`);
        rows.push({
          backend: ctx.gpu.info.backend,
          dtype,
          variant,
          ms,
          gflops: flops / ms / 1e6,
          gbps: weightBytes(enc) / ms / 1e6,
          cpuMs,
          tsMs: t.ms,
          tsCpuMs: t.cpuMs,
          tsGflops: flops / t.ms / 1e6,
          ratio: t.ms / ms,
        });
      }
      tw.buffer.destroy();
      tw.scales?.destroy();
    }
    ctx.free(ty);
    tx.buffer.destroy();
    ctx.destroy();
  }
  return rows;
}

export function markdownTable(rows: Row[]): string {
  const f = (v: number, d = 2): string => v.toFixed(d);
  const head =
    '| backend | dtype | variant | GPU ms | GPU GFLOP/s | GPU GB/s | GPU cpu-ms | TS ms | TS GFLOP/s | TS cpu-ms | GPU/TS |\n' +
    '|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|';
  const body = rows.map(
    (r) =>
      `| ${r.backend} | ${r.dtype} | ${r.variant} | ${f(r.ms)} | ${f(r.gflops)} | ${f(r.gbps)} | ${f(r.cpuMs, 1)} | ` +
      `${f(r.tsMs)} | ${f(r.tsGflops)} | ${f(r.tsCpuMs, 1)} | ${f(r.ratio)}× |`,
  );
  return [head, ...body].join('\n');
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const rows = await benchMatvec();
  console.log(`matvec M=1, K=N=2048; GPU/TS = throughput ratio (wall time)\n`);
  console.log(markdownTable(rows));
  process.exit(0);
}

/**
 * Test GPU contexts, one per backend per test process, and numeric checks.
 *
 * WEFT_TEST_BACKENDS (comma list, default "swiftshader,opengles") selects the
 * Dawn backends the numerics run on; CI runs both.
 */
import { GpuContext } from '../../core/gpu/context.ts';
import type { Recorder } from '../../core/gpu/recorder.ts';
import { VARIANTS, type Variant } from '../../core/ops/variant.ts';

export const TEST_BACKENDS = (process.env.WEFT_TEST_BACKENDS ?? 'swiftshader,opengles')
  .split(',')
  .map((s) => s.trim())
  .filter(Boolean);

const contexts = new Map<string, Promise<GpuContext>>();

export function gpuFor(backend: string): Promise<GpuContext> {
  let c = contexts.get(backend);
  if (!c) contexts.set(backend, (c = GpuContext.create({ backend })));
  return c;
}

/** Deterministic PRNG (mulberry32) so failures reproduce. */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** n standard-normal samples (Box–Muller), times `scale`. */
export function randn(n: number, seed: number, scale = 1): Float32Array {
  const r = rng(seed);
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    const u = Math.max(r(), 1e-12);
    out[i] = Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * r()) * scale;
  }
  return out;
}

export interface Tolerance {
  atol: number;
  rtol: number;
  /** Normalised mean squared error limit: sum((a-e)^2) / sum(e^2). */
  nmse: number;
}

export const TOL_F32: Tolerance = { atol: 1e-4, rtol: 1e-4, nmse: 1e-9 };
export const TOL_F16: Tolerance = { atol: 2e-3, rtol: 2e-3, nmse: 1e-6 };

/** Throws with the worst element when `actual` is not close to `expected`. */
export function assertClose(actual: ArrayLike<number>, expected: ArrayLike<number>, tol: Tolerance, what = 'values'): void {
  if (actual.length !== expected.length) throw new Error(`${what}: length ${actual.length} != ${expected.length}`);
  let num = 0;
  let den = 0;
  let worst = -1;
  let worstExcess = 0;
  for (let i = 0; i < expected.length; i++) {
    const a = actual[i]!;
    const e = expected[i]!;
    if (!Number.isFinite(a) && a !== e) throw new Error(`${what}[${i}] = ${a}, expected ${e}`);
    num += (a - e) ** 2;
    den += e * e;
    const excess = Math.abs(a - e) - (tol.atol + tol.rtol * Math.abs(e));
    if (excess > worstExcess) {
      worstExcess = excess;
      worst = i;
    }
  }
  const nmse = den > 0 ? num / den : num;
  if (worst >= 0) throw new Error(`${what}[${worst}] = ${actual[worst]}, expected ${expected[worst]} (nmse ${nmse.toExponential(2)})`);
  if (nmse > tol.nmse) throw new Error(`${what}: nmse ${nmse.toExponential(2)} > ${tol.nmse}`);
}

/** [backend, variant] pairs for describe.each: every kernel variant on every test backend. */
export const BACKEND_VARIANTS: [string, Variant][] = TEST_BACKENDS.flatMap((b) => VARIANTS.map((v) => [b, v] as [string, Variant]));

/** Counts the recorder's copyToTexture calls from now on (x staged into a texture for prefill-sized matmuls). */
export function countTextureCopies(rec: Recorder): () => number {
  let copies = 0;
  const copy = rec.copyToTexture.bind(rec);
  rec.copyToTexture = (...args) => {
    copies++;
    copy(...args);
  };
  return () => copies;
}

/**
 * Browser entry for test/browser/smoke.test.ts, bundled by esbuild: runs the
 * portable core in a page on `navigator.gpu` — rms_norm in every kernel
 * variant on the inputs the test sends — and compares with the CPU reference
 * in the page. Returns plain data (no throw) so failures show their cause.
 */
import { GpuContext } from '../../core/gpu/context.ts';
import { rmsNorm } from '../../core/ops/rms_norm.ts';
import { rmsNormRef } from '../../core/ops/rms_norm.ref.ts';
import { VARIANTS } from '../../core/ops/variant.ts';

export interface SmokeInput {
  rows: number;
  dim: number;
  x: number[]; // [rows, dim]
  w: number[]; // [dim]
  eps: number;
  atol: number;
  rtol: number;
}

export interface SmokeOutput {
  ok: boolean;
  error?: string;
  /** Largest |gpu - reference| over all variants. */
  maxErr: number;
  adapter: string;
  backend: string;
  featureLevel: string;
  features: string[];
  variants: { variant: string; maxErr: number; ok: boolean }[];
}

export async function run(input: SmokeInput): Promise<SmokeOutput> {
  const out: SmokeOutput = { ok: false, maxErr: NaN, adapter: '', backend: '', featureLevel: '', features: [], variants: [] };
  try {
    const ctx = await GpuContext.create({ backend: 'navigator' });
    Object.assign(out, { adapter: ctx.gpu.info.name, backend: ctx.gpu.info.backend, featureLevel: ctx.gpu.info.featureLevel, features: ctx.gpu.info.features });
    const { rows, dim, eps } = input;
    const x = new Float32Array(input.x);
    const w = new Float32Array(input.w);
    const want = rmsNormRef(x, w, dim, eps);
    for (const variant of VARIANTS) {
      const [tx, tw, ty] = [ctx.tensor(x, [rows, dim], 'f32'), ctx.tensor(w, [dim], 'f32'), ctx.scratch([rows, dim])];
      const rec = ctx.recorder();
      await rmsNorm(rec, tx, tw, ty, { eps, variant });
      const pending = rec.readback(ty);
      rec.submit();
      const got = new Float32Array(await pending);
      let maxErr = 0;
      let ok = got.length === want.length;
      for (let i = 0; i < want.length; i++) {
        const err = Math.abs(got[i]! - want[i]!);
        maxErr = Math.max(maxErr, err);
        if (!(err <= input.atol + input.rtol * Math.abs(want[i]!))) ok = false; // NaN fails too
      }
      out.variants.push({ variant, maxErr, ok });
      ctx.free(ty);
      tx.buffer.destroy();
      tw.buffer.destroy();
    }
    ctx.destroy();
    out.maxErr = Math.max(...out.variants.map((v) => v.maxErr));
    out.ok = out.variants.length === VARIANTS.length && out.variants.every((v) => v.ok);
  } catch (e) {
    out.error = `${(e as Error).name}: ${(e as Error).message}`;
  }
  return out;
}

/**
 * Deno smoke test: the portable core under Deno, unchanged. Opens a device
 * through core/gpu/device.ts as an app would (`createGpu()` -> navigator.gpu,
 * on CPU-only hosts wgpu over Mesa lavapipe), runs rms_norm in both kernel
 * variants on a random shape and compares with the CPU reference.
 *
 * If navigator.gpu has no adapter (or WEFT_DENO_GPU=dawn), Dawn from
 * npm:webgpu (SwiftShader) is installed as navigator.gpu first: device.ts only
 * loads Dawn under Node, so this stands in for a Dawn backend option on Deno.
 *
 * Usage: deno run -A test/runtime/deno/smoke.ts [seed]   (or deno task test:deno)
 * Prints one line `WEFT_RESULT {json}`; exits 1 unless every check passed.
 */
import { createGpu } from '../../../core/gpu/device.ts';
import { GpuContext } from '../../../core/gpu/context.ts';
import { NoAdapterError } from '../../../core/errors.ts';
import { rmsNorm } from '../../../core/ops/rms_norm.ts';
import { rmsNormRef } from '../../../core/ops/rms_norm.ref.ts';
import { VARIANTS } from '../../../core/ops/variant.ts';
import { assertClose, randn, rng, TOL_F32 } from '../../helpers/gpu.ts';

interface DenoLike {
  args: string[];
  version: { deno: string };
  env: { get(k: string): string | undefined; set(k: string, v: string): void };
  exit(code: number): never;
}
const Deno = (globalThis as unknown as { Deno: DenoLike }).Deno;

const SWIFTSHADER_ICD = '/usr/lib/chromium/vk_swiftshader_icd.json';

/** Makes Dawn's GPU the navigator.gpu that createGpu({backend: 'navigator'}) finds. */
async function installDawn(): Promise<void> {
  const { create, globals } = await import('webgpu');
  Object.assign(globalThis, globals);
  if (!Deno.env.get('VK_ICD_FILENAMES')) Deno.env.set('VK_ICD_FILENAMES', SWIFTSHADER_ICD);
  Object.defineProperty(navigator, 'gpu', { value: create(['backend=vulkan']), configurable: true });
}

async function open(): Promise<{ ctx: GpuContext; via: 'navigator' | 'dawn' }> {
  if (Deno.env.get('WEFT_DENO_GPU') !== 'dawn') {
    try {
      return { ctx: new GpuContext(await createGpu()), via: 'navigator' };
    } catch (e) {
      if (!(e instanceof NoAdapterError)) throw e;
      console.error(`navigator.gpu: ${(e as Error).message}; falling back to Dawn (npm:webgpu)`);
    }
  }
  await installDawn();
  return { ctx: new GpuContext(await createGpu({ backend: 'navigator' })), via: 'dawn' };
}

async function main(): Promise<Record<string, unknown>> {
  const seed = Number(Deno.args[0] ?? Date.now() % 1e9);
  const r = rng(seed);
  const rows = 1 + Math.floor(r() * 24);
  const dim = 1 + Math.floor(r() * 700);
  const t0 = performance.now();
  const { ctx, via } = await open();
  const x = randn(rows * dim, seed + 1);
  const w = randn(dim, seed + 2);
  const variants: { variant: string; maxErr: number }[] = [];
  for (const variant of VARIANTS) {
    const tx = ctx.tensor(x, [rows, dim], 'f32');
    const tw = ctx.tensor(w, [dim], 'f32');
    const ty = ctx.scratch([rows, dim]);
    const rec = ctx.recorder();
    await rmsNorm(rec, tx, tw, ty, { eps: 1e-5, variant });
    const out = rec.readback(ty);
    rec.submit();
    const got = new Float32Array(await out);
    const want = rmsNormRef(x, w, dim, 1e-5);
    assertClose(got, want, TOL_F32, `rms_norm[${variant}] rows=${rows} dim=${dim} seed=${seed}`);
    variants.push({ variant, maxErr: got.reduce((m, v, i) => Math.max(m, Math.abs(v - want[i]!)), 0) });
  }
  const info = ctx.gpu.info;
  ctx.destroy();
  return {
    ok: true,
    deno: Deno.version.deno,
    via,
    adapter: info.name,
    backend: info.backend,
    featureLevel: info.featureLevel,
    f16: info.features.includes('shader-f16'),
    seed,
    rows,
    dim,
    variants,
    ms: Math.round(performance.now() - t0),
  };
}

let code = 0;
let result: Record<string, unknown>;
try {
  result = await main();
} catch (e) {
  code = 1;
  result = { ok: false, error: `${(e as Error).name}: ${(e as Error).message}` };
}
console.log(`WEFT_RESULT ${JSON.stringify(result)}`);
Deno.exit(code);

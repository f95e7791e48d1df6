/**
 * Contract of the device layer (core/gpu): backend names, adapter info and
 * limits, typed errors instead of silent garbage (invalid work rejects the
 * readback, bad WGSL rejects the pipeline), the WGSL preprocessor and uniform
 * layouts. GPU parts run on Dawn's SwiftShader (Vulkan) and OpenGL ES
 * backends — the two CPU-emulated backends every CI machine has.
 */
import { describe, expect, it } from 'vitest';
import { BACKENDS, createGpu } from '../../core/gpu/device.ts';
import { uniformLayout } from '../../core/gpu/uniforms.ts';
import { evalCondition, preprocess } from '../../core/gpu/wgsl.ts';
import { GpuValidationError, NoAdapterError, ShaderCompileError, UnknownBackendError } from '../../core/errors.ts';
import { rmsNorm } from '../../core/ops/rms_norm.ts';
import { rmsNormRef } from '../../core/ops/rms_norm.ref.ts';
import { assertClose, gpuFor, randn, TOL_F32 } from '../helpers/gpu.ts';
import { gpuOptionsFromEnv } from '../../server/gpu_settings.ts';

const DAWN_BACKENDS = ['swiftshader', 'opengles'] as const;

describe('backend names', () => {
  it('an unknown name throws UnknownBackendError listing the valid ones', async () => {
    const err = await createGpu({ backend: 'metal-please' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(UnknownBackendError);
    const e = err as UnknownBackendError;
    expect(e.code).toBe('gpu_unknown_backend');
    expect(e.details?.valid).toEqual([...BACKENDS]);
    for (const b of BACKENDS) expect(e.message).toContain(b);
  });

  it('WEFT_GPU_BACKEND (read by the server) is validated the same way', async () => {
    await expect(createGpu(gpuOptionsFromEnv(undefined, { WEFT_GPU_BACKEND: 'cuda' }))).rejects.toBeInstanceOf(UnknownBackendError);
  });

  it('navigator on Node (no navigator.gpu) is NoAdapterError naming what was tried', async () => {
    const err = await createGpu({ backend: 'navigator' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(NoAdapterError);
    expect((err as NoAdapterError).details?.tried).toEqual(['navigator']);
  });
});

describe.each(DAWN_BACKENDS)('device on %s', (backend) => {
  it('reports name, backend, feature level, features and isCpu', async () => {
    const { gpu } = await gpuFor(backend);
    expect(gpu.info.backend).toBe(backend);
    expect(gpu.info.name).toMatch(backend === 'swiftshader' ? /swiftshader/i : /opengl es/i);
    expect(gpu.info.isCpu).toBe(true);
    expect(gpu.info.featureLevel).toBe(backend === 'swiftshader' ? 'core' : 'compatibility');
    expect(gpu.info.features).toEqual([...gpu.info.features].sort());
    // caps mirror the features that were requested on the device.
    expect(gpu.caps.f16).toBe(gpu.info.features.includes('shader-f16'));
    expect(gpu.caps.subgroups).toBe(gpu.info.features.includes('subgroups'));
    if (backend === 'swiftshader') expect(gpu.caps.subgroups).toBe(true);
    if (backend === 'opengles') expect(gpu.caps.f16).toBe(false);
  });

  it("opens the device with the adapter's full limits", async () => {
    const { gpu } = await gpuFor(backend);
    const adapter = await gpu.instance.requestAdapter(gpu.info.featureLevel === 'compatibility' ? { featureLevel: 'compatibility' } : {});
    expect(adapter).toBeTruthy();
    const want = adapter!.limits as unknown as Record<string, number>;
    const got = gpu.limits as unknown as Record<string, number>;
    expect(got.maxComputeInvocationsPerWorkgroup).toBe(want.maxComputeInvocationsPerWorkgroup);
    for (const key in want) if (typeof want[key] === 'number') expect([key, got[key]]).toEqual([key, want[key]]);
    // Compatibility mode's default would be 128; the adapter's real limit is in force.
    expect(got.maxComputeInvocationsPerWorkgroup).toBeGreaterThanOrEqual(256);
  });

  it('a shared-memory kernel with 256-thread workgroups runs (limits really apply)', async () => {
    const ctx = await gpuFor(backend);
    const [rows, dim] = [3, 300];
    const x = randn(rows * dim, 11);
    const w = randn(dim, 12);
    const layout = uniformLayout([['rows', 'u32'], ['dim', 'u32'], ['eps', 'f32']] as const);
    const kernel = await ctx.pipelines.get({ shader: 'rms_norm', defines: { WG: 256, SHARED: true, ADD_ONE: false }, layout });
    const [tx, tw, ty] = [ctx.tensor(x, [rows, dim], 'f32'), ctx.tensor(w, [dim], 'f32'), ctx.scratch([rows, dim])];
    const rec = ctx.recorder();
    rec.dispatch(kernel, { rows, dim, eps: 1e-5 }, [tx, tw, ty], [rows]);
    const out = rec.readback(ty);
    rec.submit();
    assertClose(new Float32Array(await out), rmsNormRef(x, w, dim, 1e-5), TOL_F32);
  });

  it('invalid work rejects the readback with GpuValidationError, then the device recovers', async () => {
    const ctx = await gpuFor(backend);
    const x = ctx.tensor(new Float32Array([1, 2, 3, 4, 5, 6, 7, 8]), [2, 4], 'f32');
    const w = ctx.tensor(new Float32Array([1, 1, 1, 1]), [4], 'f32');

    // 1. Output aliasing an input: writable + read-only use of one buffer in a pass.
    let rec = ctx.recorder();
    await rmsNorm(rec, x, w, x, { eps: 1e-5 });
    let out = rec.readback(x);
    rec.submit();
    const e1 = await out.then(() => null, (e: unknown) => e);
    expect(e1).toBeInstanceOf(GpuValidationError);
    expect((e1 as GpuValidationError).code).toBe('gpu_validation');

    // 2. A binding whose buffer lacks STORAGE usage (bind group creation fails).
    const notStorage = ctx.device.createBuffer({ size: 32, usage: 0x01 | 0x08 }); // MAP_READ | COPY_DST
    rec = ctx.recorder();
    await rmsNorm(rec, x, w, { buffer: notStorage, offset: 0, shape: [2, 4], dtype: 'f32' }, { eps: 1e-5 });
    out = rec.readback(x);
    rec.submit();
    await expect(out).rejects.toBeInstanceOf(GpuValidationError);

    // The error was reported once: the next valid step returns data.
    const y = ctx.scratch([2, 4]);
    rec = ctx.recorder();
    await rmsNorm(rec, x, w, y, { eps: 1e-5 });
    out = rec.readback(y);
    rec.submit();
    const xs = new Float32Array([1, 2, 3, 4, 5, 6, 7, 8]);
    assertClose(new Float32Array(await out), rmsNormRef(xs, new Float32Array([1, 1, 1, 1]), 4, 1e-5), TOL_F32);
    ctx.free(y);
    notStorage.destroy();
    x.buffer.destroy();
    w.buffer.destroy();
  });

  it('bad WGSL rejects with ShaderCompileError, is not cached, and leaves no stale device error', async () => {
    const ctx = await gpuFor(backend);
    const layout = uniformLayout([['rows', 'u32'], ['dim', 'u32'], ['eps', 'f32']] as const);
    const before = ctx.pipelines.compiled;
    // `WG` is spliced into `const WG: u32 = {{WG}}u;` -> an unresolved identifier.
    const bad = { shader: 'rms_norm', defines: { WG: 'oops', SHARED: false, ADD_ONE: false }, layout };
    const err = await ctx.pipelines.get(bad).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ShaderCompileError);
    expect((err as ShaderCompileError).message).toMatch(/rms_norm.*\d+:\d+ .*oops/);
    // A failed compile is retried (not cached) and fails the same way.
    await expect(ctx.pipelines.get(bad)).rejects.toBeInstanceOf(ShaderCompileError);
    await expect(ctx.pipelines.get({ ...bad, shader: 'no_such_kernel' })).rejects.toThrow(/no such shader/);
    await expect(ctx.pipelines.get({ ...bad, defines: {} })).rejects.toThrow(/undefined placeholder \{\{WG\}\}/);
    expect(ctx.pipelines.compiled).toBe(before);

    // The device error that bad WGSL raises must not poison the next readback.
    const t = ctx.tensor(new Float32Array([3, 4]), [1, 2], 'f32');
    const y = ctx.scratch([1, 2]);
    const rec = ctx.recorder();
    await rmsNorm(rec, t, ctx.tensor(new Float32Array([1, 1]), [2], 'f32'), y, { eps: 0 });
    const out = rec.readback(y);
    rec.submit();
    assertClose(new Float32Array(await out), rmsNormRef(new Float32Array([3, 4]), new Float32Array([1, 1]), 2, 0), TOL_F32);
    ctx.free(y);
  });
});

describe('WGSL preprocessor', () => {
  const SRC = ['a', '#if A', 'b', '#if B', 'c', '#elif C == 2', 'd', '#else', 'e', '#endif', 'f', '#elif !D', 'g', '#else', 'h', '#endif', 'z'].join('\n');
  const run = (defs: Record<string, string | number | boolean>): string => preprocess(SRC, defs).split('\n').join('');

  it('handles nested #if/#elif/#else/#endif', () => {
    expect(run({ A: 1, B: 1 })).toBe('abcfz');
    expect(run({ A: 1, C: 2 })).toBe('abdfz');
    expect(run({ A: true, C: '3' })).toBe('abefz');
    expect(run({ A: 0 })).toBe('agz');
    expect(run({ A: false, D: 1 })).toBe('ahz');
    // An inactive outer branch hides every inner branch, even #else.
    expect(run({ A: '0', D: 'true', B: 1 })).toBe('ahz');
  });

  it('evaluates conditions: ==, !=, !, && binds tighter than ||', () => {
    const d = { X: 1, Y: 0, T: 'f16' };
    expect(evalCondition('T == f16', d)).toBe(true);
    expect(evalCondition('T != f16', d)).toBe(false);
    expect(evalCondition('!Y && X', d)).toBe(true);
    expect(evalCondition('Y && X || X', d)).toBe(true);
    expect(evalCondition('Y || X && Y', d)).toBe(false);
    expect(() => evalCondition('X > 1', d)).toThrow(/bad condition/);
  });

  it('substitutes {{NAME}} placeholders in active lines only', () => {
    expect(preprocess('var<workgroup> t: array<{{T}}, {{WG}}>;', { T: 'f32', WG: 64 })).toBe('var<workgroup> t: array<f32, 64>;');
    expect(preprocess('#if OFF\n{{MISSING}}\n#endif\nok', {})).toBe('ok');
    expect(() => preprocess('x = {{MISSING}};', {})).toThrow(/undefined placeholder \{\{MISSING\}\}/);
  });

  it('inserts #include NAME preprocessed with the same defines, only in active branches', () => {
    const files: Record<string, string> = { _part: '#if A\na{{N}}\n#else\nnot-a\n#endif\n#include _inner', _inner: 'inner{{N}}', _loop: '#include _loop' };
    const inc = (n: string): string | undefined => files[n];
    expect(preprocess('x\n#include _part\ny', { A: 1, N: 7 }, inc)).toBe('x\na7\ninner7\ny');
    expect(preprocess('#if B\n#include _missing\n#endif\nok', {}, inc)).toBe('ok');
    expect(() => preprocess('#include _missing', {}, inc)).toThrow(/cannot #include _missing/);
    expect(() => preprocess('#include _part', { N: 1 })).toThrow(/cannot #include _part/);
    expect(() => preprocess('#include _loop', {}, inc)).toThrow(/nests more than 8 deep/);
    // An unbalanced #if inside an included file is that file's error, not the includer's.
    expect(() => preprocess('#if A\n#include _open\n#endif', { A: 1 }, (n) => (n === '_open' ? '#if A\nx' : undefined))).toThrow(/unterminated #if/);
  });

  it('rejects unbalanced and misordered blocks', () => {
    expect(() => preprocess('#if A\nx', { A: 1 })).toThrow(/unterminated #if/);
    expect(() => preprocess('x\n#endif', {})).toThrow(/#endif without #if/);
    expect(() => preprocess('#else\nx', {})).toThrow(/#else without #if/);
    expect(() => preprocess('#elif A\nx', {})).toThrow(/#elif without #if/);
    expect(() => preprocess('#if A\n#else\n#else\n#endif', {})).toThrow(/#else after #else/);
    expect(() => preprocess('#if A\n#else\n#elif B\n#endif', {})).toThrow(/#elif after #else/);
  });
});

describe('uniformLayout', () => {
  it('packs 4-byte fields in order into a 16-byte-rounded struct', () => {
    const l = uniformLayout([['rows', 'u32'], ['shift', 'i32'], ['eps', 'f32'], ['dim', 'u32'], ['k', 'u32']] as const);
    expect(l.byteSize).toBe(32);
    expect(uniformLayout([['a', 'u32']] as const).byteSize).toBe(16);
    expect(uniformLayout([['a', 'u32'], ['b', 'u32'], ['c', 'u32'], ['d', 'u32']] as const).byteSize).toBe(16);
    expect(l.wgsl).toBe('struct Params {\n  rows: u32,\n  shift: i32,\n  eps: f32,\n  dim: u32,\n  k: u32,\n};\n');

    const view = new DataView(new ArrayBuffer(64));
    l.write(view, 16, { rows: 7, shift: -3, eps: 1e-5, dim: 2 ** 32 - 1, k: -1 });
    expect(view.getUint32(16, true)).toBe(7);
    expect(view.getInt32(20, true)).toBe(-3);
    expect(view.getFloat32(24, true)).toBeCloseTo(1e-5, 10);
    expect(view.getUint32(28, true)).toBe(2 ** 32 - 1);
    expect(view.getUint32(32, true)).toBe(2 ** 32 - 1); // u32 wraps like WGSL bitcast
    expect(view.getUint32(0, true)).toBe(0); // nothing written before `at`
  });

  it('throws on a missing field', () => {
    const l = uniformLayout([['rows', 'u32'], ['dim', 'u32']] as const);
    expect(() => l.write(new DataView(new ArrayBuffer(16)), 0, { rows: 1 } as { rows: number; dim: number })).toThrow(/dim missing/);
  });
});

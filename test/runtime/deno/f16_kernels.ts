/**
 * The native-f16 kernel variants on an adapter that has `shader-f16`: Deno's own WebGPU
 * (wgpu over Mesa lavapipe here; Dawn's SwiftShader lacks the feature). Runs split-K attention
 * over an f16 KV cache read as native f16 (KV = f16n) and the gpu matmul kernels over native
 * f16 weights (WDT = f16n: gemv up to 16 rows, tile64, sgemv where `subgroups` exists too),
 * each against its CPU reference. Usage: deno run -A test/runtime/deno/f16_kernels.ts
 * Prints one line `WEFT_RESULT {json}`; exits 1 unless every check passed.
 */
import { createGpu } from '../../../core/gpu/device.ts';
import { GpuContext } from '../../../core/gpu/context.ts';
import { attentionRef } from '../../../core/ops/attention.ref.ts';
import { attentionPrefill } from '../../../core/ops/attention_prefill.ts';
import { attentionSplitK } from '../../../core/ops/attention_splitk.ts';
import { matmul } from '../../../core/ops/matmul.ts';
import { matmulRef } from '../../../core/ops/matmul.ref.ts';
import { dequantize, encodeWeight, uploadEncoded } from '../../../core/ops/quant.ts';
import type { MatmulKernels } from '../../../core/ops/kernel_select.ts';
import { assertClose, randn, TOL_F32 } from '../../helpers/gpu.ts';
import { splitSetup, toHalves, type SplitCase } from '../../helpers/splitk_cases.ts';

const Deno = (globalThis as unknown as { Deno: { exit(code: number): never } }).Deno;

const ATTENTION: SplitCase[] = [
  { name: 'decode of 3 lengths, hd 16, G 2', hd: 16, nH: 4, nKv: 2, bs: 4, seqs: [{ past: 300, n: 1 }, { past: 9, n: 1 }, { past: 130, n: 1 }], splitKeys: 64 },
  { name: 'hd 128, G 4, softcap, chunk + decode', hd: 128, nH: 8, nKv: 2, bs: 16, seqs: [{ past: 150, n: 1 }, { past: 0, n: 5 }], splitKeys: 64, softcap: 30, qkStd: 2 },
  { name: 'hd 64, window, default splits', hd: 64, nH: 2, nKv: 1, bs: 16, seqs: [{ past: 700, n: 1 }], window: 500 },
];
const MATMUL: { kernels: MatmulKernels; shape: [number, number, number] }[] = [
  { kernels: { decode: 'gemv', prefill: 'tile64' }, shape: [1, 96, 130] },
  { kernels: { decode: 'gemv', prefill: 'tile64' }, shape: [13, 33, 37] },
  { kernels: { decode: 'gemv', prefill: 'tile64' }, shape: [70, 68, 66] },
  { kernels: { decode: 'sgemv', prefill: 'tile64' }, shape: [5, 64, 40] },
];

async function main(): Promise<Record<string, unknown>> {
  const ctx = new GpuContext(await createGpu());
  if (!ctx.gpu.caps.f16) throw new Error(`adapter ${ctx.gpu.info.name} has no shader-f16`);
  const checks: string[] = [];
  for (const c of ATTENTION) {
    const s = splitSetup(c, c.hd * 7 + c.seqs.length);
    const hk = toHalves(s.kf);
    const hv = toHalves(s.vf);
    const o = {
      tokens: s.T,
      qHeads: c.nH,
      kvHeads: c.nKv,
      headDim: c.hd,
      rowStride: s.qkvCols,
      blockSize: c.bs,
      maxBlocksPerSeq: s.maxBlocks,
      maxPosition: Math.max(...s.positions),
      ...(c.softcap ? { softcap: c.softcap } : {}),
      ...(c.window ? { window: c.window } : {}),
    };
    const t = [ctx.tensor(s.qkv, [s.T, s.qkvCols], 'f32'), ctx.tensor(hk.words, [hk.words.length], 'u32'), ctx.tensor(hv.words, [hv.words.length], 'u32'), ctx.tensor(s.positions, [s.T], 'u32'), ctx.tensor(s.tokenSeq, [s.T], 'u32'), ctx.tensor(s.blockTables, [s.blockTables.length], 'u32')] as const;
    const out = ctx.scratch([s.T, c.nH * c.hd]);
    const rec = ctx.recorder();
    await attentionSplitK(rec, t[0], t[1], t[2], t[3], t[4], t[5], out, { ...o, kvDtype: 'f16', nativeF16: true, ...(c.splitKeys ? { splitKeys: c.splitKeys } : {}) });
    const back = rec.readback(out);
    rec.submit();
    const want = attentionRef(s.qkv, hk.values, hv.values, s.positions, s.tokenSeq, s.blockTables, o);
    assertClose(new Float32Array(await back), want, TOL_F32, `attention f16n ${c.name}`);
    checks.push(`attention f16n: ${c.name}`);
    if (c.hd <= 128) {
      const out2 = ctx.scratch([s.T, c.nH * c.hd]);
      const rec2 = ctx.recorder();
      await attentionPrefill(rec2, t[0], t[1], t[2], t[3], t[4], t[5], out2, { ...o, kvDtype: 'f16', nativeF16: true, tokenSeqHost: s.tokenSeq });
      const back2 = rec2.readback(out2);
      rec2.submit();
      assertClose(new Float32Array(await back2), want, TOL_F32, `prefill attention f16n ${c.name}`);
      checks.push(`prefill attention f16n: ${c.name}`);
    }
  }
  for (const { kernels, shape } of MATMUL) {
    if (kernels.decode === 'sgemv' && !ctx.gpu.caps.subgroups) continue;
    const [M, K, N] = shape;
    const x = randn(M * K, M + K);
    const enc = encodeWeight(randn(N * K, N, 0.5), N, K, 'f16');
    const tw = uploadEncoded(ctx, enc, N, K, 'f16');
    const tx = ctx.tensor(x, [M, K], 'f32');
    const ty = ctx.scratch([M, N]);
    const rec = ctx.recorder();
    await matmul(rec, tx, { w: tw }, ty, { variant: 'gpu', kernels });
    const back = rec.readback(ty);
    rec.submit();
    assertClose(new Float32Array(await back), matmulRef(x, M, K, dequantize('f16', enc, N, K), N), TOL_F32, `matmul f16n M,K,N=${shape}`);
    checks.push(`matmul f16n ${M <= 16 ? kernels.decode : kernels.prefill} M,K,N=${shape.join(',')}`);
  }
  const adapter = ctx.gpu.info.name;
  ctx.destroy();
  return { ok: true, adapter, checks };
}

try {
  console.log(`WEFT_RESULT ${JSON.stringify(await main())}`);
} catch (e) {
  console.log(`WEFT_RESULT ${JSON.stringify({ ok: false, error: (e as Error).stack ?? String(e) })}`);
  Deno.exit(1);
}

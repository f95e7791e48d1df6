/**
 * Rotary position embedding (RoPE) for the fused decoder layout, in place on
 * `qkv [tokens, rowStride]` f32: rotates the q heads and the k heads (the first
 * qHeads + kHeads heads of every row) in one dispatch; v heads are untouched.
 * Why in-shader cos/sin: a ragged batch has arbitrary positions per token, and
 * a [rotaryDim/2] inverse-frequency vector (computed once on the CPU in f64,
 * cached per options) is far smaller than a [maxPos, rotaryDim] table.
 * Optional Qwen3 q/k RMSNorm per head runs in the same pass, before rotation.
 * Reference: rope.ref.ts.
 */
import type { GpuContext } from '../gpu/context.ts';
import type { Recorder } from '../gpu/recorder.ts';
import type { Tensor } from '../gpu/tensor.ts';
import { uniformLayout } from '../gpu/uniforms.ts';
import { ceilDiv, grid1d } from './grid.ts';
import type { Variant } from './variant.ts';

export type RopeScaling =
  | { type: 'linear'; factor: number }
  | { type: 'llama3'; factor: number; lowFreqFactor: number; highFreqFactor: number; originalMaxPositionEmbeddings: number }
  /** Per-frequency divisors [rotaryDim / 2]: GGUF rope_freqs (llama3), Phi-3 longrope factors. */
  | { type: 'factors'; factors: readonly number[] };

export interface RopeOptions {
  tokens: number;
  qHeads: number;
  kHeads: number;
  headDim: number;
  /** Elements between consecutive token rows of qkv. */
  rowStride: number;
  /** Leading dims of each head that rotate (partial rotary); even, default headDim. */
  rotaryDim?: number;
  /** Base of the frequencies (rope_theta). */
  theta: number;
  /** half = HF rotate_half (pairs i, i + rotaryDim/2); interleaved = GPT-J / llama.cpp normal (pairs 2i, 2i+1). */
  style: 'half' | 'interleaved';
  scaling?: RopeScaling;
  /** Qwen3: RMSNorm each q/k head over headDim BEFORE rotation, weights [headDim] f32. */
  qkNorm?: { q: Tensor; k: Tensor; eps: number };
  variant?: Variant;
}

/** The options ropeInvFreq depends on. */
export type RopeFreqOptions = Pick<RopeOptions, 'headDim' | 'rotaryDim' | 'theta' | 'scaling'>;

/**
 * Inverse frequencies [rotaryDim/2] (radians per position), computed in f64 and
 * rounded once to f32: theta^(-2i/rotaryDim), then scaled as HF transformers'
 * `_compute_linear_scaling_rope_parameters` / `_compute_llama3_parameters`, or divided by
 * per-frequency factors (`_compute_longrope_parameters`; llama.cpp's rope_freqs tensor).
 */
export function ropeInvFreq(opts: RopeFreqOptions): Float32Array {
  const dim = opts.rotaryDim ?? opts.headDim;
  const half = dim / 2;
  const out = new Float32Array(half);
  const sc = opts.scaling;
  for (let i = 0; i < half; i++) {
    let f = 1 / opts.theta ** ((2 * i) / dim);
    if (sc?.type === 'linear') f /= sc.factor;
    else if (sc?.type === 'factors') f /= sc.factors[i]!;
    else if (sc?.type === 'llama3') {
      const lowWavelen = sc.originalMaxPositionEmbeddings / sc.lowFreqFactor;
      const highWavelen = sc.originalMaxPositionEmbeddings / sc.highFreqFactor;
      const wavelen = (2 * Math.PI) / f;
      if (wavelen > lowWavelen) f /= sc.factor;
      else if (!(wavelen < highWavelen)) {
        // Medium band: blend the scaled and unscaled frequency.
        const smooth = (sc.originalMaxPositionEmbeddings / wavelen - sc.lowFreqFactor) / (sc.highFreqFactor - sc.lowFreqFactor);
        f = ((1 - smooth) * f) / sc.factor + smooth * f;
      }
    }
    out[i] = f;
  }
  return out;
}

function freqKey(o: RopeFreqOptions): string {
  return JSON.stringify([o.rotaryDim ?? o.headDim, o.theta, o.scaling ?? null]);
}

/** Uploaded inverse-frequency tensors, per context per options key (tiny, kept for the context's life). */
const freqCache = new WeakMap<GpuContext, Map<string, Tensor>>();

/** A tensor of freqCache with the options it was asked for by identity: every layer of every step asks again. */
interface RecentFreq {
  dim: number;
  theta: number;
  scaling: RopeFreqOptions['scaling'];
  /** Per-frequency factors (`factors` scaling): callers build that object per call around the same array. */
  factors: readonly number[] | undefined;
  tensor: Tensor;
}
const recentFreqs = new WeakMap<GpuContext, RecentFreq[]>();

export function invFreqTensor(ctx: GpuContext, o: RopeFreqOptions): Tensor {
  const dim = o.rotaryDim ?? o.headDim;
  const sc = o.scaling;
  const factors = sc?.type === 'factors' ? sc.factors : undefined;
  let recent = recentFreqs.get(ctx);
  if (recent) {
    for (const r of recent) if (r.dim === dim && r.theta === o.theta && (r.scaling === sc || (factors !== undefined && r.factors === factors))) return r.tensor;
  } else recentFreqs.set(ctx, (recent = []));
  let m = freqCache.get(ctx);
  if (!m) freqCache.set(ctx, (m = new Map()));
  const key = freqKey(o);
  let t = m.get(key);
  if (!t) {
    const f = ropeInvFreq(o);
    m.set(key, (t = ctx.tensor(f, [f.length], 'f32')));
  }
  if (recent.length < 8) recent.push({ dim, theta: o.theta, scaling: sc, factors, tensor: t });
  return t;
}

/** Params of shaders/rope.wgsl (also used by rope_kv_write.ts). */
export const ropeLayout = uniformLayout([
  ['tokens', 'u32'],
  ['heads', 'u32'], // q + k heads rotated per row
  ['qHeads', 'u32'],
  ['headDim', 'u32'], // in elements
  ['rowStride', 'u32'], // in elements
  ['rotHalf', 'u32'], // rotaryDim / 2, pairs per head
  ['eps', 'f32'],
  ['kvBase4', 'u32'], // KV texture caches: vec4 index of the layer's region (else 0)
] as const);

/** Throws unless rotaryDim is even and within headDim; returns it. */
export function checkRotaryDim(opts: Pick<RopeOptions, 'headDim' | 'rotaryDim'>, op: string): number {
  const rot = opts.rotaryDim ?? opts.headDim;
  if (rot % 2 !== 0 || rot > opts.headDim || rot <= 0) throw new Error(`${op}: rotaryDim ${rot} must be even and in (0, headDim=${opts.headDim}]`);
  return rot;
}

export async function rope(rec: Recorder, qkv: Tensor, positions: Tensor, opts: RopeOptions): Promise<void> {
  const { tokens, qHeads, kHeads, headDim, rowStride } = opts;
  const rot = checkRotaryDim(opts, 'rope');
  if ((qHeads + kHeads) * headDim > rowStride) throw new Error('rope: q and k heads exceed rowStride');
  if (tokens === 0) return;
  const shared = (opts.variant ?? rec.ctx.variant) === 'gpu';
  const WG = shared ? 64 : 16;
  const kernel = await rec.ctx.pipelines.get({
    shader: 'rope',
    defines: { WG, SHARED: shared, INTERLEAVED: opts.style === 'interleaved', QK_NORM: !!opts.qkNorm },
    layout: ropeLayout,
  });
  const heads = qHeads + kHeads;
  const buffers = [qkv, positions, invFreqTensor(rec.ctx, opts)];
  if (opts.qkNorm) buffers.push(opts.qkNorm.q, opts.qkNorm.k);
  const n = tokens * heads;
  rec.dispatch(
    kernel,
    { tokens, heads, qHeads, headDim, rowStride, rotHalf: rot / 2, eps: opts.qkNorm?.eps ?? 0, kvBase4: 0 },
    buffers,
    grid1d(shared ? n : ceilDiv(n, WG)),
  );
}

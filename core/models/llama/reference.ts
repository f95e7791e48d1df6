/**
 * Plain-TypeScript Llama-family forward pass on the CPU.
 *
 * Two jobs: the independent reference the GPU path is checked against (it
 * shares no kernel code with it), and the "plain TypeScript CPU" peer in the
 * benchmarks. It follows Hugging Face transformers' modeling_llama /
 * modeling_qwen2 / modeling_qwen3 / modeling_mistral semantics: RMSNorm,
 * rotate-half RoPE (incl. llama3 scaling via ropeInvFreq), grouped-query
 * attention with optional qkv bias, q/k norms and sliding window, SiLU-gated
 * MLP, tied or untied LM head. One sequence; KV cache kept in plain arrays.
 * Also Gemma 2/3 (modeling_gemma2 / modeling_gemma3: (1 + w) norms, sandwich norms,
 * scaled embeddings, GeGLU, attention scale and soft-capping, per-layer windows and
 * rope bases, final-logit soft-capping) and Phi-3 (fused qkv_proj / gate_up_proj,
 * longrope resolved for `maxContext` as the GPU model does: variant.ts).
 */
import type { DecoderConfig } from '../../formats/hf_config.ts';
import { ropeInvFreq } from '../../ops/rope.ts';
import { attentionScale, layerRope, layerWindow, mlpActivation } from './variant.ts';

/** Returns the f32 values of an HF-named tensor (throws if absent). */
export type WeightGetter = (name: string) => Float32Array;

function rmsNorm(x: Float32Array, w: Float32Array, eps: number, out: Float32Array, off = 0, n = x.length): void {
  let s = 0;
  for (let i = 0; i < n; i++) s += x[off + i]! * x[off + i]!;
  const inv = 1 / Math.sqrt(s / n + eps);
  for (let i = 0; i < n; i++) out[off + i] = x[off + i]! * inv * w[i]!;
}

/** y[N] = W[N, K] · x[K] (+ b). */
function matvec(w: Float32Array, x: Float32Array, N: number, K: number, y: Float32Array, b?: Float32Array): void {
  for (let n = 0; n < N; n++) {
    let s = 0;
    const row = n * K;
    for (let k = 0; k < K; k++) s += w[row + k]! * x[k]!;
    y[n] = s + (b ? b[n]! : 0);
  }
}

const silu = (v: number): number => v / (1 + Math.exp(-v));
/** PyTorch gelu(approximate='tanh'). */
const geluTanh = (v: number): number => 0.5 * v * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (v + 0.044715 * v * v * v)));
/** Exact gelu via erf (Abramowitz-Stegun 7.1.26 is too coarse; series / continued fraction in f64). */
function erf(x: number): number {
  const t = 1 / (1 + 0.5 * Math.abs(x));
  const y = 1 - t * Math.exp(-x * x - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277)))))))));
  return x >= 0 ? y : -y;
}
const gelu = (v: number): number => 0.5 * v * (1 + erf(v / Math.SQRT2));

interface LayerW {
  inNorm: Float32Array;
  q: Float32Array;
  k: Float32Array;
  v: Float32Array;
  qb?: Float32Array;
  kb?: Float32Array;
  vb?: Float32Array;
  qNorm?: Float32Array;
  kNorm?: Float32Array;
  o: Float32Array;
  postNorm: Float32Array;
  gate: Float32Array;
  up: Float32Array;
  down: Float32Array;
  attnOutNorm?: Float32Array;
  mlpOutNorm?: Float32Array;
}

export class LlamaReference {
  private readonly layers: LayerW[];
  private readonly embed: Float32Array;
  private readonly norm: Float32Array;
  private readonly head: Float32Array;
  /** Per layer: inverse frequencies [headDim / 2] and window (null: full attention). */
  private readonly invFreq: Float32Array[];
  private readonly windows: (number | null)[];
  private readonly act: (v: number) => number;
  /** Per layer: keys/values [pos, nKv*hd]. */
  private kCache: Float32Array[][] = [];
  private vCache: Float32Array[][] = [];
  /** Number of positions already in the cache. */
  length = 0;

  constructor(
    readonly cfg: DecoderConfig,
    get: WeightGetter,
    /** Context limit the model runs with (picks longrope's factor set); default the config's max positions. */
    maxContext = cfg.maxPositions,
  ) {
    const opt = (n: string): Float32Array | undefined => {
      try {
        return get(n);
      } catch {
        return undefined;
      }
    };
    // Gemma stores norm weights as (w - 1).
    const norm = (n: string): Float32Array => (cfg.normAddOne ? Float32Array.from(get(n), (v) => v + 1) : get(n));
    this.embed = get('model.embed_tokens.weight');
    this.norm = norm('model.norm.weight');
    this.head = cfg.tieEmbeddings ? this.embed : get('lm_head.weight');
    this.layers = [];
    for (let l = 0; l < cfg.layers; l++) {
      const p = `model.layers.${l}.`;
      const D = cfg.hiddenSize;
      const qn = cfg.heads * cfg.headDim * D;
      const kn = cfg.kvHeads * cfg.headDim * D;
      const qkv = cfg.fusedProjections ? get(`${p}self_attn.qkv_proj.weight`) : null;
      const gu = cfg.fusedProjections ? get(`${p}mlp.gate_up_proj.weight`) : null;
      const In = cfg.intermediateSize * D;
      const w: LayerW = {
        inNorm: norm(`${p}input_layernorm.weight`),
        q: qkv ? qkv.subarray(0, qn) : get(`${p}self_attn.q_proj.weight`),
        k: qkv ? qkv.subarray(qn, qn + kn) : get(`${p}self_attn.k_proj.weight`),
        v: qkv ? qkv.subarray(qn + kn, qn + 2 * kn) : get(`${p}self_attn.v_proj.weight`),
        o: get(`${p}self_attn.o_proj.weight`),
        postNorm: norm(cfg.sandwichNorms ? `${p}pre_feedforward_layernorm.weight` : `${p}post_attention_layernorm.weight`),
        gate: gu ? gu.subarray(0, In) : get(`${p}mlp.gate_proj.weight`),
        up: gu ? gu.subarray(In, 2 * In) : get(`${p}mlp.up_proj.weight`),
        down: get(`${p}mlp.down_proj.weight`),
      };
      if (cfg.sandwichNorms) {
        w.attnOutNorm = norm(`${p}post_attention_layernorm.weight`);
        w.mlpOutNorm = norm(`${p}post_feedforward_layernorm.weight`);
      }
      if (cfg.attentionBias) {
        w.qb = get(`${p}self_attn.q_proj.bias`);
        w.kb = get(`${p}self_attn.k_proj.bias`);
        w.vb = get(`${p}self_attn.v_proj.bias`);
      }
      if (cfg.qkNorm) {
        const qn = opt(`${p}self_attn.q_norm.weight`);
        const kn = opt(`${p}self_attn.k_norm.weight`);
        if (qn) w.qNorm = cfg.normAddOne ? Float32Array.from(qn, (v) => v + 1) : qn;
        if (kn) w.kNorm = cfg.normAddOne ? Float32Array.from(kn, (v) => v + 1) : kn;
      }
      this.layers.push(w);
      this.kCache.push([]);
      this.vCache.push([]);
    }
    this.invFreq = this.layers.map((_, l) => ropeInvFreq({ headDim: cfg.headDim, ...layerRope(cfg, l, maxContext) }));
    this.windows = this.layers.map((_, l) => layerWindow(cfg, l));
    const a = mlpActivation(cfg);
    this.act = a === 'silu' ? silu : a === 'gelu_tanh' ? geluTanh : gelu;
  }

  reset(): void {
    this.length = 0;
    this.kCache = this.layers.map(() => []);
    this.vCache = this.layers.map(() => []);
  }

  /** Rotate-half RoPE in place on `nHeads` heads of `x` at `pos`. */
  private rope(x: Float32Array, nHeads: number, pos: number, invFreq: Float32Array): void {
    const hd = this.cfg.headDim;
    const half = invFreq.length;
    for (let h = 0; h < nHeads; h++) {
      const o = h * hd;
      for (let i = 0; i < half; i++) {
        const a = pos * invFreq[i]!;
        const c = Math.cos(a);
        const s = Math.sin(a);
        const x0 = x[o + i]!;
        const x1 = x[o + i + half]!;
        x[o + i] = x0 * c - x1 * s;
        x[o + i + half] = x1 * c + x0 * s;
      }
    }
  }

  /** Feeds one token at position `this.length`; returns its logits [V]. */
  step(token: number): Float32Array {
    const c = this.cfg;
    const D = c.hiddenSize;
    const hd = c.headDim;
    const nH = c.heads;
    const nKv = c.kvHeads;
    const I = c.intermediateSize;
    const pos = this.length;
    const x = this.embed.slice(token * D, token * D + D);
    if (c.embedScale !== undefined) for (let i = 0; i < D; i++) x[i] = x[i]! * c.embedScale;
    const h = new Float32Array(D);
    const q = new Float32Array(nH * hd);
    const att = new Float32Array(nH * hd);
    const g = new Float32Array(I);
    const u = new Float32Array(I);
    const tmp = new Float32Array(D);
    for (let l = 0; l < c.layers; l++) {
      const w = this.layers[l]!;
      rmsNorm(x, w.inNorm, c.rmsEps, h);
      const k = new Float32Array(nKv * hd);
      const v = new Float32Array(nKv * hd);
      matvec(w.q, h, nH * hd, D, q, w.qb);
      matvec(w.k, h, nKv * hd, D, k, w.kb);
      matvec(w.v, h, nKv * hd, D, v, w.vb);
      if (w.qNorm) for (let i = 0; i < nH; i++) rmsNorm(q, w.qNorm, c.rmsEps, q, i * hd, hd);
      if (w.kNorm) for (let i = 0; i < nKv; i++) rmsNorm(k, w.kNorm, c.rmsEps, k, i * hd, hd);
      this.rope(q, nH, pos, this.invFreq[l]!);
      this.rope(k, nKv, pos, this.invFreq[l]!);
      this.kCache[l]!.push(k);
      this.vCache[l]!.push(v);
      const keys = this.kCache[l]!;
      const vals = this.vCache[l]!;
      const win = this.windows[l];
      const start = win ? Math.max(0, pos - win + 1) : 0;
      const scale = attentionScale(c);
      const cap = c.attnSoftcap;
      const group = nH / nKv;
      for (let head = 0; head < nH; head++) {
        const kvh = Math.floor(head / group);
        const scores = new Float64Array(pos + 1 - start);
        let max = -Infinity;
        for (let t = start; t <= pos; t++) {
          let s = 0;
          const kt = keys[t]!;
          for (let i = 0; i < hd; i++) s += q[head * hd + i]! * kt[kvh * hd + i]!;
          s *= scale;
          if (cap) s = cap * Math.tanh(s / cap);
          scores[t - start] = s;
          if (s > max) max = s;
        }
        let sum = 0;
        for (let t = 0; t < scores.length; t++) sum += scores[t] = Math.exp(scores[t]! - max);
        for (let i = 0; i < hd; i++) {
          let acc = 0;
          for (let t = start; t <= pos; t++) acc += scores[t - start]! * vals[t]![kvh * hd + i]!;
          att[head * hd + i] = acc / sum;
        }
      }
      matvec(w.o, att, D, nH * hd, tmp);
      if (w.attnOutNorm) rmsNorm(tmp, w.attnOutNorm, c.rmsEps, tmp);
      for (let i = 0; i < D; i++) x[i] = x[i]! + tmp[i]!;
      rmsNorm(x, w.postNorm, c.rmsEps, h);
      matvec(w.gate, h, I, D, g);
      matvec(w.up, h, I, D, u);
      for (let i = 0; i < I; i++) g[i] = this.act(g[i]!) * u[i]!;
      matvec(w.down, g, D, I, tmp);
      if (w.mlpOutNorm) rmsNorm(tmp, w.mlpOutNorm, c.rmsEps, tmp);
      for (let i = 0; i < D; i++) x[i] = x[i]! + tmp[i]!;
    }
    rmsNorm(x, this.norm, c.rmsEps, h);
    const logits = new Float32Array(c.vocabSize);
    matvec(this.head, h, c.vocabSize, D, logits);
    if (c.finalSoftcap) for (let i = 0; i < logits.length; i++) logits[i] = c.finalSoftcap * Math.tanh(logits[i]! / c.finalSoftcap);
    this.length++;
    return logits;
  }

  /** Feeds `tokens` in order; returns the logits of the last one. */
  prefill(tokens: readonly number[]): Float32Array {
    let last: Float32Array = new Float32Array(0);
    for (const t of tokens) last = this.step(t);
    return last;
  }
}

/** Index of the largest value (ties: lowest index), as greedy decoding picks. */
export function argmax(v: Float32Array): number {
  let best = 0;
  for (let i = 1; i < v.length; i++) if (v[i]! > v[best]!) best = i;
  return best;
}

/**
 * Per-layer attention settings of a Llama-family config, resolved once for a model's
 * context limit: which rope (base and scaling) and which window each layer uses, and the
 * q.k scale. Shared by the GPU model (forward.ts) and the CPU reference (reference.ts), so
 * both resolve Gemma's local/global layers and Phi-3's longrope the same way.
 *
 * Longrope: transformers switches from the short to the long factors once a sequence grows
 * past original_max_position_embeddings (re-rotating nothing already cached); a paged KV
 * cache stores keys rotated once, so the choice is made per model instead, as llama.cpp
 * does: short factors when the context limit is within the original context, long beyond.
 * Its attention factor multiplies cos and sin, i.e. q.k by its square: folded into the scale.
 */
import type { DecoderConfig } from '../../formats/hf_config.ts';
import type { RopeScaling } from '../../ops/rope.ts';

export interface LayerRope {
  theta: number;
  scaling?: RopeScaling;
}

/** The rope of the model's full-attention layers (all layers, except Gemma 3's local ones). */
export function globalRope(cfg: DecoderConfig, maxContext: number): LayerRope {
  const s = cfg.ropeScaling;
  if (!s) return { theta: cfg.ropeTheta };
  if (s.type === 'longrope') {
    const factors = maxContext <= s.originalMaxPositionEmbeddings ? s.shortFactor : s.longFactor;
    return { theta: cfg.ropeTheta, scaling: { type: 'factors', factors } };
  }
  return { theta: cfg.ropeTheta, scaling: s };
}

/** Layer l's rope. */
export function layerRope(cfg: DecoderConfig, l: number, maxContext: number): LayerRope {
  if (cfg.localRope && isSliding(cfg, l)) {
    const s = cfg.localRope.scaling;
    return s && s.type !== 'longrope' ? { theta: cfg.localRope.theta, scaling: s } : { theta: cfg.localRope.theta };
  }
  return globalRope(cfg, maxContext);
}

/** Whether layer l attends through the sliding window. */
export function isSliding(cfg: DecoderConfig, l: number): boolean {
  return cfg.slidingWindow !== null && (cfg.slidingLayers ? cfg.slidingLayers[l] === true : true);
}

/** Layer l's window in positions, or null for full attention. */
export function layerWindow(cfg: DecoderConfig, l: number): number | null {
  return isSliding(cfg, l) ? cfg.slidingWindow : null;
}

/** The multiplier of q.k: attnScale (default 1/sqrt(headDim)) times longrope's attention factor squared. */
export function attentionScale(cfg: DecoderConfig): number {
  const base = cfg.attnScale ?? 1 / Math.sqrt(cfg.headDim);
  const s = cfg.ropeScaling;
  return s?.type === 'longrope' ? base * s.attentionFactor * s.attentionFactor : base;
}

/** The gated-MLP activation of an HF hidden_act name. */
export function mlpActivation(cfg: DecoderConfig): 'silu' | 'gelu_tanh' | 'gelu' {
  const a = cfg.hiddenAct;
  if (a === 'silu' || a === 'swish') return 'silu';
  if (a === 'gelu_pytorch_tanh' || a === 'gelu_tanh' || a === 'gelu_new' || a === 'gelu_fast') return 'gelu_tanh';
  if (a === 'gelu') return 'gelu';
  throw new Error(`unsupported MLP activation ${a}`);
}

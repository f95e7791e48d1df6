/**
 * The per-layer op options of the per-op forward that do not change between
 * steps, built once per model. Recording a decode step calls about seven ops
 * per layer; building their option objects anew every step (spreads of the
 * weight-texture options, the rope settings, the fused norms) cost more host
 * time than the recorder's own work per dispatch, so the step reuses these
 * and builds only what depends on the step (its token count, its latest
 * position) once per step, not once per layer.
 */
import type { DecoderConfig } from '../../formats/hf_config.ts';
import type { LinearWeight, MatmulOptions } from '../../ops/matmul.ts';
import type { RopeKvWriteOptions } from '../../ops/rope_kv_write.ts';
import { layerRope, layerWindow } from './variant.ts';
import type { LlamaLayerWeights } from './weights.ts';

/** The rope settings of ropeKvWrite for one layer (its per-step fields — token count, heads — come from the step). */
export type LayerRope = Pick<RopeKvWriteOptions, 'theta' | 'style' | 'scaling' | 'qkNorm'>;

export interface LayerOptions {
  /** qkv projection reading x through the fused input norm (the gpu decode kernel). */
  readonly qkvPrenorm: MatmulOptions;
  /** qkv projection reading the normed h. */
  readonly qkv: MatmulOptions;
  /** o projection accumulating into the residual. */
  readonly o: MatmulOptions;
  /** gate/up reading x through the fused post-attention norm, SiLU-gated (the gpu decode kernel). */
  readonly guPrenorm: MatmulOptions;
  /** gate/up reading the normed h, both halves stored. */
  readonly gu: MatmulOptions;
  /** down projection accumulating into the residual. */
  readonly down: MatmulOptions;
  readonly rope: LayerRope;
  /** Sliding-window size of the layer's attention, null: global. */
  readonly window: number | null;
}

/**
 * Options per layer. `weightOptions` gives a weight's storage options (its
 * kernels, and its texture where the weights live in one); `maxContext`
 * picks longrope's factors.
 */
export function layerOptions(cfg: DecoderConfig, layers: readonly LlamaLayerWeights[], maxContext: number, weightOptions: (w: LinearWeight) => MatmulOptions): LayerOptions[] {
  return layers.map((L, l) => {
    const { theta, scaling } = layerRope(cfg, l, maxContext);
    const rope: LayerRope = {
      theta,
      style: 'half',
      ...(scaling ? { scaling } : {}),
      ...(L.qNorm && L.kNorm ? { qkNorm: { q: L.qNorm, k: L.kNorm, eps: cfg.rmsEps } } : {}),
    };
    return {
      qkvPrenorm: { ...weightOptions(L.qkv), prenorm: { weight: L.inNorm, eps: cfg.rmsEps } },
      qkv: weightOptions(L.qkv),
      o: { accumulate: true, ...weightOptions(L.o) },
      guPrenorm: { ...weightOptions(L.gu), prenorm: { weight: L.postNorm, eps: cfg.rmsEps }, gated: true },
      gu: weightOptions(L.gu),
      down: { accumulate: true, ...weightOptions(L.down) },
      rope,
      window: layerWindow(cfg, l),
    };
  });
}

/**
 * A step's attention options: `base` (the step's heads, blocks, latest position) with each
 * layer window, built once per window size and step, not per layer; `flash` adds the cache
 * type the flash kernels read (`flashKv` throws for caches they do not take).
 */
export function stepAttentionOptions<B extends object>(base: B, flashKv: () => 'f32' | 'f16'): { plain(window: number | null): B & { window?: number }; flash(window: number | null): B & { window?: number; kvDtype: 'f32' | 'f16' } } {
  const byWindow = new Map<number | null, { plain: B & { window?: number }; flash?: B & { window?: number; kvDtype: 'f32' | 'f16' } }>();
  const of = (window: number | null): { plain: B & { window?: number }; flash?: B & { window?: number; kvDtype: 'f32' | 'f16' } } => {
    let o = byWindow.get(window);
    if (!o) byWindow.set(window, (o = { plain: window ? { ...base, window } : base }));
    return o;
  };
  return {
    plain: (window) => of(window).plain,
    flash: (window) => {
      const o = of(window);
      return (o.flash ??= { ...o.plain, kvDtype: flashKv() });
    },
  };
}

/**
 * The device memory plan of a decoder before its weights are loaded: device bytes of the
 * weights estimated from the checkpoint's headers (no tensor data read), the step's
 * activations and the KV pool the budget leaves (memory_plan.ts). `loadDecoder` refuses a
 * model that cannot fit with it before allocating anything; `weft generate --dry-run` prints it.
 */
import type { DecoderConfig } from '../formats/hf_config.ts';
import { isKQuant, kquantBytes, kquantFromGgml } from '../ops/quant_k.ts';
import { kvBytesPerTokenLayer, type KvDtype } from '../ops/kv_write.ts';
import type { WeightDType, WeightSource } from './host_tensor.ts';
import { llamaTensorNames } from './llama/weights.ts';
import { activationBytes, planMemory, type AdapterDescription, type DeviceBudget, type MemoryPlan } from './memory_plan.ts';

/**
 * Device bytes of one tensor stored from a file type: 1-D tensors f32; K-quants their blocks;
 * Q8_0 / Q4_0 their quants plus an f32 scale per 32; other types `floatAs` (f16 rows padded to even).
 */
export function tensorDeviceBytes(shape: readonly number[], fileType: string, target: WeightDType, floatAs: 'f32' | 'f16'): number {
  const n = shape.reduce((a, b) => a * b, 1);
  if (shape.length < 2) return n * 4;
  const rows = n / shape[shape.length - 1]!;
  const cols = shape[shape.length - 1]!;
  const kq = kquantFromGgml(fileType);
  const t = target === 'auto' ? (kq ?? (fileType === 'Q8_0' ? 'q8_0' : fileType === 'Q4_0' ? 'q4_0' : floatAs)) : target;
  if (isKQuant(t)) return kquantBytes(t, rows, cols);
  if (t === 'q8_0' && cols % 32 === 0) return n + n / 16; // quants + f16 block scales: the file's 34 bytes per 32
  if (t === 'q4_0' && cols % 32 === 0) return n / 2 + n / 16; // 18 bytes per 32
  if (t === 'f32') return n * 4;
  return rows * Math.ceil(cols / 2) * 4;
}

/** Estimated device bytes of a Llama-family model's weights from the source's headers (null: the source has no headers). */
export function estimateWeightBytes(cfg: DecoderConfig, src: WeightSource, target: WeightDType, floatAs: 'f32' | 'f16'): number | null {
  if (!src.info) return null;
  let total = 0;
  for (const n of llamaTensorNames(cfg, src.has('lm_head.weight') && !cfg.tieEmbeddings)) {
    const i = src.info(n);
    if (i) total += tensorDeviceBytes(i.shape, i.type, target, floatAs);
  }
  return total;
}

export interface DecoderPlanInput {
  cfg: DecoderConfig;
  weightBytes: number;
  kvDtype: KvDtype;
  maxTokens: number;
  logitRows: number;
  maxSeqs: number;
  maxContext: number;
  blockSize: number;
  kvCacheBytes?: number;
}

/** planMemory for a decoder's geometry (throws ModelTooLargeError when it cannot fit). */
export function planDecoderMemory(p: DecoderPlanInput, budget: DeviceBudget, adapter: AdapterDescription): MemoryPlan {
  const c = p.cfg;
  const perLayer = kvBytesPerTokenLayer(c.kvHeads, c.headDim, p.kvDtype);
  return planMemory(
    {
      weightBytes: p.weightBytes,
      kvBytesPerToken: c.layers * perLayer,
      kvBytesPerTokenPerBuffer: perLayer / 2,
      activationBytes: activationBytes(c, p.maxTokens, p.logitRows),
      maxSeqs: p.maxSeqs,
      maxContext: p.maxContext,
      blockSize: p.blockSize,
      ...(p.kvCacheBytes !== undefined ? { kvCacheBytes: p.kvCacheBytes } : {}),
    },
    budget,
    adapter,
  );
}

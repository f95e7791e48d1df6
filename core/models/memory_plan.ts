/**
 * Device memory plan for a decoder on an adapter (pure; no GPU calls): how many bytes the
 * weights, the activations and the KV pool take, how many tokens of context the pool holds,
 * and a refusal with the numbers when the model cannot fit — before anything is allocated.
 *
 * WebGPU reports no memory size. The budget is, in order: a size the operator configured
 * (server config / WEFT_GPU_MEMORY, read by the server), what the vendor reports where the
 * runtime exposes it, what a probe allocation reached (core/gpu/memory_probe.ts, hardware
 * adapters only), else a default (software adapters share host memory: 2 GiB; unknown
 * hardware: 4 GiB, the smallest memory of a GPU that runs 1B models). The KV pool gets what
 * the budget leaves after weights, activations and a reserve, up to what `maxSeqs` sequences
 * of `maxContext` tokens can use, and no more than one storage binding per layer allows.
 */
import { ModelTooLargeError } from '../errors.ts';

const MiB = 2 ** 20;
const GiB = 2 ** 30;

/** What the plan needs to know about an adapter (GpuContext.gpu, or a fake one in tests). */
export interface AdapterDescription {
  name: string;
  /** CPU emulation (SwiftShader, llvmpipe): device memory is host memory. */
  software: boolean;
  /** The adapter has `shader-f16`. */
  f16: boolean;
  maxBufferSize: number;
  maxStorageBufferBindingSize: number;
  /** Device memory the vendor reports, in bytes, where the runtime exposes it. */
  reportedMemory?: number | null;
  /** Bytes a probe allocation reached (memory_probe.ts), when one ran. */
  probedMemory?: number | null;
}

export type BudgetSource = 'configured' | 'reported' | 'probed' | 'default';
export interface DeviceBudget {
  bytes: number;
  source: BudgetSource;
}

export const DEFAULT_BUDGET = { software: 2 * GiB, hardware: 4 * GiB } as const;

/** The device memory budget: configured > reported > probed > default. */
export function deviceBudget(a: AdapterDescription, configured?: number | null): DeviceBudget {
  if (configured && configured > 0) return { bytes: configured, source: 'configured' };
  if (a.reportedMemory && a.reportedMemory > 0) return { bytes: a.reportedMemory, source: 'reported' };
  if (a.probedMemory && a.probedMemory > 0) return { bytes: a.probedMemory, source: 'probed' };
  return { bytes: a.software ? DEFAULT_BUDGET.software : DEFAULT_BUDGET.hardware, source: 'default' };
}

/** The decoder's sizes the plan works from. */
export interface PlanInput {
  /** Device bytes of all weights (an estimate from the headers before the load, the real sum after). */
  weightBytes: number;
  /** KV bytes per token over all layers, K and V, in the chosen cache dtype. */
  kvBytesPerToken: number;
  /** KV bytes per token of ONE layer's K (or V) buffer: bounds the pool by the binding size. */
  kvBytesPerTokenPerBuffer: number;
  /** Step scratch (activations, logits), bytes. */
  activationBytes: number;
  maxSeqs: number;
  maxContext: number;
  blockSize: number;
  /** Explicit KV pool size (page_cache_size), bytes; the plan honours it if it fits. */
  kvCacheBytes?: number;
}

export interface MemoryPlan {
  budget: DeviceBudget;
  weightBytes: number;
  activationBytes: number;
  /** Kept free for pipelines, bind groups, staging and the runtime's own allocations. */
  reserveBytes: number;
  kvBlocks: number;
  kvPoolBytes: number;
  /** Tokens of context the pool holds over all sequences. */
  kvTokens: number;
  kvBytesPerToken: number;
  /** Sequences at the full context length the pool holds at once. */
  fullContextSeqs: number;
  /** Total planned bytes (weights + activations + reserve + KV pool). */
  totalBytes: number;
}

/** Reserve: 5% of the budget, at least 64 MiB and at most 1 GiB. */
export function reserveFor(budget: number): number {
  return Math.min(GiB, Math.max(64 * MiB, Math.floor(budget * 0.05)));
}

/**
 * The plan, or ModelTooLargeError (code model_too_large) naming every number when the
 * weights, activations, reserve and one full-context sequence of KV exceed the budget, or
 * an explicit KV size does not fit beside the weights.
 */
export function planMemory(model: PlanInput, budget: DeviceBudget, adapter: Pick<AdapterDescription, 'name' | 'maxStorageBufferBindingSize'>): MemoryPlan {
  const { weightBytes, activationBytes, kvBytesPerToken, blockSize } = model;
  const reserveBytes = reserveFor(budget.bytes);
  const perBlock = kvBytesPerToken * blockSize;
  const seqBlocks = Math.ceil(model.maxContext / blockSize);
  const fixed = weightBytes + activationBytes + reserveBytes;
  const free = budget.bytes - fixed;
  const numbers = {
    device: adapter.name,
    budgetBytes: budget.bytes,
    budgetSource: budget.source,
    weightBytes,
    activationBytes,
    reserveBytes,
    kvBytesPerToken,
    minKvBytes: seqBlocks * perBlock,
  };
  const mb = (n: number): string => `${(n / MiB).toFixed(1)} MiB`;
  if (free < seqBlocks * perBlock) {
    throw new ModelTooLargeError(
      `the model does not fit ${adapter.name}: weights ${mb(weightBytes)} + activations ${mb(activationBytes)} + reserve ${mb(reserveBytes)} + one ${model.maxContext}-token KV sequence ${mb(seqBlocks * perBlock)} > budget ${mb(budget.bytes)} (${budget.source}); lower max_context, use a smaller quantization, or set the GPU memory budget`,
      numbers,
    );
  }
  // Largest pool one binding per layer allows (each layer's K and V are one buffer each).
  const bindingBlocks = Math.floor(adapter.maxStorageBufferBindingSize / (model.kvBytesPerTokenPerBuffer * blockSize));
  let blocks: number;
  if (model.kvCacheBytes !== undefined) {
    blocks = Math.max(seqBlocks, Math.floor(model.kvCacheBytes / perBlock));
    if (blocks * perBlock > free) {
      throw new ModelTooLargeError(
        `page cache of ${mb(blocks * perBlock)} does not fit ${adapter.name} beside weights ${mb(weightBytes)} + activations ${mb(activationBytes)} + reserve ${mb(reserveBytes)} within budget ${mb(budget.bytes)} (${budget.source}); at most ${mb(free)} is free`,
        { ...numbers, kvCacheBytes: model.kvCacheBytes },
      );
    }
  } else {
    const useful = model.maxSeqs * seqBlocks; // more blocks than every sequence at full context can never be used
    blocks = Math.max(seqBlocks, Math.min(useful, Math.floor(free / perBlock)));
  }
  blocks = Math.min(blocks, Math.max(seqBlocks, bindingBlocks));
  const kvPoolBytes = blocks * perBlock;
  return {
    budget,
    weightBytes,
    activationBytes,
    reserveBytes,
    kvBlocks: blocks,
    kvPoolBytes,
    kvTokens: blocks * blockSize,
    kvBytesPerToken,
    fullContextSeqs: Math.floor(blocks / seqBlocks),
    totalBytes: fixed + kvPoolBytes,
  };
}

/** The decoder step's scratch buffers (llama/forward.ts), bytes: maxTokens rows of every activation plus the logit rows. */
export function activationBytes(c: { hiddenSize: number; heads: number; kvHeads: number; headDim: number; intermediateSize: number; vocabSize: number }, maxTokens: number, logitRows: number): number {
  const perToken = 2 * c.hiddenSize + (c.heads + 2 * c.kvHeads) * c.headDim + c.heads * c.headDim + 3 * c.intermediateSize;
  return 4 * (maxTokens * perToken + logitRows * (2 * c.hiddenSize + c.vocabSize));
}

/** One line per figure, for `weft generate --dry-run`. */
export function formatPlan(p: MemoryPlan, maxContext: number): string {
  const mb = (n: number): string => `${(n / MiB).toFixed(1)} MiB`;
  return [
    `budget       ${mb(p.budget.bytes)} (${p.budget.source})`,
    `weights      ${mb(p.weightBytes)}`,
    `activations  ${mb(p.activationBytes)}`,
    `reserve      ${mb(p.reserveBytes)}`,
    `kv pool      ${mb(p.kvPoolBytes)} = ${p.kvTokens} tokens (${p.kvBytesPerToken} B/token; ${p.fullContextSeqs} sequences of ${maxContext})`,
    `total        ${mb(p.totalBytes)}`,
  ].join('\n');
}

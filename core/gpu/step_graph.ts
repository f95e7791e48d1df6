/**
 * Step graphs: a recorded run of dispatches kept for replay, the WebGPU counterpart of CUDA
 * graphs. A decode step of one shape records the same kernels, bind groups, workgroup counts
 * and Params bytes every time; only the step's inputs (token ids, positions, slots, block
 * tables: one queue write into buffers the bind groups already name) change. Recording it
 * through the ops costs ~2.5 µs of JavaScript per dispatch (option objects, pipeline and bind
 * group lookups, Params packing); replaying a graph is the three native encoder calls per
 * dispatch and one copy of the Params bytes.
 *
 * A graph is only valid where everything the recording read on the host is the same: the
 * caller keys it on exactly those values (LlamaModel: the step's token, logit-row and sequence
 * counts and the split-K attention shape) and the recorder checks the rest (the same arena
 * offset and dispatch index to start from, bind groups not dropped since). A capture that
 * touches anything a replay cannot repeat (step scratch from the pool, copies, readbacks,
 * uploads, a mid-step flush, the per-dispatch profiler) yields no graph.
 */
import type { BindSlot } from './recorder.ts';

export interface StepGraph {
  /** Arena byte offset of the first dispatch's Params. */
  readonly at: number;
  /** Dispatch index of the first dispatch within its step. */
  readonly first: number;
  /** The context's bind-group epoch the groups belong to (GpuContext.bindGroupEpoch). */
  readonly epoch: number;
  /** The arena bytes [at, at + params.length) the dispatches read. */
  readonly params: Uint8Array;
  /** Per dispatch: its pipeline and bind group. */
  readonly pipelines: readonly GPUComputePipeline[];
  readonly groups: readonly GPUBindGroup[];
  /** Per dispatch: workgroups x, y, z (3 entries each). */
  readonly counts: Uint32Array;
  /** Per dispatch: the bind slot the recording left (restored on replay, so later lookups stay hits). */
  readonly slots: readonly BindSlot[];
}

/** What a capture collects while the ops record (recorder.ts). */
export interface GraphCapture {
  readonly at: number;
  readonly first: number;
  readonly epoch: number;
  readonly pipelines: GPUComputePipeline[];
  readonly groups: GPUBindGroup[];
  readonly counts: number[];
  /** Why the capture cannot be replayed (null: it can). */
  broken: string | null;
}

/**
 * Graphs of one model, least recently used evicted past `capacity`. Keys are the caller's
 * (every host value the recording depends on, as a string).
 */
export class StepGraphs {
  private readonly map = new Map<string, StepGraph>();
  /** Steps replayed, and graphs captured (metrics and tests). */
  replayed = 0;
  captured = 0;

  constructor(readonly capacity = 64) {}

  get(key: string): StepGraph | undefined {
    const g = this.map.get(key);
    if (g) {
      // Most recent last: Map keeps insertion order.
      this.map.delete(key);
      this.map.set(key, g);
    }
    return g;
  }

  set(key: string, g: StepGraph): void {
    this.map.delete(key);
    this.map.set(key, g);
    this.captured++;
    if (this.map.size > this.capacity) this.map.delete(this.map.keys().next().value!);
  }

  get size(): number {
    return this.map.size;
  }

  clear(): void {
    this.map.clear();
  }
}

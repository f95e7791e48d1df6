/**
 * GpuContext bundles what every kernel call needs: the device, the pipeline
 * cache and the scratch-buffer pool. Steps are recorded with a Recorder
 * (core/gpu/recorder.ts): one command encoder, one compute pass, one uniform
 * upload and one submission per step.
 */
import { BufferPool, STORAGE, uploadBuffer } from './buffers.ts';
import { createGpu, type Gpu, type GpuOptions } from './device.ts';
import { PipelineCache } from './pipelines.ts';
import { Profiler } from './profiler.ts';
import { type BindSlot, Recorder } from './recorder.ts';
import { StepTimer } from './step_timer.ts';
import { byteLength, type DType, type Tensor } from './tensor.ts';
import { encodeF16 } from '../formats/gguf_quants.ts';
import { defaultVariant, type Variant } from '../ops/variant.ts';

export class GpuContext {
  readonly pipelines: PipelineCache;
  readonly pool: BufferPool;
  private readonly bufferIds = new WeakMap<GPUBuffer | GPUTexture, number>();
  private nextBufferId = 1;
  /** Bind groups keyed by pipeline + bindings (recorder.ts); cleared when it grows too large. */
  readonly bindGroups = new Map<string, GPUBindGroup>();
  /**
   * The bind group of each dispatch index of the latest step recorded (recorder.ts BindSlot):
   * decode steps repeat the same dispatches, so most lookups are a comparison with the slot.
   */
  readonly bindSlots: BindSlot[] = [];

  /** Kernel family variant used by ops unless a call overrides it. */
  variant: Variant;
  /** When set, every dispatch is timed (see profiler.ts). */
  profiler: Profiler | null = null;
  /** When set, each step's GPU time is measured (see step_timer.ts). */
  stepTimer: StepTimer | null = null;

  constructor(readonly gpu: Gpu) {
    this.pipelines = new PipelineCache(gpu.device);
    this.variant = defaultVariant(this);
    this.pool = new BufferPool(gpu.device);
  }

  static async create(options?: GpuOptions): Promise<GpuContext> {
    const ctx = new GpuContext(await createGpu(options));
    if (options?.variant) ctx.variant = options.variant;
    return ctx;
  }

  get device(): GPUDevice {
    return this.gpu.device;
  }

  /** Incremented by dropBindGroups: step graphs (step_graph.ts) hold groups of one epoch only. */
  bindGroupEpoch = 0;

  /** Forgets every cached bind group (after a failed step, which may have cached an invalid one). */
  dropBindGroups(): void {
    this.bindGroups.clear();
    this.bindSlots.length = 0;
    this.bindGroupEpoch++;
  }

  bufferId(b: GPUBuffer | GPUTexture): number {
    let id = this.bufferIds.get(b);
    if (id === undefined) this.bufferIds.set(b, (id = this.nextBufferId++));
    return id;
  }

  /** Starts per-kernel GPU timing; null if the adapter has no timestamp queries. */
  startProfiling(): Profiler | null {
    if (!this.gpu.caps.timestamps) return null;
    this.profiler ??= new Profiler(this.device);
    return this.profiler;
  }

  /** Turns on per-step GPU busy time (a no-op without timestamp queries); returns the timer. */
  timeSteps(): StepTimer | null {
    if (this.gpu.caps.timestamps) this.stepTimer ??= new StepTimer(this.device);
    return this.stepTimer;
  }

  stopProfiling(): void {
    this.profiler?.destroy();
    this.profiler = null;
  }

  recorder(): Recorder {
    return new Recorder(this);
  }

  /**
   * A new tensor holding `data` (exactly sized; caller owns and destroys it). `scales`: the
   * q8_0 / q4_0 block scales, f16 values (a GGUF block's `d`), stored as halves (Tensor.scales).
   */
  tensor(data: ArrayBufferView, shape: readonly number[], dtype: DType, scales?: Float32Array): Tensor {
    const buffer = uploadBuffer(this.device, data, STORAGE);
    const s = scales ? uploadBuffer(this.device, encodeF16(scales), STORAGE) : undefined;
    return { buffer, offset: 0, shape, dtype, ...(s ? { scales: s } : {}) };
  }

  /** An uninitialised scratch tensor from the pool; give it back with `free`. */
  scratch(shape: readonly number[], dtype: DType = 'f32'): Tensor {
    return { buffer: this.pool.acquire(byteLength(shape, dtype)), offset: 0, shape, dtype };
  }

  free(t: Tensor): void {
    this.pool.release(t.buffer);
  }

  /** Records, submits and reads back one tensor: convenience for tests and tools. */
  async read(t: Tensor): Promise<ArrayBuffer> {
    const rec = this.recorder();
    const pending = rec.readback(t);
    rec.submit();
    return pending;
  }

  destroy(): void {
    this.pool.trim();
    this.gpu.destroy();
  }
}

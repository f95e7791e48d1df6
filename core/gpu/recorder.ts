/**
 * Records one GPU step: many dispatches in one compute pass, their uniforms
 * packed into one arena written with a single `writeBuffer`, then one
 * `submit`. Readbacks are copies into mappable staging buffers queued in the
 * same submission; the only awaits in a step are those maps.
 */
import type { GpuContext } from './context.ts';
import type { Kernel } from './pipelines.ts';
import type { Profiler } from './profiler.ts';
import type { GraphCapture, StepGraph } from './step_graph.ts';
import { byteLength, type Tensor } from './tensor.ts';

/** A storage binding: a whole tensor or an explicit buffer range. */
export type BufferBinding = Tensor | { buffer: GPUBuffer; offset?: number; size?: number };
/** A sampled-texture binding (`texture_2d`); `texture` identifies it in the bind-group cache. */
export interface TextureBinding {
  texture: GPUTexture;
  view: GPUTextureView;
}
export type Binding = BufferBinding | TextureBinding;

/** Bytes a buffer binding covers: a tensor's data, an explicit size, or undefined (to the buffer's end). */
function bindingSize(b: BufferBinding): number | undefined {
  return 'dtype' in b ? byteLength(b.shape, b.dtype) : b.size;
}

/**
 * What one dispatch index bound in the latest step: the kernel, its Params offset, and per binding the buffer or texture with its offset and size (-1: to the
 * end; textures 0, 0). Only ever a shortcut to a group the keyed cache would give.
 */
export interface BindSlot {
  readonly kernel: Kernel;
  readonly at: number;
  readonly refs: readonly (GPUBuffer | GPUTexture)[];
  readonly offsets: readonly number[];
  readonly sizes: readonly number[];
  readonly group: GPUBindGroup;
}

function bindSlot(kernel: Kernel, at: number, buffers: readonly Binding[], group: GPUBindGroup): BindSlot {
  const refs: (GPUBuffer | GPUTexture)[] = [];
  const offsets: number[] = [];
  const sizes: number[] = [];
  for (const b of buffers) {
    if ('view' in b) {
      refs.push(b.texture);
      offsets.push(0);
      sizes.push(0);
    } else {
      refs.push(b.buffer);
      offsets.push(b.offset ?? 0);
      sizes.push(bindingSize(b) ?? -1);
    }
  }
  return { kernel, at, refs, offsets, sizes, group };
}

/** True when `buffers` bind exactly the slot's ranges. */
function sameBindings(slot: BindSlot, buffers: readonly Binding[]): boolean {
  const { refs, offsets, sizes } = slot;
  if (refs.length !== buffers.length) return false;
  for (let i = 0; i < buffers.length; i++) {
    const b = buffers[i]!;
    if ('view' in b) {
      if (refs[i] !== b.texture) return false;
    } else if (refs[i] !== b.buffer || offsets[i] !== (b.offset ?? 0) || sizes[i] !== (bindingSize(b) ?? -1)) return false;
  }
  return true;
}

const UNIFORM = 0x40 | 0x08; // UNIFORM | COPY_DST
const MAP_READ = 0x01 | 0x08; // MAP_READ | COPY_DST

/**
 * Records the copy of `vec4s` 16-byte elements of `src` (from byte `srcOffset`, a multiple of 16)
 * into rows of `width` texels of an rgba32float texture (width * 16 a multiple of 256): the full
 * rows in one copy, the last partial row in another.
 */
export function copyRowsToTexture(enc: GPUCommandEncoder, src: GPUBuffer, srcOffset: number, vec4s: number, dst: GPUTexture, width: number): void {
  const bytesPerRow = width * 16;
  const full = Math.floor(vec4s / width);
  if (full > 0) enc.copyBufferToTexture({ buffer: src, offset: srcOffset, bytesPerRow }, { texture: dst }, [width, full]);
  const rest = vec4s - full * width;
  if (rest > 0) enc.copyBufferToTexture({ buffer: src, offset: srcOffset + full * bytesPerRow, bytesPerRow }, { texture: dst, origin: [0, full] }, [rest, 1]);
}

export class Recorder {
  private encoder: GPUCommandEncoder;
  private pass: GPUComputePassEncoder | null = null;
  private readonly stage: ArrayBuffer;
  private readonly view: DataView;
  private used = 0;
  /** Uniform bytes already written to the arena by flush() (the rest is written at the next flush or submit). */
  private written = 0;
  private readonly align: number;
  private readonly arena: GPUBuffer;
  private readonly reads: { staging: GPUBuffer; size: number; resolve: (b: ArrayBuffer) => void; reject: (e: unknown) => void }[] = [];
  private submitted = false;
  /** Dispatches recorded so far (for tests and the "few dispatches" budget). */
  dispatches = 0;

  /** Bytes of the uniform arena used so far: where the next dispatch's Params go (step graphs key on it). */
  get paramsOffset(): number {
    return this.used;
  }
  /** With a profiler: the kernel label of each timed pass, in order. */
  private readonly timed: string[] = [];
  private readonly profiler: Profiler | null;
  /** True once this step's first pass carries the step timer's timestamps. */
  private stepTimed = false;
  /** The pipeline set on the open pass (null: none yet); a pass starts with none. */
  private pipeline: GPUComputePipeline | null = null;
  /** The step graph being captured (capture() .. endCapture()), if any. */
  private capturing: GraphCapture | null = null;

  constructor(readonly ctx: GpuContext) {
    this.encoder = ctx.device.createCommandEncoder();
    this.align = ctx.gpu.limits.minUniformBufferOffsetAlignment;
    this.arena = arenaFor(ctx);
    this.stage = stagingFor(ctx, this.arena.size);
    this.view = new DataView(this.stage);
    this.profiler = ctx.profiler;
  }

  private computePass(label?: string): GPUComputePassEncoder {
    if (this.profiler && label !== undefined && this.timed.length < this.profiler.capacity) {
      // Profiling: one pass per dispatch, timestamped at both ends.
      this.endPass();
      const i = this.timed.length;
      this.timed.push(label);
      this.pass = this.encoder.beginComputePass({
        timestampWrites: { querySet: this.profiler.querySet, beginningOfPassWriteIndex: 2 * i, endOfPassWriteIndex: 2 * i + 1 },
      });
      return this.pass;
    }
    if (!this.pass) {
      const timer = this.ctx.stepTimer;
      if (timer && !this.profiler && !this.stepTimed) {
        this.stepTimed = true;
        this.pass = this.encoder.beginComputePass({ timestampWrites: { querySet: timer.querySet, beginningOfPassWriteIndex: 0, endOfPassWriteIndex: 1 } });
      } else this.pass = this.encoder.beginComputePass();
    }
    return this.pass;
  }

  private endPass(): void {
    this.pass?.end();
    this.pass = null;
    this.pipeline = null;
  }

  /**
   * Records one dispatch. Binding 0 is the Params uniform; bindings 1..n are
   * `buffers` in order. `groups` is the workgroup count [x, y, z].
   *
   * The hot path of every step (one call per kernel launch): Params are packed into the step's
   * uniform staging; the bind group comes from the context's cache, keyed on the kernel, its
   * Params offset and the exact ranges it binds, so after the first step of a shape no bind
   * group is created (its dispatches sit at the same offsets every step); the
   * pipeline is set only when it differs from the pass's current one. No arrays, objects or
   * closures are allocated here on a cache hit.
   */
  dispatch(kernel: Kernel, params: Readonly<Record<string, number>>, buffers: readonly Binding[], groups: readonly [number, number?, number?]): void {
    if (this.submitted) throw new Error('Recorder: already submitted');
    const at = this.used;
    const size = kernel.layout.byteSize;
    if (at + size > this.stage.byteLength) throw new Error('Recorder: uniform arena full (too many dispatches in one step)');
    kernel.layout.write(this.view, at, params);
    this.used = at + Math.ceil(size / this.align) * this.align;

    const group = this.bindGroup(kernel, at, buffers);
    const pass = this.computePass(this.profiler ? kernel.label : undefined);
    if (this.pipeline !== kernel.pipeline) {
      pass.setPipeline(kernel.pipeline);
      this.pipeline = kernel.pipeline;
    }
    const x = groups[0];
    const y = groups[1] ?? 1;
    const z = groups[2] ?? 1;
    pass.setBindGroup(0, group);
    pass.dispatchWorkgroups(x, y, z);
    this.dispatches++;
    const cap = this.capturing;
    if (cap) {
      cap.pipelines.push(kernel.pipeline);
      cap.groups.push(group);
      cap.counts.push(x, y, z);
    }
  }

  /**
   * Starts capturing the dispatches recorded from here as a step graph (step_graph.ts), until
   * endCapture(). Recording goes on as usual meanwhile.
   */
  capture(): void {
    if (this.submitted) throw new Error('Recorder: already submitted');
    if (this.capturing) throw new Error('Recorder: already capturing');
    this.capturing = { at: this.used, first: this.dispatches, epoch: this.ctx.bindGroupEpoch, pipelines: [], groups: [], counts: [], broken: this.profiler ? 'profiling' : null };
  }

  /** Marks the capture in progress (if any) as not replayable. */
  private breakCapture(why: string): void {
    if (this.capturing && !this.capturing.broken) this.capturing.broken = why;
  }

  /** Ends the capture: the graph of the dispatches since capture(), or null where one cannot be replayed. */
  endCapture(): StepGraph | null {
    const cap = this.capturing;
    if (!cap) throw new Error('Recorder: not capturing');
    this.capturing = null;
    const n = cap.groups.length;
    if (cap.broken || n === 0 || cap.epoch !== this.ctx.bindGroupEpoch) return null;
    const slots = this.ctx.bindSlots.slice(cap.first, cap.first + n);
    if (slots.length !== n || slots.some((s, i) => s?.group !== cap.groups[i])) return null;
    return {
      at: cap.at,
      first: cap.first,
      epoch: cap.epoch,
      params: new Uint8Array(this.stage.slice(cap.at, this.used)),
      pipelines: cap.pipelines,
      groups: cap.groups,
      counts: Uint32Array.from(cap.counts),
      slots,
    };
  }

  /**
   * Records a captured graph's dispatches: its Params bytes into the arena at the offsets its
   * bind groups name, then per dispatch the pipeline (when it changes), the bind group and the
   * workgroup counts. False, recording nothing, where the graph cannot apply here (a different
   * arena offset or dispatch index to start from, bind groups dropped since, profiling, a
   * capture in progress): the caller records through the ops instead.
   */
  replay(g: StepGraph): boolean {
    if (this.submitted) throw new Error('Recorder: already submitted');
    if (this.capturing || this.profiler || this.used !== g.at || this.dispatches !== g.first || g.epoch !== this.ctx.bindGroupEpoch) return false;
    const end = g.at + g.params.length;
    if (end > this.stage.byteLength) return false;
    new Uint8Array(this.stage, g.at, g.params.length).set(g.params);
    this.used = end;
    const pass = this.computePass();
    const { pipelines, groups, counts, slots } = g;
    const bindSlots = this.ctx.bindSlots;
    for (let i = 0; i < groups.length; i++) {
      const p = pipelines[i]!;
      if (this.pipeline !== p) {
        pass.setPipeline(p);
        this.pipeline = p;
      }
      pass.setBindGroup(0, groups[i]!);
      pass.dispatchWorkgroups(counts[3 * i]!, counts[3 * i + 1]!, counts[3 * i + 2]!);
      if (g.first + i <= bindSlots.length) bindSlots[g.first + i] = slots[i]!;
    }
    this.dispatches += groups.length;
    return true;
  }

  /**
   * The bind group for this dispatch: the slot of its index in the previous step when that bound
   * the same kernel to the same ranges (compared field by field, nothing allocated), else the
   * context's keyed cache, else a new group; the slot then remembers it. `at`: the Params offset
   * the group binds.
   */
  private bindGroup(kernel: Kernel, at: number, buffers: readonly Binding[]): GPUBindGroup {
    const slots = this.ctx.bindSlots;
    const index = this.dispatches;
    const slot = slots[index];
    if (slot && slot.kernel === kernel && slot.at === at && sameBindings(slot, buffers)) return slot.group;
    let key = `${kernel.id}@${at}`;
    for (let i = 0; i < buffers.length; i++) {
      const b = buffers[i]!;
      if ('view' in b) key += `|t${this.ctx.bufferId(b.texture)}`;
      else key += `|${this.ctx.bufferId(b.buffer)}@${b.offset ?? 0}+${bindingSize(b) ?? '*'}`;
    }
    const cache = this.ctx.bindGroups;
    let group = cache.get(key);
    if (!group) {
      if (cache.size > 8192) this.ctx.dropBindGroups();
      group = this.createBindGroup(kernel, at, buffers);
      cache.set(key, group);
    }
    if (index <= slots.length) slots[index] = bindSlot(kernel, at, buffers, group);
    return group;
  }

  /** A new bind group for `kernel` over `buffers` (a cache miss: the first step that binds these ranges). */
  private createBindGroup(kernel: Kernel, at: number, buffers: readonly Binding[]): GPUBindGroup {
    const uniform = { buffer: this.arena, offset: at, size: kernel.layout.byteSize };
    const entries: GPUBindGroupEntry[] = [{ binding: 0, resource: uniform }];
    buffers.forEach((b, i) => {
      if ('view' in b) {
        entries.push({ binding: i + 1, resource: b.view });
        return;
      }
      const size = bindingSize(b);
      const offset = b.offset ?? 0;
      entries.push({ binding: i + 1, resource: size === undefined ? { buffer: b.buffer, offset } : { buffer: b.buffer, offset, size } });
    });
    return this.ctx.device.createBindGroup({ label: kernel.label, layout: kernel.bindGroupLayout, entries });
  }

  /** Step-scoped buffers from the pool, returned after submit. */
  private readonly temps: GPUBuffer[] = [];

  /**
   * A scratch buffer of at least `bytes` that lives until this step is
   * submitted (later queue work is ordered after the step, so reuse is safe).
   */
  temp(bytes: number): GPUBuffer {
    this.breakCapture('step scratch');
    const b = this.ctx.pool.acquire(bytes);
    this.temps.push(b);
    return b;
  }

  /**
   * Returns the step's scratch to the pool last-acquired first: the pool hands buffers out
   * last-released first, so the next step that asks in the same order gets the same buffer at
   * every dispatch, and its bind groups are the slots' (no key built, no lookup).
   */
  private releaseTemps(): void {
    const temps = this.temps;
    for (let i = temps.length - 1; i >= 0; i--) this.ctx.pool.release(temps[i]!);
    temps.length = 0;
  }

  /** Uploads `data` into a step-scoped buffer (written before the step runs). */
  upload(data: ArrayBufferView): { buffer: GPUBuffer; size: number } {
    const size = Math.max(4, Math.ceil(data.byteLength / 4) * 4);
    const buffer = this.temp(size);
    this.ctx.device.queue.writeBuffer(buffer, 0, data.buffer as ArrayBuffer, data.byteOffset, data.byteLength);
    return { buffer, size };
  }

  /** Copies `size` bytes between buffers (ends the current pass). */
  copy(src: GPUBuffer, srcOffset: number, dst: GPUBuffer, dstOffset: number, size: number): void {
    this.breakCapture('a copy');
    this.endPass();
    this.encoder.copyBufferToBuffer(src, srcOffset, dst, dstOffset, size);
  }

  /**
   * Copies `vec4s` 16-byte elements from `src` at `srcOffset` (a multiple of 16) into an
   * rgba32float texture of rows `width` texels wide (width * 16 a multiple of 256), element i at
   * texel (i % width, i / width). Ends the current pass.
   */
  copyToTexture(src: GPUBuffer, srcOffset: number, vec4s: number, dst: GPUTexture, width: number): void {
    this.breakCapture('a copy');
    this.endPass();
    copyRowsToTexture(this.encoder, src, srcOffset, vec4s, dst, width);
  }

  /** Queues a readback of `t` (or `bytes` of it) resolved after `submit()`. */
  readback(t: BufferBinding, bytes?: number): Promise<ArrayBuffer> {
    const size = bytes ?? ('dtype' in t ? byteLength(t.shape, t.dtype) : (t.size ?? t.buffer.size - (t.offset ?? 0)));
    const padded = Math.ceil(size / 4) * 4;
    const staging = this.ctx.pool.acquire(padded, MAP_READ);
    this.copy(t.buffer, t.offset ?? 0, staging, 0, padded);
    return new Promise((resolve, reject) => this.reads.push({ staging, size, resolve, reject }));
  }

  /**
   * Drops the step without submitting it (a recording that failed part-way): the open pass is
   * ended, scratch and staging go back to their pools, pending readbacks reject. Nothing of the
   * step reaches the device except queue writes the caller already made.
   */
  discard(): void {
    if (this.submitted) throw new Error('Recorder: already submitted');
    this.submitted = true;
    this.endPass();
    releaseStaging(this.ctx, this.stage);
    this.releaseTemps();
    for (const r of this.reads.splice(0)) {
      this.ctx.pool.release(r.staging);
      r.reject(new Error('Recorder: step discarded before submit'));
    }
  }

  /**
   * Submits what is recorded so far, so the device starts on it while the caller prepares the
   * rest of the step on the CPU (constraint masks for the sampling that follows the forward).
   * Scratch buffers, pending readbacks and the uniform arena carry on into the rest, which
   * submit() sends: buffers the first part wrote stay valid for the second (queue order).
   */
  flush(): void {
    if (this.submitted) throw new Error('Recorder: already submitted');
    this.breakCapture('a flush');
    this.endPass();
    const { device } = this.ctx;
    if (this.used > this.written) device.queue.writeBuffer(this.arena, this.written, this.stage, this.written, this.used - this.written);
    this.written = this.used;
    device.queue.submit([this.encoder.finish()]);
    this.encoder = device.createCommandEncoder();
  }

  /** Uploads uniforms, submits the step, starts the readbacks. */
  submit(): void {
    if (this.submitted) throw new Error('Recorder: already submitted');
    this.submitted = true;
    this.endPass();
    const { device } = this.ctx;
    if (this.profiler && this.timed.length) this.profiler.resolve(this.encoder, this.timed);
    const timerRead = this.stepTimed ? this.ctx.stepTimer!.resolve(this.encoder) : null;
    if (this.used > this.written) device.queue.writeBuffer(this.arena, this.written, this.stage, this.written, this.used - this.written);
    releaseStaging(this.ctx, this.stage);
    device.queue.submit([this.encoder.finish()]);
    this.releaseTemps();
    if (timerRead) this.ctx.stepTimer!.collect(timerRead);
    if (this.profiler && this.timed.length) void this.profiler.collect();
    for (const r of this.reads) {
      r.staging.mapAsync(0x0001).then(
        () => {
          const out = r.staging.getMappedRange(0, Math.ceil(r.size / 4) * 4).slice(0, r.size);
          r.staging.unmap();
          this.ctx.pool.release(r.staging);
          try {
            this.ctx.gpu.check();
            r.resolve(out);
          } catch (e) {
            // A failed step may have cached an invalid bind group: drop them all.
            this.ctx.dropBindGroups();
            r.reject(e);
          }
        },
        (e: unknown) => {
          try {
            this.ctx.gpu.check();
          } catch (typed) {
            r.reject(typed);
            return;
          }
          r.reject(e);
        },
      );
    }
  }
}

/** CPU-side uniform staging, recycled: writeBuffer copies it at submit, so it is free right after. */
const stagings = new WeakMap<GpuContext, ArrayBuffer[]>();
function stagingFor(ctx: GpuContext, size: number): ArrayBuffer {
  return stagings.get(ctx)?.pop() ?? new ArrayBuffer(size);
}
function releaseStaging(ctx: GpuContext, b: ArrayBuffer): void {
  let list = stagings.get(ctx);
  if (!list) stagings.set(ctx, (list = []));
  if (list.length < 4) list.push(b);
}

/** One uniform arena per context, reused across steps: queue writes are ordered with submits. */
const arenas = new WeakMap<GpuContext, GPUBuffer>();
function arenaFor(ctx: GpuContext): GPUBuffer {
  let a = arenas.get(ctx);
  if (!a) {
    a = ctx.device.createBuffer({ size: 1 << 20, usage: UNIFORM, label: 'uniform-arena' });
    arenas.set(ctx, a);
  }
  return a;
}

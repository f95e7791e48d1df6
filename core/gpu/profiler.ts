/**
 * Per-kernel GPU time from timestamp queries (where the adapter has
 * `timestamp-query`). While a profiler is attached to a context, every
 * dispatch runs in its own timestamped pass — slower, so this is for
 * benchmarks, tools and metrics sampling, not the default path. Totals
 * accumulate by kernel label until `take()`.
 */
export interface KernelTime {
  label: string;
  calls: number;
  /** Total GPU time in milliseconds. */
  ms: number;
}

export class Profiler {
  readonly querySet: GPUQuerySet;
  private readonly resolveBuf: GPUBuffer;
  private readonly readBuf: GPUBuffer;
  private pendingLabels: string[] | null = null;
  private busy: Promise<void> = Promise.resolve();
  private readonly totals = new Map<string, { calls: number; ns: number }>();

  constructor(readonly device: GPUDevice,
    /** Most timed dispatches per step. */
    readonly capacity = 512,
  ) {
    this.querySet = device.createQuerySet({ type: 'timestamp', count: 2 * capacity });
    this.resolveBuf = device.createBuffer({ size: 16 * capacity, usage: 0x0200 | 0x0004 }); // QUERY_RESOLVE | COPY_SRC
    this.readBuf = device.createBuffer({ size: 16 * capacity, usage: 0x0001 | 0x0008 }); // MAP_READ | COPY_DST
  }

  /** Records resolve + copy of this step's timestamps into `encoder`. */
  resolve(encoder: GPUCommandEncoder, labels: string[]): void {
    const n = 2 * labels.length;
    encoder.resolveQuerySet(this.querySet, 0, n, this.resolveBuf, 0);
    encoder.copyBufferToBuffer(this.resolveBuf, 0, this.readBuf, 0, n * 8);
    this.pendingLabels = labels;
  }

  /** Reads the last step's timestamps (call after submit). */
  collect(): Promise<void> {
    const labels = this.pendingLabels;
    if (!labels) return this.busy;
    this.pendingLabels = null;
    this.busy = this.busy.then(async () => {
      await this.readBuf.mapAsync(0x0001, 0, labels.length * 16);
      const t = new BigUint64Array(this.readBuf.getMappedRange(0, labels.length * 16).slice(0));
      this.readBuf.unmap();
      labels.forEach((label, i) => {
        const ns = Number(t[2 * i + 1]! - t[2 * i]!);
        const e = this.totals.get(label) ?? { calls: 0, ns: 0 };
        e.calls++;
        e.ns += Math.max(0, ns);
        this.totals.set(label, e);
      });
    });
    return this.busy;
  }

  /** Totals since the last take, slowest first. */
  async take(): Promise<KernelTime[]> {
    await this.busy;
    const out = [...this.totals].map(([label, v]) => ({ label, calls: v.calls, ms: v.ns / 1e6 })).sort((a, b) => b.ms - a.ms);
    this.totals.clear();
    return out;
  }

  destroy(): void {
    this.querySet.destroy();
    this.resolveBuf.destroy();
    this.readBuf.destroy();
  }
}

/**
 * GPU busy time per step from timestamp queries, cheap enough to stay on:
 * the first compute pass of each step (which holds all of a model step's
 * dispatches; only the readback copy follows it) is timestamped at both
 * ends, resolved in the same submission and read back asynchronously.
 * `busyMs` is the running total; the metrics turn it into utilization.
 */
export class StepTimer {
  readonly querySet: GPUQuerySet;
  private readonly resolveBuf: GPUBuffer;
  private readonly free: GPUBuffer[] = [];
  /** Total GPU time of timed steps, in milliseconds. */
  busyMs = 0;
  steps = 0;

  constructor(private readonly device: GPUDevice) {
    this.querySet = device.createQuerySet({ type: 'timestamp', count: 2 });
    this.resolveBuf = device.createBuffer({ size: 16, usage: 0x0200 | 0x0004 }); // QUERY_RESOLVE | COPY_SRC
  }

  /** Records the resolve and copy; returns the mappable buffer to read after submit. */
  resolve(encoder: GPUCommandEncoder): GPUBuffer {
    const read = this.free.pop() ?? this.device.createBuffer({ size: 16, usage: 0x0001 | 0x0008 }); // MAP_READ | COPY_DST
    encoder.resolveQuerySet(this.querySet, 0, 2, this.resolveBuf, 0);
    encoder.copyBufferToBuffer(this.resolveBuf, 0, read, 0, 16);
    return read;
  }

  /** Adds the step's duration once its timestamps are readable. */
  collect(read: GPUBuffer): void {
    read.mapAsync(0x0001).then(
      () => {
        const t = new BigUint64Array(read.getMappedRange().slice(0));
        read.unmap();
        this.free.push(read);
        const ns = Number(t[1]! - t[0]!);
        if (ns > 0 && ns < 60e9) {
          this.busyMs += ns / 1e6;
          this.steps++;
        }
      },
      () => read.destroy(),
    );
  }
}

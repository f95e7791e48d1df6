/**
 * Buffer pool and transfers.
 *
 * Scratch buffers (activations, logits) are recycled by power-of-two size
 * class and usage so a decode step allocates nothing after warm-up. Weights
 * are created exactly sized with `mappedAtCreation`, which writes straight
 * into GPU-visible memory without a second staging copy.
 */
export const STORAGE = 0x80 | 0x08 | 0x04; // STORAGE | COPY_DST | COPY_SRC

export class BufferPool {
  private readonly free = new Map<string, GPUBuffer[]>();
  private readonly sizeOf = new WeakMap<GPUBuffer, string>();
  /** Bytes currently allocated through this pool (live + free). */
  allocatedBytes = 0;

  constructor(private readonly device: GPUDevice) {}

  static sizeClass(bytes: number): number {
    return Math.max(256, 2 ** Math.ceil(Math.log2(Math.max(1, bytes))));
  }

  acquire(bytes: number, usage: number = STORAGE, label?: string): GPUBuffer {
    const size = BufferPool.sizeClass(bytes);
    const key = `${size}:${usage}`;
    const hit = this.free.get(key)?.pop();
    if (hit) return hit;
    const buf = this.device.createBuffer({ size, usage, label });
    this.sizeOf.set(buf, key);
    this.allocatedBytes += size;
    return buf;
  }

  release(buf: GPUBuffer): void {
    const key = this.sizeOf.get(buf);
    if (!key) throw new Error('BufferPool.release: buffer was not acquired from this pool');
    let list = this.free.get(key);
    if (!list) this.free.set(key, (list = []));
    list.push(buf);
  }

  /** Destroys all free buffers (live ones stay with their owners). */
  trim(): void {
    for (const list of this.free.values()) {
      for (const b of list) {
        this.allocatedBytes -= b.size;
        b.destroy();
      }
    }
    this.free.clear();
  }
}

/** Creates a buffer holding `data` (padded to 4 bytes) via mappedAtCreation. */
export function uploadBuffer(device: GPUDevice, data: ArrayBufferView, usage: number = STORAGE, label?: string): GPUBuffer {
  const size = Math.max(4, Math.ceil(data.byteLength / 4) * 4);
  const buf = device.createBuffer({ size, usage, mappedAtCreation: true, label });
  new Uint8Array(buf.getMappedRange()).set(new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
  buf.unmap();
  return buf;
}

/**
 * What core/models/memory_plan.ts needs from a live adapter: its description, and a probe of
 * how much device memory it lets us allocate (WebGPU reports no memory size). The probe
 * allocates buffers of up to 1 GiB inside an out-of-memory error scope until one fails or a
 * cap is reached, then frees them all; it is for hardware adapters only (on CPU emulation
 * device memory is host memory, which a probe would take from everything else).
 */
import type { AdapterDescription } from '../models/memory_plan.ts';
import type { Gpu } from './device.ts';

/** The adapter as the memory plan sees it. */
export function describeAdapter(gpu: Pick<Gpu, 'info' | 'caps' | 'limits'>, probedMemory: number | null = null, reportedMemory: number | null = null): AdapterDescription {
  return {
    name: gpu.info.name,
    software: gpu.info.isCpu,
    f16: gpu.caps.f16,
    maxBufferSize: Number(gpu.limits.maxBufferSize),
    maxStorageBufferBindingSize: Number(gpu.limits.maxStorageBufferBindingSize),
    reportedMemory,
    probedMemory,
  };
}

/**
 * Bytes of device memory allocatable right now, up to `capBytes`, in chunks of
 * min(`chunkBytes`, maxBufferSize). Everything allocated is destroyed before returning.
 */
export async function probeDeviceMemory(device: GPUDevice, capBytes: number, chunkBytes = 2 ** 30): Promise<number> {
  const chunk = Math.min(chunkBytes, Number(device.limits.maxBufferSize));
  const held: GPUBuffer[] = [];
  let total = 0;
  try {
    while (total + chunk <= capBytes) {
      device.pushErrorScope('out-of-memory');
      device.pushErrorScope('validation');
      const b = device.createBuffer({ size: chunk, usage: GPUBufferUsage.STORAGE, label: 'memory-probe' });
      const invalid = await device.popErrorScope();
      const oom = await device.popErrorScope();
      if (invalid || oom) {
        b.destroy();
        break;
      }
      held.push(b);
      total += chunk;
    }
  } finally {
    for (const b of held) b.destroy();
  }
  return total;
}

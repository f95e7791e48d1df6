/**
 * Device memory as the GPU vendor's own tools report it, for the memory plan's device budget
 * (core/models/memory_plan.ts: configured > reported > probed > default). WebGPU reports no
 * memory size and Dawn's Node binding exposes no memory heaps, so on a GPU host the server asks
 * the driver stack directly:
 *   NVIDIA — `nvidia-smi --query-gpu=name,pci.device_id,memory.free --format=csv,noheader,nounits`
 *            (MiB free on each GPU, after what other processes hold);
 *   AMD    — amdgpu's sysfs: /sys/class/drm/card<N>/device/{vendor, device, mem_info_vram_total,
 *            mem_info_vram_used} (bytes).
 * The figure is the memory free now on the GPU the adapter names (by PCI device id, else by name;
 * with several GPUs of that vendor and no match, the smallest free figure: the plan must fit on
 * whichever one Dawn picked). Null where no tool answers: browsers, CPU emulation, other vendors,
 * a missing or failing nvidia-smi. Node only; core reads nothing of this itself.
 */
import { execFile } from 'node:child_process';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';

const MiB = 2 ** 20;

/** What the lookup needs from the adapter (core/gpu/device.ts GpuInfo). */
export interface AdapterIds {
  name: string;
  vendor: string;
  device: string;
  isCpu: boolean;
}

/** One GPU as a vendor tool lists it. */
export interface VendorGpu {
  name: string;
  /** PCI device id, lower-case hex without 0x ("2330"), or "" when unknown. */
  deviceId: string;
  freeBytes: number;
}

export interface VendorMemoryOptions {
  /** Runs nvidia-smi with these arguments; resolves its stdout, rejects when it cannot run. */
  nvidiaSmi?: (args: string[]) => Promise<string>;
  /** Root of the sysfs tree (default /sys). */
  sysfs?: string;
}

const SMI_ARGS = ['--query-gpu=name,pci.device_id,memory.free', '--format=csv,noheader,nounits'];

function runNvidiaSmi(args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile('nvidia-smi', args, { timeout: 5000, maxBuffer: 1 << 20 }, (err, stdout) => (err ? reject(err) : resolve(stdout)));
  });
}

/**
 * nvidia-smi's CSV (name, pci.device_id, memory.free in MiB; one GPU per line). pci.device_id is
 * "0x233010DE": device id in the high 16 bits, vendor 0x10DE in the low ones. Lines that do not
 * parse (an "[N/A]" figure) are left out.
 */
export function parseNvidiaSmi(csv: string): VendorGpu[] {
  const out: VendorGpu[] = [];
  for (const line of csv.split('\n')) {
    const cells = line.split(',').map((c) => c.trim());
    if (cells.length < 3) continue;
    const free = Number(cells[cells.length - 1]);
    if (!Number.isFinite(free) || free < 0 || cells[cells.length - 1] === '') continue;
    const pci = /^0x([0-9a-f]{4})([0-9a-f]{4})$/i.exec(cells[cells.length - 2]!);
    out.push({ name: cells.slice(0, -2).join(','), deviceId: pci ? pci[1]!.toLowerCase() : '', freeBytes: free * MiB });
  }
  return out;
}

/** amdgpu cards under `sysfs`: vendor 0x1002 with VRAM counters; free = total - used. */
export async function amdgpuCards(sysfs = '/sys'): Promise<VendorGpu[]> {
  const drm = join(sysfs, 'class', 'drm');
  let entries: string[];
  try {
    entries = await readdir(drm);
  } catch {
    return [];
  }
  const out: VendorGpu[] = [];
  for (const card of entries.filter((e) => /^card\d+$/.test(e)).sort()) {
    const dev = join(drm, card, 'device');
    const read = async (f: string): Promise<string | null> => readFile(join(dev, f), 'utf8').then((s) => s.trim(), () => null);
    if ((await read('vendor'))?.toLowerCase() !== '0x1002') continue;
    const total = Number(await read('mem_info_vram_total'));
    const used = Number(await read('mem_info_vram_used'));
    if (!Number.isFinite(total) || total <= 0 || !Number.isFinite(used)) continue;
    const id = (await read('device')) ?? '';
    out.push({ name: card, deviceId: id.replace(/^0x/i, '').toLowerCase(), freeBytes: Math.max(0, total - used) });
  }
  return out;
}

/** The adapter's PCI device id when its info carries one (Dawn on Vulkan/D3D12 gives "0x2330" or "2330"). */
function adapterDeviceId(a: AdapterIds): string | null {
  const m = /^(?:0x)?([0-9a-f]{4})$/i.exec(a.device.trim());
  return m ? m[1]!.toLowerCase() : null;
}

/** The GPU among `gpus` the adapter is, by device id, else by name; else the smallest free figure. */
export function pickGpu(a: AdapterIds, gpus: VendorGpu[]): VendorGpu | null {
  if (gpus.length === 0) return null;
  const id = adapterDeviceId(a);
  const byId = id ? gpus.filter((g) => g.deviceId === id) : [];
  const name = a.name.toLowerCase();
  const byName = gpus.filter((g) => name !== '' && (name.includes(g.name.toLowerCase()) || g.name.toLowerCase().includes(name)));
  const pool = byId.length ? byId : byName.length ? byName : gpus;
  return pool.reduce((m, g) => (g.freeBytes < m.freeBytes ? g : m));
}

const NVIDIA = /nvidia|^0x10de$/i;
const AMD = /amd|ati|radeon|^0x1002$/i;

/** Free device memory of the adapter's GPU as its vendor's tools report it, in bytes; null where none answers. */
export async function vendorMemory(a: AdapterIds, o: VendorMemoryOptions = {}): Promise<number | null> {
  if (a.isCpu) return null;
  const who = `${a.vendor} ${a.name}`;
  if (NVIDIA.test(a.vendor) || /nvidia/i.test(who)) {
    try {
      return pickGpu(a, parseNvidiaSmi(await (o.nvidiaSmi ?? runNvidiaSmi)(SMI_ARGS)))?.freeBytes ?? null;
    } catch {
      return null; // no nvidia-smi on this host, or it failed: the plan probes instead
    }
  }
  if (AMD.test(a.vendor) || /amd|radeon/i.test(who)) return pickGpu(a, await amdgpuCards(o.sysfs))?.freeBytes ?? null;
  return null;
}

const perContext = new WeakMap<object, Promise<number | null>>();

/**
 * vendorMemory for a GPU context, read once per context (before its first model: the free
 * memory every model on it is then planned against, as the probe is).
 */
export function contextVendorMemory(ctx: { gpu: { info: AdapterIds } }, o: VendorMemoryOptions = {}): Promise<number | null> {
  let p = perContext.get(ctx);
  if (!p) perContext.set(ctx, (p = vendorMemory(ctx.gpu.info, o)));
  return p;
}

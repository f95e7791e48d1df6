/**
 * Vendor-reported device memory (server/vendor_memory.ts): nvidia-smi's CSV as it prints it,
 * amdgpu's sysfs counters in a tree laid out as the kernel's, the choice of GPU for an adapter,
 * and the budget order in the memory plan (configured > reported > probed > default). This host
 * has no GPU: nvidia-smi is absent here, and that real absence must read as "no figure".
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { planDecoder } from '../../core/models/load.ts';
import { dirSource } from '../../server/fs_source.ts';
import { DEFAULT_MODEL_DIR } from '../../server/paths.ts';
import { amdgpuCards, parseNvidiaSmi, pickGpu, vendorMemory, type AdapterIds } from '../../server/vendor_memory.ts';
import { gpuFor, TEST_BACKENDS } from '../helpers/gpu.ts';

const MiB = 2 ** 20;
const H100: AdapterIds = { name: 'NVIDIA H100 80GB HBM3', vendor: 'nvidia', device: '0x2330', isCpu: false };
// Two GPUs, as `nvidia-smi --query-gpu=name,pci.device_id,memory.free --format=csv,noheader,nounits` prints them.
const SMI = 'NVIDIA H100 80GB HBM3, 0x233010DE, 80511\nNVIDIA L4, 0x27B810DE, 22478\n';

describe('nvidia-smi', () => {
  it('parses name, PCI device id and free MiB per GPU; lines without a figure are left out', () => {
    expect(parseNvidiaSmi(`${SMI}NVIDIA A100-SXM4-40GB, 0x20B010DE, [N/A]\n\n`)).toEqual([
      { name: 'NVIDIA H100 80GB HBM3', deviceId: '2330', freeBytes: 80511 * MiB },
      { name: 'NVIDIA L4', deviceId: '27b8', freeBytes: 22478 * MiB },
    ]);
  });

  it('picks the adapter\'s GPU by device id, else by name, else the smallest free figure', () => {
    const gpus = parseNvidiaSmi(SMI);
    expect(pickGpu(H100, gpus)?.name).toBe('NVIDIA H100 80GB HBM3');
    expect(pickGpu({ ...H100, name: 'NVIDIA L4', device: '' }, gpus)?.name).toBe('NVIDIA L4');
    expect(pickGpu({ ...H100, name: 'NVIDIA GPU', device: '' }, gpus)?.name).toBe('NVIDIA L4');
    expect(pickGpu(H100, [])).toBeNull();
  });

  it('reports the adapter\'s free bytes through the tool; a failing tool or a CPU adapter reports nothing', async () => {
    const smi = async (args: string[]): Promise<string> => {
      expect(args).toEqual(['--query-gpu=name,pci.device_id,memory.free', '--format=csv,noheader,nounits']);
      return SMI;
    };
    expect(await vendorMemory(H100, { nvidiaSmi: smi })).toBe(80511 * MiB);
    expect(await vendorMemory(H100, { nvidiaSmi: () => Promise.reject(new Error('NVIDIA-SMI has failed')) })).toBeNull();
    expect(await vendorMemory({ ...H100, isCpu: true }, { nvidiaSmi: smi })).toBeNull();
    expect(await vendorMemory({ name: 'Apple M3', vendor: 'apple', device: '', isCpu: false }, { nvidiaSmi: smi })).toBeNull();
  });

  it('reads as no figure on a host without nvidia-smi (this one)', async () => {
    expect(await vendorMemory(H100)).toBeNull();
  });
});

describe('amdgpu sysfs', () => {
  const root = mkdtempSync(join(tmpdir(), 'weft-sysfs-'));
  afterAll(() => rmSync(root, { recursive: true, force: true }));
  const card = (name: string, files: Record<string, string>): void => {
    const dir = join(root, 'class', 'drm', name, 'device');
    mkdirSync(dir, { recursive: true });
    for (const [f, v] of Object.entries(files)) writeFileSync(join(dir, f), `${v}\n`);
  };
  card('card0', { vendor: '0x8086', device: '0x56a0' }); // an Intel card: not amdgpu
  card('card1', { vendor: '0x1002', device: '0x744c', mem_info_vram_total: String(24 * 2 ** 30), mem_info_vram_used: String(3 * 2 ** 30) });
  card('card1-DP-1', { vendor: '0x1002' }); // a connector, not a card
  card('card2', { vendor: '0x1002', device: '0x73bf' }); // no VRAM counters: left out

  it('lists amdgpu cards with free = total - used', async () => {
    expect(await amdgpuCards(root)).toEqual([{ name: 'card1', deviceId: '744c', freeBytes: 21 * 2 ** 30 }]);
    expect(await amdgpuCards(join(root, 'missing'))).toEqual([]);
  });

  it('reports the AMD adapter\'s free bytes', async () => {
    const rx = { name: 'AMD Radeon RX 7900 XTX', vendor: 'amd', device: '0x744c', isCpu: false };
    expect(await vendorMemory(rx, { sysfs: root })).toBe(21 * 2 ** 30);
  });
});

describe('the budget order in the memory plan', () => {
  const backend = TEST_BACKENDS[0]!;
  it(`configured > reported > default, on ${backend}`, async () => {
    const ctx = await gpuFor(backend);
    const opts = { maxSeqs: 1, maxContext: 64, probeMemory: false };
    const reported = await planDecoder(ctx, dirSource(DEFAULT_MODEL_DIR), { ...opts, reportedMemoryBytes: 3 * 2 ** 30 });
    expect(reported.plan!.budget).toEqual({ bytes: 3 * 2 ** 30, source: 'reported' });
    const configured = await planDecoder(ctx, dirSource(DEFAULT_MODEL_DIR), { ...opts, reportedMemoryBytes: 3 * 2 ** 30, gpuMemoryBytes: 2 ** 30 });
    expect(configured.plan!.budget).toEqual({ bytes: 2 ** 30, source: 'configured' });
    const neither = await planDecoder(ctx, dirSource(DEFAULT_MODEL_DIR), opts);
    expect(neither.plan!.budget.source).toBe('default');
  });
});

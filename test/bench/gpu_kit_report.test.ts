/**
 * The GPU benchmark kit's arithmetic (bench/gpu_kit_report.ts): the steady decode window,
 * the weight bytes a decode step streams, the roofline, the prompt formula shared with
 * scripts/torch_bench.py, and the table.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { promptIds, renderTable, rooflineTokS, safetensorsEntries, steadyDecodeTokS, weightBytesPerToken, type EngineFigures } from '../../bench/gpu_kit_report.ts';
import { writeSafetensors } from '../../core/formats/safetensors.ts';

const ROOT = join(import.meta.dirname, '..', '..');

describe('steadyDecodeTokS', () => {
  it('counts only the window where every request decodes', () => {
    // 4 requests admitted one step (10 ms) apart, 10 tokens each, one token per step each.
    const reqs = [0, 1, 2, 3].map((k) => Array.from({ length: 10 }, (_, i) => (k + i) * 10));
    // Window: latest first token (30 ms) to earliest last token (90 ms): 6 steps x 4 tokens.
    expect(steadyDecodeTokS(reqs)).toBeCloseTo(24 / 0.06, 6);
    // The whole span would have diluted it: 40 tokens over 120 ms.
    expect(steadyDecodeTokS(reqs)).toBeGreaterThan(40 / 0.12);
  });

  it('is NaN without a window', () => {
    expect(steadyDecodeTokS([[0, 10], [20, 30]])).toBeNaN(); // no overlap
    expect(steadyDecodeTokS([[0], [0, 10]])).toBeNaN(); // one token only
    expect(steadyDecodeTokS([])).toBeNaN();
  });
});

describe('weight bytes per decode token', () => {
  const t = (name: string, shape: number[]) => ({ name, dtype: 'BF16' as const, shape, data: new Uint16Array(shape.reduce((a, b) => a * b, 1)) });

  it('reads a tied embedding in full (as the head) and an untied one a row at a time', () => {
    const body = [t('model.layers.0.mlp.up_proj.weight', [8, 4]), t('model.norm.weight', [4])];
    const tied = safetensorsEntries(writeSafetensors([t('model.embed_tokens.weight', [100, 4]), ...body]));
    expect(weightBytesPerToken(tied, 2)).toBe((400 + 32 + 4) * 2);
    const untied = safetensorsEntries(writeSafetensors([t('model.embed_tokens.weight', [100, 4]), t('lm_head.weight', [100, 4]), ...body]));
    expect(weightBytesPerToken(untied, 2)).toBe((4 + 400 + 32 + 4) * 2);
  });

  it('matches the data bytes of the bundled model file', () => {
    const file = join(ROOT, 'models', 'stories260K', 'model.safetensors');
    const bytes = new Uint8Array(readFileSync(file));
    const entries = safetensorsEntries(bytes);
    const headerLen = Number(new DataView(bytes.buffer, bytes.byteOffset).getBigUint64(0, true));
    const dataBytes = statSync(file).size - 8 - headerLen;
    expect(entries.every((e) => e.dtype === 'F32')).toBe(true);
    const tied = !entries.some((e) => e.name === 'lm_head.weight');
    if (tied) expect(weightBytesPerToken(entries, 4)).toBe(dataBytes);
    else expect(weightBytesPerToken(entries, 4)).toBeLessThan(dataBytes);
  });

  it('rejects a truncated header', () => {
    const full = writeSafetensors([t('a', [2, 2])]);
    expect(() => safetensorsEntries(full.subarray(0, 12))).toThrow(RangeError);
  });
});

describe('roofline and table', () => {
  it('scales the weight-streaming bound with the batch', () => {
    expect(rooflineTokS(4e12, 2e9, 1)).toBe(2000);
    expect(rooflineTokS(4e12, 2e9, 16)).toBe(32000);
    expect(rooflineTokS(4e12, 0, 1)).toBeNaN();
  });

  it('prints Weft, PyTorch and roofline rows from the higher copy bandwidth', () => {
    const base = { model: 'llama-3.2-1b', decode: { 1: 100, 16: 1500, 64: 5000 }, prefillTokens: 512, prefillTokS: 20000, ttftPromptTokens: 32, ttftMs: 12.5, weightBytesPerToken: 2.47e9 };
    const figures: EngineFigures[] = [
      { ...base, engine: 'weft', device: 'NVIDIA H200 (Dawn native)', dtype: 'f16', copyBytesPerS: 3.0e12, copyNote: 'WebGPU copy' },
      { ...base, engine: 'torch', device: 'PyTorch on NVIDIA H200', dtype: 'bf16', copyBytesPerS: 4.3e12, copyNote: 'torch copy_', decode: { 1: 80, 16: 1200 } },
    ];
    const out = renderTable(figures, [1, 16, 64]);
    const rows = out.split('\n').filter((l) => l.startsWith('|'));
    expect(rows).toHaveLength(5); // head, rule, Weft, PyTorch, roofline
    expect(new Set(rows.map((r) => r.length)).size).toBe(1); // aligned
    expect(rows[2]).toMatch(/Weft f16 .*\| +100\.0 \| +1500 \| +5000 \| 20000 \(512\) \| 12\.5 \(32\) \|/);
    expect(rows[3]).toMatch(/PyTorch eager bf16 .*\| +80\.0 \| +1200 \| +- \|/);
    const b1 = Math.round(4.3e12 / 2.47e9).toString();
    expect(rows[4]).toContain(`| ${' '.repeat(Math.max(0, 9 - b1.length))}${b1} |`);
    expect(out).toContain("torch's copy");
  });
});

describe('prompt ids', () => {
  it('stay in [1, vocab - 1) and differ between requests', () => {
    const a = promptIds(64, 0, 512, 1234);
    const b = promptIds(64, 1, 512, 1234);
    expect(a.every((x) => x >= 1 && x < 511)).toBe(true);
    expect(a).not.toEqual(b);
  });

  it('are the same ids scripts/torch_bench.py feeds PyTorch', () => {
    // The Python function, run on its own (no torch import needed for it).
    const src = readFileSync(join(ROOT, 'scripts', 'torch_bench.py'), 'utf8');
    const fn = /^def prompt_ids\(.*?(?=^\S)/ms.exec(src)?.[0];
    expect(fn).toBeDefined();
    const py = execFileSync('python3', ['-c', `${fn}\nimport json\nprint(json.dumps([prompt_ids(40, k, 151936, 1234) for k in (0, 7, 63)]))`], { encoding: 'utf8' });
    expect(JSON.parse(py)).toEqual([0, 7, 63].map((k) => promptIds(40, k, 151936, 1234)));
  });
});

/**
 * Real shapes against independent PyTorch goldens (slow group: `npx vitest run -c
 * vitest.slow.config.ts`). scripts/make_realshape.py writes, from a fixed seed, a bf16
 * checkpoint with the exact published config of Qwen2.5-0.5B (all 24 layers) and of
 * Llama-3.2-1B (4 of its 16 layers; every other dimension exact), the real tokenizer.json,
 * and the logits / greedy tokens of its own plain-PyTorch forward (float32 on the bf16
 * weights). Weft loads the folder as users would (`auto`: f16 on the device) and must match:
 *   logits of the first positions: max |diff| <= 1e-2 * max |golden logit|
 *     (f16 storage of bf16 weights is exact except f16 subnormals; f32 accumulation order);
 *   greedy ids: equal wherever the golden top-1/top-2 gap exceeds twice that tolerance.
 * Checkpoints are cached under .cache/realshape/ (about 1 GB each).
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { loadDecoder } from '../../core/models/load.ts';
import { dirSource } from '../../server/fs_source.ts';
import { gpuFor, TEST_BACKENDS } from '../helpers/gpu.ts';
import { absMax, allPositionLogits, maxAbsDiff } from '../helpers/tiny_decoder.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const TOL = 1e-2;

interface Golden {
  prompt_ids: number[];
  positions: number;
  vocab: number;
  greedy_ids: number[];
  top2_gaps: number[];
  max_abs_logit: number;
}

/** The checkpoint folder for (model, layers), written by the script on first use. */
function checkpoint(model: string, layers: number): string {
  const dir = join(ROOT, '.cache', 'realshape', `${model}-L${layers}-s1234`);
  if (!existsSync(join(dir, 'golden.json'))) {
    execFileSync('/usr/bin/python3', [join(ROOT, 'scripts', 'make_realshape.py'), '--model', model, '--out', dir, ...(layers ? ['--layers', String(layers)] : [])], { stdio: 'inherit' });
  }
  return dir;
}

const CASES: [string, number][] = [
  ['qwen2.5-0.5b', 0],
  ['llama-3.2-1b', 4],
];

describe.each(CASES)('%s shape (layers: %i = all) against its PyTorch golden', (model, layers) => {
  it.each(TEST_BACKENDS.slice(0, 1))('bf16 safetensors on %s: first logits and greedy ids', async (backend) => {
    const dir = checkpoint(model, layers);
    const g = JSON.parse(readFileSync(join(dir, 'golden.json'), 'utf8')) as Golden;
    const golden = new Float32Array(readFileSync(join(dir, 'golden_logits.f32')).buffer.slice(0));
    const ctx = await gpuFor(backend);
    const d = await loadDecoder(ctx, dirSource(dir), { maxSeqs: 8, maxContext: 64, maxTokensPerStep: 16 });
    try {
      expect(d.weights.layers[0]!.qkv.w.dtype).toBe('f16');
      const V = g.vocab;
      const all = await allPositionLogits(d, g.prompt_ids);
      const first = all.subarray(0, g.positions * V);
      const err = maxAbsDiff(first, golden) / g.max_abs_logit;
      console.info(`${model} L${layers || 'all'}: max |Δlogit| / max|golden| = ${err.toExponential(2)} (max|golden| ${g.max_abs_logit.toFixed(3)}); device weights ${(d.loadStats.deviceWeightBytes / 2 ** 20).toFixed(0)} MiB, host peak ${(d.loadStats.peakHostBytes / 2 ** 20).toFixed(0)} MiB, load ${d.loadStats.loadMs} ms`);
      expect(err).toBeLessThan(TOL);
      // Greedy: the argmax after the prompt, then after each golden token.
      const ids = [...g.prompt_ids];
      for (let i = 0; i < g.greedy_ids.length; i++) {
        const rows = i === 0 ? all : await allPositionLogits(d, ids);
        const last = rows.subarray((ids.length - 1) * V, ids.length * V);
        let best = 0;
        for (let v = 1; v < V; v++) if (last[v]! > last[best]!) best = v;
        if (g.top2_gaps[i]! > 2 * TOL * absMax(golden)) expect(best, `greedy step ${i}`).toBe(g.greedy_ids[i]);
        ids.push(g.greedy_ids[i]!);
      }
    } finally {
      d.destroy();
    }
  });
});

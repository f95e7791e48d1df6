/**
 * The PyTorch anchor of the GPU benchmark kit (scripts/torch_bench.py) computes what the
 * goldens compute: its KV-cached, batched forward, fed a prompt in two chunks and then
 * single steps, matches scripts/make_realshape.py's cache-free forward at every position
 * (f32 on the CPU, the bundled stories260K; `--check`). Debian's python3 with torch, as
 * the real-shape goldens use.
 */
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

it('torch_bench.py forward matches the golden forward', () => {
  const out = execFileSync('/usr/bin/python3', [join(ROOT, 'scripts', 'torch_bench.py'), '--check', '--model', join(ROOT, 'models', 'stories260K')], { encoding: 'utf8' });
  expect(out).toMatch(/: ok$/m);
});

/**
 * `weft pull` end to end: the real CLI (bin/weft.js) in a child process
 * against the fake Hub on loopback. Prints the snapshot path, reports progress
 * as JSON lines when stderr is not a terminal, needs no network once cached,
 * and exits 1 with the typed error for a gated model without a token.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeHub, type FakeHub } from '../helpers/fake_hub.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const STORIES = join(ROOT, 'models/stories260K');

function weft(args: string[], env: Record<string, string>): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((done) => {
    execFile(process.execPath, ['bin/weft.js', ...args], { cwd: ROOT, env: { ...process.env, ...env }, timeout: 60_000 }, (err, stdout, stderr) => {
      done({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr });
    });
  });
}

describe('weft pull (fake Hub)', () => {
  let hub: FakeHub;
  let home: string;
  beforeAll(async () => {
    home = await mkdtemp(join(tmpdir(), 'weft-hf-cli-'));
    hub = await startFakeHub({ 'tiny/stories': { dir: STORIES }, 'tiny/gated': { dir: STORIES, token: 't0k' } });
  });
  afterAll(async () => {
    await hub.close();
    await rm(home, { recursive: true, force: true });
  });

  it('pulls, then finds the cached model with the Hub unreachable; a gated model fails with its code', async () => {
    const env = { HF_HOME: home, HF_ENDPOINT: hub.endpoint };
    const first = await weft(['pull', 'tiny/stories'], env);
    expect(first.code, first.stderr).toBe(0);
    const snap = first.stdout.trim();
    expect(snap.startsWith(join(home, 'hub', 'models--tiny--stories', 'snapshots'))).toBe(true);
    expect((await stat(join(snap, 'model.safetensors'))).size).toBe((await stat(join(STORIES, 'model.safetensors'))).size);
    const lines = first.stderr.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as { event: string; all_loaded: number; all_total: number });
    expect(lines.length).toBeGreaterThan(1);
    expect(lines.every((l) => l.event === 'pull_progress')).toBe(true);
    expect(lines.at(-1)!.all_loaded).toBe(lines.at(-1)!.all_total);

    const again = await weft(['pull', 'tiny/stories'], { HF_HOME: home, HF_ENDPOINT: 'http://127.0.0.1:9' });
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout.trim()).toBe(snap);

    const gated = await weft(['pull', 'tiny/gated'], env);
    expect(gated.code).toBe(1);
    expect(gated.stderr).toMatch(/HF_TOKEN.*\[hub_auth_required\]/);
    const bad = await weft(['pull', './not-a-hub-id'], env);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/invalid_argument/);
  });
});

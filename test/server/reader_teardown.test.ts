/**
 * A server with two OpenGL ES readers closes cleanly, round after round: the reader threads
 * release their GPU devices one at a time (server/readers/transport.ts). Stopped together,
 * two Dawn / Mesa OpenGL ES devices torn down at once crashed the process (SIGSEGV or SIGABRT)
 * in most runs. Real service, real worker threads and devices, in a child process so that a
 * crash is an exit signal here rather than the end of the test runner.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const TSX = fileURLToPath(new URL('../../node_modules/.bin/tsx', import.meta.url));
const CHILD = fileURLToPath(new URL('./teardown_child.ts', import.meta.url));

describe('closing a server with two OpenGL ES readers', () => {
  it('stops both readers without crashing the process, three rounds in one process', async () => {
    const child = spawn(TSX, [CHILD, '3'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve) => child.once('exit', (c, s) => resolve([c, s])));
    expect({ code, signal }, err.slice(-2000)).toEqual({ code: 0, signal: null });
    expect(out.match(/^ROUND \d+$/gm)).toEqual(['ROUND 1', 'ROUND 2', 'ROUND 3']);
  }, 180_000);
});

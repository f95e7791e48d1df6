/**
 * One benchmark case in a child process of its own (`node --import tsx FILE --child SPEC`),
 * so its peak RSS, its ONNX runtime choice and a crash of its GPU device are its own.
 * The child prints its result as one line `TAG{json}` on stdout; its stderr lines that
 * start with two spaces are our progress lines and go to `log` (Dawn's and onnxruntime's
 * chatter does not). A child that runs past `timeoutSec` is killed.
 */
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { REPO } from './models.ts';

export type ChildOutcome<T> = { ok: true; result: T } | { ok: false; error: string };

export function runBenchChild<T>(file: string, spec: unknown, tag: string, timeoutSec: number, log: (s: string) => void): Promise<ChildOutcome<T>> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--import', 'tsx', file, '--child', JSON.stringify(spec)], { cwd: REPO, stdio: ['ignore', 'pipe', 'pipe'], env: process.env });
    let out = '';
    let errTail = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => {
      const s = d.toString();
      errTail = (errTail + s).slice(-4000);
      for (const line of s.split('\n')) if (/^ {2}\S/.test(line)) log(line);
    });
    const timer = setTimeout(() => {
      log(`  timeout after ${timeoutSec} s: killing pid ${child.pid}`);
      child.kill('SIGKILL');
    }, timeoutSec * 1000);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      const line = out.split('\n').find((l) => l.startsWith(tag));
      if (line) return resolve({ ok: true, result: JSON.parse(line.slice(tag.length)) as T });
      const why = signal === 'SIGKILL' ? `timed out after ${timeoutSec} s` : `exited with ${code ?? signal}`;
      resolve({ ok: false, error: `${why}: ${errTail.trim().split('\n').slice(-3).join(' | ')}` });
    });
  });
}

/**
 * `npx tsx bench/<module>.ts [flags]`: runs `bench/run.ts --only <module> [flags]` in a child
 * process and exits with its code. Importing run.ts from the entry module instead would be a
 * cycle through this module's unfinished top-level await (run.ts imports the module), which
 * never settles (Node exits 13).
 */
export function runStandalone(module: string, argv: readonly string[]): void {
  const run = spawn(process.execPath, ['--import', 'tsx', join(REPO, 'bench', 'run.ts'), '--only', module, ...argv], { stdio: 'inherit' });
  run.on('close', (code) => process.exit(code ?? 1));
}

/**
 * With WEFT_TEST_PROCESS_LOG set (CI sets it), every test process appends to that file
 * when a test file starts and when it ends (after the file's own afterAll hooks):
 * `ISO-time pid start|end file`. A process that died inside a file (a native crash, which
 * Vitest reports only as "Worker exited unexpectedly", without the file or the signal)
 * leaves a start without an end; .ci/run names that file.
 */
import { appendFileSync } from 'node:fs';
import { afterAll, beforeAll, expect } from 'vitest';

const log = process.env.WEFT_TEST_PROCESS_LOG;
if (log) {
  let file = '';
  const write = (what: string): void => appendFileSync(log, `${new Date().toISOString()} ${process.pid} ${what} ${file}\n`);
  beforeAll(() => {
    file = expect.getState().testPath ?? '';
    write('start');
  });
  afterAll(() => write('end'));
}

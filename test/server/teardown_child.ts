/**
 * For reader_teardown.test.ts: `tsx teardown_child.ts <rounds>` starts a service with two
 * stories260K readers (groups `primary` and `b`) on OpenGL ES (each a worker thread with its own Dawn device), lets both
 * generate, then closes the service, which stops both readers at once; `rounds` times in one
 * process. Prints `ROUND <n>` after each close; exits 0 when every round closed.
 */
import { prepareGpuEnv } from '../../core/gpu/device.ts';
import { loadConfig } from '../../server/config.ts';
import { DEFAULT_MODEL_DIR } from '../../server/paths.ts';
import { Service } from '../../server/service.ts';

prepareGpuEnv();
const rounds = Number(process.argv[2] ?? 3);
for (let n = 1; n <= rounds; n++) {
  const second = { model: DEFAULT_MODEL_DIR, reader_id: 'b-0', consumer_group: 'b', backend: 'opengles' };
  const svc = new Service(loadConfig({ env: {}, overrides: { embeddingModel: '', backend: 'opengles', assistantName: 'off', logDisableTimestamps: true, warmup: 'off', readers: [second] } }));
  svc.startConfiguredReaders();
  await svc.readers.waitSettled(60_000);
  for (const r of svc.readers.all()) if (!r.ready) throw new Error(`reader ${r.readerId} did not load`);
  const ac = new AbortController();
  await Promise.all(['primary', 'b'].map((g) => svc.runToCompletion(g, { prompt: 'Once upon a time', maxNewTokens: 8, id: svc.newRequestId() }, ac.signal)));
  await svc.close();
  process.stdout.write(`ROUND ${n}\n`);
}
process.exit(0);

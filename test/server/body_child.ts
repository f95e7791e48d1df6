/**
 * A server without readers in a child process, for body_limit.test.ts:
 * `tsx body_child.ts` serves the inference app on an ephemeral port of
 * 127.0.0.1 (printed as `PORT <n>`), so the test can watch this process's
 * resident memory while it streams a large body at it.
 */
import { loadConfig } from '../../server/config.ts';
import { start } from '../../server/main.ts';

const running = await start(loadConfig({ env: {}, overrides: { model: '', embeddingModel: '', host: '127.0.0.1', port: 0, managementPort: 0, openaiPort: 0, sagemakerPort: 0, vertexPort: 0, logDisableTimestamps: true } }));
process.stdout.write(`PORT ${running.servers.find((s) => s.name === 'inference')!.port}\n`);
process.once('SIGTERM', () => void running.close().then(() => process.exit(0)));

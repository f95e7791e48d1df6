/**
 * First vs second request after "ready", with pipeline warm-up off and on:
 * starts the service (loopback, one reader), waits until it is ready, then
 * times two identical greedy /generate requests (40 new tokens by default)
 * and counts how long start-up took. With warm-up on, the first request
 * should cost about what the second does; with it off, the first pays the
 * shader compilation of its shapes.
 *
 *   npx tsx bench/first_request.ts [--backend opengles] [--model DIR_OR_GGUF] [--max-new-tokens 40]
 *
 * Prints one JSON line per mode: {warmup, backend, ready_ms, first_ms, second_ms, ratio}.
 */
import { parseArgs } from 'node:util';
import { loadConfig } from '../server/config.ts';
import { start } from '../server/main.ts';
import { DEFAULT_MODEL_DIR } from '../server/paths.ts';

export interface FirstRequestResult {
  warmup: 'on' | 'off';
  backend: string;
  ready_ms: number;
  first_ms: number;
  second_ms: number;
  ratio: number;
}

export async function benchFirstRequest(opts: { warmup: 'on' | 'off'; backend: string; model: string; maxNewTokens: number }): Promise<FirstRequestResult> {
  const t0 = performance.now();
  const running = await start(
    loadConfig({
      env: {},
      overrides: { model: opts.model, embeddingModel: '', backend: opts.backend, warmup: opts.warmup, host: '127.0.0.1', port: 0, managementPort: 0, openaiPort: 0, sagemakerPort: 0, vertexPort: 0, logDisableTimestamps: true },
    }),
  );
  try {
    await running.service.readers.waitSettled(600_000);
    if (!running.service.readers.allReady) throw new Error('the reader did not load');
    const ready = performance.now() - t0;
    const url = `http://127.0.0.1:${running.servers.find((s) => s.name === 'inference')!.port}/generate`;
    const body = JSON.stringify({ text: 'Once upon a time there was a little dog who liked to play', max_new_tokens: opts.maxNewTokens, sampling_temperature: 0 });
    const once = async (): Promise<number> => {
      const t = performance.now();
      const r = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
      if (!r.ok) throw new Error(`/generate ${r.status}: ${await r.text()}`);
      await r.json();
      return performance.now() - t;
    };
    const first = await once();
    const second = await once();
    return { warmup: opts.warmup, backend: opts.backend, ready_ms: Math.round(ready), first_ms: Math.round(first), second_ms: Math.round(second), ratio: Number((first / second).toFixed(2)) };
  } finally {
    await running.close();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { values } = parseArgs({ options: { backend: { type: 'string' }, model: { type: 'string' }, 'max-new-tokens': { type: 'string' } } });
  for (const warmup of ['off', 'on'] as const) {
    const r = await benchFirstRequest({ warmup, backend: values.backend ?? 'opengles', model: values.model ?? DEFAULT_MODEL_DIR, maxNewTokens: Number(values['max-new-tokens'] ?? 40) });
    process.stdout.write(`${JSON.stringify(r)}\n`);
  }
  process.exit(0);
}

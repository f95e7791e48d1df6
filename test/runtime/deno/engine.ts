/**
 * The engine library under Deno, through its public entry (core/api): the
 * tiny Llama models/stories260K loaded once over real HTTP (Deno.serve on
 * loopback, the URL model source) on this thread, and once from a file map in
 * a Deno Web Worker (createWorkerEngine); both on Deno's navigator.gpu.
 * Prints one line `WEFT_RESULT {json}` with what the Node side asserts.
 *
 * Usage: deno run -A test/runtime/deno/engine.ts
 */
import { createEngine, createWorkerEngine, type WorkerLike } from '../../../core/api/index.ts';

interface DenoLike {
  readFile(p: string): Promise<Uint8Array>;
  readDir(p: string): AsyncIterable<{ name: string; isFile: boolean }>;
  serve(o: { hostname: string; port: number; onListen?: (a: { port: number }) => void }, h: (r: Request) => Promise<Response>): { shutdown(): Promise<void> };
  exit(code: number): never;
}
const Deno = (globalThis as unknown as { Deno: DenoLike }).Deno;
const DIR = 'models/stories260K';

async function main(): Promise<Record<string, unknown>> {
  const files = new Map<string, Uint8Array>();
  for await (const e of Deno.readDir(DIR)) if (e.isFile) files.set(e.name, await Deno.readFile(`${DIR}/${e.name}`));
  let port = 0;
  const listening = new Promise<void>((ok) => {
    const server = Deno.serve({ hostname: '127.0.0.1', port: 0, onListen: (a) => ((port = a.port), ok()) }, async (req) => {
      const body = files.get(decodeURIComponent(new URL(req.url).pathname.replace(/^\/m\//, '')));
      if (!body) return new Response('not found', { status: 404 });
      return new Response(req.method === 'HEAD' ? null : (body as BodyInit), { headers: { 'content-length': String(body.byteLength) } });
    });
    stop = () => server.shutdown();
  });
  let stop = (): Promise<void> => Promise.resolve();
  await listening;
  const prompt = { prompt: 'Once upon a time', max_tokens: 20, temperature: 0 };
  const stages: string[] = [];
  const local = await createEngine({ model: `http://127.0.0.1:${port}/m/`, maxContext: 128, onProgress: (p) => stages.push(p.stage) });
  const a = await local.completions.create(prompt);
  const info = local.info();
  await local.unload();
  await stop();

  const worker = new Worker(new URL('./engine_worker.ts', import.meta.url), { type: 'module' });
  const remote = await createWorkerEngine(worker as unknown as WorkerLike, { model: files, name: 'stories260K', maxContext: 128 });
  const b = await remote.completions.create(prompt);
  const chunks: string[] = [];
  let finish: string | null = null;
  for await (const c of await remote.chat.completions.create({ messages: [{ role: 'user', content: 'Hi' }], max_tokens: 300, temperature: 1, seed: 9, stream: true }, { signal: AbortSignal.timeout(300) })) {
    chunks.push(c.choices[0]?.delta.content ?? '');
    finish = c.choices[0]?.finish_reason ?? finish;
  }
  const tokens = await remote.tokenize('Once upon a time');
  await remote.unload();
  worker.terminate();
  return { ok: true, local: a.choices[0]!.text, remote: b.choices[0]!.text, stages: [...new Set(stages)], info, finish, chunks: chunks.length, tokens: tokens.ids };
}

let code = 0;
let result: Record<string, unknown>;
try {
  result = await main();
} catch (e) {
  code = 1;
  result = { ok: false, error: `${(e as Error).name}: ${(e as Error).message}`, code: (e as { code?: string }).code };
}
console.log(`WEFT_RESULT ${JSON.stringify(result)}`);
Deno.exit(code);

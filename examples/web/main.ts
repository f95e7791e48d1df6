/**
 * A minimal web app on Weft's engine library: loads a model in a Web Worker
 * (createWorkerEngine), streams a chat answer into the page, and stops it on
 * demand. An app depending on the package imports the same names from the
 * package entry (`.` and `./worker`) instead of these relative paths.
 *
 * `window.weftExample` exposes the same calls for automated checks.
 */
import { createEngine, createWorkerEngine, type WeftEngine } from '../../core/api/index.ts';

const $ = <T extends HTMLElement>(id: string): T => document.getElementById(id) as T;
let engine: WeftEngine | null = null;
let stop: AbortController | null = null;

async function load(model: string): Promise<WeftEngine> {
  await engine?.unload();
  const worker = new Worker(new URL('./worker.ts', import.meta.url), { type: 'module' });
  engine = await createWorkerEngine(worker, {
    model: new URL(model, location.href).href,
    onProgress: (p) => ($<HTMLProgressElement>('progress').value = p.total ? p.loaded / p.total : 0),
  });
  $<HTMLButtonElement>('send').disabled = false;
  return engine;
}

async function send(): Promise<void> {
  if (!engine) return;
  stop = new AbortController();
  $<HTMLButtonElement>('stop').disabled = false;
  const out = $('out');
  out.textContent = '';
  const chunks = await engine.chat.completions.create({ messages: [{ role: 'user', content: $<HTMLInputElement>('prompt').value }], max_tokens: 64, stream: true }, { signal: stop.signal });
  for await (const c of chunks) out.textContent += c.choices[0]?.delta.content ?? '';
  $<HTMLButtonElement>('stop').disabled = true;
}

$('load').addEventListener('click', () => void load($<HTMLInputElement>('model').value).catch((e: unknown) => ($('out').textContent = String(e))));
$('send').addEventListener('click', () => void send().catch((e: unknown) => ($('out').textContent = String(e))));
$('stop').addEventListener('click', () => stop?.abort());

/** What the checks call: a worker engine and a main-thread engine on the same model. */
(globalThis as unknown as { weftExample: unknown }).weftExample = {
  async run(model: string) {
    const t0 = performance.now();
    let ticks = 0;
    const timer = setInterval(() => ticks++, 10);
    const w = await load(model);
    clearInterval(timer);
    const loadMs = performance.now() - t0;
    const greedy = await w.completions.create({ prompt: 'Once upon a time', max_tokens: 20, temperature: 0 });
    const chunks: string[] = [];
    const finish: (string | null)[] = [];
    for await (const c of await w.chat.completions.create({ messages: [{ role: 'user', content: 'Hi' }], max_tokens: 8, temperature: 0, stream: true })) {
      chunks.push(c.choices[0]?.delta.content ?? '');
      finish.push(c.choices[0]?.finish_reason ?? null);
    }
    const plain = await w.chat.completions.create({ messages: [{ role: 'user', content: 'Hi' }], max_tokens: 8, temperature: 0 });
    const ac = new AbortController();
    let aborted: string | null = null;
    let n = 0;
    for await (const c of await w.chat.completions.create({ messages: [{ role: 'user', content: 'Hi' }], max_tokens: 300, temperature: 1, seed: 5, stream: true }, { signal: ac.signal })) {
      if (++n === 2) ac.abort();
      aborted = c.choices[0]?.finish_reason ?? aborted;
    }
    let badCode: string | null = null;
    await w.chat.completions.create({ messages: [{ role: 'user', content: 'Hi' }], n: 3 }).catch((e: { code?: string }) => (badCode = e.code ?? null));
    const tokens = await w.tokenize('Once upon a time');
    const info = w.info();
    await w.unload();
    let afterUnload: string | null = null;
    await w.completions.create({ prompt: 'x', max_tokens: 1 }).catch((e: { code?: string }) => (afterUnload = e.code ?? null));
    engine = null;
    // The same model on this thread: the same answer.
    const local = await createEngine({ model: new URL(model, location.href).href });
    const localGreedy = await local.completions.create({ prompt: 'Once upon a time', max_tokens: 20, temperature: 0 });
    await local.unload();
    return { loadMs, ticks, greedy: greedy.choices[0]!.text, localGreedy: localGreedy.choices[0]!.text, chunks, finish, plain: plain.choices[0]!.message.content, aborted, n, badCode, tokens: tokens.ids, info, afterUnload };
  },
};

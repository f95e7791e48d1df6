/**
 * Constraint compiles run on the reader's compile worker (server/readers/
 * compile_pool.ts), not on the thread that steps the batch: while a costly
 * compile is in flight, another request keeps producing tokens (counted, not
 * timed), and the constrained request joins the batch once compiled and
 * validates. Cancelling a request whose compile runs stops the compile: the
 * worker is terminated, the request ends cancelled, and the next compile gets
 * a fresh worker. Real stories260K model on the GPU, real worker thread.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { constraintCompilerFor, DEFAULT_COMPILE_LIMITS } from '../../core/engine/constraints.ts';
import type { GenerationEvent } from '../../core/engine/engine.ts';
import { LocalReader } from '../../core/engine/local_reader.ts';
import { loadDecoder, type LoadedDecoder } from '../../core/api/load_decoder.ts';
import { dirSource } from '../../server/fs_source.ts';
import { DEFAULT_MODEL_DIR } from '../../server/paths.ts';
import { CompilePool } from '../../server/readers/compile_pool.ts';
import { gpuFor } from '../helpers/gpu.ts';

const scripts = ['Han', 'Arabic', 'Cyrillic', 'Latin', 'Greek', 'Devanagari', 'Hangul', 'Ethiopic', 'Thai', 'Hebrew'];
/** A regex of n Script_Extensions classes: its automaton takes long to build (seconds for a few thousand). */
const costly = (n: number, offset: number): string => Array.from({ length: n }, (_, i) => `\\p{Script_Extensions=${scripts[(i + offset) % scripts.length]}}`).join('');

let loaded: LoadedDecoder;
let pool: CompilePool;
let reader: LocalReader;
beforeAll(async () => {
  const ctx = await gpuFor(process.env.WEFT_TEST_MODEL_BACKEND ?? 'opengles');
  loaded = await loadDecoder(ctx, dirSource(DEFAULT_MODEL_DIR), { maxSeqs: 4 });
  pool = new CompilePool();
  const compile = constraintCompilerFor(loaded.tokenizer, loaded.cfg.vocabSize, { ...DEFAULT_COMPILE_LIMITS, requestMillis: 120_000 }, (s, ws, strict, ms, sig) => pool.rules(s, ws, strict, ms, sig));
  reader = new LocalReader(loaded, { readerId: 'r', model: 'stories260K', device: 'test', backend: 'test' }, compile);
}, 120_000);
afterAll(async () => {
  await pool?.close();
  loaded?.destroy();
});

async function collect(it: AsyncIterable<GenerationEvent>): Promise<GenerationEvent[]> {
  const out: GenerationEvent[] = [];
  for await (const ev of it) out.push(ev);
  return out;
}

describe('constraint compiles off the stepping thread', () => {
  it('another generation keeps producing tokens while a costly compile is pending', async () => {
    let tokens = 0;
    const ac = new AbortController();
    const other = (async () => {
      for await (const ev of reader.generate({ prompt: 'Once upon a time', maxNewTokens: 100_000, ignoreEos: true, sampling: { temperature: 1, seed: 1 } }, ac.signal)) if (ev.type === 'token') tokens++;
    })();
    while (tokens === 0) await new Promise((r) => setTimeout(r, 5));
    const before = { tokens, finished: pool.stats.finished };
    let atCompiled = -1;
    const constrained = reader.generate({ prompt: 'Once', maxNewTokens: 3, constraint: { kind: 'regex', pattern: `${costly(3000, 1)}|x+` } });
    const events = collect(
      (async function* () {
        for await (const ev of constrained) {
          if (atCompiled < 0) atCompiled = tokens;
          yield ev;
        }
      })(),
    );
    // While the compile worker has not answered, the other request keeps stepping.
    while (pool.stats.finished === before.finished) await new Promise((r) => setTimeout(r, 5));
    const duringCompile = tokens - before.tokens;
    const done = await events;
    ac.abort();
    await other.catch(() => undefined);
    expect(duringCompile, 'tokens of the other request while the compile ran').toBeGreaterThan(3);
    expect(atCompiled).toBeGreaterThanOrEqual(before.tokens + duringCompile - 1);
    const end = done.at(-1);
    expect(end?.type).toBe('done');
    const text = (end as { text: string }).text;
    expect(text).toMatch(/^x+$/); // the model's vocabulary has no Han/Arabic/... text, so the x+ branch
  }, 300_000);

  it('cancelling a request stops its running compile (the worker is terminated) and later compiles still work', async () => {
    const terminated = pool.stats.terminated;
    const started = pool.stats.started;
    const ac = new AbortController();
    const run = collect(reader.generate({ prompt: 'Once', maxNewTokens: 3, constraint: { kind: 'regex', pattern: `${costly(3000, 2)}|y+` } }, ac.signal));
    while (pool.stats.started === started) await new Promise((r) => setTimeout(r, 5));
    ac.abort();
    await expect(run).rejects.toMatchObject({ code: 'cancelled' });
    expect(pool.stats.terminated).toBe(terminated + 1);
    const next = await collect(reader.generate({ prompt: 'Once', maxNewTokens: 8, constraint: { kind: 'json_schema', schema: { enum: ['yes', 'no'] } } }));
    expect(['"yes"', '"no"']).toContain((next.at(-1) as { text: string }).text);
  }, 300_000);

  it('strict json_schema compiles on the worker as its own constraint: closed objects, every property required', async () => {
    const schema = { type: 'object', properties: { ok: { type: 'boolean' } } };
    const finished = pool.stats.finished;
    const strict = await collect(reader.generate({ prompt: 'Once', maxNewTokens: 24, sampling: { temperature: 1, seed: 3 }, constraint: { kind: 'json_schema', schema, strict: true } }));
    expect(pool.stats.finished).toBe(finished + 1);
    const value = JSON.parse((strict.at(-1) as { text: string }).text) as Record<string, unknown>;
    expect(Object.keys(value)).toEqual(['ok']);
    expect(typeof value.ok).toBe('boolean');
    // The same schema without strict is another compile (open object), not the strict one's cache entry.
    await collect(reader.generate({ prompt: 'Once', maxNewTokens: 24, sampling: { temperature: 1, seed: 3 }, constraint: { kind: 'json_schema', schema } }));
    expect(pool.stats.finished).toBe(finished + 2);
  }, 300_000);
});

/**
 * The schema corpus decoded by the real model: stories260K on the GPU samples
 * at temperature 1 under each constraint, many requests with different
 * schemas (and unconstrained ones) sharing each batch, in strict mode (closed
 * objects, every declared property required). Every output that
 * finishes must validate with ajv + ajv-formats; outputs cut by the token
 * limit are valid prefixes by construction and are counted, not validated.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import Ajv from 'ajv';
import Ajv2020 from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { constraintCompilerFor, type SyncConstraintCompiler } from '../../core/engine/constraints.ts';
import { loadDecoder, type LoadedDecoder } from '../../core/api/load_decoder.ts';
import { dirSource } from '../../server/fs_source.ts';
import { DEFAULT_MODEL_DIR } from '../../server/paths.ts';
import { gpuFor } from '../helpers/gpu.ts';

const dir = fileURLToPath(new URL('./schemas/', import.meta.url));
// kw-* (one per row of the keyword table) are checked token by token over the Llama 3 vocabulary
// and by simulation (keyword_cases.test.ts, corpus.test.ts); many are dictionaries or long formatted
// strings this 260K-parameter model rarely closes within the token limit.
const files = readdirSync(dir).filter((f) => f.endsWith('.json') && !f.startsWith('kw-')).sort();
/** One seed per backend keeps the file within CI time; the simulated corpus test covers more seeds. */
const SEEDS: Record<string, number[]> = { native: [11], outlines: [12] };
const MAX_NEW = 320;

function validatorFor(schema: Record<string, unknown>): (v: unknown) => string | null {
  const draft7 = typeof schema.$schema === 'string' && schema.$schema.includes('draft-07');
  const ajv = draft7 ? new Ajv({ strict: false }) : new Ajv2020({ strict: false });
  addFormats(ajv);
  const { $id: _id, ...rest } = schema;
  const v = ajv.compile(rest);
  return (x) => (v(x) ? null : ajv.errorsText(v.errors));
}

let loaded: LoadedDecoder;
let compile: SyncConstraintCompiler;
beforeAll(async () => {
  const ctx = await gpuFor(process.env.WEFT_TEST_MODEL_BACKEND ?? 'opengles');
  loaded = await loadDecoder(ctx, dirSource(DEFAULT_MODEL_DIR), { maxSeqs: 32, maxTokensPerStep: 512 });
  compile = constraintCompilerFor(loaded.tokenizer, loaded.cfg.vocabSize);
});
afterAll(() => loaded?.destroy());

describe('schema corpus decoded by stories260K at temperature 1', () => {
  it.each(['native', 'outlines'])('%s backend: every finished output validates, in mixed batches', async (backend) => {
    const jobs: { file: string; seed: number; validate: (v: unknown) => string | null; promise: Promise<{ text: string; finishReason: string }> }[] = [];
    const unconstrained: Promise<{ finishReason: string }>[] = [];
    for (const seed of SEEDS[backend]!) {
      for (const file of files) {
        if (backend === 'outlines' && file.startsWith('rec-')) continue; // refused by design (tested in corpus.test.ts)
        const schema = JSON.parse(readFileSync(dir + file, 'utf8')) as Record<string, unknown>;
        // strict: closed objects. With open ones this 260K-parameter model keeps appending extra keys at
        // temperature 1 and most outputs reach the token limit, which would leave little to validate;
        // open objects are covered token by token in keyword_cases.test.ts and by corpus.test.ts.
        const constraint = compile({ kind: 'json_schema', schema, backend, strict: true });
        jobs.push({
          file,
          seed,
          validate: validatorFor(schema),
          promise: loaded.engine.complete('Once upon a time', { maxNewTokens: MAX_NEW, sampling: { temperature: 1, seed }, constraint }),
        });
      }
      unconstrained.push(loaded.engine.complete('Once upon a time', { maxNewTokens: 40, sampling: { temperature: 1, seed } }));
    }
    let finished = 0;
    let truncated = 0;
    const failures: string[] = [];
    for (const j of jobs) {
      const r = await j.promise;
      if (r.finishReason === 'length') {
        truncated++;
        continue;
      }
      finished++;
      let value: unknown;
      try {
        value = JSON.parse(r.text);
      } catch {
        failures.push(`${j.file} seed ${j.seed}: not JSON: ${r.text.slice(0, 80)}`);
        continue;
      }
      const err = j.validate(value);
      if (err) failures.push(`${j.file} seed ${j.seed}: ${err}: ${r.text.slice(0, 80)}`);
    }
    for (const u of await Promise.all(unconstrained)) expect(u.finishReason).toBe('length');
    console.log(`${backend}: ${finished} finished and valid of ${jobs.length}, ${truncated} cut at ${MAX_NEW} tokens`);
    expect(failures).toEqual([]);
    // Nearly all outputs must complete within the token limit for the check to mean something.
    expect(finished).toBeGreaterThanOrEqual(Math.ceil(jobs.length * 0.8));
  }, 900_000);
});

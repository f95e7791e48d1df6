/**
 * Structured-output benchmark: compile time of every schema in the test
 * corpus (p50/p95, per backend, stories260K vocabulary) and decode tokens/s
 * of stories260K with and without a constraint in the same run, as a ratio.
 *
 *   npx tsx bench/structured.ts [--backend opengles] [--tokens 64]
 */
import { readdirSync, readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { constraintCompilerFor } from '../core/engine/constraints.ts';
import { GpuContext } from '../core/gpu/context.ts';
import { loadDecoder } from '../core/models/load.ts';
import { compileConstraint, type Backend } from '../core/structured/index.ts';
import { dirSource } from '../server/fs_source.ts';
import { DEFAULT_MODEL_DIR } from '../server/paths.ts';

const pct = (xs: number[], p: number): number => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))] ?? 0;

export async function benchStructured(opts: { backend?: string; tokens?: number } = {}): Promise<string> {
  const ctx = await GpuContext.create({ backend: opts.backend ?? 'opengles' });
  const loaded = await loadDecoder(ctx, dirSource(DEFAULT_MODEL_DIR), { maxSeqs: 8 });
  const dir = new URL('../test/structured/schemas/', import.meta.url).pathname;
  const schemas = readdirSync(dir).filter((f) => f.endsWith('.json')).map((f) => ({ f, s: JSON.parse(readFileSync(dir + f, 'utf8')) as unknown }));
  const lines = ['| backend | schemas | compile p50 ms | compile p95 ms |', '|---|---|---|---|'];
  for (const backend of ['native', 'outlines'] as Backend[]) {
    const times: number[] = [];
    for (const { f, s } of schemas) {
      if (backend === 'outlines' && f.startsWith('rec-')) continue;
      // A fresh vocabulary-shaped object per run defeats the per-vocab cache: we time compilation, not lookup.
      const vocab = { vocabSize: loaded.tokenizer.vocabSize, eosIds: loaded.tokenizer.eosIds, tokenBytes: (i: number) => loaded.tokenizer.tokenBytes(i), isSpecial: (i: number) => loaded.tokenizer.isSpecial(i) };
      times.push(compileConstraint({ kind: 'json_schema', schema: s }, vocab, { backend }).compileMs);
    }
    lines.push(`| ${backend} | ${times.length} | ${pct(times, 50).toFixed(1)} | ${pct(times, 95).toFixed(1)} |`);
  }
  // Decode speed with and without a constraint, same prompt, same length, alternating runs.
  const compile = constraintCompilerFor(loaded.tokenizer, loaded.cfg.vocabSize);
  const schema = { type: 'object', properties: { story: { type: 'string', minLength: 400 } }, required: ['story'] };
  const tokens = opts.tokens ?? 64;
  const run = async (constrained: boolean): Promise<number> => {
    const t0 = performance.now();
    const r = await loaded.engine.complete('Once upon a time', {
      maxNewTokens: tokens,
      ignoreEos: true,
      sampling: { temperature: 1, seed: 3 },
      ...(constrained ? { constraint: compile({ kind: 'json_schema', schema }) } : {}),
    });
    return r.tokenIds.length / ((performance.now() - t0) / 1000);
  };
  await run(false);
  await run(true);
  const free: number[] = [];
  const cons: number[] = [];
  for (let i = 0; i < 5; i++) {
    free.push(await run(false));
    cons.push(await run(true));
  }
  const f = pct(free, 50);
  const c = pct(cons, 50);
  lines.push('', '| decode (stories260K, ' + ctx.gpu.info.backend + ') | tokens/s (median of 5) |', '|---|---|', `| unconstrained | ${f.toFixed(1)} |`, `| json_schema (native) | ${c.toFixed(1)} |`, `| ratio | ${(c / f).toFixed(2)}x |`);
  loaded.destroy();
  ctx.destroy();
  return lines.join('\n');
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { values } = parseArgs({ options: { backend: { type: 'string' }, tokens: { type: 'string' } } });
  console.log(await benchStructured({ ...(values.backend ? { backend: values.backend } : {}), ...(values.tokens ? { tokens: Number(values.tokens) } : {}) }));
  process.exit(0);
}

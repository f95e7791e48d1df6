/**
 * Large definitions referenced from several places compile to one rule that
 * every use calls (instead of a copy per use): the rule exists, the automaton
 * stays smaller than the inlined one, and the same schema's outputs validate
 * (corpus.test.ts samples schemas/shared-defs.json on both backends).
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { grammarRules } from '../../core/structured/rules.ts';
import { schemaToAst } from '../../core/structured/schema.ts';

const schema = JSON.parse(readFileSync(fileURLToPath(new URL('./schemas/shared-defs.json', import.meta.url)), 'utf8')) as Record<string, unknown>;
const size = (s: unknown, recursion: 'rules' | 'refuse'): { names: string[]; states: number } => {
  const r = grammarRules(schemaToAst(s, { ws: 'none', recursion }))!;
  return { names: r.names, states: r.nfas.reduce((n, a) => n + a.size, 0) };
};

describe('shared definitions', () => {
  it('call one rule per large definition used twice or more (native)', () => {
    const { names } = size(schema, 'rules');
    expect(names).toContain('#/definitions/endpoint');
  });

  it('are smaller than the inlined automaton (outlines inlines every use)', () => {
    const shared = size(schema, 'rules').states;
    const inlined = size(schema, 'refuse').states;
    expect(shared).toBeLessThan(inlined / 2);
  });

  it('leave small or single-use definitions inline', () => {
    const small = { $defs: { n: { type: 'integer' } }, type: 'array', items: [{ $ref: '#/$defs/n' }, { $ref: '#/$defs/n' }] };
    expect(size(small, 'rules').names).not.toContain('#/$defs/n');
  });
});

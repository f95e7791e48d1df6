/**
 * Bridges structured-output requests to the engine: a reader compiles each
 * ConstraintRequest against its own tokenizer (cached per spec, backend and
 * whitespace mode by core/structured) and hands the engine a fresh per-request TokenConstraint,
 * whose masks are sized to the model's vocabulary (ids the tokenizer lacks,
 * e.g. padded embedding rows, are never allowed).
 */
import { compileConstraint, parseBackend, parseWhitespace, type ConstraintSpec } from '../structured/index.ts';
import type { Tokenizer } from '../tokenizer/tokenizer.ts';
import type { TokenConstraint } from './engine.ts';
import type { ConstraintCompiler, ConstraintRequest } from './reader_api.ts';

function specOf(c: ConstraintRequest): ConstraintSpec {
  if (c.kind === 'json_schema') return { kind: 'json_schema', schema: c.schema };
  if (c.kind === 'regex') return { kind: 'regex', pattern: c.pattern };
  return { kind: 'json_object' };
}

export function constraintCompilerFor(tok: Tokenizer, modelVocab: number): ConstraintCompiler {
  const words = Math.ceil(modelVocab / 32);
  return (c): TokenConstraint => {
    const state = compileConstraint(specOf(c), tok, { backend: parseBackend(c.backend), whitespace: parseWhitespace(c.whitespace) }).start();
    if (Math.ceil(tok.vocabSize / 32) === words) return state;
    return {
      mask() {
        const m = state.mask();
        const out = new Uint32Array(words);
        out.set(m.subarray(0, Math.min(words, m.length)));
        return out;
      },
      advance: (t) => state.advance(t),
      isComplete: () => state.isComplete(),
    };
  };
}

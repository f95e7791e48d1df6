/**
 * The compile worker: builds the vocabulary-independent part of native
 * constraints (schema or regex → rule NFAs, the work that grows with the
 * constraint) off the reader's thread, and hands the NFAs back as transferable
 * typed arrays. One request at a time, in arrival order; a cancelled request's
 * worker is terminated by its owner (compile_pool.ts), so nothing here checks
 * for cancellation. Errors travel as the request's JSON errors.
 */
import { parentPort } from 'node:worker_threads';
import { errorToJSON } from '../../core/errors.ts';
import { type ConstraintSpec, compileRules, type Whitespace } from '../../core/structured/index.ts';
import { packRules, transferables } from '../../core/structured/rule_pack.ts';

export interface CompileJob {
  id: number;
  spec: ConstraintSpec;
  ws: Whitespace;
  /** OpenAI strict semantics for json_schema (closed objects, all properties required). */
  strict: boolean;
  millis?: number;
}

parentPort!.on('message', (m: CompileJob) => {
  try {
    const packed = packRules(compileRules(m.spec, m.ws, m.strict, m.millis));
    parentPort!.postMessage({ id: m.id, packed }, transferables(packed));
  } catch (e) {
    parentPort!.postMessage({ id: m.id, error: errorToJSON(e) });
  }
});

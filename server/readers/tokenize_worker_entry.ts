/**
 * The tokenizer worker: encodes long texts for a reader off the thread that
 * steps its batch. Built once from the reader tokenizer's source (sent as JSON
 * text, parsed here, so the reader thread pays no structured clone of a large
 * vocabulary), then answers encode jobs in arrival order with the ids as a
 * transferable Int32Array. Errors travel as the request's JSON errors.
 */
import { parentPort } from 'node:worker_threads';
import { errorToJSON } from '../../core/errors.ts';
import { loadTokenizer, type LoadTokenizerOptions, type Tokenizer } from '../../core/tokenizer/tokenizer.ts';

export type TokenizeMessage =
  | { type: 'init'; json: string; config: string; opts: LoadTokenizerOptions }
  | { type: 'encode'; id: number; text: string; addSpecialTokens: boolean };

let tok: Tokenizer | null = null;

parentPort!.on('message', (m: TokenizeMessage) => {
  if (m.type === 'init') {
    tok = loadTokenizer(JSON.parse(m.json), JSON.parse(m.config), m.opts);
    return;
  }
  try {
    if (!tok) throw new Error('the tokenizer worker got work before its tokenizer');
    const ids = Int32Array.from(tok.encode(m.text, { addSpecialTokens: m.addSpecialTokens }));
    parentPort!.postMessage({ id: m.id, ids }, [ids.buffer]);
  } catch (e) {
    parentPort!.postMessage({ id: m.id, error: errorToJSON(e) });
  }
});

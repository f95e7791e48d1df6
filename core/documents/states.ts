/**
 * The ingest job state machine.
 *
 *   queued → reading → chunking → embedding → ready
 *      ↘        ↘          ↘           ↘
 *                        failed (with the error)
 *
 * An in-progress state (reading / chunking / embedding) may also go back to
 * `queued`: at start-up (the process died mid-job) and after a transient
 * failure with attempts left. With a work queue across processes, a worker
 * that receives a document's redelivered message takes it over from the dead
 * worker the same way (in-progress → queued → reading, in one statement). Terminal states never change; a document is
 * only reprocessed by deleting it and submitting it again.
 *
 * Stores apply a transition as a compare-and-set (`UPDATE … WHERE state =
 * from`), so a stale worker — e.g. one whose document was deleted or resumed
 * elsewhere — changes nothing.
 */
import { WeftError } from '../errors.ts';
import type { DocState } from './types.ts';

const NEXT: Record<DocState, readonly DocState[]> = {
  queued: ['reading', 'failed'],
  reading: ['chunking', 'failed', 'queued'],
  chunking: ['embedding', 'failed', 'queued'],
  embedding: ['ready', 'failed', 'queued'],
  ready: [],
  failed: [],
};

export const IN_PROGRESS: readonly DocState[] = ['reading', 'chunking', 'embedding'];

export function isTerminal(s: DocState): boolean {
  return s === 'ready' || s === 'failed';
}

export function canTransition(from: DocState, to: DocState): boolean {
  return NEXT[from].includes(to);
}

/** A transition the state machine does not allow (a programming error, not a client one). */
export class InvalidTransitionError extends WeftError {
  constructor(from: DocState, to: DocState) {
    super('invalid_state_transition', `a document cannot go from ${from} to ${to}`, { from, to });
  }
}

export function assertTransition(from: DocState, to: DocState): void {
  if (!canTransition(from, to)) throw new InvalidTransitionError(from, to);
}

/**
 * The draft side of speculative decoding: a smaller decoder with the same
 * vocabulary, its own paged KV cache and Runner, that proposes k tokens per
 * engine step for each decoding sequence (batched across sequences: k draft
 * forwards per engine step, each one row per sequence). The engine then has
 * the target verify all k+1 positions in one step (engine.ts) and calls
 * `rollback` so the draft cache keeps only positions whose tokens were
 * accepted.
 *
 * Draft KV bookkeeping per sequence: `computed` = tokens whose draft K/V are
 * valid. A proposal round for a sequence with L known tokens first feeds
 * tokens [computed, L) (catch-up: the whole prompt the first time, 1–2 tokens
 * later), then its proposals d_0..d_{k-2}, so K/V exist for positions up to
 * L+k-2 and d_0..d_{k-1} come out. Prefix caching is off in the draft pool.
 */
import { GREEDY, type SamplingParams } from '../sampling/params.ts';
import type { Tokenizer } from '../tokenizer/tokenizer.ts';
import type { KvCacheManager } from './kv_cache.ts';
import type { RowSampling, Runner } from './runner.ts';
import type { ScheduledSeq, SchedSeq, StepPlan } from './scheduler.ts';
import { drawFrom, processedProbs } from './speculative_sampling.ts';

/** Default draft tokens per step. */
export const DEFAULT_SPECULATIVE_TOKENS = 4;
/** Largest accepted `speculative_tokens`. */
export const MAX_SPECULATIVE_TOKENS = 16;

export interface DraftRequest {
  seq: SchedSeq;
  /** Tokens to propose (>= 1). */
  k: number;
  /** temperature 0: greedy proposals (GPU argmax); else drawn on the CPU from the processed draft distribution q. */
  params: SamplingParams;
  rand: () => number;
}

export interface Draft {
  tokens: number[];
  /** Sampled requests: q per proposed token (the distribution it was drawn from). */
  q?: Float64Array[];
}

export interface SpeculativeStats {
  /** Draft tokens sent to the target for verification. */
  proposed: number;
  /** Draft tokens the target accepted. */
  accepted: number;
  /** Draft forward passes run. */
  draftSteps: number;
}

interface Live {
  req: DraftRequest;
  fed: number;
  tokens: number[];
  q: Float64Array[];
}

export class Speculator {
  readonly stats: SpeculativeStats = { proposed: 0, accepted: 0, draftSteps: 0 };
  private readonly computed = new Map<string, number>();

  constructor(
    /** A Runner over the draft model and its own KV pool. */
    readonly runner: Runner,
    /** Draft tokens per step. */
    readonly k: number,
  ) {
    if (!Number.isInteger(k) || k < 1 || k > MAX_SPECULATIVE_TOKENS) throw new Error(`speculative tokens must be an integer in [1, ${MAX_SPECULATIVE_TOKENS}], got ${k}`);
  }

  get kv(): KvCacheManager {
    return this.runner.kv;
  }

  /** Proposes up to `k` tokens per request; sequences the draft cannot hold this step get none. */
  async propose(reqs: readonly DraftRequest[]): Promise<Map<string, Draft>> {
    const geo = this.runner.model.geo;
    const live: Live[] = [];
    for (const req of reqs) {
      const id = req.seq.id;
      const L = req.seq.tokens.length;
      const need = L + req.k - 1; // K/V slots for positions 0..L+k-2
      if (Math.ceil(need / geo.blockSize) > geo.maxBlocksPerSeq) continue; // beyond the draft's context
      let fed = Math.min(this.computed.get(id) ?? 0, L - 1);
      if (this.kv.blockTable(id).length === 0) fed = 0;
      if (!this.kv.allocate(id, need)) continue;
      this.computed.set(id, fed);
      live.push({ req, fed, tokens: [], q: [] });
    }
    const rowCap = geo.maxLogitRows ?? geo.maxSeqs;
    for (;;) {
      const pending = live.filter((e) => e.tokens.length < e.req.k);
      if (!pending.length) break;
      const scheduled: ScheduledSeq[] = [];
      const owners: Live[] = [];
      let budget = geo.maxTokens;
      for (const e of pending) {
        if (budget <= 0 || scheduled.length >= geo.maxSeqs || owners.length >= rowCap) break;
        const known = e.req.seq.tokens.length + e.tokens.length;
        const count = Math.min(known - e.fed, budget);
        const seq = { ...e.req.seq, tokens: e.req.seq.tokens.concat(e.tokens) };
        const s: ScheduledSeq = { seq, start: e.fed, count, sample: e.fed + count === known };
        scheduled.push(s);
        if (s.sample) owners.push(e);
        budget -= count;
        e.fed += count;
      }
      const plan: StepPlan = { scheduled, preempted: [], cancelled: [], tokens: geo.maxTokens - budget };
      const rows: RowSampling[] = owners.map(() => ({ params: GREEDY, step: 0 }));
      const sampled = owners.some((e) => e.req.params.temperature > 0);
      const res = await this.runner.step(plan, rows, sampled ? { readLogits: true } : {});
      this.stats.draftSteps++;
      const V = this.runner.model.cfg.vocabSize;
      owners.forEach((e, i) => {
        if (e.req.params.temperature === 0) {
          e.tokens.push(res.ids[i]!);
          return;
        }
        const q = processedProbs(res.logits!.subarray(i * V, (i + 1) * V), e.req.params);
        e.q.push(q);
        e.tokens.push(drawFrom(q, e.req.rand()));
      });
    }
    const out = new Map<string, Draft>();
    for (const e of live) {
      this.computed.set(e.req.seq.id, e.fed);
      out.set(e.req.seq.id, e.req.params.temperature > 0 ? { tokens: e.tokens, q: e.q } : { tokens: e.tokens });
    }
    return out;
  }

  /** After verification: the draft cache keeps at most the first `validTokens` positions (the rest held rejected drafts). */
  rollback(id: string, validTokens: number): void {
    const c = this.computed.get(id);
    if (c === undefined) return;
    const keep = Math.min(c, validTokens);
    this.computed.set(id, keep);
    this.kv.truncate(id, keep);
  }

  /** Drops a sequence's draft state and blocks (finished, cancelled, preempted). */
  free(id: string): void {
    this.computed.delete(id);
    this.kv.free(id);
  }
}

/**
 * Why a draft cannot serve a target, or null when it can: same vocabulary
 * size and, id for id, the same token strings.
 */
export function draftIncompatibility(target: { vocabSize: number; tokenizer: Tokenizer }, draft: { vocabSize: number; tokenizer: Tokenizer }): string | null {
  if (target.vocabSize !== draft.vocabSize) return `vocabulary sizes differ (target ${target.vocabSize}, draft ${draft.vocabSize})`;
  const n = Math.max(target.tokenizer.vocabSize, draft.tokenizer.vocabSize);
  for (let i = 0; i < n; i++) {
    const a = target.tokenizer.idToToken(i);
    const b = draft.tokenizer.idToToken(i);
    if (a !== b) return `token ${i} differs (target ${JSON.stringify(a)}, draft ${JSON.stringify(b)})`;
  }
  return null;
}

/**
 * The token-budget scheduler. Pure logic: no GPU, no tokenizer, no clocks.
 *
 * Each step gives every running sequence the tokens it still needs — the rest
 * of its prompt (in chunks, for chunked prefill) or one token when decoding —
 * up to a per-step token budget and a sequence cap. That single rule yields
 * continuous batching and chunked prefill. Waiting sequences are admitted
 * first-come-first-served once running ones are served. When KV blocks run
 * out, the most recently admitted running sequence is preempted: its blocks
 * are freed and it goes back to the front of the queue to be recomputed
 * (its tokens so far become its prompt), which never changes its output.
 */
import type { KvCacheManager, Salt } from './kv_cache.ts';

export interface SchedulerConfig {
  /** Most tokens computed per step (all sequences together). */
  maxTokensPerStep: number;
  /** Most sequences per step. */
  maxSeqs: number;
  /** Longest context (prompt + output) a sequence may reach. */
  maxContext: number;
}

/** A sequence as the scheduler sees it. `tokens` grows as outputs are appended. */
export interface SchedSeq {
  readonly id: string;
  /** Prompt followed by generated tokens. */
  tokens: number[];
  /** Tokens whose K/V are in the cache. */
  computed: number;
  /** Prefix-cache salt (e.g. model adapter or image hashes); '' for plain text. */
  salt: Salt;
  /** Image-to-text: feature rows replacing the embeddings of prompt positions. */
  embeds?: PromptEmbeds;
  state: 'waiting' | 'running' | 'finished';
  /** Times this sequence was preempted (for metrics and tests). */
  preemptions: number;
  /** Set by the owner to request removal at the next step (cancellation). */
  cancelled: boolean;
  /** Prompt tokens served from the prefix cache at first admission. */
  cachedTokens?: number;
}

/** Rows that replace the input embeddings of some prompt positions (image features). */
export interface PromptEmbeds {
  /** [E] ascending prompt positions. */
  positions: Uint32Array;
  /** [E, width] f32, row i for positions[i]. */
  rows: Float32Array;
  width: number;
}

export interface ScheduledSeq {
  seq: SchedSeq;
  /** First position computed this step (= seq.computed before the step). */
  start: number;
  /** Tokens computed this step. */
  count: number;
  /** True when this chunk reaches the end of known tokens: sample a next token. */
  sample: boolean;
  /**
   * Speculative decoding (set by the engine after planning): draft tokens fed
   * after the sequence's known tokens, one logit row per fed position from
   * the last known token on (count = 1 + draft.length).
   */
  draft?: readonly number[];
}

export interface StepPlan {
  scheduled: ScheduledSeq[];
  preempted: SchedSeq[];
  /** Sequences removed because they were cancelled. */
  cancelled: SchedSeq[];
  tokens: number;
}

export class Scheduler {
  readonly waiting: SchedSeq[] = [];
  readonly running: SchedSeq[] = [];
  /**
   * Prompt admissions (first admission of a sequence; re-admissions after
   * preemption are not counted): `prefills` computed the prompt from its
   * first token (no prefix-cache hit), `prefixReuses` started from cached KV
   * blocks and computed only the rest. `prefillTokens`: prompt tokens
   * computed over all of them (tokens, not steps; the engine adds the
   * tokens of teacher-forced prompts, fed one per step).
   */
  readonly counters = { prefills: 0, prefixReuses: 0, prefillTokens: 0 };

  constructor(
    readonly cfg: SchedulerConfig,
    readonly kv: KvCacheManager,
  ) {}

  add(seq: SchedSeq): void {
    if (seq.tokens.length === 0) throw new Error('scheduler: empty sequence');
    seq.state = 'waiting';
    this.waiting.push(seq);
  }

  get hasWork(): boolean {
    return this.waiting.length > 0 || this.running.length > 0;
  }

  private preempt(seq: SchedSeq): void {
    this.kv.free(seq.id);
    seq.computed = 0;
    seq.state = 'waiting';
    seq.preemptions++;
    this.running.splice(this.running.indexOf(seq), 1);
    this.waiting.unshift(seq);
  }

  private dropCancelled(out: SchedSeq[]): void {
    for (const list of [this.running, this.waiting]) {
      for (let i = list.length - 1; i >= 0; i--) {
        const s = list[i]!;
        if (!s.cancelled) continue;
        this.kv.free(s.id);
        s.state = 'finished';
        list.splice(i, 1);
        out.push(s);
      }
    }
  }

  /** Plans one step. Call `complete` with its plan after the step ran. */
  schedule(): StepPlan {
    const plan: StepPlan = { scheduled: [], preempted: [], cancelled: [], tokens: 0 };
    this.dropCancelled(plan.cancelled);
    let budget = this.cfg.maxTokensPerStep;

    // 1. Running sequences, oldest first; preempt from the newest when short of blocks.
    for (let i = 0; i < this.running.length && budget > 0; i++) {
      const seq = this.running[i]!;
      const count = Math.min(seq.tokens.length - seq.computed, budget);
      if (count <= 0) continue;
      let ok = this.kv.allocate(seq.id, seq.computed + count);
      while (!ok) {
        const victim = this.running[this.running.length - 1]!;
        this.preempt(victim);
        plan.preempted.push(victim);
        if (victim === seq) break;
        ok = this.kv.allocate(seq.id, seq.computed + count);
      }
      if (!ok) {
        i--; // `seq` itself was preempted; the next one slid into slot i
        continue;
      }
      plan.scheduled.push({ seq, start: seq.computed, count, sample: seq.computed + count === seq.tokens.length });
      budget -= count;
    }

    // 2. Admit waiting sequences while budget, sequence slots and blocks allow.
    while (this.waiting.length > 0 && budget > 0 && this.running.length < this.cfg.maxSeqs && plan.preempted.length === 0) {
      const seq = this.waiting[0]!;
      const cached = this.kv.attachPrefix(seq.id, seq.tokens, seq.salt);
      const count = Math.min(seq.tokens.length - cached, budget);
      if (!this.kv.allocate(seq.id, cached + count)) {
        this.kv.free(seq.id);
        break; // wait for blocks to free up; FCFS, no overtaking
      }
      this.waiting.shift();
      seq.computed = cached;
      if (seq.preemptions === 0) {
        seq.cachedTokens = cached;
        if (cached === 0) this.counters.prefills++;
        else this.counters.prefixReuses++;
        this.counters.prefillTokens += seq.tokens.length - cached;
      }
      seq.state = 'running';
      this.running.push(seq);
      plan.scheduled.push({ seq, start: cached, count, sample: cached + count === seq.tokens.length });
      budget -= count;
    }
    plan.tokens = this.cfg.maxTokensPerStep - budget;
    return plan;
  }

  /**
   * Records that a planned step ran: advances `computed`, registers full
   * blocks for prefix reuse. The owner appends sampled tokens to `tokens`
   * (before or after this call) and calls `finish` for sequences that stop.
   */
  complete(plan: StepPlan): void {
    for (const s of plan.scheduled) {
      if (s.seq.state !== 'running') continue;
      s.seq.computed = s.start + s.count;
      this.kv.commit(s.seq.id, s.seq.tokens, s.seq.computed, s.seq.salt);
    }
  }

  /** Removes a sequence (stopped or failed) and frees its blocks. */
  finish(seq: SchedSeq): void {
    this.kv.free(seq.id);
    seq.state = 'finished';
    const i = this.running.indexOf(seq);
    if (i >= 0) this.running.splice(i, 1);
    const j = this.waiting.indexOf(seq);
    if (j >= 0) this.waiting.splice(j, 1);
  }
}

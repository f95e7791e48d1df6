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
  /** Most logit rows per step (sampling entries plus draft tokens); default maxSeqs. */
  maxLogitRows?: number;
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
  readonly seq: SchedSeq;
  /** First position computed this step (= seq.computed before the step). */
  readonly start: number;
  /** Tokens computed this step (1 + draft.length for a verification entry). */
  readonly count: number;
  /** True when this chunk reaches the end of known tokens: sample a next token. */
  readonly sample: boolean;
  /**
   * Speculative decoding (attached by `attachDrafts`): draft tokens fed
   * after the sequence's known tokens, one logit row per fed position from
   * the last known token on (count = 1 + draft.length).
   */
  readonly draft?: readonly number[];
}

/** What `schedule` returns. Only the scheduler edits a plan (`attachDrafts`); the owner reads it. */
export interface StepPlan {
  readonly scheduled: readonly ScheduledSeq[];
  readonly preempted: readonly SchedSeq[];
  /** Sequences removed because they were cancelled. */
  readonly cancelled: readonly SchedSeq[];
  /** Tokens computed this step, all entries together (draft tokens included). */
  readonly tokens: number;
}

/** One sequence's result of a step, as the owner decided it (sampling, stop rules). */
export interface SeqOutput {
  /**
   * Tokens to append, in order. A plain entry: at most one. A verification
   * entry: the accepted draft tokens then the target's own token, possibly
   * cut short by a stop rule (empty when the owner dropped the sequence).
   */
  readonly tokens: readonly number[];
  /** The tokens are teacher-forced prompt tokens, not outputs: counted as prefill. */
  readonly prompt?: boolean;
  /** The sequence stops after these tokens: it leaves the scheduler and its blocks are freed. */
  readonly finished?: boolean;
}

/** Step results by sequence id; scheduled sequences without an entry get no tokens. */
export type StepOutput = ReadonlyMap<string, SeqOutput>;

type Writable<T> = { -readonly [K in keyof T]: T[K] };

export class Scheduler {
  readonly waiting: SchedSeq[] = [];
  readonly running: SchedSeq[] = [];
  /**
   * Prompt admissions (first admission of a sequence; re-admissions after
   * preemption are not counted): `prefills` computed the prompt from its
   * first token (no prefix-cache hit), `prefixReuses` started from cached KV
   * blocks and computed only the rest. `prefillTokens`: prompt tokens
   * computed over all of them (tokens, not steps; the engine adds the
   * tokens of teacher-forced prompts, reported as `prompt` outputs).
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

  /** Plans one step. Call `updateFromOutput` with its plan after the step ran. */
  schedule(): StepPlan {
    const plan = { scheduled: [] as ScheduledSeq[], preempted: [] as SchedSeq[], cancelled: [] as SchedSeq[], tokens: 0 };
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

  /** Logit rows a plan reads: one per sampling entry, plus one per draft token. */
  private logitRows(plan: StepPlan): number {
    let rows = 0;
    for (const s of plan.scheduled) if (s.sample) rows += 1 + (s.draft?.length ?? 0);
    return rows;
  }

  /** A decoding entry: one token computed at the last known position, nothing drafted yet. */
  private decoding(s: ScheduledSeq): boolean {
    return s.sample && s.count === 1 && s.start === s.seq.tokens.length - 1 && !s.draft && !s.seq.cancelled && s.seq.state === 'running';
  }

  /**
   * Speculative decoding, first half: how many draft tokens each decoding
   * entry of `plan` may take. `wanted` maps sequence ids to the most the
   * owner would verify; allowances are granted in plan order within the
   * step's remaining token budget and logit-row cap. Sequences that get
   * none are absent from the result.
   */
  draftAllowance(plan: StepPlan, wanted: ReadonlyMap<string, number>): Map<string, number> {
    const out = new Map<string, number>();
    let tokens = plan.tokens;
    let rows = this.logitRows(plan);
    const rowCap = this.cfg.maxLogitRows ?? this.cfg.maxSeqs;
    for (const s of plan.scheduled) {
      const want = wanted.get(s.seq.id);
      if (want === undefined || !this.decoding(s)) continue;
      const k = Math.min(want, this.cfg.maxTokensPerStep - tokens, rowCap - rows);
      if (k < 1) continue;
      tokens += k;
      rows += k;
      out.set(s.seq.id, k);
    }
    return out;
  }

  /**
   * Second half: attaches proposed draft tokens to their decoding entries
   * (count becomes 1 + n, the plan's tokens grow by n), keeping as many as
   * the KV cache can hold and the step's budget allows. Returns the number
   * attached per sequence id; absent: none.
   */
  attachDrafts(plan: StepPlan, drafts: ReadonlyMap<string, readonly number[]>): Map<string, number> {
    const out = new Map<string, number>();
    const p = plan as Writable<StepPlan>;
    let rows = this.logitRows(plan);
    const rowCap = this.cfg.maxLogitRows ?? this.cfg.maxSeqs;
    for (const entry of plan.scheduled) {
      const d = drafts.get(entry.seq.id);
      if (!d?.length || !this.decoding(entry)) continue;
      const L = entry.seq.tokens.length;
      let n = Math.min(d.length, this.cfg.maxTokensPerStep - p.tokens, rowCap - rows);
      while (n > 0 && !this.kv.allocate(entry.seq.id, L + n)) n--;
      if (n < 1) continue;
      const s = entry as Writable<ScheduledSeq>;
      s.draft = d.slice(0, n);
      s.count = 1 + n;
      p.tokens += n;
      rows += n;
      out.set(entry.seq.id, n);
    }
    return out;
  }

  /**
   * Applies a step's results: appends each sequence's tokens, advances
   * `computed`, registers full blocks for prefix reuse, and removes the
   * sequences that finished (returned). A verification entry keeps K/V only
   * for positions holding committed tokens — its last known token and the
   * accepted drafts — so rejected drafts never reach the prefix cache.
   * Sequences that left during the step (cancelled, failed) are skipped.
   */
  updateFromOutput(plan: StepPlan, output: StepOutput): SchedSeq[] {
    const finished: SchedSeq[] = [];
    for (const s of plan.scheduled) {
      const seq = s.seq;
      if (seq.state !== 'running') continue;
      const o = output.get(seq.id);
      const tokens = o?.tokens ?? [];
      const most = !s.sample ? 0 : 1 + (s.draft?.length ?? 0);
      if (tokens.length > most) throw new Error(`scheduler: ${tokens.length} tokens for ${seq.id}, which could take ${most}`);
      if (s.draft) {
        for (let i = 0; i < tokens.length - 1; i++) {
          if (tokens[i] !== s.draft[i]) throw new Error(`scheduler: ${seq.id} token ${i} is ${tokens[i]}, not the verified draft token ${s.draft[i]}`);
        }
      }
      for (const t of tokens) seq.tokens.push(t);
      seq.computed = s.start + (s.draft ? Math.max(1, tokens.length) : s.count);
      this.kv.commit(seq.id, seq.tokens, seq.computed, seq.salt);
      if (s.draft) this.kv.truncate(seq.id, seq.computed);
      if (o?.prompt) this.counters.prefillTokens += tokens.length;
      if (o?.finished) {
        this.finish(seq);
        finished.push(seq);
      }
    }
    return finished;
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

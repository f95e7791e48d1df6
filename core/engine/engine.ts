/**
 * The generation engine: requests in, streams of tokens and text out.
 *
 * It owns the scheduler and the runner and runs one loop: schedule a step,
 * run it on the GPU, append sampled tokens, apply stop rules, stream deltas.
 * Any number of requests share the loop (continuous batching); each carries
 * its own sampling parameters, stop rules, constraint and AbortSignal.
 */
import { CancelledError, InvalidRequestError } from '../errors.ts';
import { GREEDY, validateSampling, type SamplingParams } from '../sampling/params.ts';
import { IncrementalDecoder } from '../tokenizer/incremental.ts';
import type { Tokenizer } from '../tokenizer/tokenizer.ts';
import { Channel } from './channel.ts';
import { maxNewTokensFor } from './max_new_tokens.ts';
import type { KvCacheManager, Salt } from './kv_cache.ts';
import type { RowLogprobs } from '../ops/logprobs.ts';
import type { Runner, RowSampling } from './runner.ts';
import { Scheduler, type PromptEmbeds, type ScheduledSeq, type SchedSeq, type SchedulerConfig, type SeqOutput, type StepPlan } from './scheduler.ts';
import type { Speculator } from './speculative.ts';
import { processedProbs, uniformStream, verifyGreedy, verifySampled, type Verdict } from './speculative_sampling.ts';
import { bannedNgramTokens, StopMatcher } from './stops.ts';

/** Resolves after the current event-loop turn: setImmediate where it exists (Node, Bun), else a MessageChannel task (browsers, Deno). */
function nextTurn(): Promise<void> {
  const g = globalThis as { setImmediate?: (f: () => void) => unknown };
  if (g.setImmediate) return new Promise((r) => g.setImmediate!(r));
  return new Promise((r) => {
    const c = new MessageChannel();
    c.port1.onmessage = () => {
      c.port1.close();
      r();
    };
    c.port2.postMessage(null);
  });
}

/** A constraint on the tokens a request may produce (structured output). */
export interface TokenConstraint {
  /** Allowed-token bitmask [ceil(V/32)] for the current state, or null for "anything". */
  mask(): Uint32Array | null;
  /** Advances the constraint with the sampled token. */
  advance(token: number): void;
  /** True when the output so far is complete and nothing more may follow. */
  isComplete(): boolean;
  /**
   * Complete within the budget: told before each mask() how many tokens the
   * request may still produce (this one included), the constraint narrows its
   * mask so the value can still be completed in that many.
   */
  budget?(remaining: number): void;
  /** True once budget() narrowed a mask: a value completed after that was forced closed ('length'). */
  forced?(): boolean;
}

export interface GenerateOptions {
  /** Default: until the model stops or the context is full (max_new_tokens.ts). */
  maxNewTokens?: number;
  /** false: never take draft tokens for this request, even when the reader has a draft (default true). */
  speculative?: boolean;
  minNewTokens?: number;
  sampling?: Partial<SamplingParams>;
  noRepeatNgramSize?: number;
  stop?: readonly string[];
  stopTokenIds?: readonly number[];
  ignoreEos?: boolean;
  /** Keep at most this many prompt tokens: the last ones (a leading BOS is kept). */
  promptMaxTokens?: number;
  /** Add BOS etc. when encoding a string prompt (default true). */
  addSpecialTokens?: boolean;
  signal?: AbortSignal;
  constraint?: TokenConstraint;
  /** Caller-chosen id (for cancellation by id); generated if absent. */
  id?: string;
  /** Image-to-text: rows over the prompt's image placeholder positions (token-id prompts only). */
  embeds?: PromptEmbeds;
  /** Prefix-cache salt of the prompt (image content hashes, see prompt_embeds.ts imageSalt). */
  salt?: Salt;
  /**
   * Log-probabilities of each generated token and this many alternatives
   * (0-20), from the raw logits (before temperature, penalties and masks);
   * computed on the GPU in the sampling step. Such requests are not speculated.
   */
  logprobs?: number;
  /**
   * Log-probabilities of each prompt token after the first and this many
   * alternatives (0-20), raw as `logprobs`. The prompt is then fed one token
   * per step (teacher-forced: each step's row is masked to the next prompt
   * token), so every position's logits are computed and none come from the
   * prefix cache: such a prompt costs as many steps as it has tokens.
   * Not with image rows; not speculated.
   */
  promptLogprobs?: number;
  /** Token id -> bias added to the logits on the GPU before sampling (and before logprobs are read). Not speculated. */
  logitBias?: ReadonlyMap<number, number>;
}

/** One token's bytes and raw log-probability. */
export interface TokenLogprob {
  id: number;
  /** The token's text bytes as it appears mid-sequence (tokenizer.tokenBytes). */
  bytes: number[];
  logprob: number;
}

/** A generated token's log-probability and its most likely alternatives (best first). */
export interface TokenLogprobs extends TokenLogprob {
  top: TokenLogprob[];
}

/** A prompt token's: as TokenLogprobs, but the first prompt token has none (logprob null, top empty). */
export interface PromptTokenLogprobs extends Omit<TokenLogprobs, 'logprob'> {
  logprob: number | null;
}

export type FinishReason = 'length' | 'stop' | 'eos' | 'cancelled' | 'constraint' | 'error';

export interface Usage {
  promptTokens: number;
  completionTokens: number;
  /** Prompt tokens served from the prefix cache. */
  cachedTokens: number;
  /** Decode speed, tokens/s (set by the server when the request finishes; server/metrics.ts decodeTokensPerSecond). */
  tokensPerSecond?: number;
}

export type GenerationEvent =
  | { type: 'token'; id: number; text: string; logprobs?: TokenLogprobs }
  | { type: 'done'; finishReason: FinishReason; usage: Usage; text: string; tokenIds: number[]; logprobs?: TokenLogprobs[]; promptLogprobs?: PromptTokenLogprobs[] };

export interface GenerationResult {
  text: string;
  tokenIds: number[];
  finishReason: FinishReason;
  usage: Usage;
}

export interface EngineOptions {
  scheduler: SchedulerConfig;
  /** Token ids that end generation (from generation_config / tokenizer). */
  eosIds: readonly number[];
}

interface Active {
  seq: SchedSeq;
  opts: GenerateOptions;
  sampling: SamplingParams;
  promptLen: number;
  generated: number[];
  text: string;
  decoder: IncrementalDecoder;
  stops: StopMatcher;
  channel: Channel<GenerationEvent>;
  maxNew: number;
  /** Per emitted token, when the request asked for logprobs. */
  logprobs?: TokenLogprobs[];
  /** promptLogprobs: the prompt tokens still to feed (teacher-forced), and the entries so far (one per prompt token). */
  forced?: number[];
  promptLogprobs?: PromptTokenLogprobs[];
}

/** A sequence verified with draft tokens this step. */
interface SpecEntry {
  a: Active;
  /** Draft distributions (sampled requests). */
  q?: Float64Array[];
  /** Draft tokens the draft fed (its cache holds their K/V up to L + drafted - 2). */
  drafted: number;
  /** This round's uniform draws (draft proposals, then acceptance tests and the final draw). */
  rand: () => number;
}

let nextId = 0;

export class Engine {
  readonly scheduler: Scheduler;
  private readonly active = new Map<string, Active>();
  private looping = false;
  /**
   * Requests submitted while an idle engine waits out its admission turn: handed to the
   * scheduler when the turn ends, so that no one (stats, the autoscaler) counts them as
   * queued — they are admitted at the first step unless capacity runs out.
   */
  private readonly admitting: SchedSeq[] = [];
  private inAdmissionTurn = false;
  private readonly vocab: number;
  /** Draft model for speculative decoding, when attached. */
  speculator: Speculator | null = null;

  constructor(
    readonly runner: Runner,
    readonly tokenizer: Tokenizer,
    readonly opts: EngineOptions,
  ) {
    const geo = runner.model.geo;
    this.scheduler = new Scheduler({ maxLogitRows: geo.maxLogitRows ?? geo.maxSeqs, ...opts.scheduler }, runner.kv as KvCacheManager);
    this.vocab = runner.model.cfg.vocabSize;
  }

  /** Number of requests in flight. */
  get load(): number {
    return this.active.size;
  }

  /** Encodes and truncates a prompt as `generate` will. */
  promptIds(prompt: string | readonly number[], opts: GenerateOptions = {}): number[] {
    let ids = typeof prompt === 'string' ? this.tokenizer.encode(prompt, { addSpecialTokens: opts.addSpecialTokens ?? true }) : [...prompt];
    const n = opts.promptMaxTokens;
    if (n !== undefined) {
      if (!Number.isInteger(n) || n < 1) throw new InvalidRequestError('invalid_prompt_max_tokens', 'prompt_max_tokens must be a positive integer', { field: 'prompt_max_tokens' });
      if (ids.length > n) {
        const bos = this.tokenizer.bosId;
        ids = bos !== null && ids[0] === bos ? [bos, ...ids.slice(ids.length - (n - 1))].slice(0, n) : ids.slice(ids.length - n);
      }
    }
    if (ids.length === 0) throw new InvalidRequestError('empty_prompt', 'the prompt encodes to no tokens', { field: 'text' });
    for (const t of ids) {
      if (!Number.isInteger(t) || t < 0 || t >= this.vocab) throw new InvalidRequestError('invalid_token', `token id ${t} is outside the vocabulary`, { field: 'text' });
    }
    return ids;
  }

  /** Starts a request; iterate the result for token events and a final `done`. */
  generate(prompt: string | readonly number[], opts: GenerateOptions = {}): AsyncIterable<GenerationEvent> & { id: string } {
    const ids = this.promptIds(prompt, opts);
    const sampling = validateSampling(opts.sampling ?? {});
    const maxContext = this.opts.scheduler.maxContext;
    const maxNew = maxNewTokensFor(opts.maxNewTokens, ids.length, maxContext);
    if (!Number.isInteger(opts.maxNewTokens ?? 1) || (opts.maxNewTokens ?? 1) < 1) {
      throw new InvalidRequestError('invalid_max_new_tokens', 'max_new_tokens must be a positive integer', { field: 'max_new_tokens' });
    }
    if (maxNew < 1) {
      throw new InvalidRequestError('prompt_too_long', `the prompt has ${ids.length} tokens; this model's context is ${maxContext}`, { field: 'text', promptTokens: ids.length, maxContext });
    }
    const id = opts.id ?? `req-${++nextId}`;
    if (this.active.has(id)) throw new InvalidRequestError('duplicate_request_id', `request id ${id} is in use`);
    const e = opts.embeds;
    if (e && (e.rows.length !== e.positions.length * e.width || e.positions.some((p) => p >= ids.length))) {
      throw new InvalidRequestError('invalid_embeds', 'embedding rows do not match the prompt positions');
    }
    const plp = opts.promptLogprobs;
    if (plp !== undefined && e) throw new InvalidRequestError('invalid_request', 'prompt logprobs are not available for prompts with images', { field: 'prompt_logprobs' });
    const seq: SchedSeq = { id, tokens: plp !== undefined ? ids.slice(0, 1) : ids, computed: 0, salt: opts.salt ?? '', state: 'waiting', preemptions: 0, cancelled: false, ...(e ? { embeds: e } : {}) };
    const channel = new Channel<GenerationEvent>(() => this.cancel(id));
    const a: Active = {
      seq,
      opts,
      sampling,
      promptLen: ids.length,
      generated: [],
      text: '',
      decoder: new IncrementalDecoder(this.tokenizer, { skipSpecialTokens: true, prefixIds: ids.slice(-4) }),
      stops: new StopMatcher(opts.stop ?? []),
      channel,
      maxNew,
      ...(plp !== undefined ? { forced: ids.slice(1), promptLogprobs: [{ ...this.tokenLp(ids[0]!, 0), logprob: null, top: [] }] } : {}),
    };
    if (opts.signal?.aborted) throw new CancelledError();
    opts.signal?.addEventListener('abort', () => this.cancel(id), { once: true });
    this.active.set(id, a);
    if (this.looping && !this.inAdmissionTurn) this.scheduler.add(seq);
    else this.admitting.push(seq);
    void this.loop();
    return Object.assign(channel, { id });
  }

  /** Runs a request to completion. */
  async complete(prompt: string | readonly number[], opts: GenerateOptions = {}): Promise<GenerationResult> {
    for await (const ev of this.generate(prompt, opts)) {
      if (ev.type === 'done') return { text: ev.text, tokenIds: ev.tokenIds, finishReason: ev.finishReason, usage: ev.usage };
    }
    throw new CancelledError();
  }

  /** Cancels a request; its blocks are freed at the next step. Returns false if unknown. */
  cancel(id: string): boolean {
    const a = this.active.get(id);
    if (!a) return false;
    a.seq.cancelled = true;
    void this.loop();
    return true;
  }

  private tokenLp(id: number, logprob: number): TokenLogprob {
    return { id, bytes: Array.from(this.tokenizer.tokenBytes(id)), logprob };
  }

  private row(a: Active): RowSampling {
    if (a.forced?.length) {
      // Teacher-forced prompt position: only the next prompt token is allowed; no bias, penalties or bans.
      const t = a.forced[0]!;
      const mask = new Uint32Array(Math.ceil(this.vocab / 32));
      mask[t >>> 5] = 1 << (t & 31);
      return { params: GREEDY, step: 0, mask, logprobs: Math.max(a.opts.promptLogprobs ?? 0, a.opts.logprobs ?? 0) };
    }
    const bans: number[] = [];
    if (a.generated.length < (a.opts.minNewTokens ?? 0) && !a.opts.ignoreEos) bans.push(...this.opts.eosIds);
    if (a.opts.noRepeatNgramSize) bans.push(...bannedNgramTokens(a.seq.tokens, a.opts.noRepeatNgramSize));
    const constraint = a.opts.constraint;
    const left = a.maxNew - a.generated.length;
    const masked = (): Uint32Array | null => {
      constraint?.budget?.(left);
      let mask = constraint?.mask() ?? null;
      if (bans.length) {
        mask = mask ? mask.slice() : new Uint32Array(Math.ceil(this.vocab / 32)).fill(0xffffffff);
        for (const t of bans) mask[t >>> 5]! &= ~(1 << (t & 31));
      }
      return mask;
    };
    const penalized = a.sampling.repetitionPenalty !== 1 || a.sampling.presencePenalty !== 0 || a.sampling.frequencyPenalty !== 0;
    return {
      params: a.sampling,
      step: a.generated.length,
      ...(penalized ? { history: Uint32Array.from(a.seq.tokens) } : {}),
      // A constraint's mask is computed once the forward is on the device (Runner.step).
      ...(constraint ? { deferredMask: masked } : { mask: masked() }),
      ...(a.opts.logprobs !== undefined ? { logprobs: a.opts.logprobs } : {}),
      ...(a.opts.logitBias?.size ? { bias: a.opts.logitBias } : {}),
    };
  }

  /**
   * Attaches a draft model (same vocabulary; see speculative.ts). The target
   * must have been loaded with logit rows for maxSeqs * (k + 1) positions.
   */
  setSpeculator(spec: Speculator | null): void {
    if (spec) {
      if (spec.runner.model.cfg.vocabSize !== this.vocab) throw new Error(`draft vocabulary ${spec.runner.model.cfg.vocabSize} != target ${this.vocab}`);
      const geo = this.runner.model.geo;
      if ((geo.maxLogitRows ?? geo.maxSeqs) < geo.maxSeqs + spec.k) throw new Error('the target was loaded without logit rows for speculative verification (maxLogitRows)');
    }
    this.speculator = spec;
  }

  /**
   * Whether a request may take draft tokens: no constraint mask, no token
   * bans (min_new_tokens pending, no_repeat_ngram) and no penalties, which
   * depend on the tokens before each position; no image rows.
   */
  private canSpeculate(a: Active): boolean {
    const p = a.sampling;
    // Image rows (embeds) are the target's own embeddings: a text-only draft cannot read them.
    if (a.opts.speculative === false || a.forced?.length || a.opts.constraint || a.opts.noRepeatNgramSize || a.seq.embeds || a.opts.logprobs !== undefined || a.opts.logitBias?.size) return false;
    if (p.repetitionPenalty !== 1 || p.presencePenalty !== 0 || p.frequencyPenalty !== 0) return false;
    return a.generated.length >= (a.opts.minNewTokens ?? 0) || !!a.opts.ignoreEos;
  }

  /**
   * Asks the draft for tokens for the decoding sequences of `plan` that may
   * take them; the scheduler grants how many (token and logit-row budget)
   * and attaches what the KV cache can hold. Returns the verification
   * entries by sequence id.
   */
  private async speculate(plan: StepPlan): Promise<Map<string, SpecEntry>> {
    const spec = this.speculator!;
    const wanted = new Map<string, number>();
    for (const s of plan.scheduled) {
      const a = this.active.get(s.seq.id);
      if (!a || !s.sample || !this.canSpeculate(a)) continue;
      // Sampled requests draw their first token as a plain run does (a prefix-cache hit must not change it).
      if (a.sampling.temperature > 0 && a.generated.length === 0) continue;
      wanted.set(s.seq.id, Math.min(spec.k, a.maxNew - a.generated.length - 1));
    }
    const out = new Map<string, SpecEntry>();
    const allowed = this.scheduler.draftAllowance(plan, wanted);
    if (!allowed.size) return out;
    const cands = plan.scheduled.filter((s) => allowed.has(s.seq.id)).map((s) => {
      const a = this.active.get(s.seq.id)!;
      // A round's draws depend only on (seed, tokens generated so far): same history, same output.
      return { seq: s.seq, a, k: allowed.get(s.seq.id)!, rand: uniformStream(a.sampling.seed, a.generated.length) };
    });
    const drafts = await spec.propose(cands.map(({ seq, a, k, rand }) => ({ seq, k, params: a.sampling, rand })));
    const attached = this.scheduler.attachDrafts(plan, new Map([...drafts].map(([id, d]) => [id, d.tokens])));
    for (const { seq, a, rand } of cands) {
      const d = drafts.get(seq.id);
      if (!d) continue;
      const n = attached.get(seq.id);
      if (!n) {
        // Proposed but not verified this step: the draft cache keeps only the known tokens.
        spec.rollback(seq.id, seq.tokens.length - 1);
        continue;
      }
      out.set(seq.id, { a, rand, drafted: d.tokens.length, ...(d.q ? { q: d.q.slice(0, n) } : {}) });
    }
    return out;
  }

  /** The tokens a verification entry emits, from the target's ids (greedy) or logits (sampled) of its rows. */
  private verdict(s: ScheduledSeq, e: SpecEntry, ids: Uint32Array, logits: Float32Array | undefined, row0: number): Verdict {
    const n = s.draft!.length;
    if (e.a.sampling.temperature === 0) return verifyGreedy(s.draft!, ids.subarray(row0, row0 + n + 1));
    const V = this.vocab;
    const p = Array.from({ length: n + 1 }, (_, i) => processedProbs(logits!.subarray((row0 + i) * V, (row0 + i + 1) * V), e.a.sampling));
    return verifySampled(s.draft!, e.q!, p, e.rand);
  }

  /** Ends a request the scheduler already let go (finished in a step's output, or cancelled). */
  private close(a: Active, reason: FinishReason): void {
    this.speculator?.free(a.seq.id);
    this.active.delete(a.seq.id);
    const tail = a.stops.push(a.decoder.flush()) + a.stops.flush();
    if (tail && reason !== 'stop') a.text += tail;
    a.channel.push({
      type: 'done',
      finishReason: reason,
      text: a.text,
      tokenIds: a.generated,
      ...(a.logprobs ? { logprobs: a.logprobs } : {}),
      ...(a.promptLogprobs ? { promptLogprobs: a.promptLogprobs } : {}),
      usage: { promptTokens: a.promptLen, completionTokens: a.generated.length, cachedTokens: a.seq.cachedTokens ?? 0 },
    });
    a.channel.close();
  }

  /**
   * Takes a sampled token for a request (stop rules, constraint, streaming);
   * returns the finish reason if the request is done. The scheduler appends
   * it to the sequence when the step's output is applied.
   */
  private accept(a: Active, token: number, lp?: RowLogprobs): FinishReason | null {
    if (a.forced?.length) {
      const want = a.forced.shift()!;
      if (token !== want) {
        // Only this request fails (the mask allowed one token: a broken sampler row, not bad input).
        this.fail(a, new Error(`engine: teacher-forced prompt token ${want}, sampled ${token}`));
        return null;
      }
      const k = a.opts.promptLogprobs ?? 0;
      a.promptLogprobs!.push({ ...this.tokenLp(token, lp?.logprob ?? NaN), top: (lp?.top ?? []).slice(0, k).map((t) => this.tokenLp(t.id, t.logprob)) });
      return null;
    }
    if (token === 0xffffffff) return 'constraint';
    let tokenLp: TokenLogprobs | undefined;
    if (lp && a.opts.logprobs !== undefined) {
      const one = (id: number, logprob: number): TokenLogprob => ({ id, bytes: Array.from(this.tokenizer.tokenBytes(id)), logprob });
      tokenLp = { ...one(token, lp.logprob), top: lp.top.slice(0, a.opts.logprobs).map((t) => one(t.id, t.logprob)) };
      (a.logprobs ??= []).push(tokenLp);
    }
    a.generated.push(token);
    a.opts.constraint?.advance(token);
    const isEos = this.opts.eosIds.includes(token) && !a.opts.ignoreEos;
    const isStopId = a.opts.stopTokenIds?.includes(token) ?? false;
    if (!isEos) {
      const delta = a.stops.push(a.decoder.push(token));
      a.text += delta;
      a.channel.push({ type: 'token', id: token, text: delta, ...(tokenLp ? { logprobs: tokenLp } : {}) });
      if (a.stops.matched !== null) return 'stop';
    }
    if (isEos) return a.opts.constraint?.forced?.() ? 'length' : 'eos';
    if (isStopId) return 'stop';
    // A value the budget forced closed ran out of tokens: 'length', even though it parses.
    if (a.opts.constraint?.isComplete()) return a.opts.constraint.forced?.() ? 'length' : 'stop';
    if (a.generated.length >= a.maxNew) return 'length';
    return null;
  }

  private async loop(): Promise<void> {
    if (this.looping) return;
    this.looping = true;
    try {
      // An idle engine waits one event-loop turn before its first step, so requests submitted
      // together (Promise.all over generate(), a burst of HTTP requests read in one poll) are
      // prefilled in one step instead of the first alone and the rest one step later.
      this.inAdmissionTurn = true;
      await nextTurn();
      this.inAdmissionTurn = false;
      for (const seq of this.admitting.splice(0)) this.scheduler.add(seq);
      while (this.scheduler.hasWork) {
        const plan = this.scheduler.schedule();
        for (const s of plan.cancelled) {
          const a = this.active.get(s.id);
          if (a) this.close(a, 'cancelled');
        }
        if (plan.scheduled.length === 0) {
          if (this.scheduler.running.length === 0 && this.scheduler.waiting.length > 0) {
            const s = this.scheduler.waiting[0]!;
            const a = this.active.get(s.id);
            if (a) this.fail(a, new InvalidRequestError('context_too_long', 'the request does not fit in the KV cache'));
            continue;
          }
          break;
        }
        for (const s of plan.preempted) this.speculator?.free(s.id);
        const specs = this.speculator ? await this.speculate(plan) : new Map<string, SpecEntry>();
        const sampled = plan.scheduled.filter((s) => s.sample);
        const rows: RowSampling[] = [];
        let needLogits = false;
        for (const s of sampled) {
          const e = specs.get(s.seq.id);
          if (!e || !s.draft) {
            rows.push(this.row(this.active.get(s.seq.id)!));
            continue;
          }
          // Greedy rows: argmax on the GPU; sampled rows: rejection sampling on the CPU from the logits.
          const r: RowSampling = e.a.sampling.temperature === 0 ? { params: e.a.sampling, step: 0, mask: null } : { params: GREEDY, step: 0, mask: null };
          needLogits ||= e.a.sampling.temperature > 0;
          for (let i = 0; i <= s.draft.length; i++) rows.push(r);
        }
        const res = await this.runner.step(plan, rows, needLogits ? { readLogits: true } : {});
        // Decide each sequence's tokens (verification, stop rules, streaming); the scheduler applies them.
        const output = new Map<string, SeqOutput>();
        const ends = new Map<string, FinishReason>();
        let row = 0;
        for (const s of sampled) {
          const row0 = row;
          row += s.draft ? s.draft.length + 1 : 1;
          const a = this.active.get(s.seq.id);
          if (!a || s.seq.cancelled) continue;
          const e = specs.get(s.seq.id);
          const prompt = !!a.forced?.length;
          let candidates: readonly number[] = [res.ids[row0]!];
          let accepted = 0;
          if (e && s.draft) {
            const v = this.verdict(s, e, res.ids, res.logits, row0);
            this.speculator!.stats.proposed += s.draft.length;
            this.speculator!.stats.accepted += v.accepted;
            candidates = v.tokens;
            accepted = v.accepted;
          }
          const tokens: number[] = [];
          let reason: FinishReason | null = null;
          for (const t of candidates) {
            reason = this.accept(a, t, e ? undefined : res.logprobs?.[row0]);
            if (!this.active.has(a.seq.id)) break; // failed (a teacher-forced token mismatch)
            if (reason !== 'constraint') tokens.push(t);
            if (reason) break;
          }
          if (!this.active.has(a.seq.id)) continue;
          if (e && s.draft) {
            const L = s.seq.tokens.length;
            this.speculator!.rollback(s.seq.id, Math.min(L + accepted, L + e.drafted - 1));
          }
          if (reason) ends.set(s.seq.id, reason);
          output.set(s.seq.id, { tokens, ...(prompt ? { prompt } : {}), ...(reason ? { finished: true } : {}) });
        }
        this.scheduler.updateFromOutput(plan, output);
        for (const [id, reason] of ends) {
          const a = this.active.get(id);
          if (a) this.close(a, reason);
        }
      }
    } catch (e) {
      for (const a of [...this.active.values()]) this.fail(a, e);
    } finally {
      this.looping = false;
    }
  }

  private fail(a: Active, e: unknown): void {
    this.speculator?.free(a.seq.id);
    this.scheduler.finish(a.seq);
    this.active.delete(a.seq.id);
    a.channel.fail(e);
  }
}

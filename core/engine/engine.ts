/**
 * The generation engine: requests in, streams of tokens and text out.
 *
 * It owns the scheduler and the runner and runs one loop: schedule a step,
 * run it on the GPU, append sampled tokens, apply stop rules, stream deltas.
 * Any number of requests share the loop (continuous batching); each carries
 * its own sampling parameters, stop rules, constraint and AbortSignal.
 */
import { CancelledError, InvalidRequestError } from '../errors.ts';
import { validateSampling, type SamplingParams } from '../sampling/params.ts';
import { IncrementalDecoder } from '../tokenizer/incremental.ts';
import type { Tokenizer } from '../tokenizer/tokenizer.ts';
import { Channel } from './channel.ts';
import type { KvCacheManager } from './kv_cache.ts';
import type { Runner, RowSampling } from './runner.ts';
import { Scheduler, type SchedSeq, type SchedulerConfig } from './scheduler.ts';
import { bannedNgramTokens, StopMatcher } from './stops.ts';

/** A constraint on the tokens a request may produce (structured output). */
export interface TokenConstraint {
  /** Allowed-token bitmask [ceil(V/32)] for the current state, or null for "anything". */
  mask(): Uint32Array | null;
  /** Advances the constraint with the sampled token. */
  advance(token: number): void;
  /** True when the output so far is complete and nothing more may follow. */
  isComplete(): boolean;
}

export interface GenerateOptions {
  /** Default 256. */
  maxNewTokens?: number;
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
}

export type FinishReason = 'length' | 'stop' | 'eos' | 'cancelled' | 'constraint' | 'error';

export interface Usage {
  promptTokens: number;
  completionTokens: number;
  /** Prompt tokens served from the prefix cache. */
  cachedTokens: number;
}

export type GenerationEvent =
  | { type: 'token'; id: number; text: string }
  | { type: 'done'; finishReason: FinishReason; usage: Usage; text: string; tokenIds: number[] };

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
}

let nextId = 0;

export class Engine {
  readonly scheduler: Scheduler;
  private readonly active = new Map<string, Active>();
  private looping = false;
  private readonly vocab: number;

  constructor(
    readonly runner: Runner,
    readonly tokenizer: Tokenizer,
    readonly opts: EngineOptions,
  ) {
    this.scheduler = new Scheduler(opts.scheduler, runner.kv as KvCacheManager);
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
    const maxNew = Math.min(opts.maxNewTokens ?? 256, maxContext - ids.length);
    if (!Number.isInteger(opts.maxNewTokens ?? 1) || (opts.maxNewTokens ?? 1) < 1) {
      throw new InvalidRequestError('invalid_max_new_tokens', 'max_new_tokens must be a positive integer', { field: 'max_new_tokens' });
    }
    if (maxNew < 1) {
      throw new InvalidRequestError('prompt_too_long', `the prompt has ${ids.length} tokens; this model's context is ${maxContext}`, { field: 'text', promptTokens: ids.length, maxContext });
    }
    const id = opts.id ?? `req-${++nextId}`;
    if (this.active.has(id)) throw new InvalidRequestError('duplicate_request_id', `request id ${id} is in use`);
    const seq: SchedSeq = { id, tokens: ids, computed: 0, salt: '', state: 'waiting', preemptions: 0, cancelled: false };
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
    };
    if (opts.signal?.aborted) throw new CancelledError();
    opts.signal?.addEventListener('abort', () => this.cancel(id), { once: true });
    this.active.set(id, a);
    this.scheduler.add(seq);
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

  private row(a: Active): RowSampling {
    const bans: number[] = [];
    if (a.generated.length < (a.opts.minNewTokens ?? 0) && !a.opts.ignoreEos) bans.push(...this.opts.eosIds);
    if (a.opts.noRepeatNgramSize) bans.push(...bannedNgramTokens(a.seq.tokens, a.opts.noRepeatNgramSize));
    let mask = a.opts.constraint?.mask() ?? null;
    if (bans.length) {
      mask = mask ? mask.slice() : new Uint32Array(Math.ceil(this.vocab / 32)).fill(0xffffffff);
      for (const t of bans) mask[t >>> 5]! &= ~(1 << (t & 31));
    }
    const penalized = a.sampling.repetitionPenalty !== 1 || a.sampling.presencePenalty !== 0 || a.sampling.frequencyPenalty !== 0;
    return {
      params: a.sampling,
      step: a.generated.length,
      ...(penalized ? { history: Uint32Array.from(a.seq.tokens) } : {}),
      mask,
    };
  }

  private finish(a: Active, reason: FinishReason): void {
    this.scheduler.finish(a.seq);
    this.active.delete(a.seq.id);
    const tail = a.stops.push(a.decoder.flush()) + a.stops.flush();
    if (tail && reason !== 'stop') a.text += tail;
    a.channel.push({
      type: 'done',
      finishReason: reason,
      text: a.text,
      tokenIds: a.generated,
      usage: { promptTokens: a.promptLen, completionTokens: a.generated.length, cachedTokens: a.seq.cachedTokens ?? 0 },
    });
    a.channel.close();
  }

  /** Appends a sampled token; returns the finish reason if the request is done. */
  private accept(a: Active, token: number): FinishReason | null {
    if (token === 0xffffffff) return 'constraint';
    a.generated.push(token);
    a.seq.tokens.push(token);
    a.opts.constraint?.advance(token);
    const isEos = this.opts.eosIds.includes(token) && !a.opts.ignoreEos;
    const isStopId = a.opts.stopTokenIds?.includes(token) ?? false;
    if (!isEos) {
      const delta = a.stops.push(a.decoder.push(token));
      a.text += delta;
      a.channel.push({ type: 'token', id: token, text: delta });
      if (a.stops.matched !== null) return 'stop';
    }
    if (isEos) return 'eos';
    if (isStopId) return 'stop';
    if (a.opts.constraint?.isComplete()) return 'stop';
    if (a.generated.length >= a.maxNew) return 'length';
    return null;
  }

  private async loop(): Promise<void> {
    if (this.looping) return;
    this.looping = true;
    try {
      while (this.scheduler.hasWork) {
        const plan = this.scheduler.schedule();
        for (const s of plan.cancelled) {
          const a = this.active.get(s.id);
          if (a) this.finish(a, 'cancelled');
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
        const sampled = plan.scheduled.filter((s) => s.sample);
        const rows = sampled.map((s) => this.row(this.active.get(s.seq.id)!));
        const res = await this.runner.step(plan, rows);
        this.scheduler.complete(plan);
        sampled.forEach((s, i) => {
          const a = this.active.get(s.seq.id);
          if (!a || s.seq.cancelled) return;
          const reason = this.accept(a, res.ids[i]!);
          if (reason) this.finish(a, reason);
        });
      }
    } catch (e) {
      for (const a of [...this.active.values()]) this.fail(a, e);
    } finally {
      this.looping = false;
    }
  }

  private fail(a: Active, e: unknown): void {
    this.scheduler.finish(a.seq);
    this.active.delete(a.seq.id);
    a.channel.fail(e);
  }
}

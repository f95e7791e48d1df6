/**
 * The service core shared by every HTTP app: configuration, the reader
 * manager, the registry of requests in flight (for cancel-by-id), the memory
 * bound on queued work (WEFT_KVSTORE_MAX_MEMORY) and the logger. Generation
 * goes through startGeneration (generative readers only); embed / rerank /
 * classify through runEncoder (encoder readers), with the same admission,
 * balancing and cancellation.
 */
import { randomUUID } from 'node:crypto';
import { CancelledError, UnavailableError } from '../core/errors.ts';
import { DEFAULT_COMPILE_LIMITS } from '../core/engine/constraints.ts';
import type { GenerationEvent } from '../core/engine/engine.ts';
import type { EncoderReaderApi, GenerateRequest, ReaderType } from '../core/engine/reader_api.ts';
import type { ServiceConfig } from './config.ts';
import { Admission, cappedTokens } from './admission.ts';
import { createLogger, type Logger } from './log.ts';
import { type ManagedReader, PROBE_MS } from './readers/managed_reader.ts';
import { ReaderManager } from './readers/manager.ts';
import { connectNats, resolveNatsOptions } from './readers/nats_conn.ts';
import { NatsDirectory } from './readers/nats_directory.ts';
import type { NatsConnection } from '@nats-io/transport-node';
import { withAutomaticAssistants } from './readers/auto_assistant.ts';
import { parseReaderSpec, type ReaderSpec } from './readers/spec.ts';
import { License } from './license.ts';
import { Metrics, type RequestLabels } from './metrics.ts';
import { VERSION } from './paths.ts';

type Done = Extract<GenerationEvent, { type: 'done' }>;

/** The `model` and `consumer_group` labels of a request served by `reader` (the model's served name, else its path). */
function requestLabels(reader: ManagedReader): RequestLabels {
  return { model: reader.info?.model ?? reader.spec.model, consumer_group: reader.spec.consumerGroup };
}

const round2 = (x: number): number => Math.round(x * 100) / 100;

/** Rough bytes a request holds while queued and until its response is sent; `newTokens` is max_new_tokens capped by the context. */
function requestBytes(req: GenerateRequest, newTokens: number): number {
  const prompt = typeof req.prompt === 'string' ? req.prompt.length * 2 : JSON.stringify(req.prompt).length * 2;
  return 1024 + prompt + newTokens * 16 + (req.constraint ? JSON.stringify(req.constraint).length * 2 : 0);
}

export class Service {
  readonly readers = new ReaderManager();
  readonly log: Logger;
  readonly metrics = new Metrics();
  readonly version: string;
  /** The licence (read now; reloaded on SIGHUP and POST /license/reload). */
  readonly license: License;
  private readonly inFlight = new Map<string, { reader: ManagedReader; ac: AbortController }>();
  /** Bytes reserved by requests in flight (bounded by kvstoreMaxMemory). */
  reservedBytes = 0;
  /** Per-reader admission by KV pool and expected queue wait (admission.ts). */
  readonly admission = new Admission(() => this.config.maxQueueWaitMillis);
  /** The broker connection and its reader directory, when NATS is configured (attachNats). */
  nats: { nc: NatsConnection; directory: NatsDirectory } | null = null;

  constructor(readonly config: ServiceConfig) {
    this.log = createLogger({ timestamps: !config.logDisableTimestamps, color: !config.noColor && !!process.stderr.isTTY });
    this.readers.log = this.log;
    this.license = new License({ file: config.licenseFile, required: config.licenseRequired, publicKey: config.licensePublicKey });
    this.version = VERSION;
  }

  /** Starts the readers named by the configuration. */
  startConfiguredReaders(): void {
    this.license.assertUsable();
    const cfg = this.config;
    const backend = cfg.backend !== 'auto' ? { backend: cfg.backend } : {};
    const generators: ReaderSpec[] = [];
    if (cfg.model) {
      generators.push({
        model: cfg.model,
        consumerGroup: cfg.consumerGroup,
        readerId: 'primary-0',
        ...backend,
        ...(cfg.pageCacheSize ? { pageCacheSize: cfg.pageCacheSize } : {}),
        ...(cfg.assistantName && cfg.assistantName !== 'off' ? { assistantModel: cfg.assistantName } : {}),
        ...(cfg.assistantName && cfg.assistantName !== 'off' && cfg.speculativeTokens !== null ? { speculativeTokens: cfg.speculativeTokens } : {}),
      });
    }
    const encoders: ReaderSpec[] = cfg.embeddingModel ? [{ model: cfg.embeddingModel, consumerGroup: cfg.embeddingConsumerGroup, readerId: `${cfg.embeddingConsumerGroup}-0`, ...backend }] : [];
    const extra = cfg.readers.map((raw) => parseReaderSpec(raw, { model: cfg.model }));
    // Speculative decoding by default: a smaller generative model of this server drafts for a larger one.
    const auto = cfg.assistantName === 'off' ? [...generators, ...extra] : withAutomaticAssistants([...generators, ...extra]);
    for (const spec of [...auto.slice(0, generators.length), ...encoders, ...auto.slice(generators.length)]) {
      this.license.assertReaderSlot(this.readers.all().length);
      this.readers.start(this.withReaderDefaults(spec));
    }
  }

  /**
   * With NATS configured (`nats:` / WEFT_NATS_URL): connects (bad credentials or
   * an unreachable broker fail start-up) and starts discovering the readers
   * attached there (server/readers/nats_directory.ts). Without, nothing.
   */
  async attachNats(): Promise<void> {
    const opts = resolveNatsOptions(this.config.nats);
    if (!opts) return;
    const nc = await connectNats(opts, 'weft-serve');
    const directory = new NatsDirectory(nc, this.readers, this.log);
    directory.start();
    this.nats = { nc, directory };
    this.log('nats connected', { url: opts.url });
  }

  /** `spec` with the service-wide batching settings (max_batch_size, batch_duration_millis), compile budget and tokenizer worker where it sets none. */
  withReaderDefaults(spec: ReaderSpec): ReaderSpec {
    const { maxBatchSize, batchDurationMillis, constraintCompileMillis, tokenizeWorker } = this.config;
    return {
      ...spec,
      // Only a configured budget travels with the spec; readers default to the same value themselves.
      ...(spec.constraintCompileMillis === undefined && constraintCompileMillis !== DEFAULT_COMPILE_LIMITS.requestMillis ? { constraintCompileMillis } : {}),
      ...(spec.warmup === undefined && this.config.warmup !== 'auto' ? { warmup: this.config.warmup } : {}),
      ...(spec.tokenizeWorker === undefined && !tokenizeWorker ? { tokenizeWorker: false } : {}),
      ...(spec.maxSeqs === undefined && maxBatchSize !== null ? { maxSeqs: maxBatchSize } : {}),
      ...(spec.batchDurationMillis === undefined && batchDurationMillis !== null ? { batchDurationMillis } : {}),
    };
  }

  /** The default embedding reader's group and model, which the document embedder shares when it is the same model (server/documents/embedder.ts). */
  embeddingReaders(): { manager: ReaderManager; group: string; model: string } {
    return { manager: this.readers, group: this.config.embeddingConsumerGroup, model: this.config.embeddingModel };
  }

  newRequestId(): string {
    return randomUUID();
  }

  /** Refuses work that would hold more than `kvstore_max_memory` bytes queued (503 overloaded). */
  private checkCapacity(bytes: number, group: string): void {
    if (this.reservedBytes + bytes <= this.config.kvstoreMaxMemory) return;
    this.metrics.rejected.inc(1, { consumer_group: group });
    throw new UnavailableError('overloaded', `the server holds ${this.reservedBytes} bytes of queued work (limit ${this.config.kvstoreMaxMemory}); retry later`, 1);
  }

  /**
   * Admits a request to a reader of `group`. The caller iterates `events` and
   * must call `release` once done (also on error).
   */
  async startGeneration(group: string | undefined, req: GenerateRequest, signal: AbortSignal): Promise<{ events: AsyncIterable<GenerationEvent>; release: () => void; reader: ManagedReader }> {
    if (signal.aborted) throw new CancelledError();
    const reader = await this.readers.acquire(group ?? this.config.consumerGroup, { types: ['generate'], what: 'generation' }, signal);
    // Sized by what the request can hold on this reader: max_new_tokens capped by its context.
    const sized = cappedTokens(req, reader.info?.contextLength ?? Number.MAX_SAFE_INTEGER);
    const bytes = requestBytes(req, sized.total - sized.prompt);
    const groupName = group ?? this.config.consumerGroup;
    this.checkCapacity(bytes, groupName);
    let admitted: (slotMs: number | null) => void;
    try {
      admitted = this.admission.admit(reader, sized.total);
    } catch (e) {
      this.metrics.rejected.inc(1, { consumer_group: groupName });
      throw e;
    }
    const id = req.id ?? this.newRequestId();
    const ac = new AbortController();
    const onAbort = (): void => ac.abort();
    signal.addEventListener('abort', onAbort, { once: true });
    this.reservedBytes += bytes;
    reader.inFlight++;
    this.inFlight.set(id, { reader, ac });
    const started = performance.now();
    let released = false;
    let first = 0;
    let finished = false;
    const release = (): void => {
      if (released) return;
      released = true;
      admitted(first && finished ? performance.now() - first : null); // cancelled runs say nothing of slot time
      this.reservedBytes -= bytes;
      reader.inFlight = Math.max(0, reader.inFlight - 1);
      this.inFlight.delete(id);
      signal.removeEventListener('abort', onAbort);
    };
    let events: AsyncIterable<GenerationEvent>;
    try {
      events = reader.api!.generate({ ...req, id }, ac.signal);
    } catch (e) {
      release();
      throw e;
    }
    const metrics = this.metrics;
    const log = this.log;
    const labels = requestLabels(reader);
    async function* observed(): AsyncGenerator<GenerationEvent> {
      try {
        for await (const ev of events) {
          if (ev.type === 'token' && !first) {
            first = performance.now();
            metrics.ttft.observe((first - started) / 1000, labels);
          }
          if (ev.type === 'done') {
            finished = ev.finishReason !== 'cancelled';
            const tokensPerSecond = round2(metrics.finished(ev, started, first, labels));
            log('request finished', {
              request_id: id,
              reader_id: reader.readerId,
              ...labels,
              prompt_tokens: ev.usage.promptTokens,
              completion_tokens: ev.usage.completionTokens,
              cached_tokens: ev.usage.cachedTokens,
              finish_reason: ev.finishReason,
              ttft_ms: first ? Math.round(first - started) : null,
              duration_ms: Math.round(performance.now() - started),
              tokens_per_second: tokensPerSecond,
            });
            yield { ...ev, usage: { ...ev.usage, tokensPerSecond } };
            continue;
          }
          yield ev;
        }
      } finally {
        release();
      }
    }
    return { events: observed(), release, reader };
  }

  async runToCompletion(group: string | undefined, req: GenerateRequest, signal: AbortSignal): Promise<Done> {
    const { events, release } = await this.startGeneration(group, req, signal);
    try {
      for await (const ev of events) if (ev.type === 'done') return ev;
      throw new CancelledError();
    } finally {
      release();
    }
  }

  /**
   * Runs one encoder call (embed, rerank, classify) on the least-loaded ready
   * reader of `group` whose type is one of `types` (else 400
   * `wrong_reader_type`). The call's inputs count against the queued-work
   * bound; `id` makes it cancellable through POST /cancel/{id}, and `signal`
   * (the client going away) cancels it too.
   */
  async runEncoder<T>(
    group: string | undefined,
    need: { types: readonly ReaderType[]; what: string },
    texts: readonly string[],
    signal: AbortSignal,
    call: (api: EncoderReaderApi, signal: AbortSignal) => Promise<T>,
    id: string = this.newRequestId(),
  ): Promise<T> {
    if (signal.aborted) throw new CancelledError();
    const bytes = 1024 + texts.reduce((a, t) => a + t.length * 2 + 8192, 0); // inputs, plus room for each output
    this.checkCapacity(bytes, group ?? this.config.consumerGroup);
    const reader = await this.readers.acquire(group ?? this.config.consumerGroup, need, signal);
    const ac = new AbortController();
    const onAbort = (): void => ac.abort();
    signal.addEventListener('abort', onAbort, { once: true });
    this.reservedBytes += bytes;
    reader.inFlight++;
    this.inFlight.set(id, { reader, ac });
    const started = performance.now();
    try {
      const out = await call(reader.api!, ac.signal);
      this.metrics.encoderFinished(texts.length, (performance.now() - started) / 1000, requestLabels(reader));
      return out;
    } finally {
      this.reservedBytes -= bytes;
      reader.inFlight = Math.max(0, reader.inFlight - 1);
      this.inFlight.delete(id);
      signal.removeEventListener('abort', onAbort);
    }
  }

  async cancel(id: string): Promise<boolean> {
    const f = this.inFlight.get(id);
    if (!f) return false;
    f.ac.abort();
    return true;
  }

  async status(): Promise<Record<string, unknown>> {
    const groups: Record<string, unknown[]> = {};
    for (const [g, list] of this.readers.groups()) {
      groups[g] = await Promise.all(
        list.map(async (r) => {
          // Never wait on a busy reader: after PROBE_MS answer with the last known statistics, marked stale.
          const { stats, fresh } = await r.statsWithin(PROBE_MS);
          const stalled = r.stalledMs();
          return { ...this.readers.summary(r), stats, ...(r.ready ? { responsive: fresh, stalled_ms: stalled, healthy: stalled <= this.config.readerStallMillis } : {}) };
        }),
      );
    }
    return { version: this.version, requests_in_flight: this.inFlight.size, reserved_bytes: this.reservedBytes, groups };
  }

  async close(): Promise<void> {
    for (const f of this.inFlight.values()) f.ac.abort();
    await this.nats?.directory.close();
    await this.readers.stopAll();
    await this.nats?.nc.close().catch(() => undefined);
  }
}

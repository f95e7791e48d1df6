/**
 * ReaderApi served in-process by a loaded decoder. Runs wherever the core
 * runs: inside a Node worker thread (server readers), in a browser Web
 * Worker (browser mode) or directly in tests.
 */
import { InvalidRequestError } from '../errors.ts';
import { renderChatTemplate } from '../tokenizer/chat_template.ts';
import { detectToolFormat } from '../tools/index.ts';
import type { ToolFormat } from '../tools/types.ts';
import { imageGeneration } from './image_generation.ts';
import type { GenerateOptions, GenerationEvent } from './engine.ts';
import type { ConstraintCompiler, GenerateRequest, ReaderApi, ReaderInfo, ReaderStats } from './reader_api.ts';
import { validateRequest } from './reader_api.ts';
import type { ServedDecoder } from './served_decoder.ts';

/**
 * Encodes a text off this thread (a tokenizer worker) when that is worth it; undefined = the
 * caller encodes it here. The ids must equal `tokenizer.encode(text, { addSpecialTokens })`.
 */
export type OffThreadEncoder = (text: string, addSpecialTokens: boolean, signal?: AbortSignal) => Promise<number[]> | undefined;

export class LocalReader implements ReaderApi {
  private toolFormat: ToolFormat | null | undefined;

  constructor(
    readonly loaded: ServedDecoder,
    private readonly meta: { readerId: string; model: string; device: string; backend: string; speculative?: ReaderInfo['speculative'] },
    private readonly compileConstraint?: ConstraintCompiler,
    private readonly encodeOffThread?: OffThreadEncoder,
  ) {}

  info(): ReaderInfo {
    const { cfg, tokenizer, engine } = this.loaded;
    return {
      ...this.meta,
      type: 'generate',
      architecture: cfg.architecture,
      contextLength: engine.opts.scheduler.maxContext,
      vocabSize: cfg.vocabSize,
      hasChatTemplate: tokenizer.hasChatTemplate,
      capacity: { maxSeqs: engine.opts.scheduler.maxSeqs, kvTokens: engine.runner.kv.numBlocks * engine.runner.kv.blockSize },
      toolFormat: this.toolFormatOf(),
      ...(this.loaded.vision ? { imageInput: true } : {}),
    };
  }

  /** Detected once by rendering probe conversations through the model's template (core/tools). */
  private toolFormatOf(): ToolFormat | null {
    if (this.toolFormat === undefined) {
      const tok = this.loaded.tokenizer;
      this.toolFormat = tok.hasChatTemplate ? detectToolFormat((messages, tools) => tok.applyChatTemplate(messages as never, { addGenerationPrompt: true, tools })) : null;
    }
    return this.toolFormat;
  }

  /** The prompt to encode, and whether it came from the request's fallback chat template. */
  private promptOf(req: GenerateRequest): { prompt: string | number[]; fallback: boolean } {
    const p = req.prompt;
    if (typeof p === 'string' || Array.isArray(p)) return { prompt: p, fallback: false };
    if (!p || !Array.isArray(p.messages)) throw new InvalidRequestError('invalid_prompt', 'prompt must be a string, token ids or {messages}', { field: 'prompt' });
    const tok = this.loaded.tokenizer;
    const opts = { addGenerationPrompt: true, ...(p.tools ? { tools: p.tools } : {}) };
    const fb = req.chatTemplateFallback;
    if (!tok.hasChatTemplate && fb) {
      const name = (id: number | null | undefined): string | null => (id === null || id === undefined ? null : (tok.idToToken(id) ?? null));
      const specials = { bos_token: name(tok.bosId) ?? '', eos_token: name(tok.eosIds[0]) ?? '' };
      return { prompt: renderChatTemplate(fb.template, p.messages, opts, specials), fallback: true };
    }
    return { prompt: tok.applyChatTemplate(p.messages, opts), fallback: false };
  }

  generate(req: GenerateRequest, signal?: AbortSignal): AsyncIterable<GenerationEvent> {
    validateRequest(req);
    let constraint;
    if (req.constraint) {
      if (!this.compileConstraint) throw new InvalidRequestError('constraints_unsupported', 'this reader cannot apply structured-output constraints');
      constraint = this.compileConstraint(req.constraint, signal);
    }
    const { prompt, fallback } = this.promptOf(req);
    // A model's own chat template already emits its special tokens; a
    // fallback template (ChatML) does not, so the tokenizer adds BOS as usual.
    const chat = typeof req.prompt === 'object' && !Array.isArray(req.prompt) && !fallback;
    const stop = fallback && req.chatTemplateFallback?.stop?.length ? [...(req.stop ?? []), ...req.chatTemplateFallback.stop] : req.stop;
    const opts: GenerateOptions = {
      ...(req.maxNewTokens !== undefined ? { maxNewTokens: req.maxNewTokens } : {}),
      ...(req.minNewTokens !== undefined ? { minNewTokens: req.minNewTokens } : {}),
      ...(req.sampling ? { sampling: req.sampling } : {}),
      ...(req.noRepeatNgramSize ? { noRepeatNgramSize: req.noRepeatNgramSize } : {}),
      ...(req.speculative === false ? { speculative: false } : {}),
      ...(stop ? { stop } : {}),
      ...(req.stopTokenIds ? { stopTokenIds: req.stopTokenIds } : {}),
      ...(req.ignoreEos ? { ignoreEos: true } : {}),
      ...(req.promptMaxTokens !== undefined ? { promptMaxTokens: req.promptMaxTokens } : {}),
      ...(req.id ? { id: req.id } : {}),
      ...(signal ? { signal } : {}),
      ...(req.logprobs !== undefined ? { logprobs: req.logprobs } : {}),
      ...(req.promptLogprobs !== undefined ? { promptLogprobs: req.promptLogprobs } : {}),
      ...(req.logitBias ? { logitBias: this.logitBiasOf(req.logitBias) } : {}),
      addSpecialTokens: !chat,
    };
    // A long text prompt is tokenized off this thread (image prompts splice features by their own encode).
    const ids = typeof prompt === 'string' && !req.images ? this.encodeOffThread?.(prompt, opts.addSpecialTokens !== false, signal) : undefined;
    const run = (p: string | number[], o: GenerateOptions): AsyncIterable<GenerationEvent> => (req.images ? imageGeneration(this.loaded, p, req.images, o) : this.loaded.engine.generate(p, o));
    if (!(constraint instanceof Promise) && !ids) return run(prompt, { ...opts, ...(constraint ? { constraint } : {}) });
    // Compiled or tokenized off this thread: the request joins the batch once both are ready; others keep stepping meanwhile.
    const pending = Promise.all([constraint, ids ?? prompt]);
    pending.catch(() => undefined); // a request dropped before it is iterated must not leave an unhandled rejection
    return (async function* () {
      const [c, p] = await pending;
      yield* run(p, { ...opts, ...(c ? { constraint: c } : {}) });
    })();
  }

  /** Checks ids against the vocabulary and biases against [-100, 100] (400 invalid_logit_bias, field logit_bias). */
  private logitBiasOf(b: Record<string, number>): Map<number, number> {
    const V = this.loaded.cfg.vocabSize;
    const out = new Map<number, number>();
    for (const [k, v] of Object.entries(b)) {
      const id = Number(k);
      if (!/^\d+$/.test(k) || id >= V) throw new InvalidRequestError('invalid_logit_bias', `logit_bias key "${k}" is not a token id of this model (0..${V - 1})`, { field: 'logit_bias' });
      if (typeof v !== 'number' || !Number.isFinite(v) || v < -100 || v > 100) throw new InvalidRequestError('invalid_logit_bias', `logit_bias values must be numbers in [-100, 100] (token ${k})`, { field: 'logit_bias' });
      if (v !== 0) out.set(id, v);
    }
    return out;
  }

  async cancel(id: string): Promise<boolean> {
    return this.loaded.engine.cancel(id);
  }

  async tokenize(text: string, opts: { addSpecialTokens?: boolean } = {}): Promise<{ ids: number[]; tokens: string[] }> {
    const tok = this.loaded.tokenizer;
    const add = opts.addSpecialTokens ?? true;
    const ids = await (this.encodeOffThread?.(text, add) ?? tok.encode(text, { addSpecialTokens: add }));
    return { ids, tokens: ids.map((i) => tok.idToToken(i) ?? '') };
  }

  async detokenize(ids: number[], opts: { skipSpecialTokens?: boolean } = {}): Promise<string> {
    const tok = this.loaded.tokenizer;
    for (const id of ids) {
      if (!Number.isInteger(id) || id < 0 || id >= this.loaded.cfg.vocabSize) {
        throw new InvalidRequestError('invalid_token', `token id ${id} is outside the vocabulary (0..${this.loaded.cfg.vocabSize - 1})`, { field: 'tokens' });
      }
    }
    return tok.decode(ids, { skipSpecialTokens: opts.skipSpecialTokens ?? false });
  }

  async chatTemplate(messages: Parameters<ReaderApi['chatTemplate']>[0], opts: { addGenerationPrompt?: boolean; tools?: unknown[] } = {}): Promise<string> {
    return this.loaded.tokenizer.applyChatTemplate(messages, { addGenerationPrompt: opts.addGenerationPrompt ?? true, ...(opts.tools ? { tools: opts.tools } : {}) });
  }

  async modelConfig(): Promise<unknown> {
    return this.loaded.rawConfig;
  }

  async stats(): Promise<ReaderStats> {
    const { engine } = this.loaded;
    const kv = engine.runner.kv.stats();
    return {
      running: engine.scheduler.running.length,
      waiting: engine.scheduler.waiting.length,
      kvBlocksTotal: kv.numBlocks,
      kvBlocksFree: kv.freeBlocks,
      prefixHitTokens: kv.prefixHitTokens,
      ...engine.scheduler.counters,
      ...(engine.speculator
        ? {
            draftTokensProposed: engine.speculator.stats.proposed,
            draftTokensAccepted: engine.speculator.stats.accepted,
            draftAcceptanceRate: engine.speculator.stats.proposed ? engine.speculator.stats.accepted / engine.speculator.stats.proposed : null,
          }
        : {}),
      computedTokens: engine.runner.computedTokens,
      gpuBusyMs: engine.runner.ctx.stepTimer?.busyMs ?? null,
      ...(engine.runner.model.pathCounts ? { decodePaths: { ...engine.runner.model.pathCounts } } : {}),
    };
  }
}

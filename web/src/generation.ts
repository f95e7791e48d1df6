/**
 * The three ways the playground generates, behind one callback interface:
 * the server's /generate_stream (Takeoff-style SSE: default events carry
 * {text, token_id}, `event: done` {finish_reason, usage}, `event: error`
 * {error}), the server's /v1/chat/completions (OpenAI chunks ending in
 * `data: [DONE]`), and the in-tab reader (RemoteReader events). Stopping a
 * server run posts /cancel/{x-request-id}, waits briefly for the server's
 * own `done` (finish reason `cancelled`), then aborts the fetch.
 */
import type { GenerateRequest } from '../../core/engine/reader_api.ts';
import { DEFAULT_CHATML_TEMPLATE } from '../../core/tokenizer/chat_template.ts';
import { apiFetch, ApiError } from './api.ts';
import type { BrowserModel } from './browser_mode.ts';
import { readSse } from './sse.ts';

export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  cached_tokens?: number;
}

export interface Sink {
  started(requestId: string | null): void;
  token(text: string, id: number | null): void;
  done(finishReason: string, usage: Usage | null): void;
  error(message: string): void;
}

/** Takeoff-style parameters as the form collects them. */
export interface Params {
  max_new_tokens?: number;
  min_new_tokens?: number;
  sampling_temperature?: number;
  sampling_topk?: number;
  sampling_topp?: number;
  repetition_penalty?: number;
  seed?: number;
  stop?: string[];
  json_schema?: unknown;
  regex_string?: string;
  constrained_decoding_backend?: string;
}

export interface ChatTurn {
  role: 'system' | 'user' | 'assistant';
  content: string;
}

export interface Run {
  /** Resolves once the run has ended (done, error or stopped). */
  finished: Promise<void>;
  stop(): Promise<void>;
}

const STOP_GRACE_MS = 1500;

/**
 * Drives one server run: `open` starts the request and feeds the (wrapped)
 * sink; the wrapper makes sure exactly one of done/error reaches the page.
 */
function serverRun(sink: Sink, open: (signal: AbortSignal, s: Sink) => Promise<void>): Run {
  const ac = new AbortController();
  let rid: string | null = null;
  let ended = false;
  let markDone!: () => void;
  const doneSeen = new Promise<void>((r) => (markDone = r));
  const end = (f: () => void): void => {
    if (ended) return;
    ended = true;
    markDone();
    f();
  };
  const s: Sink = {
    started: (id) => ((rid = id), sink.started(id)),
    token: (t, id) => !ended && sink.token(t, id),
    done: (r, u) => end(() => sink.done(r, u)),
    error: (m) => end(() => sink.error(m)),
  };
  const finished = open(ac.signal, s)
    .catch((e: unknown) => ((e as Error).name === 'AbortError' ? s.done('cancelled', null) : s.error((e as Error).message)))
    .then(() => s.error('the stream ended without a done event'));
  return {
    finished,
    async stop() {
      if (ended) return;
      if (rid) await apiFetch('inference', `cancel/${encodeURIComponent(rid)}`, { method: 'POST' }).catch(() => {});
      await Promise.race([doneSeen, new Promise((r) => setTimeout(r, rid ? STOP_GRACE_MS : 0))]);
      ac.abort();
      await finished;
    },
  };
}

const errorText = (data: string): string => {
  try {
    const e = (JSON.parse(data) as { error?: { code?: string; message?: string } }).error;
    return `${e?.code ?? 'error'}: ${e?.message ?? data}`;
  } catch {
    return data;
  }
};

/** POST /generate_stream (or /image_generate_stream, same shapes) with `text` and the parameters. */
export function streamGenerate(group: string, text: string, p: Params, sink: Sink, path: 'generate_stream' | 'image_generate_stream' = 'generate_stream'): Run {
  return serverRun(sink, async (signal, s) => {
    const res = await apiFetch('inference', path, { method: 'POST', body: JSON.stringify({ ...p, text, consumer_group: group }), signal });
    s.started(res.headers.get('x-request-id'));
    for await (const ev of readSse(res.body!)) {
      if (ev.event === 'done') {
        const d = JSON.parse(ev.data) as { finish_reason: string; usage: Usage };
        s.done(d.finish_reason, d.usage);
      } else if (ev.event === 'error') s.error(errorText(ev.data));
      else {
        const d = JSON.parse(ev.data) as { text: string; token_id: number };
        s.token(d.text, d.token_id);
      }
    }
  });
}

/** POST /v1/chat/completions with stream: true (the group is the `model`). */
export function streamChat(group: string, messages: ChatTurn[], p: Params, sink: Sink): Run {
  const body: Record<string, unknown> = {
    model: group,
    messages,
    stream: true,
    stream_options: { include_usage: true },
    temperature: p.sampling_temperature ?? 0,
    ...(p.max_new_tokens !== undefined ? { max_tokens: p.max_new_tokens } : {}),
    ...(p.sampling_topp !== undefined ? { top_p: p.sampling_topp } : {}),
    ...(p.sampling_topk !== undefined ? { top_k: p.sampling_topk } : {}),
    ...(p.repetition_penalty !== undefined ? { repetition_penalty: p.repetition_penalty } : {}),
    ...(p.seed !== undefined ? { seed: p.seed } : {}),
    ...(p.stop?.length ? { stop: p.stop } : {}),
    ...(p.json_schema !== undefined ? { response_format: { type: 'json_schema', json_schema: { name: 'output', schema: p.json_schema } } } : {}),
  };
  return serverRun(sink, async (signal, s) => {
    const res = await apiFetch('inference', 'v1/chat/completions', { method: 'POST', body: JSON.stringify(body), signal });
    s.started(res.headers.get('x-request-id'));
    let finish: string | null = null;
    let usage: Usage | null = null;
    for await (const ev of readSse(res.body!)) {
      if (ev.data === '[DONE]') break;
      const d = JSON.parse(ev.data) as { choices?: { delta?: { content?: string }; finish_reason?: string | null }[]; usage?: Usage | null; error?: unknown };
      if (d.error) return s.error(errorText(ev.data));
      const c = d.choices?.[0];
      if (c?.delta?.content) s.token(c.delta.content, null);
      if (c?.finish_reason) finish = c.finish_reason;
      if (d.usage) usage = d.usage;
    }
    if (finish) s.done(finish, usage);
  });
}

/** The Takeoff-style parameters as a reader request (what server/apps/inference.ts does). */
export function toReaderRequest(prompt: GenerateRequest['prompt'], p: Params): GenerateRequest {
  if (p.json_schema !== undefined && p.regex_string !== undefined) throw new ApiError('give json_schema or regex_string, not both', 400, 'conflicting_constraints');
  const backend = p.constrained_decoding_backend;
  return {
    prompt,
    maxNewTokens: p.max_new_tokens ?? 128,
    sampling: {
      temperature: p.sampling_temperature ?? 0,
      ...(p.sampling_topk !== undefined ? { topK: p.sampling_topk } : {}),
      ...(p.sampling_topp !== undefined ? { topP: p.sampling_topp } : {}),
      ...(p.repetition_penalty !== undefined ? { repetitionPenalty: p.repetition_penalty } : {}),
      ...(p.seed !== undefined ? { seed: p.seed } : {}),
    },
    ...(p.min_new_tokens !== undefined ? { minNewTokens: p.min_new_tokens } : {}),
    ...(p.stop?.length ? { stop: p.stop } : {}),
    ...(p.json_schema !== undefined ? { constraint: { kind: 'json_schema', schema: p.json_schema, ...(backend ? { backend } : {}) } } : {}),
    ...(p.regex_string !== undefined ? { constraint: { kind: 'regex', pattern: p.regex_string, ...(backend ? { backend } : {}) } } : {}),
  };
}

/** Chat prompts to models without a chat template use ChatML, as the server's /v1 layer does. */
function chatFallback(req: GenerateRequest): GenerateRequest {
  const chat = typeof req.prompt === 'object' && !Array.isArray(req.prompt);
  return chat && !req.chatTemplateFallback ? { ...req, chatTemplateFallback: { template: DEFAULT_CHATML_TEMPLATE, stop: ['<|im_end|>'] } } : req;
}

/** Runs a request on the in-tab reader; stopping aborts it (the engine finishes it as `cancelled`). */
export function browserGenerate(model: BrowserModel, req: GenerateRequest, sink: Sink): Run {
  const ac = new AbortController();
  let ended = false;
  const finished = (async () => {
    try {
      sink.started(null);
      for await (const ev of model.engine.generate(chatFallback(req), { signal: ac.signal })) {
        if (ev.type === 'token') sink.token(ev.text, ev.id);
        else {
          ended = true;
          const u = ev.usage;
          sink.done(ev.finishReason, { prompt_tokens: u.promptTokens, completion_tokens: u.completionTokens, cached_tokens: u.cachedTokens });
        }
      }
      if (!ended) sink.done('cancelled', null);
    } catch (e) {
      if (!ended) sink.error((e as Error).message);
    }
  })();
  return {
    finished,
    async stop() {
      ac.abort();
      await finished;
    },
  };
}

/**
 * POST /v1/responses: the Responses API on top of the same generation path
 * as chat completions. `instructions` become a system message; `input` is a
 * string or a list of items (messages with text parts, `function_call` and
 * `function_call_output` items, which become the chat template's tool
 * history); function tools and `tool_choice` work as on chat (openai_tools.ts);
 * `text.format` json_schema / json_object constrain the output. Streaming sends
 * named SSE events (`response.created` ... `response.completed`) with
 * `sequence_number`s, as OpenAI does. Nothing is stored: `store` and
 * `previous_response_id` are not supported.
 */
import type { Context, Hono } from 'hono';
import { streamSSE } from 'hono/streaming';
import { z } from 'zod';
import type { GenerationEvent } from '../../core/engine/engine.ts';
import { InvalidRequestError } from '../../core/errors.ts';
import type { ConstraintRequest, GenerateRequest } from '../../core/engine/reader_api.ts';
import type { ChatMessage } from '../../core/tokenizer/chat_template.ts';
import { type ApiSpec, parseBody } from '../http/api_spec.ts';
import type { Service } from '../service.ts';
import { CHAT_FALLBACK, openaiError, resolveModel } from './openai_common.ts';
import { newCallId, planTools, readCalls, templateToolHistory } from './openai_tools.ts';

type Done = Extract<GenerationEvent, { type: 'done' }>;
const nul = <T extends z.ZodType>(t: T) => t.nullable().optional();

export const ResponsesBody = z.object({
  model: z.string().min(1).max(128).optional(),
  input: z.union([z.string(), z.array(z.record(z.string(), z.unknown())).min(1).max(4096)]).describe('A string (one user message) or a list of items: messages {role, content}, function_call and function_call_output items.'),
  instructions: nul(z.string()).describe('A system message before the input.'),
  max_output_tokens: nul(z.number().int().min(1).max(1 << 20)),
  temperature: nul(z.number().min(0).max(2)),
  top_p: nul(z.number().min(0).max(1)),
  seed: nul(z.number().int()).describe('Extension: reproducible sampling.'),
  tools: nul(z.array(z.unknown())).describe('Function tools [{type: "function", name, description?, parameters?}] (other tool types: 400).'),
  tool_choice: nul(z.unknown()),
  parallel_tool_calls: nul(z.boolean()),
  text: nul(z.object({ format: nul(z.record(z.string(), z.unknown())) }).passthrough()).describe('text.format: {type: "text"} | {type: "json_object"} | {type: "json_schema", name, schema, strict?}.'),
  stream: nul(z.boolean()),
  store: nul(z.boolean()),
  previous_response_id: nul(z.string()),
});
type Body = z.output<typeof ResponsesBody>;

const bad = (code: string, message: string, field: string): InvalidRequestError => new InvalidRequestError(code, message, { field });

/** Text of a message's content: a string, or input_text / output_text parts. */
function textOf(content: unknown, at: string): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) throw bad('invalid_input', 'message content must be a string or a list of text parts', at);
  return content
    .map((p: { type?: unknown; text?: unknown }, k) => {
      if ((p?.type === 'input_text' || p?.type === 'output_text' || p?.type === 'text') && typeof p.text === 'string') return p.text;
      throw bad('unsupported_content', `only input_text / output_text parts are supported (got "${String(p?.type)}")`, `${at}.${k}`);
    })
    .join('');
}

/** `instructions` + `input` → chat messages (tool history as chat's). */
function messagesOf(b: Body): Record<string, unknown>[] {
  const out: Record<string, unknown>[] = b.instructions ? [{ role: 'system', content: b.instructions }] : [];
  if (typeof b.input === 'string') return [...out, { role: 'user', content: b.input }];
  b.input.forEach((it, i) => {
    const type = it.type ?? 'message';
    if (type === 'message') {
      const role = it.role === 'developer' ? 'system' : it.role;
      if (role !== 'user' && role !== 'assistant' && role !== 'system') throw bad('invalid_input', 'a message role must be user, assistant, system or developer', `input.${i}.role`);
      out.push({ role, content: textOf(it.content, `input.${i}.content`) });
    } else if (type === 'function_call') {
      if (typeof it.call_id !== 'string' || typeof it.name !== 'string' || typeof it.arguments !== 'string') throw bad('invalid_input', 'a function_call item needs call_id, name and arguments (JSON text)', `input.${i}`);
      const call = { id: it.call_id, type: 'function', function: { name: it.name, arguments: it.arguments } };
      const last = out[out.length - 1];
      if (last?.role === 'assistant' && Array.isArray(last.tool_calls)) (last.tool_calls as unknown[]).push(call);
      else out.push({ role: 'assistant', content: null, tool_calls: [call] });
    } else if (type === 'function_call_output') {
      if (typeof it.call_id !== 'string') throw bad('invalid_input', 'a function_call_output item needs call_id', `input.${i}.call_id`);
      out.push({ role: 'tool', tool_call_id: it.call_id, content: typeof it.output === 'string' ? it.output : JSON.stringify(it.output) });
    } else {
      throw bad('unsupported_input_item', `input items of type "${String(type)}" are not supported`, `input.${i}.type`);
    }
  });
  return out;
}

/** Responses tools (flat) → chat tools; other tool types are 400s. */
function toolsOf(tools: unknown[] | null | undefined): unknown[] | undefined {
  return tools?.map((t, i) => {
    const o = t as { type?: unknown; name?: unknown; description?: unknown; parameters?: unknown; strict?: unknown } | null;
    if (o?.type !== 'function') throw bad('unsupported_parameter', `only function tools are supported (got "${String(o?.type)}")`, `tools.${i}.type`);
    return { type: 'function', function: { name: o.name, ...(o.description !== undefined ? { description: o.description } : {}), ...(o.parameters !== undefined && o.parameters !== null ? { parameters: o.parameters } : {}), ...(o.strict === true ? { strict: true } : {}) } };
  });
}

function formatOf(f: Record<string, unknown> | null | undefined): ConstraintRequest | undefined {
  if (!f || f.type === 'text') return undefined;
  if (f.type === 'json_object') return { kind: 'json_object' };
  if (f.type === 'json_schema') return { kind: 'json_schema', schema: f.schema ?? {}, ...(f.strict === true ? { strict: true } : {}) };
  throw bad('invalid_request', 'text.format.type must be text, json_object or json_schema', 'text.format.type');
}

const hex = (id: string): string => id.replace(/-/g, '');

/** The output items of a finished generation. */
function outputOf(plan: ReturnType<typeof planTools>, d: Done, rid: string): Record<string, unknown>[] {
  const r = plan ? readCalls(plan, d.text, d.finishReason) : { content: d.text, calls: [] };
  const items: Record<string, unknown>[] = [];
  if (r.content !== null && (r.content.length > 0 || r.calls.length === 0)) {
    items.push({ type: 'message', id: `msg_${hex(rid)}`, status: 'completed', role: 'assistant', content: [{ type: 'output_text', text: r.content, annotations: [] }] });
  }
  r.calls.forEach((c, i) => items.push({ type: 'function_call', id: `fc_${hex(rid)}${i}`, call_id: newCallId(plan!.format), name: c.name, arguments: c.arguments, status: 'completed' }));
  return items;
}

export function responsesRoutes(app: Hono, spec: ApiSpec, svc: Service, maxBody: number): void {
  spec.add({ method: 'post', path: '/v1/responses', summary: 'Responses API (stream: true for named SSE events ending in response.completed)', body: ResponsesBody });
  app.post('/v1/responses', async (c: Context) => {
    const b = await parseBody(c, ResponsesBody, maxBody);
    if (b.previous_response_id) throw bad('unsupported_parameter', 'responses are not stored: previous_response_id is not supported; send the whole conversation as input', 'previous_response_id');
    const group = resolveModel(svc, b.model);
    const plan = planTools(svc, group, toolsOf(b.tools), b.tool_choice, b.parallel_tool_calls);
    const format = formatOf(b.text?.format);
    if (format && plan?.mode === 'forced') throw bad('conflicting_constraints', 'text.format cannot be combined with a required or named tool_choice', 'text.format');
    const messages = templateToolHistory(messagesOf(b), plan?.format) as ChatMessage[];
    const seed = b.seed ?? undefined;
    const constraint = plan?.forced ? { kind: 'json_schema' as const, schema: plan.forced.schema, ...(plan.strict ? { strict: true } : {}) } : format;
    const req: GenerateRequest = {
      prompt: { messages, ...(plan?.tools.length ? { tools: plan.tools } : {}) },
      chatTemplateFallback: CHAT_FALLBACK,
      ...(b.max_output_tokens != null ? { maxNewTokens: b.max_output_tokens } : {}),
      sampling: {
        temperature: b.top_p === 0 ? 0 : (b.temperature ?? 1),
        ...(b.top_p ? { topP: b.top_p } : {}),
        ...(seed !== undefined ? { seed: ((seed % 2 ** 32) + 2 ** 32) % 2 ** 32 } : {}),
      },
      ...(constraint ? { constraint } : {}),
    };
    const rid = svc.newRequestId();
    const base = {
      id: `resp_${hex(rid)}`, object: 'response', created_at: Math.floor(Date.now() / 1000), model: b.model ?? group,
      instructions: b.instructions ?? null, tools: b.tools ?? [], tool_choice: b.tool_choice ?? 'auto', parallel_tool_calls: b.parallel_tool_calls ?? true,
      temperature: b.temperature ?? 1, top_p: b.top_p ?? 1, max_output_tokens: b.max_output_tokens ?? null, text: b.text ?? { format: { type: 'text' } },
      error: null, incomplete_details: null, metadata: {}, previous_response_id: null, store: false,
    };
    const final = (d: Done): Record<string, unknown> => ({
      ...base,
      status: d.finishReason === 'length' ? 'incomplete' : 'completed',
      incomplete_details: d.finishReason === 'length' ? { reason: 'max_output_tokens' } : null,
      output: outputOf(plan, d, rid),
      usage: { input_tokens: d.usage.promptTokens, input_tokens_details: { cached_tokens: d.usage.cachedTokens }, output_tokens: d.usage.completionTokens, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: d.usage.promptTokens + d.usage.completionTokens },
    });
    if (!b.stream) {
      c.header('x-request-id', rid);
      return c.json(final(await svc.runToCompletion(group, { ...req, id: rid }, c.req.raw.signal)));
    }
    const ac = new AbortController();
    c.req.raw.signal.addEventListener('abort', () => ac.abort(), { once: true });
    const { events, release } = await svc.startGeneration(group, { ...req, id: rid }, ac.signal);
    c.header('x-request-id', rid);
    return streamSSE(c, async (stream) => {
      stream.onAbort(() => ac.abort());
      let seq = 0;
      const send = (type: string, o: object): Promise<void> => stream.writeSSE({ event: type, data: JSON.stringify({ type, sequence_number: seq++, ...o }) });
      // Plain text streams as deltas; with tools, the output is known only at the end.
      const live = !plan || plan.mode === 'none';
      const msgId = `msg_${hex(rid)}`;
      try {
        await send('response.created', { response: { ...base, status: 'in_progress', output: [], usage: null } });
        await send('response.in_progress', { response: { ...base, status: 'in_progress', output: [], usage: null } });
        if (live) {
          await send('response.output_item.added', { output_index: 0, item: { type: 'message', id: msgId, status: 'in_progress', role: 'assistant', content: [] } });
          await send('response.content_part.added', { item_id: msgId, output_index: 0, content_index: 0, part: { type: 'output_text', text: '', annotations: [] } });
        }
        for await (const ev of events) {
          if (ev.type === 'token') {
            if (live && ev.text) await send('response.output_text.delta', { item_id: msgId, output_index: 0, content_index: 0, delta: ev.text });
            continue;
          }
          const r = final(ev);
          const items = r.output as Record<string, unknown>[];
          for (const [i, item] of items.entries()) {
            if (!live) await send('response.output_item.added', { output_index: i, item: { ...item, status: 'in_progress' } });
            if (item.type === 'message') {
              const text = (item.content as { text: string }[])[0]!.text;
              if (!live) {
                await send('response.content_part.added', { item_id: item.id, output_index: i, content_index: 0, part: { type: 'output_text', text: '', annotations: [] } });
                await send('response.output_text.delta', { item_id: item.id, output_index: i, content_index: 0, delta: text });
              }
              await send('response.output_text.done', { item_id: item.id, output_index: i, content_index: 0, text });
              await send('response.content_part.done', { item_id: item.id, output_index: i, content_index: 0, part: { type: 'output_text', text, annotations: [] } });
            } else {
              await send('response.function_call_arguments.delta', { item_id: item.id, output_index: i, delta: item.arguments });
              await send('response.function_call_arguments.done', { item_id: item.id, output_index: i, arguments: item.arguments });
            }
            await send('response.output_item.done', { output_index: i, item });
          }
          await send(r.status === 'completed' ? 'response.completed' : 'response.incomplete', { response: r });
        }
      } catch (e) {
        await send('error', { ...openaiError(e).error });
      } finally {
        ac.abort();
        release();
      }
    });
  });
}

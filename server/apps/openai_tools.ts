/**
 * Tool calling for /v1/chat/completions and /v1/responses: validates `tools`
 * and `tool_choice`, converts tool history (assistant `tool_calls`, `tool`
 * results) for the model's chat template, picks how calls are produced, and
 * shapes parsed calls as OpenAI does.
 *
 * `auto`: the model generates freely with the tools in its template; its own
 * syntax is parsed (core/tools, per template family). `required` / a named
 * function: the call is generated under a JSON Schema by the structured-output
 * engine (a named function: its arguments object; `required`: `{name,
 * arguments}` for one of the tools, or a list when parallel calls are
 * allowed), so arguments always parse and validate. `none`: the tools are not
 * shown to the model and nothing is parsed.
 */
import { randomBytes } from 'node:crypto';
import { InvalidRequestError, WeftError } from '../../core/errors.ts';
import { schemaToAst } from '../../core/structured/schema.ts';
import { forcedCall, type ForcedCall, type FunctionTool, type ParsedToolCall, toolParser, type ToolFormat, type ToolParser } from '../../core/tools/index.ts';
import type { Service } from '../service.ts';

export interface ToolPlan {
  format: ToolFormat;
  parser: ToolParser;
  /** What the template sees (none: no tools). */
  tools: FunctionTool[];
  mode: 'auto' | 'none' | 'forced';
  forced?: ForcedCall;
  /** The named function of a forced call, whose output is its arguments (streamed as they come). */
  named?: string;
  /** A forced call whose functions all say `strict: true`: its constraint compiles in strict mode (closed objects). */
  strict?: boolean;
}

/** OpenAI's wire shape of one call. */
export interface WireToolCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}

const NAME = /^[a-zA-Z0-9_.-]{1,64}$/;
const bad = (code: string, message: string, field: string): InvalidRequestError => new InvalidRequestError(code, message, { field });

/** The tool-call syntax of the group's readers; 400 when their template has no tool support. */
function formatOf(svc: Service, group: string, field: string): ToolFormat {
  const infos = svc.readers.all().flatMap((r) => (r.spec.consumerGroup === group && r.info ? [r.info] : []));
  const f = infos.find((i) => i.toolFormat)?.toolFormat;
  if (!f) {
    throw bad('tools_not_supported', `the chat template of model '${group}' has no tool support (it does not render \`tools\`); send the request without tools or serve a model whose template takes them`, field);
  }
  return f;
}

/** Checks one tool; `at` is its param path (`tools.0`). */
export function checkTool(t: unknown, at: string, strictSchemas: boolean): FunctionTool {
  const o = t as { type?: unknown; function?: { name?: unknown; description?: unknown; parameters?: unknown; strict?: unknown } } | null;
  if (!o || typeof o !== 'object' || o.type !== 'function' || !o.function || typeof o.function !== 'object') {
    throw bad('invalid_tool', 'each tool must be {"type": "function", "function": {"name", "parameters"?}}', at);
  }
  const f = o.function;
  if (typeof f.name !== 'string' || !NAME.test(f.name)) throw bad('invalid_tool', 'function.name must be 1-64 letters, digits, "_", "-" or "."', `${at}.function.name`);
  if (f.description !== undefined && typeof f.description !== 'string') throw bad('invalid_tool', 'function.description must be a string', `${at}.function.description`);
  const p = f.parameters;
  if (p !== undefined && (p === null || typeof p !== 'object' || Array.isArray(p))) throw bad('invalid_tool_schema', 'function.parameters must be a JSON Schema object', `${at}.function.parameters`);
  if (p !== undefined) {
    try {
      schemaToAst(p, { ws: 'none', recursion: 'rules' });
    } catch (e) {
      // A keyword the engine cannot enforce matters only where calls are forced.
      if (e instanceof WeftError && (strictSchemas || e.code !== 'unsupported_schema_keyword')) {
        throw bad('invalid_tool_schema', `function.parameters is not a usable JSON Schema: ${e.message}`, `${at}.function.parameters`);
      }
      if (!(e instanceof WeftError)) throw e;
    }
  }
  return { type: 'function', function: { name: f.name, ...(typeof f.description === 'string' ? { description: f.description } : {}), ...(p ? { parameters: p as Record<string, unknown> } : {}) } };
}

/** `tool_choice` → 'auto' | 'none' | 'required' | {name}; 400 on anything else. */
function choiceOf(v: unknown, field: string): 'auto' | 'none' | 'required' | { name: string } {
  if (v === undefined || v === null || v === 'auto') return 'auto';
  if (v === 'none' || v === 'required') return v;
  const o = v as { type?: unknown; function?: { name?: unknown }; name?: unknown } | null;
  // Chat: {type: 'function', function: {name}}; Responses: {type: 'function', name}.
  const name = o && typeof o === 'object' && o.type === 'function' ? (o.function?.name ?? o.name) : undefined;
  if (typeof name !== 'string') throw bad('invalid_tool_choice', 'tool_choice must be "auto", "none", "required" or {"type": "function", "function": {"name"}}', field);
  return { name };
}

/**
 * The plan for a request's tools, or null when it has none. `parallel`:
 * parallel_tool_calls (default true, as OpenAI).
 */
export function planTools(svc: Service, group: string, rawTools: unknown[] | null | undefined, rawChoice: unknown, parallel: boolean | null | undefined, fields = { tools: 'tools', choice: 'tool_choice' }): ToolPlan | null {
  const choice = choiceOf(rawChoice, fields.choice);
  if (!rawTools || rawTools.length === 0) {
    if (choice === 'auto' || choice === 'none') return null;
    throw bad('invalid_tool_choice', 'tool_choice requires tools', fields.choice);
  }
  if (rawTools.length > 128) throw bad('invalid_tool', 'at most 128 tools', fields.tools);
  const forced = choice !== 'auto' && choice !== 'none';
  const tools = rawTools.map((t, i) => checkTool(t, `${fields.tools}.${i}`, forced));
  const names = new Set<string>();
  tools.forEach((t, i) => {
    if (names.has(t.function.name)) throw bad('invalid_tool', `duplicate function name "${t.function.name}"`, `${fields.tools}.${i}.function.name`);
    names.add(t.function.name);
  });
  if (typeof choice === 'object' && !names.has(choice.name)) throw bad('tool_not_found', `tool_choice names function "${choice.name}", which is not in tools`, fields.choice);
  const format = formatOf(svc, group, fields.tools);
  const parser = toolParser(format);
  if (choice === 'none') return { format, parser, tools: [], mode: 'none' };
  if (choice === 'auto') return { format, parser, tools, mode: 'auto' };
  const f = forcedCall(tools, choice, parallel !== false);
  const strictOf = (t: unknown): boolean => (t as { function?: { strict?: unknown } }).function?.strict === true;
  const strict = typeof choice === 'object' ? rawTools.some((t, i) => strictOf(t) && tools[i]!.function.name === choice.name) : rawTools.every(strictOf);
  return { format, parser, tools, mode: 'forced', forced: f, ...(typeof choice === 'object' ? { named: choice.name } : {}), ...(strict ? { strict } : {}) };
}

/** A fresh call id: `call_` + 24 alphanumerics, or 9 alphanumerics for Mistral templates (which refuse others). */
export function newCallId(format: ToolFormat): string {
  const s = randomBytes(24).toString('base64').replace(/[^a-zA-Z0-9]/g, '0');
  return format === 'mistral' ? s.slice(0, 9) : `call_${s.slice(0, 24)}`;
}

/** Ids as the template family accepts them (Mistral: exactly 9 alphanumerics, derived stably from the client's id). */
function templateId(id: string, format: ToolFormat | undefined): string {
  if (format !== 'mistral' || /^[a-zA-Z0-9]{9}$/.test(id)) return id;
  const alnum = id.replace(/[^a-zA-Z0-9]/g, '');
  return alnum.length >= 9 ? alnum.slice(-9) : alnum.padStart(9, '0');
}

/**
 * Tool history for the template: assistant `tool_calls` with arguments as
 * objects (templates print them with `tojson`), `null` content as '', and each
 * `tool` message given the `name` of the call it answers.
 */
export function templateToolHistory(messages: Record<string, unknown>[], format: ToolFormat | undefined): Record<string, unknown>[] {
  const names = new Map<string, string>();
  return messages.map((m) => {
    if (m.role === 'assistant' && Array.isArray(m.tool_calls)) {
      const calls = (m.tool_calls as { id?: unknown; type?: unknown; function?: { name?: unknown; arguments?: unknown } }[]).map((c) => {
        const id = typeof c.id === 'string' ? c.id : '';
        const name = typeof c.function?.name === 'string' ? c.function.name : '';
        names.set(id, name);
        const raw = c.function?.arguments;
        let args: unknown = raw ?? {};
        if (typeof raw === 'string') {
          try {
            args = JSON.parse(raw);
          } catch {
            args = raw;
          }
        }
        return { id: templateId(id, format), type: 'function', function: { name, arguments: args } };
      });
      return { ...m, content: m.content ?? '', tool_calls: calls };
    }
    if (m.role === 'tool') {
      const id = typeof m.tool_call_id === 'string' ? m.tool_call_id : '';
      return { ...m, tool_call_id: templateId(id, format), ...(m.name === undefined && names.has(id) ? { name: names.get(id) } : {}) };
    }
    return m;
  });
}

/** Calls in wire shape, with fresh ids. */
export function wireCalls(calls: ParsedToolCall[], format: ToolFormat): WireToolCall[] {
  return calls.map((c) => ({ id: newCallId(format), type: 'function', function: { name: c.name, arguments: c.arguments } }));
}

/**
 * The calls of a finished generation under `plan`, and the content left. A
 * forced call cut short by max_tokens is no call: its text stays content.
 */
export function readCalls(plan: ToolPlan, text: string, finish: string): { content: string | null; calls: ParsedToolCall[] } {
  if (plan.mode === 'none') return { content: text, calls: [] };
  if (plan.mode === 'forced') {
    if (finish === 'length' || finish === 'cancelled') return { content: text, calls: [] };
    return { content: null, calls: plan.forced!.read(text) };
  }
  return plan.parser.parse(text);
}

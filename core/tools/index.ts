/**
 * Tool calling for chat models: which syntax a chat template speaks
 * (detected by rendering probe conversations through it), a parser per
 * family, a streaming splitter that holds back text from the first sign of a
 * call, and the JSON Schema that forces a call (`tool_choice` required or
 * named) under the structured-output engine. Browser-safe.
 */
import { hermesParser } from './hermes.ts';
import { llama3JsonParser } from './llama3_json.ts';
import { mistralParser } from './mistral.ts';
import type { ParsedOutput, ParsedToolCall, ToolFormat, ToolParser } from './types.ts';

export * from './types.ts';

const PARSERS: Record<ToolFormat, ToolParser> = { hermes: hermesParser, llama3_json: llama3JsonParser, mistral: mistralParser };

export function toolParser(format: ToolFormat): ToolParser {
  return PARSERS[format];
}

/** An OpenAI function tool as it reaches the template: `{type: 'function', function: {name, description?, parameters?}}`. */
export interface FunctionTool {
  type: 'function';
  function: { name: string; description?: string; parameters?: Record<string, unknown> };
}

/** A function name no real tool list holds; its presence in a render proves the template prints tools. */
const PROBE = 'weft_probe_function_3f9a';
/** Nine alphanumerics: Mistral templates refuse any other tool-call id. */
const PROBE_ID = 'a1b2c3d4e';

/**
 * The tool-call family of a chat template, or null when it ignores `tools`.
 * `render(messages, tools)` renders with the generation prompt and throws when
 * the template refuses. Unknown syntaxes that do print the tools are read as
 * Hermes-style (the most common convention for JSON tool calls).
 */
export function detectToolFormat(render: (messages: Record<string, unknown>[], tools: FunctionTool[]) => string): ToolFormat | null {
  const tools: FunctionTool[] = [{ type: 'function', function: { name: PROBE, description: 'probe', parameters: { type: 'object', properties: { x: { type: 'integer' } } } } }];
  const user = { role: 'user', content: 'hi' };
  let first: string;
  try {
    first = render([user], tools);
  } catch {
    return null;
  }
  if (!first.includes(PROBE)) return null;
  let history = '';
  try {
    const call = { id: PROBE_ID, type: 'function', function: { name: PROBE, arguments: { x: 1 } } };
    history = render([user, { role: 'assistant', content: '', tool_calls: [call] }, { role: 'tool', tool_call_id: PROBE_ID, name: PROBE, content: '1' }], tools);
  } catch {
    // Some templates refuse tool history shapes they do not know; the first render decides then.
  }
  const all = first + history;
  if (all.includes('<tool_call>')) return 'hermes';
  if (all.includes('[TOOL_CALLS]') || all.includes('[AVAILABLE_TOOLS]')) return 'mistral';
  if (all.includes('<|python_tag|>') || all.includes('ipython') || /"parameters"\s*:/.test(history)) return 'llama3_json';
  return 'hermes';
}

/**
 * Splits streamed output into content to send now and a held-back tail that
 * may be a tool call: text is held from a family marker (or a part of one at
 * the end), or from the very start when the family opens calls with bare JSON.
 */
export class ToolStreamSplitter {
  private full = '';
  private sent = 0;
  private capturing = false;

  constructor(private readonly parser: ToolParser) {}

  /** Adds generated text; returns the content that is certainly not part of a call. */
  push(text: string): string {
    this.full += text;
    if (this.capturing) return '';
    const p = this.parser;
    if (p.bareJsonStart && this.sent === 0) {
      const t = this.full.trimStart();
      if (!t) return '';
      if (t[0] === p.bareJsonStart || p.markers.some((m) => m.startsWith(t) || t.startsWith(m))) {
        this.capturing = true;
        return '';
      }
    }
    let until = this.full.length;
    for (const m of p.markers) {
      const at = this.full.indexOf(m, this.sent);
      if (at >= 0) {
        this.capturing = true;
        until = Math.min(until, at);
      }
    }
    if (!this.capturing) {
      // Keep back a suffix that could still grow into a marker.
      for (const m of p.markers) {
        for (let k = Math.min(m.length - 1, this.full.length - this.sent); k > 0; k--) {
          if (this.full.endsWith(m.slice(0, k))) {
            until = Math.min(until, this.full.length - k);
            break;
          }
        }
      }
    }
    const out = this.full.slice(this.sent, until);
    this.sent = until;
    return out;
  }

  /** At the end: the calls found, and content not yet sent (after the calls, or the whole held tail when it was no call). */
  end(): { calls: ParsedToolCall[]; rest: string } {
    const parsed: ParsedOutput = this.parser.parse(this.full);
    if (!parsed.calls.length) return { calls: [], rest: this.full.slice(this.sent) };
    const content = parsed.content ?? '';
    const already = this.full.slice(0, this.sent);
    return { calls: parsed.calls, rest: content.startsWith(already) ? content.slice(already.length) : '' };
  }
}

/** How a forced call is generated and read back. */
export interface ForcedCall {
  /** JSON Schema for the constrained output. */
  schema: Record<string, unknown>;
  /** The calls in the (schema-valid) output text. */
  read(text: string): ParsedToolCall[];
}

const paramsOf = (t: FunctionTool): Record<string, unknown> => t.function.parameters ?? { type: 'object', properties: {} };

/**
 * The constrained output for `tool_choice` required or named: a named
 * function's output is its arguments object; `required` outputs
 * `{"name", "arguments"}` for one of the tools, or a non-empty list of them
 * when parallel calls are allowed (at most `maxParallel`).
 */
export function forcedCall(tools: FunctionTool[], choice: { name: string } | 'required', parallel: boolean, maxParallel = 8): ForcedCall {
  if (choice !== 'required') {
    const tool = tools.find((t) => t.function.name === choice.name)!;
    return { schema: paramsOf(tool), read: (text) => [{ name: tool.function.name, arguments: text.trim() }] };
  }
  const variants = tools.map((t) => ({
    type: 'object',
    properties: { name: { const: t.function.name }, arguments: paramsOf(t) },
    required: ['name', 'arguments'],
    additionalProperties: false,
  }));
  const one = variants.length === 1 ? variants[0]! : { anyOf: variants };
  const schema = parallel ? { type: 'array', items: one, minItems: 1, maxItems: maxParallel } : one;
  const read = (text: string): ParsedToolCall[] => {
    const v = JSON.parse(text) as unknown;
    const list = (Array.isArray(v) ? v : [v]) as { name: string; arguments: unknown }[];
    return list.map((c) => ({ name: c.name, arguments: JSON.stringify(c.arguments) }));
  };
  return { schema, read };
}

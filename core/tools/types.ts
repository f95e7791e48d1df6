/**
 * Tool calling, shared shapes: the tool-call syntax families a chat template
 * can speak, and what a family parser returns from generated text. Browser-safe
 * (no node:*), used by readers (format detection) and the HTTP layer (parsing).
 */

/**
 * The tool-call syntax a model emits, by template family:
 * - `hermes`: `<tool_call>{"name", "arguments"}</tool_call>` blocks (Qwen2.5, Qwen3, Hermes);
 * - `llama3_json`: a bare JSON object `{"name", "parameters"}` (or several, `;`-separated), optionally after `<|python_tag|>` (Llama 3.1+);
 * - `mistral`: `[TOOL_CALLS]` then a JSON list of `{"name", "arguments"}` (Mistral v0.3+).
 */
export type ToolFormat = 'hermes' | 'llama3_json' | 'mistral';
export const TOOL_FORMATS: readonly ToolFormat[] = ['hermes', 'llama3_json', 'mistral'];

/** One parsed call; `arguments` is JSON text (OpenAI's wire shape). */
export interface ParsedToolCall {
  name: string;
  arguments: string;
}

/** Generated text split into plain content (null when none) and tool calls. */
export interface ParsedOutput {
  content: string | null;
  calls: ParsedToolCall[];
}

/** A family parser. */
export interface ToolParser {
  readonly format: ToolFormat;
  /** Text whose appearance in the output starts a tool-call section (streaming holds output back from here). */
  readonly markers: readonly string[];
  /** Whether the family may start a call with a bare `{` / `[` at the very start of the output. */
  readonly bareJsonStart: '{' | '[' | null;
  parse(text: string): ParsedOutput;
}

/** `{name, arguments|parameters}` → a call; null when the shape is wrong. */
export function callOf(v: unknown): ParsedToolCall | null {
  if (!v || typeof v !== 'object' || Array.isArray(v)) return null;
  const o = v as Record<string, unknown>;
  if (typeof o.name !== 'string' || !o.name) return null;
  const args = o.arguments ?? o.parameters ?? {};
  if (typeof args === 'string') return { name: o.name, arguments: args };
  if (typeof args !== 'object' || Array.isArray(args) || args === null) return null;
  return { name: o.name, arguments: JSON.stringify(args) };
}

/** JSON.parse that answers undefined instead of throwing. */
export function tryJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/**
 * Reads consecutive JSON values from `text` starting at `from` (skipping
 * whitespace and the `sep` character between them); stops at the first
 * non-JSON text. Returns the values and where reading stopped.
 */
export function readJsonValues(text: string, from: number, sep: string | null): { values: unknown[]; end: number } {
  const values: unknown[] = [];
  let i = from;
  for (;;) {
    while (i < text.length && (/\s/.test(text[i]!) || (sep !== null && text[i] === sep && values.length > 0))) i++;
    const end = jsonEnd(text, i);
    if (end < 0) break;
    const v = tryJson(text.slice(i, end));
    if (v === undefined) break;
    values.push(v);
    i = end;
  }
  return { values, end: i };
}

/** End (exclusive) of the balanced `{...}` / `[...]` starting at `i`, string-aware; -1 if none. */
export function jsonEnd(text: string, i: number): number {
  const open = text[i];
  if (open !== '{' && open !== '[') return -1;
  let depth = 0;
  let inStr = false;
  for (let k = i; k < text.length; k++) {
    const ch = text[k]!;
    if (inStr) {
      if (ch === '\\') k++;
      else if (ch === '"') inStr = false;
    } else if (ch === '"') inStr = true;
    else if (ch === '{' || ch === '[') depth++;
    else if (ch === '}' || ch === ']') {
      depth--;
      if (depth === 0) return k + 1;
    }
  }
  return -1;
}

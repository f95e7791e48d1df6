/**
 * Mistral tool calls (v0.3+ templates): `[TOOL_CALLS]` then a JSON list
 * `[{"name": "f", "arguments": {...}}, ...]`. `[TOOL_CALLS]` is a special token,
 * which text decoding may drop, so a list at the very start of the output is
 * read as calls too. Text before the marker is content.
 */
import { callOf, type ParsedOutput, readJsonValues, type ToolParser } from './types.ts';

const MARKER = '[TOOL_CALLS]';

export const mistralParser: ToolParser = {
  format: 'mistral',
  markers: [MARKER],
  bareJsonStart: '[',
  parse(text: string): ParsedOutput {
    const m = text.indexOf(MARKER);
    const lead = text.length - text.trimStart().length;
    const at = m >= 0 ? m + MARKER.length : text.startsWith('[{', lead) ? lead : -1;
    if (at < 0) return { content: text, calls: [] };
    const { values, end } = readJsonValues(text, at, null);
    const list = values.flatMap((v) => (Array.isArray(v) ? v : [v])).map(callOf);
    if (!list.length || list.some((c) => c === null)) return { content: text, calls: [] };
    const content = (m >= 0 ? text.slice(0, m) : '') + text.slice(end);
    return { content: content.trim() ? content : null, calls: list as NonNullable<(typeof list)[number]>[] };
  },
};

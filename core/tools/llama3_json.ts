/**
 * Llama 3.1+ JSON tool calls: the turn is a JSON object
 * `{"name": "f", "parameters": {...}}` (the built-in tools' `<|python_tag|>`
 * prefix is allowed), several calls separated by `;`. Only output that *starts*
 * with a call is a call (after whitespace), as the Llama 3.1 prompt format
 * asks; JSON later in prose is content.
 */
import { callOf, type ParsedOutput, readJsonValues, type ToolParser } from './types.ts';

const PYTHON_TAG = '<|python_tag|>';

export const llama3JsonParser: ToolParser = {
  format: 'llama3_json',
  markers: [PYTHON_TAG],
  bareJsonStart: '{',
  parse(text: string): ParsedOutput {
    let start = text.length - text.trimStart().length;
    if (text.startsWith(PYTHON_TAG, start)) start += PYTHON_TAG.length;
    const { values, end } = readJsonValues(text, start, ';');
    const calls = values.map(callOf);
    if (!calls.length || calls.some((c) => c === null)) return { content: text, calls: [] };
    const rest = text.slice(end);
    return { content: rest.trim() ? rest : null, calls: calls as NonNullable<(typeof calls)[number]>[] };
  },
};

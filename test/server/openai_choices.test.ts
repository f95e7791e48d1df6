/**
 * Several choices per request through the official `openai` client against a
 * real server on loopback (stories260K): `n` shares one prefill of the
 * prompt (the reader's prefill counter on /metrics says so), `n` with
 * `stream: true` interleaves choices by `index`, `best_of` keeps the
 * candidates with the highest mean token log-probability.
 */
import { randomUUID } from 'node:crypto';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../server/config.ts';
import { start, type Running } from '../../server/main.ts';

const KEY = 'test-key';
let run: Running;
let oai: OpenAI;
let base: string;

beforeAll(async () => {
  const config = loadConfig({
    env: {},
    overrides: {
      model: 'models/stories260K', embeddingModel: '', host: '127.0.0.1', port: 0, managementPort: 0, openaiPort: 0, sagemakerPort: 0, vertexPort: 0,
      apiKeys: [KEY], backend: process.env.WEFT_TEST_SERVER_BACKEND ?? 'opengles', logDisableTimestamps: true,
    },
  });
  run = await start(config, { ephemeral: true });
  await run.service.readers.waitSettled(60_000);
  for (const r of run.service.readers.all()) if (!r.ready) throw new Error(`reader ${r.readerId} did not load: ${JSON.stringify(r.error)}`);
  base = `http://127.0.0.1:${run.servers.find((s) => s.name === 'inference')!.port}`;
  oai = new OpenAI({ baseURL: `http://127.0.0.1:${run.servers.find((s) => s.name === 'openai')!.port}/v1`, apiKey: KEY, maxRetries: 0 });
}, 120_000);
afterAll(async () => {
  await run?.close();
});

/** The reader's prefill counters from /metrics: {miss, hit, tokens}. */
async function prefills(): Promise<{ miss: number; hit: number; tokens: number }> {
  const text = await (await fetch(`${base}/metrics`, { headers: { authorization: `Bearer ${KEY}` } })).text();
  const one = (re: RegExp): number => {
    const m = text.match(re);
    if (!m) throw new Error(`no ${re} in /metrics`);
    return Number(m[1]);
  };
  return { miss: one(/^weft_prefills_total\{[^}]*cache="miss"[^}]*\} (\d+)$/m), hit: one(/^weft_prefills_total\{[^}]*cache="hit"[^}]*\} (\d+)$/m), tokens: one(/^weft_prefill_tokens_total\{[^}]*\} (\d+)$/m) };
}

/** A prompt no earlier request shares a KV block with (it differs from its first words). */
const freshPrompt = (): string => `${randomUUID().replace(/-/g, ' ')} Once upon a time there was a little girl who lived in a small house near the big forest.`;

describe('n choices share one prefill', () => {
  it('n = 4 runs one prefill of the prompt; the other three start from the prefix cache', async () => {
    const prompt = freshPrompt();
    const before = await prefills();
    const r = await oai.completions.create({ model: 'primary', prompt, n: 4, temperature: 1, seed: 3, max_tokens: 4 });
    const after = await prefills();
    expect(r.choices).toHaveLength(4);
    expect(after.miss - before.miss).toBe(1);
    expect(after.hit - before.hit).toBe(3);
    // Prompt tokens computed = all prompt tokens less those served from the cache.
    const u = r.usage!;
    expect(after.tokens - before.tokens).toBe(u.prompt_tokens - u.prompt_tokens_details!.cached_tokens!);
    expect(u.prompt_tokens_details!.cached_tokens).toBeGreaterThan(0);
    // Four separate cold prompts would be four prefills.
    const b2 = await prefills();
    await Promise.all([0, 1].map(() => oai.completions.create({ model: 'primary', prompt: freshPrompt(), temperature: 1, seed: 3, max_tokens: 2 })));
    expect((await prefills()).miss - b2.miss).toBe(2);
  });
});

/** Text, finish_reason and chunk count per choice index of a stream, and whether two choices' chunks interleaved. */
async function byIndex(stream: AsyncIterable<{ choices: { index: number; finish_reason: string | null }[] }>, text: (ch: never) => string): Promise<{ texts: string[]; finishes: (string | null)[]; order: number[] }> {
  const texts: string[] = [];
  const finishes: (string | null)[] = [];
  const order: number[] = [];
  for await (const chunk of stream) {
    for (const ch of chunk.choices) {
      expect(finishes[ch.index] ?? null, `a chunk of choice ${ch.index} after its finish_reason`).toBeNull();
      texts[ch.index] = (texts[ch.index] ?? '') + text(ch as never);
      finishes[ch.index] = ch.finish_reason;
      order.push(ch.index);
    }
  }
  return { texts, finishes, order };
}

describe('n choices streamed', () => {
  it('completions: chunks carry their index; per index the text equals the non-streamed n response at the same seed', async () => {
    const body = { model: 'primary', prompt: 'Once upon a time', n: 3, temperature: 1, seed: 21, max_tokens: 12 };
    const whole = await oai.completions.create(body);
    const s = await byIndex(await oai.completions.create({ ...body, stream: true, stream_options: { include_usage: true } }), (ch: { text: string }) => ch.text);
    expect(s.texts).toEqual(whole.choices.map((c) => c.text));
    expect(s.finishes).toEqual(whole.choices.map((c) => c.finish_reason));
    expect(new Set(s.texts).size).toBeGreaterThan(1); // distinct seeds, distinct stories
    // The choices ran together: some chunk of a later choice came before choice 0's last one.
    expect(s.order.indexOf(1)).toBeLessThan(s.order.lastIndexOf(0));
  });

  it('chat: role chunk, content and finish_reason per index, equal to the non-streamed choices; usage once for all', async () => {
    const body = { model: 'primary', messages: [{ role: 'user' as const, content: 'Tell me a story.' }], n: 2, temperature: 1, seed: 8, max_tokens: 10 };
    const whole = await oai.chat.completions.create(body);
    const roles: number[] = [];
    let usage: OpenAI.CompletionUsage | undefined;
    async function* tap(st: AsyncIterable<OpenAI.ChatCompletionChunk>): AsyncIterable<OpenAI.ChatCompletionChunk> {
      for await (const ch of st) {
        for (const c of ch.choices) if (c.delta.role === 'assistant') roles.push(c.index);
        if (ch.usage) usage = ch.usage;
        yield ch;
      }
    }
    const st = await oai.chat.completions.create({ ...body, stream: true, stream_options: { include_usage: true } });
    const s = await byIndex(tap(st), (ch: { delta: { content?: string | null } }) => ch.delta.content ?? '');
    expect(roles).toEqual([0, 1]);
    expect(s.texts).toEqual(whole.choices.map((c) => c.message.content));
    expect(s.finishes).toEqual(whole.choices.map((c) => c.finish_reason));
    expect(usage!.completion_tokens).toBe(whole.usage!.completion_tokens);
    expect(usage!.prompt_tokens).toBe(whole.usage!.prompt_tokens);
  });
});

describe('best_of', () => {
  it('returns the n of best_of candidates with the highest mean token log-probability, the candidates being the seeds seed..seed+best_of-1', async () => {
    const body = { model: 'primary', prompt: 'Once upon a time', temperature: 1.5, max_tokens: 8, logprobs: 0 };
    // The candidates, each as a lone request with its own seed, scored here from their logprobs.
    const alone = await Promise.all([40, 41, 42, 43].map((seed) => oai.completions.create({ ...body, seed })));
    const mean = (c: OpenAI.CompletionChoice): number => c.logprobs!.token_logprobs!.reduce((a, x) => a + x, 0) / c.logprobs!.token_logprobs!.length;
    const ranked = alone.map((r) => r.choices[0]!).sort((a, b) => mean(b) - mean(a));
    expect(new Set(ranked.map((c) => c.text)).size).toBeGreaterThan(1);
    const best = await oai.completions.create({ ...body, seed: 40, n: 2, best_of: 4 });
    expect(best.choices.map((c) => c.index)).toEqual([0, 1]);
    expect(best.choices.map((c) => c.text)).toEqual(ranked.slice(0, 2).map((c) => c.text));
    expect(mean(best.choices[0]!)).toBeGreaterThanOrEqual(mean(best.choices[1]!));
    // Usage counts every candidate's tokens.
    expect(best.usage!.completion_tokens).toBe(alone.reduce((a, r) => a + r.usage!.completion_tokens, 0));
    // Without logprobs asked, none are returned, and the choice is the same.
    const plain = await oai.completions.create({ model: 'primary', prompt: 'Once upon a time', temperature: 1.5, max_tokens: 8, seed: 40, best_of: 4 });
    expect(plain.choices).toHaveLength(1);
    expect(plain.choices[0]!.logprobs).toBeNull();
    expect(plain.choices[0]!.text).toBe(ranked[0]!.text);
  });

  it('bad best_of is a 400 with param best_of', async () => {
    for (const extra of [{ n: 3, best_of: 2 }, { best_of: 17 }, { best_of: 2, stream: true as const }]) {
      const e = (await oai.completions.create({ model: 'primary', prompt: 'a', max_tokens: 2, ...extra } as OpenAI.CompletionCreateParamsNonStreaming).catch((x: unknown) => x)) as InstanceType<typeof OpenAI.BadRequestError>;
      expect(e).toBeInstanceOf(OpenAI.BadRequestError);
      expect(e.param).toBe('best_of');
    }
  });
});

describe('echo', () => {
  it('echo + logprobs: the prompt leads text and lists, first logprob null; prompt logprobs equal those the model gave the same tokens when it generated them', async () => {
    const prompt = 'Once upon a time';
    const gen = await oai.completions.create({ model: 'primary', prompt, temperature: 0, max_tokens: 6, logprobs: 2 });
    const g = gen.choices[0]!;
    const e = await oai.completions.create({ model: 'primary', prompt, temperature: 0, max_tokens: 6, logprobs: 2, echo: true });
    const c = e.choices[0]!;
    expect(c.text).toBe(prompt + g.text);
    const lp = c.logprobs!;
    const P = e.usage!.prompt_tokens;
    expect(lp.tokens).toHaveLength(P + g.logprobs!.tokens!.length);
    expect(lp.token_logprobs![0]).toBeNull();
    expect(lp.top_logprobs![0]).toBeNull();
    for (let i = 1; i < P; i++) {
      expect(lp.token_logprobs![i]).toBeLessThanOrEqual(0);
      expect(Object.keys(lp.top_logprobs![i]!)).toHaveLength(2);
    }
    // The completion part is unchanged by echo.
    expect(lp.tokens!.slice(P)).toEqual(g.logprobs!.tokens);
    for (let i = 0; i < g.logprobs!.tokens!.length; i++) expect(lp.token_logprobs![P + i]!).toBeCloseTo(g.logprobs!.token_logprobs![i]!, 3);
    // Feeding prompt + generated text back as a prompt: the generated tokens' prompt logprobs equal their logprobs when generated.
    const again = await oai.completions.create({ model: 'primary', prompt: prompt + g.text, temperature: 0, max_tokens: 1, logprobs: 2, echo: true });
    const a = again.choices[0]!.logprobs!;
    const Q = again.usage!.prompt_tokens;
    expect(a.tokens!.slice(0, Q)).toEqual(lp.tokens!.slice(0, Q));
    for (let i = 1; i < Q; i++) expect(a.token_logprobs![i]!).toBeCloseTo(lp.token_logprobs![i]!, 3);
    // Offsets walk the echoed text.
    expect(lp.text_offset![0]).toBe(0);
    for (let i = 1; i < lp.tokens!.length; i++) expect(lp.text_offset![i]).toBe(lp.text_offset![i - 1]! + lp.tokens![i - 1]!.length);
  });

  it('echo alone prepends the prompt, streamed too; echo + logprobs + stream is a 400', async () => {
    const body = { model: 'primary', prompt: 'Once upon a time', temperature: 0, max_tokens: 5 };
    const plain = (await oai.completions.create(body)).choices[0]!.text;
    expect((await oai.completions.create({ ...body, echo: true })).choices[0]!.text).toBe(body.prompt + plain);
    let streamed = '';
    for await (const ch of await oai.completions.create({ ...body, echo: true, stream: true })) streamed += ch.choices[0]?.text ?? '';
    expect(streamed).toBe(body.prompt + plain);
    const bad = (await oai.completions.create({ ...body, echo: true, logprobs: 1, stream: true }).catch((x: unknown) => x)) as InstanceType<typeof OpenAI.BadRequestError>;
    expect(bad).toBeInstanceOf(OpenAI.BadRequestError);
    expect(bad.param).toBe('echo');
  });
});

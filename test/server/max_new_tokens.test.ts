/**
 * One default for max_new_tokens on every route: a request that names no
 * limit reaches the reader without one (native, TGI, OpenAI mapping), the
 * engine's rule caps it by the context the prompt leaves, and admission
 * reserves exactly that much.
 */
import { describe, expect, it } from 'vitest';
import { baseRequest, chatRequest } from '../../core/api/openai_map.ts';
import { maxNewTokensFor } from '../../core/engine/max_new_tokens.ts';
import { cappedTokens } from '../../server/admission.ts';
import { toGenerateRequest } from '../../server/apps/generation.ts';
import { tgiToNative } from '../../server/apps/tgi.ts';
import { GenerationParams } from '../../server/http/schemas.ts';

describe('max_new_tokens default', () => {
  it('is the rest of the context, and a requested limit is capped by it', () => {
    expect(maxNewTokensFor(undefined, 10, 512)).toBe(502);
    expect(maxNewTokensFor(100, 10, 512)).toBe(100);
    expect(maxNewTokensFor(1000, 10, 512)).toBe(502);
    expect(maxNewTokensFor(undefined, 512, 512)).toBe(0); // the engine answers prompt_too_long
  });

  it('native and TGI requests without a limit carry none to the reader', () => {
    expect(toGenerateRequest(GenerationParams.parse({}), 'Once upon a time', 1 << 20)).not.toHaveProperty('maxNewTokens');
    expect(toGenerateRequest(tgiToNative({}), 'Once upon a time', 1 << 20)).not.toHaveProperty('maxNewTokens');
    expect(toGenerateRequest(GenerationParams.parse({ max_new_tokens: 7 }), 'x', 1 << 20).maxNewTokens).toBe(7);
    expect(toGenerateRequest(tgiToNative({ max_new_tokens: 9 }), 'x', 1 << 20).maxNewTokens).toBe(9);
  });

  it('the library OpenAI mapping carries none either, and max_tokens when given', () => {
    expect(baseRequest({})).not.toHaveProperty('maxNewTokens');
    expect(chatRequest({ model: 'm', messages: [{ role: 'user', content: 'hi' }] })).not.toHaveProperty('maxNewTokens');
    expect(baseRequest({ max_tokens: 5 }).maxNewTokens).toBe(5);
  });

  it('admission reserves what the engine will let the request generate', () => {
    // 'Once upon a time' is 16 bytes: an estimated 5 prompt tokens.
    expect(cappedTokens({ prompt: 'Once upon a time' }, 512)).toEqual({ prompt: 5, total: 512 });
    expect(cappedTokens({ prompt: 'Once upon a time', maxNewTokens: 20 }, 512)).toEqual({ prompt: 5, total: 25 });
  });
});

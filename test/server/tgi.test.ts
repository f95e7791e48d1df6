/**
 * TGI body translation (server/apps/tgi.ts): when sampling is on (TGI's rule),
 * how each parameter maps onto the native generation parameters, and finish
 * reason names. The HTTP behaviour is in cloud.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { isTgiBody, TgiBody, tgiFinishReason, tgiToNative } from '../../server/apps/tgi.ts';

describe('TGI body', () => {
  it('is greedy unless do_sample or a sampling warper is given', () => {
    expect(tgiToNative().sampling_temperature).toBe(0);
    expect(tgiToNative({ do_sample: false, top_k: 0 }).sampling_temperature).toBe(0);
    expect(tgiToNative({ do_sample: true })).toMatchObject({ sampling_temperature: 1 });
    expect(tgiToNative({ temperature: 0.7 })).toMatchObject({ sampling_temperature: 0.7 });
    expect(tgiToNative({ top_p: 0.9 })).toMatchObject({ sampling_temperature: 1, sampling_topp: 0.9 });
    expect(tgiToNative({ top_k: 5 })).toMatchObject({ sampling_temperature: 1, sampling_topk: 5 });
    // do_sample false with a warper still samples, as TGI does.
    expect(tgiToNative({ do_sample: false, temperature: 0.5 })).toMatchObject({ sampling_temperature: 0.5 });
  });

  it('maps limits, stops and grammars onto the native fields', () => {
    expect(tgiToNative({ max_new_tokens: 9, seed: 3, repetition_penalty: 1.2, stop: ['x'], truncate: 100 })).toEqual({
      sampling_temperature: 0,
      max_new_tokens: 9,
      seed: 3,
      repetition_penalty: 1.2,
      stop: ['x'],
      prompt_max_tokens: 100,
    });
    expect(tgiToNative({ grammar: { type: 'json', value: { type: 'object' } } })).toMatchObject({ json_schema: { type: 'object' } });
    expect(tgiToNative({ grammar: { type: 'regex', value: '[a-z]+' } })).toMatchObject({ regex_string: '[a-z]+' });
    expect(tgiToNative({ return_full_text: true, details: true })).toEqual({ sampling_temperature: 0 });
  });

  it('names finish reasons as TGI does and keeps Weft\'s others', () => {
    expect(['eos', 'stop', 'length', 'constraint', 'cancelled'].map((r) => tgiFinishReason(r as never))).toEqual(['eos_token', 'stop_sequence', 'length', 'constraint', 'cancelled']);
  });

  it('is recognised by its own inputs field only and is strict', () => {
    expect(isTgiBody({ inputs: 'a' })).toBe(true);
    expect(isTgiBody({ text: 'a', input: 'b' })).toBe(false);
    expect(isTgiBody(Object.create({ inputs: 'inherited' }))).toBe(false);
    expect(isTgiBody(['inputs'])).toBe(false);
    expect(isTgiBody(null)).toBe(false);
    expect(TgiBody.safeParse({ inputs: 'a', parameters: { typical_p: 0.5 } }).success).toBe(false);
    expect(TgiBody.safeParse({ inputs: [] }).success).toBe(false);
  });
});

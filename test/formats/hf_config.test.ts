/**
 * HF config.json / generation_config.json parsing: stories260K, synthetic
 * configs for every supported architecture with transformers' defaults, rope
 * scaling variants, sliding windows, encoders, and typed errors.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ModelFormatError, UnsupportedModelError } from '../../core/errors.ts';
import {
  parseDecoderConfig,
  parseEncoderConfig,
  parseGenerationConfig,
  SUPPORTED_DECODERS,
} from '../../core/formats/hf_config.ts';

const stories = (f: string): string => readFileSync(new URL(`../../models/stories260K/${f}`, import.meta.url), 'utf8');

function thrown(f: () => unknown): Error {
  try {
    f();
  } catch (e) {
    return e as Error;
  }
  throw new Error('did not throw');
}

describe('parseDecoderConfig', () => {
  it('parses stories260K', () => {
    expect(parseDecoderConfig(stories('config.json'))).toEqual({
      architecture: 'LlamaForCausalLM',
      hiddenSize: 64,
      layers: 5,
      heads: 8,
      kvHeads: 4,
      headDim: 8,
      intermediateSize: 172,
      vocabSize: 512,
      maxPositions: 512,
      rmsEps: 1e-5,
      ropeTheta: 10000,
      ropeScaling: null,
      tieEmbeddings: true,
      attentionBias: false,
      qkNorm: false,
      slidingWindow: null,
      hiddenAct: 'silu',
      bosTokenId: 1,
      eosTokenIds: [2],
      torchDtype: 'float32',
    });
  });

  it('applies LlamaConfig defaults to a sparse config', () => {
    const c = parseDecoderConfig({ architectures: ['LlamaForCausalLM'] });
    expect(c).toMatchObject({
      hiddenSize: 4096,
      layers: 32,
      heads: 32,
      kvHeads: 32,
      headDim: 128,
      intermediateSize: 11008,
      vocabSize: 32000,
      maxPositions: 2048,
      rmsEps: 1e-6,
      ropeTheta: 10000,
      tieEmbeddings: false,
      attentionBias: false,
      bosTokenId: 1,
      eosTokenIds: [2],
      torchDtype: null,
    });
  });

  it('Llama 3.1: llama3 rope scaling, eos list, explicit head_dim, attention_bias', () => {
    const c = parseDecoderConfig({
      architectures: ['LlamaForCausalLM'],
      hidden_size: 2048,
      num_attention_heads: 32,
      num_key_value_heads: 8,
      head_dim: 64,
      rope_theta: 500000,
      rope_scaling: { rope_type: 'llama3', factor: 32, low_freq_factor: 1, high_freq_factor: 4, original_max_position_embeddings: 8192 },
      bos_token_id: 128000,
      eos_token_id: [128001, 128008, 128009],
      tie_word_embeddings: true,
      attention_bias: true,
      dtype: 'bfloat16',
    });
    expect(c.ropeScaling).toEqual({ type: 'llama3', factor: 32, lowFreqFactor: 1, highFreqFactor: 4, originalMaxPositionEmbeddings: 8192 });
    expect([c.ropeTheta, c.kvHeads, c.headDim, c.bosTokenId, c.tieEmbeddings, c.attentionBias, c.torchDtype]).toEqual([500000, 8, 64, 128000, true, true, 'bfloat16']);
    expect(c.eosTokenIds).toEqual([128001, 128008, 128009]);
  });

  it('rope scaling: legacy "type" key, default type, v5 rope_parameters, unsupported types', () => {
    const base = { architectures: ['LlamaForCausalLM'] };
    expect(parseDecoderConfig({ ...base, rope_scaling: { type: 'linear', factor: 2 } }).ropeScaling).toEqual({ type: 'linear', factor: 2 });
    expect(parseDecoderConfig({ ...base, rope_scaling: { rope_type: 'default' } }).ropeScaling).toBeNull();
    const v5 = parseDecoderConfig({ ...base, rope_parameters: { rope_type: 'default', rope_theta: 500000 } });
    expect([v5.ropeTheta, v5.ropeScaling]).toEqual([500000, null]);
    const e = thrown(() => parseDecoderConfig({ ...base, rope_scaling: { rope_type: 'yarn', factor: 4 } }));
    expect(e).toBeInstanceOf(UnsupportedModelError);
    expect(e.message).toMatch(/"yarn" is not supported; supported: linear, llama3/);
  });

  it('Mistral: GQA default 8 kv heads, sliding window set / null / absent', () => {
    const v01 = parseDecoderConfig({ architectures: ['MistralForCausalLM'], sliding_window: 4096, rope_theta: 10000 });
    expect([v01.kvHeads, v01.slidingWindow, v01.maxPositions, v01.intermediateSize]).toEqual([8, 4096, 131072, 14336]);
    expect(parseDecoderConfig({ architectures: ['MistralForCausalLM'], sliding_window: null }).slidingWindow).toBeNull();
    expect(parseDecoderConfig({ architectures: ['MistralForCausalLM'] }).slidingWindow).toBeNull();
  });

  it('Qwen2: q/k/v bias always on, sliding window only when enabled for every layer', () => {
    const q = {
      architectures: ['Qwen2ForCausalLM'],
      hidden_size: 896,
      num_attention_heads: 14,
      num_key_value_heads: 2,
      num_hidden_layers: 24,
      tie_word_embeddings: true,
      use_sliding_window: false,
      sliding_window: 32768,
      max_window_layers: 21,
      rope_theta: 1000000,
      bos_token_id: 151643,
      eos_token_id: 151645,
    };
    const c = parseDecoderConfig(q);
    expect([c.attentionBias, c.qkNorm, c.headDim, c.slidingWindow, c.tieEmbeddings, c.eosTokenIds]).toEqual([true, false, 64, null, true, [151645]]);
    expect(parseDecoderConfig({ ...q, attention_bias: false }).attentionBias).toBe(true);
    expect(parseDecoderConfig({ ...q, use_sliding_window: true, max_window_layers: 28 }).slidingWindow).toBeNull();
    expect(parseDecoderConfig({ ...q, use_sliding_window: true, max_window_layers: 0 }).slidingWindow).toBe(32768);
    expect(() => parseDecoderConfig({ ...q, use_sliding_window: true })).toThrow(UnsupportedModelError);
    const sparse = parseDecoderConfig({ model_type: 'qwen2' });
    expect([sparse.architecture, sparse.vocabSize, sparse.kvHeads, sparse.bosTokenId, sparse.eosTokenIds]).toEqual(['Qwen2ForCausalLM', 151936, 32, null, []]);
  });

  it('Qwen3: head_dim defaults to 128 (not hidden/heads), qk-norm, no bias', () => {
    const c = parseDecoderConfig({
      architectures: ['Qwen3ForCausalLM'],
      hidden_size: 1024,
      num_attention_heads: 16,
      num_key_value_heads: 8,
      num_hidden_layers: 28,
      layer_types: Array(28).fill('full_attention'),
    });
    expect([c.headDim, c.qkNorm, c.attentionBias, c.tieEmbeddings, c.slidingWindow]).toEqual([128, true, false, false, null]);
    expect(parseDecoderConfig({ architectures: ['Qwen3ForCausalLM'], attention_bias: true }).attentionBias).toBe(true);
    const mixed = { architectures: ['Qwen3ForCausalLM'], num_hidden_layers: 2, layer_types: ['full_attention', 'sliding_attention'] };
    expect(() => parseDecoderConfig(mixed)).toThrow(/mixing sliding and full/);
  });

  it('Gemma 2 (gemma-2-2b config): sandwich norms, soft-caps, alternating sliding layers, bf16 embedding scale', () => {
    const c = parseDecoderConfig({
      architectures: ['Gemma2ForCausalLM'], model_type: 'gemma2', hidden_size: 2304, intermediate_size: 9216, num_hidden_layers: 26,
      num_attention_heads: 8, num_key_value_heads: 4, head_dim: 256, hidden_act: 'gelu_pytorch_tanh', hidden_activation: 'gelu_pytorch_tanh',
      query_pre_attn_scalar: 256, sliding_window: 4096, final_logit_softcapping: 30.0, attn_logit_softcapping: 50.0, torch_dtype: 'float32',
      vocab_size: 256000, max_position_embeddings: 8192, rms_norm_eps: 1e-6, rope_theta: 10000.0, bos_token_id: 2, eos_token_id: 1,
    });
    expect(c).toMatchObject({ headDim: 256, tieEmbeddings: true, normAddOne: true, sandwichNorms: true, attnSoftcap: 50, finalSoftcap: 30, slidingWindow: 4096, hiddenAct: 'gelu_pytorch_tanh' });
    expect(c.attnScale).toBeCloseTo(1 / 16, 12);
    expect(c.embedScale).toBe(48); // sqrt(2304), exact
    expect(c.slidingLayers!.slice(0, 4)).toEqual([true, false, true, false]);
    expect(c.slidingLayers!.length).toBe(26);
    // sqrt(2048) = 45.2548... is rounded to the checkpoint's dtype as transformers' normalizer tensor is.
    expect(parseDecoderConfig({ model_type: 'gemma2', hidden_size: 2048, torch_dtype: 'bfloat16' }).embedScale).toBe(45.25);
    // Soft-capping off when null.
    const off = parseDecoderConfig({ model_type: 'gemma2', final_logit_softcapping: null, attn_logit_softcapping: null });
    expect([off.attnSoftcap, off.finalSoftcap]).toEqual([undefined, undefined]);
  });

  it('Gemma 3 text: local rope base, q/k norms, a global layer every sliding_window_pattern layers, no soft-caps', () => {
    const c = parseDecoderConfig({
      architectures: ['Gemma3ForCausalLM'], model_type: 'gemma3_text', num_hidden_layers: 12, sliding_window: 512, sliding_window_pattern: 6,
      rope_theta: 1000000, rope_local_base_freq: 10000, rope_scaling: { rope_type: 'linear', factor: 8 }, query_pre_attn_scalar: 256,
    });
    expect(c).toMatchObject({ qkNorm: true, slidingWindow: 512, ropeTheta: 1000000, ropeScaling: { type: 'linear', factor: 8 }, localRope: { theta: 10000, scaling: null } });
    expect(c.slidingLayers).toEqual([true, true, true, true, true, false, true, true, true, true, true, false]);
    expect([c.attnSoftcap, c.finalSoftcap]).toEqual([undefined, undefined]);
    // layer_types (newer configs) win over the pattern.
    const lt = ['full_attention', 'sliding_attention'];
    expect(parseDecoderConfig({ model_type: 'gemma3_text', num_hidden_layers: 2, layer_types: lt }).slidingLayers).toEqual([false, true]);
  });

  it('Phi-3: fused projections; longrope factors and attention factor as transformers computes them', () => {
    const mini4k = parseDecoderConfig({ architectures: ['Phi3ForCausalLM'], hidden_size: 3072, num_hidden_layers: 32, num_attention_heads: 32, sliding_window: 2047, rope_scaling: null });
    expect(mini4k).toMatchObject({ fusedProjections: true, kvHeads: 32, headDim: 96, slidingWindow: 2047, ropeScaling: null, eosTokenIds: [32000], vocabSize: 32064 });
    const short = Array.from({ length: 48 }, (_, i) => 1 + i / 100);
    const long = Array.from({ length: 48 }, (_, i) => 1 + i);
    const c = parseDecoderConfig({
      architectures: ['Phi3ForCausalLM'], hidden_size: 3072, num_attention_heads: 32, max_position_embeddings: 131072, original_max_position_embeddings: 4096,
      rope_scaling: { type: 'su', short_factor: short, long_factor: long },
    });
    expect(c.ropeScaling).toMatchObject({ type: 'longrope', originalMaxPositionEmbeddings: 4096, shortFactor: short, longFactor: long });
    expect((c.ropeScaling as { attentionFactor: number }).attentionFactor).toBeCloseTo(Math.sqrt(1 + Math.log(32) / Math.log(4096)), 12);
    const wrong = { architectures: ['Phi3ForCausalLM'], hidden_size: 3072, num_attention_heads: 32, rope_scaling: { type: 'longrope', short_factor: [1], long_factor: long } };
    expect(() => parseDecoderConfig(wrong)).toThrow(/short_factor must be a list of 48/);
    expect(() => parseDecoderConfig({ model_type: 'phi3', partial_rotary_factor: 0.75 })).toThrow(UnsupportedModelError);
  });

  it('unsupported architectures list the supported ones', () => {
    for (const cfg of [{ architectures: ['GemmaForCausalLM'] }, { model_type: 'phi' }, {}]) {
      const e = thrown(() => parseDecoderConfig(cfg));
      expect(e).toBeInstanceOf(UnsupportedModelError);
      expect((e as UnsupportedModelError).code).toBe('model_unsupported');
      for (const a of SUPPORTED_DECODERS) expect(e.message).toContain(a);
    }
  });

  it('wrongly typed or inconsistent fields are ModelFormatErrors', () => {
    const base = { architectures: ['LlamaForCausalLM'] };
    for (const bad of [
      { hidden_size: '64' },
      { num_hidden_layers: 0 },
      { rms_norm_eps: 'x' },
      { tie_word_embeddings: 1 },
      { eos_token_id: [2, 'x'] },
      { hidden_size: 100, num_attention_heads: 3 },
      { num_attention_heads: 32, num_key_value_heads: 5 },
      { rope_scaling: [1] },
    ]) {
      expect(() => parseDecoderConfig({ ...base, ...bad }), JSON.stringify(bad)).toThrow(ModelFormatError);
    }
    expect(() => parseDecoderConfig('{"architectures": [')).toThrow(/not valid JSON/);
    expect(() => parseDecoderConfig([])).toThrow(/must be a JSON object/);
  });
});

describe('parseGenerationConfig', () => {
  it('stories260K', () => {
    expect(parseGenerationConfig(stories('generation_config.json'))).toEqual({ bosTokenId: 1, eosTokenIds: [2], maxLength: 512 });
  });

  it('sampling defaults and eos lists', () => {
    expect(
      parseGenerationConfig({
        bos_token_id: 151643,
        eos_token_id: [151645, 151643],
        do_sample: true,
        temperature: 0.7,
        top_k: 20,
        top_p: 0.8,
        repetition_penalty: 1.05,
        max_new_tokens: 2048,
        pad_token_id: 151643,
      }),
    ).toEqual({ bosTokenId: 151643, eosTokenIds: [151645, 151643], doSample: true, temperature: 0.7, topK: 20, topP: 0.8, repetitionPenalty: 1.05, maxNewTokens: 2048 });
    expect(parseGenerationConfig({})).toEqual({ eosTokenIds: [] });
    expect(() => parseGenerationConfig({ temperature: 'hot' })).toThrow(ModelFormatError);
  });
});

describe('parseEncoderConfig', () => {
  it('BERT and XLM-RoBERTa', () => {
    const bert = parseEncoderConfig({ architectures: ['BertModel'], model_type: 'bert', hidden_size: 384, num_hidden_layers: 6, intermediate_size: 1536, layer_norm_eps: 1e-12 });
    expect(bert).toMatchObject({ architecture: 'BertModel', hiddenSize: 384, layers: 6, heads: 12, vocabSize: 30522, padTokenId: 0, positionOffset: 0, hiddenAct: 'gelu' });
    const xlmr = parseEncoderConfig({ architectures: ['XLMRobertaModel'], model_type: 'xlm-roberta', vocab_size: 250002, max_position_embeddings: 514, type_vocab_size: 1, layer_norm_eps: 1e-5, pad_token_id: 1 });
    expect(xlmr).toMatchObject({ architecture: 'XLMRobertaModel', vocabSize: 250002, maxPositions: 514, typeVocabSize: 1, padTokenId: 1, positionOffset: 2 });
    expect(parseEncoderConfig({ architectures: ['BertForMaskedLM'] }).architecture).toBe('BertModel');
    expect(() => parseEncoderConfig({ architectures: ['T5EncoderModel'], model_type: 't5' })).toThrow(/supported encoders: BertModel, RobertaModel, XLMRobertaModel/);
  });
});

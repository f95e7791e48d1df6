/**
 * llama.cpp conventions: tensor-name mapping, the q/k row permutation (checked
 * against a transcription of convert_hf_to_gguf's reshape/swapaxes and by what
 * it means: interleaved rope on permuted rows == permuted rotate-half rope), and
 * a full stories260K HF -> GGUF -> HF round trip, F32 (exact) and Q8_0.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import {
  GGUF_QK_PERMUTED_ARCHS,
  ggufToDecoderConfig,
  ggufToHfName,
  hfToGgufName,
  openGguf,
  permuteQK,
  unpermuteQK,
} from '../../core/formats/gguf.ts';
import { dequantizeGguf } from '../../core/formats/gguf_quants.ts';
import { hfToGguf, llama3RopeFactors, TOKEN_TYPE } from '../../core/formats/gguf_write.ts';
import { parseDecoderConfig, type DecoderConfig } from '../../core/formats/hf_config.ts';
import { openSafetensorsModel, toFloat32 } from '../../core/formats/safetensors.ts';
import { bytesSource } from '../../core/formats/source.ts';
import { dirSource } from '../../server/fs_source.ts';

const STORIES = fileURLToPath(new URL('../../models/stories260K', import.meta.url));

describe('tensor names', () => {
  it.each([
    ['token_embd.weight', 'model.embed_tokens.weight'],
    ['output_norm.weight', 'model.norm.weight'],
    ['output.weight', 'lm_head.weight'],
    ['blk.0.attn_norm.weight', 'model.layers.0.input_layernorm.weight'],
    ['blk.12.ffn_norm.weight', 'model.layers.12.post_attention_layernorm.weight'],
    ['blk.3.attn_q.weight', 'model.layers.3.self_attn.q_proj.weight'],
    ['blk.3.attn_q.bias', 'model.layers.3.self_attn.q_proj.bias'],
    ['blk.3.attn_k.weight', 'model.layers.3.self_attn.k_proj.weight'],
    ['blk.3.attn_v.bias', 'model.layers.3.self_attn.v_proj.bias'],
    ['blk.3.attn_output.weight', 'model.layers.3.self_attn.o_proj.weight'],
    ['blk.3.attn_q_norm.weight', 'model.layers.3.self_attn.q_norm.weight'],
    ['blk.3.attn_k_norm.weight', 'model.layers.3.self_attn.k_norm.weight'],
    ['blk.3.ffn_gate.weight', 'model.layers.3.mlp.gate_proj.weight'],
    ['blk.3.ffn_up.weight', 'model.layers.3.mlp.up_proj.weight'],
    ['blk.3.ffn_down.weight', 'model.layers.3.mlp.down_proj.weight'],
  ])('%s <-> %s', (g, h) => {
    expect(ggufToHfName(g)).toBe(h);
    expect(hfToGgufName(h)).toBe(g);
  });

  // Gemma 2 / 3 as llama.cpp names them (llama-arch.cpp), so GGUF files from the Hub load.
  it.each([
    ['blk.3.attn_norm.weight', 'model.layers.3.input_layernorm.weight'],
    ['blk.3.post_attention_norm.weight', 'model.layers.3.post_attention_layernorm.weight'],
    ['blk.3.ffn_norm.weight', 'model.layers.3.pre_feedforward_layernorm.weight'],
    ['blk.3.post_ffw_norm.weight', 'model.layers.3.post_feedforward_layernorm.weight'],
  ])('gemma2 / gemma3: %s <-> %s', (g, h) => {
    for (const arch of ['gemma2', 'gemma3']) {
      expect(ggufToHfName(g, arch)).toBe(h);
      expect(hfToGgufName(h, arch)).toBe(g);
    }
  });

  it('has no mapping for tensors without an HF counterpart', () => {
    expect(ggufToHfName('rope_freqs.weight')).toBeNull();
    expect(ggufToHfName('blk.0.attn_qkv.weight')).toBeNull();
    expect(ggufToHfName('token_embd')).toBeNull();
    expect(hfToGgufName('model.layers.0.self_attn.rotary_emb.inv_freq')).toBeNull();
  });
});

describe('q/k permutation', () => {
  /** convert_hf_to_gguf: w.reshape(nH, 2, rows/nH/2, cols).swapaxes(1, 2).reshape(w.shape), on row ids. */
  function llamaCppPermuteRows(nH: number, headDim: number): number[] {
    const half = headDim / 2;
    const out: number[] = [];
    for (let h = 0; h < nH; h++) for (let a = 0; a < half; a++) for (let b = 0; b < 2; b++) out.push(h * headDim + b * half + a);
    return out;
  }

  it('matches llama.cpp on a small example and on row ids', () => {
    expect([...permuteQK(Float32Array.from([0, 1, 2, 3, 4, 5, 6, 7]), 2, 4, 1)]).toEqual([0, 2, 1, 3, 4, 6, 5, 7]);
    const nH = 3, hd = 8, cols = 5;
    const w = Float32Array.from({ length: nH * hd * cols }, (_, i) => i);
    const p = permuteQK(w, nH, hd, cols);
    const rows = llamaCppPermuteRows(nH, hd);
    for (let r = 0; r < nH * hd; r++) expect([...p.subarray(r * cols, r * cols + cols)]).toEqual([...w.subarray(rows[r]! * cols, rows[r]! * cols + cols)]);
  });

  it('unpermuteQK inverts permuteQK for floats and raw quantized row bytes', () => {
    const w = Float32Array.from({ length: 4 * 64 * 3 }, (_, i) => Math.sin(i));
    expect([...unpermuteQK(permuteQK(w, 4, 64, 3), 4, 64, 3)]).toEqual([...w]);
    expect([...permuteQK(unpermuteQK(w, 4, 64, 3), 4, 64, 3)]).toEqual([...w]);
    const bytes = Uint8Array.from({ length: 2 * 4 * 34 }, (_, i) => i & 0xff); // Q8_0 rows of 32 cols = 34 bytes
    const back = unpermuteQK(permuteQK(bytes, 2, 4, 34), 2, 4, 34);
    expect(back).toBeInstanceOf(Uint8Array);
    expect([...back]).toEqual([...bytes]);
    expect(() => unpermuteQK(w, 4, 63, 3)).toThrow(/even head size/);
    expect(() => unpermuteQK(w, 5, 64, 3)).toThrow(/elements/);
  });

  it('interleaved rope on permuted rows equals permuting the rotate-half rope', () => {
    const hd = 8, nH = 2, pos = 5;
    const q = Float32Array.from({ length: nH * hd }, (_, i) => Math.cos(3 * i + 1));
    const ang = (i: number): number => pos / 10000 ** ((2 * i) / hd);
    const ropeHalves = (x: Float32Array): Float32Array => {
      const y = new Float32Array(x.length);
      for (let h = 0; h < nH; h++) for (let i = 0; i < hd / 2; i++) {
        const a = x[h * hd + i]!, b = x[h * hd + i + hd / 2]!, c = Math.cos(ang(i)), s = Math.sin(ang(i));
        y[h * hd + i] = a * c - b * s;
        y[h * hd + i + hd / 2] = b * c + a * s;
      }
      return y;
    };
    const ropeInterleaved = (x: Float32Array): Float32Array => {
      const y = new Float32Array(x.length);
      for (let h = 0; h < nH; h++) for (let i = 0; i < hd / 2; i++) {
        const a = x[h * hd + 2 * i]!, b = x[h * hd + 2 * i + 1]!, c = Math.cos(ang(i)), s = Math.sin(ang(i));
        y[h * hd + 2 * i] = a * c - b * s;
        y[h * hd + 2 * i + 1] = b * c + a * s;
      }
      return y;
    };
    // q = W x; a permuted W gives permuted q (cols = 1 treats q as a column of rows).
    const lhs = ropeInterleaved(permuteQK(q, nH, hd, 1));
    const rhs = permuteQK(ropeHalves(q), nH, hd, 1);
    for (let i = 0; i < q.length; i++) expect(lhs[i]).toBeCloseTo(rhs[i]!, 6);
    expect(GGUF_QK_PERMUTED_ARCHS).toEqual(['llama', 'mistral']);
  });
});

async function loadStories(): Promise<{ cfg: DecoderConfig; tensors: Map<string, { shape: number[]; data: Float32Array }>; tok: unknown; tokCfg: unknown }> {
  const ms = dirSource(STORIES);
  const cfg = parseDecoderConfig(await ms.readText('config.json'));
  const st = await openSafetensorsModel(ms);
  const tensors = new Map<string, { shape: number[]; data: Float32Array }>();
  for (const [name, { info }] of st.tensors) tensors.set(name, { shape: info.shape, data: toFloat32(info.dtype, await st.read(name)) });
  const json = (f: string): unknown => JSON.parse(readFileSync(`${STORIES}/${f}`, 'utf8'));
  return { cfg, tensors, tok: json('tokenizer.json'), tokCfg: json('tokenizer_config.json') };
}

describe('stories260K HF -> GGUF -> HF', () => {
  it('F32: config, tokenizer metadata and every tensor round-trip exactly', async () => {
    const { cfg, tensors, tok, tokCfg } = await loadStories();
    const file = hfToGguf({ config: cfg, tensors, tokenizer: tok, tokenizerConfig: tokCfg, name: 'stories260K' });
    const g = await openGguf(bytesSource(file));
    expect(g.metadata.get('general.architecture')).toBe('llama');
    expect(g.tensors.size).toBe(47);
    expect(g.tensors.has('output.weight')).toBe(false); // tied

    const back = ggufToDecoderConfig(g.metadata, g.tensors.keys());
    expect(back).toEqual({ ...cfg, rmsEps: Math.fround(cfg.rmsEps) }); // GGUF stores eps as f32

    const tokens = g.metadata.get('tokenizer.ggml.tokens') as string[];
    const types = g.metadata.get('tokenizer.ggml.token_type') as number[];
    const scores = g.metadata.get('tokenizer.ggml.scores') as number[];
    expect(g.metadata.get('tokenizer.ggml.model')).toBe('llama');
    expect(tokens.length).toBe(512);
    expect(tokens.slice(0, 4)).toEqual(['<unk>', '<s>', '</s>', '<0x00>']);
    expect([types[0], types[1], types[2], types[3], types[258], types[300]]).toEqual([
      TOKEN_TYPE.UNKNOWN, TOKEN_TYPE.CONTROL, TOKEN_TYPE.CONTROL, TOKEN_TYPE.BYTE, TOKEN_TYPE.BYTE, TOKEN_TYPE.NORMAL,
    ]);
    const merges = g.metadata.get('tokenizer.ggml.merges') as string[];
    expect(merges.length).toBe(165);
    expect(merges[0]).toBe('▁ t');
    expect(scores[tokens.indexOf('▁t')]).toBe(0); // rank 0
    expect(scores[tokens.indexOf('he')]).toBe(-1); // rank 1
    expect(g.metadata.get('tokenizer.ggml.bos_token_id')).toBe(1);
    expect(g.metadata.get('tokenizer.ggml.eos_token_id')).toBe(2);
    expect(g.metadata.get('tokenizer.ggml.unknown_token_id')).toBe(0);
    expect(g.metadata.get('tokenizer.ggml.add_bos_token')).toBe(true);

    const q0 = await g.readTensorF32('blk.0.attn_q.weight');
    expect([...q0]).not.toEqual([...tensors.get('model.layers.0.self_attn.q_proj.weight')!.data]); // permuted on disk
    for (const [gname, info] of g.tensors) {
      const hf = ggufToHfName(gname)!;
      let data = await g.readTensorF32(gname);
      const m = /self_attn\.(q|k)_proj/.exec(hf);
      if (m) data = unpermuteQK(data, m[1] === 'q' ? back.heads : back.kvHeads, back.headDim, info.shape[1]!);
      const orig = tensors.get(hf)!;
      expect(info.shape, hf).toEqual(orig.shape);
      expect(info.type).toBe('F32');
      expect(data.every((v, i) => v === orig.data[i]), hf).toBe(true);
    }
  });

  it('Q8_0: 2-D weights quantized (F16 where rows are not whole blocks), norms F32', async () => {
    const { cfg, tensors, tok } = await loadStories();
    const g = await openGguf(bytesSource(hfToGguf({ config: cfg, tensors, tokenizer: tok, type: 'Q8_0' })));
    expect(g.metadata.get('general.file_type')).toBe(7);
    const t = (n: string) => g.tensors.get(n)!;
    expect(t('blk.0.attn_q.weight').type).toBe('Q8_0');
    expect(t('blk.0.ffn_gate.weight').type).toBe('Q8_0');
    expect(t('blk.0.ffn_down.weight').type).toBe('F16'); // 172 columns
    expect(t('blk.0.attn_norm.weight').type).toBe('F32');
    const k = tensors.get('model.layers.1.self_attn.k_proj.weight')!;
    const raw = await g.readTensor('blk.1.attn_k.weight');
    // unpermute the raw Q8_0 rows (34 bytes per 32-column block), then dequantize
    const rows = unpermuteQK(raw, cfg.kvHeads, cfg.headDim, (64 / 32) * 34);
    const deq = dequantizeGguf('Q8_0', rows, k.data.length);
    const amax = Math.max(...k.data.map(Math.abs));
    for (let i = 0; i < deq.length; i++) expect(Math.abs(deq[i]! - k.data[i]!)).toBeLessThan(amax / 127);
  });

  it('llama3 rope scaling is written as rope_freqs.weight like llama.cpp', () => {
    const cfg: DecoderConfig = {
      ...parseDecoderConfig({ architectures: ['LlamaForCausalLM'], hidden_size: 64, num_attention_heads: 2, rope_theta: 500000 }),
      ropeScaling: { type: 'llama3', factor: 8, lowFreqFactor: 1, highFreqFactor: 4, originalMaxPositionEmbeddings: 8192 },
    };
    const f = llama3RopeFactors(cfg);
    expect(f.length).toBe(16);
    expect(f[0]).toBe(1); // high frequency: unscaled
    expect(f[15]).toBe(8); // low frequency: divided by factor
    for (let i = 1; i < 16; i++) expect(f[i]!).toBeGreaterThanOrEqual(f[i - 1]!);
  });
});

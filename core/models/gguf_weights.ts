/**
 * A GGUF checkpoint as a WeightSource in Hugging Face naming, plus its config
 * and tokenizer.
 *
 * Q8_0 and Q4_0 tensors stay quantized (repacked into the GPU block layout),
 * Q4_K / Q5_K / Q6_K keep the file's super-blocks (core/ops/quant_k.ts), F16
 * arrives as halves; every other type (BF16, Q3_K, IQ4_XS, ...) is dequantized on
 * the host, one tensor at a time, and the loader stores it as f16 on the device
 * (`auto`): 16 bits per weight instead of the file's 3.4-4.3 for Q3_K / IQ4_XS.
 * q/k projections of llama/mistral files are un-permuted back to the
 * rotate-half row order llama.cpp's converter changed — on whole rows, so it
 * works on quantized blocks too.
 *
 * Rope tensors become `ropeScaling`: `rope_freqs` (llama3 scaling as per-frequency
 * divisors) as { type: 'factors' }, Phi-3's `rope_factors_short` / `rope_factors_long`
 * with the rope.scaling.attn_factor / original_context_length metadata as longrope.
 */
import { ModelFormatError, UnsupportedModelError } from '../errors.ts';
import type { DecoderConfig } from '../formats/hf_config.ts';
import { GGUF_QK_PERMUTED_ARCHS, ggufRowBytes, ggufToDecoderConfig, hfToGgufName, openGguf, unpermuteQK, type GgufValue } from '../formats/gguf.ts';
import type { ByteSource } from '../formats/source.ts';
import { repackGgufQ4_0, repackGgufQ8_0 } from '../ops/quant.ts';
import { kquantFromGgml, repackKQuant } from '../ops/quant_k.ts';
import { toHalves } from '../formats/safetensors.ts';
import { DEQUANTIZABLE } from '../formats/gguf_quants.ts';
import { tokenizerFromGguf } from '../tokenizer/gguf_tokenizer.ts';
import type { Tokenizer } from '../tokenizer/tokenizer.ts';
import type { HostTensor, WeightSource } from './host_tensor.ts';

export interface GgufWeights {
  config: DecoderConfig;
  tokenizer: Tokenizer;
  weights: WeightSource;
  metadata: ReadonlyMap<string, GgufValue>;
}

export async function openGgufWeights(src: ByteSource): Promise<GgufWeights> {
  const g = await openGguf(src);
  const config = ggufToDecoderConfig(g.metadata, g.tensors.keys());
  // Every tensor's type must have a kernel or a dequantizer: refuse before anything is read or allocated.
  for (const [name, t] of g.tensors) {
    if (!DEQUANTIZABLE.includes(t.type) && !kquantFromGgml(t.type)) {
      throw new UnsupportedModelError(`GGUF tensor ${name} has type ${t.type}, which this build cannot load; supported: ${DEQUANTIZABLE.join(', ')}`, { tensor: name, type: t.type, file: 'model.gguf' });
    }
  }
  const arch = String(g.metadata.get('general.architecture'));
  const permuted = GGUF_QK_PERMUTED_ARCHS.includes(arch);
  /** A [headDim / 2] rope factor tensor as numbers (null when absent). */
  const factors = async (name: string): Promise<number[] | null> => {
    const t = g.tensors.get(name);
    if (!t) return null;
    if (t.numel !== config.headDim / 2) {
      throw new ModelFormatError(`GGUF ${name} has ${t.numel} elements; head size ${config.headDim} needs ${config.headDim / 2}`, { tensor: name, file: 'model.gguf' });
    }
    const f = await g.readTensorF32(name);
    if (!f.every((x) => Number.isFinite(x) && x > 0)) throw new ModelFormatError(`GGUF ${name} holds non-positive or non-finite factors`, { tensor: name, file: 'model.gguf' });
    return Array.from(f);
  };
  const ropeFreqs = await factors('rope_freqs.weight');
  if (ropeFreqs) config.ropeScaling = { type: 'factors', factors: ropeFreqs };
  const short = await factors('rope_factors_short.weight');
  const long = await factors('rope_factors_long.weight');
  if (short || long) {
    const num = (k: string, d: number): number => {
      const v = g.metadata.get(`${arch}.${k}`);
      return typeof v === 'number' ? v : d;
    };
    const original = num('rope.scaling.original_context_length', config.maxPositions);
    const ratio = config.maxPositions / original;
    const attentionFactor = num('rope.scaling.attn_factor', ratio <= 1 ? 1 : Math.sqrt(1 + Math.log(ratio) / Math.log(original)));
    config.ropeScaling = { type: 'longrope', shortFactor: short ?? long!, longFactor: long ?? short!, originalMaxPositionEmbeddings: original, attentionFactor };
  }
  const tokenizer = tokenizerFromGguf(Object.fromEntries(g.metadata));
  const resolve = (hf: string): string | null => {
    const name = hfToGgufName(hf, arch);
    return name && g.tensors.has(name) ? name : null;
  };
  const weights: WeightSource = {
    has: (n) => resolve(n) !== null,
    info: (n) => {
      const name = resolve(n);
      const i = name ? g.tensors.get(name) : undefined;
      return i ? { shape: i.dims.length === 1 ? [i.dims[0]!] : [i.numel / i.dims[0]!, i.dims[0]!], file: 'model.gguf', type: i.type } : undefined;
    },
    async load(hf): Promise<HostTensor> {
      const name = resolve(hf);
      if (!name) throw new UnsupportedModelError(`GGUF has no tensor for ${hf}`, { tensor: hf });
      const info = g.tensors.get(name)!;
      const shape = info.shape.length === 1 ? [info.shape[0]!] : [info.numel / info.dims[0]!, info.dims[0]!];
      const rows = shape.length === 1 ? 1 : shape[0]!;
      const cols = shape[shape.length - 1]!;
      // q/k rows (and biases) of llama/mistral are stored interleaved: undo on whole rows.
      const qk = permuted && /self_attn\.(q|k)_proj\./.exec(hf);
      const heads = qk ? (qk[1] === 'q' ? config.heads : config.kvHeads) : 0;
      const isBias = hf.endsWith('.bias');
      const kq = shape.length === 2 ? kquantFromGgml(info.type) : null;
      if (kq) {
        let raw = await g.readTensor(name);
        if (qk && !isBias) raw = unpermuteQK(raw, heads, config.headDim, ggufRowBytes(info));
        return { kind: kq, shape, data: repackKQuant(kq, raw, rows, cols) };
      }
      if (info.type === 'F16' && !qk) {
        return { kind: 'f16', shape, data: toHalves('F16', await g.readTensor(name)) };
      }
      if (info.type === 'Q8_0' || info.type === 'Q4_0') {
        let raw = await g.readTensor(name);
        if (qk && !isBias) raw = unpermuteQK(raw, heads, config.headDim, ggufRowBytes(info));
        const blocks = info.type === 'Q8_0' ? repackGgufQ8_0(raw, rows, cols) : repackGgufQ4_0(raw, rows, cols);
        return { kind: info.type === 'Q8_0' ? 'q8_0' : 'q4_0', shape, data: blocks.data, scales: blocks.scales };
      }
      let data = await g.readTensorF32(name);
      if (qk) data = unpermuteQK(data, heads, config.headDim, isBias ? 1 : cols);
      return { kind: 'f32', shape, data };
    },
  };
  return { config, tokenizer, weights, metadata: g.metadata };
}

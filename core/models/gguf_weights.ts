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
 */
import { UnsupportedModelError } from '../errors.ts';
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
  if (g.tensors.has('rope_freqs.weight')) {
    throw new UnsupportedModelError('GGUF files with a rope_freqs tensor (Llama 3.1+ rope scaling) are not supported yet; load the Hugging Face checkpoint instead');
  }
  // Every tensor's type must have a kernel or a dequantizer: refuse before anything is read or allocated.
  for (const [name, t] of g.tensors) {
    if (!DEQUANTIZABLE.includes(t.type) && !kquantFromGgml(t.type)) {
      throw new UnsupportedModelError(`GGUF tensor ${name} has type ${t.type}, which this build cannot load; supported: ${DEQUANTIZABLE.join(', ')}`, { tensor: name, type: t.type, file: 'model.gguf' });
    }
  }
  const arch = String(g.metadata.get('general.architecture'));
  const permuted = GGUF_QK_PERMUTED_ARCHS.includes(arch);
  const tokenizer = tokenizerFromGguf(Object.fromEntries(g.metadata));
  const resolve = (hf: string): string | null => {
    const name = hfToGgufName(hf);
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

/**
 * CLIP vision tower weights: Hugging Face names under `<prefix>` (e.g.
 * `vision_tower.vision_model.`) -> our GPU layout. The patch-embedding conv
 * [D, 3, p, p] becomes a linear weight [D, 3*p*p] (a conv with kernel = stride
 * = patch is a matmul over flattened patches, element order (channel, row,
 * column)); q/k/v are fused into [3D, D] with a [3D] bias; class and position
 * embeddings stay on the host (forward.ts folds them into one base tensor).
 * Only the first `layers` encoder layers are loaded (LLaVA reads an inner layer).
 */
import { ModelFormatError } from '../../errors.ts';
import type { GpuContext } from '../../gpu/context.ts';
import type { Tensor } from '../../gpu/tensor.ts';
import type { LinearWeight } from '../../ops/matmul.ts';
import { concatRows, hostToF32, type HostTensor, type WeightDType, type WeightSource } from '../host_tensor.ts';
import { WeightUploader } from '../llama/weights.ts';
import type { ClipVisionConfig } from './config.ts';

export interface ClipLayerWeights {
  ln1: { w: Tensor; b: Tensor };
  qkv: LinearWeight;
  o: LinearWeight;
  ln2: { w: Tensor; b: Tensor };
  fc1: LinearWeight;
  fc2: LinearWeight;
}

export interface ClipVisionWeights {
  /** [D, 3*p*p] patch embedding, no bias. */
  patch: LinearWeight;
  /** Host [P+1, D]: position embeddings with the class embedding added to row 0. */
  base: Float32Array;
  preNorm: { w: Tensor; b: Tensor };
  layers: ClipLayerWeights[];
  bytes: number;
}

const f32 = (t: HostTensor, what: string): Float32Array => {
  if (t.kind === 'f16') return hostToF32(t); // bf16 / f16 checkpoints arrive as halves
  if (t.kind !== 'f32') throw new ModelFormatError(`${what}: quantized vision weights are not supported`);
  return t.data;
};

export async function loadClipVisionWeights(ctx: GpuContext, cfg: ClipVisionConfig, src: WeightSource, prefix: string, layers: number, dtype: WeightDType): Promise<ClipVisionWeights> {
  const up = new WeightUploader(ctx, dtype);
  const get = async (n: string): Promise<HostTensor> => {
    if (!src.has(prefix + n)) throw new ModelFormatError(`missing vision tensor ${prefix + n}`);
    return src.load(prefix + n);
  };
  const D = cfg.hiddenSize;
  const conv = await get('embeddings.patch_embedding.weight');
  const K = 3 * cfg.patchSize * cfg.patchSize;
  if (conv.shape.join() !== [D, 3, cfg.patchSize, cfg.patchSize].join()) throw new ModelFormatError(`patch_embedding.weight has shape [${conv.shape}], expected [${D}, 3, ${cfg.patchSize}, ${cfg.patchSize}]`);
  const patch = { w: up.matrix({ kind: 'f32', shape: [D, K], data: f32(conv, 'patch_embedding') }) };
  const cls = f32(await get('embeddings.class_embedding'), 'class_embedding');
  const pos = f32(await get('embeddings.position_embedding.weight'), 'position_embedding');
  if (pos.length !== (cfg.patches + 1) * D || cls.length !== D) throw new ModelFormatError('vision position/class embeddings do not match the config');
  const base = pos.slice();
  for (let i = 0; i < D; i++) base[i] = Math.fround(base[i]! + cls[i]!);
  const norm = async (n: string): Promise<{ w: Tensor; b: Tensor }> => ({ w: up.vector(await get(`${n}.weight`)), b: up.vector(await get(`${n}.bias`)) });
  const linear = async (n: string): Promise<LinearWeight> => ({ w: up.matrix(await get(`${n}.weight`)), bias: up.vector(await get(`${n}.bias`)) });
  const out: ClipLayerWeights[] = [];
  for (let l = 0; l < layers; l++) {
    const p = `encoder.layers.${l}.`;
    const names = ['q_proj', 'k_proj', 'v_proj'].map((n) => `${p}self_attn.${n}`);
    const qkvW = concatRows(await Promise.all(names.map((n) => get(`${n}.weight`))));
    const biases = await Promise.all(names.map(async (n) => f32(await get(`${n}.bias`), n)));
    const qkvB = new Float32Array(3 * D);
    biases.forEach((b, i) => qkvB.set(b, i * D));
    out.push({
      ln1: await norm(`${p}layer_norm1`),
      qkv: { w: up.matrix(qkvW), bias: up.vector({ kind: 'f32', shape: [3 * D], data: qkvB }) },
      o: await linear(`${p}self_attn.out_proj`),
      ln2: await norm(`${p}layer_norm2`),
      fc1: await linear(`${p}mlp.fc1`),
      fc2: await linear(`${p}mlp.fc2`),
    });
  }
  return { patch, base, preNorm: await norm('pre_layrnorm'), layers: out, bytes: up.bytes };
}

export function destroyClipVisionWeights(w: ClipVisionWeights): void {
  const ts: (Tensor | undefined)[] = [w.patch.w, w.preNorm.w, w.preNorm.b];
  for (const l of w.layers) ts.push(l.ln1.w, l.ln1.b, l.qkv.w, l.qkv.bias, l.o.w, l.o.bias, l.ln2.w, l.ln2.b, l.fc1.w, l.fc1.bias, l.fc2.w, l.fc2.bias);
  for (const t of ts) t?.buffer.destroy();
}

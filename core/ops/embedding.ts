/**
 * Token embedding: out[t, :] = table[ids[t], :] * scale, plus optional learned absolute
 * position rows posTable[positions[t], :] (GPT-2 wpe, BERT) and token-type rows
 * typeTable[typeIds[t], :] (BERT). `scale` multiplies only the token rows (Gemma: sqrt(D)).
 * Shapes: ids, positions, typeIds [T] u32; table [V, D] f32 | f16 | q8_0 | q4_0 | q4_k | q5_k | q6_k
 * (quantized: D % 32 == 0; K-quants: D % 256 == 0); posTable [P, D], typeTable [TT, D] f32; out [T, D] f32.
 * Ids >= V, positions >= P and type ids >= TT contribute zeros. Reference: embedding.ref.ts.
 */
import type { Recorder } from '../gpu/recorder.ts';
import { numel, QK, type Tensor } from '../gpu/tensor.ts';
import { uniformLayout } from '../gpu/uniforms.ts';
import { ceilDiv, grid1d } from './grid.ts';
import type { Variant } from './variant.ts';
import { isKQuant, QK_K } from './quant_k.ts';

const layout = uniformLayout([
  ['T', 'u32'], // tokens
  ['D', 'u32'], // embedding width, in elements
  ['V', 'u32'], // table rows
  ['P', 'u32'], // posTable rows
  ['TT', 'u32'], // typeTable rows
  ['scale', 'f32'], // token-row multiplier
  ['base', 'u32'], // first table row's token id (row-split tables; else 0)
] as const);

export interface EmbeddingOptions {
  scale?: number;
  /**
   * Row-split tables (a vocabulary too large for one storage binding): `table` holds token ids
   * base .. base + V - 1. Run the part at base 0 first without `part` (it writes every row,
   * zeros for ids outside it), then each other part with `part: true`, which writes only the
   * rows whose ids it holds.
   */
  base?: number;
  part?: boolean;
  positions?: Tensor;
  posTable?: Tensor;
  typeIds?: Tensor;
  typeTable?: Tensor;
  variant?: Variant;
}

export async function embedding(rec: Recorder, ids: Tensor, table: Tensor, out: Tensor, opts: EmbeddingOptions = {}): Promise<void> {
  const [V, D] = [table.shape[0]!, table.shape[table.shape.length - 1]!];
  const T = numel(ids.shape);
  const quant = table.dtype === 'q8_0' || table.dtype === 'q4_0';
  if (!['f32', 'f16', 'q8_0', 'q4_0', 'q4_k', 'q5_k', 'q6_k'].includes(table.dtype)) throw new Error(`embedding: unsupported table dtype ${table.dtype}`);
  if (isKQuant(table.dtype) && D % QK_K !== 0) throw new Error(`embedding: ${table.dtype} table needs D % ${QK_K} == 0`);
  if (quant && (D % QK !== 0 || !table.scales)) throw new Error(`embedding: ${table.dtype} table needs D % ${QK} == 0 and scales`);
  if (numel(out.shape) !== T * D) throw new Error(`embedding: out ${out.shape} != [${T}, ${D}]`);
  const pos = !!opts.posTable;
  const type = !!opts.typeTable;
  if (pos !== !!opts.positions || type !== !!opts.typeIds) throw new Error('embedding: positions/posTable and typeIds/typeTable come in pairs');
  if (opts.part && (pos || type || !opts.base)) throw new Error('embedding: a table part (base > 0) takes no position or type rows');
  for (const t of [opts.posTable, opts.typeTable]) if (t && t.shape[t.shape.length - 1] !== D) throw new Error(`embedding: extra table width ${t.shape} != ${D}`);

  if (T === 0) return; // nothing to gather (and zero-sized bindings are invalid)
  const bound: Tensor[] = [ids, table];
  const slot = (t: Tensor): number => bound.push(t);
  if (quant) bound.push({ buffer: table.scales!, offset: 0, shape: [Math.ceil((V * D) / QK / 2)], dtype: 'u32' }); // f16 pairs (Tensor.scales)
  const B_POS = pos ? slot(opts.positions!) : 0;
  const B_PT = pos ? slot(opts.posTable!) : 0;
  const B_TY = type ? slot(opts.typeIds!) : 0;
  const B_TT = type ? slot(opts.typeTable!) : 0;
  const B_OUT = slot(out);

  const variant = opts.variant ?? rec.ctx.variant;
  const WG = 64;
  const kernel = await rec.ctx.pipelines.get({
    shader: 'embedding',
    defines: { WG, VARIANT: variant, DTYPE: table.dtype, KQ: table.dtype, POS: pos, TYPE: type, PART: !!opts.part, B_POS, B_PT, B_TY, B_TT, B_OUT },
    layout,
  });
  const params = {
    T, D, V,
    P: pos ? numel(opts.posTable!.shape) / D : 0,
    TT: type ? numel(opts.typeTable!.shape) / D : 0,
    scale: opts.scale ?? 1,
    base: opts.base ?? 0,
  };
  rec.dispatch(kernel, params, bound, grid1d(variant === 'gpu' ? T : ceilDiv(T * ceilDiv(D, 4), WG)));
}

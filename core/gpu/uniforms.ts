/**
 * Uniform layouts declared once, in TypeScript, without hand-counted offsets.
 *
 * A layout is an ordered list of scalar fields (4 bytes each: u32, i32, f32).
 * It yields both the WGSL `struct Params { ... }` that the pipeline cache
 * prepends to the kernel source and the writer that packs values at the same
 * offsets, so the two can never disagree.
 */
export type ScalarType = 'u32' | 'i32' | 'f32';

export interface UniformLayout<K extends string> {
  readonly fields: readonly (readonly [K, ScalarType])[];
  /** Size in bytes, rounded up to 16 as WGSL's uniform address space requires. */
  readonly byteSize: number;
  /** WGSL source of `struct Params`. */
  readonly wgsl: string;
  /** Packs `values` into `view` at byte offset `at`. Missing fields throw. */
  write(view: DataView, at: number, values: Readonly<Record<K, number>>): void;
}

export function uniformLayout<K extends string>(fields: readonly (readonly [K, ScalarType])[]): UniformLayout<K> {
  const byteSize = Math.max(16, Math.ceil((fields.length * 4) / 16) * 16);
  const wgsl = `struct Params {\n${fields.map(([n, t]) => `  ${n}: ${t},`).join('\n')}\n};\n`;
  // Flat arrays for the writer: it runs once per dispatch, so no closure or destructuring per field.
  const names = fields.map(([n]) => n);
  const types = fields.map(([, t]) => t);
  return {
    fields,
    byteSize,
    wgsl,
    write(view, at, values) {
      for (let i = 0; i < names.length; i++) {
        const name = names[i]!;
        const v = values[name];
        if (v === undefined || Number.isNaN(v)) throw new Error(`uniform field ${name} missing`);
        const o = at + i * 4;
        const type = types[i];
        if (type === 'f32') view.setFloat32(o, v, true);
        else if (type === 'i32') view.setInt32(o, v, true);
        else view.setUint32(o, v >>> 0, true);
      }
    },
  };
}

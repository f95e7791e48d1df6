/**
 * Workgroup-grid helpers: WebGPU caps each grid dimension (65535 by default),
 * so large 1-D grids fold into 2-D; kernels recover the linear id as
 * `wid.x + wid.y * 65535`.
 */
export const MAX_GROUPS_X = 65535;

export function grid1d(groups: number): [number, number] {
  if (groups <= MAX_GROUPS_X) return [Math.max(1, groups), 1];
  return [MAX_GROUPS_X, Math.ceil(groups / MAX_GROUPS_X)];
}

export function ceilDiv(a: number, b: number): number {
  return Math.ceil(a / b);
}

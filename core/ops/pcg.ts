/**
 * The sampler's counter-based hash on the CPU, bit for bit as in
 * shaders/sample.wgsl: the speculative sampler (core/engine/speculative_sampling.ts)
 * draws its uniforms from it so a request's random stream is the same whichever
 * side draws, and the CPU reference of the sampling kernel uses it too.
 */

/** pcg2d (Jarzynski & Olano 2020) on u32 pairs, as in shaders/sample.wgsl. */
export function pcg2d(a: number, b: number): [number, number] {
  const M = 1664525;
  let x = (Math.imul(a >>> 0, M) + 1013904223) >>> 0;
  let y = (Math.imul(b >>> 0, M) + 1013904223) >>> 0;
  x = (x + Math.imul(y, M)) >>> 0;
  y = (y + Math.imul(x, M)) >>> 0;
  x = (x ^ (x >>> 16)) >>> 0;
  y = (y ^ (y >>> 16)) >>> 0;
  x = (x + Math.imul(y, M)) >>> 0;
  y = (y + Math.imul(x, M)) >>> 0;
  return [(x ^ (x >>> 16)) >>> 0, (y ^ (y >>> 16)) >>> 0];
}

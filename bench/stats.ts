/** Small statistics (and the report's number formats) shared by the bench modules. */

/** Median of the finite values (mean of the middle two for an even count); NaN when none. */
export function median(xs: number[]): number {
  const s = xs.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (!s.length) return NaN;
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

/** Arithmetic mean; NaN for an empty list. */
export function mean(xs: number[]): number {
  return xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : NaN;
}

/** The p-th percentile (nearest rank, p in 0..100) of the finite values; NaN when none. */
export function percentile(xs: number[], p: number): number {
  const s = xs.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (!s.length) return NaN;
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
}

/** x with one / two decimals for report tables; '—' when not finite. */
export const f1 = (x: number): string => (Number.isFinite(x) ? x.toFixed(1) : '—');
export const f2 = (x: number): string => (Number.isFinite(x) ? x.toFixed(2) : '—');

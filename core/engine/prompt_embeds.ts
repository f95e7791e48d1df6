/**
 * Image-to-text plumbing between the scheduler and the model: collects, for
 * one step, the feature rows of the prompt positions the step computes (a
 * chunk may hold part of an image, or none) and their token indices in the
 * step, as StepInputs.embedRows / embedAt. Also builds a sequence's
 * prefix-cache salt from its images' content hashes. Pure logic.
 */
import type { Salt } from './kv_cache.ts';
import type { PromptEmbeds } from './scheduler.ts';

/** First index i with positions[i] >= pos. */
function lowerBound(positions: Uint32Array, pos: number): number {
  let lo = 0;
  let hi = positions.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (positions[mid]! < pos) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

export class EmbedCollector {
  private readonly at: number[] = [];
  private readonly src: { e: PromptEmbeds; first: number; n: number }[] = [];
  private width = 0;

  /** Positions [start, start + count) of a sequence with embeds, computed as step tokens from `firstToken` on. */
  add(e: PromptEmbeds, start: number, count: number, firstToken: number): void {
    const first = lowerBound(e.positions, start);
    const end = lowerBound(e.positions, start + count);
    if (end === first) return;
    if (this.width && this.width !== e.width) throw new Error(`embeds of width ${e.width} and ${this.width} in one step`);
    this.width = e.width;
    for (let i = first; i < end; i++) this.at.push(firstToken + e.positions[i]! - start);
    this.src.push({ e, first, n: end - first });
  }

  /** The step inputs' embedRows / embedAt, or nothing when no position needs a row. */
  inputs(): { embedRows?: Float32Array; embedAt?: Uint32Array } {
    if (this.at.length === 0) return {};
    const W = this.width;
    const rows = new Float32Array(this.at.length * W);
    let o = 0;
    for (const { e, first, n } of this.src) {
      rows.set(e.rows.subarray(first * W, (first + n) * W), o);
      o += n * W;
    }
    return { embedRows: rows, embedAt: Uint32Array.from(this.at) };
  }
}

/**
 * Per-block prefix-cache salt for a prompt whose positions `spans[i]` =
 * [start, start + length) hold image i with content hash hashes[i]: a block's
 * salt lists the hashes of the images it overlaps ('' for text-only blocks, so
 * a shared text prefix before the first image stays shareable).
 */
export function imageSalt(spans: readonly { start: number; length: number; hash: string }[]): Salt {
  if (spans.length === 0) return '';
  return (start, end) =>
    spans
      .filter((s) => s.start < end && s.start + s.length > start)
      .map((s) => s.hash)
      .join('+');
}

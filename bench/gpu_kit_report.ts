/**
 * The arithmetic and the table of the GPU benchmark kit (bench/gpu_kit.ts,
 * scripts/gpu_bench.sh): steady-state decode throughput from token
 * timestamps, weight bytes streamed per decode token from a checkpoint's
 * safetensors headers, the memory-bandwidth roofline, and the one table that
 * puts Weft, PyTorch and the roofline side by side. Pure functions (no GPU, no
 * files but the headers), so they are unit-tested on their own.
 */

/** What one engine measured on one model (Weft: bench/gpu_kit.ts; PyTorch: scripts/torch_bench.py). */
export interface EngineFigures {
  engine: 'weft' | 'torch';
  model: string;
  /** The device in words: the WebGPU adapter, or torch's cuda device / "cpu". */
  device: string;
  /** Weight dtype the engine ran with (f16, bf16, f32). */
  dtype: string;
  /** Aggregate decode tok/s by batch size (concurrent sequences), e.g. {"1": 95.2, "16": 880}. */
  decode: Record<string, number>;
  /** Prompt tokens of the prefill measurement and its tok/s (tokens / time to the first token). */
  prefillTokens: number;
  prefillTokS: number;
  /** Prompt tokens of the TTFT measurement and its median ms. */
  ttftPromptTokens: number;
  ttftMs: number;
  /** Device-to-device copy bandwidth measured by this engine, bytes/s counting read + write. */
  copyBytesPerS: number;
  /** What the copy was (size, repetitions, API). */
  copyNote: string;
  /** Weight bytes one decode step streams at this engine's dtype. */
  weightBytesPerToken: number;
  notes?: string[];
}

/** Request k's prompt of n ids in [1, vocab - 1): scripts/torch_bench.py's prompt_ids repeats this formula. */
export function promptIds(n: number, k: number, vocab: number, seed: number): number[] {
  const out: number[] = [];
  for (let i = 0; i < n; i++) out.push(((seed * 1000003 + k * 7919 + i * 104729) % (vocab - 2)) + 1);
  return out;
}

/** One request's token arrival times (ms, any common clock). */
export type TokenTimes = readonly number[];

/**
 * Aggregate decode tok/s over the window in which every request had its first
 * token and none had its last: from the latest first token to the earliest
 * last token, tokens of all requests arriving after the window start and up to
 * its end, over its length. Requests admitted over several steps (their
 * prompts in chunks) or finishing at different steps then do not dilute the
 * figure with steps where fewer than N sequences decode. NaN when the window
 * is empty (a request produced fewer than two tokens).
 */
export function steadyDecodeTokS(requests: readonly TokenTimes[]): number {
  if (requests.length === 0 || requests.some((r) => r.length < 2)) return Number.NaN;
  const start = Math.max(...requests.map((r) => r[0]!));
  const end = Math.min(...requests.map((r) => r[r.length - 1]!));
  if (!(end > start)) return Number.NaN;
  let n = 0;
  for (const r of requests) for (const t of r) if (t > start && t <= end) n++;
  return n / ((end - start) / 1000);
}

/** Element count and dtype of each tensor in a safetensors header. */
export interface TensorEntry {
  name: string;
  dtype: string;
  shape: number[];
}

/** Tensors of a safetensors file from its first bytes (8-byte little-endian header length, then JSON). */
export function safetensorsEntries(head: Uint8Array): TensorEntry[] {
  const view = new DataView(head.buffer, head.byteOffset, head.byteLength);
  const len = Number(view.getBigUint64(0, true));
  if (head.byteLength < 8 + len) throw new RangeError(`safetensors header is ${len} bytes; ${head.byteLength - 8} given`);
  const json = JSON.parse(new TextDecoder().decode(head.subarray(8, 8 + len))) as Record<string, { dtype: string; shape: number[] }>;
  return Object.entries(json)
    .filter(([k]) => k !== '__metadata__')
    .map(([name, v]) => ({ name, dtype: v.dtype, shape: v.shape }));
}

/**
 * Weight bytes one decode step reads, at `bytesPerParam`: every tensor once,
 * except that an untied input embedding contributes one row per token, not
 * its whole table (a tied one is read in full as the output head). KV-cache
 * reads are left out: this is the weight-streaming bound.
 */
export function weightBytesPerToken(tensors: readonly TensorEntry[], bytesPerParam: number): number {
  const hasHead = tensors.some((t) => t.name === 'lm_head.weight');
  let params = 0;
  for (const t of tensors) {
    const n = t.shape.reduce((a, b) => a * b, 1);
    if (hasHead && t.name === 'model.embed_tokens.weight') params += t.shape[t.shape.length - 1] ?? 0;
    else params += n;
  }
  return params * bytesPerParam;
}

/** Tokens per second a batch of `batch` sequences can decode if streaming the weights once per step is the only cost. */
export function rooflineTokS(copyBytesPerS: number, weightBytes: number, batch: number): number {
  return weightBytes > 0 ? (batch * copyBytesPerS) / weightBytes : Number.NaN;
}

function fmt(v: number | undefined, digits = 1): string {
  if (v === undefined || !Number.isFinite(v)) return '-';
  if (v >= 1000) return Math.round(v).toString();
  return v.toFixed(digits);
}

/**
 * The kit's table: per model, a Weft row, a PyTorch row and a roofline row
 * (batch × copy bandwidth ÷ weight bytes per token, at 2 bytes per parameter,
 * with the higher of the two copy bandwidths measured in the run), then the
 * devices and copy bandwidths under it.
 */
export function renderTable(figures: readonly EngineFigures[], batches: readonly number[]): string {
  const head = ['model', 'engine', ...batches.map((b) => `decode b${b}`), 'prefill', 'TTFT ms'];
  const rows: string[][] = [];
  const notes: string[] = [];
  const models = [...new Set(figures.map((f) => f.model))];
  for (const model of models) {
    const mine = figures.filter((f) => f.model === model);
    for (const f of mine) {
      rows.push([
        model,
        `${f.engine === 'weft' ? 'Weft' : 'PyTorch eager'} ${f.dtype}`,
        ...batches.map((b) => fmt(f.decode[String(b)])),
        `${fmt(f.prefillTokS)} (${f.prefillTokens})`,
        `${fmt(f.ttftMs)} (${f.ttftPromptTokens})`,
      ]);
      notes.push(`${model} ${f.engine}: ${f.device}; copy ${fmt(f.copyBytesPerS / 1e9)} GB/s (${f.copyNote})${f.notes?.length ? `; ${f.notes.join('; ')}` : ''}`);
    }
    const best = mine.reduce<EngineFigures | undefined>((a, f) => (a && a.copyBytesPerS >= f.copyBytesPerS ? a : f), undefined);
    if (best) {
      // Both engines stream 16-bit weights on a GPU; the roofline is stated at 2 bytes per parameter.
      const per = mine.find((f) => f.dtype !== 'f32') ?? best;
      const bytes16 = per.dtype === 'f32' ? per.weightBytesPerToken / 2 : per.weightBytesPerToken;
      rows.push([model, 'roofline 16-bit', ...batches.map((b) => fmt(rooflineTokS(best.copyBytesPerS, bytes16, b))), '-', '-']);
      notes.push(`${model} roofline: ${fmt(bytes16 / 1e6)} MB of 16-bit weights per step over ${fmt(best.copyBytesPerS / 1e9)} GB/s (${best.engine}'s copy), × batch`);
    }
  }
  const width = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: readonly string[]): string => `| ${cells.map((c, i) => (i < 2 ? c.padEnd(width[i]!) : c.padStart(width[i]!))).join(' | ')} |`;
  return [
    line(head),
    `|${width.map((w, i) => (i < 2 ? '-'.repeat(w + 2) : `${'-'.repeat(w + 1)}:`)).join('|')}|`,
    ...rows.map(line),
    '',
    'decode: aggregate tok/s with N sequences decoding; prefill: prompt tok/s (prompt tokens); TTFT: ms to the first token (prompt tokens).',
    ...notes,
  ].join('\n');
}

/**
 * Markdown for the generation benchmark (bench/generate.ts): the per-model table, the
 * ratios against each peer, greedy agreement, batched throughput, the decode step
 * breakdown and the runtimes.
 */
import type { CaseResult, GenerateBenchReport } from './generate.ts';
import { median } from './stats.ts';


export function fmt(v: number | undefined, digits?: number): string {
  if (v === undefined || !Number.isFinite(v)) return '–';
  const a = Math.abs(v);
  const d = digits ?? (a >= 100 ? 0 : a >= 10 ? 1 : a >= 1 ? 2 : 3);
  return v.toLocaleString('en-US', { minimumFractionDigits: d, maximumFractionDigits: d });
}

function ratio(v: number): string {
  if (!Number.isFinite(v)) return '–';
  return `${v >= 10 ? v.toFixed(0) : v >= 1 ? v.toFixed(2) : v.toFixed(3)}x`;
}

export function caseName(c: CaseResult): string {
  if (c.kind === 'weft' || c.kind === 'weft-batch') return `Weft ${c.device}`;
  if (c.kind === 'ts-cpu') return 'TS CPU';
  return `transformers.js ${c.device}`;
}

interface Summary {
  c: CaseResult;
  prefillMs: number;
  prefillTokS: number;
  ttftMs: number;
  decodeTokS: number;
  ids?: number[];
  stable: boolean;
}

function summarize(c: CaseResult): Summary {
  const prefillMs = median(c.runs.map((r) => r.prefillMs));
  const ids = c.runs[c.runs.length - 1]?.tokenIds;
  return {
    c,
    prefillMs,
    prefillTokS: c.promptTokens / (prefillMs / 1000),
    ttftMs: median(c.runs.map((r) => r.ttftMs)),
    decodeTokS: median(c.runs.map((r) => r.decodeTokS)),
    ...(ids ? { ids } : {}),
    stable: c.runs.every((r) => r.tokenIds.join() === c.runs[0]!.tokenIds.join()),
  };
}

/** Length of the common prefix of two id lists, over the shorter one. */
function agreement(a: number[] | undefined, b: number[] | undefined): string {
  if (!a || !b || !a.length || !b.length) return '–';
  const n = Math.min(a.length, b.length);
  let k = 0;
  while (k < n && a[k] === b[k]) k++;
  return k === n ? `${k}/${n} ✓` : `${k}/${n} ✗ (first diff at ${k})`;
}

export function markdownGenerate(rep: GenerateBenchReport): string {
  const out: string[] = [];
  const mb = (b?: number): string => (b === undefined ? '–' : fmt(b / 2 ** 20));
  const models = [...new Set(rep.cases.filter((c) => c.kind !== 'weft-batch').map((c) => c.model))];
  out.push(`Prompt: ${rep.promptIds.length} tokens \`[${rep.promptIds.join(', ')}]\`; greedy, EOS ignored, single stream. Medians over the timed runs after warm-up.`);
  out.push('');
  for (const m of models) {
    const cs = rep.cases.filter((c) => c.model === m && c.kind !== 'weft-batch');
    const label = cs[0]!.modelLabel;
    const sums = cs.map(summarize);
    out.push(`#### ${label}`);
    out.push('');
    out.push('| engine | new tokens × runs | prefill ms | prefill tok/s | TTFT ms | decode tok/s | load ms | peak RSS MB | GPU MB (weights + KV) | load avg |');
    out.push('|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|');
    for (const s of sums) {
      const c = s.c;
      if (c.error && !c.runs.length) {
        out.push(`| ${caseName(c)} | ${c.newTokens} × 0 | failed: ${c.error.replace(/\|/g, '/').slice(0, 160)} | | | | | ${fmt(c.peakRssMB)} | | ${fmt(c.loadAvg[0], 1)} |`);
        continue;
      }
      const gpu = c.gpuWeightBytes !== undefined ? `${mb(c.gpuWeightBytes)} + ${mb(c.gpuKvBytes)}` : '–';
      out.push(
        `| ${caseName(c)} | ${c.newTokens} × ${c.runs.length} | ${fmt(s.prefillMs)} | ${fmt(s.prefillTokS)} | ${fmt(s.ttftMs)} | ${fmt(s.decodeTokS)} | ${fmt(c.loadMs, 0)} | ${fmt(c.peakRssMB, 0)} | ${gpu} | ${fmt(c.loadAvg[0], 1)}–${fmt(c.loadAvg[1], 1)} |`,
      );
    }
    out.push('');
    // Ratios: Weft backends against every peer of the same model.
    const wefts = sums.filter((s) => s.c.kind === 'weft' && s.c.runs.length);
    const peers = sums.filter((s) => s.c.kind !== 'weft' && s.c.runs.length);
    if (wefts.length && peers.length) {
      out.push('Ratios (> 1: Weft faster). Decode: Weft tok/s ÷ peer tok/s. Prefill: peer prefill time ÷ Weft prefill time.');
      out.push('');
      out.push(`| Weft | ${peers.map((p) => `vs ${caseName(p.c)}`).join(' | ')} |`);
      out.push(`|---|${peers.map(() => '---').join('|')}|`);
      for (const w of wefts) {
        out.push(`| ${caseName(w.c)} | ${peers.map((p) => `decode ${ratio(w.decodeTokS / p.decodeTokS)}, prefill ${ratio(p.prefillMs / w.prefillMs)}`).join(' | ')} |`);
      }
      out.push('');
      for (const w of wefts) {
        out.push(`- ${caseName(w.c)} decode = ${peers.map((p) => `${ratio(w.decodeTokS / p.decodeTokS)} ${caseName(p.c)}`).join(', ')}`);
      }
      out.push('');
    }
    // Agreement of the greedy ids.
    const ts = sums.find((s) => s.c.kind === 'ts-cpu');
    const w0 = wefts[0];
    out.push(`Greedy agreement (common prefix of the generated ids; last timed run)${ts ? ' vs the TS CPU reference' : ''}${w0 ? ` and vs ${caseName(w0.c)}` : ''}; "stable" = every timed run produced the same ids:`);
    out.push('');
    out.push(`| engine | vs TS CPU | vs ${w0 ? caseName(w0.c) : 'Weft'} | stable across runs | first ids |`);
    out.push('|---|---|---|---|---|');
    for (const s of sums) {
      if (!s.ids) continue;
      out.push(`| ${caseName(s.c)} | ${s === ts ? '(reference)' : agreement(s.ids, ts?.ids)} | ${s === w0 ? '(reference)' : agreement(s.ids, w0?.ids)} | ${s.stable ? 'yes' : 'NO'} | ${s.ids.slice(0, 8).join(',')}… |`);
    }
    out.push('');
  }
  const batches = rep.cases.filter((c) => c.kind === 'weft-batch');
  if (batches.length) {
    out.push(`#### Weft batched throughput (stories260K, ${batches[0]!.newTokens} new tokens per request, greedy, distinct prompts)`);
    out.push('');
    out.push('| backend | N | wall s (median) | aggregate tok/s | per request tok/s | × N=1 | decode step ms | request 0 = N=1 ids | runs |');
    out.push('|---|---:|---:|---:|---:|---:|---:|---|---:|');
    for (const c of batches) {
      if (!c.batch?.length) {
        out.push(`| ${c.device} | | failed: ${(c.error ?? '').replace(/\|/g, '/').slice(0, 160)} | | | | | | |`);
        continue;
      }
      const one = c.batch.find((b) => b.n === 1);
      for (const b of c.batch) {
        out.push(
          `| ${c.device} | ${b.n} | ${fmt(b.wallMs / 1000)} | ${fmt(b.aggTokS)} | ${fmt(b.aggTokS / b.n)} | ${one ? ratio(b.aggTokS / one.aggTokS) : '–'} | ${fmt(b.decodeStepMs)} | ${b.matchesN1 ? 'yes' : 'NO'} | ${b.runs} |`,
        );
      }
    }
    out.push('');
  }
  const wefts = rep.cases.filter((c) => c.kind === 'weft' && c.stepMs !== undefined && Number.isFinite(c.stepMs));
  if (wefts.length) {
    out.push('Weft decode step breakdown (mean over decode steps): CPU time recording the step (encoding, bind groups, uniforms) vs the rest (submit, GPU work, id readback); "round trip" is an empty submit + 16-byte readback (median of 20), the fixed synchronisation cost every step pays; dispatches per decode step (forward + sampling) and the decode path (the single-dispatch decode megakernel, docs/kernels.md, or the generic per-op path).');
    out.push('');
    out.push('| engine | model | step ms | recording ms | submit + GPU + readback ms | round trip ms | dispatches / step | decode path |');
    out.push('|---|---|---:|---:|---:|---:|---:|---|');
    for (const c of wefts) {
      out.push(`| ${caseName(c)} | ${c.modelLabel} | ${fmt(c.stepMs)} | ${fmt(c.recordMs)} | ${fmt(c.stepMs! - c.recordMs!)} | ${fmt(c.syncMs)} | ${fmt(c.dispatches)} | ${c.decodePath ?? '–'} |`);
    }
    out.push('');
  }
  out.push('Runtimes:');
  out.push('');
  const seen = new Set<string>();
  for (const c of rep.cases) {
    const k = `${caseName(c)}: ${c.runtime || '?'}`;
    if (!seen.has(k)) seen.add(k), out.push(`- ${k}`);
  }
  return out.join('\n');
}

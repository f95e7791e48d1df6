/**
 * The server's memory plan (GET /memory_plan on the management API, core/models/memory_plan.ts
 * on the server's GPU) as label / value rows for the calculator card: the plan when the model
 * fits, the refusal's numbers (`model_too_large` details) when it does not. Pure, unit-tested.
 */

export interface ServerPlan {
  model: string;
  device: string;
  backend: string;
  architecture: string;
  format: string;
  dtype: string;
  kv_dtype: string;
  max_context: number;
  max_seqs: number;
  plan: {
    budget_bytes: number;
    budget_source: string;
    weight_bytes: number;
    activation_bytes: number;
    reserve_bytes: number;
    kv_pool_bytes: number;
    kv_blocks: number;
    kv_tokens: number;
    kv_bytes_per_token: number;
    full_context_seqs: number;
    total_bytes: number;
  } | null;
}

/** Bytes as MiB / GiB with one decimal. */
export function mib(n: number): string {
  return n >= 2 ** 30 ? `${(n / 2 ** 30).toFixed(1)} GiB` : `${(n / 2 ** 20).toFixed(1)} MiB`;
}

/** [label, value, element id] rows of a plan. */
export function planRows(p: ServerPlan): [string, string, string][] {
  const rows: [string, string, string][] = [
    ['Device', `${p.device} (${p.backend})`, 'mp-device'],
    ['Model', `${p.architecture}, ${p.format}, weights ${p.dtype}, KV ${p.kv_dtype}`, 'mp-model'],
  ];
  const q = p.plan;
  if (!q) return [...rows, ['Plan', 'no tensor headers to plan from', 'mp-none']];
  return [
    ...rows,
    ['Budget', `${mib(q.budget_bytes)} (${q.budget_source})`, 'mp-budget'],
    ['Weights', mib(q.weight_bytes), 'mp-weights'],
    ['Activations', mib(q.activation_bytes), 'mp-activations'],
    ['Reserve', mib(q.reserve_bytes), 'mp-reserve'],
    ['KV pool', `${mib(q.kv_pool_bytes)} = ${q.kv_tokens.toLocaleString('en-US')} tokens (${q.kv_bytes_per_token} B/token)`, 'mp-kv'],
    ['Context it holds', `${q.full_context_seqs} sequence${q.full_context_seqs === 1 ? '' : 's'} of ${p.max_context.toLocaleString('en-US')} tokens`, 'mp-seqs'],
    ['Total', mib(q.total_bytes), 'mp-total'],
  ];
}

/** Rows of a `model_too_large` refusal from its details (the numbers the server computed). */
export function refusalRows(details: unknown): [string, string, string][] {
  const d = (details ?? {}) as Record<string, unknown>;
  const n = (k: string): number | undefined => (typeof d[k] === 'number' ? (d[k] as number) : undefined);
  const rows: [string, string, string][] = [];
  const add = (label: string, k: string, id: string): void => {
    const v = n(k);
    if (v !== undefined) rows.push([label, mib(v), id]);
  };
  if (typeof d.device === 'string') rows.push(['Device', d.device, 'mp-device']);
  const b = n('budgetBytes');
  if (b !== undefined) rows.push(['Budget', `${mib(b)}${typeof d.budgetSource === 'string' ? ` (${d.budgetSource})` : ''}`, 'mp-budget']);
  add('Weights', 'weightBytes', 'mp-weights');
  add('Activations', 'activationBytes', 'mp-activations');
  add('Reserve', 'reserveBytes', 'mp-reserve');
  add('One full-context KV sequence', 'minKvBytes', 'mp-min-kv');
  add('Page cache asked for', 'kvCacheBytes', 'mp-page-cache');
  return rows;
}

/** The query string of a plan request. */
export function planQuery(o: { model: string; maxContext?: number; maxSeqs?: number; dtype?: string; kv?: string }): string {
  const q = new URLSearchParams({ model: o.model });
  if (o.maxContext) q.set('max_context', String(o.maxContext));
  if (o.maxSeqs) q.set('max_seqs', String(o.maxSeqs));
  if (o.dtype) q.set('dtype', o.dtype);
  if (o.kv) q.set('kv_cache_dtype', o.kv);
  return `memory_plan?${q}`;
}

/**
 * The memory calculator card: a model shape (typed, or parsed from a pasted
 * config.json or a reader's config) and run settings in, GPU bytes for
 * weights and KV cache out. The arithmetic is web/src/memory.ts. Below it, the
 * server's own plan for a model on its GPU (GET /memory_plan; web/src/memory_plan.ts).
 */
import { ApiError, getJson } from '../api.ts';
import { field, fmtBytes, h, replace } from '../dom.ts';
import { estimateMemory, shapeFromConfig, type KvDtype, type ModelShape, type WeightDtype } from '../memory.ts';
import { planQuery, planRows, refusalRows, type ServerPlan } from '../memory_plan.ts';

const SHAPE_FIELDS: [keyof ModelShape, string][] = [
  ['hidden', 'Hidden size'],
  ['layers', 'Layers'],
  ['heads', 'Attention heads'],
  ['kvHeads', 'KV heads'],
  ['headDim', 'Head dim'],
  ['intermediate', 'Intermediate size'],
  ['vocab', 'Vocab size'],
];

/** Defaults: the bundled stories260K. */
const DEFAULT: ModelShape = { hidden: 64, layers: 5, heads: 8, kvHeads: 4, headDim: 8, intermediate: 172, vocab: 512, tie: true };

export function memoryCalculator(): { el: HTMLElement; setConfig(c: Record<string, unknown>): void } {
  const inputs = Object.fromEntries(SHAPE_FIELDS.map(([k]) => [k, h('input', { type: 'number', min: 1, id: `mc-${k}`, value: String(DEFAULT[k]) })])) as Record<string, HTMLInputElement>;
  const tie = h('input#mc-tie', { type: 'checkbox', checked: DEFAULT.tie });
  const dtype = h('select#mc-dtype', ...(['f32', 'f16', 'q8_0', 'q4_0'] as WeightDtype[]).map((d) => h('option', { value: d }, d)));
  const kv = h('select#mc-kv', h('option', { value: 'f32' }, 'f32'), h('option', { value: 'f16' }, 'f16'), h('option', { value: 'q8' }, '8-bit'));
  const ctx = h('input#mc-context', { type: 'number', min: 1, value: '512' });
  const batch = h('input#mc-batch', { type: 'number', min: 1, value: '16' });
  const paste = h('textarea#mc-paste.mono', { rows: 3, placeholder: 'Paste a config.json here' });
  const msg = h('div.small');
  const out = h('div#mc-out.result');

  const update = (): void => {
    const s = Object.fromEntries(SHAPE_FIELDS.map(([k]) => [k, Number(inputs[k]!.value)])) as unknown as ModelShape;
    s.tie = tie.checked;
    if (SHAPE_FIELDS.some(([k]) => !(Number(s[k]) > 0))) return replace(out, h('span.error', 'every shape field must be a positive number'));
    const e = estimateMemory(s, { dtype: dtype.value as WeightDtype, kv: kv.value as KvDtype, contextLength: Number(ctx.value), batch: Number(batch.value) });
    const row = (k: string, v: string, id: string): HTMLElement => h('div', h('span.muted', k), h(`strong#${id}`, v));
    replace(
      out,
      row('Parameters', e.params.toLocaleString(), 'mc-params'),
      row('Weights', fmtBytes(e.weightBytes), 'mc-weights'),
      row('KV per token', fmtBytes(e.kvBytesPerToken), 'mc-kv-token'),
      row('KV cache', fmtBytes(e.kvBytes), 'mc-kv'),
      row('Total', fmtBytes(e.totalBytes), 'mc-total'),
    );
  };

  const setConfig = (c: Record<string, unknown>): void => {
    try {
      const s = shapeFromConfig(c);
      for (const [k] of SHAPE_FIELDS) inputs[k]!.value = String(s[k]);
      tie.checked = s.tie;
      if (typeof c.max_position_embeddings === 'number') ctx.value = String(c.max_position_embeddings);
      msg.className = 'small muted';
      msg.textContent = 'Shape taken from the config.';
    } catch (e) {
      msg.className = 'small error';
      msg.textContent = (e as Error).message;
    }
    update();
  };
  paste.addEventListener('input', () => {
    if (!paste.value.trim()) return;
    try {
      setConfig(JSON.parse(paste.value) as Record<string, unknown>);
    } catch (e) {
      msg.className = 'small error';
      msg.textContent = `not JSON: ${(e as Error).message}`;
    }
  });

  // The plan of a model on the server's GPU (GET /memory_plan): the same rules the loader applies.
  const model = h('input#mp-model', { type: 'text', placeholder: 'a model directory or .gguf file on the server' });
  const planBtn = h('button#mp-run.primary', { type: 'button' }, 'Plan on the server');
  const planMsg = h('div.small');
  const planOut = h('div#mp-out.result');
  const rows = (rs: [string, string, string][]): HTMLElement[] => rs.map(([k, v, id]) => h('div', h('span.muted', k), h(`strong#${id}`, v)));
  planBtn.addEventListener('click', () => {
    const say = (cls: string, id: string, text: string): void => replace(planMsg, h(`div#${id}.${cls}`, text));
    replace(planOut);
    if (!model.value.trim()) return say('error', 'mp-msg', 'enter a model path');
    say('muted', 'mp-msg', 'planning…');
    const path = planQuery({ model: model.value.trim(), maxContext: Number(ctx.value), maxSeqs: Number(batch.value), dtype: dtype.value, kv: kv.value });
    getJson<ServerPlan>('management', path).then(
      (p) => {
        say('muted', 'mp-fits', 'Fits this device.');
        replace(planOut, ...rows(planRows(p)));
      },
      (e: unknown) => {
        if (e instanceof ApiError && e.code === 'model_too_large') {
          say('error', 'mp-refused', e.message);
          replace(planOut, ...rows(refusalRows(e.details)));
        } else say('error', 'mp-msg', (e as Error).message);
      },
    );
  });

  const el = h(
    'section.card#memory-calc',
    h('h2', 'Memory calculator'),
    h('p.muted.small', 'GPU memory for weights (q8_0 = 34 bytes per 32 weights, q4_0 = 18 per 32; norms stay f32) and the paged KV cache: 2 × layers × KV heads × head dim values per token (f32: 4 bytes each, f16: 2; 8-bit: one byte each plus an f32 scale per head), for context × batch tokens.'),
    field('config.json', paste),
    msg,
    h('div.grid4', SHAPE_FIELDS.map(([k, label]) => field(label, inputs[k]!)), h('label.field.check', tie, h('span', 'Tied embeddings'))),
    h('div.grid4', field('Weights dtype', dtype), field('KV cache', kv), field('Context length', ctx), field('Batch (sequences)', batch)),
    out,
    h('h3', "On this server's GPU"),
    h('p.muted.small', 'The loader’s own plan for a model on the server (from its file headers; nothing is loaded): weights, activations, reserve, the KV pool and the tokens of context it holds, with the settings above — or the refusal, with its numbers, when it cannot fit.'),
    h('div.grid4', field('Model path', model), h('div.field', planBtn)),
    planMsg,
    planOut,
  );
  el.addEventListener('input', (e) => e.target !== paste && update());
  el.addEventListener('change', update);
  update();
  return { el, setConfig };
}

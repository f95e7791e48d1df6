/**
 * Inference playground: pick a consumer group (GET /status) or the in-tab
 * model, write a prompt or chat, set sampling parameters and constraints,
 * and watch the output stream with a live tokens/s readout. Stop cancels on
 * the server (POST /cancel/{x-request-id}) and aborts the stream.
 * Image readers (and an in-tab LLaVA) take attachments: each file is read as
 * a data URL and a short `<image:name>` tag goes into the prompt at the
 * cursor; at send time the tags become `<image:data:...>` and the request
 * goes to /image_generate_stream (in the tab: GenerateRequest.images).
 */
import { dataUrlBytes, imageUrls, mapImageTags } from '../../../core/images/prompt.ts';
import type { ChatMessage } from '../../../core/tokenizer/chat_template.ts';
import { apiFetch, getJson, type Status } from '../api.ts';
import { browserModel, onBrowserModel } from '../browser_mode.ts';
import { field, h, replace } from '../dom.ts';
import { browserGenerate, streamChat, streamGenerate, toReaderRequest, type ChatTurn, type Params, type Run, type Usage } from '../generation.ts';
import { browserPanel } from './browser_panel.ts';
import type { Page } from './page.ts';

const BROWSER = '__browser__';

const num = (placeholder: string, attrs: Record<string, unknown> = {}): HTMLInputElement => h('input', { type: 'number', placeholder, ...attrs });

export function playgroundPage(): Page {
  // --- target and mode ---
  const target = h('select#pg-target');
  const mode = h('select#pg-mode', h('option', { value: 'prompt' }, 'Prompt'), h('option', { value: 'chat' }, 'Chat'));
  const refresh = h('button.link', { type: 'button', title: 'Reload groups' }, '↻');
  let chatOnServer = false;

  // --- prompt / chat inputs ---
  const prompt = h('textarea#pg-prompt', { rows: 5, placeholder: 'Once upon a time' }, 'Once upon a time');
  const system = h('textarea#pg-system', { rows: 2, placeholder: 'System prompt (optional)' });
  const transcript = h('div#pg-transcript.transcript');
  const chatInput = h('textarea#pg-chat-input', { rows: 3, placeholder: 'Message' });
  const clearChat = h('button.link', { type: 'button' }, 'Clear conversation');
  const history: ChatTurn[] = [];
  const promptBox = h('div', field('Prompt', prompt));
  const chatBox = h('div', field('System', system), field('Message', chatInput));
  const chatNote = h('p.muted.small');

  // --- parameters ---
  const P = {
    max_new_tokens: num('128', { id: 'pg-max', min: 1, value: '128' }),
    min_new_tokens: num('0', { id: 'pg-min', min: 0 }),
    sampling_temperature: num('0 = greedy', { id: 'pg-temp', min: 0, step: 0.05, value: '0' }),
    sampling_topk: num('off', { id: 'pg-topk', min: 0 }),
    sampling_topp: num('1.0', { id: 'pg-topp', min: 0.01, max: 1, step: 0.01 }),
    repetition_penalty: num('1.0', { id: 'pg-rep', min: 0.01, step: 0.05 }),
    seed: num('random', { id: 'pg-seed', min: 0 }),
  };
  const stop = h('textarea#pg-stop', { rows: 2, placeholder: 'one stop string per line' });
  const schema = h('textarea#pg-schema.mono', { rows: 4, placeholder: '{"type": "object", "properties": {...}}' });
  const regex = h('input#pg-regex.mono', { placeholder: '[A-Z][a-z]+' });
  const backend = h('select#pg-backend', h('option', { value: '' }, 'native (default)'), h('option', { value: 'outlines' }, 'outlines'));
  const images = h('input#pg-images', { type: 'file', accept: 'image/png,image/jpeg', multiple: true, disabled: true });
  const imagesNote = h('p.muted.small#pg-images-note');
  /** Attachment name (as in its `<image:name>` tag) -> data URL. */
  const attachments = new Map<string, string>();
  const imageGroups = new Set<string>();
  const withImages = (text: string): string => text.replace(/<image:([^\s<>]+)>/g, (m, n: string) => (attachments.has(n) ? `<image:${attachments.get(n)}>` : m));
  images.addEventListener('change', () => {
    for (const f of [...(images.files ?? [])]) {
      const rd = new FileReader();
      rd.onload = () => {
        let name = f.name.replace(/[\s<>]/g, '_') || 'image';
        for (let i = 2; attachments.has(name); i++) name = `${i}-${name}`;
        attachments.set(name, String(rd.result));
        const at = prompt.selectionStart ?? prompt.value.length;
        prompt.value = `${prompt.value.slice(0, at)}<image:${name}>${prompt.value.slice(at)}`;
        sync();
      };
      rd.readAsDataURL(f);
    }
    images.value = '';
  });
  const formError = h('div#pg-form-error.error');

  // --- run controls and output ---
  const go = h('button#pg-generate.primary', { type: 'button' }, 'Generate');
  const stopBtn = h('button#pg-stop-btn.danger', { type: 'button', disabled: true }, 'Stop');
  const out = h('div#pg-output.output');
  const tps = h('span#pg-tps', '—');
  const count = h('span#pg-count', '0');
  const finish = h('span#pg-finish', '—');
  const usage = h('span#pg-usage.muted');
  const rid = h('span#pg-rid.muted.mono');
  const ids = h('pre#pg-ids.mono', '[]');
  const transcriptBox = h('div.transcript-box', transcript, h('div.row.spread', h('span.muted.small', 'The whole conversation is sent with each message.'), clearChat));

  const params = (): Params => {
    const p: Params = {};
    for (const [k, input] of Object.entries(P)) if (input.value.trim() !== '') (p as Record<string, number>)[k] = Number(input.value);
    const stops = stop.value.split('\n').filter((s) => s.length > 0);
    if (stops.length) p.stop = stops;
    if (schema.value.trim()) {
      try {
        p.json_schema = JSON.parse(schema.value);
      } catch (e) {
        throw new Error(`JSON schema: ${(e as Error).message}`);
      }
    }
    if (regex.value) p.regex_string = regex.value;
    if (p.json_schema !== undefined && p.regex_string !== undefined) throw new Error('give a JSON schema or a regex, not both');
    if (backend.value) p.constrained_decoding_backend = backend.value;
    return p;
  };

  const sync = (): void => {
    const inTab = target.value === BROWSER;
    const chatOk = inTab || chatOnServer;
    if (!chatOk && mode.value === 'chat') mode.value = 'prompt';
    (mode.querySelector('option[value=chat]') as HTMLOptionElement).disabled = !chatOk;
    chatNote.textContent = chatOk ? (mode.value === 'chat' ? 'Chat uses the model’s chat template (ChatML when it has none). Regex constraints apply to prompts only.' : '') : 'Chat needs /v1/chat/completions, which this server does not offer: prompt mode only.';
    promptBox.hidden = mode.value !== 'prompt';
    chatBox.hidden = mode.value !== 'chat';
    // The Output card shows the transcript in chat mode, the prompt's continuation otherwise.
    out.hidden = mode.value === 'chat';
    transcriptBox.hidden = mode.value !== 'chat';
    regex.disabled = mode.value === 'chat' && !inTab;
    const imageOk = mode.value === 'prompt' && (inTab ? !!browserModel()?.info.imageInput : imageGroups.has(target.value));
    images.disabled = !imageOk;
    imagesNote.textContent = imageOk
      ? `Each file adds an <image:name> tag at the cursor (PNG or JPEG).${attachments.size ? ` Attached: ${[...attachments.keys()].join(', ')}.` : ''}`
      : 'For image-to-text readers (e.g. LLaVA), in Prompt mode: this target takes text only.';
  };
  mode.addEventListener('change', sync);
  target.addEventListener('change', sync);

  const loadTargets = async (): Promise<void> => {
    const keep = target.value;
    const opts: HTMLOptionElement[] = [];
    const bm = browserModel();
    if (bm) opts.push(h('option', { value: BROWSER }, `This tab · ${bm.info.model} (WebGPU)`));
    try {
      const st = await getJson<Status>('inference', 'status');
      imageGroups.clear();
      for (const [g, readers] of Object.entries(st.groups)) {
        const ready = readers.filter((r) => r.ready).length;
        if (readers.some((r) => (r as { image_input?: boolean }).image_input)) imageGroups.add(g);
        opts.push(h('option', { value: g, disabled: ready === 0 }, `${g} · ${ready}/${readers.length} ready`));
      }
      formError.textContent = '';
    } catch (e) {
      if (!bm) formError.textContent = (e as Error).message;
    }
    if (!opts.length) opts.push(h('option', { value: '', disabled: true }, 'no consumer groups'));
    replace(target, opts);
    if ([...target.options].some((o) => o.value === keep && !o.disabled)) target.value = keep;
    else target.value = [...target.options].find((o) => !o.disabled)?.value ?? '';
    sync();
  };
  refresh.addEventListener('click', () => void loadTargets());
  void apiFetch('inference', 'v1/models')
    .then(() => (chatOnServer = true))
    .catch(() => (chatOnServer = false))
    .finally(sync);
  const offModel = onBrowserModel((m) => {
    void loadTargets().then(() => {
      if (m) (target.value = BROWSER), sync();
    });
  });
  // --- running ---
  let run: Run | null = null;
  clearChat.addEventListener('click', () => ((history.length = 0), replace(transcript)));

  const start = (): void => {
    formError.textContent = '';
    let p: Params;
    try {
      p = params();
    } catch (e) {
      formError.textContent = (e as Error).message;
      return;
    }
    const group = target.value;
    if (!group) return void (formError.textContent = 'choose a consumer group (or load a model in this tab)');
    const chat = mode.value === 'chat';
    let outEl: HTMLElement = out;
    let messages: ChatTurn[] = [];
    if (chat) {
      const text = chatInput.value.trim();
      if (!text) return void (formError.textContent = 'type a message');
      history.push({ role: 'user', content: text });
      transcript.append(h('div.msg.user', text));
      outEl = h('div.msg.assistant');
      transcript.append(outEl);
      chatInput.value = '';
      messages = [...(system.value.trim() ? [{ role: 'system' as const, content: system.value.trim() }] : []), ...history];
    } else {
      replace(out, h('span.prompt', prompt.value));
    }
    const gen = h('span.gen');
    outEl.append(gen);
    const tokenIds: number[] = [];
    let n = 0;
    let first = 0;
    let reply = '';
    count.textContent = '0';
    tps.textContent = '—';
    finish.textContent = '…';
    finish.className = '';
    usage.textContent = '';
    rid.textContent = '';
    ids.textContent = '[]';
    go.disabled = true;
    stopBtn.disabled = false;
    const sink = {
      started: (id: string | null) => void (rid.textContent = id ? `request ${id}` : ''),
      token: (text: string, id: number | null) => {
        const now = performance.now();
        if (!n) first = now;
        n++;
        reply += text;
        gen.append(text);
        if (id !== null) tokenIds.push(id);
        count.textContent = String(n);
        if (n > 1) tps.textContent = ((n - 1) / ((now - first) / 1000)).toFixed(1);
        const box = chat ? transcript : out;
        box.scrollTop = box.scrollHeight;
      },
      done: (reason: string, u: Usage | null) => {
        finish.textContent = reason;
        finish.className = `finish-${reason}`;
        if (u) usage.textContent = `prompt ${u.prompt_tokens} · completion ${u.completion_tokens}${u.cached_tokens ? ` · cached ${u.cached_tokens}` : ''}`;
        ids.textContent = JSON.stringify(tokenIds);
        if (chat) history.push({ role: 'assistant', content: reply });
      },
      error: (m: string) => {
        finish.textContent = 'error';
        finish.className = 'finish-error';
        formError.textContent = m;
        ids.textContent = JSON.stringify(tokenIds);
        if (chat) history.pop(), outEl.classList.add('failed');
      },
    };
    const bm = browserModel();
    if (group === BROWSER) {
      if (!bm) return void (formError.textContent = 'the in-tab model was unloaded');
      try {
        const text = withImages(prompt.value);
        const urls = chat ? [] : imageUrls(text);
        const req = toReaderRequest(chat ? { messages: messages as ChatMessage[] } : urls.length ? mapImageTags(text, (_, k) => `<image:#${k}>`) : text, p);
        if (urls.length) req.images = urls.map(dataUrlBytes);
        run = browserGenerate(bm, req, sink);
      } catch (e) {
        sink.error((e as Error).message);
      }
    } else {
      const text = withImages(prompt.value);
      run = chat ? streamChat(group, messages, p, sink) : streamGenerate(group, text, p, sink, imageGroups.has(group) && imageUrls(text).length ? 'image_generate_stream' : 'generate_stream');
    }
    void (run?.finished ?? Promise.resolve()).finally(() => {
      run = null;
      go.disabled = false;
      stopBtn.disabled = true;
    });
  };
  go.addEventListener('click', start);
  stopBtn.addEventListener('click', () => {
    stopBtn.disabled = true;
    void run?.stop();
  });
  for (const t of [prompt, chatInput]) t.addEventListener('keydown', (e) => e.key === 'Enter' && (e.ctrlKey || e.metaKey) && !go.disabled && start());

  const el = h(
    'div.page.playground',
    h(
      'div.col.main',
      h(
        'section.card',
        h('div.row', field('Run on (consumer group)', target), field('Mode', mode), refresh),
        chatNote,
        promptBox,
        chatBox,
        h('div.row', go, stopBtn, h('span.muted.small', 'Ctrl+Enter to run')),
        formError,
      ),
      h(
        'section.card',
        h('h2', 'Output'),
        h('div.stats', h('span', 'tokens ', count), h('span', 'tok/s ', tps), h('span', 'finish ', finish), usage, rid),
        out,
        transcriptBox,
        h('details', h('summary', 'Token ids'), ids),
      ),
      browserPanel(),
    ),
    h(
      'div.col.side',
      h(
        'section.card',
        h('h2', 'Parameters'),
        h(
          'div.grid2',
          field('Max new tokens', P.max_new_tokens),
          field('Min new tokens', P.min_new_tokens),
          field('Temperature', P.sampling_temperature),
          field('Top-k', P.sampling_topk),
          field('Top-p', P.sampling_topp),
          field('Repetition penalty', P.repetition_penalty),
          field('Seed', P.seed),
        ),
        field('Stop strings', stop),
      ),
      h(
        'section.card',
        h('h2', 'Constraints'),
        field('JSON schema', schema, 'json_schema: the output must be JSON matching it ({} = any object).'),
        field('Regex', regex, 'regex_string: the whole output must match.'),
        field('Backend', backend, 'constrained_decoding_backend'),
      ),
      h(
        'section.card',
        h('h2', 'Images'),
        field('Attachments', images),
        imagesNote,
      ),
    ),
  );
  sync();
  void offModel; // the playground lives as long as the app
  return { el, show: () => void loadTargets() };
}

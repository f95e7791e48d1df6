/**
 * Chat templates: render a conversation into a prompt string with the
 * model's own Jinja template, via @huggingface/jinja.
 *
 * Mirrors what transformers' `apply_chat_template` passes to the template:
 * `messages`, `add_generation_prompt`, `tools`, `documents`, the special-token
 * strings (`bos_token`, `eos_token`, ...), `raise_exception` and
 * `strftime_now`, plus caller extras (e.g. `enable_thinking`). Named templates
 * (the list form `[{name, template}]` of `chat_template`) are selected the
 * same way: explicit name, else `tool_use` when tools are given, else
 * `default`. Failures are `InvalidRequestError('chat_template_error')`; a
 * model without a template is an error too, never a silent ChatML fallback
 * (callers that want one pass `DEFAULT_CHATML_TEMPLATE` explicitly).
 */
import { Environment, Interpreter, Template } from '@huggingface/jinja';
import { InvalidRequestError, ModelFormatError } from '../errors.ts';

/** One chat message; extra fields (tool_calls, name, reasoning_content...) reach the template unchanged. */
export interface ChatMessage {
  role: string;
  content?: string | null | ReadonlyArray<Record<string, unknown>>;
  [key: string]: unknown;
}

export interface ChatTemplateOptions {
  addGenerationPrompt?: boolean;
  tools?: unknown[];
  /** Pick a named template (e.g. 'tool_use', 'rag'). */
  templateName?: string;
  /** Extra template variables (enable_thinking, date_string, documents, ...). */
  extra?: Record<string, unknown>;
}

/**
 * The ChatML template transformers used as its historical default. Never
 * applied implicitly; pass it as an explicit choice for template-less models.
 */
export const DEFAULT_CHATML_TEMPLATE =
  "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}" +
  "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

/**
 * Normalise every on-disk shape of `chat_template` into name -> source:
 * a string (-> `default`), a list of `{name, template}`, or a plain
 * `{name: template}` map. `null`/`undefined` give an empty map.
 */
export function normalizeChatTemplates(raw: unknown): Map<string, string> {
  const out = new Map<string, string>();
  if (raw === null || raw === undefined) return out;
  if (typeof raw === 'string') {
    out.set('default', raw);
    return out;
  }
  if (Array.isArray(raw)) {
    for (const item of raw) {
      const rec = item as { name?: unknown; template?: unknown } | null;
      if (!rec || typeof rec.name !== 'string' || typeof rec.template !== 'string') {
        throw new ModelFormatError('chat_template list entries must be {name, template} strings');
      }
      out.set(rec.name, rec.template);
    }
    return out;
  }
  if (typeof raw === 'object') {
    for (const [name, template] of Object.entries(raw as Record<string, unknown>)) {
      if (typeof template !== 'string') {
        throw new ModelFormatError(`chat_template "${name}" is not a string`);
      }
      out.set(name, template);
    }
    return out;
  }
  throw new ModelFormatError(`chat_template has unsupported type ${typeof raw}`);
}

/** Thrown by the template's own `raise_exception(...)`; converted before leaving this module. */
class TemplateRaised extends Error {}

export class ChatTemplates {
  private readonly compiled = new Map<string, Template>();

  /**
   * @param templates name -> Jinja source (see `normalizeChatTemplates`).
   * @param specialTokens strings exposed to the template (bos_token, eos_token, ...).
   */
  constructor(
    private readonly templates: ReadonlyMap<string, string>,
    private readonly specialTokens: Readonly<Record<string, unknown>>,
  ) {}

  get hasTemplate(): boolean {
    return this.templates.size > 0;
  }

  get names(): string[] {
    return [...this.templates.keys()];
  }

  /**
   * Pick the template source following transformers' `get_chat_template`
   * rules (name, else `tool_use` with tools, else `default`); a lone template
   * under another name is used as the default.
   */
  select(templateName?: string, hasTools = false): { name: string; source: string } {
    if (this.templates.size === 0) {
      throw new InvalidRequestError(
        'chat_template_error',
        'this model has no chat template; send a raw prompt or choose a template explicitly',
        { reason: 'missing' },
      );
    }
    let name: string | undefined = templateName;
    if (name === undefined) {
      if (hasTools && this.templates.has('tool_use')) name = 'tool_use';
      else if (this.templates.has('default')) name = 'default';
      else if (this.templates.size === 1) name = this.names[0];
    }
    const source = name === undefined ? undefined : this.templates.get(name);
    if (name === undefined || source === undefined) {
      throw new InvalidRequestError(
        'chat_template_error',
        name === undefined
          ? `no default chat template; choose one of: ${this.names.join(', ')}`
          : `unknown chat template "${name}"; valid: ${this.names.join(', ')}`,
        { reason: 'unknown_template', valid: this.names },
      );
    }
    return { name, source };
  }

  render(messages: readonly ChatMessage[], opts: ChatTemplateOptions = {}): string {
    const { name, source } = this.select(opts.templateName, (opts.tools?.length ?? 0) > 0);
    return renderChatTemplate(source, messages, opts, this.specialTokens, this.compiledFor(name, source));
  }

  private compiledFor(name: string, source: string): Template {
    let t = this.compiled.get(name);
    if (!t) {
      t = compileTemplate(source);
      this.compiled.set(name, t);
    }
    return t;
  }
}

function compileTemplate(source: string): Template {
  try {
    return new Template(source);
  } catch (e) {
    throw new InvalidRequestError('chat_template_error', `chat template failed to parse: ${errText(e)}`, {
      reason: 'parse',
    });
  }
}

/**
 * Render one template source. `compiled` lets callers reuse a parsed
 * template; otherwise the source is parsed on every call.
 */
export function renderChatTemplate(
  source: string,
  messages: readonly ChatMessage[],
  opts: ChatTemplateOptions = {},
  specialTokens: Readonly<Record<string, unknown>> = {},
  compiled?: Template,
): string {
  if (!Array.isArray(messages)) {
    throw new InvalidRequestError('chat_template_error', 'messages must be an array', { reason: 'input' });
  }
  const template = compiled ?? compileTemplate(source);
  // Globals live in a parent scope so caller extras may shadow them
  // (`Template.render` would refuse to redeclare e.g. strftime_now).
  const globals = new Environment();
  for (const [k, v] of Object.entries({ true: true, false: false, none: null, True: true, False: false, None: null })) {
    globals.set(k, v);
  }
  globals.set('range', range);
  globals.set('strftime_now', strftimeNow);
  globals.set('raise_exception', (message?: unknown) => {
    throw new TemplateRaised(String(message ?? 'raise_exception called'));
  });
  const scope = new Environment(globals);
  const vars: Record<string, unknown> = {
    documents: null,
    ...specialTokens,
    ...(opts.extra ?? {}),
    messages,
    tools: opts.tools ?? null,
    add_generation_prompt: opts.addGenerationPrompt ?? false,
  };
  for (const [k, v] of Object.entries(vars)) scope.set(k, v);
  try {
    const out = new Interpreter(scope).run(template.parsed);
    return String(out.value);
  } catch (e) {
    if (e instanceof TemplateRaised) {
      throw new InvalidRequestError('chat_template_error', `chat template rejected the request: ${e.message}`, {
        reason: 'raised',
      });
    }
    throw new InvalidRequestError('chat_template_error', `chat template failed to render: ${errText(e)}`, {
      reason: 'render',
    });
  }
}

function range(start: number, stop?: number, step = 1): number[] {
  if (stop === undefined) [start, stop] = [0, start];
  if (step === 0) throw new Error('range() step must not be zero');
  const out: number[] = [];
  for (let i = start; step > 0 ? i < stop : i > stop; i += step) out.push(i);
  return out;
}

/** Python-style `strftime` subset used by chat templates (Llama 3.x: "%d %b %Y"). */
function strftimeNow(format: unknown): string {
  const d = new Date();
  const months = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];
  const longMonths = ['January', 'February', 'March', 'April', 'May', 'June', 'July', 'August', 'September',
    'October', 'November', 'December'];
  const days = ['Sunday', 'Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday'];
  const p2 = (n: number) => String(n).padStart(2, '0');
  return String(format).replace(/%[YmdbBHMSaAyp%]/g, (t) => {
    switch (t) {
      case '%Y': return String(d.getFullYear());
      case '%y': return p2(d.getFullYear() % 100);
      case '%m': return p2(d.getMonth() + 1);
      case '%d': return p2(d.getDate());
      case '%b': return months[d.getMonth()] ?? '';
      case '%B': return longMonths[d.getMonth()] ?? '';
      case '%a': return (days[d.getDay()] ?? '').slice(0, 3);
      case '%A': return days[d.getDay()] ?? '';
      case '%H': return p2(d.getHours());
      case '%M': return p2(d.getMinutes());
      case '%S': return p2(d.getSeconds());
      case '%p': return d.getHours() < 12 ? 'AM' : 'PM';
      default: return '%';
    }
  });
}

function errText(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

/**
 * A tiny element builder: `h('div.card', {onclick}, 'text', child)`. Keeps the
 * pages plain DOM without a framework. Strings become text nodes (never
 * HTML), so server data can be shown safely.
 */
export type Child = Node | string | number | null | undefined | false | Child[];
type Props = Record<string, unknown>;

/** 'button#id.cls' -> 'button' */
type TagOf<S extends string> = S extends `${infer T}.${string}` ? TagOf<T> : S extends `${infer T}#${string}` ? TagOf<T> : S;
type ElementOf<S extends string> = TagOf<S> extends keyof HTMLElementTagNameMap ? HTMLElementTagNameMap[TagOf<S>] : HTMLElement;

export function h<S extends string>(tag: S, props?: Props | Child, ...children: Child[]): ElementOf<S> {
  const [head, ...rest] = tag.split(/(?=[.#])/);
  const el = document.createElement(head!) as ElementOf<S>;
  for (const part of rest) {
    if (part.startsWith('.')) el.classList.add(part.slice(1));
    else el.id = part.slice(1);
  }
  if (props !== undefined && props !== null && (typeof props !== 'object' || props instanceof Node || Array.isArray(props))) children.unshift(props as Child);
  else if (props) setProps(el, props as Props);
  append(el, children);
  return el;
}

function setProps(el: HTMLElement, props: Props): void {
  for (const [k, v] of Object.entries(props)) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v as EventListener);
    else if (k === 'class') el.className = String(v);
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else if (k === 'style' && typeof v === 'object') Object.assign(el.style, v);
    else if (k in el && k !== 'list' && k !== 'form') (el as unknown as Record<string, unknown>)[k] = v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
}

export function append(el: Node, children: Child[]): void {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.appendChild(typeof c === 'object' ? c : document.createTextNode(String(c)));
  }
}

/** Replaces all children of `el`. */
export function replace(el: Element, ...children: Child[]): void {
  el.replaceChildren();
  append(el, children);
}

/** A labelled form row: `<label><span>Label</span>control</label>`. */
export function field(label: string, control: HTMLElement, hint?: string): HTMLLabelElement {
  return h('label.field', h('span', label), control, hint ? h('small', hint) : null);
}

export const fmtBytes = (n: number): string => {
  if (!Number.isFinite(n)) return '—';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (Math.abs(n) >= 1024 && i < units.length - 1) (n /= 1024), i++;
  return `${i === 0 ? n : n.toFixed(n < 10 ? 2 : 1)} ${units[i]}`;
};

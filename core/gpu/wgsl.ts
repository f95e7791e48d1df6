/**
 * A small WGSL preprocessor for kernel variants.
 *
 * Directives, one per line: `#if EXPR`, `#elif EXPR`, `#else`, `#endif`, where
 * EXPR is `NAME`, `!NAME`, `NAME == VALUE`, `NAME != VALUE`, joined by `&&` or
 * `||` (no parentheses; `&&` binds tighter), and `#include NAME`, which inserts the
 * shader file NAME (shaders/NAME.wgsl; by convention a `_`-prefixed part of a larger
 * kernel, never compiled alone) preprocessed with the same defines — WGSL has no
 * imports, and kernels that share helpers or are too long for one file use it.
 * `{{NAME}}` anywhere in a line is
 * replaced by the define's value (used for types like `f32`/`f16` and for
 * workgroup sizes). Numeric tuning should prefer WGSL `override` constants;
 * this exists for what overrides cannot vary: types, `enable` lines, bodies.
 */
export type Defines = Readonly<Record<string, string | number | boolean>>;

function truthy(v: string | number | boolean | undefined): boolean {
  return v !== undefined && v !== false && v !== 0 && v !== '' && v !== '0' && v !== 'false';
}

function evalAtom(atom: string, defs: Defines): boolean {
  const a = atom.trim();
  const m = /^([A-Za-z_]\w*)\s*(==|!=)\s*(\S+)$/.exec(a);
  if (m) {
    const v = String(defs[m[1]!] ?? '');
    return m[2] === '==' ? v === m[3] : v !== m[3];
  }
  if (a.startsWith('!')) return !truthy(defs[a.slice(1).trim()]);
  if (!/^[A-Za-z_]\w*$/.test(a)) throw new Error(`wgsl preprocessor: bad condition "${atom}"`);
  return truthy(defs[a]);
}

export function evalCondition(expr: string, defs: Defines): boolean {
  return expr.split('||').some((conj) => conj.split('&&').every((atom) => evalAtom(atom, defs)));
}

/** Source of an `#include`d file by name, or undefined when there is none. */
export type IncludeResolver = (name: string) => string | undefined;

/**
 * Expands directives and `{{NAME}}` placeholders; throws on unbalanced or misordered blocks,
 * unknown placeholders, and includes that are unknown, lack a resolver or nest more than
 * 8 deep (a cycle).
 */
export function preprocess(source: string, defs: Defines, include?: IncludeResolver, depth = 0): string {
  // Stack of frames: active = this branch emits; taken = some branch of this #if already emitted.
  const stack: { active: boolean; taken: boolean; parent: boolean; sawElse: boolean }[] = [];
  const active = (): boolean => (stack.length ? stack[stack.length - 1]!.active : true);
  const out: string[] = [];
  for (const line of source.split('\n')) {
    const t = line.trim();
    const d = /^#(if|elif|else|endif)\b\s*(.*)$/.exec(t);
    if (d) {
      const [, kind, rest] = d;
      if (kind === 'if') {
        const parent = active();
        const c = parent && evalCondition(rest!, defs);
        stack.push({ active: c, taken: c, parent, sawElse: false });
      } else {
        const f = stack[stack.length - 1];
        if (!f) throw new Error(`wgsl preprocessor: #${kind} without #if`);
        if (f.sawElse && kind !== 'endif') throw new Error(`wgsl preprocessor: #${kind} after #else`);
        if (kind === 'elif') {
          const c = f.parent && !f.taken && evalCondition(rest!, defs);
          f.active = c;
          f.taken ||= c;
        } else if (kind === 'else') {
          f.active = f.parent && !f.taken;
          f.taken = true;
          f.sawElse = true;
        } else stack.pop();
      }
      continue;
    }
    if (!active()) continue;
    const inc = /^#include\s+(\w+)$/.exec(t);
    if (inc) {
      const name = inc[1]!;
      const src = include?.(name);
      if (src === undefined) throw new Error(`wgsl preprocessor: cannot #include ${name}`);
      if (depth >= 8) throw new Error(`wgsl preprocessor: #include ${name} nests more than 8 deep`);
      out.push(preprocess(src, defs, include, depth + 1));
      continue;
    }
    out.push(
      line.replace(/\{\{(\w+)\}\}/g, (_, name: string) => {
        const v = defs[name];
        if (v === undefined) throw new Error(`wgsl preprocessor: undefined placeholder {{${name}}}`);
        return String(v);
      }),
    );
  }
  if (stack.length) throw new Error('wgsl preprocessor: unterminated #if');
  return out.join('\n');
}

/**
 * JSON Schema → pattern AST (plus named rules for recursion).
 *
 * Each subschema is first expanded into disjunctive normal form: a list of
 * plain keyword records, one per way of satisfying it ($ref inlined, allOf
 * merged, anyOf/oneOf distributed over their siblings). Each record then
 * compiles by type: literals, exact numeric ranges, strings (length, pattern,
 * format), arrays (prefixItems/items/min/maxItems, unrolled), objects (schema
 * property order, required always present, optional ones optional, extra keys
 * only when additionalProperties allows them — or for a bare object — and
 * never colliding with declared names). A $ref that reaches itself is
 * recursive: with `recursion: 'rules'` (native backend) it becomes a `call`
 * to a named rule compiled once (a pushdown automaton runs it); with
 * `'refuse'` (outlines backend, a regular expression) it is rejected. A nested
 * `{}` means any JSON value: a recursive rule natively, a depth-limited
 * expansion for outlines. A top-level `{}` means any JSON object.
 */
import { type Node, type ObjProp, alt, EPS, fail, hasCall, lit, NONE, opt, ptr, rep, seq } from './ast.ts';
import { Dfa } from './dfa.ts';
import { colonAst, JSON_CHAR, keyExcluding, sepAst, stringAst, valueAst, type Whitespace } from './json_text.ts';
import {
  constrains, emptyPlain, inferTypes, isSchema, merge, normalize, type Plain, type Sub, typeAllows, typeOfValue,
} from './keywords.ts';
import { buildNfa, trim } from './nfa.ts';
import { integerAst, numberAst } from './numeric.ts';
import { excludes, genOfPlain } from './oneof.ts';

export interface SchemaOptions {
  readonly ws: Whitespace;
  /** 'rules': recursive $refs become rule calls; 'refuse': they are an error. */
  readonly recursion: 'rules' | 'refuse';
}

export interface GrammarAst {
  readonly root: Node;
  /** Rule name → body, for every rule the root (transitively) calls. */
  readonly rules: ReadonlyMap<string, Node>;
}

export const ANY_RULE = '$any';
const OUTLINES_ANY_DEPTH = 2;
const MAX_TERMS = 256;

/** A DNF term: a plain keyword record, or a call of a recursive rule. */
interface Term {
  plain: Plain;
  stack: readonly string[];
  call?: string;
  tags: ReadonlyArray<{ branches: readonly unknown[]; path: string; index: number }>;
}

class Restart {
  constructor(readonly ref: string) {}
}

/** Compiles a JSON Schema; throws InvalidRequestError for invalid or unsupported schemas. */
export function schemaToAst(schema: unknown, opts: SchemaOptions): GrammarAst {
  const recursive = new Set<string>();
  for (;;) {
    try {
      return new SchemaCompiler(schema, opts, recursive).run();
    } catch (e) {
      if (!(e instanceof Restart)) throw e;
      recursive.add(e.ref);
    }
  }
}

class SchemaCompiler {
  private readonly rules = new Map<string, Node>();
  private readonly pending: string[] = [];
  private unsat: string | null = null;
  private readonly sep: Node;
  private readonly colon: Node;

  constructor(
    private readonly root: unknown,
    private readonly opts: SchemaOptions,
    private readonly recursive: ReadonlySet<string>,
  ) {
    this.sep = sepAst(opts.ws);
    this.colon = colonAst(opts.ws);
  }

  run(): GrammarAst {
    const r = this.root;
    if (!isSchema(r)) fail('invalid_schema', 'a JSON Schema must be an object or a boolean', '', 'json_schema');
    const bare = r === true || (typeof r === 'object' && this.isBare(r as Record<string, unknown>));
    const root = bare ? this.objectAst({ ...emptyPlain(''), types: new Set(['object']) }, []) : this.compile(r, '', []);
    while (this.pending.length) {
      const name = this.pending.pop()!;
      if (this.rules.has(name)) continue;
      this.rules.set(name, NONE); // placeholder against re-entry
      this.rules.set(name, name === ANY_RULE ? this.anyBody({ t: 'call', rule: ANY_RULE }) : this.compile(this.at(name.slice(1)), name.slice(1), [name]));
    }
    if (root.t === 'none') fail('invalid_schema', 'no JSON value satisfies this schema', this.unsat ?? '', 'json_schema');
    return { root, rules: this.rules };
  }

  private isBare(o: Record<string, unknown>): boolean {
    return !constrains(normalize(o, '')) && o.$ref === undefined && o.allOf === undefined && o.anyOf === undefined && o.oneOf === undefined;
  }

  // ---- $ref ------------------------------------------------------------------

  /** Resolves a raw `$ref` ("#/..." URI fragment) in this document. */
  private resolve(ref: string): unknown {
    if (!ref.startsWith('#')) return undefined;
    try {
      return this.at(decodeURIComponent(ref.slice(1)));
    } catch {
      return undefined;
    }
  }

  /** Resolves an (already URI-decoded) JSON pointer. */
  private at(pointer: string): unknown {
    if (pointer === '') return this.root;
    if (!pointer.startsWith('/')) return undefined;
    let cur: unknown = this.root;
    for (const raw of pointer.slice(1).split('/')) {
      const seg = raw.replace(/~1/g, '/').replace(/~0/g, '~');
      if (cur === null || typeof cur !== 'object' || !Object.hasOwn(cur, seg)) return undefined;
      cur = (cur as Record<string, unknown>)[seg];
    }
    return cur;
  }

  private ref(ref: string, at: string, stack: readonly string[]): { call: string } | { schema: unknown; path: string; name: string } {
    if (!ref.startsWith('#') || (ref.length > 1 && !ref.startsWith('#/'))) {
      fail('unsupported_schema_keyword', `only local JSON-pointer $refs ("#/...") are supported, got "${ref}"`, at, '$ref');
    }
    const target = this.resolve(ref);
    if (!isSchema(target)) fail('invalid_schema', `$ref "${ref}" does not point to a schema in this document`, at, '$ref');
    const name = '#' + decodeURIComponent(ref.slice(1));
    if (this.recursive.has(name)) {
      this.pending.push(name);
      return { call: name };
    }
    if (stack.includes(name)) {
      if (this.opts.recursion === 'refuse') {
        fail('unsupported_schema_keyword', `recursive $ref "${ref}" cannot be expressed as a regular expression; the outlines backend does not support recursive schemas (use the native backend)`, at, '$ref');
      }
      throw new Restart(name);
    }
    return { schema: target, path: name.slice(1), name };
  }

  // ---- DNF expansion -----------------------------------------------------------

  private expand(schema: unknown, path: string, stack: readonly string[]): Term[] {
    if (schema === true) return [{ plain: emptyPlain(path), stack, tags: [] }];
    if (schema === false) return [];
    if (!isSchema(schema)) fail('invalid_schema', 'a subschema must be an object or a boolean', path, 'type');
    const s = schema as Record<string, unknown>;
    let terms: Term[] = [{ plain: normalize(s, path), stack, tags: [] }];
    for (const k of ['allOf', 'anyOf', 'oneOf']) {
      const v = s[k];
      if (v !== undefined && (!Array.isArray(v) || v.length === 0)) fail('invalid_schema', `${k} must be a non-empty array of schemas`, ptr(path, k), k);
    }
    if (s.$ref !== undefined) {
      if (typeof s.$ref !== 'string') fail('invalid_schema', '$ref must be a string', ptr(path, '$ref'), '$ref');
      const r = this.ref(s.$ref, ptr(path, '$ref'), stack);
      if ('call' in r) {
        if (constrains(terms[0]!.plain) || s.allOf || s.anyOf || s.oneOf) {
          fail('unsupported_schema_keyword', 'a recursive $ref cannot be combined with sibling constraints', ptr(path, '$ref'), '$ref');
        }
        return [{ plain: emptyPlain(path), stack, call: r.call, tags: [] }];
      }
      terms = this.cross(terms, this.expand(r.schema, r.path, [...stack, r.name]), ptr(path, '$ref'));
    }
    (s.allOf as unknown[] | undefined)?.forEach((x, i) => {
      terms = this.cross(terms, this.expand(x, ptr(ptr(path, 'allOf'), i), stack), ptr(path, 'allOf'));
    });
    if (s.anyOf) {
      const list = (s.anyOf as unknown[]).flatMap((x, i) => this.expand(x, ptr(ptr(path, 'anyOf'), i), stack));
      terms = this.cross(terms, list, ptr(path, 'anyOf'));
    }
    if (s.oneOf) {
      const branches = s.oneOf as unknown[];
      const at = ptr(path, 'oneOf');
      const list = branches.flatMap((x, i) =>
        this.expand(x, ptr(at, i), stack).map((t) => ({ ...t, tags: [...t.tags, { branches, path: at, index: i }] })));
      terms = this.cross(terms, list, at);
    }
    return terms;
  }

  private cross(a: Term[], b: Term[], at: string): Term[] {
    const out: Term[] = [];
    for (const x of a) {
      for (const y of b) {
        const m = this.mergeTerms(x, y, at);
        if (m) out.push(m);
        if (out.length > MAX_TERMS) fail('unsupported_schema_keyword', `combining these subschemas yields more than ${MAX_TERMS} alternatives`, at, at.split('/').pop()!);
      }
    }
    return out;
  }

  private mergeTerms(x: Term, y: Term, at: string): Term | null {
    const tags = [...x.tags, ...y.tags];
    if (x.call || y.call) {
      const [c, other] = x.call ? [x, y] : [y, x];
      if (other.call || constrains(other.plain)) fail('unsupported_schema_keyword', 'a recursive $ref cannot be combined with other constraints (allOf)', at, at.split('/').pop()!);
      return { ...c, tags };
    }
    const plain = merge(x.plain, y.plain);
    return plain ? { plain, stack: [...new Set([...x.stack, ...y.stack])], tags } : null;
  }

  // ---- compilation -------------------------------------------------------------

  private compile(schema: unknown, path: string, stack: readonly string[]): Node {
    return this.compileSub({ parts: [{ schema, path }] }, stack);
  }

  private compileSub(sub: Sub, stack: readonly string[]): Node {
    let terms: Term[] | null = null;
    for (const part of sub.parts) {
      const t = this.expand(part.schema, part.path, stack);
      terms = terms ? this.cross(terms, t, part.path) : t;
    }
    for (const t of terms!) this.checkExclusive(t);
    return alt(...terms!.map((t) => this.compileTerm(t)));
  }

  private checkExclusive(t: Term): void {
    if (!t.tags.length) return;
    const target = t.call ? this.at(t.call.slice(1)) : null;
    const opaque = !!target && typeof target === 'object' && ['$ref', 'allOf', 'anyOf', 'oneOf'].some((k) => k in (target as object));
    const gen = genOfPlain(t.call ? (typeof target === 'object' ? normalize(target as Record<string, unknown>, '') : emptyPlain('')) : t.plain, opaque);
    for (const tag of t.tags) {
      tag.branches.forEach((b, j) => {
        if (j !== tag.index && !excludes(gen, b, (r) => this.resolve(r))) {
          fail('unsupported_schema_keyword', `oneOf branches ${tag.index} and ${j} are not provably mutually exclusive (a value could match both); use anyOf, or discriminate them by type, const or required properties`, tag.path, 'oneOf');
        }
      });
    }
  }

  private compileTerm(t: Term): Node {
    if (t.call) return { t: 'call', rule: t.call };
    const p = t.plain;
    const node = p.enumValues ? this.enumAst(t) : this.typedAst(p, t.stack);
    if (node.t === 'none') this.unsat ??= p.path;
    return node;
  }

  private typedAst(p: Plain, stack: readonly string[]): Node {
    const types = p.types ?? inferTypes(p);
    if (!types) return this.anyValue();
    const parts: Node[] = [];
    for (const ty of types) {
      if (ty === 'null') parts.push(lit('null'));
      else if (ty === 'boolean') parts.push(lit('true'), lit('false'));
      else if (ty === 'integer' && !types.has('number')) parts.push(integerAst(p.lower, p.upper));
      else if (ty === 'number') parts.push(numberAst(p.lower, p.upper));
      else if (ty === 'string') parts.push(stringAst(p));
      else if (ty === 'array') parts.push(this.arrayAst(p, stack));
      else if (ty === 'object') parts.push(this.objectAst(p, stack));
    }
    return alt(...parts);
  }

  private enumAst(t: Term): Node {
    const p = t.plain;
    const rest: Plain = { ...p, enumValues: null, types: null };
    let check: ((v: unknown) => boolean) | null = null;
    if (constrains(rest)) {
      const node = this.typedAst({ ...rest, types: p.types }, t.stack);
      if (hasCall(node)) fail('unsupported_schema_keyword', 'enum/const combined with recursive constraints is not supported', ptr(p.path, 'enum'), 'enum');
      const nfa = buildNfa(node, null);
      const ok = trim(nfa, () => false);
      const dfa = new Dfa(nfa);
      check = (v) => {
        if (!ok) return false;
        let s = dfa.start;
        for (const b of new TextEncoder().encode(JSON.stringify(v))) if ((s = dfa.step(s, b)) < 0) return false;
        return dfa.accepting(s);
      };
    }
    const values = p.enumValues!.filter((v) => typeAllows(p.types, typeOfValue(v)) && (!check || check(v)));
    return alt(...values.map((v) => valueAst(v, this.opts.ws)));
  }

  private anyValue(): Node {
    if (this.opts.recursion === 'rules') {
      this.pending.push(ANY_RULE);
      return { t: 'call', rule: ANY_RULE };
    }
    let n = alt(lit('null'), lit('true'), lit('false'), numberAst(null, null), seq(lit('"'), rep(JSON_CHAR, 0, Infinity), lit('"')));
    for (let d = 0; d < OUTLINES_ANY_DEPTH; d++) n = this.anyBody(n);
    return n;
  }

  /** Any JSON value whose nested values are `inner`. */
  private anyBody(inner: Node): Node {
    const list = opt(seq(inner, rep(seq(this.sep, inner), 0, Infinity)));
    return alt(
      lit('null'), lit('true'), lit('false'), numberAst(null, null), seq(lit('"'), rep(JSON_CHAR, 0, Infinity), lit('"')),
      seq(lit('['), list, lit(']')),
      seq(lit('{'), { t: 'obj', props: [], extra: seq(keyExcluding([]), this.colon, inner), sep: this.sep }, lit('}')),
    );
  }

  private arrayAst(p: Plain, stack: readonly string[]): Node {
    const prefix = p.prefix.map((s) => this.compileSub(s, stack));
    const rest = p.items ? this.compileSub(p.items, stack) : this.anyValue();
    const elem = (j: number): Node => prefix[j] ?? rest;
    const min = p.minItems;
    let max = p.maxItems;
    if (rest.t === 'none') max = Math.min(max, prefix.length);
    const firstDead = prefix.findIndex((n) => n.t === 'none');
    if (firstDead >= 0) max = Math.min(max, firstDead);
    if (min > max) return NONE;
    const K = max === Infinity ? Math.max(min, prefix.length) : max;
    let tail: Node = EPS;
    if (max === Infinity) tail = K === 0 ? opt(seq(rest, rep(seq(this.sep, rest), 0, Infinity))) : rep(seq(this.sep, rest), 0, Infinity);
    // Optional items nest (each opt wraps the rest); the required ones form one flat
    // sequence built once, so unrolling stays linear in the item count.
    for (let j = K - 1; j >= min; j--) tail = opt(seq(j > 0 ? this.sep : EPS, elem(j), tail));
    const required: Node[] = [lit('[')];
    for (let j = 0; j < min; j++) required.push(j > 0 ? this.sep : EPS, elem(j));
    return seq(...required, tail, lit(']'));
  }

  private objectAst(p: Plain, stack: readonly string[]): Node {
    const required = new Set(p.required);
    const forbid = p.additional?.parts.some((x) => x.schema === false) ?? false;
    const props: ObjProp[] = [];
    const kv = (name: string, v: Node): Node => seq(lit(JSON.stringify(name)), this.colon, v);
    for (const { name, sub } of p.props) {
      const v = this.compileSub(sub, stack);
      if (v.t === 'none') {
        if (required.has(name)) return NONE;
        continue;
      }
      props.push({ kv: kv(name, v), required: required.has(name) });
    }
    const declared = p.props.map((x) => x.name);
    for (const r of p.required) {
      if (declared.includes(r)) continue;
      if (forbid) return NONE;
      const v = p.additional ? this.compileSub(p.additional, stack) : this.anyValue();
      if (v.t === 'none') return NONE;
      props.push({ kv: kv(r, v), required: true });
    }
    let extraValue: Node | null = null;
    if (p.additional === undefined) extraValue = declared.length || p.required.length ? null : this.anyValue();
    else if (!forbid) extraValue = this.compileSub(p.additional, stack);
    const extra = extraValue && extraValue.t !== 'none' ? seq(keyExcluding([...new Set([...declared, ...p.required])]), this.colon, extraValue) : null;
    return seq(lit('{'), { t: 'obj', props, extra, sep: this.sep }, lit('}'));
  }
}

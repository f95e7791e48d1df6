/**
 * JSON Schema → pattern AST (plus named rules for recursion).
 *
 * Each subschema is first expanded into disjunctive normal form: a list of
 * plain keyword records, one per way of satisfying it ($ref inlined, allOf
 * merged, anyOf/oneOf distributed over their siblings). Each record then
 * compiles by type: literals, exact numeric ranges, strings (length, pattern,
 * format), arrays (prefixItems/items/min/maxItems, unrolled), objects (schema
 * property order, required always present, optional ones optional, then extra
 * keys — open unless additionalProperties forbids them or `strict` closes the
 * object — never colliding with declared names). `not`, `if`/`then`/`else`,
 * the dependency keywords and non-exclusive `oneOf` branches become DNF terms
 * through `negate`, which returns a sound narrowing of a schema's complement
 * (or refuses); docs/structured.md lists what each keyword compiles to. A $ref that reaches itself is
 * recursive: with `recursion: 'rules'` (native backend) it becomes a `call`
 * to a named rule compiled once (a pushdown automaton runs it); with
 * `'refuse'` (outlines backend, a regular expression) it is rejected. A nested
 * `{}` means any JSON value: a recursive rule natively, a depth-limited
 * expansion for outlines. A top-level `{}` means any JSON object.
 */
import { type Node, alt, and, chars, EPS, fail, hasCall, lit, NONE, opt, ptr, rep, seq } from './ast.ts';
import { charge } from './budget.ts';
import { Dfa } from './dfa.ts';
import { closeAst, colonAst, JSON_CHAR, keyExcluding, openAst, sepAst, stringAst, valueAst, type Whitespace } from './json_text.ts';
import {
  constrains, deepEqual, emptyPlain, inferTypes, isIntFormat, isSchema, type JsonType, JSON_TYPES, merge, normalize, patternMatches, type Plain, type Sub,
  tighter, typeAllows, typeOfValue,
} from './keywords.ts';
import { buildNfa, trim } from './nfa.ts';
import { type Bound, integerAst, numberAst } from './numeric.ts';
import { excludes, genOfPlain } from './oneof.ts';
import { SchemaResources, sharedRefs, valueAt } from './resources.ts';

export interface SchemaOptions {
  readonly ws: Whitespace;
  /** 'rules': recursive $refs become rule calls; 'refuse': they are an error. */
  readonly recursion: 'rules' | 'refuse';
  /**
   * OpenAI `strict: true`: an object that declares properties is closed when
   * additionalProperties is absent, and every declared property is required
   * (both narrow what plain JSON Schema accepts). Default: JSON Schema's open objects.
   */
  readonly strict?: boolean;
}

/** Keywords that only annotate: ignored wherever they appear (also inside `not`). */
const ANNOTATIONS = new Set([
  'title', 'description', 'default', 'examples', '$comment', '$id', '$schema', '$anchor', 'deprecated', 'readOnly', 'writeOnly',
  '$defs', 'definitions', 'contentEncoding', 'contentMediaType', 'contentSchema', 'discriminator', 'nullable', 'example', '$vocabulary',
]);
/** Every JSON Schema keyword that constrains (anything else is an unknown keyword, ignored as validators do). */
const VALIDATION = new Set([
  'type', 'const', 'enum', 'required', 'properties', 'additionalProperties', 'patternProperties', 'propertyNames', 'minProperties',
  'maxProperties', 'dependentRequired', 'dependentSchemas', 'dependencies', 'items', 'prefixItems', 'additionalItems', 'contains',
  'minContains', 'maxContains', 'minItems', 'maxItems', 'uniqueItems', 'minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum',
  'multipleOf', 'minLength', 'maxLength', 'pattern', 'format', 'allOf', 'anyOf', 'oneOf', 'not', 'if', 'then', 'else', '$ref',
  'unevaluatedProperties', 'unevaluatedItems', '$dynamicRef', '$recursiveRef',
]);
const NEG_TYPES: readonly JsonType[] = JSON_TYPES;
const DIGIT_NODE: Node = chars([0x30, 0x39]);
/**
 * Numbers that are not integers: a fraction ending in a non-zero digit, at most
 * 7 + 7 digits, so the parsed double cannot round to an integer (a narrowing of
 * the non-integer numbers).
 */
const FRACTIONAL: Node = seq(
  opt(lit('-')), alt(lit('0'), seq(chars([0x31, 0x39]), rep(DIGIT_NODE, 0, 6))), lit('.'), rep(DIGIT_NODE, 0, 6), chars([0x31, 0x39]),
);

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
  const shared = opts.recursion === 'rules' ? sharedRefs(schema) : new Set<string>();
  for (;;) {
    try {
      return new SchemaCompiler(schema, opts, recursive, shared).run();
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
  /** The first sound narrowing that dropped valid values (reported if nothing is left). */
  private narrowing: { path: string; keyword: string; what: string } | null = null;
  private readonly sep: Node;
  private readonly colon: Node;

  constructor(
    private readonly root: unknown,
    private readonly opts: SchemaOptions,
    private readonly recursive: ReadonlySet<string>,
    /** Large definitions referenced more than once: rule calls where they stand alone (see sharedRefs). */
    private readonly shared: ReadonlySet<string>,
  ) {
    this.sep = sepAst(opts.ws);
    this.colon = colonAst(opts.ws);
    this.resources = new SchemaResources(root);
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
    if (root.t === 'none') {
      const n = this.narrowing;
      if (n) fail('unsupported_schema_keyword', `no value is left to generate after a sound narrowing (${n.what}); the schema may still be satisfiable`, n.path, n.keyword);
      fail('invalid_schema', 'no JSON value satisfies this schema', this.unsat ?? '', 'json_schema');
    }
    return { root, rules: this.rules };
  }

  private isBare(o: Record<string, unknown>): boolean {
    const combinators = ['$ref', 'allOf', 'anyOf', 'oneOf', 'not', 'if', 'dependentRequired', 'dependentSchemas', 'dependencies'];
    return !constrains(normalize(o, '')) && combinators.every((k) => o[k] === undefined);
  }

  // ---- $ref ------------------------------------------------------------------

  private readonly resources: SchemaResources;

  /**
   * The schema a raw `$ref` names when its position is not known (oneOf
   * exclusivity proofs): undefined where the answer depends on the position
   * (relative references in a bundled document), which only makes proofs fail.
   */
  private resolve(ref: string): unknown {
    const p = this.resources.resolve(ref, undefined);
    return p === undefined ? undefined : this.at(p);
  }

  /** Resolves an (already URI-decoded) JSON pointer. */
  private at(pointer: string): unknown {
    return valueAt(this.root, pointer);
  }

  private ref(ref: string, at: string, stack: readonly string[]): { call: string } | { schema: unknown; path: string; name: string } {
    const pointer = this.resources.resolve(ref, at);
    if (pointer === undefined) {
      if (ref.startsWith('#') && ref.length > 1 && !ref.startsWith('#/')) fail('unsupported_schema_keyword', `$ref "${ref}" names an $anchor; only JSON-pointer fragments ("#/...") are supported`, at, '$ref');
      if (ref.startsWith('#')) fail('invalid_schema', `$ref "${ref}" is not a valid JSON pointer`, at, '$ref');
      fail('unsupported_schema_keyword', `$ref "${ref}" names another document, which is not fetched: bundle it into this one (under $defs, with its $id)`, at, '$ref');
    }
    const target = this.at(pointer);
    if (!isSchema(target)) fail('invalid_schema', `$ref "${ref}" does not point to a schema in this document`, at, '$ref');
    const name = '#' + pointer;
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
    let terms: Term[] = [{ plain: normalize(s, path, stack), stack, tags: [] }];
    for (const k of ['allOf', 'anyOf', 'oneOf']) {
      const v = s[k];
      if (v !== undefined && (!Array.isArray(v) || v.length === 0)) fail('invalid_schema', `${k} must be a non-empty array of schemas`, ptr(path, k), k);
    }
    if (s.$ref !== undefined) {
      if (typeof s.$ref !== 'string') fail('invalid_schema', '$ref must be a string', ptr(path, '$ref'), '$ref');
      const r = this.ref(s.$ref, ptr(path, '$ref'), stack);
      if ('call' in r) {
        const siblings = constrains(terms[0]!.plain) || Object.keys(s).some((k) => k !== '$ref' && VALIDATION.has(k));
        if (!siblings) return [{ plain: emptyPlain(path), stack, call: r.call, tags: [] }];
        terms = this.cross(terms, this.inline(r.call, ptr(path, '$ref'), stack), ptr(path, '$ref'));
      } else if (this.shared.has(r.name) && this.callFree === 0 && !constrains(terms[0]!.plain) && !Object.keys(s).some((k) => k !== '$ref' && VALIDATION.has(k))) {
        // A large definition used in several places: one rule, called (its automaton and masks shared by every use).
        this.pending.push(r.name);
        return [{ plain: emptyPlain(path), stack, call: r.name, tags: [] }];
      } else terms = this.cross(terms, this.expand(r.schema, r.path, [...stack, r.name]), ptr(path, '$ref'));
    }
    if (s.not !== undefined) terms = this.cross(terms, this.negate(s.not, ptr(path, 'not'), stack, '"not"'), ptr(path, 'not'));
    if (s.if !== undefined && (s.then !== undefined || s.else !== undefined)) {
      // if/then/else = anyOf[allOf[if, then], allOf[not(if), else]]; the two branches are disjoint.
      const at = ptr(path, 'if');
      const yes = this.cross(this.expand(s.if, at, stack), this.expand(s.then ?? true, ptr(path, 'then'), stack), at);
      const no = this.cross(this.negate(s.if, at, stack, '"if" (for its "else" branch)'), this.expand(s.else ?? true, ptr(path, 'else'), stack), at);
      terms = this.cross(terms, [...yes, ...no], at);
    }
    for (const [kw, a, dep] of dependencies(s, path)) {
      // "a present ⇒ dep" = (a present ∧ dep) ∨ (a absent): exact, one more DNF split per dependency.
      const at = ptr(ptr(path, kw), a);
      const with_ = Array.isArray(dep)
        ? [{ plain: { ...emptyPlain(at), required: [a, ...(dep as string[])] }, stack, tags: [] }]
        : this.cross([{ plain: { ...emptyPlain(at), required: [a] }, stack, tags: [] }], this.expand(dep, at, stack), at);
      terms = this.cross(terms, [...with_, { plain: { ...emptyPlain(at), banned: [a] }, stack, tags: [] }], at);
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
        charge();
        out.push(...this.mergeTerms(x, y, at));
        if (out.length > MAX_TERMS) fail('unsupported_schema_keyword', `combining these subschemas yields more than ${MAX_TERMS} alternatives`, at, at.split('/').pop()!);
      }
    }
    return out;
  }

  private mergeTerms(x: Term, y: Term, at: string): Term[] {
    const tags = [...x.tags, ...y.tags];
    const stack = [...new Set([...x.stack, ...y.stack])];
    if (x.call || y.call) {
      if (x.call === y.call) return [{ ...x, tags }]; // X ∧ X = X
      const [c, other] = x.call ? [x, y] : [y, x];
      if (!other.call && !constrains(other.plain)) return [{ ...c, tags }];
      // A recursive rule combined with other constraints: its body is inlined here (exact:
      // its own inner $refs stay calls), then merged like any other subschema.
      const body = this.inline(c.call!, at, stack).map((t) => ({ ...t, tags: [...t.tags, ...c.tags] }));
      return this.cross(body, [other], at);
    }
    const plain = merge(x.plain, y.plain);
    return plain ? [{ plain, stack, tags }] : [];
  }

  /** The DNF of recursive rule `name`'s body at this position (nested references to it stay calls). */
  private inline(name: string, at: string, stack: readonly string[]): Term[] {
    // Inlining the same rule again from the same place inside its own inlined body repeats at
    // every level (the automaton would be infinite). From another place it is one level more: the
    // pairs (rule, place) are finitely many, so a lineage can hold each at most once.
    const mark = `inline ${name} at ${at}`;
    // Only a recursive rule can meet itself again while inlined (a shared one's body never reaches it).
    if (this.recursive.has(name) && stack.includes(mark)) fail('unsupported_schema_keyword', `recursive $ref "${name}" is intersected with itself (allOf) at every level; this cannot be enforced`, at, '$ref');
    return this.expand(this.at(name.slice(1)), name.slice(1), [...stack, mark]);
  }

  // ---- negation ------------------------------------------------------------------

  /**
   * A DNF whose values all FAIL `schema` — the complement of the schema, or a
   * subset of it (never a value the schema accepts). A schema is the conjunction
   * of its keywords, so its complement is the disjunction over keywords of
   * "values of that keyword's type that fail it"; a keyword without such a form
   * (pattern, format, items...) refuses with `ctx` naming the construct.
   */
  private negate(schema: unknown, path: string, stack: readonly string[], ctx: string): Term[] {
    if (schema === true) return [];
    if (schema === false) return [{ plain: emptyPlain(path), stack, tags: [] }];
    if (!isSchema(schema)) fail('invalid_schema', 'a subschema must be an object or a boolean', path, 'not');
    const s = schema as Record<string, unknown>;
    const own = normalize(s, path);
    const out: Term[] = [];
    const add = (f: Partial<Plain>): void => {
      out.push({ plain: { ...emptyPlain(path), ...f }, stack, tags: [] });
    };
    // A keyword whose failing values the compiler cannot build is left out of the disjunction: the
    // rest is still a subset of the complement (a sound narrowing), refused only if nothing is left.
    const drop = (k: string, why: string): void => this.narrowed(ptr(path, k), k, `${ctx}: the values failing "${k}" are not generated (its negation ${why})`);
    const one = (t: JsonType): Set<JsonType> => new Set([t]);
    let bounds = false;
    for (const k of Object.keys(s)) {
      if (ANNOTATIONS.has(k) || !VALIDATION.has(k)) continue;
      switch (k) {
        case 'type': {
          // Not integer: the other types, and numbers with a fractional part.
          const ts = own.types!;
          const rest = NEG_TYPES.filter((t) => !ts.has(t) && !(t === 'integer' && ts.has('number')) && !(t === 'number' && ts.has('integer')));
          if (rest.length) add({ types: new Set(rest) });
          if (ts.has('integer') && !ts.has('number')) add({ types: one('number'), fractional: true });
          break;
        }
        case 'const':
        case 'enum':
          if (!out.some((t) => t.plain.notValues)) add({ notValues: own.enumValues ?? [] });
          break;
        case 'required':
          for (const r of own.required) add({ types: one('object'), banned: [r] });
          break;
        case 'properties':
          for (const { name, sub } of own.props) {
            add({ types: one('object'), required: [name], props: [{ name, sub: { parts: sub.parts.map((x) => ({ ...x, neg: true })) } }] });
          }
          break;
        case 'minimum':
        case 'maximum':
        case 'exclusiveMinimum':
        case 'exclusiveMaximum':
          if (bounds) break;
          bounds = true;
          if (own.lower) add({ types: one('number'), upper: { value: own.lower.value, exclusive: !own.lower.exclusive } });
          if (own.upper) add({ types: one('number'), lower: { value: own.upper.value, exclusive: !own.upper.exclusive } });
          break;
        case 'minLength':
          if (own.minLength > 0) add({ types: one('string'), maxLength: own.minLength - 1 });
          break;
        case 'maxLength':
          add({ types: one('string'), minLength: own.maxLength + 1 });
          break;
        case 'minItems':
          if (own.minItems > 0) add({ types: one('array'), maxItems: own.minItems - 1 });
          break;
        case 'maxItems':
          add({ types: one('array'), minItems: own.maxItems + 1 });
          break;
        case 'dependentRequired':
          // Some key present without one of the keys it requires.
          for (const [, a, deps] of dependencies({ dependentRequired: s.dependentRequired }, path)) {
            for (const b of deps as string[]) if (b !== a) add({ types: one('object'), required: [a], banned: [b] });
          }
          break;
        case 'minProperties':
          if (own.minProps > 0) add({ types: one('object'), maxProps: own.minProps - 1 });
          break;
        case 'maxProperties':
          add({ types: one('object'), minProps: own.maxProps + 1 });
          break;
        case 'additionalProperties':
          if (s[k] !== true) drop(k, 'would need a key outside the declared ones, which is not expressible here');
          break;
        case 'uniqueItems':
          if (s[k] !== false) drop(k, 'would need an array with a repeated item, which is not expressible here');
          break;
        case 'then':
        case 'else':
          break; // without "if" they do nothing; with it, "if" refuses
        case 'allOf':
          (s.allOf as unknown[]).forEach((x, i) => out.push(...this.negate(x, ptr(ptr(path, 'allOf'), i), stack, ctx)));
          break;
        case 'anyOf': {
          let acc: Term[] = [{ plain: emptyPlain(path), stack, tags: [] }];
          (s.anyOf as unknown[]).forEach((x, i) => (acc = this.cross(acc, this.negate(x, ptr(ptr(path, 'anyOf'), i), stack, ctx), ptr(path, 'anyOf'))));
          out.push(...acc);
          break;
        }
        case 'not':
          out.push(...this.expand(s.not, ptr(path, 'not'), stack));
          break;
        case '$ref': {
          if (typeof s.$ref !== 'string') fail('invalid_schema', '$ref must be a string', ptr(path, '$ref'), '$ref');
          const r = this.ref(s.$ref, ptr(path, '$ref'), stack);
          if ('call' in r) drop('$ref', `to the recursive "${s.$ref}" would need a complement of a context-free language`);
          else out.push(...this.negate(r.schema, r.path, [...stack, r.name], ctx));
          break;
        }
        case 'pattern':
          // Strings whose content does not match: an exact complement (automaton difference).
          add({ types: one('string'), notPatterns: own.patterns });
          break;
        case 'format':
          // Format automata accept a subset of what validators accept, so their complement would hold valid
          // values (a leap day is a date): left out. A no-op format fails nothing.
          if (own.formats.length || isIntFormat(s.format)) drop(k, 'is not built: the format automata are narrowings, their complement is not');
          break;
        default:
          drop(k, 'is not expressible by the compiler');
      }
    }
    return out;
  }

  // ---- compilation -------------------------------------------------------------

  private compile(schema: unknown, path: string, stack: readonly string[]): Node {
    return this.compileSub({ parts: [{ schema, path }] }, stack);
  }

  private compileSub(sub: Sub, stack: readonly string[]): Node {
    charge(); // the schema walk counts against the compile budget too, not only the automata
    let terms: Term[] | null = null;
    for (const part of sub.parts) {
      const own = part.stack ?? stack;
      const t = part.neg ? this.negate(part.schema, part.path, own, '"not"') : this.expand(part.schema, part.path, own);
      terms = terms ? this.cross(terms, t, part.path) : t;
    }
    return alt(...terms!.flatMap((t) => this.exclusive(t, stack)).map((t) => this.compileTerm(t)));
  }

  /**
   * A oneOf value must match exactly one branch. Branches the generator provably
   * cannot match are left alone; any other branch j is negated into the term
   * (term ∧ ¬branch j), so what is generated matches branch i only.
   */
  private exclusive(t: Term, stack: readonly string[]): Term[] {
    if (!t.tags.length) return [t];
    if (t.call && !this.recursive.has(t.call)) {
      // A shared (not recursive) definition: its body can be negated into, so inline it here.
      return this.inline(t.call, '', stack).flatMap((b) => this.exclusive({ ...b, tags: [...b.tags, ...t.tags] }, stack));
    }
    const target = t.call ? this.at(t.call.slice(1)) : null;
    const opaque = !!target && typeof target === 'object' && ['$ref', 'allOf', 'anyOf', 'oneOf'].some((k) => k in (target as object));
    const gen = genOfPlain(t.call ? (typeof target === 'object' ? normalize(target as Record<string, unknown>, '') : emptyPlain('')) : t.plain, opaque, this.opts.strict === true);
    let out: Term[] = [{ ...t, tags: [] }];
    for (const tag of t.tags) {
      tag.branches.forEach((b, j) => {
        if (j === tag.index || excludes(gen, b, (r) => this.resolve(r))) return;
        const why = `oneOf branches ${tag.index} and ${j} are not provably mutually exclusive (a value could match both) and branch ${j}`;
        if (t.call) fail('unsupported_schema_keyword', `${why} cannot be excluded from a recursive $ref; use anyOf, or discriminate them by type, const or required properties`, tag.path, 'oneOf');
        out = this.cross(out, this.negate(b, ptr(tag.path, j), stack, `oneOf (${why} must be excluded)`), tag.path);
      });
    }
    return out;
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
    const not = p.notValues ?? [];
    const excluded = (v: unknown): boolean => not.some((w) => deepEqual(v, w));
    const parts: Node[] = [];
    for (const ty of types) {
      if (ty === 'null') parts.push(excluded(null) ? NONE : lit('null'));
      else if (ty === 'boolean') parts.push(excluded(true) ? NONE : lit('true'), excluded(false) ? NONE : lit('false'));
      else if (ty === 'integer' && !types.has('number')) parts.push(this.numericAst(p, true));
      else if (ty === 'number') parts.push(this.numericAst(p, p.multipleOf !== null));
      else if (ty === 'string') parts.push(stringAst({ ...p, excluded: not.filter((v): v is string => typeof v === 'string') }));
      else if (ty === 'array') {
        // An excluded empty array becomes minItems 1; any other excluded array drops arrays (a narrowing).
        if (not.some((v) => Array.isArray(v) && v.length > 0)) {
          this.narrowed(p.path, 'not', 'excluding an array value leaves out all arrays');
          continue;
        }
        parts.push(this.arrayAst(excluded([]) ? { ...p, minItems: Math.max(1, p.minItems) } : p, stack));
      } else if (ty === 'object') {
        if (not.some((v) => v !== null && typeof v === 'object' && !Array.isArray(v))) {
          this.narrowed(p.path, 'not', 'excluding an object value leaves out all objects');
          continue;
        }
        parts.push(this.objectAst(p, stack));
      }
    }
    return alt(...parts);
  }

  /** Numbers in [lower, upper] minus the excluded values, split into open intervals; integers only when `integral`. */
  private numericAst(p: Plain, integral: boolean): Node {
    const points = [...new Set((p.notValues ?? []).filter((v): v is number => typeof v === 'number'))].sort((a, b) => a - b);
    if (p.fractional && integral) return NONE;
    const parts: Node[] = [];
    const one = (lo: Bound | null, hi: Bound | null): Node => {
      if (p.fractional) return and(numberAst(lo, hi), FRACTIONAL);
      if (!integral) return numberAst(lo, hi);
      const n = integerAst(lo, hi);
      return p.multipleOf !== null && p.multipleOf > 1n ? and(n, { t: 'mod', m: Number(p.multipleOf) }) : n;
    };
    let lo = p.lower;
    for (const v of points) {
      const cut = { value: v, exclusive: true };
      parts.push(one(lo, tighter(p.upper, cut, -1)));
      lo = tighter(lo, cut, 1);
    }
    parts.push(one(lo, p.upper));
    return alt(...parts);
  }

  private enumAst(t: Term): Node {
    const p = t.plain;
    const rest: Plain = { ...p, enumValues: null, types: null };
    let check: ((v: unknown) => boolean) | null = null;
    if (constrains(rest)) {
      const node = this.callFreeAst(() => this.typedAst({ ...rest, types: p.types }, t.stack));
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
    const not = p.notValues ?? [];
    const values = p.enumValues!.filter((v) => typeAllows(p.types, typeOfValue(v)) && !not.some((w) => deepEqual(v, w)) && (!check || check(v)));
    return alt(...values.map((v) => valueAst(v, this.opts.ws)));
  }

  /** >0 while compiling a node that must be call-free (enum checks, key schemas): any-value expands to a fixed depth. */
  private callFree = 0;

  private narrowed(path: string, keyword: string, what: string): void {
    this.narrowing ??= { path, keyword, what };
  }

  private callFreeAst(f: () => Node): Node {
    this.callFree++;
    try {
      return f();
    } finally {
      this.callFree--;
    }
  }

  private anyValue(): Node {
    if (this.opts.recursion === 'rules' && this.callFree === 0) {
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
    const ws = this.opts.ws;
    return alt(
      lit('null'), lit('true'), lit('false'), numberAst(null, null), seq(lit('"'), rep(JSON_CHAR, 0, Infinity), lit('"')),
      seq(openAst(ws, '['), list, closeAst(ws, ']')),
      seq(openAst(ws, '{'), { t: 'obj', props: [], extra: seq(keyExcluding([]), this.colon, inner), sep: this.sep }, closeAst(ws, '}')),
    );
  }

  private arrayAst(p: Plain, stack: readonly string[]): Node {
    if (p.uniqueItems && p.maxItems > 1) return this.uniqueArrayAst(p, stack);
    let prefixSubs = p.prefix;
    let min = p.minItems;
    if (p.contains) {
      // The first item is the one that satisfies `contains` (validators accept it anywhere: a narrowing).
      const first = prefixSubs[0] ?? p.items ?? { parts: [{ schema: true, path: p.path }] };
      prefixSubs = [{ parts: [...first.parts, ...p.contains.parts] }, ...prefixSubs.slice(1)];
      min = Math.max(min, 1);
      if (p.prefix.length) this.narrowed(ptr(p.path, 'contains'), 'contains', 'the first item is the one that satisfies "contains"');
    }
    const prefix = prefixSubs.map((s) => this.compileSub(s, stack));
    const rest = p.items ? this.compileSub(p.items, stack) : this.anyValue();
    const elem = (j: number): Node => prefix[j] ?? rest;
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
    const required: Node[] = [openAst(this.opts.ws, '[')];
    for (let j = 0; j < min; j++) required.push(j > 0 ? this.sep : EPS, elem(j));
    return seq(...required, tail, closeAst(this.opts.ws, ']'));
  }

  /**
   * uniqueItems over items with finitely many values (enum, const, boolean,
   * null): each value at most once, in the order the schema lists them (any
   * order would need a state per subset; listing order is a narrowing).
   */
  private uniqueArrayAst(p: Plain, stack: readonly string[]): Node {
    const at = ptr(p.path, 'uniqueItems');
    if (p.prefix.length || p.contains) fail('unsupported_schema_keyword', 'uniqueItems combined with prefixItems or contains is not supported', at, 'uniqueItems');
    const item = p.items ? this.compileSub(p.items, stack) : null;
    const lits = item ? literalAlternatives(item) : null;
    if (!lits) {
      // No token automaton can remember arbitrary earlier items; an array of at most one item is
      // always unique, so that is what is generated (a narrowing) when the schema allows it.
      if (p.minItems <= 1) {
        this.narrowed(at, 'uniqueItems', 'at most one item: arbitrary items cannot be kept distinct');
        return this.arrayAst({ ...p, uniqueItems: false, maxItems: 1 }, stack);
      }
      fail('unsupported_schema_keyword', 'uniqueItems: true with minItems above 1 is supported only when items has finitely many values (enum, const, boolean, null): a token automaton cannot remember arbitrary earlier items', at, 'uniqueItems');
    }
    const values: unknown[] = [];
    const nodes: Node[] = [];
    lits.forEach(({ text, node }) => {
      const v = JSON.parse(text) as unknown;
      if (!values.some((w) => deepEqual(v, w))) values.push(v), nodes.push(node);
    });
    const k = nodes.length;
    if (p.minItems > 1 || p.maxItems < k) {
      fail('unsupported_schema_keyword', `uniqueItems with minItems above 1 or maxItems below the number of item values (${k}) is not supported`, at, 'uniqueItems');
    }
    // First chosen value j, then each later value optionally, in order.
    const firsts = nodes.map((n, j) => seq(n, ...nodes.slice(j + 1).map((m) => opt(seq(this.sep, m)))));
    const body = p.minItems === 0 ? opt(alt(...firsts)) : alt(...firsts);
    return seq(openAst(this.opts.ws, '['), body, closeAst(this.opts.ws, ']'));
  }

  private objectAst(p: Plain, stack: readonly string[]): Node {
    const strict = this.opts.strict === true;
    const required = new Set(p.required);
    const banned = new Set(p.banned);
    const forbid = p.additional?.parts.some((x) => x.schema === false) ?? false;
    const keySchema = p.propertyNames ? this.keyAst(p.propertyNames, stack) : null;
    const nameOk = keySchema ? accepts(keySchema) : (): boolean => true;
    const patternParts = (name: string): Sub['parts'] => p.patternProps.filter((x) => patternMatches(x.src, name)).flatMap((x) => x.sub.parts);
    const members: Array<{ name: string; v: Node; required: boolean; kv?: Node }> = [];
    for (const { name, sub } of p.props) {
      if (banned.has(name) || !nameOk(JSON.stringify(name))) {
        if (required.has(name)) return NONE;
        continue;
      }
      const v = this.compileSub({ parts: [...sub.parts, ...patternParts(name)] }, stack);
      if (v.t === 'none') {
        if (required.has(name)) return NONE;
        continue;
      }
      members.push({ name, v, required: required.has(name) || strict });
    }
    const declared = p.props.map((x) => x.name);
    for (const r of p.required) {
      if (declared.includes(r)) continue;
      if (banned.has(r) || !nameOk(JSON.stringify(r))) return NONE;
      const pp = patternParts(r);
      if (!pp.length && forbid) return NONE;
      const v = pp.length ? this.compileSub({ parts: pp }, stack) : p.additional ? this.compileSub(p.additional, stack) : this.anyValue();
      if (v.t === 'none') return NONE;
      members.push({ name: r, v, required: true });
    }
    // Extra keys: after the declared ones, never a declared, required or banned name.
    const closed = forbid || (strict && p.additional === undefined && (declared.length > 0 || p.required.length > 0));
    const base = keyExcluding([...new Set([...declared, ...p.required, ...p.banned])]);
    let extras: Node[] = [];
    if (p.patternProps.length) {
      // Keys matching a pattern carry every pattern's schema (right for keys matching several);
      // keys matching none are not generated (a narrowing).
      const v = this.compileSub({ parts: p.patternProps.flatMap((x) => x.sub.parts) }, stack);
      if (v.t !== 'none') {
        for (const x of p.patternProps) {
          const key = and(stringAst({ minLength: 0, maxLength: Infinity, patterns: [{ src: x.src, path: x.path }], formats: [] }), base, ...(keySchema ? [keySchema] : []));
          extras.push(seq(key, this.colon, v));
        }
      }
    } else if (!closed) {
      const v = p.additional === undefined ? this.anyValue() : this.compileSub(p.additional, stack);
      if (v.t !== 'none') extras.push(seq(keySchema ? and(base, keySchema) : base, this.colon, v));
    }
    let count = members.filter((m) => m.required).length;
    if (p.minProps > count) {
      // Optional members become required, in schema order, until enough are present (a narrowing).
      for (const m of members) if (!m.required && count < p.minProps) (m.required = true), count++;
      // One more property can be an extra key (two could repeat one key, which parses as one property).
      if (count + 1 === p.minProps && extras.length) members.push({ name: '', v: EPS, required: true, kv: alt(...extras) }), count++;
      if (count < p.minProps) {
        fail('unsupported_schema_keyword', `minProperties ${p.minProps} is more than the properties the schema declares (${count}); extra keys cannot be counted`, ptr(p.path, 'minProperties'), 'minProperties');
      }
    }
    let kept = members;
    if (p.maxProps !== Infinity) {
      if (count > p.maxProps) return NONE;
      let room = p.maxProps - count;
      if (extras.length || members.length - count > room) {
        // No extra keys, and only the first optional members that fit (a narrowing).
        extras = [];
        kept = members.filter((m) => m.required || room-- > 0);
      }
    }
    const kv = (name: string, v: Node): Node => seq(lit(JSON.stringify(name)), this.colon, v);
    const props = kept.map((m) => ({ kv: m.kv ?? kv(m.name, m.v), required: m.required }));
    const ws = this.opts.ws;
    return seq(openAst(ws, '{'), { t: 'obj', props, extra: extras.length ? alt(...extras) : null, sep: this.sep }, closeAst(ws, '}'));
  }

  /** A `propertyNames` schema as a call-free JSON string node (keys are strings). */
  private keyAst(sub: Sub, stack: readonly string[]): Node {
    const at = sub.parts[0]?.path ?? '';
    const n = this.callFreeAst(() => this.compileSub({ parts: [...sub.parts, { schema: { type: 'string' }, path: at }] }, stack));
    if (hasCall(n)) fail('unsupported_schema_keyword', 'a recursive propertyNames schema is not supported', at, 'propertyNames');
    return n;
  }
}

/** The alternatives of `n` if each is one fixed text (a finite set of literal values), else null. */
function literalAlternatives(n: Node): Array<{ text: string; node: Node }> | null {
  const textOf = (x: Node): string | null => {
    if (x.t === 'lit') return new TextDecoder().decode(x.bytes);
    if (x.t === 'eps') return '';
    if (x.t === 'seq') {
      let out = '';
      for (const i of x.items) {
        const t = textOf(i);
        if (t === null) return null;
        out += t;
      }
      return out;
    }
    return null;
  };
  const items = n.t === 'alt' ? n.items : [n];
  const out: Array<{ text: string; node: Node }> = [];
  for (const x of items) {
    const text = textOf(x);
    if (text === null) return null;
    out.push({ text, node: x });
  }
  return out;
}

/** Membership test for a call-free node on a JSON text. */
function accepts(node: Node): (text: string) => boolean {
  const nfa = buildNfa(node, null);
  const ok = trim(nfa, () => false);
  const dfa = new Dfa(nfa);
  return (text) => {
    if (!ok) return false;
    let s = dfa.start;
    for (const b of new TextEncoder().encode(text)) if ((s = dfa.step(s, b)) < 0) return false;
    return dfa.accepting(s);
  };
}

/** The dependency keywords of `s` as [keyword, property, required names | schema]. */
function dependencies(s: Record<string, unknown>, path: string): Array<[string, string, unknown]> {
  const out: Array<[string, string, unknown]> = [];
  for (const kw of ['dependentRequired', 'dependentSchemas', 'dependencies']) {
    const v = s[kw];
    if (v === undefined) continue;
    if (!v || typeof v !== 'object' || Array.isArray(v)) fail('invalid_schema', `${kw} must be an object`, ptr(path, kw), kw);
    for (const [a, dep] of Object.entries(v)) {
      const at = ptr(ptr(path, kw), a);
      if (kw === 'dependentRequired' || (kw === 'dependencies' && Array.isArray(dep))) {
        if (!Array.isArray(dep) || dep.some((x) => typeof x !== 'string')) fail('invalid_schema', `${kw} values must be arrays of property names`, at, kw);
      } else if (!isSchema(dep)) fail('invalid_schema', `${kw} values must be schemas`, at, kw);
      out.push([kw, a, dep]);
    }
  }
  return out;
}

/**
 * Mutual exclusion for `oneOf`.
 *
 * A validator accepts a oneOf value only if exactly one branch validates it,
 * and a branch validates far more than the language we generate from it
 * (extra properties, other key orders...). So generating the union of the
 * branches is only correct when every value generated from branch i is
 * *invalid* for each other branch j. This module proves that with sound,
 * deliberately simple rules — disjoint types, const/enum mismatch, disjoint
 * numeric intervals, a discriminator property whose generated const the other
 * branch rejects, a required key the generator never emits, a key the other
 * branch forbids — looking through $ref / allOf / anyOf / oneOf of the other
 * branch. When no rule applies the compiler refuses the schema rather than
 * risk emitting a value that matches two branches.
 */
import { deepEqual, inferTypes, type JsonType, JSON_TYPES, type Plain, typeOfValue } from './keywords.ts';
import type { Bound } from './numeric.ts';

/** What we know about every value the generator can emit for one DNF term. */
export interface Gen {
  readonly types: ReadonlySet<JsonType>;
  readonly consts: readonly unknown[] | null;
  readonly lower: Bound | null;
  readonly upper: Bound | null;
  readonly required: readonly string[];
  /** Keys the generator may emit (null: any key). */
  readonly keys: ReadonlySet<string> | null;
  /** Keys the generator never emits. */
  readonly absent: ReadonlySet<string>;
  propConsts(name: string): readonly unknown[] | null;
}

export type Resolve = (ref: string) => unknown;

const ALL = new Set(JSON_TYPES);

function constsOf(schema: unknown): unknown[] | null {
  if (!schema || typeof schema !== 'object' || Array.isArray(schema)) return null;
  const o = schema as Record<string, unknown>;
  if ('const' in o) return [o.const];
  return Array.isArray(o.enum) ? o.enum : null;
}

export function genOfValues(values: readonly unknown[]): Gen {
  return {
    types: new Set(values.map(typeOfValue)), consts: values, lower: null, upper: null, required: [], keys: null, absent: new Set(),
    propConsts: () => null,
  };
}

/**
 * Facts about a merged term; `opaque` (a rule whose body has combinators) knows
 * nothing. `strict`: objects with declared properties are closed and emit every
 * declared property (see SchemaOptions.strict).
 */
export function genOfPlain(p: Plain, opaque: boolean, strict = false): Gen {
  if (opaque) return { types: ALL, consts: null, lower: null, upper: null, required: [], keys: null, absent: new Set(), propConsts: () => null };
  if (p.enumValues) return genOfValues(p.enumValues);
  const declared = [...p.props.map((x) => x.name), ...p.required];
  const forbid = p.additional?.parts.some((x) => x.schema === false) ?? false;
  const closed = forbid || (strict && p.additional === undefined && declared.length > 0);
  return {
    types: p.types ?? inferTypes(p) ?? ALL,
    consts: null,
    lower: p.lower,
    upper: p.upper,
    required: p.required,
    keys: closed && !p.patternProps.length ? new Set(declared) : null,
    absent: new Set(p.banned),
    propConsts(name) {
      const sub = p.props.find((x) => x.name === name)?.sub;
      let out: unknown[] | null = null;
      for (const part of sub?.parts ?? []) {
        const c = constsOf(part.schema);
        if (c) out = out ? out.filter((v) => c.some((w) => deepEqual(v, w))) : c;
      }
      return out;
    },
  };
}

const overlap = (g: JsonType, v: JsonType): boolean =>
  g === v || (g === 'integer' && v === 'number') || (g === 'number' && v === 'integer');

function below(a: Bound | null, b: Bound | null): boolean {
  // every x ≤ a lies strictly below every y ≥ b
  return !!a && !!b && (a.value < b.value || (a.value === b.value && (a.exclusive || b.exclusive)));
}

/** True if number `v` lies outside [lo, hi] (non-numbers count as outside: they are other types). */
function outside(v: unknown, lo: Bound | null, hi: Bound | null): boolean {
  if (typeof v !== 'number') return true;
  return (lo !== null && (v < lo.value || (v === lo.value && lo.exclusive))) || (hi !== null && (v > hi.value || (v === hi.value && hi.exclusive)));
}

function numBound(o: Record<string, unknown>, k: string, xk: string): Bound | null {
  const x = o[xk];
  if (typeof x === 'number') return { value: x, exclusive: true };
  const v = o[k];
  return typeof v === 'number' ? { value: v, exclusive: x === true } : null;
}

/** True if no value described by `g` is valid against raw schema `s` (sound, not complete). */
export function excludes(g: Gen, s: unknown, resolve: Resolve, depth = 0): boolean {
  if (s === false) return true;
  if (depth > 16 || !s || typeof s !== 'object' || Array.isArray(s)) return false;
  const o = s as Record<string, unknown>;
  if (ownExcludes(g, o, resolve, depth)) return true;
  if (typeof o.$ref === 'string' && excludes(g, resolve(o.$ref), resolve, depth + 1)) return true;
  if (Array.isArray(o.allOf) && o.allOf.some((x) => excludes(g, x, resolve, depth + 1))) return true;
  for (const k of ['anyOf', 'oneOf']) {
    const list = o[k];
    if (Array.isArray(list) && list.length > 0 && list.every((x) => excludes(g, x, resolve, depth + 1))) return true;
  }
  return false;
}

function ownExcludes(g: Gen, o: Record<string, unknown>, resolve: Resolve, depth: number): boolean {
  if (o.type !== undefined) {
    const ts = (Array.isArray(o.type) ? o.type : [o.type]) as JsonType[];
    if (![...g.types].some((t) => ts.some((v) => overlap(t, v)))) return true;
  }
  const vals = constsOf(o);
  if (vals) {
    if (g.consts?.every((v) => !vals.some((w) => deepEqual(v, w)))) return true;
    if (![...g.types].some((t) => vals.some((v) => overlap(t, typeOfValue(v))))) return true;
  }
  const numeric = [...g.types].every((t) => t === 'integer' || t === 'number');
  if (numeric) {
    const lo = numBound(o, 'minimum', 'exclusiveMinimum');
    const hi = numBound(o, 'maximum', 'exclusiveMaximum');
    if (g.consts) {
      if (g.consts.every((v) => outside(v, lo, hi))) return true;
    } else if (below(g.upper, lo) || below(hi, g.lower)) return true;
    else if (vals?.every((v) => outside(v, g.lower, g.upper))) return true;
  }
  if (g.types.size === 1 && g.types.has('object')) {
    const props = o.properties && typeof o.properties === 'object' ? (o.properties as Record<string, unknown>) : {};
    for (const name of g.required) {
      if (o.additionalProperties === false && !Object.hasOwn(props, name) && o.patternProperties === undefined) return true;
      const c = g.propConsts(name);
      if (c && Object.hasOwn(props, name) && excludes(genOfValues(c), props[name], resolve, depth + 1)) return true;
    }
    if (Array.isArray(o.required) && o.required.some((r) => typeof r === 'string' && (g.absent.has(r) || (g.keys !== null && !g.keys.has(r))))) return true;
  }
  return false;
}

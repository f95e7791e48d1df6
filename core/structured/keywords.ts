/**
 * JSON Schema keyword vocabulary: validation, normalization and `allOf` merging.
 *
 * `normalize` reads one schema object's own keywords into a `Plain` record
 * (combinators and $ref are handled by the compiler), rejecting malformed
 * values (`invalid_schema`) and keywords that would constrain but are not
 * supported (`unsupported_schema_keyword`); annotations and keywords outside
 * the JSON Schema vocabularies are ignored, as validators do. `merge` is the
 * conjunction of two Plain records (allOf): types intersect, bounds tighten,
 * properties merge member-wise (as lists of subschemas, so error paths stay
 * exact), patterns and formats accumulate for later intersection, enums
 * intersect; a contradiction yields null (unsatisfiable).
 */
import { fail, ptr } from './ast.ts';
import { FORMATS } from './json_text.ts';
import type { Bound } from './numeric.ts';
import { parseRegex } from './regex.ts';

export type JsonType = 'null' | 'boolean' | 'integer' | 'number' | 'string' | 'array' | 'object';
export const JSON_TYPES: readonly JsonType[] = ['null', 'boolean', 'integer', 'number', 'string', 'array', 'object'];

/** A subschema to be compiled as the conjunction of its parts. */
export interface Sub {
  /**
   * `neg`: the part is the negation of `schema` (from `not`), compiled as a sound narrowing of it.
   * `stack`: the `$ref`s followed to reach the schema the part comes from. Recursion is a `$ref`
   * met again inside its own body, so each part keeps its own lineage: a subschema merged in
   * from a sibling (`allOf: [{$ref: X}, {items: {$ref: X}}]`) is not inside X.
   */
  readonly parts: ReadonlyArray<{ readonly schema: unknown; readonly path: string; readonly neg?: boolean; readonly stack?: readonly string[] }>;
}

export interface Plain {
  path: string;
  types: ReadonlySet<JsonType> | null;
  props: Array<{ name: string; sub: Sub }>;
  required: string[];
  additional: Sub | undefined;
  prefix: Sub[];
  items: Sub | undefined;
  minItems: number;
  maxItems: number;
  minLength: number;
  maxLength: number;
  lower: Bound | null;
  upper: Bound | null;
  patterns: Array<{ src: string; path: string }>;
  formats: Array<{ name: string; path: string }>;
  /** Patterns strings must NOT match (negations of `pattern`: exact complements). */
  notPatterns: Array<{ src: string; path: string }>;
  enumValues: unknown[] | null;
  /** Keys that must be absent (`not: {required}`, dependencies). */
  banned: string[];
  /** Values the instance must not equal (`not: {const/enum}`). */
  notValues: unknown[] | null;
  /** Integer divisor numbers must be a multiple of (numbers then are integers). */
  multipleOf: bigint | null;
  /** Numbers must not be integers (the negation of `type: integer`). */
  fractional: boolean;
  uniqueItems: boolean;
  minProps: number;
  maxProps: number;
  contains: Sub | undefined;
  propertyNames: Sub | undefined;
  patternProps: Array<{ src: string; path: string; sub: Sub }>;
}

/** Keywords refused outright (each with the reason given to the client). */
const UNSUPPORTED: ReadonlyMap<string, string> = new Map([
  ['unevaluatedProperties', 'it depends on which subschemas evaluated which properties at validation time'],
  ['unevaluatedItems', 'it depends on which subschemas evaluated which items at validation time'],
  ['$dynamicRef', 'dynamic scopes are not resolved; use a local "$ref"'],
  ['$recursiveRef', 'dynamic scopes are not resolved; use a local "$ref"'],
  ['$recursiveAnchor', 'dynamic scopes are not resolved; use a local "$ref"'],
  ['maxContains', 'counting the matching items is not supported'],
]);
/** Integer formats: [min, max] (null: unbounded on that side). */
const INT_FORMATS: Readonly<Record<string, readonly [number | null, number | null]>> = {
  int8: [-128, 127], int16: [-32768, 32767], int32: [-(2 ** 31), 2 ** 31 - 1], int64: [null, null],
  uint8: [0, 255], uint16: [0, 65535], uint32: [0, 2 ** 32 - 1], uint64: [0, null], uint: [0, null], int: [null, null],
  // draft-03: milliseconds since the epoch, a number (non-negative integers: a narrowing).
  'utc-millisec': [0, null],
};

/** Whether `f` names an integer format (a numeric range, not a string format). */
export const isIntFormat = (f: unknown): boolean => typeof f === 'string' && Object.hasOwn(INT_FORMATS, f);
/**
 * Formats that validate nothing (ajv-formats: any string or any number; Kubernetes'
 * `int-or-string`: an integer or any string, which `type` already says).
 */
const NOOP_FORMATS = new Set(['password', 'binary', 'float', 'double', 'int-or-string']);

export const isSchema = (s: unknown): boolean => typeof s === 'boolean' || (s !== null && typeof s === 'object' && !Array.isArray(s));
const one = (schema: unknown, path: string): Sub => ({ parts: [{ schema, path }] });

export function emptyPlain(path: string): Plain {
  return {
    path, types: null, props: [], required: [], additional: undefined, prefix: [], items: undefined,
    minItems: 0, maxItems: Infinity, minLength: 0, maxLength: Infinity, lower: null, upper: null,
    patterns: [], formats: [], notPatterns: [], enumValues: null, banned: [], notValues: null, multipleOf: null, fractional: false, uniqueItems: false,
    minProps: 0, maxProps: Infinity, contains: undefined, propertyNames: undefined, patternProps: [],
  };
}

/**
 * Largest counts the compiler unrolls: arrays are unrolled item by item and
 * strings character by character, so a count is checked here, before any
 * expansion, and a larger one is refused (`constraint_too_complex`) instead
 * of being expanded until the automaton budget runs out. Item schemas are
 * usually much larger than one character, hence the smaller item bound.
 */
export const MAX_ITEMS_COUNT = 1000;
export const MAX_LENGTH_COUNT = 10_000;
/** Largest `multipleOf` divisor: its residue automaton has one state per residue. */
export const MAX_DIVISOR = 10_000;

function count(s: Record<string, unknown>, k: string, path: string, limit: number): number | undefined {
  const v = s[k];
  if (v === undefined) return undefined;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 0) fail('invalid_schema', `${k} must be a non-negative integer`, ptr(path, k), k);
  if (v > limit) fail('constraint_too_complex', `${k} above ${limit} is not supported for constrained decoding`, ptr(path, k), k, { limit });
  return v;
}

function num(s: Record<string, unknown>, k: string, path: string): number | undefined {
  const v = s[k];
  if (v === undefined || typeof v === 'boolean') return undefined;
  if (typeof v !== 'number' || !Number.isFinite(v)) fail('invalid_schema', `${k} must be a number`, ptr(path, k), k);
  return v;
}

function subschema(v: unknown, path: string, k: string, stack: readonly string[] | undefined): Sub {
  if (!isSchema(v)) fail('invalid_schema', `${k} must be a schema (object or boolean)`, path, k);
  return stack ? { parts: [{ schema: v, path, stack }] } : one(v, path);
}

/**
 * Reads the own keywords of schema object `s` at `path`. `stack`: the `$ref`s followed to reach
 * `s`, kept on each of its subschemas (see Sub).
 */
export function normalize(s: Record<string, unknown>, path: string, stack?: readonly string[]): Plain {
  const p = emptyPlain(path);
  const child = (v: unknown, at: string, k: string): Sub => subschema(v, at, k, stack);
  for (const k of Object.keys(s)) {
    const why = UNSUPPORTED.get(k);
    if (why && !(k === 'maxContains' && s.contains === undefined)) fail('unsupported_schema_keyword', `keyword "${k}" is not supported for constrained decoding: ${why}`, ptr(path, k), k);
  }
  if (s.uniqueItems !== undefined) {
    if (typeof s.uniqueItems !== 'boolean') fail('invalid_schema', 'uniqueItems must be a boolean', ptr(path, 'uniqueItems'), 'uniqueItems');
    p.uniqueItems = s.uniqueItems;
  }
  p.minProps = count(s, 'minProperties', path, MAX_ITEMS_COUNT) ?? 0;
  p.maxProps = count(s, 'maxProperties', path, MAX_ITEMS_COUNT) ?? Infinity;
  if (s.multipleOf !== undefined) {
    const m = s.multipleOf;
    if (typeof m !== 'number' || !Number.isFinite(m) || m <= 0) fail('invalid_schema', 'multipleOf must be a number greater than 0', ptr(path, 'multipleOf'), 'multipleOf');
    if (!Number.isInteger(m)) {
      fail('unsupported_schema_keyword', 'multipleOf with a fractional divisor is not supported: validators divide in binary floating point (0.07 / 0.01 is not an integer there), so no output could be guaranteed to validate; use an integer divisor on a scaled value', ptr(path, 'multipleOf'), 'multipleOf');
    }
    if (m > MAX_DIVISOR) fail('constraint_too_complex', `multipleOf above ${MAX_DIVISOR} is not supported for constrained decoding`, ptr(path, 'multipleOf'), 'multipleOf', { limit: MAX_DIVISOR });
    p.multipleOf = BigInt(m);
  }
  if (s.contains !== undefined) {
    const minC = s.minContains;
    if (minC !== undefined && (typeof minC !== 'number' || !Number.isInteger(minC) || minC < 0)) fail('invalid_schema', 'minContains must be a non-negative integer', ptr(path, 'minContains'), 'minContains');
    if (minC !== undefined && minC > 1) fail('unsupported_schema_keyword', 'minContains above 1 is not supported: counting the matching items is not supported', ptr(path, 'minContains'), 'minContains');
    if (minC !== 0) p.contains = child(s.contains, ptr(path, 'contains'), 'contains');
  }
  if (s.propertyNames !== undefined) p.propertyNames = child(s.propertyNames, ptr(path, 'propertyNames'), 'propertyNames');
  if (s.patternProperties !== undefined) {
    const pp = s.patternProperties;
    if (!pp || typeof pp !== 'object' || Array.isArray(pp)) fail('invalid_schema', 'patternProperties must be an object', ptr(path, 'patternProperties'), 'patternProperties');
    for (const [src, sub] of Object.entries(pp)) {
      const at = ptr(ptr(path, 'patternProperties'), src);
      parseRegex(src, { path: at, keyword: 'patternProperties' });
      p.patternProps.push({ src, path: at, sub: child(sub, at, 'patternProperties') });
    }
  }
  if (s.type !== undefined) {
    const list = Array.isArray(s.type) ? s.type : [s.type];
    if (list.length === 0 || list.some((t) => !JSON_TYPES.includes(t as JsonType))) {
      fail('invalid_schema', `type must be one of ${JSON_TYPES.join(', ')} or a non-empty array of them`, ptr(path, 'type'), 'type');
    }
    p.types = new Set(list as JsonType[]);
  }
  if (s.properties !== undefined) {
    const props = s.properties;
    if (!props || typeof props !== 'object' || Array.isArray(props)) fail('invalid_schema', 'properties must be an object', ptr(path, 'properties'), 'properties');
    for (const [name, sub] of Object.entries(props)) p.props.push({ name, sub: child(sub, ptr(ptr(path, 'properties'), name), 'properties') });
  }
  if (s.required !== undefined) {
    if (!Array.isArray(s.required) || s.required.some((r) => typeof r !== 'string')) fail('invalid_schema', 'required must be an array of strings', ptr(path, 'required'), 'required');
    p.required = [...new Set(s.required as string[])];
  }
  if (s.additionalProperties !== undefined) p.additional = child(s.additionalProperties, ptr(path, 'additionalProperties'), 'additionalProperties');
  if (s.prefixItems !== undefined) {
    if (!Array.isArray(s.prefixItems)) fail('invalid_schema', 'prefixItems must be an array', ptr(path, 'prefixItems'), 'prefixItems');
    p.prefix = s.prefixItems.map((x, i) => child(x, ptr(ptr(path, 'prefixItems'), i), 'prefixItems'));
  }
  if (Array.isArray(s.items)) {
    p.prefix = s.items.map((x, i) => child(x, ptr(ptr(path, 'items'), i), 'items'));
    if (s.additionalItems !== undefined) p.items = child(s.additionalItems, ptr(path, 'additionalItems'), 'additionalItems');
  } else if (s.items !== undefined) p.items = child(s.items, ptr(path, 'items'), 'items');
  p.minItems = count(s, 'minItems', path, MAX_ITEMS_COUNT) ?? 0;
  p.maxItems = count(s, 'maxItems', path, MAX_ITEMS_COUNT) ?? Infinity;
  p.minLength = count(s, 'minLength', path, MAX_LENGTH_COUNT) ?? 0;
  p.maxLength = count(s, 'maxLength', path, MAX_LENGTH_COUNT) ?? Infinity;
  const min = num(s, 'minimum', path);
  const max = num(s, 'maximum', path);
  const xmin = num(s, 'exclusiveMinimum', path);
  const xmax = num(s, 'exclusiveMaximum', path);
  if (min !== undefined) p.lower = { value: min, exclusive: s.exclusiveMinimum === true };
  if (max !== undefined) p.upper = { value: max, exclusive: s.exclusiveMaximum === true };
  if (xmin !== undefined) p.lower = tighter(p.lower, { value: xmin, exclusive: true }, 1);
  if (xmax !== undefined) p.upper = tighter(p.upper, { value: xmax, exclusive: true }, -1);
  if (s.pattern !== undefined) {
    if (typeof s.pattern !== 'string') fail('invalid_schema', 'pattern must be a string', ptr(path, 'pattern'), 'pattern');
    parseRegex(s.pattern, { path: ptr(path, 'pattern'), keyword: 'pattern' }); // report bad regexes even if unused
    p.patterns.push({ src: s.pattern, path: ptr(path, 'pattern') });
  }
  if (s.format !== undefined) {
    const f = s.format;
    if (typeof f !== 'string') fail('invalid_schema', 'format must be a string', ptr(path, 'format'), 'format');
    const range = INT_FORMATS[f];
    if (range) {
      // ajv-formats int32/int64: an integer (int32: in range); the others (OpenAPI, schemars) are the
      // integer range their name says — a narrowing where validators ignore them. Numbers only.
      if (!p.types || p.types.has('number') || p.types.has('integer')) {
        if (range[0] !== null) p.lower = tighter(p.lower, { value: range[0], exclusive: false }, 1);
        if (range[1] !== null) p.upper = tighter(p.upper, { value: range[1], exclusive: false }, -1);
        p.multipleOf ??= 1n;
      }
    } else if (FORMATS[f] !== undefined) p.formats.push({ name: f, path: ptr(path, 'format') });
    else if (!NOOP_FORMATS.has(f)) {
      fail('unsupported_schema_keyword', `format "${f}" is not supported (supported: ${Object.keys(FORMATS).join(', ')})`, ptr(path, 'format'), 'format');
    }
  }
  if (s.enum !== undefined) {
    if (!Array.isArray(s.enum) || s.enum.length === 0) fail('invalid_schema', 'enum must be a non-empty array', ptr(path, 'enum'), 'enum');
    p.enumValues = [...s.enum];
  }
  if ('const' in s) p.enumValues = p.enumValues ? p.enumValues.filter((v) => deepEqual(v, s.const)) : [s.const];
  return p;
}

/** The tighter of two bounds; dir = 1 for lower bounds, -1 for upper. */
export function tighter(a: Bound | null, b: Bound | null, dir: 1 | -1): Bound | null {
  if (!a) return b;
  if (!b) return a;
  if (a.value === b.value) return { value: a.value, exclusive: a.exclusive || b.exclusive };
  return (a.value - b.value) * dir > 0 ? a : b;
}

export function deepEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  const ka = Object.keys(a);
  const kb = Object.keys(b);
  if (ka.length !== kb.length) return false;
  return ka.every((k) => Object.hasOwn(b, k) && deepEqual((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k]));
}

export function typeOfValue(v: unknown): JsonType {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  if (typeof v === 'number') return Number.isInteger(v) ? 'integer' : 'number';
  return typeof v as JsonType;
}

/** Whether a value of JSON type `t` is allowed by the type set (integer ⊂ number). */
export const typeAllows = (types: ReadonlySet<JsonType> | null, t: JsonType): boolean =>
  !types || types.has(t) || (t === 'integer' && types.has('number'));

function intersectTypes(a: ReadonlySet<JsonType> | null, b: ReadonlySet<JsonType> | null): ReadonlySet<JsonType> | null {
  if (!a) return b;
  if (!b) return a;
  const out = new Set<JsonType>();
  for (const t of a) {
    if (b.has(t)) out.add(t);
    else if ((t === 'number' && b.has('integer')) || (t === 'integer' && b.has('number'))) out.add('integer');
  }
  return out;
}

const both = (a: Sub | undefined, b: Sub | undefined): Sub | undefined => (a && b ? { parts: [...a.parts, ...b.parts] } : a ?? b);
const forbids = (s: Sub | undefined): boolean => s?.parts.some((x) => x.schema === false) ?? false;

/** Conjunction of two Plain records; null if they contradict. */
export function merge(a: Plain, b: Plain): Plain | null {
  const types = intersectTypes(a.types, b.types);
  if (types && types.size === 0) return null;
  const required = [...new Set([...a.required, ...b.required])];
  const banned = [...new Set([...a.banned, ...b.banned])];
  if (required.some((r) => banned.includes(r))) return null;
  if ((a.patternProps.length && (b.patternProps.length || b.additional !== undefined)) || (b.patternProps.length && a.additional !== undefined)) {
    fail('unsupported_schema_keyword', 'patternProperties combined (allOf) with another object\'s additionalProperties or patternProperties is not supported', a.path, 'patternProperties');
  }
  const names = new Set([...a.props.map((x) => x.name), ...b.props.map((x) => x.name)]);
  const props: Plain['props'] = [];
  for (const name of names) {
    const pa = a.props.find((x) => x.name === name)?.sub ?? implicitSub(a, name);
    const pb = b.props.find((x) => x.name === name)?.sub ?? implicitSub(b, name);
    if (pa === null || pb === null) {
      if (required.includes(name)) return null;
      continue;
    }
    props.push({ name, sub: both(pa, pb)! });
  }
  for (const r of required) {
    if (names.has(r)) continue;
    if (implicitSub(a, r) === null || implicitSub(b, r) === null) return null;
  }
  const prefix: Sub[] = [];
  for (let i = 0; i < Math.max(a.prefix.length, b.prefix.length); i++) {
    const x = a.prefix[i] ?? a.items;
    const y = b.prefix[i] ?? b.items;
    prefix.push(both(x, y) ?? { parts: [{ schema: true, path: a.path }] });
  }
  const enumValues = a.enumValues && b.enumValues ? a.enumValues.filter((v) => b.enumValues!.some((w) => deepEqual(v, w))) : a.enumValues ?? b.enumValues;
  if (enumValues && enumValues.length === 0) return null;
  return {
    path: a.path,
    types,
    props,
    required,
    additional: both(a.additional, b.additional),
    prefix,
    items: both(a.items, b.items),
    minItems: Math.max(a.minItems, b.minItems),
    maxItems: Math.min(a.maxItems, b.maxItems),
    minLength: Math.max(a.minLength, b.minLength),
    maxLength: Math.min(a.maxLength, b.maxLength),
    lower: tighter(a.lower, b.lower, 1),
    upper: tighter(a.upper, b.upper, -1),
    patterns: [...a.patterns, ...b.patterns],
    formats: [...a.formats, ...b.formats],
    notPatterns: [...a.notPatterns, ...b.notPatterns],
    enumValues,
    banned,
    notValues: a.notValues && b.notValues ? [...a.notValues, ...b.notValues] : a.notValues ?? b.notValues,
    multipleOf: a.multipleOf && b.multipleOf ? lcm(a.multipleOf, b.multipleOf) : a.multipleOf ?? b.multipleOf,
    fractional: a.fractional || b.fractional,
    uniqueItems: a.uniqueItems || b.uniqueItems,
    minProps: Math.max(a.minProps, b.minProps),
    maxProps: Math.min(a.maxProps, b.maxProps),
    contains: both(a.contains, b.contains),
    propertyNames: both(a.propertyNames, b.propertyNames),
    patternProps: [...a.patternProps, ...b.patternProps],
  };
}

const gcd = (a: bigint, b: bigint): bigint => (b === 0n ? a : gcd(b, a % b));
const lcm = (a: bigint, b: bigint): bigint => (a / gcd(a, b)) * b;

/** Whether `name` matches a `patternProperties` pattern (ECMA-262 regex, as validators test it). */
export function patternMatches(src: string, name: string): boolean {
  try {
    return new RegExp(src, 'u').test(name);
  } catch {
    return false;
  }
}

/**
 * The schema an undeclared property `name` of `p` must satisfy: null = forbidden
 * (banned, or additionalProperties false), undefined = any value. Keys matching a
 * pattern get the pattern schemas (added where the object compiles), not additionalProperties.
 */
export function implicitSub(p: Plain, name: string): Sub | undefined | null {
  if (p.banned.includes(name)) return null;
  if (p.patternProps.some((x) => patternMatches(x.src, name))) return undefined;
  return forbids(p.additional) ? null : p.additional;
}

/** True if the record constrains anything (an empty record means "any value"). */
export function constrains(p: Plain): boolean {
  return p.types !== null || p.props.length > 0 || p.required.length > 0 || p.additional !== undefined || p.prefix.length > 0 ||
    p.items !== undefined || p.minItems > 0 || p.maxItems !== Infinity || p.minLength > 0 || p.maxLength !== Infinity ||
    p.lower !== null || p.upper !== null || p.patterns.length > 0 || p.formats.length > 0 || p.notPatterns.length > 0 || p.enumValues !== null ||
    p.banned.length > 0 || p.notValues !== null || p.multipleOf !== null || p.fractional || p.uniqueItems || p.minProps > 0 || p.maxProps !== Infinity ||
    p.contains !== undefined || p.propertyNames !== undefined || p.patternProps.length > 0;
}

/** Types implied by the keywords present when `type` is absent (null: nothing implied → any value). */
export function inferTypes(p: Plain): ReadonlySet<JsonType> | null {
  const out = new Set<JsonType>();
  if (p.props.length || p.required.length || p.additional !== undefined || p.minProps > 0 || p.maxProps !== Infinity || p.propertyNames || p.patternProps.length) out.add('object');
  if (p.prefix.length || p.items !== undefined || p.minItems > 0 || p.maxItems !== Infinity || p.contains || p.uniqueItems) out.add('array');
  if (p.minLength > 0 || p.maxLength !== Infinity || p.patterns.length || p.formats.length || p.notPatterns.length) out.add('string');
  if (p.lower || p.upper || p.multipleOf || p.fractional) out.add('number');
  // Only exclusions (banned keys, excluded values): every type stays possible.
  if (!out.size && (p.banned.length || p.notValues)) return new Set(['null', 'boolean', 'number', 'string', 'array', 'object']);
  return out.size ? out : null;
}

/**
 * Speculative decoding by default: a generative reader with no draft model of
 * its own takes, as its draft, the smallest other generative model that the
 * same server loads at start-up (a .gguf file, or a directory whose
 * config.json names a causal-LM architecture) and that is smaller on disk.
 * Whether the two share a vocabulary (same size, the same token string for
 * every id) is checked when the draft loads (open_assistant.ts); a draft that
 * does not match leaves the reader without speculation, logged. `assistant_name:
 * off` turns the automatic choice off (docs/speculative.md).
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { ReaderSpec } from './spec.ts';

/** Bytes of a model on disk: a .gguf file's size, or the files directly in a model directory; null when unreadable. */
export function modelBytes(path: string): number | null {
  try {
    const st = statSync(path);
    if (!st.isDirectory()) return st.size;
    return readdirSync(path).reduce((sum, f) => {
      const s = statSync(join(path, f));
      return sum + (s.isFile() ? s.size : 0);
    }, 0);
  } catch {
    return null;
  }
}

/**
 * Could `spec` run a generative model in this process: not remote, not an
 * encoder by declaration, and a .gguf file or a directory whose config.json
 * names a causal-LM architecture (`*ForCausalLM`, `*LMHeadModel`), so encoder
 * models are never tried as drafts.
 */
function generative(spec: ReaderSpec): boolean {
  if (spec.remote || (spec.type !== undefined && spec.type !== 'generate')) return false;
  if (spec.model.endsWith('.gguf')) return true;
  try {
    const cfg = JSON.parse(readFileSync(join(spec.model, 'config.json'), 'utf8')) as { architectures?: unknown };
    return Array.isArray(cfg.architectures) && cfg.architectures.some((a) => typeof a === 'string' && /(ForCausalLM|LMHeadModel)$/.test(a));
  } catch {
    return false;
  }
}

/**
 * `specs` with `assistantModel` filled in where a reader has none and a smaller
 * generative model is among the others (the smallest of them).
 */
export function withAutomaticAssistants(specs: readonly ReaderSpec[]): ReaderSpec[] {
  const sized = specs.filter(generative).map((s) => ({ model: s.model, bytes: modelBytes(s.model) }));
  return specs.map((spec) => {
    if (spec.assistantModel || !generative(spec)) return spec;
    const own = modelBytes(spec.model);
    if (own === null) return spec;
    const smaller = sized.filter((c) => c.model !== spec.model && c.bytes !== null && c.bytes < own).sort((a, b) => a.bytes! - b.bytes!);
    return smaller[0] ? { ...spec, assistantModel: smaller[0].model } : spec;
  });
}

/**
 * The bundled shader sources (core/gpu/shader_sources.gen.ts, from `npm run gen:shaders`)
 * match shaders/*.wgsl, and every `#include` in them names a bundled file — a stale bundle
 * would run kernels that differ from the reviewed WGSL.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { SHADERS } from '../../core/gpu/shader_sources.gen.ts';
import { renderShaderModule } from '../../scripts/gen_shaders.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

describe('bundled shader sources', () => {
  it('equal what gen:shaders renders from shaders/ (run `npm run gen:shaders` after editing WGSL)', () => {
    expect(readFileSync(join(ROOT, 'core/gpu/shader_sources.gen.ts'), 'utf8')).toBe(renderShaderModule(join(ROOT, 'shaders')));
  });

  it('resolve every #include to a bundled part', () => {
    const includes = Object.entries(SHADERS).flatMap(([name, src]) => [...src.matchAll(/^\s*#include\s+(\w+)\s*$/gm)].map((m) => [name, m[1]!] as const));
    expect(includes.length).toBeGreaterThan(0);
    for (const [from, name] of includes) expect(SHADERS[name], `${from} includes ${name}`).toBeTypeOf('string');
  });
});

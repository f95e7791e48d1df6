/**
 * PipelineKey -> WGSL defines -> compiled pipeline, compiled once and cached.
 *
 * A key names a shader file in shaders/, its preprocessor defines and its
 * uniform layout; `override` constants go in `constants`. Compilation errors
 * become ShaderCompileError with the compiler's messages, so a bad variant
 * fails loudly at creation instead of producing garbage at dispatch.
 */
import { ShaderCompileError } from '../errors.ts';
import { SHADERS } from './shader_sources.gen.ts';
import type { UniformLayout } from './uniforms.ts';
import { preprocess, type Defines } from './wgsl.ts';

export interface PipelineKey {
  /** File name in shaders/ without `.wgsl`. */
  shader: string;
  defines?: Defines;
  /** WGSL `override` constants. */
  constants?: Readonly<Record<string, number>>;
  layout: UniformLayout<string>;
}

export interface Kernel {
  readonly id: number;
  readonly pipeline: GPUComputePipeline;
  readonly layout: UniformLayout<string>;
  readonly label: string;
}

function stable(o: Readonly<Record<string, unknown>> | undefined): string {
  if (!o) return '';
  return Object.keys(o)
    .sort()
    .map((k) => `${k}=${String(o[k])}`)
    .join(',');
}

export function keyString(k: PipelineKey): string {
  return `${k.shader}|${stable(k.defines)}|${stable(k.constants)}|${k.layout.wgsl}`;
}

/** Full WGSL for a key: the generated Params struct, then the preprocessed file. */
export function renderSource(k: PipelineKey): string {
  const src = SHADERS[k.shader];
  if (src === undefined) throw new ShaderCompileError(k.shader, 'no such shader in shaders/');
  const body = preprocess(src, k.defines ?? {}, (name) => SHADERS[name]);
  // `enable` directives must precede all declarations, so hoist them.
  const lines = body.split('\n');
  const enables = lines.filter((l) => /^\s*enable\s/.test(l));
  const rest = lines.filter((l) => !/^\s*enable\s/.test(l));
  return `${enables.join('\n')}\n${k.layout.wgsl}\n${rest.join('\n')}`;
}

export class PipelineCache {
  private readonly cache = new Map<string, Promise<Kernel>>();
  private nextId = 1;
  /** Number of pipelines compiled (not cache hits); for tests and metrics. */
  compiled = 0;
  /** Called after each pipeline compiles (progress reporting: load.ts, warmup.ts): its label, `compiled` so far. */
  onCompile: ((label: string, compiled: number) => void) | null = null;

  constructor(private readonly device: GPUDevice) {}

  get(k: PipelineKey): Promise<Kernel> {
    const key = keyString(k);
    let p = this.cache.get(key);
    if (!p) {
      p = this.compile(k);
      this.cache.set(key, p);
      p.catch(() => this.cache.delete(key));
    }
    return p;
  }

  private async compile(k: PipelineKey): Promise<Kernel> {
    const label = `${k.shader}{${stable(k.defines)}}`;
    let code: string;
    try {
      code = renderSource(k);
    } catch (e) {
      throw new ShaderCompileError(k.shader, (e as Error).message);
    }
    // Bad WGSL also raises a device validation error; capture it here so it is
    // reported once, as this ShaderCompileError, and not again by the next
    // unrelated readback through Gpu.check().
    this.device.pushErrorScope('validation');
    const module = this.device.createShaderModule({ code, label });
    const scope = this.device.popErrorScope();
    const info = await module.getCompilationInfo();
    const scopeError = await scope;
    const errors = info.messages.filter((m) => m.type === 'error');
    if (errors.length) {
      throw new ShaderCompileError(label, errors.map((m) => `${m.lineNum}:${m.linePos} ${m.message}`).join('; '));
    }
    if (scopeError) throw new ShaderCompileError(label, scopeError.message);
    let pipeline: GPUComputePipeline;
    try {
      pipeline = await this.device.createComputePipelineAsync({
        label,
        layout: 'auto',
        compute: { module, entryPoint: 'main', constants: k.constants as Record<string, number> | undefined },
      });
    } catch (e) {
      throw new ShaderCompileError(label, (e as Error).message);
    }
    this.compiled++;
    this.onCompile?.(label, this.compiled);
    return { id: this.nextId++, pipeline, layout: k.layout, label };
  }
}

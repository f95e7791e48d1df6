/**
 * PipelineKey -> WGSL defines -> compiled pipeline, compiled once and cached.
 *
 * A key names a shader file in shaders/, its preprocessor defines and its
 * uniform layout; `override` constants go in `constants`. Compilation errors
 * become ShaderCompileError with the compiler's messages, so a bad variant
 * fails loudly at creation instead of producing garbage at dispatch.
 *
 * Each pipeline gets an explicit bind-group layout read from its WGSL
 * declarations (a shader whose declarations this reader does not know keeps
 * `layout: 'auto'`). The Params uniform (binding 0) is bound at a FIXED offset
 * of the step's uniform arena: a bind group names the kernel's buffers and its
 * Params slot. Steps of one shape record the same dispatches at the same arena
 * offsets, so the groups are reused step after step; a dynamic offset would
 * let one group serve every position, but costs about twice the host time per
 * setBindGroup (Dawn validates the offset each call; measured in
 * docs/benchmarks.md), on every dispatch of every step.
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
  /** Layout of bind group 0 (bind groups are created against it). */
  readonly bindGroupLayout: GPUBindGroupLayout;
}

const COMPUTE = 0x4; // GPUShaderStage.COMPUTE

/**
 * The bind-group-0 entries of a rendered kernel, from its `@group(0) @binding(n) var...`
 * declarations: Params (a uniform at binding 0, bound at a fixed offset) with its byte size as
 * the minimum binding size; storage buffers read-only or read-write as declared; storage and
 * sampled 2-D textures. Null when a declaration is not one of those, when binding 0 is not the
 * uniform, or when a group other than 0 appears: such a kernel keeps the 'auto' layout.
 */
export function bindGroupEntries(code: string, uniformBytes: number): GPUBindGroupLayoutEntry[] | null {
  const entries: GPUBindGroupLayoutEntry[] = [];
  const decl = /@group\((\d+)\)\s*@binding\((\d+)\)\s*var(?:<([^>]*)>)?\s+[A-Za-z_]\w*\s*:\s*([^;]+);/g;
  const seen = new Set<number>();
  for (const m of code.matchAll(decl)) {
    const group = Number(m[1]);
    const binding = Number(m[2]);
    if (group !== 0 || seen.has(binding)) return null;
    seen.add(binding);
    const space = (m[3] ?? '').replace(/\s+/g, '');
    const type = m[4]!.trim();
    let entry: GPUBindGroupLayoutEntry;
    if (space === 'uniform') {
      if (binding !== 0) return null;
      entry = { binding, visibility: COMPUTE, buffer: { type: 'uniform', minBindingSize: uniformBytes } };
    } else if (space === 'storage' || space === 'storage,read') {
      entry = { binding, visibility: COMPUTE, buffer: { type: 'read-only-storage' } };
    } else if (space === 'storage,read_write') {
      entry = { binding, visibility: COMPUTE, buffer: { type: 'storage' } };
    } else if (space === '') {
      const st = /^texture_storage_2d<\s*(\w+)\s*,\s*(read|write|read_write)\s*>$/.exec(type);
      const tx = /^texture_2d<\s*(f32|u32|i32)\s*>$/.exec(type);
      if (st) {
        const access = st[2] === 'read' ? 'read-only' : st[2] === 'write' ? 'write-only' : 'read-write';
        entry = { binding, visibility: COMPUTE, storageTexture: { access, format: st[1] as GPUTextureFormat, viewDimension: '2d' } };
      } else if (tx) {
        const sampleType = tx[1] === 'f32' ? 'unfilterable-float' : tx[1] === 'u32' ? 'uint' : 'sint';
        entry = { binding, visibility: COMPUTE, texture: { sampleType, viewDimension: '2d' } };
      } else return null;
    } else return null;
    entries.push(entry);
  }
  if (!seen.has(0) || entries.find((e) => e.binding === 0)?.buffer?.type !== 'uniform') return null;
  return entries.sort((a, b) => a.binding - b.binding);
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

/** A compiled (or compiling) key as its call site wrote it, for the allocation-free lookup. */
interface Recent {
  readonly layout: UniformLayout<string>;
  readonly defines: Readonly<Record<string, unknown>>;
  readonly constants: Readonly<Record<string, unknown>>;
  /** Own keys of `defines` and `constants`. */
  readonly nd: number;
  readonly nc: number;
  readonly kernel: Promise<Kernel>;
}

const NONE: Readonly<Record<string, unknown>> = Object.freeze({});

/** True when `b` has exactly the `n` keys of `a`, with identical values. */
function sameRecord(a: Readonly<Record<string, unknown>>, n: number, b: Readonly<Record<string, unknown>> | undefined): boolean {
  let m = 0;
  if (b) {
    for (const key in b) {
      if (a[key] !== b[key] || !Object.hasOwn(a, key)) return false;
      m++;
    }
  }
  return m === n;
}

export class PipelineCache {
  private readonly cache = new Map<string, Promise<Kernel>>();
  /**
   * Per shader, the keys asked for so far: ops ask for their kernel on every dispatch, so a hit
   * is a comparison of a few define values against these, with no key string built or hashed.
   */
  private readonly recent = new Map<string, Recent[]>();
  private nextId = 1;
  /** Number of pipelines compiled (not cache hits); for tests and metrics. */
  compiled = 0;
  /** Called after each pipeline compiles (progress reporting: load.ts, warmup.ts): its label, `compiled` so far. */
  onCompile: ((label: string, compiled: number) => void) | null = null;

  constructor(private readonly device: GPUDevice) {}

  get(k: PipelineKey): Promise<Kernel> {
    let list = this.recent.get(k.shader);
    if (list) {
      for (let i = 0; i < list.length; i++) {
        const r = list[i]!;
        if (r.layout === k.layout && sameRecord(r.defines, r.nd, k.defines) && sameRecord(r.constants, r.nc, k.constants)) return r.kernel;
      }
    } else this.recent.set(k.shader, (list = []));
    const key = keyString(k);
    let p = this.cache.get(key);
    if (!p) {
      p = this.compile(k);
      this.cache.set(key, p);
      p.catch(() => this.cache.delete(key));
    }
    // A copy: the caller's objects are not ours to keep (nor to see mutated).
    const defines = k.defines ? { ...k.defines } : NONE;
    const constants = k.constants ? { ...k.constants } : NONE;
    const entry: Recent = { layout: k.layout, defines, constants, nd: Object.keys(defines).length, nc: Object.keys(constants).length, kernel: p };
    list.push(entry);
    p.catch(() => {
      const i = list.indexOf(entry);
      if (i >= 0) list.splice(i, 1);
    });
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
    const entries = bindGroupEntries(code, k.layout.byteSize);
    let pipeline: GPUComputePipeline;
    let bindGroupLayout: GPUBindGroupLayout | null = null;
    try {
      if (entries) bindGroupLayout = this.device.createBindGroupLayout({ label, entries });
      pipeline = await this.device.createComputePipelineAsync({
        label,
        layout: bindGroupLayout ? this.device.createPipelineLayout({ label, bindGroupLayouts: [bindGroupLayout] }) : 'auto',
        compute: { module, entryPoint: 'main', constants: k.constants as Record<string, number> | undefined },
      });
    } catch (e) {
      throw new ShaderCompileError(label, (e as Error).message);
    }
    this.compiled++;
    this.onCompile?.(label, this.compiled);
    return { id: this.nextId++, pipeline, layout: k.layout, label, bindGroupLayout: bindGroupLayout ?? pipeline.getBindGroupLayout(0) };
  }
}

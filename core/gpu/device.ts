/**
 * The ONE place that finds a WebGPU adapter and opens a device.
 *
 * Browser and Deno use `navigator.gpu`. Node uses Dawn from the npm package
 * `webgpu`, imported lazily so browser bundles never see it; Deno can load
 * the same addon, so the Dawn backends can also be named explicitly there
 * (`auto` on Deno stays navigator.gpu). On Node the backend is chosen
 * automatically — a real GPU's native backend, else
 * SwiftShader (Vulkan ICD shipped by Debian's chromium), else OpenGL ES over
 * Mesa llvmpipe — or explicitly by name. The device is opened with the
 * adapter's full limits (compatibility mode would otherwise cap workgroups at
 * 128 invocations and larger pipelines would fail only through an uncaptured
 * error). Uncaptured device errors are collected and rethrown as typed errors
 * by `Gpu.check()` so a failed pipeline never yields silent garbage.
 */
import {
  DeviceLostError,
  GpuValidationError,
  NoAdapterError,
  UnknownBackendError,
} from '../errors.ts';

export const BACKENDS = ['auto', 'native', 'swiftshader', 'opengles', 'navigator'] as const;
export type BackendName = (typeof BACKENDS)[number];

export interface GpuOptions {
  /** Which backend to use; `auto` (default) picks the best available. */
  backend?: BackendName | string;
  powerPreference?: GPUPowerPreference;
  /** Kernel family for the context (default: `cpu` on software adapters, `gpu` elsewhere; core/ops/variant.ts). */
  variant?: 'cpu' | 'gpu';
}

export interface GpuInfo {
  /** Human-readable adapter name, e.g. "SwiftShader driver 5.0.0". */
  name: string;
  /** The backend actually used. */
  backend: Exclude<BackendName, 'auto'>;
  vendor: string;
  architecture: string;
  /** The adapter's device string, e.g. "llvmpipe-llvm-15-0-6-256-bits-" (often empty in browsers). */
  device: string;
  /** True for software rasterisers (SwiftShader, llvmpipe): CPU emulation. */
  isCpu: boolean;
  /** 'core' or 'compatibility'. */
  featureLevel: 'core' | 'compatibility';
  features: string[];
}

export interface Gpu {
  /** The instance the adapter came from (kept referenced; see Found.instance). */
  readonly instance: GPU;
  readonly device: GPUDevice;
  readonly info: GpuInfo;
  /** Capabilities kernels key their variants on. */
  readonly caps: { f16: boolean; subgroups: boolean; timestamps: boolean };
  readonly limits: GPUSupportedLimits;
  /** Throws the first uncaptured device error since the last call, if any. */
  check(): void;
  /** Runs `fn`, then throws if it raised any validation or OOM error. */
  scoped<T>(fn: () => T): Promise<T>;
  destroy(): void;
}

const SWIFTSHADER_ICD = '/usr/lib/chromium/vk_swiftshader_icd.json';

interface Found {
  /** The GPU instance: must stay referenced while the device lives — dawn.node
   *  frees the instance (and its callback queue) when this object is collected,
   *  and a later callback then crashes the process. */
  instance: GPU;
  adapter: GPUAdapter;
  backend: Exclude<BackendName, 'auto'>;
  featureLevel: 'core' | 'compatibility';
}

type DawnModule = { create(flags: string[]): GPU; globals: Record<string, unknown> };

/** `process.env` without importing node:* (core must run in browsers). */
function env(): Record<string, string | undefined> | undefined {
  const p = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process;
  return p?.env;
}

function isNode(): boolean {
  const p = (globalThis as { process?: { versions?: { node?: string } } }).process;
  return !!p?.versions?.node && !('Deno' in globalThis);
}

/** Runtimes that can load Dawn (npm:webgpu, a Node-API addon): Node, and Deno through its npm support. */
function hasDawn(): boolean {
  return isNode() || 'Deno' in globalThis;
}

/**
 * Sets the environment Dawn's backends read through getenv: the SwiftShader
 * ICD is *added* to the Vulkan loader's drivers (a real GPU stays visible) and
 * EGL runs surfaceless. Worker threads get a copy of process.env that native
 * code never sees, so a Node server calls this on its main thread before it
 * starts reader workers; device creation calls it too. User settings win.
 */
export function prepareGpuEnv(): void {
  const e = env();
  if (!e || !hasDawn()) return;
  if (!e.EGL_PLATFORM) e.EGL_PLATFORM = 'surfaceless';
  if (!e.VK_ICD_FILENAMES && !e.VK_ADD_DRIVER_FILES) e.VK_ADD_DRIVER_FILES = SWIFTSHADER_ICD;
}

let dawn: Promise<DawnModule> | undefined;
async function loadDawn(): Promise<DawnModule> {
  prepareGpuEnv();
  // A variable specifier keeps bundlers from trying to include the native addon.
  const spec = 'webgpu';
  dawn ??= import(/* @vite-ignore */ spec).then((m: DawnModule) => {
    Object.assign(globalThis, m.globals); // GPUBufferUsage & friends
    return m;
  });
  return dawn;
}

/** Mesa's llvmpipe (Dawn's OpenGL ES backend on a CPU-only host). */
export function isLlvmpipe(info: Pick<GpuInfo, 'name' | 'device'>): boolean {
  return /llvmpipe/i.test(`${info.device} ${info.name}`);
}

/** Google's SwiftShader (Dawn's Vulkan fallback, Chromium's software WebGPU). */
export function isSwiftShader(info: Pick<GpuInfo, 'name' | 'device'>): boolean {
  return /swiftshader/i.test(`${info.device} ${info.name}`);
}

function describe(a: GPUAdapter): string {
  const i = a.info;
  return i.description || i.device || i.architecture || i.vendor || 'unknown adapter';
}

function looksCpu(a: GPUAdapter): boolean {
  return /swiftshader|llvmpipe|lavapipe|softpipe|warp|cpu/i.test(
    `${a.info.description} ${a.info.device} ${a.info.architecture}`,
  );
}

async function tryNode(backend: 'native' | 'swiftshader' | 'opengles', pref?: GPUPowerPreference): Promise<Found | null> {
  const m = await loadDawn();
  if (backend === 'opengles') {
    const gpu = m.create(['backend=opengles']);
    const adapter = await gpu.requestAdapter({ featureLevel: 'compatibility', powerPreference: pref });
    return adapter ? { instance: gpu, adapter, backend, featureLevel: 'compatibility' } : null;
  }
  if (backend === 'swiftshader') {
    // SwiftShader is Vulkan's CPU ("fallback") adapter; prepareGpuEnv added its ICD.
    const gpu = m.create(['backend=vulkan']);
    const adapter = await gpu.requestAdapter({ powerPreference: pref, forceFallbackAdapter: true });
    return adapter ? { instance: gpu, adapter, backend, featureLevel: 'core' } : null;
  }
  const gpu = m.create([]);
  const adapter = await gpu.requestAdapter({ powerPreference: pref ?? 'high-performance' });
  if (!adapter || looksCpu(adapter)) return null;
  return { instance: gpu, adapter, backend, featureLevel: 'core' };
}

async function tryNavigator(pref?: GPUPowerPreference): Promise<Found | null> {
  const nav = (globalThis as { navigator?: { gpu?: GPU } }).navigator;
  if (!nav?.gpu) return null;
  const instance = nav.gpu;
  let adapter = await instance.requestAdapter({ powerPreference: pref });
  let featureLevel: 'core' | 'compatibility' = 'core';
  if (!adapter) {
    adapter = await nav.gpu.requestAdapter({ featureLevel: 'compatibility', powerPreference: pref });
    featureLevel = 'compatibility';
  }
  return adapter ? { instance, adapter, backend: 'navigator', featureLevel } : null;
}

async function findAdapter(name: BackendName, pref?: GPUPowerPreference): Promise<Found> {
  const tried: string[] = [];
  const order: Exclude<BackendName, 'auto'>[] =
    name !== 'auto' ? [name] : isNode() ? ['native', 'swiftshader', 'opengles'] : ['navigator'];
  for (const b of order) {
    tried.push(b);
    try {
      const f = b === 'navigator' ? await tryNavigator(pref) : hasDawn() ? await tryNode(b, pref) : null;
      if (f) return f;
    } catch {
      // A missing library for one backend just means: try the next one.
    }
  }
  throw new NoAdapterError(`no WebGPU adapter found (tried: ${tried.join(', ')})`, { tried });
}

/** Opens a device on the chosen backend with the adapter's full limits. */
export async function createGpu(options: GpuOptions = {}): Promise<Gpu> {
  const requested = (options.backend ?? 'auto') as string;
  if (!(BACKENDS as readonly string[]).includes(requested)) {
    throw new UnknownBackendError(requested, BACKENDS);
  }
  const found = await findAdapter(requested as BackendName, options.powerPreference);
  const { adapter } = found;
  const wanted: GPUFeatureName[] = ['shader-f16', 'subgroups', 'timestamp-query'];
  const requiredFeatures = wanted.filter((f) => adapter.features.has(f));
  const requiredLimits: Record<string, number> = {};
  const lim = adapter.limits as unknown as Record<string, number>;
  for (const key in lim) {
    const v = lim[key];
    if (typeof v === 'number') requiredLimits[key] = v;
  }
  const device = await adapter.requestDevice({ requiredFeatures, requiredLimits });

  const pending: GPUError[] = [];
  let lost: string | undefined;
  device.addEventListener('uncapturederror', (ev) => {
    pending.push((ev as GPUUncapturedErrorEvent).error);
  });
  void device.lost.then((info) => {
    lost = info.message || info.reason;
  });

  const toTyped = (err: GPUError): GpuValidationError => {
    const kind =
      typeof GPUOutOfMemoryError !== 'undefined' && err instanceof GPUOutOfMemoryError
        ? 'out-of-memory'
        : 'validation';
    return new GpuValidationError(kind, err.message);
  };

  const check = (): void => {
    if (lost !== undefined) throw new DeviceLostError(`GPU device lost: ${lost}`);
    const err = pending.shift();
    if (err) {
      pending.length = 0;
      throw toTyped(err);
    }
  };

  const info: GpuInfo = {
    name: describe(adapter),
    backend: found.backend,
    vendor: adapter.info.vendor,
    architecture: adapter.info.architecture,
    device: adapter.info.device,
    isCpu: looksCpu(adapter),
    featureLevel: found.featureLevel,
    features: [...adapter.features].map(String).sort(),
  };

  return {
    instance: found.instance,
    device,
    info,
    caps: {
      f16: device.features.has('shader-f16'),
      subgroups: device.features.has('subgroups'),
      timestamps: device.features.has('timestamp-query'),
    },
    limits: device.limits,
    check,
    async scoped<T>(fn: () => T): Promise<T> {
      device.pushErrorScope('out-of-memory');
      device.pushErrorScope('validation');
      const out = fn();
      const v = await device.popErrorScope();
      const o = await device.popErrorScope();
      const err = v ?? o;
      if (err) throw toTyped(err);
      check();
      return out;
    },
    destroy() {
      device.destroy();
    },
  };
}

/**
 * Finding onnxruntime-web for the ONNX encoder fallback (onnx_encoder.ts), and making its
 * WebGPU execution provider run on a Dawn device outside a browser.
 *
 * What: `onnxRuntime(ep)` returns a registered runtime (globalThis[Symbol.for('onnxruntime')],
 * the convention transformers.js uses, so both share one runtime in a process) or imports
 * one: `onnxruntime-web/webgpu` (WebGPU + WASM execution providers, registered) when the
 * WebGPU EP is wanted, else plain `onnxruntime-web` (WASM; its Node build outside browsers).
 * Why two: in a Node worker thread (where server readers run), a session created by the
 * `/webgpu` build leaves the thread blocked once idle (not spinning; worker.terminate() and
 * process.exit() in the worker never return, seen with 1.31.0-dev), so a reader could never
 * be stopped; the plain build's worker terminates (after a few seconds here).
 * `webgpuProvider(ctx)` returns the WebGPU EP options that run ORT on Weft's own
 * GPUDevice (same adapter, same queue), after `prepareDawn` has set up what ORT expects.
 *
 * Why the Dawn shims (Node / Deno on the `webgpu` npm package; see shared/peers/README.md):
 * - ORT's EP init insists on navigator.gpu and an adapter even when handed a device: a
 *   navigator.gpu is installed whose requestAdapter asks the context's own instance for an
 *   adapter as the context got it (OpenGL ES: featureLevel 'compatibility');
 * - dawn.node's queue.writeBuffer rejects views over a SharedArrayBuffer (ORT's threaded
 *   WASM memory): such views are copied into a plain buffer first.
 * Browsers need neither, and `prepareDawn` does nothing there. No node:* import here: the
 * model bytes come from the ModelSource (ORT would fetch() a path).
 */
import type * as Ort from 'onnxruntime-web';
import type { GpuContext } from '../gpu/context.ts';

export type OrtModule = typeof Ort;
export type OnnxExecutionProvider = 'webgpu' | 'wasm';

const KEY = Symbol.for('onnxruntime');
type AnyObj = Record<string | symbol, unknown>;

/** Makes `ort` the runtime onnxRuntime() (and transformers.js) use in this process. */
export function registerOnnxRuntime(ort: OrtModule): void {
  (globalThis as unknown as AnyObj)[KEY] = ort;
}

function isServerRuntime(): boolean {
  const p = (globalThis as { process?: { versions?: { node?: string } } }).process;
  return !!p?.versions?.node || 'Deno' in globalThis;
}

const importing = new Map<OnnxExecutionProvider, Promise<OrtModule>>();

function asOrt(m: unknown): OrtModule {
  const ort = ((m as { default?: OrtModule }).default?.InferenceSession ? (m as { default: OrtModule }).default : m) as OrtModule;
  // Outside browsers ORT's WASM threads would need worker_threads plumbing: one thread.
  if (isServerRuntime()) ort.env.wasm.numThreads = 1;
  return ort;
}

/**
 * The runtime for sessions on `ep`: the registered onnxruntime-web, else
 * `onnxruntime-web/webgpu` (imported and registered) for 'webgpu', plain `onnxruntime-web`
 * for 'wasm' (not registered: a later WebGPU user registers the WebGPU build).
 */
export async function onnxRuntime(ep: OnnxExecutionProvider = 'webgpu'): Promise<OrtModule> {
  const registered = (globalThis as unknown as AnyObj)[KEY] as OrtModule | undefined;
  if (registered) return registered;
  let p = importing.get(ep);
  if (!p) {
    p =
      ep === 'webgpu'
        ? import('onnxruntime-web/webgpu').then((m) => {
            const ort = asOrt(m);
            registerOnnxRuntime(ort);
            return ort;
          })
        : import('onnxruntime-web').then(asOrt);
    importing.set(ep, p);
  }
  return p;
}

const prepared = new WeakSet<GpuContext>();

/** Installs the Dawn shims described above for `ctx` (no-op in browsers and when repeated). */
export function prepareDawn(ctx: GpuContext): void {
  if (prepared.has(ctx) || ctx.gpu.info.backend === 'navigator') return;
  prepared.add(ctx);
  const g = globalThis as unknown as { navigator?: { gpu?: unknown }; GPUQueue?: { prototype: AnyObj } };
  if (!g.navigator?.gpu) {
    const instance = ctx.gpu.instance;
    const compat = ctx.gpu.info.featureLevel === 'compatibility';
    const fallback = ctx.gpu.info.backend === 'swiftshader';
    const gpu = {
      requestAdapter: (o: GPURequestAdapterOptions = {}) =>
        instance.requestAdapter({ ...o, ...(compat ? { featureLevel: 'compatibility' } : {}), ...(fallback ? { forceFallbackAdapter: true } : {}) }),
      getPreferredCanvasFormat: () => 'rgba8unorm',
      wgslLanguageFeatures: instance.wgslLanguageFeatures,
    };
    if (!g.navigator) (g as AnyObj).navigator = {};
    Object.defineProperty(g.navigator, 'gpu', { value: gpu, configurable: true });
  }
  const proto = g.GPUQueue?.prototype;
  if (proto && !proto[KEY]) {
    const writeBuffer = proto.writeBuffer as (...a: unknown[]) => void;
    proto.writeBuffer = function (this: unknown, buf: unknown, off: number, data: unknown, ...rest: unknown[]) {
      // TypedArray.slice copies into a fresh ArrayBuffer of the same element type, so
      // element offsets / sizes in `rest` keep their meaning.
      if (ArrayBuffer.isView(data) && typeof SharedArrayBuffer !== 'undefined' && data.buffer instanceof SharedArrayBuffer) {
        data = (data as Uint8Array).slice();
      }
      return writeBuffer.call(this, buf, off, data, ...rest);
    };
    proto[KEY] = true;
  }
}

/** WebGPU EP options running ORT on the context's device. */
export function webgpuProvider(ctx: GpuContext): { name: 'webgpu'; device: GPUDevice } {
  prepareDawn(ctx);
  return { name: 'webgpu', device: ctx.device };
}

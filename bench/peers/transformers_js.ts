/**
 * transformers.js (@huggingface/transformers 4.x) as a benchmark peer, in Node.
 *
 * Devices:
 * - `cpu`: onnxruntime-node (native), transformers.js's default in Node (its intra-op
 *   thread pool uses every core and spins, which suffers badly on a loaded machine);
 * - `cpu-1t`: the same with intraOpNumThreads = interOpNumThreads = 1.
 * - `wasm`: onnxruntime-web's WASM backend (1 thread).
 * - `webgpu`: onnxruntime-web's WebGPU EP on Dawn (the `webgpu` npm package, as Weft
 *   uses), on OpenGL ES over llvmpipe (`webgpu-opengles`) or SwiftShader Vulkan
 *   (`webgpu-swiftshader`).
 *
 * transformers.js picks its ONNX runtime once, when first imported, so this module must
 * run alone in its process (bench/generate.ts gives every case its own child) and imports
 * transformers.js lazily, after setting things up. For onnxruntime-web in Node (see
 * ../shared/peers/README.md):
 * - it is registered as the runtime via globalThis[Symbol.for('onnxruntime')]; with a
 *   registered runtime transformers.js knows no devices, so models load with
 *   `device: 'auto'` and explicit `session_options.executionProviders`;
 * - it would fetch() the model path transformers.js hands it: InferenceSession.create is
 *   wrapped to read the file instead;
 * - wasm files come from node_modules (transformers.js would point at a CDN);
 * - WebGPU: navigator.gpu is a Dawn instance whose requestAdapter asks for a
 *   compatibility adapter on OpenGL ES, and GPUQueue.writeBuffer copies views over a
 *   SharedArrayBuffer (threaded WASM memory) that dawn.node rejects;
 * - the KV cache outputs (present.*) stay on the GPU (preferredOutputLocation
 *   'gpu-buffer'), as transformers.js itself arranges for device 'webgpu'.
 *
 * Timing: `generate()` is called with the prompt ids; model.forward is wrapped so the
 * first forward of a run is the prefill; a streamer timestamps every new token.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

export type TjsDevice = 'cpu' | 'cpu-1t' | 'wasm' | 'webgpu-opengles' | 'webgpu-swiftshader';
export const TJS_DEVICES: TjsDevice[] = ['cpu', 'cpu-1t', 'wasm', 'webgpu-opengles', 'webgpu-swiftshader'];

export interface TjsOptions {
  device: TjsDevice;
  /** env.localModelPath */
  root: string;
  /** model id under root */
  name: string;
  promptIds: number[];
  newTokens: number;
  runs: number;
  warmup?: number;
  log?: (s: string) => void;
}

export interface TjsRun {
  /** First forward (the whole prompt), ms. */
  prefillMs: number;
  /** generate() call to first new token, ms. */
  ttftMs: number;
  /** (tokens - 1) / (last token - first token). */
  decodeTokS: number;
  totalMs: number;
  tokenIds: number[];
}

export interface TjsResult {
  device: TjsDevice;
  /** The execution provider / runtime actually used, for the table. */
  runtime: string;
  loadMs: number;
  /** Warm-up run wall time (includes WebGPU shader compilation). */
  warmupMs: number;
  runs: TjsRun[];
}

type AnyObj = Record<string, any>;

const SWIFTSHADER_ICD = '/usr/lib/chromium/vk_swiftshader_icd.json';

/** Installs navigator.gpu over a Dawn instance; returns a getter for the adapter's name. */
async function installDawnNavigator(backend: 'opengles' | 'swiftshader'): Promise<() => string> {
  const spec = 'webgpu';
  const dawn = (await import(spec)) as { create(flags: string[]): GPU; globals: Record<string, unknown> };
  Object.assign(globalThis, dawn.globals);
  let gpu: GPU;
  if (backend === 'opengles') {
    process.env.EGL_PLATFORM ??= 'surfaceless';
    gpu = dawn.create(['backend=opengles']);
  } else {
    process.env.VK_ICD_FILENAMES ??= SWIFTSHADER_ICD;
    gpu = dawn.create(['backend=vulkan']);
  }
  let adapterName = '';
  const nav = {
    requestAdapter: async (o: GPURequestAdapterOptions = {}) => {
      const a = await gpu.requestAdapter(backend === 'opengles' ? { ...o, featureLevel: 'compatibility' } : o);
      adapterName = a ? `${a.info.description || a.info.device || a.info.vendor}` : '';
      return a;
    },
    getPreferredCanvasFormat: () => 'rgba8unorm',
    wgslLanguageFeatures: gpu.wgslLanguageFeatures,
  };
  const g = globalThis as AnyObj;
  // Keep the instance referenced for the life of the process (dawn.node frees it on GC).
  g.__benchDawnInstance = gpu;
  if (!g.navigator) g.navigator = {};
  Object.defineProperty(g.navigator, 'gpu', { value: nav, configurable: true });
  const proto = (g.GPUQueue as { prototype: AnyObj }).prototype;
  const writeBuffer = proto.writeBuffer as (...a: unknown[]) => void;
  proto.writeBuffer = function (this: unknown, buf: unknown, off: number, data: unknown, ...rest: unknown[]) {
    // TypedArray.slice copies into a fresh (non-shared) buffer of the same element type,
    // so element offsets/sizes in `rest` keep their meaning.
    if (ArrayBuffer.isView(data) && data.buffer instanceof SharedArrayBuffer && 'slice' in data) {
      data = (data as unknown as Uint8Array).slice();
    }
    return writeBuffer.call(this, buf, off, data, ...rest);
  };
  return () => adapterName;
}

/** Registers onnxruntime-web as transformers.js's runtime (before transformers.js is imported). */
async function registerOrtWeb(webgpu: boolean): Promise<AnyObj> {
  const spec = webgpu ? 'onnxruntime-web/webgpu' : 'onnxruntime-web';
  const mod = (await import(spec)) as AnyObj;
  const req = createRequire(import.meta.url);
  // The package's require entry lives in dist/, next to the .wasm/.mjs files.
  const dist = `${dirname(req.resolve('onnxruntime-web'))}/`;
  const ort: AnyObj = { ...mod };
  ort.env.wasm.numThreads = 1;
  ort.env.wasm.wasmPaths = dist;
  const create = mod.InferenceSession.create.bind(mod.InferenceSession) as (m: unknown, o: unknown) => Promise<unknown>;
  ort.InferenceSession = {
    ...mod.InferenceSession,
    create: (m: unknown, o: unknown) => create(typeof m === 'string' ? new Uint8Array(readFileSync(m)) : m, o),
  };
  (globalThis as unknown as Record<symbol, unknown>)[Symbol.for('onnxruntime')] = ort;
  return ort;
}

export async function runTransformersJs(o: TjsOptions): Promise<TjsResult> {
  const log = o.log ?? (() => {});
  let runtime = 'onnxruntime-node (native CPU EP)';
  let sessionOptions: AnyObj | undefined;
  let device = 'cpu';
  if (o.device === 'cpu-1t') sessionOptions = { intraOpNumThreads: 1, interOpNumThreads: 1 };
  let adapterName = (): string => '';
  if (o.device !== 'cpu' && o.device !== 'cpu-1t') {
    const webgpu = o.device.startsWith('webgpu');
    let adapter: (() => string) | undefined;
    adapterName = () => adapter?.() ?? '';
    if (webgpu) adapter = await installDawnNavigator(o.device === 'webgpu-opengles' ? 'opengles' : 'swiftshader');
    const ort = await registerOrtWeb(webgpu);
    device = 'auto';
    sessionOptions = { executionProviders: [webgpu ? 'webgpu' : 'wasm'] };
    runtime = `onnxruntime-web ${ort.env.versions?.web ?? ''} ${webgpu ? 'WebGPU EP' : 'wasm, 1 thread'}`;
    if (webgpu) {
      const cfg = JSON.parse(readFileSync(join(o.root, o.name, 'config.json'), 'utf8')) as AnyObj;
      const po: Record<string, string> = {};
      for (let i = 0; i < (cfg.num_hidden_layers as number); i++) {
        po[`present.${i}.key`] = 'gpu-buffer';
        po[`present.${i}.value`] = 'gpu-buffer';
      }
      sessionOptions.preferredOutputLocation = po;
      runtime += ` on Dawn ${o.device.slice(7)}`;
    }
  }
  const tjs = (await import('@huggingface/transformers')) as AnyObj;
  const { env, AutoModelForCausalLM, Tensor } = tjs;
  env.allowRemoteModels = false;
  env.localModelPath = o.root.endsWith('/') ? o.root : `${o.root}/`;
  if (o.device === 'cpu' || o.device === 'cpu-1t') {
    runtime = `onnxruntime-node ${env.backends?.onnx?.versions?.node ?? ''} (native CPU EP, ${o.device === 'cpu' ? 'default threads' : '1 thread'})`;
  }

  const t0 = performance.now();
  const model = (await AutoModelForCausalLM.from_pretrained(o.name, {
    device,
    dtype: 'fp32',
    ...(sessionOptions ? { session_options: sessionOptions } : {}),
  })) as AnyObj;
  const loadMs = performance.now() - t0;
  if (adapterName()) runtime += ` (${adapterName()})`;

  // Prefill timing: the first forward of each generate() call.
  let forwards: number[] = [];
  const forward = model.forward.bind(model) as (x: unknown) => Promise<unknown>;
  model.forward = async (x: unknown) => {
    const s = performance.now();
    const r = await forward(x);
    forwards.push(performance.now() - s);
    return r;
  };

  const n = o.promptIds.length;
  const inputIds = new Tensor('int64', BigInt64Array.from(o.promptIds.map(BigInt)), [1, n]);
  const mask = new Tensor('int64', new BigInt64Array(n).fill(1n), [1, n]);
  const once = async (): Promise<TjsRun> => {
    forwards = [];
    const stamps: number[] = [];
    let puts = 0;
    const streamer = {
      put: () => {
        if (puts++ > 0) stamps.push(performance.now()); // the first put is the prompt
      },
      end: () => {},
    };
    const start = performance.now();
    const out = (await model.generate({
      input_ids: inputIds,
      attention_mask: mask,
      max_new_tokens: o.newTokens,
      do_sample: false,
      eos_token_id: null, // like Weft's ignoreEos: always produce newTokens tokens
      streamer,
    })) as AnyObj;
    const end = performance.now();
    const ids = (out.tolist() as bigint[][])[0]!.slice(n).map(Number);
    const first = stamps[0] ?? end;
    const last = stamps[stamps.length - 1] ?? end;
    return {
      prefillMs: forwards[0] ?? NaN,
      ttftMs: first - start,
      decodeTokS: stamps.length > 1 ? (stamps.length - 1) / ((last - first) / 1000) : NaN,
      totalMs: end - start,
      tokenIds: ids,
    };
  };

  let warmupMs = 0;
  for (let i = 0; i < (o.warmup ?? 1); i++) {
    const w = await once();
    warmupMs += w.totalMs;
    log(`  warm-up ${(w.totalMs / 1000).toFixed(1)} s`);
  }
  const runs: TjsRun[] = [];
  for (let i = 0; i < o.runs; i++) {
    const r = await once();
    runs.push(r);
    log(`  run ${i + 1}/${o.runs}: prefill ${r.prefillMs.toFixed(1)} ms, decode ${r.decodeTokS.toPrecision(3)} tok/s`);
  }
  await model.dispose?.();
  return { device: o.device, runtime, loadMs, warmupMs, runs };
}

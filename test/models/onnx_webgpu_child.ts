/**
 * Child process of onnx_encoder.test.ts (and usable by hand): loads an ONNX encoder fixture
 * on onnxruntime-web's WebGPU EP over Weft's Dawn device and prints `RESULT {json}` with the
 * max |diff| of its embeddings against a golden.json, and its timings. A separate process
 * because ORT's first WebGPU run compiles pipelines while blocking the event loop for a
 * minute or more on Dawn's CPU adapters (a test worker would stall meanwhile).
 *
 *   node --import tsx test/models/onnx_webgpu_child.ts MODEL_DIR GOLDEN_JSON [opengles|swiftshader]
 */
import { readFileSync } from 'node:fs';
import { GpuContext } from '../../core/gpu/context.ts';
import { OnnxEncoderModel } from '../../core/models/onnx_encoder.ts';
import { dirSource } from '../../server/fs_source.ts';

const [modelDir, goldenPath, backend = 'opengles'] = process.argv.slice(2);
const golden = JSON.parse(readFileSync(goldenPath!, 'utf8')) as { inputs: { text?: string; embedding?: number[] }[] };
const singles = golden.inputs.filter((r) => r.text !== undefined);
const ctx = await GpuContext.create({ backend });
const t0 = performance.now();
const m = await OnnxEncoderModel.load(ctx, dirSource(modelDir!), { executionProviders: ['webgpu'], batchDurationMs: 1 });
const loadMs = performance.now() - t0;
const t1 = performance.now();
const { vectors } = await m.embed(singles.map((r) => r.text!));
const embedMs = performance.now() - t1;
let maxDiff = 0;
vectors.forEach((v, i) => v.forEach((x, d) => (maxDiff = Math.max(maxDiff, Math.abs(x - singles[i]!.embedding![d]!)))));
console.log(`RESULT ${JSON.stringify({ ep: m.executionProvider, adapter: ctx.gpu.info.name, loadMs: Math.round(loadMs), embedMs: Math.round(embedMs), maxDiff })}`);
process.exit(0);

/**
 * GET /memory_plan on the management app (a real Service, no reader started): the plan of
 * a model from its headers on this server's device, and the refusals. The plan's numbers
 * are checked against each other and against core/models/memory_plan.ts's rules (the pool
 * is whole 16-token blocks, the total is the sum of its parts); a budget too small for
 * the model is 507 model_too_large with the numbers in `details`; bad parameters are 400
 * before any device is opened; a missing model is 422 model_format.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { buildApps } from '../../server/apps/index.ts';
import { loadConfig } from '../../server/config.ts';
import { DEFAULT_MODEL_DIR } from '../../server/paths.ts';
import { Service } from '../../server/service.ts';
import { prepareGpuEnv } from '../../core/gpu/device.ts';
import { statusOf } from '../../server/http/errors.ts';
import { ModelTooLargeError, WeftError } from '../../core/errors.ts';
import { fixtureDir } from '../helpers/tiny_decoder.ts';
import { mib, planQuery, planRows, refusalRows, type ServerPlan } from '../../web/src/memory_plan.ts';

prepareGpuEnv();
const svc = new Service(loadConfig({ env: {}, overrides: { embeddingModel: '', backend: process.env.WEFT_TEST_SERVER_BACKEND ?? 'swiftshader', logDisableTimestamps: true } }));
const { management } = buildApps(svc);
afterAll(async () => svc.close());

const plan = (q: Record<string, string>): Promise<Response> => Promise.resolve(management.request(`/memory_plan?${new URLSearchParams(q)}`));

interface PlanBody {
  architecture: string;
  format: string;
  dtype: string;
  kv_dtype: string;
  max_context: number;
  max_seqs: number;
  plan: Record<string, number | string>;
}

describe('GET /memory_plan', () => {
  it('plans the bundled model: weights, activations, reserve, a whole-block KV pool, the total', async () => {
    const res = await plan({ model: DEFAULT_MODEL_DIR, max_context: '256', max_seqs: '4', gpu_memory: String(512 * 2 ** 20) });
    expect(res.status).toBe(200);
    const b = (await res.json()) as PlanBody;
    expect(b).toMatchObject({ architecture: 'LlamaForCausalLM', format: 'safetensors', kv_dtype: 'f32', max_context: 256, max_seqs: 4 });
    const p = b.plan as Record<string, number>;
    expect((b.plan as Record<string, string>).budget_source).toBe('configured');
    expect(p.budget_bytes).toBe(512 * 2 ** 20);
    expect(p.weight_bytes).toBeGreaterThan(0);
    expect(p.kv_tokens).toBe(p.kv_blocks! * 16);
    expect(p.kv_pool_bytes).toBe(p.kv_tokens! * p.kv_bytes_per_token!);
    // A generous budget: the pool is what 4 full 256-token sequences can use, no more.
    expect(p.kv_tokens).toBe(4 * 256);
    expect(p.full_context_seqs).toBe(4);
    expect(p.total_bytes).toBe(p.weight_bytes! + p.activation_bytes! + p.reserve_bytes! + p.kv_pool_bytes!);
  });

  it('plans a Gemma 2 checkpoint (a variant of the same decoder) with f16 and q8 KV caches; auto is f32 without shader-f16', async () => {
    const f32 = (await (await plan({ model: fixtureDir('gemma2'), max_context: '64', gpu_memory: String(2 ** 30) })).json()) as PlanBody;
    const q8 = (await (await plan({ model: fixtureDir('gemma2'), max_context: '64', gpu_memory: String(2 ** 30), kv_cache_dtype: 'q8' })).json()) as PlanBody;
    expect(f32.architecture).toBe('Gemma2ForCausalLM');
    // q8 rows: headDim int8 + one f32 scale, against headDim f32 (head_dim 16: 20 vs 64 bytes).
    expect((q8.plan.kv_bytes_per_token as number) / (f32.plan.kv_bytes_per_token as number)).toBeCloseTo(20 / 64, 6);
    const f16 = (await (await plan({ model: fixtureDir('gemma2'), max_context: '64', gpu_memory: String(2 ** 30), kv_cache_dtype: 'f16' })).json()) as PlanBody;
    expect(f16.kv_dtype).toBe('f16');
    expect(f32.kv_dtype).toBe('f32'); // auto: the emulators here have no shader-f16
    expect((f16.plan.kv_bytes_per_token as number) / (f32.plan.kv_bytes_per_token as number)).toBe(0.5);
    const bad = await plan({ model: fixtureDir('gemma2'), kv_cache_dtype: 'f8' });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { message: string } }).error.message).toMatch(/auto, f32, f16, q8/);
  });

  it('a budget the model cannot fit is 507 model_too_large with the numbers', async () => {
    const res = await plan({ model: DEFAULT_MODEL_DIR, gpu_memory: String(2 ** 20) });
    expect(res.status).toBe(507);
    const e = (await res.json()) as { error: { code: string; message: string; details: Record<string, unknown> } };
    expect(e.error.code).toBe('model_too_large');
    expect(e.error.message).toMatch(/does not fit/);
    expect(e.error.details).toMatchObject({ budgetBytes: 2 ** 20, budgetSource: 'configured' });
    for (const k of ['weightBytes', 'activationBytes', 'reserveBytes', 'kvBytesPerToken', 'minKvBytes']) expect(typeof e.error.details[k]).toBe('number');
  });

  it("the console's calculator shows the route's answers: the plan's rows, or the refusal's numbers", async () => {
    const path = planQuery({ model: DEFAULT_MODEL_DIR, maxContext: 256, maxSeqs: 4, dtype: 'f32', kv: 'q8' });
    expect(path).toBe(`memory_plan?${new URLSearchParams({ model: DEFAULT_MODEL_DIR, max_context: '256', max_seqs: '4', dtype: 'f32', kv_cache_dtype: 'q8' })}`);
    const ok = (await (await management.request(`/${path}&gpu_memory=${512 * 2 ** 20}`)).json()) as ServerPlan;
    const rows = Object.fromEntries(planRows(ok).map(([, v, id]) => [id, v]));
    expect(rows['mp-weights']).toBe(mib(ok.plan!.weight_bytes));
    expect(rows['mp-kv']).toContain(`${ok.plan!.kv_tokens.toLocaleString('en-US')} tokens`);
    expect(rows['mp-seqs']).toBe('4 sequences of 256 tokens');
    expect(rows['mp-budget']).toBe('512.0 MiB (configured)');
    const refused = (await (await plan({ model: DEFAULT_MODEL_DIR, gpu_memory: String(2 ** 20) })).json()) as { error: { details: unknown } };
    const r = Object.fromEntries(refusalRows(refused.error.details).map(([, v, id]) => [id, v]));
    expect(Object.keys(r).sort()).toEqual(['mp-activations', 'mp-budget', 'mp-device', 'mp-min-kv', 'mp-reserve', 'mp-weights']);
    expect(r['mp-budget']).toBe('1.0 MiB (configured)');
  });

  it('maps model_too_large to 507 also when rebuilt from a worker (code kept, class lost)', () => {
    expect(statusOf(new ModelTooLargeError('x'))).toBe(507);
    const rebuilt = new WeftError('model_too_large', 'x');
    expect(statusOf(rebuilt)).toBe(507);
  });

  it.each([
    [{}, 'model'],
    [{ model: DEFAULT_MODEL_DIR, max_context: '0' }, 'max_context'],
    [{ model: DEFAULT_MODEL_DIR, max_seqs: 'many' }, 'max_seqs'],
    [{ model: DEFAULT_MODEL_DIR, dtype: 'int3' }, 'dtype'],
    [{ model: DEFAULT_MODEL_DIR, kv_cache_dtype: 'f16x' }, 'kv_cache_dtype'],
    [{ model: DEFAULT_MODEL_DIR, gpu_memory: '-1' }, 'gpu_memory'],
  ])('bad parameters are 400 invalid_request naming the field (%j)', async (q, field) => {
    const res = await plan(q as Record<string, string>);
    expect(res.status).toBe(400);
    const e = (await res.json()) as { error: { code: string; details: { field: string } } };
    expect(e.error.code).toBe('invalid_request');
    expect(e.error.details.field).toBe(field);
  });

  it('a model path that does not exist is 422 model_format naming the path (as when a reader loads it)', async () => {
    const res = await plan({ model: '/nonexistent/model/dir' });
    expect(res.status).toBe(422);
    const e = (await res.json()) as { error: { code: string; details: { path: string } } };
    expect(e.error).toMatchObject({ code: 'model_format', details: { path: '/nonexistent/model/dir' } });
  });
});

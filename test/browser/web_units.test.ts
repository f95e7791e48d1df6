/**
 * The web app's pure parts, without a browser: the memory calculator's
 * formula, the SSE and Prometheus parsers, API base resolution and the
 * chart axis.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { resolveBase } from '../../web/src/api.ts';
import { niceMax } from '../../web/src/charts.ts';
import { kvBytesPerTokenLayer } from '../../core/ops/kv_write.ts';
import { estimateMemory, kvRowBytes, matrixBytes, shapeFromConfig } from '../../web/src/memory.ts';
import { parsePrometheus, rate, total } from '../../web/src/prom.ts';
import { SseParser } from '../../web/src/sse.ts';

const stories = shapeFromConfig(JSON.parse(readFileSync('models/stories260K/config.json', 'utf8')) as Record<string, unknown>);

describe('memory calculator', () => {
  it('counts stories260K exactly: its f32 weights are the safetensors payload', () => {
    expect(stories).toEqual({ hidden: 64, layers: 5, heads: 8, kvHeads: 4, headDim: 8, intermediate: 172, vocab: 512, tie: true });
    const e = estimateMemory(stories, { dtype: 'f32', contextLength: 512, batch: 1, kv: 'f32' });
    expect(e.params).toBe(260_032);
    expect(e.weightBytes).toBe(260_032 * 4);
    // K and V, 5 layers, 4 kv heads x 8 dims, f32.
    expect(e.kvBytesPerToken).toBe(2 * 5 * 4 * 8 * 4);
    expect(e.kvBytes).toBe(1280 * 512);
    expect(e.totalBytes).toBe(e.weightBytes + e.kvBytes);
  });

  it('prices quantized matrices at 34/32 and 18/32 bytes, falling back to f16 for rows not a multiple of 32', () => {
    expect(matrixBytes(64, 64, 'q8_0')).toBe(64 * 2 * 34);
    expect(matrixBytes(64, 64, 'q4_0')).toBe(64 * 2 * 18);
    expect(matrixBytes(64, 172, 'q4_0')).toBe(64 * 172 * 2);
    expect(matrixBytes(10, 10, 'f16')).toBe(200);
  });

  it('an untied 7B-style shape: embedding + head + 32 layers, KV scales with context x batch, 8-bit KV', () => {
    const s = { hidden: 4096, layers: 32, heads: 32, kvHeads: 8, headDim: 128, intermediate: 14336, vocab: 128256, tie: false };
    const f16 = estimateMemory(s, { dtype: 'f16', contextLength: 8192, batch: 2, kv: 'f32' });
    const layer = 4096 * (4096 + 2 * 1024) + 4096 * 4096 + 3 * 4096 * 14336;
    expect(f16.params).toBe(2 * 128256 * 4096 + 32 * layer + 65 * 4096);
    expect(f16.weightBytes).toBe((2 * 128256 * 4096 + 32 * layer) * 2 + 65 * 4096 * 4);
    expect(f16.kvBytes).toBe(2 * 32 * 1024 * 4 * 8192 * 2);
    const q8kv = estimateMemory(s, { dtype: 'q4_0', contextLength: 8192, batch: 2, kv: 'q8' });
    expect(q8kv.kvBytes).toBe(2 * 32 * 8 * (128 + 4) * 8192 * 2); // int8 rows + one f32 scale each
    expect(q8kv.weightBytes).toBeLessThan(f16.weightBytes / 3);
  });

  it('prices KV rows exactly as the engine lays them out', () => {
    for (const [kvHeads, headDim] of [[4, 8], [8, 128], [2, 64]] as const) {
      for (const kv of ['f32', 'f16', 'q8'] as const) expect(2 * kvHeads * kvRowBytes(headDim, kv)).toBe(kvBytesPerTokenLayer(kvHeads, headDim, kv));
    }
  });

  it('rounds context up to 16-token KV blocks and reads head_dim = hidden / heads when absent', () => {
    expect(estimateMemory(stories, { dtype: 'f32', contextLength: 17, batch: 1, kv: 'f32' }).kvBytes).toBe(1280 * 32);
    expect(shapeFromConfig({ hidden_size: 512, num_attention_heads: 8, num_hidden_layers: 2, intermediate_size: 1024, vocab_size: 100 })).toMatchObject({ headDim: 64, kvHeads: 8, tie: false });
    expect(() => shapeFromConfig({ hidden_size: 64 })).toThrow(/num_attention_heads/);
  });
});

describe('SSE parser', () => {
  it('parses default, named and multi-line events across arbitrary chunk boundaries', () => {
    const stream = 'data: {"text":"a","token_id":1}\n\n: comment\nevent: done\ndata: {"finish_reason":"length"}\n\r\ndata: x\ndata: y\r\n\r\n';
    for (let cut = 0; cut <= stream.length; cut++) {
      const p = new SseParser();
      const evs = [...p.push(stream.slice(0, cut)), ...p.push(stream.slice(cut))];
      expect(evs, `cut at ${cut}`).toEqual([
        { event: 'message', data: '{"text":"a","token_id":1}' },
        { event: 'done', data: '{"finish_reason":"length"}' },
        { event: 'message', data: 'x\ny' },
      ]);
    }
  });
});

describe('Prometheus parser', () => {
  const text = [
    '# HELP weft_queue_depth Requests waiting.',
    '# TYPE weft_queue_depth gauge',
    'weft_queue_depth{reader_id="a",consumer_group="primary"} 2',
    'weft_queue_depth{reader_id="b",consumer_group="x \\"q\\""} 3',
    'weft_generated_tokens_total 1200',
    'weft_request_duration_seconds_bucket{le="+Inf"} 4',
  ].join('\n');

  it('reads samples with labels, sums over label sets and filters', () => {
    const m = parsePrometheus(text);
    expect(m).toHaveLength(4);
    expect(m[1]!.labels).toEqual({ reader_id: 'b', consumer_group: 'x "q"' });
    expect(total(m, 'weft_queue_depth')).toBe(5);
    expect(total(m, 'weft_queue_depth', { reader_id: 'a' })).toBe(2);
    expect(total(m, 'weft_batch_size')).toBeNull();
    expect(m[3]!.labels.le).toBe('+Inf');
  });

  it('turns a counter into a rate, treating a drop as a restart', () => {
    expect(rate({ at: 0, value: 100 }, { at: 2000, value: 300 })).toBe(100);
    expect(rate({ at: 0, value: 100 }, { at: 1000, value: 40 })).toBe(40);
    expect(rate(null, { at: 1, value: 1 })).toBeNull();
  });
});

describe('API bases and chart axis', () => {
  it('resolves relative, absolute and :PORT bases against the page', () => {
    const page = 'http://host.example:3000/weft/ui/#/playground';
    expect(resolveBase('../', page)).toBe('http://host.example:3000/weft/');
    expect(resolveBase('./', page)).toBe('http://host.example:3000/weft/ui/');
    expect(resolveBase(':3001', page)).toBe('http://host.example:3001/');
    expect(resolveBase(':3001/mgmt', page)).toBe('http://host.example:3001/mgmt/');
    expect(resolveBase('https://api.example/v', page)).toBe('https://api.example/v/');
  });

  it('picks nice y-axis maxima, whole halves for integer series', () => {
    expect([0, 0.7, 3, 180, 250, 251].map((v) => niceMax(v))).toEqual([1, 1, 5, 200, 250, 500]);
    expect([0, 1, 3, 5, 11, 35, 41].map((v) => niceMax(v, true))).toEqual([2, 2, 4, 10, 20, 40, 100]);
  });
});

/**
 * An encoder reader on NATS: `weft reader --nats --model use-lite` (the
 * bundled USE-Lite) serves /v1/embeddings through a front end with the same
 * vectors as the same model loaded in-process; embeddings travel as raw
 * float bytes (wire_codec.ts). One reader process, one front end.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kill, readerGroups, startFrontEnd, startNats, startReader, type FrontEnd, type NatsServer, type ReaderProc } from './nats_helpers.ts';
import { until } from './remote_helpers.ts';

let nats: NatsServer;
let reader: ReaderProc;
let fe: FrontEnd;

beforeAll(async () => {
  nats = await startNats();
  [reader, fe] = await Promise.all([
    startReader(nats.url, 'far-embed', ['--model', 'use-lite', '--reader-id', 'far-embed-0']),
    startFrontEnd({ url: nats.url }, "model: ''\nembedding_model: use-lite\nembedding_consumer_group: local-embed\nbackend: opengles"),
  ]);
  await until('both encoders ready', async () => {
    const g = await readerGroups(fe);
    return g['far-embed']?.[0]?.ready && g['local-embed']?.[0]?.ready;
  }, 60_000);
}, 150_000);

afterAll(async () => {
  for (const p of [reader, fe]) if (p) await kill(p.child);
  await nats?.stop();
}, 30_000);

const embed = async (model: string, input: string[]): Promise<{ status: number; vectors: number[][] }> => {
  const res = await fetch(`${fe.inference}/v1/embeddings`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model, input }) });
  const j = (await res.json()) as { data?: { embedding: number[] }[] };
  return { status: res.status, vectors: (j.data ?? []).map((d) => d.embedding) };
};

describe('an encoder reader on NATS', () => {
  it('embeds like the same model in-process', async () => {
    const input = ['hello world', 'a cat sat on the mat', 'NATS carries the vectors'];
    const far = await embed('far-embed', input);
    const local = await embed('local-embed', input);
    expect(far.status).toBe(200);
    expect(local.status).toBe(200);
    expect(far.vectors).toHaveLength(3);
    for (let i = 0; i < 3; i++) {
      expect(far.vectors[i]!.length).toBe(local.vectors[i]!.length);
      for (let k = 0; k < far.vectors[i]!.length; k++) expect(far.vectors[i]![k]).toBeCloseTo(local.vectors[i]![k]!, 5);
    }
  }, 60_000);

  it('a generation request to the encoder group is refused with wrong_reader_type', async () => {
    const res = await fetch(`${fe.inference}/generate`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ text: 'x', consumer_group: 'far-embed' }) });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe('wrong_reader_type');
  });
});

/**
 * The `POST /api/v1/documents` contract (service-interface §2, §4.1, §7) and
 * the routes around it, over HTTP with the hash test embedder (no GPU: the
 * contract, not the model, is under test), defined once and run over each
 * store backend (backends.ts) by api.test.ts (in-memory PGlite) and
 * api_postgres.test.ts (PostgreSQL through `pg`, a real server process):
 *  - 202 when every entry is accepted; null doc_id assigned; bytes vs path;
 *    owners as a string or a list;
 *  - 207 with each entry in exactly one list: duplicates within a request
 *    and across requests (content, reused doc_id), invalid entries with
 *    their reasons (bad base64, missing fields, traversal, outside the
 *    roots, symlink escape, oversize, unknown category, …);
 *  - 400 for malformed requests (and 413 for an oversized body), storing
 *    nothing;
 *  - records: states, counts, timestamps, 404s, delete, failed documents;
 *  - wait_for_completion answers with final states;
 *  - search ranking, category / owner filters, owners seeing only their own
 *    documents with auth on and off.
 */
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FreshStore, StoreBackend } from './backends.ts';
import { b64, documentsApp, hashEmbedder, json, waitReady, type DocumentsApp } from './helpers.ts';

type Entry = Record<string, unknown> & { index: number; reason?: string; doc_id: string | null };
type LoadBody = { accepted: Entry[]; duplicate: Entry[]; invalid: Entry[] };

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** Registers the contract tests over `backend` (call at a test file's top level). */
export function apiContract(backend: StoreBackend): void {
  const root = mkdtempSync(join(tmpdir(), 'weft-docs-roots-'));
  const outside = mkdtempSync(join(tmpdir(), 'weft-docs-outside-'));
  mkdirSync(join(root, 'sub'));
  writeFileSync(join(root, 'notes.md'), '# Notes\n\nImported from the import root by path.');
  writeFileSync(join(root, 'sub', 'deep.txt'), 'A file in a sub-directory of the root.');
  writeFileSync(join(root, 'empty.txt'), '');
  writeFileSync(join(outside, 'secret.txt'), 'outside the roots');
  symlinkSync(join(outside, 'secret.txt'), join(root, 'escape.txt'));

  let t: DocumentsApp;
  let store: FreshStore;
  const load = async (body: unknown, headers: Record<string, string> = {}): Promise<{ status: number; body: LoadBody & Record<string, unknown> }> => {
    const r = await t.app.request('/api/v1/documents', json(body, headers));
    return { status: r.status, body: (await r.json()) as LoadBody & Record<string, unknown> };
  };
  const file = (name: string, text: string, extra: Record<string, unknown> = {}): Record<string, unknown> => ({ name, doc_id: null, bytes: b64(text), path: '', category: 'kb', ...extra });

  beforeAll(async () => {
    store = await backend.fresh();
    t = await documentsApp({
      embedder: hashEmbedder(),
      config: { ...store.config, importRoots: [root], limits: { maxFileBytes: 2000, maxFilesPerRequest: 40, maxRequestBytes: 200_000, categories: ['kb', 'faq', 'pets', 'geo'] } },
    });
  });
  afterAll(async () => {
    await t?.close();
    await store?.close();
    for (const d of [root, outside]) rmSync(d, { recursive: true, force: true });
  });

  describe('POST /api/v1/documents', () => {
    const given = '6f1c4a52-7d3e-4b8a-9c0f-1e2d3c4b5a69';
    it('202 when all are accepted: null doc_id assigned, bytes or path, owners as string or list', async () => {
      const r = await load({
        files: [
          file('a.txt', 'Alpha document about apples.', { owners: 'alice' }),
          { name: 'notes.md', doc_id: given.toUpperCase(), bytes: '', path: 'notes.md', category: 'kb', owners: ['bob', 'alice', 'bob'] },
          { name: 'deep.txt', bytes: '', path: join(root, 'sub', 'deep.txt'), category: 'faq' },
        ],
      });
      expect(r.status).toBe(202);
      expect(r.body.duplicate).toEqual([]);
      expect(r.body.invalid).toEqual([]);
      const [a, b, c] = r.body.accepted;
      expect(a).toMatchObject({ index: 0, name: 'a.txt', bytes: '', path: '', category: 'kb', owners: ['alice'], format: 'txt' });
      expect(a!.doc_id).toMatch(UUID);
      expect(b).toMatchObject({ index: 1, doc_id: given, path: 'notes.md', owners: ['alice', 'bob'], format: 'md' });
      expect(c).toMatchObject({ index: 2, owners: [], format: 'txt' });
      for (const e of r.body.accepted) expect((await waitReady(t.app, e.doc_id!)).state).toBe('ready');
    });

    it('207: every entry in exactly one list, with machine-readable reasons', async () => {
      const other = '0b7e6d5c-4a3b-4c2d-8e1f-9a8b7c6d5e4f';
      const entries: unknown[] = [
        file('new.txt', 'A brand new text about rivers.', { doc_id: other }), // 0 accepted
        file('copy.txt', 'A brand new text about rivers.'), // 1 same content, category, owners as 0
        file('copy2.txt', 'A brand new text about rivers.', { category: 'faq' }), // 2 other category: accepted
        file('copy3.txt', 'A brand new text about rivers.', { owners: ['carol'] }), // 3 other owners: accepted
        file('reuse.txt', 'Different text entirely.', { doc_id: given }), // 4 doc_id taken by an earlier request
        file('reuse2.txt', 'Yet another text.', { doc_id: other }), // 5 doc_id of entry 0
        file('again.txt', 'Alpha document about apples.', { owners: ['alice'] }), // 6 same as an earlier request's
        file('b64.txt', '', { bytes: 'this is not base64!!' }), // 7
        { name: 'nocat.txt', bytes: b64('x'), path: '' }, // 8
        { name: 'up.txt', bytes: '', path: '../etc/passwd', category: 'kb' }, // 9
        { name: 'abs.txt', bytes: '', path: join(outside, 'secret.txt'), category: 'kb' }, // 10
        file('big.txt', 'x'.repeat(2001)), // 11
        { name: 'both.txt', bytes: b64('x'), path: 'notes.md', category: 'kb' }, // 12
        { name: 'none.txt', bytes: '', path: '', category: 'kb' }, // 13
        { bytes: b64('x'), path: '', category: 'kb' }, // 14
        file('id.txt', 'x', { doc_id: 'abc' }), // 15
        42, // 16
        file('own.txt', 'x', { owners: [''] }), // 17
        { name: 'blob.bin', bytes: b64(new Uint8Array([0, 1, 2, 3, 255])), path: '', category: 'kb' }, // 18
        file('extra.txt', 'x', { color: 'red' }), // 19
        { name: 'escape.txt', bytes: '', path: 'escape.txt', category: 'kb' }, // 20
        file('cat.txt', 'x', { category: 'secret' }), // 21
        { name: 'gone.txt', bytes: '', path: 'gone.txt', category: 'kb' }, // 22
        { name: 'empty.txt', bytes: '', path: 'empty.txt', category: 'kb' }, // 23
        file('copy4.txt', 'A brand new text about rivers.', { owners: 'carol' }), // 24 same owners as 3 (string form)
      ];
      const r = await load({ files: entries });
      expect(r.status).toBe(207);
      const where = new Map<number, string>();
      for (const list of ['accepted', 'duplicate', 'invalid'] as const) {
        for (const e of r.body[list]) {
          expect(where.has(e.index), `entry ${e.index} reported twice`).toBe(false);
          where.set(e.index, list === 'accepted' ? 'accepted' : e.reason!);
          expect(e.bytes).toBe('');
        }
      }
      expect(Object.fromEntries([...where].sort((x, y) => x[0] - y[0]))).toEqual({
        0: 'accepted', 1: 'duplicate_content', 2: 'accepted', 3: 'accepted', 4: 'duplicate_doc_id', 5: 'duplicate_doc_id',
        6: 'duplicate_content', 7: 'invalid_base64', 8: 'missing_category', 9: 'path_traversal', 10: 'path_not_allowed',
        11: 'file_too_large', 12: 'conflicting_content', 13: 'missing_content', 14: 'missing_name', 15: 'invalid_doc_id',
        16: 'invalid_entry', 17: 'invalid_owners', 18: 'unsupported_format', 19: 'unknown_field', 20: 'path_not_allowed',
        21: 'unknown_category', 22: 'path_not_found', 23: 'empty_file', 24: 'duplicate_content',
      });
      const dup = (i: number): Entry => r.body.duplicate.find((e) => e.index === i)!;
      expect(dup(1)).toMatchObject({ duplicate_of: other, doc_id: null });
      expect(dup(4)).toMatchObject({ duplicate_of: given, doc_id: given });
      expect(dup(24)).toMatchObject({ duplicate_of: r.body.accepted.find((e) => e.index === 3)!.doc_id });
      expect(r.body.invalid.find((e) => e.index === 7)).toMatchObject({ name: 'b64.txt', category: 'kb', message: expect.any(String) });
      for (const e of r.body.accepted) expect((await waitReady(t.app, e.doc_id!)).state).toBe('ready');
    });

    it('400 for a malformed request, 413 for an oversized body; nothing is stored', async () => {
      const before = ((await (await t.app.request('/api/v1/documents/status')).json()) as { states: Record<string, number> }).states;
      const bad = async (body: unknown, code: string, status = 400): Promise<void> => {
        const res = await t.app.request('/api/v1/documents', json(body));
        expect(res.status, JSON.stringify(body).slice(0, 80)).toBe(status);
        expect(((await res.json()) as { error: { code: string } }).error.code).toBe(code);
      };
      const one = [file('ok.txt', 'would be fine')];
      await bad('{not json', 'invalid_json');
      await bad([1, 2], 'invalid_request');
      await bad({}, 'invalid_request');
      await bad({ files: 'a.txt' }, 'invalid_request');
      await bad({ files: [] }, 'invalid_request');
      await bad({ files: Array.from({ length: 41 }, (_, i) => file(`f${i}.txt`, `text ${i}`)) }, 'too_many_files');
      await bad({ files: one, chunk_units: 3 }, 'invalid_chunk_units');
      await bad({ files: one, chunk_units: 100000 }, 'invalid_chunk_units');
      await bad({ files: one, chunk_units: 64, chunk_overlap: 40 }, 'invalid_chunk_overlap');
      await bad({ files: one, chunk_units: 1.5 }, 'invalid_request');
      await bad({ files: one, reader: 'xls' }, 'unknown_reader');
      await bad({ files: one, chunker: { type: 'magic' } }, 'unknown_chunker');
      await bad({ files: one, chunker: { type: 'tokens', size: 3 } }, 'unknown_field');
      await bad({ files: one, embedder: 'other-model' }, 'unknown_embedder');
      await bad({ files: one, wait_for_completion: 'yes' }, 'invalid_request');
      await bad({ files: one, colour: 1 }, 'unknown_field');
      await bad({ files: [file('huge.txt', 'y'.repeat(190_000))] }, 'body_too_large', 413);
      const after = ((await (await t.app.request('/api/v1/documents/status')).json()) as { states: Record<string, number> }).states;
      expect(after).toEqual(before);
    });

    it('options: forced reader, token chunker, chunk settings stored with the document', async () => {
      const r = await load({ files: [file('data.txt', 'a,b\n1,2\n')], reader: { type: 'csv' }, chunker: 'tokens', chunk_units: 16, chunk_overlap: 4, embedder: 'hash-test', wait_for_completion: true });
      expect(r.status).toBe(202);
      const rec = (await (await t.app.request(`/api/v1/document/${r.body.accepted[0]!.doc_id}`)).json()) as Record<string, unknown>;
      expect(rec).toMatchObject({ format: 'csv', state: 'ready', options: { reader: 'csv', chunker: 'tokens', chunk_units: 16, chunk_overlap: 4, embedder: 'hash-test' } });
      const chunks = await (await t.docs.ready()).store.chunks(rec.doc_id as string);
      expect(chunks.map((c) => c.text)).toEqual(['a: 1 | b: 2']);
    });
  });

  describe('document records', () => {
    it('GET: state, counts, timestamps; 404 for unknown ids; DELETE removes', async () => {
      const text = Array.from({ length: 30 }, (_, i) => `Sentence ${i} of a longer text.`).join(' ');
      const r = await load({ files: [file('long.txt', text)], chunk_units: 24, chunk_overlap: 4, wait_for_completion: true });
      const id = r.body.accepted[0]!.doc_id!;
      expect(r.body.accepted[0]).toMatchObject({ state: 'ready', error: null });
      const rec = (await (await t.app.request(`/api/v1/document/${id}`)).json()) as Record<string, any>;
      expect(rec).toMatchObject({ doc_id: id, name: 'long.txt', state: 'ready', error: null, attempts: 1, source: 'bytes', size_bytes: text.length });
      expect(rec.counts.chunks).toBeGreaterThan(5);
      expect(rec.counts.characters).toBe(text.length);
      expect(rec.counts.tokens).toBeGreaterThan(7 * 30);
      const [created, started, finished] = [rec.created_at, rec.started_at, rec.finished_at].map((s: string) => Date.parse(s));
      expect(created).toBeLessThanOrEqual(started!);
      expect(started).toBeLessThanOrEqual(finished!);
      const chunks = await (await t.docs.ready()).store.chunks(id);
      expect(chunks.map((c) => c.index)).toEqual([...chunks.keys()]);

      for (const unknown of ['00000000-0000-4000-8000-000000000000', 'not-a-uuid']) {
        const res = await t.app.request(`/api/v1/document/${unknown}`);
        expect(res.status).toBe(404);
        expect(((await res.json()) as { error: { code: string } }).error.code).toBe('document_not_found');
      }
      expect((await t.app.request(`/api/v1/document/${id}`, { method: 'DELETE' })).status).toBe(200);
      expect((await t.app.request(`/api/v1/document/${id}`)).status).toBe(404);
      expect((await t.app.request(`/api/v1/document/${id}`, { method: 'DELETE' })).status).toBe(404);
      expect(await (await t.docs.ready()).store.chunks(id)).toEqual([]);
      // Deleted: the same content may be loaded again.
      expect((await load({ files: [file('long.txt', text)] })).status).toBe(202);
    });

    it('wait_for_completion answers after processing, with final states (failed with its error)', async () => {
      const r = await load({
        files: [file('ok.md', '# Title\n\nSome body text.'), { name: 'broken.pdf', bytes: b64('%PDF-1.4 not really a pdf'), path: '', category: 'kb' }],
        wait_for_completion: true,
      });
      expect(r.status).toBe(202);
      expect(r.body.accepted.map((e) => e.state)).toEqual(['ready', 'failed']);
      expect(r.body.accepted[1]!.error).toMatchObject({ code: 'document_unreadable' });
      const rec = (await (await t.app.request(`/api/v1/document/${r.body.accepted[1]!.doc_id}`)).json()) as Record<string, any>;
      expect(rec).toMatchObject({ state: 'failed', error: { code: 'document_unreadable' }, attempts: 1 });
      expect(rec.finished_at).toEqual(expect.any(String));
    });
  });

  describe('search', () => {
    const ids: Record<string, string> = {};
    beforeAll(async () => {
      const r = await load({
        files: [
          file('cats.txt', 'Cats purr softly and chase mice around the barn at night.', { category: 'pets', owners: 'alice' }),
          file('dogs.txt', 'Dogs bark loudly and fetch sticks in the park every morning.', { category: 'pets', owners: ['bob'] }),
          file('rivers.txt', 'Rivers carry water from mountains down to the sea.', { category: 'geo' }),
        ],
        wait_for_completion: true,
      });
      expect(r.body.accepted.map((e) => e.state)).toEqual(['ready', 'ready', 'ready']);
      for (const e of r.body.accepted) ids[e.name as string] = e.doc_id!;
    });
    const search = async (body: Record<string, unknown>, headers: Record<string, string> = {}, app = t.app): Promise<{ status: number; names: string[]; results: any[] }> => {
      const res = await app.request('/api/v1/documents/search', json({ top_k: 10, category: ['pets', 'geo'], ...body }, headers));
      const j = (await res.json()) as { results: any[] };
      return { status: res.status, names: (j.results ?? []).map((h) => h.document.name), results: j.results };
    };

    it('ranks by similarity and returns chunks with scores and their documents', async () => {
      const r = await search({ query: 'which animal will chase mice in the barn?' });
      expect(r.names[0]).toBe('cats.txt');
      expect(r.results[0]).toMatchObject({ chunk: { index: 0, text: expect.stringContaining('Cats purr') }, document: { doc_id: ids['cats.txt'], category: 'pets', owners: ['alice'] } });
      const scores = r.results.map((h) => h.score as number);
      expect([...scores].sort((a, b) => b - a)).toEqual(scores);
      expect((await search({ query: 'water flowing to the sea', top_k: 1 })).names).toEqual(['rivers.txt']);
    });

    it('filters on category and owners', async () => {
      expect((await search({ query: 'animals', category: 'geo' })).names).toEqual(['rivers.txt']);
      expect((await search({ query: 'animals', owners: 'bob' })).names).toEqual(['dogs.txt']);
      expect((await search({ query: 'x', category: [] })).status).toBe(400);
    });

    it('an owner sees only documents without owners and its own (auth off, owner header sent)', async () => {
      const bob = { 'x-weft-owner': 'bob' };
      expect(new Set((await search({ query: 'cats and dogs and rivers' }, bob)).names)).toEqual(new Set(['dogs.txt', 'rivers.txt']));
      expect((await search({ query: 'cats', owners: 'alice' }, bob)).names).toEqual([]);
      expect((await t.app.request(`/api/v1/document/${ids['cats.txt']}`, { headers: bob })).status).toBe(404);
      expect((await t.app.request(`/api/v1/document/${ids['cats.txt']}`, { method: 'DELETE', headers: bob })).status).toBe(404);
      expect((await t.app.request(`/api/v1/document/${ids['dogs.txt']}`, { headers: bob })).status).toBe(200);
    });

    it('with auth on: no owner header → public documents only; a key is required', async () => {
      const store2 = await backend.fresh();
      const secured = await documentsApp({ embedder: hashEmbedder(), apiKeys: ['k1'], config: store2.config });
      try {
        const key = { authorization: 'Bearer k1' };
        const up = await secured.app.request('/api/v1/documents', json({
          files: [file('cats.txt', 'Cats purr and chase mice.', { owners: 'alice' }), file('rivers.txt', 'Rivers run to the sea.')],
          wait_for_completion: true,
        }, key));
        expect(up.status).toBe(202);
        expect((await secured.app.request('/api/v1/documents/search', json({ query: 'cats' }))).status).toBe(401);
        expect((await search({ query: 'cats mice', category: 'kb' }, key, secured.app)).names).toEqual(['rivers.txt']);
        expect((await search({ query: 'cats mice', category: 'kb' }, { ...key, 'x-weft-owner': 'alice' }, secured.app)).names).toEqual(['cats.txt', 'rivers.txt']);
        const catsId = ((await up.json()) as LoadBody).accepted[0]!.doc_id;
        expect((await secured.app.request(`/api/v1/document/${catsId}`, { headers: key })).status).toBe(404);
        expect((await secured.app.request(`/api/v1/document/${catsId}`, { headers: { ...key, 'x-weft-owner': 'alice' } })).status).toBe(200);
      } finally {
        await secured.close();
        await store2.close();
      }
    });
  });
}

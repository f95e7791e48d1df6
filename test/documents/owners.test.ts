/**
 * Owners bound to credentials, and text the store can hold. API keys in
 * `api_key_owners` act only as their owners: the owner header narrows (another
 * owner is 403), such a key cannot store documents for owners it cannot see, and
 * uploading another owner's exact content never answers with that owner's
 * doc_id. Owners and search filters holding NUL or other unstorable text are
 * 400 / invalid before they reach PostgreSQL, and an error naming unknown
 * fields stays small whatever the request held. Real PGlite, real HTTP routes
 * through app.request, the hash test embedder.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { b64, documentsApp, hashEmbedder, json, type DocumentsApp } from './helpers.ts';

const SECRET = 'The launch code is 0000 and the vault is behind the painting.';
const file = (name: string, text: string, extra: Record<string, unknown> = {}): Record<string, unknown> => ({ name, doc_id: null, bytes: b64(text), path: '', category: 'kb', ...extra });
const as = (key: string, owner?: string): Record<string, string> => ({ authorization: `Bearer ${key}`, ...(owner ? { 'x-weft-owner': owner } : {}) });

interface Entry { doc_id: string | null; reason?: string; duplicate_of?: string }
interface LoadBody { accepted: Entry[]; duplicate: Entry[]; invalid: Entry[] }

describe('document owners bound to API keys', () => {
  let t: DocumentsApp;
  let aliceDoc = '';
  const load = async (headers: Record<string, string>, files: unknown[]): Promise<{ status: number; text: string; body: LoadBody }> => {
    const r = await t.app.request('/api/v1/documents', json({ files, wait_for_completion: true }, headers));
    const text = await r.text();
    return { status: r.status, text, body: JSON.parse(text) as LoadBody };
  };

  beforeAll(async () => {
    t = await documentsApp({ embedder: hashEmbedder(), apiKeys: ['trusted'], apiKeyOwners: { ka: ['alice'], kb: ['bob', 'carol'] } });
    const r = await load(as('ka'), [file('secret.txt', SECRET, { owners: 'alice' })]);
    expect(r.status).toBe(202);
    aliceDoc = r.body.accepted[0]!.doc_id!;
  }, 60_000);
  afterAll(() => t?.close());

  it("another owner's identical content is never answered with that owner's doc_id", async () => {
    const forged = await load(as('kb'), [file('mine.txt', SECRET, { owners: 'alice' })]);
    expect(forged.status).toBe(207);
    expect(forged.body.invalid).toMatchObject([{ reason: 'owner_not_permitted' }]);
    expect(forged.text).not.toContain(aliceDoc);
    // Same content under the key's own owner is a new document of its own.
    const own = await load(as('kb'), [file('mine.txt', SECRET, { owners: 'bob' })]);
    expect(own.status).toBe(202);
    expect(own.body.accepted[0]!.doc_id).not.toBe(aliceDoc);
    // An unbound key without the owner header: the duplicate is reported, its id is not.
    const trusted = await load(as('trusted'), [file('again.txt', SECRET, { owners: 'alice' })]);
    expect(trusted.body.duplicate).toMatchObject([{ reason: 'duplicate_content' }]);
    expect(trusted.text).not.toContain(aliceDoc);
    // Acting as alice, the same caller sees which document it duplicates.
    const seen = await load(as('trusted', 'alice'), [file('again.txt', SECRET, { owners: 'alice' })]);
    expect(seen.body.duplicate).toMatchObject([{ reason: 'duplicate_content', duplicate_of: aliceDoc }]);
  });

  it('the owner header narrows a bound key and never widens it', async () => {
    const widened = await t.app.request(`/api/v1/document/${aliceDoc}`, { headers: as('kb', 'alice') });
    expect(widened.status).toBe(403);
    expect(await widened.json()).toMatchObject({ error: { code: 'owner_not_permitted' } });
    expect((await t.app.request(`/api/v1/document/${aliceDoc}`, { headers: as('kb') })).status).toBe(404);
    expect((await t.app.request(`/api/v1/document/${aliceDoc}`, { headers: as('ka') })).status).toBe(200);
    const carol = await load(as('kb', 'carol'), [file('c.txt', 'Carol notes about gardens.', { owners: 'carol' })]);
    expect(carol.status).toBe(202);
    // Narrowed to carol, the key cannot store for bob.
    expect((await load(as('kb', 'carol'), [file('b.txt', 'Bob notes.', { owners: 'bob' })])).body.invalid).toMatchObject([{ reason: 'owner_not_permitted' }]);
    const search = async (headers: Record<string, string>): Promise<string[]> => {
      const r = await t.app.request('/api/v1/documents/search', json({ query: 'launch code vault gardens', top_k: 10 }, headers));
      return ((await r.json()) as { results: { document: { doc_id: string; owners: string[] } }[] }).results.flatMap((h) => h.document.owners);
    };
    expect(new Set(await search(as('kb')))).toEqual(new Set(['bob', 'carol']));
    expect(new Set(await search(as('kb', 'carol')))).toEqual(new Set(['carol']));
    expect(new Set(await search(as('ka')))).toEqual(new Set(['alice']));
  });

  it('NUL and other unstorable text in owners and search filters is refused before storage', async () => {
    const r = await load(as('trusted'), [file('n1.txt', 'one', { owners: 'a\u0000b' }), file('n2.txt', 'two', { owners: ['ok', '\ud800'] }), file('n3.txt', 'three', { owners: ['tab\there'] })]);
    expect(r.status).toBe(207);
    expect(r.body.invalid.map((e) => e.reason)).toEqual(['invalid_owners', 'invalid_owners', 'invalid_owners']);
    for (const body of [{ query: 'x', category: 'kb\u0000' }, { query: 'x', owners: ['\u0000'] }, { query: 'x', category: ['\udc00'] }, { query: 'x', owners: 'a\u0001' }]) {
      const s = await t.app.request('/api/v1/documents/search', json(body, as('trusted')));
      expect({ body, status: s.status }).toEqual({ body, status: 400 });
      expect(((await s.json()) as { error: { code: string } }).error.code).toBe('invalid_request');
    }
  });

  it('an unknown_field error stays small whatever the request held', async () => {
    const body: Record<string, unknown> = { query: 'x' };
    for (let i = 0; i < 12_000; i++) body[`unknown_field_number_${i}_${'x'.repeat(40)}`] = 1;
    const r = await t.app.request('/api/v1/documents/search', json(body, as('trusted')));
    expect(r.status).toBe(400);
    const text = await r.text();
    expect(text.length).toBeLessThan(8192);
    expect(JSON.parse(text)).toMatchObject({ error: { code: 'unknown_field', details: { count: 12_000 } } });
  });
});

describe('api_key_owners configuration', () => {
  it('reads a JSON object from the environment and refuses malformed ones', async () => {
    const { loadConfig } = await import('../../server/config.ts');
    expect(loadConfig({ env: { WEFT_API_KEY_OWNERS: '{"k1": ["alice", " alice ", "bob"]}' } }).apiKeyOwners).toEqual({ k1: ['alice', 'bob'] });
    for (const bad of ['{"k1": []}', '{"k1": "alice"}', '["k1"]', '{"k1": ["a\\u0000"]}', 'not json']) {
      expect(() => loadConfig({ env: { WEFT_API_KEY_OWNERS: bad } })).toThrow(/api_key_owners/);
    }
  });
});

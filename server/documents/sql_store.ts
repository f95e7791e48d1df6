/**
 * The document store in SQL (PostgreSQL dialect + pgvector), over a minimal
 * client interface so the same statements serve embedded PGlite (pglite.ts)
 * and a PostgreSQL server through the `pg` driver (postgres.ts).
 *
 * Tables: weft_meta (schema version, embedder identity), weft_documents (one
 * row per document: metadata, state, counts, timestamps, and the content
 * bytes until the document is ready or failed), weft_chunks (keyed by
 * (doc_id, idx), text, structure hints, `vector(dims)`; deleted with their
 * document). Duplicates are unique constraints (doc_id; category +
 * owners_key + sha256), so two concurrent requests cannot both insert one.
 * Search is an exact cosine scan over ready documents with the filters in
 * SQL (no ANN index: filtered approximate search drops results, and the
 * scale this targets scans fast).
 *
 * Vectors: pgvector's `vector(dims)` where the server has the extension
 * (PGlite always does); on a plain PostgreSQL without it (Debian's packages,
 * for one) a `real[]` column and a SQL function `weft_cosine(real[], real[])`
 * that computes the same score. That path does more work per row (the
 * function unnests both arrays, where pgvector's `<=>` is compiled code). A
 * store keeps the kind it was created with (read back from the column type).
 *
 * Several processes may share one PostgreSQL database (document workers on
 * a NATS work queue): schema set-up runs under a transaction-scoped advisory
 * lock, so concurrent starts do not race on CREATE.
 */
import { StoreEmbedderMismatchError } from '../../core/documents/errors.ts';
import { assertTransition, IN_PROGRESS } from '../../core/documents/states.ts';
import { ownersKey, type ClaimedJob, type ContentKey, type DocumentStore, type DuplicateReason, type InsertOutcome, type StatePatch } from '../../core/documents/store.ts';
import { DOC_STATES, type DocCounts, type DocState, type DocumentRecord, type NewDocument, type SearchHit, type SearchQuery, type StoredChunk } from '../../core/documents/types.ts';

export interface SqlRunner {
  query<T = Row>(sql: string, params?: unknown[]): Promise<{ rows: T[] }>;
}

export interface SqlClient extends SqlRunner {
  exec(sql: string): Promise<void>;
  transaction<T>(fn: (tx: SqlRunner) => Promise<T>): Promise<T>;
  close(): Promise<void>;
}

type Row = Record<string, unknown>;

const SCHEMA_VERSION = '1';
const INSERT_ROWS = 100;
const INSERT_BYTES = 8 << 20;

/** Rows per multi-row INSERT: at most INSERT_ROWS, and about INSERT_BYTES of content. */
function batches(docs: readonly NewDocument[]): NewDocument[][] {
  const out: NewDocument[][] = [];
  let cur: NewDocument[] = [];
  let bytes = 0;
  for (const d of docs) {
    if (cur.length && (cur.length >= INSERT_ROWS || bytes + d.content.length > INSERT_BYTES)) {
      out.push(cur);
      cur = [];
      bytes = 0;
    }
    cur.push(d);
    bytes += d.content.length;
  }
  if (cur.length) out.push(cur);
  return out;
}

/** How vectors are stored: pgvector's type, or a plain float4 array scored by weft_cosine. */
export type VectorKind = 'pgvector' | 'real[]';

const vectorText = (v: Float32Array): string => `[${Array.from(v).join(',')}]`;
const arrayText = (v: Float32Array): string => `{${Array.from(v).join(',')}}`;

/** Any constant: the advisory-lock key of schema set-up ("weft" in ASCII). */
const SCHEMA_LOCK = 0x77656674;

function record(r: Row): DocumentRecord {
  return {
    docId: r.doc_id as string,
    name: r.name as string,
    category: r.category as string,
    owners: (r.owners as string[]) ?? [],
    sha256: r.sha256 as string,
    sizeBytes: Number(r.size_bytes),
    source: r.source as 'bytes' | 'path',
    path: r.path as string,
    format: r.format as DocumentRecord['format'],
    options: r.options as DocumentRecord['options'],
    state: r.state as DocState,
    error: (r.error as DocumentRecord['error']) ?? null,
    attempts: Number(r.attempts),
    counts: { chunks: Number(r.chunk_count), tokens: Number(r.token_count), characters: Number(r.char_count), pages: r.page_count === null ? null : Number(r.page_count) },
    createdAt: new Date(r.created_at as string),
    updatedAt: new Date(r.updated_at as string),
    startedAt: r.started_at ? new Date(r.started_at as string) : null,
    finishedAt: r.finished_at ? new Date(r.finished_at as string) : null,
  };
}

/** A plain Uint8Array: `pg` returns bytea as a Node Buffer, which some readers refuse (pdfjs). */
function bytesOf(v: unknown): Uint8Array {
  const content = v as Uint8Array | null;
  return content ? (Object.getPrototypeOf(content) === Uint8Array.prototype ? content : new Uint8Array(content)) : new Uint8Array(0);
}

const DOC_COLUMNS = 'doc_id, name, category, owners, sha256, size_bytes, source, path, format, options, state, error, attempts, chunk_count, token_count, char_count, page_count, created_at, updated_at, started_at, finished_at';

/** The kind of an existing store (its column type) or, for a new one, pgvector when the server offers it. */
async function chooseVectorKind(tx: SqlRunner): Promise<VectorKind> {
  const col = await tx.query<{ udt_name: string }>(
    `SELECT udt_name FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = 'weft_chunks' AND column_name = 'embedding'`,
  );
  if (col.rows[0]) return col.rows[0].udt_name === 'vector' ? 'pgvector' : 'real[]';
  const ext = await tx.query(`SELECT 1 FROM pg_available_extensions WHERE name = 'vector'`);
  return ext.rows.length ? 'pgvector' : 'real[]';
}

export class SqlDocumentStore implements DocumentStore {
  constructor(private readonly db: SqlClient) {}

  /** Set by open(): the vector column's kind. */
  vectorKind: VectorKind = 'pgvector';

  async open(embedder: { id: string; dims: number }): Promise<void> {
    await this.db.transaction(async (tx) => {
      await tx.query(`SELECT pg_advisory_xact_lock(${SCHEMA_LOCK})`);
      this.vectorKind = await chooseVectorKind(tx);
      if (this.vectorKind === 'pgvector') await tx.query('CREATE EXTENSION IF NOT EXISTS vector');
      else {
        // Cosine similarity of two float4 arrays (same length), in float8; 0 for a zero vector.
        await tx.query(`CREATE OR REPLACE FUNCTION weft_cosine(a real[], b real[]) RETURNS double precision
          LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
            SELECT CASE WHEN sum(x::float8 * x) = 0 OR sum(y::float8 * y) = 0 THEN 0
                        ELSE sum(x::float8 * y) / sqrt(sum(x::float8 * x) * sum(y::float8 * y)) END
            FROM unnest(a, b) AS t(x, y) $$`);
      }
      await tx.query(`CREATE TABLE IF NOT EXISTS weft_meta (key text PRIMARY KEY, value text NOT NULL)`);
      const meta = await tx.query<{ value: string }>(`SELECT value FROM weft_meta WHERE key = 'embedder'`);
      const stored = meta.rows[0] ? (JSON.parse(meta.rows[0].value) as { id: string; dims: number }) : null;
      if (stored && (stored.id !== embedder.id || stored.dims !== embedder.dims)) {
        const docs = await tx.query<{ n: number }>(`SELECT count(*)::int AS n FROM weft_documents`);
        if ((docs.rows[0]?.n ?? 0) > 0) throw new StoreEmbedderMismatchError(stored, embedder);
        await tx.query(`DROP TABLE IF EXISTS weft_chunks`);
      }
      await tx.query(`INSERT INTO weft_meta (key, value) VALUES ('embedder', $1), ('schema', $2)
        ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value`, [JSON.stringify({ id: embedder.id, dims: embedder.dims }), SCHEMA_VERSION]);
      await tx.query(`CREATE TABLE IF NOT EXISTS weft_documents (
        seq bigserial UNIQUE,
        doc_id uuid PRIMARY KEY,
        name text NOT NULL,
        category text NOT NULL,
        owners text[] NOT NULL,
        owners_key text NOT NULL,
        sha256 text NOT NULL,
        size_bytes integer NOT NULL,
        source text NOT NULL,
        path text NOT NULL,
        format text NOT NULL,
        options jsonb NOT NULL,
        content bytea,
        state text NOT NULL,
        error jsonb,
        attempts integer NOT NULL DEFAULT 0,
        chunk_count integer NOT NULL DEFAULT 0,
        token_count integer NOT NULL DEFAULT 0,
        char_count integer NOT NULL DEFAULT 0,
        page_count integer,
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now(),
        started_at timestamptz,
        finished_at timestamptz,
        CONSTRAINT weft_documents_content_key UNIQUE (category, owners_key, sha256))`);
      await tx.query(`CREATE INDEX IF NOT EXISTS weft_documents_queue ON weft_documents (seq) WHERE state = 'queued'`);
      await tx.query(`CREATE TABLE IF NOT EXISTS weft_chunks (
        doc_id uuid NOT NULL REFERENCES weft_documents (doc_id) ON DELETE CASCADE,
        idx integer NOT NULL,
        text text NOT NULL,
        tokens integer NOT NULL,
        heading text,
        page integer,
        embedding ${this.vectorKind === 'pgvector' ? `vector(${Math.floor(embedder.dims)})` : 'real[]'} NOT NULL,
        PRIMARY KEY (doc_id, idx))`);
    });
  }

  async findDuplicates(items: readonly { docId: string | null; key: ContentKey }[]): Promise<({ reason: DuplicateReason; existing: string } | null)[]> {
    return this.duplicatesIn(this.db, items);
  }

  /** Two queries whatever the number of items: existing ids, then existing content keys. */
  private async duplicatesIn(db: SqlRunner, items: readonly { docId: string | null; key: ContentKey }[]): Promise<({ reason: DuplicateReason; existing: string } | null)[]> {
    if (!items.length) return [];
    const ids = items.map((i) => i.docId).filter((x): x is string => x !== null);
    const taken = new Set(ids.length ? (await db.query<{ doc_id: string }>(`SELECT doc_id FROM weft_documents WHERE doc_id = ANY($1::uuid[])`, [ids])).rows.map((r) => r.doc_id) : []);
    const keyOf = (category: string, owners: string, sha: string): string => JSON.stringify([category, owners, sha]);
    const rows = await db.query<{ doc_id: string; category: string; owners_key: string; sha256: string }>(
      `SELECT doc_id, category, owners_key, sha256 FROM weft_documents WHERE sha256 = ANY($1::text[])`,
      [[...new Set(items.map((i) => i.key.sha256))]],
    );
    const byKey = new Map(rows.rows.map((r) => [keyOf(r.category, r.owners_key, r.sha256), r.doc_id]));
    return items.map((i) => {
      if (i.docId !== null && taken.has(i.docId)) return { reason: 'duplicate_doc_id', existing: i.docId };
      const existing = byKey.get(keyOf(i.key.category, ownersKey(i.key.owners), i.key.sha256));
      return existing ? { reason: 'duplicate_content', existing } : null;
    });
  }

  async insert(docs: readonly NewDocument[]): Promise<InsertOutcome[]> {
    if (!docs.length) return [];
    return this.db.transaction(async (tx) => {
      const inserted = new Set<string>();
      for (const part of batches(docs)) {
        const params: unknown[] = [];
        const values = part.map((d) => {
          params.push(d.docId, d.name, d.category, d.owners, ownersKey(d.owners), d.sha256, d.content.length, d.source, d.path, d.format, JSON.stringify(d.options), d.content);
          const n = params.length - 12;
          return `(${Array.from({ length: 12 }, (_, k) => `$${n + k + 1}`).join(', ')}, 'queued')`;
        });
        const r = await tx.query<{ doc_id: string }>(
          `INSERT INTO weft_documents (doc_id, name, category, owners, owners_key, sha256, size_bytes, source, path, format, options, content, state)
           VALUES ${values.join(', ')} ON CONFLICT DO NOTHING RETURNING doc_id`,
          params,
        );
        for (const row of r.rows) inserted.add(row.doc_id);
      }
      // Rows that lost a race with another request: say which rule they hit.
      const lost = docs.filter((d) => !inserted.has(d.docId));
      const why = await this.duplicatesIn(tx, lost.map((d) => ({ docId: d.docId, key: d })));
      const reasons = new Map(lost.map((d, k) => [d.docId, why[k]]));
      return docs.map((d): InsertOutcome => {
        if (inserted.has(d.docId)) return { status: 'inserted' };
        const w = reasons.get(d.docId) ?? null;
        return { status: 'duplicate', reason: w?.reason ?? 'duplicate_content', existing: w?.existing ?? '' };
      });
    });
  }

  async get(docId: string): Promise<DocumentRecord | null> {
    const r = await this.db.query(`SELECT ${DOC_COLUMNS} FROM weft_documents WHERE doc_id = $1`, [docId]);
    return r.rows[0] ? record(r.rows[0]) : null;
  }

  async getMany(docIds: readonly string[]): Promise<DocumentRecord[]> {
    if (!docIds.length) return [];
    const r = await this.db.query(`SELECT ${DOC_COLUMNS} FROM weft_documents WHERE doc_id = ANY($1::uuid[])`, [docIds]);
    const byId = new Map(r.rows.map((x) => [x.doc_id as string, record(x)]));
    return docIds.map((id) => byId.get(id)).filter((x): x is DocumentRecord => !!x);
  }

  async delete(docId: string): Promise<boolean> {
    const r = await this.db.query(`DELETE FROM weft_documents WHERE doc_id = $1 RETURNING doc_id`, [docId]);
    return r.rows.length > 0;
  }

  async requeueInProgress(): Promise<number> {
    const r = await this.db.query(`UPDATE weft_documents SET state = 'queued', updated_at = now() WHERE state = ANY($1::text[]) RETURNING doc_id`, [IN_PROGRESS]);
    return r.rows.length;
  }

  async claim(): Promise<ClaimedJob | null> {
    const r = await this.db.query(
      `UPDATE weft_documents SET state = 'reading', attempts = attempts + 1, started_at = now(), updated_at = now()
       WHERE doc_id = (SELECT doc_id FROM weft_documents WHERE state = 'queued' ORDER BY seq LIMIT 1 FOR UPDATE SKIP LOCKED)
       RETURNING ${DOC_COLUMNS}, content`,
    );
    const row = r.rows[0];
    return row ? { record: record(row), content: bytesOf(row.content) } : null;
  }

  async claimById(docId: string): Promise<ClaimedJob | null> {
    // queued → reading, or a takeover: an in-progress document whose worker is gone goes back to queued
    // and on to reading in the same statement (see states.ts).
    const r = await this.db.query(
      `UPDATE weft_documents SET state = 'reading', attempts = attempts + 1, started_at = now(), updated_at = now()
       WHERE doc_id = $1 AND state = ANY($2::text[]) RETURNING ${DOC_COLUMNS}, content`,
      [docId, ['queued', ...IN_PROGRESS]],
    );
    const row = r.rows[0];
    return row ? { record: record(row), content: bytesOf(row.content) } : null;
  }

  async unfinished(olderThanMs: number, limit: number): Promise<{ docId: string; state: DocState; attempts: number }[]> {
    const r = await this.db.query<{ doc_id: string; state: DocState; attempts: number }>(
      `SELECT doc_id, state, attempts FROM weft_documents WHERE state <> ALL($1::text[]) AND updated_at < now() - make_interval(secs => $2) ORDER BY seq LIMIT $3`,
      [['ready', 'failed'], olderThanMs / 1000, limit],
    );
    return r.rows.map((x) => ({ docId: x.doc_id, state: x.state, attempts: Number(x.attempts) }));
  }

  async transition(docId: string, from: DocState, to: DocState, patch: StatePatch = {}): Promise<boolean> {
    assertTransition(from, to);
    const params: unknown[] = [docId, from, to];
    const sets = ['state = $3', 'updated_at = now()'];
    const set = (col: string, v: unknown, cast = ''): void => {
      params.push(v);
      sets.push(`${col} = $${params.length}${cast}`);
    };
    if (patch.error !== undefined) set('error', patch.error === null ? null : JSON.stringify(patch.error), '::jsonb');
    const c = patch.counts ?? {};
    if (c.chunks !== undefined) set('chunk_count', c.chunks);
    if (c.tokens !== undefined) set('token_count', c.tokens);
    if (c.characters !== undefined) set('char_count', c.characters);
    if (c.pages !== undefined) set('page_count', c.pages);
    if (to === 'failed') sets.push('finished_at = now()', 'content = NULL');
    const r = await this.db.query(`UPDATE weft_documents SET ${sets.join(', ')} WHERE doc_id = $1 AND state = $2 RETURNING doc_id`, params);
    return r.rows.length > 0;
  }

  async complete(docId: string, chunks: readonly StoredChunk[], counts: DocCounts): Promise<boolean> {
    const pg = this.vectorKind === 'pgvector';
    return this.db.transaction(async (tx) => {
      const r = await tx.query(
        `UPDATE weft_documents SET state = 'ready', error = NULL, content = NULL, chunk_count = $2, token_count = $3, char_count = $4, page_count = $5,
         finished_at = now(), updated_at = now() WHERE doc_id = $1 AND state = 'embedding' RETURNING doc_id`,
        [docId, counts.chunks, counts.tokens, counts.characters, counts.pages],
      );
      if (!r.rows.length) return false;
      // Keyed writes: a row left by anything earlier is replaced, never duplicated. (No earlier rows can
      // exist: chunks are only written here, once, guarded by the state; the upsert keeps it so anyway.)
      for (let i = 0; i < chunks.length; i += INSERT_ROWS) {
        const part = chunks.slice(i, i + INSERT_ROWS);
        const params: unknown[] = [];
        const values = part.map((c) => {
          params.push(docId, c.index, c.text, c.tokens, c.heading, c.page, pg ? vectorText(c.embedding) : arrayText(c.embedding));
          const n = params.length;
          return `($${n - 6}, $${n - 5}, $${n - 4}, $${n - 3}, $${n - 2}, $${n - 1}, $${n}::${pg ? 'vector' : 'real[]'})`;
        });
        await tx.query(
          `INSERT INTO weft_chunks (doc_id, idx, text, tokens, heading, page, embedding) VALUES ${values.join(', ')}
           ON CONFLICT (doc_id, idx) DO UPDATE SET text = EXCLUDED.text, tokens = EXCLUDED.tokens, heading = EXCLUDED.heading, page = EXCLUDED.page, embedding = EXCLUDED.embedding`,
          params,
        );
      }
      return true;
    });
  }

  async chunks(docId: string): Promise<Omit<StoredChunk, 'embedding'>[]> {
    const r = await this.db.query<{ idx: number; text: string; tokens: number; heading: string | null; page: number | null }>(
      `SELECT idx, text, tokens, heading, page FROM weft_chunks WHERE doc_id = $1 ORDER BY idx`,
      [docId],
    );
    return r.rows.map((x) => ({ index: x.idx, text: x.text, tokens: x.tokens, heading: x.heading, page: x.page }));
  }

  async search(q: SearchQuery): Promise<SearchHit[]> {
    const pg = this.vectorKind === 'pgvector';
    // pgvector orders by its distance operator; the plain path by the score itself (same order, reversed sign).
    const score = pg ? '1 - (c.embedding <=> $1::vector)' : 'weft_cosine(c.embedding, $1::real[])';
    const order = pg ? 'c.embedding <=> $1::vector' : 'score DESC';
    const r = await this.db.query<Row>(
      `SELECT c.doc_id, c.idx, c.text, c.tokens, c.heading, c.page, ${score} AS score, d.name, d.category, d.owners
       FROM weft_chunks c JOIN weft_documents d ON d.doc_id = c.doc_id
       WHERE d.state = 'ready'
         AND ($2::text[] IS NULL OR d.category = ANY($2::text[]))
         AND ($3::text[] IS NULL OR d.owners && $3::text[])
         AND (NOT $4::boolean OR cardinality(d.owners) = 0 OR d.owners && $5::text[])
       ORDER BY ${order}, c.doc_id, c.idx
       LIMIT $6`,
      [pg ? vectorText(q.vector) : arrayText(q.vector), q.categories, q.owners, q.viewer.enforce, [...q.viewer.owners], q.topK],
    );
    return r.rows.map((x) => ({
      score: Number(x.score),
      chunk: { index: x.idx as number, text: x.text as string, tokens: x.tokens as number, heading: x.heading as string | null, page: x.page as number | null },
      document: { docId: x.doc_id as string, name: x.name as string, category: x.category as string, owners: (x.owners as string[]) ?? [] },
    }));
  }

  async stateCounts(): Promise<Record<DocState, number>> {
    const r = await this.db.query<{ state: DocState; n: number }>(`SELECT state, count(*)::int AS n FROM weft_documents GROUP BY state`);
    const out = Object.fromEntries(DOC_STATES.map((s) => [s, 0])) as Record<DocState, number>;
    for (const x of r.rows) out[x.state] = x.n;
    return out;
  }

  async close(): Promise<void> {
    await this.db.close();
  }
}

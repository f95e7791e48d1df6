/**
 * Small pure parts: strict base64, the state machine, and the documents
 * configuration (defaults, config.yaml section, WEFT_DOCUMENTS_* /
 * WEFT_DATA_DIR, overrides, refusals).
 */
import { describe, expect, it } from 'vitest';
import { base64DecodedLength, decodeBase64, encodeBase64 } from '../../core/documents/base64.ts';
import { assertTransition, canTransition, InvalidTransitionError } from '../../core/documents/states.ts';
import { DEFAULT_LIMITS } from '../../core/documents/types.ts';
import { loadDocumentsConfig } from '../../server/documents/config.ts';
import { pgliteLocation } from '../../server/documents/pglite.ts';

describe('base64', () => {
  it('round-trips every length and accepts the URL-safe alphabet, missing padding and line breaks', () => {
    for (let n = 0; n < 40; n++) {
      const b = Uint8Array.from({ length: n }, (_, i) => (i * 73 + n) & 255);
      const s = encodeBase64(b);
      expect(s).toBe(Buffer.from(b).toString('base64'));
      expect(decodeBase64(s)).toEqual(b);
      expect(decodeBase64(s.replace(/=+$/, ''))).toEqual(b);
      expect(decodeBase64(Buffer.from(b).toString('base64url'))).toEqual(b);
      expect(base64DecodedLength(s)).toBe(n);
    }
    expect(decodeBase64('aGVs\nbG8=\r\n')).toEqual(new TextEncoder().encode('hello'));
  });

  it('rejects what is not base64', () => {
    for (const bad of ['hello world!', 'a', 'ab=c', 'abc==', '====', 'aGVsbG8=x', 'é']) expect(decodeBase64(bad), bad).toBeNull();
  });
});

describe('document states', () => {
  it('allows the pipeline order, failure, and requeue of in-progress states only', () => {
    expect(canTransition('queued', 'reading')).toBe(true);
    expect(canTransition('embedding', 'ready')).toBe(true);
    expect(canTransition('chunking', 'failed')).toBe(true);
    expect(canTransition('embedding', 'queued')).toBe(true);
    expect(canTransition('queued', 'ready')).toBe(false);
    expect(canTransition('ready', 'queued')).toBe(false);
    expect(canTransition('failed', 'reading')).toBe(false);
    expect(() => assertTransition('ready', 'embedding')).toThrow(InvalidTransitionError);
  });
});

describe('documents configuration', () => {
  it('defaults, then the config.yaml section, then the environment, then overrides', () => {
    const d = loadDocumentsConfig({ env: {} });
    expect(d).toMatchObject({ dataDir: '.weft/data', importRoots: [], workers: 2, maxAttempts: 3, limits: DEFAULT_LIMITS });
    const c = loadDocumentsConfig({
      file: { embedder: '/m/a', data_dir: '/d/file', max_file_bytes: '1MB', categories: ['kb'], workers: 4 },
      env: { WEFT_DATA_DIR: '/d/env', WEFT_DOCUMENTS_IMPORT_ROOTS: '/r1, /r2', WEFT_DOCUMENTS_CHUNK_UNITS: '128', WEFT_DOCUMENTS_MAX_WAIT_SECONDS: '5' },
      overrides: { workers: 1, limits: { maxFilesPerRequest: 3 } },
    });
    expect(c).toMatchObject({ embedder: '/m/a', dataDir: '/d/env', importRoots: ['/r1', '/r2'], workers: 1 });
    expect(c.limits).toMatchObject({ maxFileBytes: 1e6, categories: ['kb'], chunkUnits: 128, maxWaitMs: 5000, maxFilesPerRequest: 3 });
    expect(loadDocumentsConfig({ env: { WEFT_DOCUMENTS_DATA_DIR: 'memory://', WEFT_DATA_DIR: '/x' } }).dataDir).toBe('memory://');
  });

  it('refuses unknown keys, bad values and an overlap above half a chunk', () => {
    expect(() => loadDocumentsConfig({ env: {}, file: { chunk_size: 1 } })).toThrow(/unknown setting documents.chunk_size/);
    expect(() => loadDocumentsConfig({ env: { WEFT_DOCUMENTS_WORKERS: 'many' } })).toThrow(/documents.workers/);
    expect(() => loadDocumentsConfig({ env: { WEFT_DOCUMENTS_CHUNK_UNITS: '40', WEFT_DOCUMENTS_CHUNK_OVERLAP: '30' } })).toThrow(/chunk_overlap/);
  });

  it('puts the PGlite store under <data_dir>/documents; memory:// and idb:// pass through', () => {
    expect(pgliteLocation('/var/weft')).toBe('/var/weft/documents');
    expect(pgliteLocation('memory://')).toBe('memory://');
    expect(pgliteLocation('idb://weft')).toBe('idb://weft');
  });
});

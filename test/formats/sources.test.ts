/**
 * Byte/model sources: in-memory, Blob, browser-style file maps, and the Node
 * file-system implementations (positional reads, directory listing, path safety,
 * single-file GGUF models).
 */
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ModelFormatError, UnsupportedModelError } from '../../core/errors.ts';
import { blobSource, bytesSource, filesSource, GGUF_FILE, normalizeModelPath } from '../../core/formats/source.ts';
import { dirSource, fileSource, openModelPath } from '../../server/fs_source.ts';

const bytes = Uint8Array.from({ length: 100 }, (_, i) => i);

describe('in-memory sources', () => {
  it('bytesSource reads ranges and rejects out-of-bounds reads', async () => {
    const s = bytesSource(bytes);
    expect(s.size).toBe(100);
    expect([...(await s.read(10, 3))]).toEqual([10, 11, 12]);
    expect((await s.read(100, 0)).length).toBe(0);
    await expect(s.read(98, 3)).rejects.toThrow(/truncated: wanted bytes \[98, 101\) but it has only 100/);
    await expect(s.read(-1, 1)).rejects.toThrow(ModelFormatError);
    await expect(s.read(0.5, 1)).rejects.toThrow(ModelFormatError);
  });

  it('blobSource reads slices of a Blob', async () => {
    const s = blobSource(new Blob([bytes]));
    expect(s.size).toBe(100);
    expect([...(await s.read(97, 3))]).toEqual([97, 98, 99]);
    await expect(s.read(99, 2)).rejects.toThrow(ModelFormatError);
  });

  it('filesSource strips a common folder, lists, reads text and bytes', async () => {
    const ms = filesSource(
      new Map<string, Blob | Uint8Array>([
        ['my-model/config.json', new Blob(['{"a":1}'])],
        ['my-model/model.safetensors', bytes],
        ['my-model/sub/x.txt', new TextEncoder().encode('hi')],
      ]),
      'my-model',
    );
    expect(ms.name).toBe('my-model');
    expect(await ms.list!()).toEqual(['config.json', 'model.safetensors', 'sub/x.txt']);
    expect(await ms.exists('config.json')).toBe(true);
    expect(await ms.exists('./config.json')).toBe(true);
    expect(await ms.exists('nope.json')).toBe(false);
    expect(await ms.readText('config.json')).toBe('{"a":1}');
    expect(await ms.readText('sub/x.txt')).toBe('hi');
    expect((await ms.open('model.safetensors')).size).toBe(100);
    await expect(ms.readText('nope.json')).rejects.toThrow(/has no file nope.json/);
    await expect(ms.exists('../config.json')).rejects.toThrow(/invalid file path/);
  });

  it('filesSource exposes a lone .gguf upload as model.gguf', async () => {
    const ms = filesSource(new Map([['Qwen3-0.6B-Q8_0.gguf', bytes]]));
    expect(await ms.list!()).toEqual(['Qwen3-0.6B-Q8_0.gguf', GGUF_FILE]);
    expect((await ms.open(GGUF_FILE)).size).toBe(100);
  });

  it('normalizeModelPath rejects escapes', () => {
    for (const p of ['', '/etc/passwd', '../x', 'a/../b', 'a//b', 'a\\b', 'C:/x', 'a/./b']) {
      expect(() => normalizeModelPath(p), p).toThrow(ModelFormatError);
    }
    expect(normalizeModelPath('./a/b.json')).toBe('a/b.json');
  });
});

describe('Node file-system sources', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'weft-fs-'));
    await writeFile(join(dir, 'data.bin'), bytes);
    await writeFile(join(dir, 'config.json'), '{"x": 1}');
    await mkdir(join(dir, 'nested'));
    await writeFile(join(dir, 'nested', 'a.txt'), 'A');
    await writeFile(join(dir, 'tiny.gguf'), bytes);
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('fileSource does positional reads', async () => {
    const s = await fileSource(join(dir, 'data.bin'));
    expect(s.size).toBe(100);
    expect([...(await s.read(50, 4))]).toEqual([50, 51, 52, 53]);
    expect([...(await s.read(0, 100))]).toEqual([...bytes]);
    await expect(s.read(90, 20)).rejects.toThrow(/truncated/);
    await expect(fileSource(join(dir, 'missing.bin'))).rejects.toThrow(/cannot open .*ENOENT/);
    await expect(fileSource(dir)).rejects.toThrow(/not a regular file/);
  });

  it('dirSource exposes a directory with path checks', async () => {
    const ms = dirSource(dir);
    expect(await ms.exists('config.json')).toBe(true);
    expect(await ms.exists('nested')).toBe(false); // directories are not files
    expect(await ms.exists('missing')).toBe(false);
    expect(await ms.readText('nested/a.txt')).toBe('A');
    expect(await ms.list!()).toEqual(['config.json', 'data.bin', 'nested/a.txt', 'tiny.gguf']);
    expect([...(await (await ms.open('data.bin')).read(1, 2))]).toEqual([1, 2]);
    await expect(ms.readText('missing.json')).rejects.toThrow(ModelFormatError);
    await expect(ms.open('../etc/passwd')).rejects.toThrow(/invalid file path/);
  });

  it('openModelPath: directories, single .gguf files, and errors', async () => {
    expect(await (await openModelPath(dir)).exists('config.json')).toBe(true);
    const g = await openModelPath(join(dir, 'tiny.gguf'));
    expect(g.name).toBe('tiny');
    expect(await g.list!()).toEqual([GGUF_FILE]);
    expect(await g.exists(GGUF_FILE)).toBe(true);
    expect(await g.exists('config.json')).toBe(false);
    expect((await g.open(GGUF_FILE)).size).toBe(100);
    await expect(g.readText('config.json')).rejects.toThrow(ModelFormatError);
    await expect(g.open('other')).rejects.toThrow(ModelFormatError);
    await expect(openModelPath(join(dir, 'data.bin'))).rejects.toThrow(UnsupportedModelError);
    await expect(openModelPath(join(dir, 'nope'))).rejects.toThrow(ModelFormatError);
  });
});

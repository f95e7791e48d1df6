/**
 * Licence files (docs/licence.md): keys and licences made with the shipped
 * `weft license` tool, then judged by the verifier (valid, expired, tampered,
 * missing, wrong key) and by real `weft serve` processes with and without
 * WEFT_LICENSE_REQUIRED: refusing to start, /healthz reporting the state,
 * and reload through SIGHUP and POST /license/reload.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateLicenseKeys, License, signLicense, trustedKeys, verifyLicense } from '../../server/license.ts';

const WEFT = fileURLToPath(new URL('../../bin/weft.js', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'weft-license-'));
const weft = (...args: string[]): { status: number | null; stdout: string; stderr: string } => {
  const r = spawnSync(process.execPath, [WEFT, ...args], { cwd: dir, encoding: 'utf8', timeout: 60_000 });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
};

let publicKey = '';
const files = { valid: join(dir, 'valid.json'), expired: join(dir, 'expired.json'), tampered: join(dir, 'tampered.json'), missing: join(dir, 'nope.json') };

beforeAll(() => {
  const k = weft('license', 'keygen', '--out', join(dir, 'issuer'));
  expect(k.status, k.stderr).toBe(0);
  publicKey = (JSON.parse(k.stdout) as { public_key: string }).public_key;
  const key = join(dir, 'issuer.key');
  const s = weft('license', 'sign', '--key', key, '--licensee', 'Acme "Q" Ltd', '--expires', '2099-01-01', '--features', 'speculative,documents', '--max-readers', '2', '--out', files.valid);
  expect(s.status, s.stderr).toBe(0);
  // An expired licence, signed through the library (the CLI takes any date; a past one is the point here).
  const pem = readFileSync(key, 'utf8');
  writeFileSync(files.expired, signLicense({ licensee: 'Acme', expires: '2020-01-01T00:00:00.000Z', features: [], max_readers: null, issued: '2019-01-01T00:00:00.000Z' }, pem));
  // Tampered: the payload re-encoded with max_readers raised, the signature kept.
  const doc = JSON.parse(readFileSync(files.valid, 'utf8')) as { payload: string; signature: string };
  const payload = JSON.parse(Buffer.from(doc.payload, 'base64url').toString('utf8')) as Record<string, unknown>;
  writeFileSync(files.tampered, JSON.stringify({ ...doc, payload: Buffer.from(JSON.stringify({ ...payload, max_readers: 1000 })).toString('base64url') }));
}, 120_000);

describe('licence verification', () => {
  const state = (file: string | null, required = false, key: string | null = publicKey) => new License({ file, required, publicKey: key }).state();

  it('accepts a licence signed by a trusted key and reads its fields', () => {
    const s = state(files.valid, true);
    expect(s).toMatchObject({ state: 'valid', licensee: 'Acme "Q" Ltd', expires: '2099-01-01T00:00:00.000Z', features: ['speculative', 'documents'], max_readers: 2, reason: null });
    expect(new License({ file: files.valid, required: true, publicKey }).ok).toBe(true);
  });

  it('tells expired, tampered, missing and untrusted licences apart', () => {
    expect(state(files.expired)).toMatchObject({ state: 'expired', licensee: 'Acme' });
    expect(state(files.tampered).state).toBe('invalid');
    expect(state(files.tampered).reason).toMatch(/signature/);
    expect(state(files.missing).state).toBe('missing');
    expect(state(null).state).toBe('missing');
    // Another key did not sign this one; and with no key configured nothing verifies.
    expect(state(files.valid, false, generateLicenseKeys().publicKey)).toMatchObject({ state: 'invalid', reason: expect.stringMatching(/trusted key/) });
    expect(state(files.valid, false, null)).toMatchObject({ state: 'invalid', reason: expect.stringMatching(/no trusted public key/) });
    writeFileSync(join(dir, 'garbage.json'), '{"format":"weft-license/1","payload":"x"');
    expect(state(join(dir, 'garbage.json')).reason).toBe('not JSON');
  });

  it('gates only when required: ok, usable and the reader limit', () => {
    expect(new License({ file: files.expired, required: false, publicKey }).ok).toBe(true);
    const req = new License({ file: files.expired, required: true, publicKey });
    expect(req.ok).toBe(false);
    expect(() => req.assertUsable()).toThrow(expect.objectContaining({ code: 'license_required' }));
    const valid = new License({ file: files.valid, required: true, publicKey });
    expect(() => valid.assertReaderSlot(1)).not.toThrow();
    expect(() => valid.assertReaderSlot(2)).toThrow(expect.objectContaining({ code: 'license_reader_limit' }));
    expect(() => new License({ file: files.valid, required: false, publicKey }).assertReaderSlot(10)).not.toThrow();
  });

  it('a valid licence reads expired once its date passes', () => {
    const { payload } = verifyLicense(readFileSync(files.valid, 'utf8'), trustedKeys(publicKey));
    expect(verifyLicense(readFileSync(files.valid, 'utf8'), trustedKeys(publicKey), new Date(Date.parse(payload.expires) + 1)).expired).toBe(true);
    expect(trustedKeys(null)).toHaveLength(0);
    expect(() => verifyLicense(readFileSync(files.valid, 'utf8'), trustedKeys(null))).toThrow(/no trusted public key/);
  });

  it('weft license verify exits 0 for a valid licence and 1 otherwise', () => {
    expect(weft('license', 'verify', files.valid, `--public-key=${publicKey}`).status).toBe(0);
    const t = weft('license', 'verify', files.tampered, `--public-key=${publicKey}`);
    expect(t.status).toBe(1);
    expect(JSON.parse(t.stdout)).toMatchObject({ state: 'invalid' });
  }, 60_000);
});

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

interface Served {
  child: ChildProcess;
  exit: Promise<{ code: number | null; stderr: string }>;
  listening: Promise<{ inference: number; management: number }>;
}

/** `weft serve` with no models (no GPU needed) on loopback, with `env` added. */
async function serve(env: Record<string, string>): Promise<Served> {
  const management = await freePort();
  const child = spawn(process.execPath, [WEFT, 'serve'], {
    cwd: dir,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: {
      ...process.env,
      WEFT_HOST: '127.0.0.1',
      WEFT_MODEL: '',
      WEFT_EMBEDDING_MODEL: '',
      WEFT_PORT: '0',
      WEFT_MANAGEMENT_PORT: String(management),
      WEFT_OPENAI_PORT: '0',
      WEFT_SAGEMAKER_PORT: '0',
      WEFT_VERTEX_PORT: '0',
      WEFT_LOG_DISABLE_TIMESTAMPS: '1',
      WEFT_LICENSE_PUBLIC_KEY: publicKey,
      ...env,
    },
  });
  let stderr = '';
  const exit = new Promise<{ code: number | null; stderr: string }>((resolve) => child.once('exit', (code) => resolve({ code, stderr })));
  const listening = new Promise<{ inference: number; management: number }>((resolve, reject) => {
    child.stderr!.on('data', (d: Buffer) => {
      stderr += d.toString();
      const m = /"msg":"listening","app":"inference","host":"[^"]*","port":(\d+)/.exec(stderr);
      if (m && stderr.includes('"app":"management"')) resolve({ inference: Number(m[1]), management });
    });
    void exit.then(({ code }) => reject(new Error(`weft serve exited (${code}): ${stderr}`)));
  });
  listening.catch(() => {});
  return { child, exit, listening };
}

describe('weft serve with licences', () => {
  const running: ChildProcess[] = [];
  afterAll(() => {
    for (const c of running) if (c.exitCode === null) c.kill('SIGTERM');
  });

  it.each([
    ['missing', files.missing],
    ['expired', files.expired],
    ['tampered', files.tampered],
  ])('refuses to start when a licence is required and it is %s', async (_, file) => {
    const s = await serve({ WEFT_LICENSE_REQUIRED: '1', WEFT_LICENSE_FILE: file });
    running.push(s.child);
    const { code, stderr } = await s.exit;
    expect(code).toBe(1);
    expect(stderr).toContain('[license_required]');
  }, 60_000);

  it('starts without a licence when none is required, and says so on /healthz', async () => {
    const s = await serve({ WEFT_LICENSE_FILE: files.tampered });
    running.push(s.child);
    const { inference } = await s.listening;
    // No readers are configured, so health says `loading` (503); the licence does not gate it.
    const h = await fetch(`http://127.0.0.1:${inference}/healthz`);
    expect(await h.json()).toMatchObject({ status: 'loading', license: { state: 'invalid', required: false } });
    s.child.kill('SIGTERM');
    await s.exit;
  }, 60_000);

  it('starts with a valid licence, and on reload (SIGHUP, POST /license/reload) follows the file', async () => {
    const file = join(dir, 'live.json');
    writeFileSync(file, readFileSync(files.valid));
    const s = await serve({ WEFT_LICENSE_REQUIRED: 'true', WEFT_LICENSE_FILE: file });
    running.push(s.child);
    const { inference, management } = await s.listening;
    const health = async (): Promise<{ status: number; body: { status: string; license: { state: string; licensee: string | null } } }> => {
      const r = await fetch(`http://127.0.0.1:${inference}/healthz`);
      return { status: r.status, body: (await r.json()) as never };
    };
    // No readers are configured: `loading` while licensed, `unlicensed` once the licence lapses.
    expect(await health()).toMatchObject({ body: { status: 'loading', license: { state: 'valid', licensee: 'Acme "Q" Ltd' } } });
    // The file is replaced by an expired licence; SIGHUP re-reads it.
    writeFileSync(file, readFileSync(files.expired));
    s.child.kill('SIGHUP');
    let h = await health();
    for (let i = 0; i < 50 && h.body.license.state !== 'expired'; i++) {
      await new Promise((r) => setTimeout(r, 100));
      h = await health();
    }
    expect(h).toMatchObject({ status: 503, body: { status: 'unlicensed', license: { state: 'expired' } } });
    // Renewed: the management route re-reads the file.
    writeFileSync(file, readFileSync(files.valid));
    const r = await fetch(`http://127.0.0.1:${management}/license/reload`, { method: 'POST' });
    expect(r.status).toBe(200);
    expect(await r.json()).toMatchObject({ state: 'valid', max_readers: 2 });
    expect((await health()).body.status).toBe('loading');
    expect(s.child.exitCode).toBeNull();
    s.child.kill('SIGTERM');
    await s.exit;
  }, 90_000);
});

/**
 * Who may attach a reader to NATS: a broker that requires TLS (certificate
 * from a throwaway CA made here with openssl) and credentials (user/password
 * and an nkey). Readers with the right CA and credentials attach and serve a
 * front end configured the same way; a wrong password, a wrong nkey, no TLS
 * trust (plain `nats://`, or another CA) all fail the `weft reader` command
 * before it attaches.
 */
import { createUser } from '@nats-io/nkeys';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kill, readerFails, readerGroups, startFrontEnd, startNats, startReader, stream, type FrontEnd, type NatsServer, type ReaderProc } from './nats_helpers.ts';
import { until } from './remote_helpers.ts';

const dir = mkdtempSync(join(tmpdir(), 'weft-nats-tls-'));
const f = (name: string): string => join(dir, name);
const ssl = (...args: string[]): void => void execFileSync('openssl', args, { stdio: 'ignore' });

/** A CA and a server certificate for 127.0.0.1 signed by it; `other` is an unrelated CA. */
function makeCerts(): void {
  for (const ca of ['ca', 'other']) ssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', f(`${ca}.key`), '-out', f(`${ca}.pem`), '-days', '1', '-subj', `/CN=weft ${ca} test CA`);
  ssl('req', '-newkey', 'rsa:2048', '-nodes', '-keyout', f('server.key'), '-out', f('server.csr'), '-subj', '/CN=127.0.0.1');
  writeFileSync(f('san.ext'), 'subjectAltName=IP:127.0.0.1,DNS:localhost\n');
  ssl('x509', '-req', '-in', f('server.csr'), '-CA', f('ca.pem'), '-CAkey', f('ca.key'), '-CAcreateserial', '-out', f('server.pem'), '-days', '1', '-extfile', f('san.ext'));
}

const nkeyUser = createUser();
const seed = new TextDecoder().decode(nkeyUser.getSeed());
writeFileSync(f('reader.nk'), `${seed}\n`);

let nats: NatsServer;
let tlsUrl: string;
const readers: ReaderProc[] = [];
let fe: FrontEnd;

beforeAll(async () => {
  makeCerts();
  nats = await startNats(
    [
      `tls { cert_file: "${f('server.pem')}", key_file: "${f('server.key')}", timeout: 2 }`,
      'authorization {',
      '  users: [',
      '    { user: "weft", password: "s3cret-pass" }',
      `    { nkey: "${nkeyUser.getPublicKey()}" }`,
      '  ]',
      '}',
    ].join('\n'),
  );
  tlsUrl = nats.url.replace('nats://', 'tls://');
}, 60_000);

afterAll(async () => {
  for (const p of [...readers, fe]) if (p) await kill(p.child);
  await nats?.stop();
}, 30_000);

describe('NATS with TLS and credentials', () => {
  it('readers with the CA and valid credentials (user/password, nkey) attach and serve a front end', async () => {
    const [byPassword, byNkey, front] = await Promise.all([
      startReader(tlsUrl, 'secure', ['--tls-ca', f('ca.pem'), '--user', 'weft', '--password', 's3cret-pass', '--reader-id', 'secure-pw']),
      startReader(tlsUrl, 'secure', ['--tls-ca', f('ca.pem'), '--nkey', f('reader.nk'), '--reader-id', 'secure-nk']),
      startFrontEnd({ url: tlsUrl, tls_ca: f('ca.pem'), user: 'weft', password: 's3cret-pass' }),
    ]);
    readers.push(byPassword, byNkey);
    fe = front;
    await until('both readers listed', async () => (await readerGroups(fe)).secure?.filter((r) => r.ready).length === 2, 30_000);
    const r = await stream(fe.inference, { text: 'Once upon a time', max_new_tokens: 6, consumer_group: 'secure' });
    expect(r.error).toBeNull();
    expect(r.ids).toHaveLength(6);
  }, 150_000);

  it('a wrong password cannot attach', async () => {
    const r = await readerFails(['--nats', tlsUrl, '--group', 'secure', '--tls-ca', f('ca.pem'), '--user', 'weft', '--password', 'wrong']);
    expect(r.code).toBe(1);
    expect(r.err).toMatch(/nats_connect_failed/);
    expect(r.err).toMatch(/auth/i);
  }, 60_000);

  it('an nkey the broker does not know cannot attach', async () => {
    const stranger = new TextDecoder().decode(createUser().getSeed());
    const r = await readerFails(['--nats', tlsUrl, '--group', 'secure', '--tls-ca', f('ca.pem'), '--nkey', stranger]);
    expect(r.code).toBe(1);
    expect(r.err).toMatch(/nats_connect_failed/);
  }, 60_000);

  it('TLS is required: plain nats:// without the CA, and a certificate from another CA, are refused', async () => {
    const plain = await readerFails(['--nats', nats.url, '--group', 'secure', '--user', 'weft', '--password', 's3cret-pass']);
    expect(plain.code).toBe(1);
    expect(plain.err).toMatch(/nats_connect_failed/);
    const otherCa = await readerFails(['--nats', tlsUrl, '--group', 'secure', '--tls-ca', f('other.pem'), '--user', 'weft', '--password', 's3cret-pass']);
    expect(otherCa.code).toBe(1);
    expect(otherCa.err).toMatch(/nats_connect_failed/);
    // Neither is listed anywhere.
    expect((await readerGroups(fe)).secure!.map((r) => r.reader_id).sort()).toEqual(['secure-nk', 'secure-pw']);
  }, 60_000);
});

/**
 * Image URLs cannot reach loopback, private, link-local, metadata or other
 * refused addresses in any textual form, also through redirects or a DNS answer
 * that changes between check and connect. A canary HTTP listener on loopback
 * counts the connections it receives: every refused form must leave it at 0.
 * A trusted host is reachable only when its address is configured
 * (`allowAddresses`, as `image_fetch_allow_addresses` sets it), and failures
 * after a connection all read the same, so the target's answer is not revealed.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolvePromptImages, type ImageFetchConfig } from '../../server/http/image_urls.ts';
import { isForbiddenAddress } from '../../server/http/ip_ranges.ts';

const PNG = Buffer.from('89504e470d0a1a0a0000000d4948445200000001000000010806000000', 'hex');

function listen(host: string, handler: Parameters<typeof createServer>[1]): Promise<{ server: Server; port: number; connections: () => number }> {
  let n = 0;
  const server = createServer(handler);
  server.on('connection', () => n++);
  return new Promise((resolve) => server.listen(0, host, () => resolve({ server, port: (server.address() as AddressInfo).port, connections: () => n })));
}

describe('image URL fetching refuses internal targets', () => {
  let canary: Awaited<ReturnType<typeof listen>>;
  let origin: Awaited<ReturnType<typeof listen>>;
  const base: ImageFetchConfig = { maxBytes: 1e5, maxCount: 8, timeoutMs: 2000, fetch: true, allowPrivate: false };

  beforeAll(async () => {
    canary = await listen('127.0.0.1', (_req, res) => res.end('internal'));
    // The trusted "public" host of these tests: 127.0.0.3, allowed by address only.
    origin = await listen('127.0.0.3', (req, res) => {
      const to = /^\/to\/(.*)$/.exec(req.url ?? '');
      if (to) {
        res.writeHead(302, { location: decodeURIComponent(to[1]!) });
        res.end();
      } else if (req.url === '/ok.png') res.end(PNG);
      else if (req.url === '/big') res.end(Buffer.alloc(2e5));
      else {
        res.writeHead(404);
        res.end('no');
      }
    });
  });
  afterAll(() => {
    canary.server.close();
    origin.server.close();
  });

  it('refuses every loopback/private/metadata address form without connecting', async () => {
    const p = canary.port;
    const forms = [
      `http://[::ffff:127.0.0.1]:${p}/reader_groups`,
      `http://[::ffff:7f00:1]:${p}/`,
      `http://[::127.0.0.1]:${p}/`,
      `http://[0:0:0:0:0:ffff:7f00:0001]:${p}/`,
      `http://[64:ff9b::7f00:1]:${p}/`,
      `http://[64:ff9b:1::7f00:1]:${p}/`,
      `http://[2002:7f00:1::]:${p}/`,
      `http://2130706433:${p}/`,
      `http://0177.0.0.1:${p}/`,
      `http://0x7f.1:${p}/`,
      `http://127.1:${p}/`,
      `http://0x7f000001:${p}/`,
      `http://localhost:${p}/`,
      `http://0.0.0.0:${p}/`,
      `http://[::]:${p}/`,
      `http://[::1]:${p}/`,
      'http://169.254.169.254/latest/meta-data/',
      'http://[::ffff:169.254.169.254]/',
      'http://[fd00:ec2::254]/',
      'http://[fe80::1]/',
      'http://10.0.0.1/',
      'http://172.16.0.1/',
      'http://192.168.1.1/',
      'http://100.64.0.1/',
      'http://224.0.0.1/',
      'http://[ff02::1]/',
      'http://255.255.255.255/',
    ];
    for (const u of forms) {
      const err = await resolvePromptImages(`x <image:${u}>`, base).then(
        () => null,
        (e: { code?: string }) => e,
      );
      expect({ u, code: err?.code }).toEqual({ u, code: 'image_url_forbidden' });
    }
    expect(canary.connections()).toBe(0);
  });

  it('classifies public addresses as allowed', () => {
    for (const ip of ['8.8.8.8', '93.184.216.34', '2606:4700::1111', '::ffff:8.8.8.8', '64:ff9b::808:808']) expect({ ip, forbidden: isForbiddenAddress(ip) }).toEqual({ ip, forbidden: false });
    for (const ip of ['127.0.0.1', '::ffff:127.0.0.1', '::ffff:7f00:1', 'fd00:ec2::254', '169.254.169.254', '100.127.255.255', 'not an ip']) expect({ ip, forbidden: isForbiddenAddress(ip) }).toEqual({ ip, forbidden: true });
  });

  it('fetches a configured trusted address; redirects to internal forms are refused without connecting', async () => {
    const cfg = { ...base, allowAddresses: ['127.0.0.3'] };
    const o = `http://127.0.0.3:${origin.port}`;
    const ok = await resolvePromptImages(`x <image:${o}/ok.png>`, cfg);
    expect(Buffer.from(ok.images[0]!).equals(PNG)).toBe(true);
    // Without the allow-list the same host is refused.
    await expect(resolvePromptImages(`x <image:${o}/ok.png>`, base)).rejects.toMatchObject({ code: 'image_url_forbidden' });
    for (const target of [`http://[::ffff:127.0.0.1]:${canary.port}/`, `http://2130706433:${canary.port}/`, `http://localhost:${canary.port}/`]) {
      await expect(resolvePromptImages(`x <image:${o}/to/${encodeURIComponent(target)}>`, cfg)).rejects.toMatchObject({ code: 'image_fetch_failed' });
    }
    expect(canary.connections()).toBe(0);
  });

  it('connects to the address it checked even when DNS answers differently later', async () => {
    let calls = 0;
    const resolve = async (host: string): Promise<string[]> => {
      expect(host).toBe('images.example.test');
      return calls++ === 0 ? ['127.0.0.3'] : ['127.0.0.1'];
    };
    const cfg = { ...base, allowAddresses: ['127.0.0.3'], resolve };
    const ok = await resolvePromptImages(`x <image:http://images.example.test:${origin.port}/ok.png>`, cfg);
    expect(Buffer.from(ok.images[0]!).equals(PNG)).toBe(true);
    expect(calls).toBe(1);
    // A name that resolves to any refused address is refused before connecting.
    await expect(resolvePromptImages(`x <image:http://images.example.test:${canary.port}/>`, { ...base, resolve: async () => ['8.8.8.8', '127.0.0.1'] })).rejects.toMatchObject({ code: 'image_url_forbidden' });
    expect(canary.connections()).toBe(0);
  });

  it('answers one uniform error whatever the target answered', async () => {
    const cfg = { ...base, allowAddresses: ['127.0.0.3'] };
    const o = `http://127.0.0.3:${origin.port}`;
    const closed = await listen('127.0.0.3', () => undefined);
    const closedPort = closed.port;
    await new Promise((r) => closed.server.close(r));
    const urls = [`${o}/missing`, `${o}/big`, `http://127.0.0.3:${closedPort}/x`, `${o}/to/${encodeURIComponent(`http://127.0.0.1:${canary.port}/`)}`];
    const messages = new Set<string>();
    for (const u of urls) {
      const e = (await resolvePromptImages(`x <image:${u}>`, cfg).catch((x: unknown) => x)) as { code: string; message: string; details?: Record<string, unknown> };
      expect(e.code).toBe('image_fetch_failed');
      expect(Object.keys(e.details ?? {}).sort()).toEqual(['field', 'url']);
      messages.add(e.message.replace(u, 'URL'));
    }
    expect([...messages]).toHaveLength(1);
    expect(canary.connections()).toBe(0);
  });
});

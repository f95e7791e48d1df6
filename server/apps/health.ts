/**
 * `/healthz` (and its `/health` alias) on every port: 200 when every reader
 * that must be ready is, none has stalled and the licence (if required) is
 * valid; else 503 with the reason (docs/api.md).
 */
import type { Context } from 'hono';
import { type ManagedReader, PROBE_MS } from '../readers/managed_reader.ts';
import type { Service } from '../service.ts';

export async function healthz(c: Context, svc: Service): Promise<Response> {
  const wait = Math.min(Number(c.req.query('wait') ?? '0') || 0, svc.config.healthWaitMax);
  if (wait > 0 && !svc.readers.allReady) await svc.readers.waitSettled(wait * 1000);
  // Probe every ready reader (bounded wait): a reader whose work has not advanced for reader_stall_millis is unhealthy.
  await Promise.all(svc.readers.all().map((r) => r.statsWithin(PROBE_MS)));
  const stalled = (r: ManagedReader): boolean => r.ready && r.stalledMs() > svc.config.readerStallMillis;
  const readers = svc.readers.all().map((r) => ({ reader_id: r.readerId, ready: r.ready, state: r.state, ...(stalled(r) ? { stalled_ms: r.stalledMs() } : {}) }));
  const unhealthy = svc.readers.all().some(stalled);
  const ok = svc.readers.allReady && !unhealthy && svc.license.ok;
  const lic = svc.license.state();
  const license = { state: lic.state, required: lic.required, licensee: lic.licensee, expires: lic.expires, reason: lic.reason };
  const status = !svc.license.ok ? 'unlicensed' : unhealthy ? 'unhealthy' : ok ? 'ok' : 'loading';
  return c.json({ status, readers, license }, ok ? 200 : 503);
}

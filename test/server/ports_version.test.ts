/**
 * Ports and probes every app shares: the Vertex app taking AIP_HTTP_PORT from
 * the SageMaker app when both default to 8080, two apps configured on one port
 * refused at start-up, and `GET /version` + `GET /health` (the `/healthz`
 * answer) on every port, over real HTTP on loopback. No reader is started
 * (model ''), so health answers 503 "loading" everywhere; `weft --version`
 * runs the real command line.
 */
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import { appPorts } from '../../server/apps/index.ts';
import { loadConfig, type ServiceConfig } from '../../server/config.ts';
import { start, type Running } from '../../server/main.ts';

const PKG = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { name: string; version: string };

const config = (o: Partial<ServiceConfig>): ServiceConfig =>
  loadConfig({ env: {}, overrides: { model: '', embeddingModel: '', host: '127.0.0.1', port: 0, managementPort: 0, openaiPort: 0, sagemakerPort: 0, vertexPort: 0, logDisableTimestamps: true, ...o } });

const freePort = (): Promise<number> =>
  new Promise((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const a = s.address();
      s.close(() => resolve(typeof a === 'object' && a ? a.port : 0));
    });
  });

let run: Running | undefined;
const savedAip = process.env.AIP_HTTP_PORT;
afterEach(async () => {
  await run?.close();
  run = undefined;
  if (savedAip === undefined) delete process.env.AIP_HTTP_PORT;
  else process.env.AIP_HTTP_PORT = savedAip;
});

describe('app ports', () => {
  it('gives AIP_HTTP_PORT to the Vertex app when it is the SageMaker port, and says so', () => {
    const { ports, notes } = appPorts(loadConfig({ env: {} }), { AIP_HTTP_PORT: '8080' });
    expect(ports).toEqual({ inference: 3000, management: 3001, openai: 3003, sagemaker: 0, vertex: 8080 });
    expect(notes).toHaveLength(1);
    expect(notes[0]).toMatch(/sagemaker app off: port 8080 is AIP_HTTP_PORT/);
    // Without AIP_HTTP_PORT both apps keep their defaults.
    expect(appPorts(loadConfig({ env: {} }), {}).ports).toMatchObject({ sagemaker: 8080, vertex: 3002 });
    // With another sagemaker_port both stay on.
    expect(appPorts(loadConfig({ env: {}, overrides: { sagemakerPort: 8081 } }), { AIP_HTTP_PORT: '8080' }).ports).toMatchObject({ sagemaker: 8081, vertex: 8080 });
  });

  it('refuses two apps on one port with invalid_config naming both', () => {
    let err: unknown;
    try {
      appPorts(loadConfig({ env: {}, overrides: { managementPort: 3003 } }), {});
    } catch (e) {
      err = e;
    }
    expect(err).toMatchObject({ code: 'invalid_config', details: { key: 'openai_port', port: 3003 } });
    expect((err as Error).message).toMatch(/management and openai apps are both on port 3003/);
    // Port 0 (off) is never a collision.
    expect(() => appPorts(loadConfig({ env: {}, overrides: { managementPort: 0, openaiPort: 0 } }), {})).not.toThrow();
  });

  it('starts with the SageMaker default port equal to AIP_HTTP_PORT: the Vertex app answers there', async () => {
    const p = await freePort();
    process.env.AIP_HTTP_PORT = String(p);
    run = await start(config({ sagemakerPort: p }));
    expect(run.servers.map((s) => [s.name, s.port]).filter(([n]) => n !== 'inference')).toEqual([['vertex', p]]);
    const health = await fetch(`http://127.0.0.1:${p}/health`);
    expect(health.status).toBe(503); // the Vertex health route (no reader loaded)
    expect(await health.json()).toEqual({ status: 'loading' });
    expect((await fetch(`http://127.0.0.1:${p}/ping`)).status).toBe(404); // no SageMaker app here
  });
});

describe('GET /version and GET /health on every port', () => {
  it('answer on each app, /health as /healthz does', async () => {
    run = await start(config({}), { ephemeral: true });
    expect(run.servers.map((s) => s.name).sort()).toEqual(['inference', 'management', 'openai', 'sagemaker', 'vertex']);
    for (const s of run.servers) {
      const base = `http://127.0.0.1:${s.port}`;
      const v = await fetch(`${base}/version`);
      expect(v.status, s.name).toBe(200);
      expect(await v.json()).toEqual({ name: PKG.name, version: PKG.version });
      const h = await fetch(`${base}/health`);
      expect(h.status, s.name).toBe(503);
      const body: unknown = await h.json();
      if (s.name === 'vertex') {
        expect(body).toEqual({ status: 'loading' }); // Vertex's own route (AIP_HEALTH_ROUTE default /health)
        continue;
      }
      const hz = await fetch(`${base}/healthz`);
      if (hz.status !== 404) {
        expect(hz.status, s.name).toBe(h.status);
        expect(await hz.json()).toEqual(body);
      }
    }
  });
});

describe('weft --version', () => {
  it('prints the package version', async () => {
    const bin = new URL('../../bin/weft.js', import.meta.url).pathname;
    const { stdout } = await promisify(execFile)(process.execPath, [bin, '--version'], { timeout: 60_000 });
    expect(stdout.trim()).toBe(PKG.version);
  }, 60_000);
});

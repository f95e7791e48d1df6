/**
 * Test helpers for remote readers and scaling: killing child processes, the
 * service's apps on real loopback HTTP, token streams, and small polling.
 */
import { serve, type ServerType } from '@hono/node-server';
import type { ChildProcess } from 'node:child_process';
import type { Apps } from '../../server/apps/index.ts';

/** Kills a child and resolves when it is gone. */
export function kill(child: ChildProcess, signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    child.once('exit', () => resolve());
    child.kill(signal);
  });
}

export interface Http {
  inference: string;
  management: string;
  close(): Promise<void>;
}

/** Serves the inference and management apps on ephemeral loopback ports. */
export async function listenApps(apps: Apps): Promise<Http> {
  const servers: ServerType[] = [];
  const bind = async (fetch: (r: Request) => Response | Promise<Response>): Promise<string> => {
    const s = await new Promise<ServerType>((resolve) => {
      const srv = serve({ fetch, port: 0, hostname: '127.0.0.1' }, () => resolve(srv));
    });
    servers.push(s);
    const addr = s.address();
    return `http://127.0.0.1:${typeof addr === 'object' && addr ? addr.port : 0}`;
  };
  const inference = await bind(apps.inference.fetch);
  const management = await bind(apps.management.fetch);
  return {
    inference,
    management,
    close: async () => {
      await Promise.all(servers.map((s) => new Promise<void>((r) => s.close(() => r()))));
    },
  };
}

export const json = (body: unknown, method = 'POST'): RequestInit => ({ method, headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });

/** Polls `f` every `everyMs` until it returns a truthy value; throws after `ms`. */
export async function until<T>(what: string, f: () => T | Promise<T>, ms = 60_000, everyMs = 100): Promise<NonNullable<T>> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await f();
    if (v) return v as NonNullable<T>;
    if (Date.now() > end) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Token ids and text of a /generate_stream response. */
export async function streamTokens(base: string, body: Record<string, unknown>): Promise<{ ids: number[]; text: string; events: string[] }> {
  const res = await fetch(`${base}/generate_stream`, json(body));
  if (res.status !== 200) throw new Error(`generate_stream ${res.status}: ${await res.text()}`);
  const raw = await res.text();
  const ids: number[] = [];
  let text = '';
  const events: string[] = [];
  for (const block of raw.split('\n\n').filter((b) => b.trim())) {
    const ev = /^event: ?(.*)$/m.exec(block)?.[1] ?? 'message';
    events.push(ev);
    const data = /^data: ?(.*)$/m.exec(block)?.[1];
    if (ev === 'message' && data) {
      const d = JSON.parse(data) as { text: string; token_id: number };
      ids.push(d.token_id);
      text += d.text;
    }
  }
  return { ids, text, events };
}

/**
 * Routes declared once with their zod schemas: the same schema validates the
 * request body and produces the OpenAPI document served at /openapi.json and
 * rendered at /docs (Swagger UI from the local swagger-ui-dist package; no
 * CDN). Validation failures are 400 `invalid_request` naming the field.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import type { Context, Hono } from 'hono';
import { z } from 'zod';
import { InvalidRequestError } from '../../core/errors.ts';
import { parseJsonText, readBodyBytes } from './body.ts';
import { unknownFieldError } from './unknown_fields.ts';

export interface RouteDoc {
  method: 'get' | 'post' | 'put' | 'patch' | 'delete';
  path: string; // OpenAPI form: /tokenize/{reader_id}
  summary: string;
  body?: z.ZodType;
  response?: z.ZodType;
  stream?: boolean;
  query?: Record<string, string>;
}

export class ApiSpec {
  readonly routes: RouteDoc[] = [];
  constructor(
    readonly title: string,
    readonly description: string,
    readonly version: string,
  ) {}

  add(r: RouteDoc): void {
    this.routes.push(r);
  }

  document(): Record<string, unknown> {
    const paths: Record<string, Record<string, unknown>> = {};
    const error = { type: 'object', properties: { error: { type: 'object', properties: { code: { type: 'string' }, message: { type: 'string' }, details: { type: 'object' } }, required: ['code', 'message'] } } };
    for (const r of this.routes) {
      const params = [...r.path.matchAll(/\{(\w+)\}/g)].map((m) => ({ name: m[1], in: 'path', required: true, schema: { type: 'string' } }));
      const query = Object.entries(r.query ?? {}).map(([name, description]) => ({ name, in: 'query', required: false, description, schema: { type: 'string' } }));
      const op: Record<string, unknown> = {
        summary: r.summary,
        ...(params.length || query.length ? { parameters: [...params, ...query] } : {}),
        responses: {
          200: {
            description: r.stream ? 'Server-sent events' : 'OK',
            content: r.stream ? { 'text/event-stream': { schema: { type: 'string' } } } : { 'application/json': { schema: r.response ? z.toJSONSchema(r.response, { io: 'output', unrepresentable: 'any' }) : {} } },
          },
          default: { description: 'Error', content: { 'application/json': { schema: error } } },
        },
      };
      if (r.body) op.requestBody = { required: true, content: { 'application/json': { schema: z.toJSONSchema(r.body, { io: 'input', unrepresentable: 'any' }) } } };
      (paths[r.path] ??= {})[r.method] = op;
    }
    return { openapi: '3.1.0', info: { title: this.title, description: this.description, version: this.version }, paths };
  }

  /** Mounts /openapi.json and /docs (Swagger UI) on `app`. */
  mountDocs(app: Hono): void {
    app.get('/openapi.json', (c) => c.json(this.document()));
    app.get('/docs', (c) => c.html(docsPage(this.title)));
    app.get('/docs/:file{swagger-ui\\.css|swagger-ui-bundle\\.js}', (c) => {
      const file = c.req.param('file');
      const type = file.endsWith('.css') ? 'text/css' : 'application/javascript';
      return c.body(swaggerAsset(file), 200, { 'content-type': type, 'cache-control': 'public, max-age=86400' });
    });
  }
}

const assets = new Map<string, string>();
function swaggerAsset(file: string): string {
  let a = assets.get(file);
  if (a === undefined) {
    const dir = dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'));
    a = readFileSync(join(dir, file), 'utf8');
    assets.set(file, a);
  }
  return a;
}

function docsPage(title: string): string {
  // Relative URLs: works under any proxy sub-path.
  return `<!doctype html><html><head><meta charset="utf-8"><title>${title} — API docs</title>
<link rel="stylesheet" href="docs/swagger-ui.css"></head><body><div id="ui"></div>
<script src="docs/swagger-ui-bundle.js"></script>
<script>window.ui = SwaggerUIBundle({ url: 'openapi.json', dom_id: '#ui' });</script></body></html>`;
}

/** Reads and validates a JSON body against `schema`. */
export async function parseBody<T extends z.ZodType>(c: Context, schema: T, maxBytes: number): Promise<z.output<T>> {
  return validateBody(schema, await readJsonBody(c, maxBytes));
}

/** The request body parsed as JSON, within `maxBytes` counted as they arrive and MAX_JSON_DEPTH levels (server/http/body.ts). */
export async function readJsonBody(c: Context, maxBytes: number): Promise<unknown> {
  const bytes = await readBodyBytes(c.req.raw, maxBytes);
  return parseJsonText(new TextDecoder().decode(bytes));
}

/** `json` checked against `schema`: `400 unknown_field` first, else `400 invalid_request` naming the first bad field. */
export function validateBody<T extends z.ZodType>(schema: T, json: unknown): z.output<T> {
  const r = schema.safeParse(json);
  if (!r.success) {
    // An unknown field is reported first whatever else is wrong: it is usually the cause (a
    // misspelt name leaves the intended field missing or at its default).
    const unknown = r.error.issues.find((i) => i.code === 'unrecognized_keys');
    if (unknown) throw unknownFieldError(schema, unknown.path, unknown.keys);
    const issue = r.error.issues[0]!;
    const field = issue.path.join('.') || '(body)';
    throw new InvalidRequestError('invalid_request', `${field}: ${issue.message}`, { field, issues: r.error.issues.slice(0, 5).map((i) => ({ path: i.path.join('.'), message: i.message })) });
  }
  return r.data;
}

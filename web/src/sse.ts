/**
 * Server-sent events over fetch: an incremental parser (pure, unit-tested)
 * and an async reader of a Response body. EventSource cannot POST, so the
 * playground streams with fetch + ReadableStream and parses here.
 */
export interface SseEvent {
  event: string;
  data: string;
  id?: string;
}

/** Feed text chunks as they arrive; complete events come back. */
export class SseParser {
  private buf = '';
  private event = '';
  private data: string[] = [];
  private id: string | undefined;

  push(chunk: string): SseEvent[] {
    this.buf += chunk;
    const out: SseEvent[] = [];
    let nl: number;
    while ((nl = this.buf.search(/\r\n|\r|\n/)) >= 0) {
      const line = this.buf.slice(0, nl);
      // A lone '\r' at the end may be half of '\r\n': wait for more.
      if (this.buf[nl] === '\r' && nl === this.buf.length - 1) break;
      this.buf = this.buf.slice(nl + (this.buf.startsWith('\r\n', nl) ? 2 : 1));
      if (line === '') {
        if (this.data.length) out.push({ event: this.event || 'message', data: this.data.join('\n'), ...(this.id !== undefined ? { id: this.id } : {}) });
        this.event = '';
        this.data = [];
        continue;
      }
      if (line.startsWith(':')) continue;
      const colon = line.indexOf(':');
      const name = colon < 0 ? line : line.slice(0, colon);
      const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
      if (name === 'event') this.event = value;
      else if (name === 'data') this.data.push(value);
      else if (name === 'id') this.id = value;
    }
    return out;
  }
}

/** Yields the events of an SSE response body until it ends (or the fetch is aborted). */
export async function* readSse(body: ReadableStream<Uint8Array>): AsyncGenerator<SseEvent> {
  // (cast: @types/node's TextDecoderStream differs from the DOM one)
  const reader = body.pipeThrough(new TextDecoderStream() as unknown as ReadableWritablePair<string, Uint8Array>).getReader();
  const parser = new SseParser();
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      yield* parser.push(value);
    }
    yield* parser.push('\n\n');
  } finally {
    reader.releaseLock();
  }
}

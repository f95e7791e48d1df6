/**
 * A minimal single-consumer async channel: the engine loop pushes events,
 * a request's consumer iterates them. Closing ends the iteration; failing
 * makes the consumer's next read throw. Calling `return()` on the iterator
 * (a `break` out of `for await`) runs `onCancel`, so a consumer that walks
 * away cancels its request.
 */
export class Channel<T> implements AsyncIterable<T> {
  private readonly items: T[] = [];
  private waiter: { resolve: (r: IteratorResult<T>) => void; reject: (e: unknown) => void } | null = null;
  private closed = false;
  private error: unknown = undefined;

  constructor(private readonly onCancel?: () => void) {}

  push(item: T): void {
    if (this.closed) return;
    if (this.waiter) {
      const w = this.waiter;
      this.waiter = null;
      w.resolve({ value: item, done: false });
    } else this.items.push(item);
  }

  close(): void {
    this.closed = true;
    if (this.waiter && this.items.length === 0) {
      const w = this.waiter;
      this.waiter = null;
      w.resolve({ value: undefined, done: true });
    }
  }

  fail(e: unknown): void {
    this.error = e;
    this.closed = true;
    if (this.waiter) {
      const w = this.waiter;
      this.waiter = null;
      w.reject(e);
    }
  }

  [Symbol.asyncIterator](): AsyncIterator<T> {
    return {
      next: () => {
        const item = this.items.shift();
        if (item !== undefined) return Promise.resolve({ value: item, done: false });
        if (this.error !== undefined) return Promise.reject(this.error);
        if (this.closed) return Promise.resolve({ value: undefined, done: true });
        return new Promise((resolve, reject) => (this.waiter = { resolve, reject }));
      },
      return: () => {
        if (!this.closed) this.onCancel?.();
        this.closed = true;
        return Promise.resolve({ value: undefined, done: true });
      },
    };
  }
}

/** A page of the app: built once, shown and hidden by the router (pollers pause while hidden). */
export interface Page {
  el: HTMLElement;
  show?(): void;
  hide?(): void;
}

/** Runs `fn` now and every `ms` while started; `stop()` pauses it. Skips a tick while one is in flight. */
export function poller(fn: () => Promise<void>, ms: number): { start(): void; stop(): void } {
  let timer: ReturnType<typeof setInterval> | undefined;
  let busy = false;
  const tick = (): void => {
    if (busy) return;
    busy = true;
    void fn().finally(() => (busy = false));
  };
  return {
    start() {
      if (timer) return;
      tick();
      timer = setInterval(tick, ms);
    },
    stop() {
      clearInterval(timer);
      timer = undefined;
    },
  };
}

/**
 * The message a Node worker reader gets before it is stopped: it releases its GPU device on its
 * own thread and exits (worker_entry.ts). Kept apart from the reader protocol (core/engine/
 * protocol.ts), which is runtime-neutral; the manager falls back to terminate() after
 * SHUTDOWN_GRACE_MS.
 */
export const SHUTDOWN = { kind: 'weft-shutdown' } as const;
export const SHUTDOWN_GRACE_MS = 5_000;

/**
 * Structured logs: one JSON object per line on stderr (level, msg, fields),
 * with an ISO timestamp unless WEFT_LOG_DISABLE_TIMESTAMPS is set. On a TTY
 * without NO_COLOR the level is coloured; otherwise no ANSI codes ever.
 */
export type Logger = (msg: string, fields?: Record<string, unknown>, level?: 'info' | 'warn' | 'error') => void;

const COLORS = { info: '\x1b[36m', warn: '\x1b[33m', error: '\x1b[31m' } as const;

export function createLogger(opts: { timestamps: boolean; color: boolean; write?: (line: string) => void }): Logger {
  const write = opts.write ?? ((line: string) => process.stderr.write(`${line}\n`));
  return (msg, fields = {}, level = 'info') => {
    const rec = { ...(opts.timestamps ? { ts: new Date().toISOString() } : {}), level, msg, ...fields };
    const line = JSON.stringify(rec);
    write(opts.color ? `${COLORS[level]}${line}\x1b[0m` : line);
  };
}

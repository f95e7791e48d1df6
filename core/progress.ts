/**
 * Progress of getting a model ready, for bars and log lines (the CLI's
 * server/progress.ts draws them; the engine API forwards them as onProgress).
 * Plain data and callbacks only: this module runs in browsers too.
 *
 *   phase 'weights'   : done / total = model units uploaded (the embedding,
 *                       each layer, the head), total known from the config
 *   phase 'pipelines' : done = pipelines compiled so far (warm-up), total =
 *                       warm-up requests' count of steps when known, else null
 *   phase 'ready'     : once, at the end; `ms` = time since the load began
 */
export interface LoadProgress {
  phase: 'weights' | 'pipelines' | 'ready';
  done: number;
  total: number | null;
  /** What was just finished (a tensor group, a pipeline's label). */
  label?: string;
  /** Milliseconds since loading began. */
  ms: number;
}

export type ProgressCallback = (p: LoadProgress) => void;

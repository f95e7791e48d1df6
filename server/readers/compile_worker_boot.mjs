// Compile worker bootstrap: registers tsx in this thread (workers do not inherit
// the parent's loader hooks), then runs the TypeScript compile worker.
import { register } from 'tsx/esm/api';

register();
await import('./compile_worker_entry.ts');

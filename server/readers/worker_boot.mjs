// Worker bootstrap: registers tsx in this thread (workers do not inherit the
// parent's loader hooks), then runs the TypeScript worker entry.
import { register } from 'tsx/esm/api';

register();
await import('./worker_entry.ts');

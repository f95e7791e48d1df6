// Tokenizer worker bootstrap: registers tsx in this thread (workers do not inherit
// the parent's loader hooks), then runs the TypeScript tokenizer worker.
import { register } from 'tsx/esm/api';

register();
await import('./tokenize_worker_entry.ts');

/**
 * The document API contract (api_contract.ts) over a real PostgreSQL server
 * without pgvector (Debian's, started by postgres_real.ts): vectors stored as
 * `real[]` and ranked by the store's weft_cosine function, four pooled
 * connections.
 */
import { BACKENDS } from './backends.ts';
import { apiContract } from './api_contract.ts';

apiContract(BACKENDS['postgresql-plain']);

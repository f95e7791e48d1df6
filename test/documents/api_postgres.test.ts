/**
 * The document API contract (api_contract.ts) over PostgreSQL: the service opens its
 * store from `databaseUrl` with the `pg` driver, against a real server process
 * (scripts/pg_server.ts: PGlite + pgvector on a TCP port) started for the file.
 */
import { BACKENDS } from './backends.ts';
import { apiContract } from './api_contract.ts';

apiContract(BACKENDS.postgres);

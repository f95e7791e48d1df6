/** The document API contract (api_contract.ts) over the default store: embedded PGlite, in memory. */
import { BACKENDS } from './backends.ts';
import { apiContract } from './api_contract.ts';

apiContract(BACKENDS.pglite);

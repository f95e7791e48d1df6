/**
 * The server as a library (`import { start, loadConfig } from '@weft-ai/weft/server'`):
 * the same service `weft serve` runs, for programs that embed it on Node —
 * start it from a configuration, drive its Hono apps, close it.
 */
export { serve, start, type Running } from './main.ts';
export { loadConfig, type ServiceConfig } from './config.ts';
export { buildApps, listenPlan, type Apps } from './apps/index.ts';
export { Service } from './service.ts';
export { VERSION, PACKAGE_ROOT, DEFAULT_MODEL_DIR } from './paths.ts';

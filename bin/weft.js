#!/usr/bin/env node
// Entry point of the `weft` command: registers tsx so the TypeScript sources
// run as they are (the same files Deno and the browser build use), then hands
// over to server/cli.ts.
import { register } from 'tsx/esm/api';

register();
const { main } = await import('../server/cli.ts');
process.exitCode = await main(process.argv.slice(2));

#!/usr/bin/env node
// Entry point of the `weft` command. An installed package runs the compiled
// JavaScript in dist/ (plain Node, no loader). A checkout (server/cli.ts is
// present) runs the TypeScript sources through tsx, the same files Deno and
// the browser build use, unless WEFT_FROM_DIST=1 asks for the built copy.
import { existsSync } from 'node:fs';

const fromSource = existsSync(new URL('../server/cli.ts', import.meta.url)) && process.env.WEFT_FROM_DIST !== '1';
let main;
if (fromSource) {
  const { register } = await import('tsx/esm/api');
  register();
  ({ main } = await import('../server/cli.ts'));
} else {
  ({ main } = await import('../dist/server/cli.js'));
}
process.exitCode = await main(process.argv.slice(2));

/**
 * Entry of the `weft` command in the self-contained GPU kit archive
 * (scripts/bundle_linux_x64.sh): the CLI with no loader and no dist/, bundled
 * by esbuild into lib/weft.js beside the reader worker (lib/worker_entry.js)
 * and the native addon (lib/node_modules/webgpu). bin/weft.js stays the entry
 * of the npm package and the checkout.
 */
import { main } from './cli.ts';

process.exitCode = await main(process.argv.slice(2));

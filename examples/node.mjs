// The engine library from a Node script: load the bundled tiny model from its
// directory, ask for a chat answer, stream a completion, count tokens, unload.
//
//   npx tsx examples/node.mjs [model-dir-or-url]
//
// In an installed package the import is the package's Node entry instead of
// this relative path (see docs/library.md).
import { createEngine } from '../server/library.ts';

const model = process.argv[2] ?? new URL('../models/stories260K', import.meta.url).pathname;
const engine = await createEngine({
  model,
  maxContext: 256,
  onProgress: (p) => process.stderr.write(`\r${p.stage} ${p.total ? Math.round((100 * p.loaded) / p.total) : 0}%   `),
});
process.stderr.write('\n');

const chat = await engine.chat.completions.create({
  messages: [{ role: 'user', content: 'Tell me a story.' }],
  max_tokens: 32,
  temperature: 0.7,
  seed: 42,
});
console.log('chat:', JSON.stringify(chat.choices[0].message.content), chat.usage);

process.stdout.write('stream: ');
for await (const chunk of await engine.completions.create({ prompt: 'Once upon a time', max_tokens: 24, temperature: 0, stream: true })) {
  process.stdout.write(chunk.choices[0]?.text ?? '');
}
console.log();

console.log('tokens:', (await engine.tokenize('Once upon a time')).ids);
await engine.unload();

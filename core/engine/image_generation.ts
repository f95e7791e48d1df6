/**
 * Image-to-text generation on a loaded LLaVA reader: a prompt with
 * `<image:…>` tags and the encoded bytes of each tagged image, in order ->
 * tokens with each tag replaced by the model's image token, then each image
 * token expanded to `tokensPerImage` placeholders (as transformers'
 * LlavaProcessor does) -> the engine, with the projected image features as
 * embedding rows over the placeholders and a prefix-cache salt of the images'
 * content hashes. Errors (bad images, a text-only model) come before the first event.
 */
import type { GenerateOptions, GenerationEvent } from './engine.ts';
import { imageSalt } from './prompt_embeds.ts';
import { CancelledError, InvalidRequestError, ModelFormatError } from '../errors.ts';
import { splitImageTags } from '../images/prompt.ts';
import type { ServedDecoder } from './served_decoder.ts';

/** Hex SHA-256 of the preprocessed pixels (what the features depend on). */
async function contentHash(pixels: Float32Array): Promise<string> {
  const d = new Uint8Array(await crypto.subtle.digest('SHA-256', new Uint8Array(pixels.slice().buffer)));
  return Array.from(d.subarray(0, 16), (b) => b.toString(16).padStart(2, '0')).join('');
}

/** Prompt ids with every image expanded, and where each image's placeholders are. */
export function expandImageTokens(ids: readonly number[], imageTokenId: number, perImage: number): { ids: number[]; spans: { start: number; length: number }[] } {
  const out: number[] = [];
  const spans: { start: number; length: number }[] = [];
  for (const t of ids) {
    if (t !== imageTokenId) {
      out.push(t);
      continue;
    }
    spans.push({ start: out.length, length: perImage });
    for (let k = 0; k < perImage; k++) out.push(imageTokenId);
  }
  return { ids: out, spans };
}

export async function* imageGeneration(loaded: ServedDecoder, prompt: string | number[], images: readonly Uint8Array[], opts: GenerateOptions): AsyncGenerator<GenerationEvent> {
  const vision = loaded.vision;
  if (!vision) {
    throw new InvalidRequestError('images_not_supported', `this reader's model (${loaded.cfg.architecture}) is text-only and takes no images`, { architecture: loaded.cfg.architecture });
  }
  if (typeof prompt !== 'string') throw new InvalidRequestError('invalid_prompt', 'images need a text prompt with <image:…> tags', { field: 'text' });
  const parts = splitImageTags(prompt);
  const tags = parts.filter((p) => 'image' in p).length;
  if (tags !== images.length) {
    throw new InvalidRequestError('image_count_mismatch', `the prompt has ${tags} <image:…> tags but ${images.length} images were given`, { tags, images: images.length });
  }
  const tok = loaded.tokenizer;
  const imageToken = tok.idToToken(vision.imageTokenId);
  if (!imageToken) throw new ModelFormatError(`the tokenizer has no token ${vision.imageTokenId} (image_token_index)`);
  const text = parts.map((p) => ('text' in p ? p.text : imageToken)).join('');
  const raw = tok.encode(text, { addSpecialTokens: opts.addSpecialTokens ?? true });
  const found = raw.filter((t) => t === vision.imageTokenId).length;
  if (found !== images.length) {
    throw new InvalidRequestError('image_token_in_text', `the prompt text contains the image token ${JSON.stringify(imageToken)} outside <image:…> tags (${found} image tokens for ${images.length} images)`, { field: 'text' });
  }
  const { ids, spans } = expandImageTokens(raw, vision.imageTokenId, vision.tokensPerImage);
  if (opts.promptMaxTokens !== undefined && ids.length > opts.promptMaxTokens) {
    throw new InvalidRequestError('prompt_too_long', `the prompt with its images has ${ids.length} tokens; prompt_max_tokens ${opts.promptMaxTokens} would cut an image`, { field: 'prompt_max_tokens', promptTokens: ids.length });
  }
  const pixels = [];
  for (const b of images) pixels.push(await vision.pixels(b));
  const hashes = await Promise.all(pixels.map(contentHash));
  if (opts.signal?.aborted) throw new CancelledError();
  const rows = await vision.encode(pixels);
  if (opts.signal?.aborted) throw new CancelledError();
  const positions = new Uint32Array(spans.length * vision.tokensPerImage);
  spans.forEach((s, i) => {
    for (let k = 0; k < s.length; k++) positions[i * s.length + k] = s.start + k;
  });
  const { promptMaxTokens: _cut, ...rest } = opts;
  yield* loaded.engine.generate(ids, {
    ...rest,
    embeds: { positions, rows, width: vision.hiddenSize },
    salt: imageSalt(spans.map((s, i) => ({ ...s, hash: hashes[i]! }))),
  });
}

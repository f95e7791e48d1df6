/**
 * Request and response schemas of the encoder routes of the inference API
 * (/embed, /classify, /rerank). One source for validation and for the OpenAPI
 * document, as schemas.ts is for generation.
 */
import { z } from 'zod';

/** Inputs per request (as OpenAI's embeddings endpoint). */
export const MAX_ENCODER_INPUTS = 2048;

const group = z.string().min(1).max(64).optional().describe('Reader group to serve the request (default "primary"); it must hold encoder readers of the right type.');

export const EmbedBody = z.strictObject({
  text: z.union([z.string(), z.array(z.string()).min(1).max(MAX_ENCODER_INPUTS)]).describe('A text, or a list of texts (batched with concurrent requests).'),
  consumer_group: group,
  normalize: z.boolean().optional().describe("true: L2-normalize; false: skip the model's Normalize module; absent: the model's own pipeline."),
});

export const EmbedResponse = z.object({
  result: z.union([z.array(z.number()), z.array(z.array(z.number()))]).describe('One vector for a text, a list of vectors (input order) for a list.'),
  dims: z.number(),
  truncated: z.union([z.boolean(), z.array(z.boolean())]).describe("Per text: tokens were dropped to fit the model's limit."),
  usage: z.object({ prompt_tokens: z.number() }),
});

const Pair = z.tuple([z.string(), z.string()]);

export const ClassifyBody = z.strictObject({
  text: z
    .union([z.string(), z.array(z.union([z.string(), Pair])).min(1).max(MAX_ENCODER_INPUTS)])
    .describe('A text, or a list of texts and [text, text] pairs (pairs for cross-encoders).'),
  consumer_group: group,
});

export const Classification = z.object({
  label: z.string().describe('The best label.'),
  score: z.number().describe("The best label's score."),
  scores: z.record(z.string(), z.number()).describe('Every label with its score (softmax, or sigmoid for one label / multi-label models).'),
});

export const ClassifyResponse = z.object({ result: z.array(Classification).describe('One entry per input, in input order.') });

export const RerankBody = z.strictObject({
  query: z.string(),
  documents: z.array(z.string()).min(1).max(MAX_ENCODER_INPUTS),
  consumer_group: group,
  top_n: z.number().int().min(1).optional().describe('Return only the best N results (default: all).'),
  return_documents: z.boolean().optional().describe('Include each document text in its result (default false).'),
});

export const RerankResponse = z.object({
  results: z.array(z.object({ index: z.number(), score: z.number(), document: z.string().optional() })).describe('Best first; ties: lower index first.'),
  scores: z.array(z.number()).describe('Every document score, in input order.'),
});

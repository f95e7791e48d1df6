/**
 * Loads a reader's draft model (ReaderSpec.assistantModel) beside its target,
 * on the same GPU device, with its own paged KV cache (prefix caching off),
 * and attaches it to the target's engine for speculative decoding. A draft
 * must share the target's vocabulary (size and every token string); one that
 * does not, or fails to load, leaves the reader without speculation (logged)
 * unless the spec sets `assistantRequired`, which fails the reader instead.
 */
import { DEFAULT_SPECULATIVE_TOKENS, draftIncompatibility, Speculator } from '../../core/engine/speculative.ts';
import type { ReaderInfo } from '../../core/engine/reader_api.ts';
import { InvalidRequestError } from '../../core/errors.ts';
import type { GpuContext } from '../../core/gpu/context.ts';
import { loadDecoder, type LoadedDecoder } from '../../core/api/load_decoder.ts';
import { openModelPath } from '../fs_source.ts';
import { createLogger } from '../log.ts';
import type { ReaderSpec } from './spec.ts';
import { decodeSettingsFromEnv } from '../gpu_settings.ts';

/** Logit rows the target needs per step to verify `spec`'s draft tokens (undefined: no draft configured). */
export function verificationRows(spec: ReaderSpec, maxSeqs: number): number | undefined {
  if (!spec.assistantModel) return undefined;
  return maxSeqs * ((spec.speculativeTokens ?? DEFAULT_SPECULATIVE_TOKENS) + 1);
}

export async function attachAssistant(ctx: GpuContext, target: LoadedDecoder, spec: ReaderSpec, readerId: string): Promise<ReaderInfo['speculative']> {
  const assistantModel = spec.assistantModel!;
  const tokens = spec.speculativeTokens ?? DEFAULT_SPECULATIVE_TOKENS;
  let draft: LoadedDecoder | null = null;
  try {
    draft = await loadDecoder(ctx, await openModelPath(assistantModel), {
      maxSeqs: target.geometry.maxSeqs,
      maxTokensPerStep: target.geometry.maxTokens,
      maxContext: target.engine.opts.scheduler.maxContext,
      prefixCaching: false,
      decode: decodeSettingsFromEnv(),
      ...(spec.dtype ? { dtype: spec.dtype } : {}),
    });
    const why = draftIncompatibility({ vocabSize: target.cfg.vocabSize, tokenizer: target.tokenizer }, { vocabSize: draft.cfg.vocabSize, tokenizer: draft.tokenizer });
    if (why) throw new InvalidRequestError('incompatible_assistant', `assistant model ${assistantModel} cannot draft for ${spec.model}: ${why}`, { field: 'assistant_model' });
    target.engine.setSpeculator(new Speculator(draft.engine.runner, tokens));
    return { assistantModel, tokens, active: true };
  } catch (e) {
    draft?.destroy();
    if (spec.assistantRequired) throw e;
    const reason = e instanceof Error ? e.message : String(e);
    const log = createLogger({ timestamps: !process.env.WEFT_LOG_DISABLE_TIMESTAMPS, color: false });
    log('speculative decoding disabled: the assistant model is unusable', { reader_id: readerId, assistant_model: assistantModel, reason }, 'warn');
    return { assistantModel, tokens, active: false, reason };
  }
}

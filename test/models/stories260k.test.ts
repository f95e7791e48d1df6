/**
 * The bundled stories260K must reproduce llama2.c's float32 greedy
 * continuation id for id (models/stories260K/README.md), on the GPU through
 * every test backend and on the plain-TypeScript reference path.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { parseDecoderConfig } from '../../core/formats/hf_config.ts';
import { openSafetensorsModel, toFloat32 } from '../../core/formats/safetensors.ts';
import { loadDecoder, type LoadedDecoder } from '../../core/api/load_decoder.ts';
import { argmax, LlamaReference } from '../../core/models/llama/reference.ts';
import { dirSource } from '../../server/fs_source.ts';
import { DEFAULT_MODEL_DIR } from '../../server/paths.ts';
import { gpuFor, TEST_BACKENDS } from '../helpers/gpu.ts';
import { PROMPT_IDS, REFERENCE_IDS, REFERENCE_TEXT } from './stories260k.fixture.ts';

describe('stories260K', () => {
  it('plain-TypeScript reference reproduces the llama2.c greedy ids', async () => {
    const ms = dirSource(DEFAULT_MODEL_DIR);
    const cfg = parseDecoderConfig(await ms.readText('config.json'));
    const st = await openSafetensorsModel(ms);
    const weights = new Map<string, Float32Array>();
    for (const [name, t] of st.tensors) weights.set(name, toFloat32(t.info.dtype, await st.read(name)));
    const ref = new LlamaReference(cfg, (n) => {
      const w = weights.get(n);
      if (!w) throw new Error(`missing ${n}`);
      return w;
    });
    let logits = ref.prefill(PROMPT_IDS);
    const out: number[] = [];
    for (let i = 0; i < REFERENCE_IDS.length; i++) {
      const next = argmax(logits);
      out.push(next);
      logits = ref.step(next);
    }
    expect(out).toEqual(REFERENCE_IDS);
  });

  describe.each(TEST_BACKENDS)('on WebGPU (%s)', (backend) => {
    let loaded: LoadedDecoder | undefined;
    afterAll(() => loaded?.destroy());

    it('greedy decoding reproduces the reference ids and text', async () => {
      const ctx = await gpuFor(backend);
      loaded = await loadDecoder(ctx, dirSource(DEFAULT_MODEL_DIR), { maxSeqs: 4 });
      expect(loaded.engine.promptIds('Once upon a time')).toEqual(PROMPT_IDS);
      const r = await loaded.engine.complete('Once upon a time', { maxNewTokens: 64, sampling: { temperature: 0 } });
      expect(r.tokenIds).toEqual(REFERENCE_IDS);
      // The README's text runs past the 64 listed ids; ours is their exact decode.
      expect(r.text).toBe(loaded.tokenizer.decode(REFERENCE_IDS, { skipSpecialTokens: true }));
      expect(r.text.length).toBeGreaterThan(150);
      expect(REFERENCE_TEXT.startsWith(r.text)).toBe(true);
      expect(r.finishReason).toBe('length');
    });
  });
});

/**
 * The reader protocol's messages as bytes (server/readers/wire_codec.ts):
 * typed arrays come back as the same type and values (raw bytes, not number
 * lists), non-finite numbers survive, and a truncated message is an error.
 */
import { describe, expect, it } from 'vitest';
import { decodeMessage, encodeMessage } from '../../server/readers/wire_codec.ts';

describe('wire codec', () => {
  it('round-trips typed arrays, non-finite numbers and nesting', () => {
    const msg = {
      kind: 'result',
      content: { embeddings: [new Float32Array([0.5, -1.25, 3e-8]), new Float32Array([1, 2])], ids: new Int32Array([7, -9]), logprob: -Infinity, nan: NaN, text: 'é ✓', nested: [{ u: new Uint8Array([0, 255]) }] },
    };
    const bytes = encodeMessage(msg);
    // Floats travel as their 4 bytes each, not as JSON digits.
    expect(Buffer.from(bytes).includes(Buffer.from(new Float32Array([0.5, -1.25, 3e-8]).buffer))).toBe(true);
    const back = decodeMessage(bytes) as typeof msg;
    expect(back.content.embeddings[0]).toBeInstanceOf(Float32Array);
    expect([...back.content.embeddings[0]!]).toEqual([...msg.content.embeddings[0]!]);
    expect([...back.content.embeddings[1]!]).toEqual([1, 2]);
    expect(back.content.ids).toBeInstanceOf(Int32Array);
    expect([...back.content.ids]).toEqual([7, -9]);
    expect(back.content.logprob).toBe(-Infinity);
    expect(back.content.nan).toBeNaN();
    expect(back.content.text).toBe('é ✓');
    expect([...back.content.nested[0]!.u]).toEqual([0, 255]);
  });

  it('a Node Buffer arrives as a Uint8Array, and a view into a larger buffer carries only its bytes', () => {
    const big = new Float32Array([9, 8, 7, 6]);
    const back = decodeMessage(encodeMessage({ b: Buffer.from([1, 2, 3]), v: big.subarray(1, 3) })) as { b: Uint8Array; v: Float32Array };
    expect(back.b).toBeInstanceOf(Uint8Array);
    expect([...back.b]).toEqual([1, 2, 3]);
    expect([...back.v]).toEqual([8, 7]);
  });

  it('refuses a message cut short', () => {
    expect(() => decodeMessage(new Uint8Array([0, 0]))).toThrow();
    const bytes = encodeMessage({ a: 'hello' });
    expect(() => decodeMessage(bytes.subarray(0, bytes.length - 3))).toThrow();
  });
});

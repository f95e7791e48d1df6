#!/usr/bin/python3
"""PyTorch goldens of a GGUF file's own weights: an independent check of Weft's GGUF kernels.

Reads a GGUF v3 file with a reader and numpy dequantizers written here from ggml's block
layouts (F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q5_K, Q6_K; arithmetic in float32 in ggml's
operation order), maps the tensors back to Hugging Face names (the q/k rows of the llama
architecture un-permuted from llama.cpp's interleaved rope order; Gemma's stored (1 + w)
norms back to w), and runs make_realshape.py's plain-PyTorch forward on them with the
checkpoint's config.json. The logits are those of the quantized model itself, so a test can
hold Weft to a tolerance that is the kernels' error alone, not the quantization's.

  /usr/bin/python3 scripts/gguf_golden.py --gguf FILE --config DIR/config.json --ids 1,2,3
      --out PREFIX [--positions P]
Writes PREFIX.json ({positions, vocab, max_abs_logit, types}) and PREFIX.f32 (the logits of
the first P positions, [P, vocab] float32 little-endian).
"""
import argparse
import json
import os
import struct
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_realshape import forward  # noqa: E402

# ggml_type ids (ggml.h) and block sizes in (elements, bytes).
TYPES = {0: 'F32', 1: 'F16', 2: 'Q4_0', 8: 'Q8_0', 12: 'Q4_K', 13: 'Q5_K', 14: 'Q6_K', 30: 'BF16'}
BLOCK = {'F32': (1, 4), 'F16': (1, 2), 'BF16': (1, 2), 'Q8_0': (32, 34), 'Q4_0': (32, 18),
         'Q4_K': (256, 144), 'Q5_K': (256, 176), 'Q6_K': (256, 210)}
# GGUF metadata value types: fixed-size ones as struct formats.
SCALAR = {0: '<B', 1: '<b', 2: '<H', 3: '<h', 4: '<I', 5: '<i', 6: '<f', 7: '<?', 10: '<Q', 11: '<q', 12: '<d'}


class Reader:
    def __init__(self, buf):
        self.b, self.p = buf, 0

    def take(self, fmt):
        v = struct.unpack_from(fmt, self.b, self.p)[0]
        self.p += struct.calcsize(fmt)
        return v

    def string(self):
        n = self.take('<Q')
        s = bytes(self.b[self.p:self.p + n]).decode('utf-8')
        self.p += n
        return s

    def value(self, t):
        if t in SCALAR:
            return self.take(SCALAR[t])
        if t == 8:
            return self.string()
        if t == 9:
            et, n = self.take('<I'), self.take('<Q')
            if et in SCALAR:  # skip fixed-size arrays in one step (token scores, types)
                size = struct.calcsize(SCALAR[et])
                self.p += n * size
                return None
            return [self.value(et) for _ in range(n)]
        raise ValueError(f'unknown GGUF value type {t}')


def read_gguf(path):
    """(metadata dict, {name: (type, dims as stored: ne[0] innermost, byte view)})."""
    buf = np.memmap(path, dtype=np.uint8, mode='r')
    r = Reader(buf)
    if r.take('<I') != 0x46554747:
        raise ValueError(f'{path}: not a GGUF file')
    if r.take('<I') != 3:
        raise ValueError(f'{path}: not GGUF v3')
    n_tensors, n_kv = r.take('<Q'), r.take('<Q')
    meta = {}
    for _ in range(n_kv):
        k = r.string()
        meta[k] = r.value(r.take('<I'))
    infos = []
    for _ in range(n_tensors):
        name = r.string()
        dims = [r.take('<Q') for _ in range(r.take('<I'))]
        t, off = r.take('<I'), r.take('<Q')
        if t not in TYPES:
            raise ValueError(f'{path}: {name} has ggml type {t}, which this script does not decode')
        infos.append((name, TYPES[t], dims, off))
    align = meta.get('general.alignment', 32)
    base = (r.p + align - 1) // align * align
    tensors = {}
    for name, t, dims, off in infos:
        n = int(np.prod(dims))
        be, bb = BLOCK[t]
        tensors[name] = (t, dims, buf[base + off: base + off + n // be * bb])
    return meta, tensors


def f16(b):
    """Little-endian f16 from a [..., 2] uint8 array, as float32."""
    return np.ascontiguousarray(b).view('<f2').astype(np.float32)[..., 0]


def scale_min_k4(s):
    """get_scale_min_k4 for all 8 sub-blocks: s [nb, 12] uint8 -> (sc, m) [nb, 8] float32."""
    s = s.astype(np.uint8)
    sc = np.empty((s.shape[0], 8), np.uint8)
    m = np.empty((s.shape[0], 8), np.uint8)
    sc[:, :4] = s[:, 0:4] & 63
    m[:, :4] = s[:, 4:8] & 63
    sc[:, 4:] = (s[:, 8:12] & 0xF) | ((s[:, 0:4] >> 6) << 4)
    m[:, 4:] = (s[:, 8:12] >> 4) | ((s[:, 4:8] >> 6) << 4)
    return sc.astype(np.float32), m.astype(np.float32)


def dequantize(t, raw, n):
    """The n elements of a tensor of ggml type t from its bytes, float32, in storage order."""
    if t == 'F32':
        return np.frombuffer(raw, '<f4', n).astype(np.float32)
    if t == 'F16':
        return np.frombuffer(raw, '<f2', n).astype(np.float32)
    if t == 'BF16':
        return (np.frombuffer(raw, '<u2', n).astype(np.uint32) << 16).view(np.float32)
    be, bb = BLOCK[t]
    b = np.asarray(raw).reshape(n // be, bb)
    if t == 'Q8_0':  # d f16, 32 int8
        return (f16(b[:, 0:2])[:, None] * b[:, 2:].view(np.int8).astype(np.float32)).reshape(n)
    if t == 'Q4_0':  # d f16, 16 bytes: element j low nibble, j + 16 high nibble, minus 8
        q = b[:, 2:]
        lv = np.concatenate([q & 0xF, q >> 4], 1).astype(np.int8) - 8
        return (f16(b[:, 0:2])[:, None] * lv.astype(np.float32)).reshape(n)
    if t in ('Q4_K', 'Q5_K'):
        # d, dmin f16; 12 scale/min bytes; Q5_K: 32 bytes of fifth bits; 128 bytes of nibbles:
        # 64-element chunk k = sub-blocks 2k (low nibbles) and 2k + 1 (high nibbles).
        d, dmin = f16(b[:, 0:2]), f16(b[:, 2:4])
        sc, m = scale_min_k4(b[:, 4:16])
        qs = b[:, 48:176] if t == 'Q5_K' else b[:, 16:144]
        qs = qs.reshape(-1, 4, 32)
        lv = np.stack([qs & 0xF, qs >> 4], 2).astype(np.int32)  # [nb, 4 chunks, 2 halves, 32]
        if t == 'Q5_K':
            qh = b[:, 16:48].astype(np.int32)  # bit 2k of byte l: chunk k low half, 2k + 1: high half
            bit = np.arange(8).reshape(4, 2)
            lv += ((qh[:, None, None, :] >> bit[None, :, :, None]) & 1) << 4
        lv = lv.reshape(-1, 8, 32).astype(np.float32)
        d1 = (d[:, None] * sc)[:, :, None]
        m1 = (dmin[:, None] * m)[:, :, None]
        return (d1 * lv - m1).astype(np.float32).reshape(n)
    if t == 'Q6_K':
        # ql[128], qh[64], int8 scales[16], d f16. Per half h: ql[64h + l] low/high nibbles are
        # elements l / l + 64 of the half, ql[64h + 32 + l] are l + 32 / l + 96; qh[32h + l]
        # bit pairs 0, 2, 4, 6 give those four elements' top two bits; minus 32.
        ql = b[:, 0:128].reshape(-1, 2, 64).astype(np.int32)
        qh = b[:, 128:192].reshape(-1, 2, 32).astype(np.int32)
        scales = b[:, 192:208].view(np.int8).astype(np.float32)
        d = f16(b[:, 208:210])
        a, c = ql[:, :, :32], ql[:, :, 32:]
        q1 = (a & 0xF) | ((qh & 3) << 4)
        q2 = (c & 0xF) | (((qh >> 2) & 3) << 4)
        q3 = (a >> 4) | (((qh >> 4) & 3) << 4)
        q4 = (c >> 4) | (((qh >> 6) & 3) << 4)
        lv = np.stack([q1, q2, q3, q4], 2).astype(np.float32) - 32  # [nb, 2, 4, 32]: element 128h + 32i + l
        # Scale of element 128h + 32i + l: scales[8h + 2i + l // 16].
        s = scales.reshape(-1, 2, 4, 2)[..., np.arange(32) // 16]
        return ((d[:, None, None, None] * s) * lv).astype(np.float32).reshape(n)
    raise ValueError(f'no dequantizer for {t}')


LAYER = {'attn_norm': 'input_layernorm', 'attn_q': 'self_attn.q_proj', 'attn_k': 'self_attn.k_proj',
         'attn_v': 'self_attn.v_proj', 'attn_output': 'self_attn.o_proj', 'ffn_gate': 'mlp.gate_proj',
         'ffn_up': 'mlp.up_proj', 'ffn_down': 'mlp.down_proj', 'ffn_norm': 'post_attention_layernorm'}
GEMMA_LAYER = {**LAYER, 'ffn_norm': 'pre_feedforward_layernorm', 'post_attention_norm': 'post_attention_layernorm',
               'post_ffw_norm': 'post_feedforward_layernorm'}
TOP = {'token_embd': 'model.embed_tokens', 'output_norm': 'model.norm', 'output': 'lm_head'}


def hf_weights(meta, tensors, cfg):
    """{HF name: float32 tensor in PyTorch shape} from the GGUF tensors."""
    arch = meta['general.architecture']
    gemma = arch in ('gemma2', 'gemma3')
    layer = GEMMA_LAYER if gemma else LAYER
    H, KV = cfg['num_attention_heads'], cfg['num_key_value_heads']
    hd = cfg.get('head_dim', cfg['hidden_size'] // H)
    W = {}
    for name, (t, dims, raw) in tensors.items():
        parts = name.split('.')
        if parts[0] == 'blk':
            hf = f'model.layers.{parts[1]}.{layer[parts[2]]}.{parts[3]}'
        elif parts[0] in TOP:
            hf = f'{TOP[parts[0]]}.{parts[1]}'
        else:
            continue  # rope_freqs: the forward applies the config's rope scaling
        n = int(np.prod(dims))
        x = dequantize(t, raw, n).reshape(list(reversed(dims)))
        if arch == 'llama' and parts[0] == 'blk' and parts[2] in ('attn_q', 'attn_k'):
            # llama.cpp stores q/k rows of each head as interleaved pairs: undo its permute.
            heads = H if parts[2] == 'attn_q' else KV
            cols = x.shape[1] if x.ndim > 1 else 1
            x = x.reshape(heads, hd // 2, 2, cols).swapaxes(1, 2).reshape(x.shape)
        if gemma and name.endswith('norm.weight'):
            x = x - 1.0  # GGUF holds Gemma's (1 + w); the forward adds the 1 back
        W[hf] = torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32))
    return W


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--gguf', required=True)
    ap.add_argument('--config', required=True)
    ap.add_argument('--ids', required=True, help='comma-separated prompt token ids')
    ap.add_argument('--positions', type=int, default=2)
    ap.add_argument('--out', required=True, help='output prefix (PREFIX.json, PREFIX.f32)')
    a = ap.parse_args()
    with open(a.config) as f:
        cfg = json.load(f)
    meta, tensors = read_gguf(a.gguf)
    if meta.get(f"{meta['general.architecture']}.block_count") != cfg['num_hidden_layers']:
        raise ValueError('the GGUF and config.json disagree on the layer count')
    W = hf_weights(meta, tensors, cfg)
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    ids = [int(s) for s in a.ids.split(',')]
    with torch.no_grad():
        logits = forward(cfg, W, ids)[: a.positions].contiguous()
    logits.numpy().astype('<f4').tofile(a.out + '.f32')
    types = sorted({t for t, _, _ in tensors.values()})
    with open(a.out + '.json', 'w') as f:
        json.dump({'positions': a.positions, 'vocab': int(logits.shape[1]), 'max_abs_logit': float(logits.abs().max()),
                   'types': types}, f)


if __name__ == '__main__':
    main()

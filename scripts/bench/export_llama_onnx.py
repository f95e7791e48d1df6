#!/usr/bin/env python3
"""Export a Hugging Face Llama checkpoint (config.json + model.safetensors, f32) to ONNX
in the layout transformers.js loads for text generation.

    /usr/bin/python3 scripts/bench/export_llama_onnx.py MODEL_DIR [--out OUT_DIR] [--check-ids 1,403,...]

Writes OUT_DIR/onnx/model.onnx (OUT_DIR defaults to MODEL_DIR) and, when OUT_DIR differs,
copies config.json, generation_config.json and the tokenizer files next to it; adds a
"transformers.js_config" block (fp32, no external data) to OUT_DIR/config.json.

The graph: inputs input_ids [B,S] int64, attention_mask [B,P+S] int64, position_ids [B,S]
int64, past_key_values.{i}.key/value [B, kv_heads, P, head_dim] f32; outputs logits
[B,S,V] and present.{i}.key/value [B, kv_heads, P+S, head_dim] (opset 17, fp32) -- the
same interface as optimum's export of LlamaForCausalLM with past.

The model is a small torch module written here (no `transformers` dependency): RMSNorm,
rotate-half RoPE (theta from the config), grouped-query attention with a KV cache, SiLU
MLP, tied or untied LM head -- HF modeling_llama semantics. It reads the safetensors file
itself (no `safetensors` package needed). Only plain Llama is supported: no attention
bias, no rope scaling, no sliding window.

--check-ids runs greedy decoding in torch (one token at a time through the KV cache) after
the prompt ids and prints the continuation as JSON, so an export can be checked against
a known output (e.g. stories260K's reference ids).
"""
import argparse
import json
import math
import os
import shutil
import struct
import sys

import numpy as np
import torch
from torch import nn
import warnings

warnings.filterwarnings("ignore", category=torch.jit.TracerWarning)
warnings.filterwarnings("ignore", category=UserWarning)

DTYPES = {"F32": np.float32, "F16": np.float16, "F64": np.float64}
TOKENIZER_FILES = ["tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "generation_config.json"]


def read_safetensors(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        base = 8 + n
        out = {}
        for name, info in header.items():
            if name == "__metadata__":
                continue
            dt = info["dtype"]
            if dt == "BF16":
                a, b = info["data_offsets"]
                f.seek(base + a)
                raw = np.frombuffer(f.read(b - a), dtype=np.uint16).astype(np.uint32) << 16
                arr = raw.view(np.float32)
            elif dt in DTYPES:
                a, b = info["data_offsets"]
                f.seek(base + a)
                arr = np.frombuffer(f.read(b - a), dtype=DTYPES[dt]).astype(np.float32)
            else:
                raise SystemExit(f"{path}: tensor {name} has unsupported dtype {dt}")
            out[name] = torch.from_numpy(arr.reshape(info["shape"]).copy())
        return out


class RMSNorm(nn.Module):
    def __init__(self, w, eps):
        super().__init__()
        self.weight = nn.Parameter(w, requires_grad=False)
        self.eps = eps

    def forward(self, x):
        var = x.pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(var + self.eps))


def linear(w):
    out_f, in_f = w.shape
    m = nn.Linear(in_f, out_f, bias=False)
    m.weight = nn.Parameter(w, requires_grad=False)
    return m


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


class Layer(nn.Module):
    def __init__(self, cfg, W, i):
        super().__init__()
        p = f"model.layers.{i}."
        self.nh, self.nkv, self.hd = cfg["heads"], cfg["kv_heads"], cfg["head_dim"]
        self.input_layernorm = RMSNorm(W[p + "input_layernorm.weight"], cfg["eps"])
        self.post_attention_layernorm = RMSNorm(W[p + "post_attention_layernorm.weight"], cfg["eps"])
        self.q_proj = linear(W[p + "self_attn.q_proj.weight"])
        self.k_proj = linear(W[p + "self_attn.k_proj.weight"])
        self.v_proj = linear(W[p + "self_attn.v_proj.weight"])
        self.o_proj = linear(W[p + "self_attn.o_proj.weight"])
        self.gate_proj = linear(W[p + "mlp.gate_proj.weight"])
        self.up_proj = linear(W[p + "mlp.up_proj.weight"])
        self.down_proj = linear(W[p + "mlp.down_proj.weight"])

    def forward(self, x, cos, sin, mask, past_k, past_v):
        B, S = x.shape[0], x.shape[1]
        h = self.input_layernorm(x)
        q = self.q_proj(h).view(B, S, self.nh, self.hd).transpose(1, 2)
        k = self.k_proj(h).view(B, S, self.nkv, self.hd).transpose(1, 2)
        v = self.v_proj(h).view(B, S, self.nkv, self.hd).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k = torch.cat([past_k, k], dim=2)
        v = torch.cat([past_v, v], dim=2)
        present_k, present_v = k, v
        group = self.nh // self.nkv
        if group > 1:
            # repeat_kv (HF): query head h reads kv head h // group. expand + reshape keeps
            # batch and length dynamic in the exported graph (repeat_interleave would not).
            T = k.shape[2]
            k = k.unsqueeze(2).expand(B, self.nkv, group, T, self.hd).reshape(B, self.nh, T, self.hd)
            v = v.unsqueeze(2).expand(B, self.nkv, group, T, self.hd).reshape(B, self.nh, T, self.hd)
        scores = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(self.hd)
        scores = scores + mask
        probs = torch.softmax(scores, dim=-1)
        att = torch.matmul(probs, v).transpose(1, 2).reshape(B, S, self.nh * self.hd)
        x = x + self.o_proj(att)
        h = self.post_attention_layernorm(x)
        x = x + self.down_proj(nn.functional.silu(self.gate_proj(h)) * self.up_proj(h))
        return x, present_k, present_v


class Llama(nn.Module):
    def __init__(self, hf, W):
        super().__init__()
        heads = hf["num_attention_heads"]
        cfg = {
            "heads": heads,
            "kv_heads": hf.get("num_key_value_heads", heads),
            "head_dim": hf.get("head_dim") or hf["hidden_size"] // heads,
            "eps": hf.get("rms_norm_eps", 1e-6),
        }
        if hf.get("rope_scaling"):
            raise SystemExit("rope_scaling is not supported by this exporter")
        if hf.get("attention_bias"):
            raise SystemExit("attention_bias is not supported by this exporter")
        self.cfg = cfg
        self.n_layers = hf["num_hidden_layers"]
        self.embed = nn.Parameter(W["model.embed_tokens.weight"], requires_grad=False)
        self.layers = nn.ModuleList([Layer(cfg, W, i) for i in range(self.n_layers)])
        self.norm = RMSNorm(W["model.norm.weight"], cfg["eps"])
        tied = hf.get("tie_word_embeddings", False) or "lm_head.weight" not in W
        self.lm_head = linear(W["model.embed_tokens.weight"] if tied else W["lm_head.weight"])
        hd = cfg["head_dim"]
        theta = float(hf.get("rope_theta", 10000.0))
        inv = 1.0 / (theta ** (torch.arange(0, hd, 2, dtype=torch.int64).float() / hd))
        self.register_buffer("inv_freq", inv, persistent=False)

    def forward(self, input_ids, attention_mask, position_ids, *past):
        x = self.embed[input_ids]
        S = input_ids.shape[1]
        # RoPE tables [B, 1, S, hd]
        freqs = position_ids.float().unsqueeze(-1) * self.inv_freq
        emb = torch.cat((freqs, freqs), dim=-1)
        cos = emb.cos().unsqueeze(1)
        sin = emb.sin().unsqueeze(1)
        # Additive mask [B, 1, S, T]: causal (query i sits at absolute position T - S + i) and padding.
        T = attention_mask.shape[1]
        q_pos = torch.arange(S, device=input_ids.device) + (T - S)
        k_pos = torch.arange(T, device=input_ids.device)
        causal = k_pos.unsqueeze(0) <= q_pos.unsqueeze(1)  # [S, T]
        keep = causal.unsqueeze(0).unsqueeze(0) & attention_mask.bool().unsqueeze(1).unsqueeze(2)
        neg = torch.tensor(torch.finfo(torch.float32).min, dtype=torch.float32)
        mask = torch.where(keep, torch.tensor(0.0, dtype=torch.float32), neg)
        presents = []
        for i, layer in enumerate(self.layers):
            x, pk, pv = layer(x, cos, sin, mask, past[2 * i], past[2 * i + 1])
            presents += [pk, pv]
        logits = self.lm_head(self.norm(x))
        return (logits, *presents)


def empty_past(model, batch=1, length=0):
    c = model.cfg
    return [torch.zeros(batch, c["kv_heads"], length, c["head_dim"]) for _ in range(2 * model.n_layers)]


@torch.no_grad()
def greedy(model, prompt, n):
    past = empty_past(model)
    ids = list(prompt)
    feed = torch.tensor([prompt], dtype=torch.int64)
    out = []
    for _ in range(n):
        P = past[0].shape[2]
        S = feed.shape[1]
        mask = torch.ones(1, P + S, dtype=torch.int64)
        pos = torch.arange(P, P + S, dtype=torch.int64).unsqueeze(0)
        logits, *past = model(feed, mask, pos, *past)
        t = int(torch.argmax(logits[0, -1]))
        out.append(t)
        ids.append(t)
        feed = torch.tensor([[t]], dtype=torch.int64)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model_dir")
    ap.add_argument("--out", help="output folder (default: MODEL_DIR)")
    ap.add_argument("--opset", type=int, default=17)
    ap.add_argument("--check-ids", help="comma-separated prompt ids: print torch greedy continuation")
    ap.add_argument("--check-tokens", type=int, default=16)
    args = ap.parse_args()

    src = args.model_dir
    out = args.out or src
    with open(os.path.join(src, "config.json")) as f:
        hf = json.load(f)
    W = read_safetensors(os.path.join(src, "model.safetensors"))
    torch.manual_seed(0)
    model = Llama(hf, W).eval()

    if args.check_ids:
        prompt = [int(t) for t in args.check_ids.split(",")]
        print(json.dumps({"torch_greedy": greedy(model, prompt, args.check_tokens)}))

    os.makedirs(os.path.join(out, "onnx"), exist_ok=True)
    if os.path.abspath(out) != os.path.abspath(src):
        for name in TOKENIZER_FILES:
            if os.path.exists(os.path.join(src, name)):
                shutil.copyfile(os.path.join(src, name), os.path.join(out, name))
    hf_out = dict(hf)
    hf_out["transformers.js_config"] = {"dtype": "fp32", "use_external_data_format": False}
    hf_out["use_cache"] = True
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(hf_out, f, indent=2)

    L = model.n_layers
    past_names = [f"past_key_values.{i}.{kv}" for i in range(L) for kv in ("key", "value")]
    present_names = [f"present.{i}.{kv}" for i in range(L) for kv in ("key", "value")]
    # Trace with a non-empty past and a multi-token query so no dimension is specialised.
    B, P, S = 1, 3, 2
    ids = torch.randint(0, hf["vocab_size"], (B, S), dtype=torch.int64)
    mask = torch.ones(B, P + S, dtype=torch.int64)
    pos = torch.arange(P, P + S, dtype=torch.int64).unsqueeze(0)
    past = [torch.randn(B, model.cfg["kv_heads"], P, model.cfg["head_dim"]) for _ in range(2 * L)]
    dyn = {
        "input_ids": {0: "batch_size", 1: "sequence_length"},
        "attention_mask": {0: "batch_size", 1: "total_sequence_length"},
        "position_ids": {0: "batch_size", 1: "sequence_length"},
        "logits": {0: "batch_size", 1: "sequence_length"},
    }
    for n in past_names:
        dyn[n] = {0: "batch_size", 2: "past_sequence_length"}
    for n in present_names:
        dyn[n] = {0: "batch_size", 2: "total_sequence_length"}
    path = os.path.join(out, "onnx", "model.onnx")
    tmp = path + ".tmp"
    with torch.no_grad():
        torch.onnx.export(
            model,
            (ids, mask, pos, *past),
            tmp,
            input_names=["input_ids", "attention_mask", "position_ids", *past_names],
            output_names=["logits", *present_names],
            dynamic_axes=dyn,
            opset_version=args.opset,
            do_constant_folding=True,
        )
    try:
        import onnx  # optional: structural check

        onnx.checker.check_model(tmp)
    except ImportError:
        pass
    os.replace(tmp, path)
    print(json.dumps({"onnx": path, "bytes": os.path.getsize(path), "opset": args.opset, "layers": L}))


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""export_encoder_onnx.py — a BERT / RoBERTa checkpoint (config.json + model.safetensors) to ONNX.

What: rebuilds the torch model of an encoder fixture from its safetensors and exports
OUT/onnx/model.onnx, then copies the tokenizer, config and sentence-transformers files
(modules.json, 1_Pooling/, 2_Dense/ ...) but not model.safetensors or golden.json: the
output directory is an "ONNX-only" model, as Weft's ONNX fallback (core/models/
onnx_encoder.ts) meets them on the Hub.
Why: the fallback is tested against the native kernels on the same weights
(test/models/onnx_encoder.test.ts), so the ONNX graph must come from those weights.

    /usr/bin/python3 scripts/golden/export_encoder_onnx.py                 # both fixtures below
    /usr/bin/python3 scripts/golden/export_encoder_onnx.py SRC_DIR OUT_DIR

Default: test/fixtures/encoders/bert -> bert_onnx, bert_reranker -> bert_reranker_onnx and
roberta -> roberta_onnx (3-label classifier, RoBERTa positions). Deterministic: rerunning
leaves the committed fixtures byte-identical.
Needs PyTorch >= 1.13, numpy and onnx (Debian: python3-torch, python3-onnx; not
transformers, not the safetensors package).

Graph (opset 17, f32): inputs input_ids, attention_mask, token_type_ids [batch, sequence]
int64; output last_hidden_state [batch, sequence, hidden] (plain encoders) or logits
[batch, labels] (*ForSequenceClassification: BERT pooler + classifier, RoBERTa
classifier.dense + out_proj), the interface of optimum's exports. Batch and sequence axes
are dynamic. The model is an independent small torch module (HF modeling_bert /
modeling_roberta semantics: absolute positions, from padding_idx + 1 for RoBERTa; the
padding mask added as finfo(f32).min; post-norm layers; erf GELU). Before exporting, the
module is checked to be padding invariant; agreement of the graph with the native kernels
and the goldens is the TypeScript test's job. scripts/bench/export_encoder384.py imports
Encoder and export_graph() from here.
"""
import json
import math
import os
import shutil
import struct
import sys
import warnings

import numpy as np
import torch
from torch import nn

warnings.filterwarnings("ignore", category=torch.jit.TracerWarning)
warnings.filterwarnings("ignore", category=UserWarning)

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
FIX = os.path.join(ROOT, "test", "fixtures", "encoders")
DEFAULTS = [("bert", "bert_onnx"), ("bert_reranker", "bert_reranker_onnx"), ("roberta", "roberta_onnx")]
SKIP = {"model.safetensors", "golden.json"}  # top-level files not copied
DTYPES = {"F32": np.float32, "F16": np.float16, "F64": np.float64, "I64": np.int64}


def read_safetensors(path):
    """name -> tensor; u64 LE header length, JSON header, raw little-endian data."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        base = 8 + n
        out = {}
        for name, info in header.items():
            if name == "__metadata__":
                continue
            if info["dtype"] not in DTYPES:
                raise SystemExit(f"{path}: tensor {name} has unsupported dtype {info['dtype']}")
            a, b = info["data_offsets"]
            f.seek(base + a)
            arr = np.frombuffer(f.read(b - a), dtype=DTYPES[info["dtype"]]).reshape(info["shape"])
            out[name] = torch.from_numpy(arr.copy())
        return out


def linear(W, name, bias=True):
    w = W[name + ".weight"].float()
    m = nn.Linear(w.shape[1], w.shape[0], bias=bias)
    m.weight = nn.Parameter(w, requires_grad=False)
    if bias:
        m.bias = nn.Parameter(W[name + ".bias"].float(), requires_grad=False)
    return m


def layer_norm(W, name, eps):
    w = W[name + ".weight"].float()
    m = nn.LayerNorm(w.shape[0], eps=eps)
    m.weight = nn.Parameter(w, requires_grad=False)
    m.bias = nn.Parameter(W[name + ".bias"].float(), requires_grad=False)
    return m


class Layer(nn.Module):
    def __init__(self, W, p, heads, eps, act):
        super().__init__()
        self.heads = heads
        self.q, self.k, self.v = (linear(W, p + "attention.self." + n) for n in ("query", "key", "value"))
        self.o = linear(W, p + "attention.output.dense")
        self.ln1 = layer_norm(W, p + "attention.output.LayerNorm", eps)
        self.inter = linear(W, p + "intermediate.dense")
        self.out = linear(W, p + "output.dense")
        self.ln2 = layer_norm(W, p + "output.LayerNorm", eps)
        self.act = act

    def forward(self, x, bias):
        B, S, D = x.shape
        hd = D // self.heads
        split = lambda t: t.view(B, S, self.heads, hd).transpose(1, 2)  # [B, H, S, hd]
        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        probs = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(hd) + bias, dim=-1)
        att = (probs @ v).transpose(1, 2).reshape(B, S, D)
        x = self.ln1(self.o(att) + x)
        return self.ln2(self.out(self.act(self.inter(x))) + x)


ACTS = {"gelu": lambda t: nn.functional.gelu(t), "gelu_new": lambda t: nn.functional.gelu(t, approximate="tanh"),
        "gelu_pytorch_tanh": lambda t: nn.functional.gelu(t, approximate="tanh"), "relu": torch.relu,
        "silu": nn.functional.silu, "swish": nn.functional.silu}


class Encoder(nn.Module):
    """BertModel / RobertaModel body (+ the sequence-classification head when `head`)."""

    def __init__(self, cfg, W):
        super().__init__()
        words = [n for n in W if n.endswith("embeddings.word_embeddings.weight")]
        if not words:
            raise SystemExit("no embeddings.word_embeddings.weight: not a BERT-family checkpoint")
        p = min(words, key=len)[: -len("embeddings.word_embeddings.weight")]
        eps = cfg.get("layer_norm_eps", 1e-12)
        self.roberta = cfg.get("model_type", "bert") != "bert"
        self.pad = cfg.get("pad_token_id", 1 if self.roberta else 0)
        self.word = nn.Parameter(W[p + "embeddings.word_embeddings.weight"].float(), requires_grad=False)
        self.pos = nn.Parameter(W[p + "embeddings.position_embeddings.weight"].float(), requires_grad=False)
        self.types = nn.Parameter(W[p + "embeddings.token_type_embeddings.weight"].float(), requires_grad=False)
        self.ln = layer_norm(W, p + "embeddings.LayerNorm", eps)
        act = ACTS[cfg.get("hidden_act", "gelu")]
        self.layers = nn.ModuleList([Layer(W, f"{p}encoder.layer.{i}.", cfg["num_attention_heads"], eps, act)
                                     for i in range(cfg["num_hidden_layers"])])
        arch = (cfg.get("architectures") or [""])[0]
        self.head = None
        if arch.endswith("ForSequenceClassification"):
            if "classifier.out_proj.weight" in W:
                self.head = nn.ModuleList([linear(W, "classifier.dense"), linear(W, "classifier.out_proj")])
            else:
                self.head = nn.ModuleList([linear(W, p + "pooler.dense"), linear(W, "classifier")])

    def forward(self, input_ids, attention_mask, token_type_ids):
        S = input_ids.shape[1]
        if self.roberta:  # create_position_ids_from_input_ids
            real = (input_ids != self.pad).long()
            pos = torch.cumsum(real, dim=1) * real + self.pad
        else:
            pos = torch.arange(S, dtype=torch.int64, device=input_ids.device).unsqueeze(0)
        x = self.ln(self.word[input_ids] + self.pos[pos] + self.types[token_type_ids])
        bias = (1.0 - attention_mask.float())[:, None, None, :] * torch.finfo(torch.float32).min
        for layer in self.layers:
            x = layer(x, bias)
        if self.head is None:
            return x
        return self.head[1](torch.tanh(self.head[0](x[:, 0])))


def export_graph(src, path):
    """SRC's config.json + model.safetensors -> the ONNX graph at `path`; returns its output name."""
    cfg = json.load(open(os.path.join(src, "config.json")))
    model = Encoder(cfg, read_safetensors(os.path.join(src, "model.safetensors"))).eval()
    # The module is padding invariant (the export is only as good as this).
    ids = torch.tensor([[2, 10, 11, 12, 3], [2, 13, 3, 0, 0]]) if not model.roberta else torch.tensor([[0, 10, 11, 12, 2], [0, 13, 2, 1, 1]])
    mask = (torch.arange(5)[None, :] < torch.tensor([[5], [3]])).long()
    types = torch.zeros_like(ids)
    with torch.no_grad():
        full = model(ids, mask, types)
        alone = model(ids[1:, :3], mask[1:, :3], types[1:, :3])
    d = float((full[1, :3] - alone[0]).abs().max()) if model.head is None else float((full[1] - alone[0]).abs().max())
    assert d < 1e-4, ("padding changed the result", d)
    output = "logits" if model.head is not None else "last_hidden_state"
    axes = {"input_ids": {0: "batch", 1: "sequence"}, "attention_mask": {0: "batch", 1: "sequence"},
            "token_type_ids": {0: "batch", 1: "sequence"},
            output: {0: "batch"} if model.head is not None else {0: "batch", 1: "sequence"}}
    os.makedirs(os.path.dirname(path), exist_ok=True)
    torch.onnx.export(model, (ids, mask, types), path, input_names=["input_ids", "attention_mask", "token_type_ids"],
                      output_names=[output], dynamic_axes=axes, opset_version=17, do_constant_folding=True)
    import onnx  # noqa: E402 (only checks the graph)
    onnx.checker.check_model(path)
    return output


def export(src, out):
    """An ONNX-only copy of the model directory SRC at OUT."""
    shutil.rmtree(out, ignore_errors=True)
    path = os.path.join(out, "onnx", "model.onnx")
    output = export_graph(src, path)
    for dp, _, files in os.walk(src):
        rel = os.path.relpath(dp, src)
        for f in files:
            if rel == "." and f in SKIP:
                continue
            dst = os.path.join(out, rel, f)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            shutil.copyfile(os.path.join(dp, f), dst)
    size = sum(os.path.getsize(os.path.join(dp, f)) for dp, _, fs in os.walk(out) for f in fs)
    print(f"{os.path.relpath(out, ROOT)}: {output}, {os.path.getsize(path)} byte model.onnx, {size} bytes in all")


def main(argv):
    torch.manual_seed(0)
    if len(argv) >= 3:
        export(os.path.abspath(argv[1]), os.path.abspath(argv[2]))
        return
    for a, b in DEFAULTS:
        export(os.path.join(FIX, a), os.path.join(FIX, b))


if __name__ == "__main__":
    main(sys.argv)

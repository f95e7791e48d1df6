#!/usr/bin/env python3
"""export_encoder384.py — the random 6-layer, 384-wide BERT encoder bench/embeddings.ts times.

What: writes OUT (default .cache/bench/encoder384/, gitignored) with config.json (BertModel,
hidden 384, 6 layers, 12 heads, intermediate 1536, 512 positions: the shape of
all-MiniLM-L6-v2), model.safetensors with seeded random f32 weights, the WordPiece
tokenizer of test/fixtures/encoders/bert (its small vocabulary sets vocab_size), a
sentence-transformers mean pooling + Normalize pipeline, and onnx/model.onnx exported from
those same weights (scripts/golden/export_encoder_onnx.py's torch module, opset 17, dynamic
batch and sequence axes). Both Weft's native kernels and onnxruntime-web then run one model.
Why random weights: speed does not depend on their values, and nothing is downloaded.

    /usr/bin/python3 scripts/bench/export_encoder384.py [OUT]

Needs PyTorch >= 1.13, numpy and onnx (Debian: python3-torch, python3-onnx).
"""
import json
import os
import shutil
import struct
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "scripts", "golden"))
from export_encoder_onnx import export_graph  # noqa: E402

FIXTURE = os.path.join(ROOT, "test", "fixtures", "encoders", "bert")
D, LAYERS, HEADS, INTER, POS = 384, 6, 12, 1536, 512


def write_safetensors(path, tensors):
    header, blobs, off = {"__metadata__": {"format": "pt"}}, [], 0
    for name in sorted(tensors):
        b = np.ascontiguousarray(tensors[name], dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(tensors[name].shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    hj = json.dumps(header, separators=(",", ":")).encode()
    hj += b" " * ((8 - len(hj) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hj)) + hj)
        for b in blobs:
            f.write(b)


def weights(vocab, seed=384):
    rng = np.random.default_rng(seed)
    w = {}

    def randn(*shape, std):
        return (rng.standard_normal(shape) * std).astype(np.float32)

    def linear(name, out_f, in_f):
        w[name + ".weight"] = randn(out_f, in_f, std=in_f ** -0.5)
        w[name + ".bias"] = randn(out_f, std=0.02)

    def norm(name):
        w[name + ".weight"] = 1.0 + randn(D, std=0.1)
        w[name + ".bias"] = randn(D, std=0.1)

    w["embeddings.word_embeddings.weight"] = randn(vocab, D, std=1.0)
    w["embeddings.position_embeddings.weight"] = randn(POS, D, std=0.5)
    w["embeddings.token_type_embeddings.weight"] = randn(2, D, std=0.5)
    norm("embeddings.LayerNorm")
    for i in range(LAYERS):
        p = f"encoder.layer.{i}."
        for n in ("query", "key", "value"):
            linear(p + "attention.self." + n, D, D)
        linear(p + "attention.output.dense", D, D)
        norm(p + "attention.output.LayerNorm")
        linear(p + "intermediate.dense", INTER, D)
        linear(p + "output.dense", D, INTER)
        norm(p + "output.LayerNorm")
    return w


def write_json(path, obj):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(obj, f, indent=1)
        f.write("\n")


def main(argv):
    out = os.path.abspath(argv[1] if len(argv) > 1 else os.path.join(ROOT, ".cache", "bench", "encoder384"))
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(os.path.join(FIXTURE, f), os.path.join(out, f))
    vocab = len(json.load(open(os.path.join(FIXTURE, "tokenizer.json")))["model"]["vocab"])
    write_json(os.path.join(out, "config.json"), {
        "architectures": ["BertModel"], "model_type": "bert", "hidden_size": D, "num_hidden_layers": LAYERS,
        "num_attention_heads": HEADS, "intermediate_size": INTER, "hidden_act": "gelu", "max_position_embeddings": POS,
        "type_vocab_size": 2, "vocab_size": vocab, "layer_norm_eps": 1e-12, "pad_token_id": 0,
        "position_embedding_type": "absolute", "torch_dtype": "float32"})
    write_safetensors(os.path.join(out, "model.safetensors"), weights(vocab))
    mods = [("", "Transformer"), ("1_Pooling", "Pooling"), ("2_Normalize", "Normalize")]
    write_json(os.path.join(out, "modules.json"), [{"idx": i, "name": str(i), "path": p, "type": f"sentence_transformers.models.{t}"}
                                                   for i, (p, t) in enumerate(mods)])
    write_json(os.path.join(out, "sentence_bert_config.json"), {"max_seq_length": 256, "do_lower_case": False})
    write_json(os.path.join(out, "1_Pooling", "config.json"), {"word_embedding_dimension": D, "pooling_mode_mean_tokens": True})
    export_graph(out, os.path.join(out, "onnx", "model.onnx"))
    size = sum(os.path.getsize(os.path.join(dp, f)) for dp, _, fs in os.walk(out) for f in fs)
    print(f"{out}: BertModel {LAYERS}x{D}, vocab {vocab}, {size / 1e6:.1f} MB")


if __name__ == "__main__":
    main(sys.argv)

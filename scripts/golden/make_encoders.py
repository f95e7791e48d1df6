#!/usr/bin/env python3
"""make_encoders.py — tiny random-weight encoder fixtures (BERT, RoBERTa, XLM-R) with goldens.

Generator version: 1 (bump GENERATOR_VERSION when the output changes).
Regenerate (from the repository root; needs PyTorch >= 1.13, NOT transformers / tokenizers):

    /usr/bin/python3 scripts/golden/make_encoders.py

Writes test/fixtures/encoders/<name>/ (hidden 32, 2 layers, 4 heads, intermediate 64, f32):
  bert           BertModel, sentence-transformers layout (modules.json, mean pooling, Dense
                 32 -> 16 tanh, Normalize), no name prefix (+ int64 embeddings.position_ids);
  bert_reranker  BertForSequenceClassification, 1 label (cross-encoder), `bert.` prefix,
                 pooler + classifier; pairs [CLS] q [SEP] d [SEP] with token types 0 / 1;
  roberta        RobertaForSequenceClassification, 3 labels, `roberta.` prefix, classifier
                 dense + tanh + out_proj; positions from padding_idx + 1;
  xlmr           XLMRobertaModel, sentence-transformers CLS pooling + Normalize,
                 max_seq_length 24 (< the 32 positions allow).
Tokenizers are real tokenizer.json files with small vocabularies made here (WordPiece; a
byte-level BPE trained on a small corpus; Unigram with seeded scores + Metaspace); token ids
come from independent Python implementations of those algorithms (so the TypeScript
tokenizer is checked too), truncated as the Rust tokenizers do (singles keep the first
max - specials tokens, pairs `longest_first`).

The reference is an independent float64 PyTorch implementation of modeling_bert /
modeling_roberta: word + absolute position + token type embeddings, LayerNorm, post-norm
layers (attention with the padding mask, dense, LayerNorm(x + residual), GELU (erf) MLP,
LayerNorm(x + residual)). Goldens are computed per input alone; the script asserts that a
padded batch with the attention mask gives the same rows. golden.json holds per input its
text or pair, ids, type ids, truncated flag, hidden states [len, 32], CLS / mean / max
pooling, the sentence-transformers embedding and classifier logits (7 significant digits).
Seeds are tried in a fixed order until classifier margins are large enough that f32 noise
cannot flip a label or a ranking (and at least two of the 3 labels win somewhere).
"""
import json
import math
import os
import random
import re
import shutil
import struct
import sys
import unicodedata
from collections import Counter

import torch


GENERATOR_VERSION = 1
GENERATOR = f"scripts/golden/make_encoders.py v{GENERATOR_VERSION}"
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
OUT = os.path.join(ROOT, "test", "fixtures", "encoders")


SENTENCES = ["The cat sat on the mat.", "Hello world!", "A quick brown fox jumps over the lazy dog.",
             "Is this the best place to eat pizza in town?", "WebGPU kernels run on CPUs too."]
LONG = " ".join(["The cat sat on the mat and the dog ran in the park."] * 7)
QUERY = "Where did the cat sit?"
DOCUMENTS = [SENTENCES[0], SENTENCES[2], SENTENCES[3], LONG, "The mat is where cats sit."]
MIN_LABEL_MARGIN = 0.1  # top-1 minus top-2 logit, per classified input
MIN_RANK_MARGIN = 0.1   # gap between consecutive sorted reranker logits


COMMON = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 64,
          "hidden_act": "gelu", "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
          "initializer_range": 0.02, "position_embedding_type": "absolute", "torch_dtype": "float32"}


# ---- WordPiece (BERT) ------------------------------------------------------------------


WORDS = """the cat sat on mat hello world a quick brown fox jump over lazy dog is this best place to eat
pizza in town web kernel run cp too and ran park where did sit of it for was he she they we you that with
as at be by from have not or are but had his her one all were when there can an your which their said if do
will each about how up out them then many some so these would other into has more two like him see time
could no make than first been its who now people my made long down day get come way may part find use
water little very after word called just know place year live me back give most thing our name good sentence
man think say great help through much before line right mean old any same tell boy follow came want show also
around form three small set put end does another well large must big even such because turn here why ask went
men read need land different home us move try kind hand picture again change off play spell air away animal house
point page letter mother answer found study still learn should america light""".split()
SUFFIXES = ["##s", "##ing", "##ed", "##er", "##ly", "##est", "##ion", "##y"]


def wordpiece_vocab():
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    chars = list(".,!?'-:;") + [str(d) for d in range(10)] + [chr(c) for c in range(97, 123)]
    cont = ["##" + chr(c) for c in range(97, 123)] + ["##" + str(d) for d in range(10)]
    vocab = []
    for t in specials + chars + cont + SUFFIXES + WORDS:
        if t not in vocab:
            vocab.append(t)
    return vocab


def wordpiece_encode(text, vocab):
    """BertNormalizer (clean text, lowercase, strip accents) + BertPreTokenizer + greedy WordPiece."""
    assert text.isascii(), "the split below spells BERT's punctuation classes for ASCII"
    index = {t: i for i, t in enumerate(vocab)}
    ids = []
    for w in re.findall(r"[a-z0-9]+|[^\sa-z0-9]", text.lower()):  # ASCII punctuation splits off, one char each
        pieces, start = [], 0
        while start < len(w):
            end = next((e for e in range(len(w), start, -1) if ("##" if start else "") + w[start:e] in index), None)
            if end is None:
                pieces = ["[UNK]"]
                break
            pieces.append(("##" if start else "") + w[start:end])
            start = end
        ids += [index[p] for p in pieces]
    return ids


def added(tok_id, content, lstrip=False):
    return {"id": tok_id, "content": content, "single_word": False, "lstrip": lstrip, "rstrip": False,
            "normalized": False, "special": True}


def roberta_config(cls):
    return {"tokenizer_class": cls, "bos_token": "<s>", "eos_token": "</s>", "sep_token": "</s>", "cls_token": "<s>",
            "unk_token": "<unk>", "pad_token": "<pad>", "mask_token": "<mask>", "model_max_length": 512}


def roberta_specials(n):
    return [added(0, "<s>"), added(1, "<pad>"), added(2, "</s>"), added(3, "<unk>"), added(n - 1, "<mask>", lstrip=True)]


def template(cls, sep, pair_types, double_sep):
    st = lambda t, ty: {"SpecialToken": {"id": t, "type_id": ty}}
    sq = lambda s, ty: {"Sequence": {"id": s, "type_id": ty}}
    pair = [st(cls[0], 0), sq("A", 0), st(sep[0], 0)] + ([st(sep[0], 0)] if double_sep else [])
    pair += [sq("B", pair_types), st(sep[0], pair_types)]
    return {
        "type": "TemplateProcessing",
        "single": [st(cls[0], 0), sq("A", 0), st(sep[0], 0)],
        "pair": pair,
        "special_tokens": {t: {"id": t, "ids": [i], "tokens": [t]} for t, i in (cls, sep)},
    }


def wordpiece_tokenizer():
    vocab = wordpiece_vocab()
    tj = {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [added(i, t) for i, t in enumerate(vocab[:5])],
        "normalizer": {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True,
                       "strip_accents": None, "lowercase": True},
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "post_processor": template(("[CLS]", 2), ("[SEP]", 3), 1, False),
        "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": True},
        "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                  "max_input_chars_per_word": 100, "vocab": {t: i for i, t in enumerate(vocab)}},
    }
    tc = {"tokenizer_class": "BertTokenizer", "do_lower_case": True, "cls_token": "[CLS]", "sep_token": "[SEP]",
          "pad_token": "[PAD]", "unk_token": "[UNK]", "mask_token": "[MASK]", "model_max_length": 512}
    return dict(json=tj, config=tc, vocab_size=len(vocab), encode=lambda s: wordpiece_encode(s, vocab),
                cls=2, sep=3, pair_sep=[3], pair_types=1)


# ---- byte-level BPE (RoBERTa) -------------------------------------------------------------


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, [chr(c) for c in cs]))


BYTE_ENC = bytes_to_unicode()
# GPT-2's pattern with \p{L} / \p{N} spelled for ASCII (every fixture text is ASCII).
GPT2_RE = re.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?[A-Za-z]+| ?[0-9]+| ?[^\sA-Za-z0-9]+|\s+(?!\S)|\s+""")
BPE_CORPUS = " ".join(SENTENCES + [LONG, QUERY] + DOCUMENTS) + " " + " ".join(WORDS)
BPE_MERGES = 220


def bpe_pieces(text):
    return ["".join(BYTE_ENC[b] for b in m.encode("utf-8")) for m in GPT2_RE.findall(text)]


def train_bpe():
    """BPE_MERGES merges, most frequent pair first (ties: lexically smallest), on BPE_CORPUS."""
    words = Counter(tuple(p) for p in bpe_pieces(BPE_CORPUS))
    merges = []
    for _ in range(BPE_MERGES):
        counts = Counter()
        for w, f in words.items():
            for pair in zip(w, w[1:]):
                counts[pair] += f
        if not counts:
            break
        best = max(counts.items(), key=lambda kv: (kv[1], [-ord(c) for c in kv[0][0] + " " + kv[0][1]]))[0]
        merges.append(best)
        merged = Counter()
        for w, f in words.items():
            merged[merge_word(w, best)] += f
        words = merged
    return merges


def merge_word(w, pair):
    out, i = [], 0
    while i < len(w):
        if i + 1 < len(w) and (w[i], w[i + 1]) == pair:
            out.append(w[i] + w[i + 1])
            i += 2
        else:
            out.append(w[i])
            i += 1
    return tuple(out)


def bpe_encode(text, index, ranks):
    ids = []
    for p in bpe_pieces(text):
        w = list(p)
        while len(w) > 1:
            pairs = [(ranks.get((a, b), math.inf), i) for i, (a, b) in enumerate(zip(w, w[1:]))]
            r, i = min(pairs)
            if r == math.inf:
                break
            w = w[:i] + [w[i] + w[i + 1]] + w[i + 2:]
        ids += [index[t] for t in w]
    return ids


def bpe_tokenizer():
    merges = train_bpe()
    vocab = ["<s>", "<pad>", "</s>", "<unk>"] + [BYTE_ENC[b] for b in range(256)]
    for a, b in merges:
        if a + b not in vocab:
            vocab.append(a + b)
    vocab.append("<mask>")
    index = {t: i for i, t in enumerate(vocab)}
    ranks = {m: i for i, m in enumerate(merges)}
    tj = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": roberta_specials(len(vocab)), "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "post_processor": {"type": "RobertaProcessing", "sep": ["</s>", 2], "cls": ["<s>", 0],
                           "trim_offsets": True, "add_prefix_space": False},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": index, "merges": [f"{a} {b}" for a, b in merges]},
    }
    return dict(json=tj, config=roberta_config("RobertaTokenizer"), vocab_size=len(vocab), encode=lambda s: bpe_encode(s, index, ranks),
                cls=0, sep=2, pair_sep=[2, 2], pair_types=0)


# ---- Unigram (XLM-R) ----------------------------------------------------------------------


UNIGRAM_SUBWORDS = ["s", "ing", "ed", "er", "ly", "est", "at", "he", "in", "on", "an", "re", "it", "ou", "GPU", "CPU"]


def unigram_vocab():
    r = random.Random(7)
    pieces = [("<s>", 0.0), ("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0)]
    seen = set(p for p, _ in pieces)

    def add(p, lo, hi):
        if p not in seen:
            seen.add(p)
            pieces.append((p, round(-r.uniform(lo, hi), 6)))

    add("\u2581", 5.0, 5.5)
    for w in WORDS[:150]:
        add("\u2581" + w, 2.0, 5.0)
    for w in ["The", "Hello", "Is", "A", "Where", "Web"]:
        add("\u2581" + w, 3.0, 5.0)
    for s in UNIGRAM_SUBWORDS:
        add(s, 4.0, 6.0)
    for ch in [chr(c) for c in range(97, 123)] + [chr(c) for c in range(65, 91)] + [str(d) for d in range(10)] + list(".,!?'-:;"):
        add(ch, 7.0, 9.0)
    pieces.append(("<mask>", 0.0))
    return pieces


def unigram_encode(text, pieces):
    index = {p: i for i, (p, _) in enumerate(pieces)}
    score = {p: s for p, s in pieces}
    maxlen = max(len(p) for p, _ in pieces)
    s = unicodedata.normalize("NFKC", text).replace(" ", "\u2581")
    if not s.startswith("\u2581"):
        s = "\u2581" + s
    best = [(-math.inf, None)] * (len(s) + 1)
    best[0] = (0.0, None)
    for end in range(1, len(s) + 1):
        for start in range(max(0, end - maxlen), end):
            p = s[start:end]
            if p in index and index[p] >= 4 and p != "<mask>" and best[start][0] > -math.inf:
                v = best[start][0] + score[p]
                if v > best[end][0]:
                    best[end] = (v, start)
    assert best[len(s)][0] > -math.inf, text
    ids, end = [], len(s)
    while end > 0:
        start = best[end][1]
        ids.append(index[s[start:end]])
        end = start
    return ids[::-1]


def unigram_tokenizer():
    pieces = unigram_vocab()
    meta = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True}
    tj = {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": roberta_specials(len(pieces)),
        "normalizer": {"type": "NFKC"},
        "pre_tokenizer": meta,
        "post_processor": template(("<s>", 0), ("</s>", 2), 0, True),
        "decoder": meta,
        "model": {"type": "Unigram", "unk_id": 3, "vocab": [[p, s] for p, s in pieces], "byte_fallback": False},
    }
    return dict(json=tj, config=roberta_config("XLMRobertaTokenizer"), vocab_size=len(pieces), encode=lambda s: unigram_encode(s, pieces),
                cls=0, sep=2, pair_sep=[2, 2], pair_types=0)


# ---- special-token templates and truncation (Rust tokenizers semantics) --------------------


def build_input(tok, a, b, max_len):
    """ids, type ids and truncated flag of a single text or a pair, truncated to max_len."""
    ea = tok["encode"](a)
    eb = tok["encode"](b) if b is not None else None
    specials = 2 if eb is None else 2 + len(tok["pair_sep"])
    budget = max_len - specials
    truncated = False
    if eb is None:
        if len(ea) > budget:
            ea, truncated = ea[:budget], True
    elif len(ea) + len(eb) > budget:
        truncated = True
        n1, n2, swap = len(ea), len(eb), False
        if n1 > n2:
            n1, n2, swap = n2, n1, True
        n2 = n1 if n1 > budget else max(n1, budget - n1)
        if n1 + n2 > budget:
            n1 = budget // 2
            n2 = n1 + budget % 2
        if swap:
            n1, n2 = n2, n1
        ea, eb = ea[:n1], eb[:n2]
    ids = [tok["cls"]] + ea + [tok["sep"]]
    types = [0] * len(ids)
    if eb is not None:
        tail = tok["pair_sep"][1:] + eb + [tok["sep"]]
        ids += tail
        types += [tok["pair_types"]] * len(tail)
    return ids, types, truncated


# ---- weights and the reference forward pass ----------------------------------------------------


def make_weights(c, seed, prefix, head):
    g = torch.Generator().manual_seed(seed)
    D, I, V = c["hidden_size"], c["intermediate_size"], c["vocab_size"]

    def randn(*shape, std=1.0):
        return (torch.randn(*shape, generator=g, dtype=torch.float32) * std).contiguous()

    def linear(name, out_f, in_f, bias_std=0.2, gain=1.0):
        w[name + ".weight"] = randn(out_f, in_f, std=gain / math.sqrt(in_f))
        w[name + ".bias"] = randn(out_f, std=bias_std)

    def norm(name):
        w[name + ".weight"] = 1.0 + randn(D, std=0.2)
        w[name + ".bias"] = randn(D, std=0.2)

    w = {}
    p = prefix
    w[p + "embeddings.word_embeddings.weight"] = randn(V, D)
    w[p + "embeddings.position_embeddings.weight"] = randn(c["max_position_embeddings"], D, std=0.5)
    w[p + "embeddings.token_type_embeddings.weight"] = randn(c["type_vocab_size"], D, std=0.5)
    norm(p + "embeddings.LayerNorm")
    for l in range(c["num_hidden_layers"]):
        q = f"{p}encoder.layer.{l}."
        for n in ("query", "key", "value"):
            linear(q + "attention.self." + n, D, D)
        linear(q + "attention.output.dense", D, D)
        norm(q + "attention.output.LayerNorm")
        linear(q + "intermediate.dense", I, D)
        linear(q + "output.dense", D, I)
        norm(q + "output.LayerNorm")
    if head in ("bert_pooler", "bert_cls"):
        linear(p + "pooler.dense", D, D)
    if head == "bert_cls":
        linear("classifier", c["num_labels"], D, bias_std=0.05, gain=3.0)
    if head == "roberta_cls":
        # Large weights, small biases: the label depends on the input, not on the biases.
        linear("classifier.dense", D, D, gain=2.0)
        linear("classifier.out_proj", c["num_labels"], D, bias_std=0.05, gain=3.0)
    return w


def layer_norm(x, w, b, eps):
    mu = x.mean(-1, keepdim=True)
    var = ((x - mu) ** 2).mean(-1, keepdim=True)
    return (x - mu) / torch.sqrt(var + eps) * w + b


def encode(c, W, prefix, ids, types, mask):
    """Last hidden states [B, S, D] of a padded batch (mask [B, S]: 1 = real token), float64."""
    w = {k: v.double() for k, v in W.items() if v.is_floating_point()}
    p = prefix
    ids = torch.tensor(ids)
    mask = torch.tensor(mask, dtype=torch.float64)
    B, S = ids.shape
    D, H = c["hidden_size"], c["num_attention_heads"]
    hd = D // H
    eps = c["layer_norm_eps"]
    if c["model_type"] == "bert":
        pos = torch.arange(S)[None, :].expand(B, S)
    else:  # create_position_ids_from_input_ids: padding_idx + 1 + running count of real tokens
        pad = c["pad_token_id"]
        real = (ids != pad).long()
        pos = torch.cumsum(real, dim=1) * real + pad
    x = (w[p + "embeddings.word_embeddings.weight"][ids] + w[p + "embeddings.position_embeddings.weight"][pos]
         + w[p + "embeddings.token_type_embeddings.weight"][torch.tensor(types)])
    x = layer_norm(x, w[p + "embeddings.LayerNorm.weight"], w[p + "embeddings.LayerNorm.bias"], eps)
    bias = (1.0 - mask)[:, None, None, :] * torch.finfo(torch.float64).min  # [B, 1, 1, S]
    lin = lambda t, n: t @ w[n + ".weight"].T + w[n + ".bias"]
    for l in range(c["num_hidden_layers"]):
        q = f"{p}encoder.layer.{l}."
        heads = lambda t: t.view(B, S, H, hd).transpose(1, 2)  # [B, H, S, hd]
        Q, K, Vv = (heads(lin(x, q + "attention.self." + n)) for n in ("query", "key", "value"))
        scores = Q @ K.transpose(-1, -2) / math.sqrt(hd) + bias
        att = (torch.softmax(scores, dim=-1) @ Vv).transpose(1, 2).reshape(B, S, D)
        x = layer_norm(lin(att, q + "attention.output.dense") + x, w[q + "attention.output.LayerNorm.weight"],
                       w[q + "attention.output.LayerNorm.bias"], eps)
        h = torch.nn.functional.gelu(lin(x, q + "intermediate.dense"))
        x = layer_norm(lin(h, q + "output.dense") + x, w[q + "output.LayerNorm.weight"], w[q + "output.LayerNorm.bias"], eps)
    return x


def pools(h):
    """sentence-transformers Pooling of one unpadded sequence h [n, D]: cls, mean, max."""
    return {"cls": h[0], "mean": h.mean(0), "max": h.max(0).values}


def head_logits(head, W, prefix, h):
    w = {k: v.double() for k, v in W.items() if v.is_floating_point()}
    lin = lambda t, n: t @ w[n + ".weight"].T + w[n + ".bias"]
    if head == "bert_cls":
        return lin(torch.tanh(lin(h[0], prefix + "pooler.dense")), "classifier")
    if head == "roberta_cls":
        return lin(torch.tanh(lin(h[0], "classifier.dense")), "classifier.out_proj")
    return None


def st_embedding(st, Wd, pooled):
    """Pooling output -> Dense (tanh) -> Normalize, as the fixture's modules.json lists them."""
    v = pooled[st["pooling"]]
    if st.get("dense"):
        v = torch.tanh(v @ Wd["linear.weight"].double().T + Wd["linear.bias"].double())
    return v / max(float(v.norm()), 1e-12)


# ---- fixtures ---------------------------------------------------------------------------------


FIXTURES = {
    "bert": dict(
        config=dict(COMMON, architectures=["BertModel"], model_type="bert", vocab_size=None, max_position_embeddings=64,
                    type_vocab_size=2, layer_norm_eps=1e-12, pad_token_id=0),
        tokenizer=wordpiece_tokenizer, prefix="", head="bert_pooler", seed=11,
        st=dict(pooling="mean", dense=True, max_seq_length=64),
    ),
    "bert_reranker": dict(
        config=dict(COMMON, architectures=["BertForSequenceClassification"], model_type="bert", vocab_size=None,
                    max_position_embeddings=64, type_vocab_size=2, layer_norm_eps=1e-12, pad_token_id=0,
                    id2label={"0": "LABEL_0"}, label2id={"LABEL_0": 0}),
        tokenizer=wordpiece_tokenizer, prefix="bert.", head="bert_cls", seed=21, num_labels=1,
    ),
    "roberta": dict(
        config=dict(COMMON, architectures=["RobertaForSequenceClassification"], model_type="roberta", vocab_size=None,
                    max_position_embeddings=66, type_vocab_size=1, layer_norm_eps=1e-5, pad_token_id=1,
                    bos_token_id=0, eos_token_id=2, id2label={"0": "negative", "1": "neutral", "2": "positive"},
                    label2id={"negative": 0, "neutral": 1, "positive": 2}),
        tokenizer=bpe_tokenizer, prefix="roberta.", head="roberta_cls", seed=31, num_labels=3,
    ),
    "xlmr": dict(
        config=dict(COMMON, architectures=["XLMRobertaModel"], model_type="xlm-roberta", vocab_size=None,
                    max_position_embeddings=34, type_vocab_size=1, layer_norm_eps=1e-5, pad_token_id=1,
                    bos_token_id=0, eos_token_id=2),
        tokenizer=unigram_tokenizer, prefix="", head=None, seed=41,
        st=dict(pooling="cls", dense=False, max_seq_length=24),
    ),
}


def write_safetensors(path, tensors):
    """safetensors: u64 LE header length, JSON header (space-padded to 8 bytes), raw LE data."""
    header = {"__metadata__": {"format": "pt"}}
    blobs, off = [], 0
    for n in sorted(tensors):
        t = tensors[n].contiguous()
        dt, np_dt = ("I64", "<i8") if t.dtype == torch.int64 else ("F32", "<f4")
        b = t.numpy().astype(np_dt).tobytes()
        header[n] = {"dtype": dt, "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    hj = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hj += b" " * ((8 - len(hj) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hj)))
        f.write(hj)
        for b in blobs:
            f.write(b)


def write_json(path, obj):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(obj, f, indent=1, ensure_ascii=False)
        f.write("\n")


def sig(v, digits=7):
    return float(f"{v:.{digits}g}")


def vec(t):
    return [sig(float(v)) for v in t]


def run_fixture(name, spec, tok, c, W, Wd, max_len):
    """Every input's record; asserts that a padded batch reproduces the unpadded rows."""
    head = spec["head"]
    items = [(s, None) for s in SENTENCES + [LONG]]
    if head in ("bert_cls", "roberta_cls"):
        items += [(QUERY, d) for d in DOCUMENTS]
    recs = []
    for a, b in items:
        ids, types, truncated = build_input(tok, a, b, max_len)
        h = encode(c, W, spec["prefix"], [ids], [types], [[1] * len(ids)])[0]
        r = {"text": a} if b is None else {"pair": [a, b]}
        r.update(ids=ids, type_ids=types, truncated=truncated, hidden=[vec(row) for row in h])
        pl = pools(h)
        r["pooled"] = {k: vec(v) for k, v in pl.items()}
        if spec.get("st"):
            r["embedding"] = vec(st_embedding(spec["st"], Wd, pl))
        lg = head_logits(head, W, spec["prefix"], h)
        if lg is not None:
            r["logits"] = vec(lg)
        recs.append((r, h))
    # Padded batch (pad id, mask) == each row alone.
    S = max(len(r["ids"]) for r, _ in recs)
    pad = c["pad_token_id"]
    hb = encode(c, W, spec["prefix"], [r["ids"] + [pad] * (S - len(r["ids"])) for r, _ in recs],
                [r["type_ids"] + [0] * (S - len(r["ids"])) for r, _ in recs],
                [[1] * len(r["ids"]) + [0] * (S - len(r["ids"])) for r, _ in recs])
    for i, (r, h) in enumerate(recs):
        d = float((hb[i, : len(r["ids"])] - h).abs().max())
        assert d < 1e-9, (name, i, d)
    return [r for r, _ in recs]


def margins_ok(spec, recs):
    if spec["head"] is None or spec["head"] == "bert_pooler":
        return True
    if spec.get("num_labels", 1) > 1:
        for r in recs:
            s = sorted(r["logits"], reverse=True)
            if s[0] - s[1] < MIN_LABEL_MARGIN:
                return False
        # More than one label wins somewhere, so label routing is really tested.
        return len({max(range(len(r["logits"])), key=lambda i: r["logits"][i]) for r in recs}) > 1
    scores = sorted(r["logits"][0] for r in recs if "pair" in r)
    return all(b - a >= MIN_RANK_MARGIN for a, b in zip(scores, scores[1:]))


def build(name, spec):
    tok = spec["tokenizer"]()
    c = dict(spec["config"], vocab_size=tok["vocab_size"])
    offset = c["pad_token_id"] + 1 if c["model_type"] != "bert" else 0
    max_len = c["max_position_embeddings"] - offset
    if spec.get("st"):
        max_len = min(max_len, spec["st"]["max_seq_length"])
    if "num_labels" in spec:
        c["num_labels"] = spec["num_labels"]
    seed = spec["seed"]
    for _ in range(100):
        W = make_weights(c, seed, spec["prefix"], spec["head"])
        g = torch.Generator().manual_seed(seed + 1000)
        Wd = {"linear.weight": torch.randn(16, 32, generator=g) / math.sqrt(32), "linear.bias": torch.randn(16, generator=g) * 0.2}
        recs = run_fixture(name, spec, tok, c, W, Wd, max_len)
        if margins_ok(spec, recs):
            break
        seed += 1
    else:
        raise SystemExit(f"{name}: no seed with classifier margins")
    if name == "bert":
        W["embeddings.position_ids"] = torch.arange(c["max_position_embeddings"], dtype=torch.int64)[None, :]

    d = os.path.join(OUT, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    lead = ("architectures", "model_type")
    cfg = {**{k: c[k] for k in lead}, **{k: v for k, v in sorted(c.items()) if k not in lead and k != "num_labels"}}
    write_json(os.path.join(d, "config.json"), cfg)
    write_safetensors(os.path.join(d, "model.safetensors"), W)
    write_json(os.path.join(d, "tokenizer.json"), tok["json"])
    write_json(os.path.join(d, "tokenizer_config.json"), tok["config"])
    st = spec.get("st")
    if st:
        mods = [("", "sentence_transformers.models.Transformer"), ("1_Pooling", "sentence_transformers.models.Pooling")]
        if st["dense"]:
            mods.append(("2_Dense", "sentence_transformers.models.Dense"))
        mods.append((f"{len(mods)}_Normalize", "sentence_transformers.models.Normalize"))
        write_json(os.path.join(d, "modules.json"), [{"idx": i, "name": str(i), "path": p, "type": t} for i, (p, t) in enumerate(mods)])
        write_json(os.path.join(d, "sentence_bert_config.json"), {"max_seq_length": st["max_seq_length"], "do_lower_case": False})
        write_json(os.path.join(d, "1_Pooling", "config.json"), {
            "word_embedding_dimension": c["hidden_size"],
            "pooling_mode_cls_token": st["pooling"] == "cls", "pooling_mode_mean_tokens": st["pooling"] == "mean",
            "pooling_mode_max_tokens": st["pooling"] == "max", "pooling_mode_mean_sqrt_len_tokens": False,
            "pooling_mode_weightedmean_tokens": False, "pooling_mode_lasttoken": False, "include_prompt": True})
        if st["dense"]:
            write_json(os.path.join(d, "2_Dense", "config.json"), {
                "in_features": 32, "out_features": 16, "bias": True,
                "activation_function": "torch.nn.modules.activation.Tanh"})
            write_safetensors(os.path.join(d, "2_Dense", "model.safetensors"), Wd)
    head = {"version": GENERATOR_VERSION, "generator": GENERATOR, "torch": torch.__version__.split("+")[0],
            "architecture": c["architectures"][0], "seed": seed, "compute_dtype": "float64", "max_tokens": max_len,
            "pooling": st["pooling"] if st else None, "id2label": c.get("id2label")}
    rows = ",\n    ".join(json.dumps(r, separators=(",", ":")) for r in recs)
    with open(os.path.join(d, "golden.json"), "w") as f:
        f.write("{\n" + "".join(f"  {json.dumps(k)}: {json.dumps(v)},\n" for k, v in head.items()))
        f.write(f'  "inputs": [\n    {rows}\n  ]\n}}\n')
    size = sum(os.path.getsize(os.path.join(dp, x)) for dp, _, fs in os.walk(d) for x in fs)
    lens = [len(r["ids"]) for r in recs]
    print(f"{name}: seed {seed}, vocab {c['vocab_size']}, max tokens {max_len}, lengths {lens}, "
          f"truncated {[i for i, r in enumerate(recs) if r['truncated']]}, {size} bytes")
    assert size < 300_000, (name, size)


def main(argv):
    torch.use_deterministic_algorithms(True)
    for name in argv[1:] or list(FIXTURES):
        build(name, FIXTURES[name])


if __name__ == "__main__":
    main(sys.argv)

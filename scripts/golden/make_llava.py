#!/usr/bin/env python3
"""make_llava.py — a tiny random-weight LLaVA-1.5 fixture with golden outputs.

Generator version: 1 (bump GENERATOR_VERSION when the output changes).

Regenerate (from the repository root; needs PyTorch >= 1.13 and Pillow, NOT
transformers):

    /usr/bin/python3 scripts/golden/make_llava.py

Writes test/fixtures/decoders/llava_tiny/: config.json, preprocessor_config.json,
model.safetensors, tokenizer.json (stories260K's plus the added token `<image>` =
512), tokenizer_config.json, three images (image_a.png 48x40 RGB, image_b.png
30x50 RGBA, image_c.jpg 64x48 4:4:4) and golden.json.

The model is LlavaForConditionalGeneration in miniature, written here in plain
PyTorch from the semantics of transformers' modeling_clip / modeling_llava /
modeling_llama (not imported from them):

  * CLIP vision tower: patch embedding = conv2d(3 -> D, kernel = stride = patch,
    no bias); [class_embedding; patches] + position_embedding; pre_layrnorm;
    pre-norm encoder layers: x += out_proj(softmax(q k^T * hd^-0.5) v) over
    LayerNorm1(x) with q/k/v biases, x += fc2(quick_gelu(fc1(LayerNorm2(x))));
    quick_gelu(v) = v * sigmoid(1.702 v). hidden_states[0] is the pre_layrnorm
    output and hidden_states[i] the output of layer i-1, so vision_feature_layer
    -2 runs all layers but the last; post_layernorm is never applied.
  * vision_feature_select_strategy "default" drops the CLS row: 16 rows per image.
  * projector: linear_2(gelu(linear_1(f))), exact (erf) GELU.
  * merge: the input embeddings of the image_token_index positions are replaced,
    in order, by the projected rows of the images in order.
  * Llama text model as make_decoders.py (RMSNorm, rotate-half RoPE, GQA 4/2,
    SiLU-gated MLP, untied head).

Preprocessing is CLIPImageProcessor's, done with Pillow exactly as transformers
does: convert("RGB") (alpha dropped), resize the shortest edge to 32 with
Image.BICUBIC (output size (short, int(32 * long / short))), center crop 32x32
(offsets (h - 32) // 2, (w - 32) // 2), times 1/255, normalize with the CLIP mean
and std. golden.json keeps those pixel values per image (the TS preprocessing is
checked against them) and the logits of the prompt
"<image> and <image>: the cat" (BOS, 16 image tokens, 3, 16, 5: 41 tokens) with
image_a then image_b, at every non-image position and the last position of each
image, in float64 from the golden pixels; the projected image features of each
image; and the greedy continuation of 8 tokens (a seed is accepted only when every
greedy step has a top-1/top-2 gap >= 0.05, >= 5 distinct ids and no EOS).
The script also checks that the images matter (swapping them moves the logits)
and that the float64 golden agrees with float32 (< 1e-3).
"""
import json
import math
import os
import shutil

import numpy as np
import torch
from PIL import Image

# Shared with the other golden generators (same definitions, run from this directory).
from make_decoders import rms_norm, rotate_half, sig, top2_gap, write_safetensors  # noqa: E402
from make_encoders import layer_norm  # noqa: E402

GENERATOR_VERSION = 1
GENERATOR = f"scripts/golden/make_llava.py v{GENERATOR_VERSION}"
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
OUT = os.path.join(ROOT, "test", "fixtures", "decoders", "llava_tiny")
TOKENIZER_DIR = os.path.join(ROOT, "models", "stories260K")

IMAGE_TOKEN = 512
VOCAB = 513
PROMPT_TEXT = "<image> and <image>: the cat"
# The stories260K tokenizer + `<image>` (Weft's tokenizer; each text segment gets its "▁").
PROMPT_IDS = [1, 512, 410, 269, 410, 512, 410, 467, 265, 280, 294]
NEW_TOKENS = 8
MIN_MARGIN = 0.05
MIN_DISTINCT = 5
SEED = 5005

CLIP_MEAN = [0.48145466, 0.4578275, 0.40821073]
CLIP_STD = [0.26862954, 0.26130258, 0.27577711]

VISION = {
    "model_type": "clip_vision_model",
    "hidden_size": 32,
    "image_size": 32,
    "patch_size": 8,
    "num_channels": 3,
    "intermediate_size": 64,
    "num_attention_heads": 4,
    "num_hidden_layers": 3,
    "layer_norm_eps": 1e-5,
    "hidden_act": "quick_gelu",
    "projection_dim": 32,
}
TEXT = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 8,
    "intermediate_size": 64,
    "vocab_size": VOCAB,
    "max_position_embeddings": 256,
    "hidden_act": "silu",
    "rms_norm_eps": 1e-5,
    "rope_theta": 10000.0,
    "tie_word_embeddings": False,
    "bos_token_id": 1,
    "eos_token_id": 2,
}
CONFIG = {
    "architectures": ["LlavaForConditionalGeneration"],
    "model_type": "llava",
    "image_token_index": IMAGE_TOKEN,
    "projector_hidden_act": "gelu",
    "vision_feature_layer": -2,
    "vision_feature_select_strategy": "default",
    "vision_config": VISION,
    "text_config": TEXT,
    "tie_word_embeddings": False,
    "torch_dtype": "float32",
}
PREPROCESSOR = {
    "image_processor_type": "CLIPImageProcessor",
    "crop_size": {"height": 32, "width": 32},
    "do_center_crop": True,
    "do_convert_rgb": True,
    "do_normalize": True,
    "do_rescale": True,
    "do_resize": True,
    "image_mean": CLIP_MEAN,
    "image_std": CLIP_STD,
    "resample": 3,
    "rescale_factor": 1 / 255,
    "size": {"shortest_edge": 32},
}

# ---- images -------------------------------------------------------------------------------


def make_images():
    """Deterministic test pictures: smooth gradients plus a few hard edges and noise."""
    r = np.random.RandomState(7)

    def picture(w, h, channels):
        y, x = np.mgrid[0:h, 0:w].astype(np.float64)
        planes = [
            128 + 100 * np.sin(x / 5.0 + y / 9.0),
            255 * x / (w - 1),
            np.where((x // 8 + y // 8) % 2 == 0, 40.0, 220.0),
            255 * y / (h - 1),
        ]
        a = np.stack(planes[:channels], axis=-1) + r.normal(0, 12, (h, w, channels))
        return np.clip(np.round(a), 0, 255).astype(np.uint8)

    a = Image.fromarray(picture(48, 40, 3), "RGB")
    b = Image.fromarray(picture(30, 50, 4), "RGBA")
    c = Image.fromarray(picture(64, 48, 3)[:, :, ::-1].copy(), "RGB")
    return a, b, c


def clip_preprocess(img):
    """CLIPImageProcessor with Pillow, as transformers runs it: [3, 32, 32] float32."""
    img = img.convert("RGB")
    w, h = img.size
    short, long = (w, h) if w <= h else (h, w)
    new_short, new_long = 32, int(32 * long / short)
    nh, nw = (new_long, new_short) if w <= h else (new_short, new_long)
    img = img.resize((nw, nh), resample=Image.BICUBIC)
    a = np.asarray(img)  # [nh, nw, 3] uint8
    top, left = (nh - 32) // 2, (nw - 32) // 2
    a = a[top : top + 32, left : left + 32]
    a = (a.astype(np.float64) * (1 / 255)).astype(np.float32)
    a = (a - np.array(CLIP_MEAN, dtype=np.float32)) / np.array(CLIP_STD, dtype=np.float32)
    return torch.from_numpy(a.transpose(2, 0, 1).copy())


# ---- weights ------------------------------------------------------------------------------


def make_weights(seed):
    g = torch.Generator().manual_seed(seed)

    def randn(*shape, std=1.0):
        return (torch.randn(*shape, generator=g, dtype=torch.float32) * std).contiguous()

    def linear(out_f, in_f):
        return randn(out_f, in_f, std=1.0 / math.sqrt(in_f))

    def norm(n):
        return (1.0 + randn(n, std=0.2)).contiguous()

    w = {}
    V, p = VISION, "vision_tower.vision_model."
    D, I, P = V["hidden_size"], V["intermediate_size"], V["patch_size"]
    n_pos = (V["image_size"] // P) ** 2 + 1
    w[p + "embeddings.patch_embedding.weight"] = randn(D, 3, P, P, std=1.0 / math.sqrt(3 * P * P))
    w[p + "embeddings.class_embedding"] = randn(D)
    w[p + "embeddings.position_embedding.weight"] = randn(n_pos, D, std=0.5)
    w[p + "pre_layrnorm.weight"] = norm(D)
    w[p + "pre_layrnorm.bias"] = randn(D, std=0.2)
    for l in range(V["num_hidden_layers"]):
        q = f"{p}encoder.layers.{l}."
        for n in ("q_proj", "k_proj", "v_proj", "out_proj"):
            w[q + f"self_attn.{n}.weight"] = linear(D, D)
            w[q + f"self_attn.{n}.bias"] = randn(D, std=0.3)
        w[q + "layer_norm1.weight"] = norm(D)
        w[q + "layer_norm1.bias"] = randn(D, std=0.2)
        w[q + "mlp.fc1.weight"] = linear(I, D)
        w[q + "mlp.fc1.bias"] = randn(I, std=0.3)
        w[q + "mlp.fc2.weight"] = linear(D, I)
        w[q + "mlp.fc2.bias"] = randn(D, std=0.3)
        w[q + "layer_norm2.weight"] = norm(D)
        w[q + "layer_norm2.bias"] = randn(D, std=0.2)
    w[p + "post_layernorm.weight"] = norm(D)  # present in checkpoints, unused by LLaVA
    w[p + "post_layernorm.bias"] = randn(D, std=0.2)

    T = TEXT
    Dt, It, H, KV, hd = T["hidden_size"], T["intermediate_size"], T["num_attention_heads"], T["num_key_value_heads"], T["head_dim"]
    w["multi_modal_projector.linear_1.weight"] = linear(Dt, D)
    w["multi_modal_projector.linear_1.bias"] = randn(Dt, std=0.3)
    w["multi_modal_projector.linear_2.weight"] = linear(Dt, Dt)
    w["multi_modal_projector.linear_2.bias"] = randn(Dt, std=0.3)

    m = "language_model.model."
    w[m + "embed_tokens.weight"] = randn(VOCAB, Dt)
    for l in range(T["num_hidden_layers"]):
        q = f"{m}layers.{l}."
        w[q + "input_layernorm.weight"] = norm(Dt)
        w[q + "self_attn.q_proj.weight"] = linear(H * hd, Dt)
        w[q + "self_attn.k_proj.weight"] = linear(KV * hd, Dt)
        w[q + "self_attn.v_proj.weight"] = linear(KV * hd, Dt)
        w[q + "self_attn.o_proj.weight"] = linear(Dt, H * hd)
        w[q + "post_attention_layernorm.weight"] = norm(Dt)
        w[q + "mlp.gate_proj.weight"] = linear(It, Dt)
        w[q + "mlp.up_proj.weight"] = linear(It, Dt)
        w[q + "mlp.down_proj.weight"] = linear(Dt, It)
    w[m + "norm.weight"] = randn(Dt)
    w["language_model.lm_head.weight"] = randn(VOCAB, Dt)
    return w


# ---- the reference forward pass -----------------------------------------------------------


def clip_hidden_states(w, pixels):
    """pixels [B, 3, S, S] -> list of hidden states [B, P + 1, D] (index 0 = pre_layrnorm output)."""
    V, p = VISION, "vision_tower.vision_model."
    D, H, P, eps = V["hidden_size"], V["num_attention_heads"], V["patch_size"], V["layer_norm_eps"]
    hd = D // H
    B = pixels.shape[0]
    x = torch.nn.functional.conv2d(pixels, w[p + "embeddings.patch_embedding.weight"], stride=P)  # [B, D, g, g]
    x = x.flatten(2).transpose(1, 2)  # [B, P, D], patches row-major
    cls = w[p + "embeddings.class_embedding"].expand(B, 1, D)
    x = torch.cat([cls, x], dim=1) + w[p + "embeddings.position_embedding.weight"][None]
    x = layer_norm(x, w[p + "pre_layrnorm.weight"], w[p + "pre_layrnorm.bias"], eps)
    states = [x]
    N = x.shape[1]
    for l in range(V["num_hidden_layers"]):
        q_ = f"{p}encoder.layers.{l}."
        r = x
        h = layer_norm(x, w[q_ + "layer_norm1.weight"], w[q_ + "layer_norm1.bias"], eps)

        def proj(n, t):
            return t @ w[q_ + f"self_attn.{n}.weight"].T + w[q_ + f"self_attn.{n}.bias"]

        q = proj("q_proj", h).view(B, N, H, hd).transpose(1, 2) * hd ** -0.5
        k = proj("k_proj", h).view(B, N, H, hd).transpose(1, 2)
        v = proj("v_proj", h).view(B, N, H, hd).transpose(1, 2)
        att = torch.softmax(q @ k.transpose(2, 3), dim=-1) @ v  # [B, H, N, hd]
        att = att.transpose(1, 2).reshape(B, N, D)
        x = r + proj("out_proj", att)
        r = x
        h = layer_norm(x, w[q_ + "layer_norm2.weight"], w[q_ + "layer_norm2.bias"], eps)
        h = h @ w[q_ + "mlp.fc1.weight"].T + w[q_ + "mlp.fc1.bias"]
        h = h * torch.sigmoid(1.702 * h)  # quick_gelu
        x = r + (h @ w[q_ + "mlp.fc2.weight"].T + w[q_ + "mlp.fc2.bias"])
        states.append(x)
    return states


def image_features(w, pixels):
    """Projected features [B, 16, Dt] (vision_feature_layer -2, CLS dropped)."""
    f = clip_hidden_states(w, pixels)[CONFIG["vision_feature_layer"]][:, 1:]
    h = f @ w["multi_modal_projector.linear_1.weight"].T + w["multi_modal_projector.linear_1.bias"]
    h = 0.5 * h * (1 + torch.erf(h / math.sqrt(2)))  # exact GELU
    return h @ w["multi_modal_projector.linear_2.weight"].T + w["multi_modal_projector.linear_2.bias"]


def llama_from_embeds(w, x):
    """Llama logits [T, V] from input embeddings [T, D] (positions 0..T-1)."""
    c, m = TEXT, "language_model.model."
    H, KV, hd, eps = c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"], c["rms_norm_eps"]
    T = x.shape[0]
    inv = 1.0 / (c["rope_theta"] ** (torch.arange(0, hd, 2, dtype=torch.int64).float() / hd))
    freqs = torch.arange(T, dtype=x.dtype)[:, None] * inv.to(x.dtype)[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos(), emb.sin()
    allowed = torch.arange(T)[None, :] <= torch.arange(T)[:, None]
    for l in range(c["num_hidden_layers"]):
        p = f"{m}layers.{l}."
        h = rms_norm(x, w[p + "input_layernorm.weight"], eps)
        q = (h @ w[p + "self_attn.q_proj.weight"].T).view(T, H, hd).transpose(0, 1)
        k = (h @ w[p + "self_attn.k_proj.weight"].T).view(T, KV, hd).transpose(0, 1)
        v = (h @ w[p + "self_attn.v_proj.weight"].T).view(T, KV, hd).transpose(0, 1)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k = k.repeat_interleave(H // KV, dim=0)
        v = v.repeat_interleave(H // KV, dim=0)
        s = ((q @ k.transpose(1, 2)) * hd ** -0.5).masked_fill(~allowed, float("-inf"))
        att = (torch.softmax(s, dim=-1) @ v).transpose(0, 1).reshape(T, H * hd)
        x = x + att @ w[p + "self_attn.o_proj.weight"].T
        h = rms_norm(x, w[p + "post_attention_layernorm.weight"], eps)
        gate = h @ w[p + "mlp.gate_proj.weight"].T
        up = h @ w[p + "mlp.up_proj.weight"].T
        x = x + (torch.nn.functional.silu(gate) * up) @ w[p + "mlp.down_proj.weight"].T
    x = rms_norm(x, w[m + "norm.weight"], eps)
    return x @ w["language_model.lm_head.weight"].T


def expand(ids, n):
    out = []
    for t in ids:
        out.extend([t] * n if t == IMAGE_TOKEN else [t])
    return out


def forward(W, ids, pixels, dtype=torch.float64):
    """Logits [T, V] of the expanded prompt `ids` with the images `pixels` [B, 3, 32, 32]."""
    w = {k: v.to(dtype) for k, v in W.items()}
    feats = image_features(w, pixels.to(dtype)).reshape(-1, TEXT["hidden_size"])
    x = w["language_model.model.embed_tokens.weight"][torch.tensor(ids)].clone()
    mask = torch.tensor(ids) == IMAGE_TOKEN
    assert int(mask.sum()) == feats.shape[0]
    x[mask] = feats
    return llama_from_embeds(w, x)


def greedy(W, ids, pixels, n):
    seq = list(ids)
    margins = []
    for _ in range(n):
        last = forward(W, seq, pixels)[-1]
        margins.append(top2_gap(last))
        seq.append(int(torch.argmax(last)))
    return seq[len(ids):], margins


def main():
    torch.use_deterministic_algorithms(True)
    os.makedirs(OUT, exist_ok=True)
    img_a, img_b, img_c = make_images()
    img_a.save(os.path.join(OUT, "image_a.png"), optimize=False)
    img_b.save(os.path.join(OUT, "image_b.png"), optimize=False)
    img_c.save(os.path.join(OUT, "image_c.jpg"), quality=92, subsampling=0)
    # Reload so the goldens come from the files exactly as committed (the JPEG is lossy).
    loaded = [Image.open(os.path.join(OUT, n)) for n in ("image_a.png", "image_b.png", "image_c.jpg")]
    pixels = [clip_preprocess(im) for im in loaded]
    n_img = (VISION["image_size"] // VISION["patch_size"]) ** 2
    ids = expand(PROMPT_IDS, n_img)
    px = torch.stack(pixels[:2])

    seed = SEED
    for _ in range(50):
        W = make_weights(seed)
        cont, margins = greedy(W, ids, px, NEW_TOKENS)
        if min(margins) >= MIN_MARGIN and 2 not in cont and len(set(cont)) >= MIN_DISTINCT:
            break
        seed += 1
    else:
        raise SystemExit("no seed with greedy margins >= MIN_MARGIN")

    logits = forward(W, ids, px)
    d32 = float((forward(W, ids, px, dtype=torch.float32).double() - logits).abs().max())
    assert d32 < 1e-3, d32
    swapped = forward(W, ids, torch.stack([pixels[1], pixels[0]]))
    delta = float((swapped - logits).abs().max())
    assert delta > 0.1, delta
    feats = image_features({k: v.double() for k, v in W.items()}, px.double())

    rows = [i for i, t in enumerate(ids) if t != IMAGE_TOKEN or i + 1 == len(ids) or ids[i + 1] != IMAGE_TOKEN]

    with open(os.path.join(OUT, "config.json"), "w") as f:
        json.dump(CONFIG, f, indent=2)
        f.write("\n")
    with open(os.path.join(OUT, "preprocessor_config.json"), "w") as f:
        json.dump(PREPROCESSOR, f, indent=2)
        f.write("\n")
    write_safetensors(os.path.join(OUT, "model.safetensors"), W)
    tok = json.load(open(os.path.join(TOKENIZER_DIR, "tokenizer.json")))
    tok["added_tokens"].append({"id": IMAGE_TOKEN, "content": "<image>", "single_word": False, "lstrip": False,
                                "rstrip": False, "normalized": False, "special": True})
    with open(os.path.join(OUT, "tokenizer.json"), "w") as f:
        json.dump(tok, f, ensure_ascii=False)
    shutil.copyfile(os.path.join(TOKENIZER_DIR, "tokenizer_config.json"), os.path.join(OUT, "tokenizer_config.json"))

    golden = {
        "version": GENERATOR_VERSION,
        "generator": GENERATOR,
        "torch": torch.__version__.split("+")[0],
        "architecture": "LlavaForConditionalGeneration",
        "seed": seed,
        "compute_dtype": "float64",
        "prompt_text": PROMPT_TEXT,
        "prompt_ids": PROMPT_IDS,
        "expanded_ids": ids,
        "images": ["image_a.png", "image_b.png"],
        "logit_rows": rows,
        "logits": [[sig(float(v)) for v in logits[i]] for i in rows],
        "greedy": cont,
        "greedy_min_margin": round(min(margins), 4),
        "logit_absmax": round(float(logits.abs().max()), 4),
        "swap_delta": round(delta, 4),
        "features": [[sig(float(v)) for v in r] for r in feats.reshape(-1, TEXT["hidden_size"])],
        "pixel_files": ["image_a.png", "image_b.png", "image_c.jpg"],
        "pixel_values": [[round(float(v), 6) for v in p.reshape(-1)] for p in pixels],
    }
    with open(os.path.join(OUT, "golden.json"), "w") as f:
        f.write("{\n")
        items = list(golden.items())
        for idx, (k, v) in enumerate(items):
            end = ",\n" if idx < len(items) - 1 else "\n"
            if k in ("logits", "features", "pixel_values"):
                body = ",\n    ".join(json.dumps(r, separators=(",", ":")) for r in v)
                f.write(f'  "{k}": [\n    {body}\n  ]{end}')
            else:
                f.write(f"  {json.dumps(k)}: {json.dumps(v, separators=(',', ':'))}{end}")
        f.write("}\n")
    size = sum(os.path.getsize(os.path.join(OUT, x)) for x in os.listdir(OUT))
    print(f"llava_tiny: seed {seed}, greedy {cont}, min margin {min(margins):.3f}, |logits| <= "
          f"{float(logits.abs().max()):.2f}, f32-vs-f64 {d32:.1e}, swap delta {delta:.2f}, {size} bytes")


if __name__ == "__main__":
    main()

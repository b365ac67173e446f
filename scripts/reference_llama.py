#!/usr/bin/env python3
"""An independent reference of the Llama-family forward pass, in NumPy (float64), for tests.

Reads a Hugging Face model directory (config.json, model.safetensors in f32) and a JSON request on
stdin: {"tokens": [...], "generate": N}. Prints JSON: the logits of every prompt position (float32
values as lists) and N greedily generated token ids (each step recomputed from scratch, no cache).
With {"tokens": [...], "beam": {"width": W, "max_tokens": M, "length_penalty": L, "eos": [...],
"ignore_eos": false, "stop_token_ids": [...]}} it prints {"beams": [{"tokens", "cum_logprob", "finish"}...]} instead: beam
search as vLLM defines it, written here from that definition (see beam_search below).
It shares no code with weft's TF.js model: it is written from the architecture's definition.
"""
import json
import math
import struct
import sys

import numpy as np


def load_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    base = 8 + n
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        if t["dtype"] != "F32":
            raise SystemExit(f"{name}: only F32 weights in the reference")
        lo, hi = t["data_offsets"]
        out[name] = np.frombuffer(raw[base + lo : base + hi], dtype="<f4").reshape(t["shape"]).astype(np.float64)
    return out


def rope_params(cfg, head_dim):
    """Inverse frequencies and the cos/sin scale (YaRN's attention factor; 1 otherwise)."""
    theta = cfg.get("rope_theta", 10000.0)
    s = cfg.get("rope_scaling") or {}
    kind = s.get("rope_type", s.get("type", "default"))
    f = s.get("factor", 1.0)
    if kind == "dynamic":
        # vLLM's fixed NTK base for the scaled context length.
        theta = theta * (f * f - (f - 1)) ** (head_dim / (head_dim - 2))
    inv = 1.0 / theta ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    scale = 1.0
    if kind == "yarn":
        old = s.get("original_max_position_embeddings", cfg.get("max_position_embeddings", 2048))
        fast, slow = s.get("beta_fast", 32), s.get("beta_slow", 1)

        def corr(turns):
            return head_dim * math.log(old / (turns * 2 * math.pi)) / (2 * math.log(theta))

        lo, hi = max(math.floor(corr(fast)), 0), min(math.ceil(corr(slow)), head_dim - 1)
        if lo == hi:
            hi += 0.001
        ramp = np.clip((np.arange(head_dim // 2, dtype=np.float64) - lo) / (hi - lo), 0, 1)
        extrapolate = 1 - ramp
        inv = (inv / f) * (1 - extrapolate) + inv * extrapolate
        scale = s.get("attention_factor", 0.1 * math.log(f) + 1 if f > 1 else 1.0)
        return inv, scale
    if kind == "linear":
        inv = inv / s["factor"]
    elif kind == "llama3":
        factor, low, high = s["factor"], s.get("low_freq_factor", 1.0), s.get("high_freq_factor", 4.0)
        old = s.get("original_max_position_embeddings", 8192)
        wave = 2 * math.pi / inv
        scaled = inv / factor
        smooth = (old / wave - low) / (high - low)
        mid = (1 - smooth) * scaled + smooth * inv
        inv = np.where(wave < old / high, inv, np.where(wave > old / low, scaled, mid))
    elif kind not in ("default", "dynamic"):
        raise SystemExit(f"rope type {kind}")
    return inv, scale


def rms_norm(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def rotate(x, cos, sin):
    # x: [heads, T, D]; the two halves of each head rotate as pairs (i, i + D/2).
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return x * cos + np.concatenate([-x2, x1], axis=-1) * sin


def forward(cfg, w, tokens):
    H = cfg["hidden_size"]
    nh = cfg["num_attention_heads"]
    nkv = cfg.get("num_key_value_heads", nh)
    D = cfg.get("head_dim") or H // nh
    eps = cfg.get("rms_norm_eps", 1e-6)
    T = len(tokens)
    x = w["model.embed_tokens.weight"][tokens]
    inv, scale = rope_params(cfg, D)
    ang = np.outer(np.arange(T, dtype=np.float64), inv)
    ang = np.concatenate([ang, ang], axis=-1)
    cos, sin = np.cos(ang)[None] * scale, np.sin(ang)[None] * scale
    causal = np.triu(np.full((T, T), -np.inf), 1)
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        h = rms_norm(x, w[p + "input_layernorm.weight"], eps)

        def lin(name, v):
            y = v @ w[p + name + ".weight"].T
            b = w.get(p + name + ".bias")
            return y if b is None else y + b

        q = lin("self_attn.q_proj", h).reshape(T, nh, D).transpose(1, 0, 2)
        k = lin("self_attn.k_proj", h).reshape(T, nkv, D).transpose(1, 0, 2)
        v = lin("self_attn.v_proj", h).reshape(T, nkv, D).transpose(1, 0, 2)
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        rep = nh // nkv
        k, v = np.repeat(k, rep, axis=0), np.repeat(v, rep, axis=0)
        s = q @ k.transpose(0, 2, 1) / math.sqrt(D) + causal
        s = np.exp(s - s.max(-1, keepdims=True))
        s /= s.sum(-1, keepdims=True)
        o = (s @ v).transpose(1, 0, 2).reshape(T, nh * D)
        x = x + o @ w[p + "self_attn.o_proj.weight"].T
        h = rms_norm(x, w[p + "post_attention_layernorm.weight"], eps)
        g = h @ w[p + "mlp.gate_proj.weight"].T
        u = h @ w[p + "mlp.up_proj.weight"].T
        x = x + (g / (1 + np.exp(-g)) * u) @ w[p + "mlp.down_proj.weight"].T
    x = rms_norm(x, w["model.norm.weight"], eps)
    head = w.get("lm_head.weight") if not cfg.get("tie_word_embeddings", False) else None
    return x @ (head if head is not None else w["model.embed_tokens.weight"]).T


def log_softmax(x):
    m = x.max()
    return x - (m + math.log(np.exp(x - m).sum()))


def beam_search(cfg, w, prompt, width, max_tokens, length_penalty, eos, ignore_eos, stop_ids):
    """vLLM's beam search: each live beam extended by its 2*width most likely tokens; a candidate
    ending in EOS is set aside (EOS not kept; a stop token id is kept and counted), the `width` best of the rest live on; after
    max_tokens steps finished and live beams are ranked together. Score: cumulative logprob over
    (prompt + generated tokens) ** length_penalty."""
    P = len(prompt)

    def score(b):
        return b["cum_logprob"] / (P + len(b["tokens"])) ** length_penalty

    live = [{"tokens": [], "cum_logprob": 0.0}]
    done = []
    for _ in range(max_tokens):
        cands = []
        for b in live:
            lp = log_softmax(forward(cfg, w, prompt + b["tokens"])[-1])
            top = np.argsort(-lp, kind="stable")[: 2 * width]
            for t in top:
                t = int(t)
                nb = {"tokens": b["tokens"] + [t], "cum_logprob": b["cum_logprob"] + float(lp[t])}
                if t in eos and not ignore_eos:
                    done.append({"tokens": b["tokens"], "cum_logprob": nb["cum_logprob"], "finish": "stop", "eos": t})
                else:
                    if t in stop_ids:
                        done.append({**nb, "finish": "stop"})
                    else:
                        cands.append(nb)
        live = sorted(cands, key=score, reverse=True)[:width]
    for b in live:
        b["finish"] = "length"
    return sorted(done + live, key=score, reverse=True)[:width]


def main():
    model_dir = sys.argv[1]
    req = json.load(sys.stdin)
    cfg = json.load(open(f"{model_dir}/config.json"))
    w = load_safetensors(f"{model_dir}/model.safetensors")
    tokens = list(req["tokens"])
    if "beam" in req:
        b = req["beam"]
        beams = beam_search(
            cfg, w, tokens, b["width"], b["max_tokens"], b.get("length_penalty", 1.0), set(b["eos"]), b.get("ignore_eos", False),
            set(b.get("stop_token_ids", [])),
        )
        json.dump({"beams": beams}, sys.stdout)
        return
    logits = forward(cfg, w, tokens)
    out = {"logits": logits.astype(np.float32).tolist(), "generated": []}
    for _ in range(req.get("generate", 0)):
        nxt = int(np.argmax(forward(cfg, w, tokens)[-1]))
        out["generated"].append(nxt)
        tokens.append(nxt)
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()

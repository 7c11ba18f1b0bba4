"""A plain numpy forward pass of Gemma3ForCausalLM, read from an HF folder: the test's
independent reader of what ``crossover models convert`` wrote (config.json and the
safetensors), written from the architecture's definition, not from the converter."""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

F32 = npt.NDArray[np.float32]


def read_safetensors(path: Path) -> dict[str, F32]:
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header: dict[str, Any] = json.loads(raw[8 : 8 + n])
    base = 8 + n
    out: dict[str, F32] = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        a, b = meta["data_offsets"]
        buf = raw[base + a : base + b]
        if meta["dtype"] == "BF16":
            bits = np.frombuffer(buf, dtype=np.uint16).astype(np.uint32) << 16
            arr = bits.view(np.float32)
        elif meta["dtype"] == "F16":
            arr = np.frombuffer(buf, dtype=np.float16).astype(np.float32)
        else:
            arr = np.frombuffer(buf, dtype=np.float32)
        out[name] = arr.reshape(meta["shape"])
    return out


def _rms(x: F32, w: F32, eps: float) -> F32:
    var = np.mean(x * x, axis=-1, keepdims=True)
    return (x / np.sqrt(var + eps) * (1.0 + w)).astype(np.float32)


def _rope(x: F32, positions: npt.NDArray[np.int64], base: float) -> F32:
    """Rotate-half RoPE over the last axis (heads, tokens, head_dim)."""
    d = x.shape[-1]
    inv = 1.0 / (base ** (np.arange(0, d, 2, dtype=np.float64) / d))
    ang = positions[:, None].astype(np.float64) * inv[None, :]
    cos = np.cos(np.concatenate([ang, ang], axis=-1)).astype(np.float32)
    sin = np.sin(np.concatenate([ang, ang], axis=-1)).astype(np.float32)
    half = d // 2
    rot = np.concatenate([-x[..., half:], x[..., :half]], axis=-1)
    return (x * cos + rot * sin).astype(np.float32)


def _gelu_tanh(x: F32) -> F32:
    return (0.5 * x * (1.0 + np.tanh(0.7978845608028654 * (x + 0.044715 * x**3)))).astype(
        np.float32
    )


def logits(folder: Path, tokens: list[int], adjust: Callable[[str, F32], F32] | None = None) -> F32:
    """Next-token logits at every position of ``tokens`` (causal, one sequence);
    ``adjust(name, weights)`` may change a tensor first (the tests' controls)."""
    cfg = json.loads((folder / "config.json").read_text())
    w = read_safetensors(folder / "model.safetensors")
    if adjust is not None:
        w = {k: adjust(k, v) for k, v in w.items()}
    eps = float(cfg["rms_norm_eps"])
    hd = int(cfg["head_dim"])
    nh, nkv = int(cfg["num_attention_heads"]), int(cfg["num_key_value_heads"])
    emb = w["model.embed_tokens.weight"]
    x = emb[tokens] * np.float32(np.sqrt(cfg["hidden_size"]))
    n = len(tokens)
    pos = np.arange(n)
    mask = np.triu(np.full((n, n), -np.inf, dtype=np.float32), 1)
    window = cfg.get("sliding_window")
    for i in range(int(cfg["num_hidden_layers"])):
        p = f"model.layers.{i}."
        sliding = cfg["layer_types"][i] == "sliding_attention"
        base = cfg["rope_local_base_freq"] if sliding else cfg["rope_theta"]
        h = _rms(x, w[p + "input_layernorm.weight"], eps)
        q = (h @ w[p + "self_attn.q_proj.weight"].T).reshape(n, nh, hd).transpose(1, 0, 2)
        k = (h @ w[p + "self_attn.k_proj.weight"].T).reshape(n, nkv, hd).transpose(1, 0, 2)
        v = (h @ w[p + "self_attn.v_proj.weight"].T).reshape(n, nkv, hd).transpose(1, 0, 2)
        q = _rope(_rms(q, w[p + "self_attn.q_norm.weight"], eps), pos, base)
        k = _rope(_rms(k, w[p + "self_attn.k_norm.weight"], eps), pos, base)
        k = np.repeat(k, nh // nkv, axis=0)
        v = np.repeat(v, nh // nkv, axis=0)
        scores = q @ k.transpose(0, 2, 1) * np.float32(cfg["query_pre_attn_scalar"] ** -0.5)
        m = mask
        if sliding and window is not None and n > window:
            m = m + np.tril(np.full((n, n), -np.inf, dtype=np.float32), -window)
        scores = scores + m
        scores = scores - scores.max(axis=-1, keepdims=True)
        probs = np.exp(scores)
        probs /= probs.sum(axis=-1, keepdims=True)
        attn = (probs @ v).transpose(1, 0, 2).reshape(n, nh * hd)
        attn = attn @ w[p + "self_attn.o_proj.weight"].T
        x = x + _rms(attn, w[p + "post_attention_layernorm.weight"], eps)
        h = _rms(x, w[p + "pre_feedforward_layernorm.weight"], eps)
        gate = h @ w[p + "mlp.gate_proj.weight"].T
        up = h @ w[p + "mlp.up_proj.weight"].T
        mlp = (_gelu_tanh(gate) * up) @ w[p + "mlp.down_proj.weight"].T
        x = x + _rms(mlp, w[p + "post_feedforward_layernorm.weight"], eps)
    x = _rms(x, w["model.norm.weight"], eps)
    return (x @ emb.T).astype(np.float32)

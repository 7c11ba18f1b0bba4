"""Model facts from an HF ``config.json`` (or its folder), a GGUF header, or a known name.

Parameter counts are computed from the shapes (attention, dense or MoE MLP, embeddings),
so a config never needs a "number of parameters" field. GGUF files give exact tensor
sizes from the header, read with the ``gguf`` package's ``GGUFReader`` (memory-mapped:
only the header is touched).
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, Field

from crossover.errors import UsageError


class ModelFacts(BaseModel):
    """Shapes the cost model needs; sizes in parameters, bytes where named so."""

    name: str
    source: str
    architecture: str | None = None
    layers: int
    hidden: int
    ffn: int
    attention_heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    experts: int | None = None
    experts_per_token: int | None = None
    moe_ffn: int | None = None
    shared_experts: int = 0
    moe_layers: int = 0
    # MLA (DeepSeek): the cache holds a latent of this width per token per layer
    kv_latent_dim: int | None = None
    # sliding-window attention: ``sliding_layers`` layers attend over the last
    # ``sliding_window`` tokens only (gpt-oss every other layer, Gemma 3 five of six)
    sliding_window: int | None = None
    sliding_layers: int = 0
    tie_embeddings: bool = False
    dtype: str | None = None
    quantization: dict[str, Any] | None = None
    # computed
    params: int
    expert_params: int = 0
    embedding_params: int = 0
    weight_bytes: int | None = None  # exact, from a GGUF; else computed from the quant
    expert_bytes: int | None = None  # exact bytes of the routed experts, from a GGUF
    gguf_file_type: str | None = None
    # what the cost model does and does not capture of this model (known models)
    notes: list[str] = Field(default_factory=list)
    published_params: float | None = None

    @property
    def is_moe(self) -> bool:
        return bool(self.experts and self.experts > 1)

    @property
    def active_params(self) -> int:
        """Parameters touched per token (all dense ones, top-k of the experts)."""
        if not self.is_moe or not self.experts or not self.experts_per_token:
            return self.params
        per_expert = self.expert_params / self.experts
        return int(self.params - self.expert_params + per_expert * self.experts_per_token)

    def kv_values_per_token(self, context: int | None = None) -> float:
        """Cached values per token over all layers (multiply by bytes per value).

        Without ``context`` every layer counts as full attention (the cautious figure the
        memory fit uses); with it, a sliding-window layer holds at most ``sliding_window``
        tokens, so its share is averaged over ``context`` tokens."""
        per_layer = (
            self.kv_latent_dim
            if self.kv_latent_dim is not None
            else 2 * self.kv_heads * self.head_dim
        )
        if context is None or not self.sliding_window or not self.sliding_layers:
            return self.layers * per_layer
        share = min(1.0, self.sliding_window / max(context, 1))
        full = self.layers - self.sliding_layers
        return per_layer * (full + self.sliding_layers * share)


@cache
def _known() -> dict[str, Any]:
    text = resources.files("crossover.advise").joinpath("data/models.yaml").read_text("utf-8")
    data: dict[str, Any] = yaml.safe_load(text)["models"]
    return data


def known_models() -> list[str]:
    return sorted(_known())


def load_model(spec: str) -> ModelFacts:
    """A config.json, a folder holding one, a .gguf file, or a known name."""
    path = Path(spec).expanduser()
    if path.is_dir():
        if (path / "config.json").is_file():
            return from_hf_config(path / "config.json")
        ggufs = sorted(path.glob("*.gguf"))
        if ggufs:
            return from_gguf(ggufs[0])
        raise UsageError(f"{spec}: folder has no config.json or .gguf file")
    if path.is_file():
        if path.suffix == ".gguf":
            return from_gguf(path)
        return from_hf_config(path)
    want = spec.lower()
    for key, entry in _known().items():
        if want == key or want in (a.lower() for a in entry.get("aliases", [])):
            facts = facts_from_config(entry["config"], name=key, source=entry["source"])
            published = entry.get("published") or {}
            return facts.model_copy(
                update={
                    "notes": list(entry.get("notes") or []),
                    "published_params": published.get("params"),
                }
            )
    raise UsageError(
        f"--model {spec!r} is not a file, folder or known name (known: {', '.join(known_models())})"
    )


def from_hf_config(path: Path) -> ModelFacts:
    try:
        config = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError) as exc:
        raise UsageError(f"{path}: not a readable JSON config ({exc})") from exc
    if not isinstance(config, dict):
        raise UsageError(f"{path}: config is not a JSON object")
    name = config.get("_name_or_path") or path.parent.name or path.stem
    return facts_from_config(config, name=str(name), source=str(path))


def _int(config: dict[str, Any], *keys: str, default: int | None = None) -> int:
    for key in keys:
        value = config.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    if default is not None:
        return default
    given = next((k for k in keys if k in config), None)
    if given is not None:  # there, but no integer: not "lacks" it
        raise UsageError(f"model config: {given!r} must be an integer, got {config[given]!r}")
    raise UsageError(f"model config lacks {keys[0]!r}")


def _positive(**shape: int) -> None:
    for key, value in shape.items():
        if value < 1:
            raise UsageError(f"model config: {key!r} must be a positive integer, got {value}")


def facts_from_config(raw: dict[str, Any], *, name: str, source: str) -> ModelFacts:
    """Compute facts from HF config keys (Llama, Qwen, Mixtral, Qwen-MoE, DeepSeek, Gemma)."""
    config = dict(raw)
    if isinstance(config.get("text_config"), dict):  # multimodal wrappers (Gemma 3, Llama 4)
        config = {**config, **config["text_config"]}
    hidden = _int(config, "hidden_size", "n_embd", "d_model")
    layers = _int(config, "num_hidden_layers", "n_layer", "num_layers")
    heads = _int(config, "num_attention_heads", "n_head")
    _positive(num_attention_heads=heads, hidden_size=hidden, num_hidden_layers=layers)
    kv_heads = _int(config, "num_key_value_heads", "num_kv_heads", default=heads)
    head_dim = _int(config, "head_dim", default=hidden // heads)
    vocab = _int(config, "vocab_size")
    ffn = _int(config, "intermediate_size", "ffn_dim", "n_inner", default=4 * hidden)
    # a zero here was a ZeroDivisionError traceback in the estimates
    _positive(num_key_value_heads=kv_heads, head_dim=head_dim, vocab_size=vocab)
    _positive(intermediate_size=ffn)
    tie = bool(config.get("tie_word_embeddings", False))

    experts = _int(config, "num_local_experts", "num_experts", "n_routed_experts", default=0)
    top_k = _int(config, "num_experts_per_tok", "moe_topk", "top_k", default=0)
    moe_ffn = _int(config, "moe_intermediate_size", default=ffn) if experts else None
    shared = _int(config, "n_shared_experts", default=0)
    shared_ffn = _int(config, "shared_expert_intermediate_size", default=0)
    if experts:
        dense_first = _int(config, "first_k_dense_replace", default=0)
        step = _int(config, "decoder_sparse_step", "moe_layer_freq", default=1) or 1
        mlp_only = set(config.get("mlp_only_layers") or [])
        moe_layer_ids = [
            i
            for i in range(layers)
            if i >= dense_first and i not in mlp_only and (i + 1) % step == 0
        ]
        moe_layers = len(moe_layer_ids)
    else:
        moe_layers = 0

    # attention
    kv_latent: int | None = None
    if config.get("kv_lora_rank"):
        kv_rank = _int(config, "kv_lora_rank")
        rope = _int(config, "qk_rope_head_dim")
        nope = _int(config, "qk_nope_head_dim")
        v_dim = _int(config, "v_head_dim")
        q_rank = config.get("q_lora_rank")
        q = (
            hidden * q_rank + q_rank * heads * (nope + rope)
            if isinstance(q_rank, int)
            else hidden * heads * (nope + rope)
        )
        attn = q + hidden * (kv_rank + rope) + kv_rank * heads * (nope + v_dim)
        attn += heads * v_dim * hidden
        kv_latent = kv_rank + rope
    else:
        attn = hidden * heads * head_dim * 2 + hidden * kv_heads * head_dim * 2
    dense_mlp = 3 * hidden * ffn
    expert_mlp = 3 * hidden * (moe_ffn or 0)
    per_moe_layer_shared = shared * expert_mlp + (3 * hidden * shared_ffn if shared_ffn else 0)
    router = hidden * experts
    norms = 2 * hidden
    dense_layers = layers - moe_layers
    expert_params = moe_layers * experts * expert_mlp
    body = layers * (attn + norms) + dense_layers * dense_mlp
    body += moe_layers * (per_moe_layer_shared + router) + expert_params
    embedding = vocab * hidden
    params = body + embedding + (0 if tie else embedding) + hidden

    window, sliding = _sliding(config, layers)
    quant = config.get("quantization_config")
    return ModelFacts(
        name=name,
        source=source,
        architecture=(config.get("architectures") or [config.get("model_type")])[0],
        layers=layers,
        hidden=hidden,
        ffn=ffn,
        attention_heads=heads,
        kv_heads=kv_heads,
        head_dim=head_dim,
        vocab=vocab,
        experts=experts or None,
        experts_per_token=top_k or None,
        moe_ffn=moe_ffn,
        shared_experts=shared,
        moe_layers=moe_layers,
        kv_latent_dim=kv_latent,
        sliding_window=window,
        sliding_layers=sliding,
        tie_embeddings=tie,
        dtype=config.get("torch_dtype") or config.get("dtype"),
        quantization=quant if isinstance(quant, dict) else None,
        params=params,
        expert_params=expert_params,
        embedding_params=embedding * (1 if tie else 2),
    )


def _sliding(config: dict[str, Any], layers: int) -> tuple[int | None, int]:
    """(window, layers that use it) from ``sliding_window`` with ``layer_types`` (gpt-oss,
    newer transformers), ``sliding_window_pattern`` (Gemma 3: every Nth layer global) or
    neither (every layer windowed, Mistral 7B v0.1); ``use_sliding_window: false`` (Qwen)
    or a null window means none."""
    window = config.get("sliding_window")
    if not isinstance(window, int) or window <= 0 or config.get("use_sliding_window") is False:
        return None, 0
    types = config.get("layer_types")
    if isinstance(types, list) and types:
        return window, sum(1 for t in types[:layers] if "sliding" in str(t))
    pattern = config.get("sliding_window_pattern")
    if isinstance(pattern, int) and pattern > 0:
        return window, layers - layers // pattern
    return window, layers


def quant_from_config(facts: ModelFacts) -> str | None:
    """The crossover quant name a checkpoint's quantization_config implies, if any."""
    q = facts.quantization
    if facts.gguf_file_type:
        return f"gguf-{facts.gguf_file_type.lower()}"
    if not q:
        return None
    method = str(q.get("quant_method", "")).lower()
    if method == "fp8":
        return "fp8-block" if q.get("weight_block_size") else "fp8"
    if method in ("awq", "gptq"):
        return f"int4-{method}"
    if method in ("modelopt", "compressed-tensors"):
        algo = str(q.get("quant_algo", "") or q.get("format", "")).lower()
        if "nvfp4" in algo or "fp4" in algo:
            return "nvfp4"
        if "fp8" in algo or "float" in algo:
            return "fp8"
    if method == "mxfp4":
        return "mxfp4"
    return None


def _gguf_value(field: Any) -> Any:
    try:
        return field.contents()
    except Exception:
        return None


def from_gguf(path: Path) -> ModelFacts:
    """Facts from a GGUF header: metadata keys plus exact tensor element and byte counts."""
    try:
        from gguf import GGUFReader
        from gguf.constants import LlamaFileType
    except ImportError as exc:  # pragma: no cover - gguf is a core dependency
        raise UsageError("reading GGUF needs the gguf package") from exc
    try:
        reader = GGUFReader(str(path), "r")
    except Exception as exc:
        raise UsageError(f"{path}: not a readable GGUF file ({exc})") from exc
    meta = {name: _gguf_value(field) for name, field in reader.fields.items()}
    arch = str(meta.get("general.architecture") or "llama")

    def key(suffix: str, default: int | None = None) -> int:
        value = meta.get(f"{arch}.{suffix}")
        if isinstance(value, list):  # per-layer arrays (e.g. head_count_kv in some models)
            value = max(value) if value else None
        if isinstance(value, int):
            return value
        if default is None:
            raise UsageError(f"{path}: GGUF lacks {arch}.{suffix}")
        return default

    hidden = key("embedding_length")
    heads = key("attention.head_count")
    tokens = meta.get("tokenizer.ggml.tokens")
    params = sum(int(t.n_elements) for t in reader.tensors)
    nbytes = sum(int(t.n_bytes) for t in reader.tensors)
    embed = next((t for t in reader.tensors if t.name == "token_embd.weight"), None)
    vocab = len(tokens) if isinstance(tokens, list) else 0
    if not vocab and embed is not None:
        vocab = int(max(int(x) for x in embed.shape))
    expert_params = sum(int(t.n_elements) for t in reader.tensors if "_exps." in t.name)
    expert_nbytes = sum(int(t.n_bytes) for t in reader.tensors if "_exps." in t.name)
    experts = key("expert_count", 0)
    file_type = meta.get("general.file_type")
    ftype = None
    if isinstance(file_type, int):
        try:
            ftype = LlamaFileType(file_type).name.removeprefix("MOSTLY_")
        except ValueError:
            ftype = None
    has_output = any(t.name == "output.weight" for t in reader.tensors)
    return ModelFacts(
        name=str(meta.get("general.name") or path.stem),
        source=str(path),
        architecture=arch,
        layers=key("block_count"),
        hidden=hidden,
        ffn=key("feed_forward_length", 4 * hidden),
        attention_heads=heads,
        kv_heads=key("attention.head_count_kv", heads),
        head_dim=key("attention.key_length", hidden // heads),
        vocab=vocab,
        experts=experts or None,
        experts_per_token=key("expert_used_count", 0) or None,
        moe_ffn=key("expert_feed_forward_length", 0) or None,
        moe_layers=key("block_count") if experts else 0,
        tie_embeddings=not has_output,
        dtype=None,
        params=params,
        expert_params=expert_params,
        embedding_params=vocab * hidden * (1 if not has_output else 2),
        weight_bytes=nbytes,
        expert_bytes=expert_nbytes if experts else None,
        gguf_file_type=ftype,
    )

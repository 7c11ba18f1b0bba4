"""An HF tokenizer built from a vocab-only GGUF, so transformers/vLLM and llama.cpp
tokenize identically.

transformers builds it (``AutoTokenizer.from_pretrained(dir, gguf_file=...)``); its
own GGUF reader is slow on big vocabularies and, in transformers 5, imports torch,
so when transformers' converter module is importable we feed it the tokenizer
key/values read by ``gguf_meta`` and skip the reader. The result is cached per
(vocab file, transformers version) under ``<cache>/tokenizers/`` and copied.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

from crossover.builds.cache import cache_subdir, file_lock
from crossover.errors import UsageError
from crossover.models.gguf_meta import read_gguf_metadata
from crossover.optional import import_transformers

# Bump when the way tokenizers are built changes, so cached ones are rebuilt.
_RECIPE = 5  # 5: byte-level BPE gets a byte-level decoder and no SentencePiece parts

_RENAMES = {
    "ggml.model": "tokenizer_type",
    "ggml.pre": "pre_tokenizer_type",
    "ggml.tokens": "tokens",
    "ggml.scores": "scores",
    "ggml.token_type": "token_type",
    "ggml.merges": "merges",
    "ggml.precompiled_charsmap": "precompiled_charsmap",
    "ggml.bos_token_id": "bos_token_id",
    "ggml.eos_token_id": "eos_token_id",
    "ggml.unknown_token_id": "unk_token_id",
    "ggml.padding_token_id": "pad_token_id",
    "ggml.add_space_prefix": "add_prefix_space",
}
_CONFIG_RENAMES = {
    "chat_template": "chat_template",
    "ggml.add_bos_token": "add_bos_token",
    "ggml.add_eos_token": "add_eos_token",
}
# llama.cpp adds BOS for these BPE pre-tokenizers unless the file says otherwise
# (src/llama-vocab.cpp, llama_vocab::impl::load); SentencePiece ("llama") always does.
_BOS_PRE = {
    "llama3",
    "llama-v3",
    "llama-bpe",
    "falcon3",
    "falcon-h1",
    "pixtral",
    "midm-2.0",
    "lfm2",
    "jina-v5-nano",
    "tekken",
}
_IGNORE_MERGES_PRE = _BOS_PRE  # the same list sets ignore_merges = true

# The pre-tokenizer regex per byte-level BPE pre type, as the pinned llama.cpp source
# quotes it from each model's own tokenizer.json (src/llama-vocab.cpp,
# LLAMA_VOCAB_PRE_TYPE_LLAMA3 and _QWEN2, "original regex"; llama.cpp runs an
# equivalent without the (?i:) group, which its regex engine lacks): set on every built
# tokenizer, whatever transformers' converter chose. transformers 5.17's (the H200's)
# gave Llama 3's vocabulary GPT-2's byte-level regex, which splits 19% of the
# vocabulary's own tokens ("_contract" -> "_", "contract"): vLLM's streamed text then
# re-tokenized to +25% (docs/results/h200/prefix/).
_LLAMA3_REGEX = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+"
    r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_QWEN2_REGEX = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+"
    r"|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_PRE_REGEX = {
    "llama3": _LLAMA3_REGEX,
    "llama-v3": _LLAMA3_REGEX,
    "llama-bpe": _LLAMA3_REGEX,
    "qwen2": _QWEN2_REGEX,
}
#: a built tokenizer must re-encode at least this share of a sample of its own
#: vocabulary's tokens to themselves (a right one: all of them; GPT-2's regex on Llama
#: 3's vocabulary: 81%)
ROUND_TRIP_MIN = 0.99
ROUND_TRIP_SAMPLE = 2000

_SPECIAL = {
    "bos_token": "bos_token_id",
    "eos_token": "eos_token_id",
    "unk_token": "unknown_token_id",
    "pad_token": "padding_token_id",
}


def _decode(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, list):
        return [_decode(v) for v in value]
    if hasattr(value, "tolist"):
        return value.tolist()
    return value


def llamacpp_adds_bos(values: dict[str, Any]) -> bool:
    """Whether llama.cpp adds BOS for this vocabulary (``values``: tokenizer.* without prefix)."""
    explicit = values.get("ggml.add_bos_token")
    if isinstance(explicit, bool):
        return explicit
    if values.get("ggml.model") == "llama":
        return True
    return values.get("ggml.model") == "gpt2" and values.get("ggml.pre") in _BOS_PRE


def _match_llamacpp(backend: Any, tok_dict: dict[str, Any], values: dict[str, Any]) -> None:
    """Make byte-level BPE act as llama.cpp's: whole-word lookup first, BOS when it adds one."""
    if tok_dict.get("tokenizer_type") != "gpt2":
        return
    from tokenizers import processors

    if values.get("ggml.pre") in _IGNORE_MERGES_PRE:
        model = backend.model
        if hasattr(model, "ignore_merges"):
            model.ignore_merges = True
            backend.model = model
    bos_id = values.get("ggml.bos_token_id")
    if llamacpp_adds_bos(values) and isinstance(bos_id, int):
        bos = tok_dict["tokens"][bos_id]
        template = processors.TemplateProcessing(
            single=f"{bos}:0 $A:0",
            pair=f"{bos}:0 $A:0 {bos}:1 $B:1",
            special_tokens=[(bos, bos_id)],
        )
        backend.post_processor = processors.Sequence(
            [processors.ByteLevel(trim_offsets=False), template]
        )


def _drop_extra_tokens(backend: Any, n_tokens: int) -> Any:
    """Remove added tokens past the vocabulary (the GPT-2 class adds ``<|endoftext|>``):
    an id the model's embedding lacks would crash an engine; llama.cpp has no such token."""
    from tokenizers import Tokenizer

    data = json.loads(backend.to_str())
    kept = [t for t in data.get("added_tokens") or [] if int(t["id"]) < n_tokens]
    if len(kept) == len(data.get("added_tokens") or []):
        return backend
    data["added_tokens"] = kept
    return Tokenizer.from_str(json.dumps(data))


def _gguf_converter() -> Any:
    """The transformers library's GGUF tokenizer converter, wherever this version keeps it: 5.24 in
    ``integrations.gguf.gguf_tokenizer_mapping``; 4.x and 5.17 (the H200's) in
    ``integrations.ggml``. Without it the build falls back to ``AutoTokenizer``, whose
    GGUF path in 5.17 imports torch and gives Llama 3's vocabulary GPT-2's regex."""
    import importlib

    for module in (
        "transformers.integrations.gguf.gguf_tokenizer_mapping",
        "transformers.integrations.ggml",
    ):
        try:
            found = getattr(importlib.import_module(module), "convert_gguf_tokenizer", None)
        except ImportError:
            continue
        if found is not None:
            return found
    return None


def _fast_build(vocab_path: Path, out_dir: Path) -> bool:
    """Build through transformers' GGUF converter with our reader; False if unavailable."""
    try:
        import_transformers()
        from transformers import PreTrainedTokenizerFast
    except ImportError:
        return False
    convert_gguf_tokenizer = _gguf_converter()
    if convert_gguf_tokenizer is None:
        return False
    meta = read_gguf_metadata(vocab_path)
    arch = (
        _decode(meta["general.architecture"].value) if "general.architecture" in meta else "llama"
    )
    values = {
        k[len("tokenizer.") :]: _decode(v.value)
        for k, v in meta.items()
        if k.startswith("tokenizer.")
    }
    tok_dict = {name: values[key] for key, name in _RENAMES.items() if key in values}
    config = {name: values[key] for key, name in _CONFIG_RENAMES.items() if key in values}
    if tok_dict.get("tokenizer_type") == "llama":
        config.setdefault("add_bos_token", True)
    for name, key in _SPECIAL.items():
        idx = values.get(f"ggml.{key}")
        config[name] = tok_dict["tokens"][idx] if isinstance(idx, int) else None
    backend, extra = convert_gguf_tokenizer(arch, tok_dict)
    backend = _drop_extra_tokens(backend, len(tok_dict["tokens"]))
    _match_llamacpp(backend, tok_dict, values)
    tokenizer_cls: Any = PreTrainedTokenizerFast  # untyped constructor in transformers
    # the converter's own keys win, as in transformers' GGUF path (5.17's repeats unk_token)
    tok = tokenizer_cls(tokenizer_object=backend, **{**config, **extra})
    tok.save_pretrained(str(out_dir))
    return True


def set_pre_tokenizer(data: dict[str, Any], pre: str | None) -> bool:
    """Give a byte-level BPE ``tokenizer.json`` (``data``, changed in place) llama.cpp's
    pre-tokenizer for ``pre``; False where ``pre`` is not in the table."""
    regex = _PRE_REGEX.get(pre or "")
    if regex is None or (data.get("model") or {}).get("type") != "BPE":
        return False
    data["pre_tokenizer"] = {
        "type": "Sequence",
        "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": regex}, "behavior": "Isolated", "invert": False},
            {
                "type": "ByteLevel",
                "add_prefix_space": False,
                "trim_offsets": True,
                "use_regex": False,
            },
        ],
    }
    return True


def set_byte_level_parts(data: dict[str, Any]) -> bool:
    """Give a byte-level BPE ``tokenizer.json`` (``data``, changed in place) the parts a
    byte-level vocabulary has, whatever the converter added: a ``ByteLevel`` decoder, no
    normalizer, no byte fallback. transformers 5.17 (the H200's) gave Llama 3's vocabulary
    SentencePiece's decoder (``Replace "▁"``, ``ByteFallback``, and a ``Strip`` of the
    first space), so a token such as " the" decoded to "the" and 45% of the vocabulary
    failed the round trip. True where anything changed."""
    model = data.get("model") or {}
    if model.get("type") != "BPE":
        return False
    before = json.dumps([data.get("decoder"), data.get("normalizer"), model], sort_keys=True)
    data["decoder"] = {
        "type": "ByteLevel",
        "add_prefix_space": True,
        "trim_offsets": True,
        "use_regex": True,
    }
    data["normalizer"] = None
    model["byte_fallback"] = False
    model["fuse_unk"] = False
    after = json.dumps([data.get("decoder"), data.get("normalizer"), model], sort_keys=True)
    return before != after


def round_trip_share(tokenizer_json: str, sample: int = ROUND_TRIP_SAMPLE) -> float:
    """The share of (a seeded sample of) the vocabulary's tokens that encode back to
    themselves alone; tokens decoding to part of a UTF-8 character are left out."""
    import random

    from tokenizers import Tokenizer

    tok = Tokenizer.from_str(tokenizer_json)
    special = {int(t["id"]) for t in json.loads(tokenizer_json).get("added_tokens") or []}
    ids = sorted(i for i in tok.get_vocab().values() if i not in special)
    picked = random.Random(0).sample(ids, min(sample, len(ids)))
    asked = agreed = 0
    for i in picked:
        text = tok.decode([i], skip_special_tokens=False)
        if not text or "\ufffd" in text:
            continue
        asked += 1
        agreed += tok.encode(text, add_special_tokens=False).ids == [i]
    return agreed / asked if asked else 1.0


def _fix_and_check(vocab_path: Path, out_dir: Path) -> None:
    """llama.cpp's pre-tokenizer on the built ``tokenizer.json``, then the round trip
    (byte-level BPE only: a SentencePiece token's leading "▁" decodes to a space that
    encodes differently alone, so its vocabularies do not round-trip token by token)."""
    file = out_dir / "tokenizer.json"
    meta = read_gguf_metadata(vocab_path)
    model = _decode(meta["tokenizer.ggml.model"].value) if "tokenizer.ggml.model" in meta else None
    if model != "gpt2":
        return
    pre = _decode(meta["tokenizer.ggml.pre"].value) if "tokenizer.ggml.pre" in meta else None
    data = json.loads(file.read_text())
    changed = set_byte_level_parts(data)
    if set_pre_tokenizer(data, pre) or changed:
        file.write_text(json.dumps(data, ensure_ascii=False))
    share = round_trip_share(file.read_text())
    if share < ROUND_TRIP_MIN:
        raise UsageError(
            f"the tokenizer built from {vocab_path.name} encodes only {share:.0%} of its own "
            f"tokens back to themselves (pre-tokenizer {pre!r} is not one crossover knows): "
            "prompt lengths would differ between engines"
        )


def _slow_build(vocab_path: Path, out_dir: Path) -> None:
    import_transformers()
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(vocab_path.parent), gguf_file=vocab_path.name)
    tok.save_pretrained(str(out_dir))


#: beside a cached tokenizer: the size of the file it was built from
SOURCE_FILE = "crossover-source.json"


def _source_size(cached: Path) -> int | None:
    """The size of the file a cached tokenizer was built from (None: not recorded, a
    tokenizer cached before it was, or none cached)."""
    try:
        size = json.loads((cached / SOURCE_FILE).read_text()).get("size")
    except (OSError, ValueError, AttributeError):
        return None
    return size if isinstance(size, int) else None


def build_hf_tokenizer(vocab_path: Path, dest: Path) -> None:
    """Write tokenizer files for ``vocab_path`` into ``dest`` (cached per transformers version)."""
    cached = cached_hf_tokenizer(vocab_path)
    dest.mkdir(parents=True, exist_ok=True)
    for f in cached.iterdir():
        if f.is_file() and f.name != SOURCE_FILE:
            shutil.copy2(f, dest / f.name)


def cached_hf_tokenizer(vocab_path: Path) -> Path:
    """The cached folder of tokenizer files for ``vocab_path`` (built on first use, per
    transformers version), holding ``tokenizer.json``."""
    try:
        transformers = import_transformers()
    except ImportError:
        raise UsageError(
            "the HF format needs transformers and tokenizers: pip install 'crossover[tokenizers]'"
        ) from None
    root = cache_subdir("tokenizers")
    tail = f"r{_RECIPE}-transformers-{transformers.__version__}"
    size = vocab_path.stat().st_size
    cached = root / f"{vocab_path.stem}-{tail}"
    # keyed by the file's name: another file of that name (two folders' model.gguf, say)
    # gets a folder of its own, told apart by its size, which the build records
    if _source_size(cached) not in (None, size):
        cached = root / f"{vocab_path.stem}-{size}-{tail}"
    with file_lock(root / f"{cached.name}.lock"):
        if not (cached / "tokenizer.json").is_file() or _source_size(cached) not in (None, size):
            staging = Path(tempfile.mkdtemp(dir=root, prefix=".build-"))
            try:
                if not _fast_build(vocab_path, staging):
                    _slow_build(vocab_path, staging)
                _fix_and_check(vocab_path, staging)
                (staging / SOURCE_FILE).write_text(json.dumps({"size": size}))
                if cached.exists():
                    shutil.rmtree(cached)
                staging.rename(cached)
            finally:
                shutil.rmtree(staging, ignore_errors=True)
    return cached

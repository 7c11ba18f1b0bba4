"""Prompts from files: JSONL (one ``{"prompt": ...}`` per line) or ShareGPT JSON.

Texts are trimmed or padded to the asked token count so the work stays matched.
Every malformed line is reported with its line number, as one clear error.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from crossover.errors import UsageError
from crossover.workload.prompts import Prompt, fit_to_tokens
from crossover.workload.tokenizers import Tokenizer

_TEXT_KEYS = ("prompt", "text", "input", "question")


def _read_jsonl(path: Path) -> list[str]:
    texts: list[str] = []
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                obj: Any = json.loads(line)
            except json.JSONDecodeError as exc:
                raise UsageError(f"{path}:{lineno}: not JSON ({exc.msg})") from None
            if isinstance(obj, str):
                texts.append(obj)
                continue
            if not isinstance(obj, dict):
                raise UsageError(f"{path}:{lineno}: expected an object with a 'prompt' field")
            for key in _TEXT_KEYS:
                if isinstance(obj.get(key), str):
                    texts.append(obj[key])
                    break
            else:
                raise UsageError(f"{path}:{lineno}: no string field among {', '.join(_TEXT_KEYS)}")
    return texts


def _read_sharegpt(path: Path, data: Any) -> list[str]:
    if not isinstance(data, list):
        raise UsageError(f"{path}: a ShareGPT file is a JSON list of conversations")
    texts: list[str] = []
    for i, conv in enumerate(data):
        turns = conv.get("conversations") if isinstance(conv, dict) else None
        if not isinstance(turns, list):
            raise UsageError(f"{path}: item {i} has no 'conversations' list")
        for turn in turns:
            if (
                isinstance(turn, dict)
                and turn.get("from") in ("human", "user")
                and isinstance(turn.get("value"), str)
            ):
                texts.append(turn["value"])
                break
    return texts


def read_texts(path: Path) -> list[str]:
    if not path.is_file():
        raise UsageError(f"prompt file {path} does not exist")
    try:
        if path.suffix == ".jsonl":
            texts = _read_jsonl(path)
        else:
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
            except json.JSONDecodeError as exc:
                raise UsageError(f"{path}: not JSON ({exc.msg} at line {exc.lineno})") from None
            texts = _read_sharegpt(path, data)
    except UnicodeDecodeError:
        raise UsageError(f"{path}: not UTF-8 text") from None
    texts = [t for t in texts if t.strip()]
    if not texts:
        raise UsageError(f"{path}: no prompts found")
    return texts


def dataset_prompts(
    path: Path,
    count: int,
    input_tokens: int | None,
    tokenizer: Tokenizer | None,
    seed: int = 0,
    first: int = 0,
) -> list[Prompt]:
    """``count`` prompts from the file (cycled if short), fitted to ``input_tokens``,
    ids ``first`` onwards."""
    texts = read_texts(path)
    if input_tokens is not None and tokenizer is None:
        raise UsageError(
            "--input-tokens with a prompt file needs a tokenizer (--tokenizer, or an engine "
            "with /tokenize) to trim or pad the prompts"
        )
    prompts = []
    for i in range(first, first + count):
        text = texts[i % len(texts)]
        if input_tokens is not None and tokenizer is not None:
            rng = random.Random(f"crossover:{seed}:{i}")
            prompts.append(
                Prompt(i, fit_to_tokens(text, input_tokens, tokenizer, rng), input_tokens)
            )
        else:
            n = len(tokenizer.encode(text)) if tokenizer is not None else None
            prompts.append(Prompt(i, text, n))
    return prompts

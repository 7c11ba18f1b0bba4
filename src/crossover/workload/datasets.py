"""Prompts from files: JSONL (one ``{"prompt": ...}`` per line) or ShareGPT JSON.

Texts are trimmed or padded to the asked token count so the work stays matched (or kept
as written: the dataset's own lengths, the same prompts to every engine). With output
lengths ``dataset:MAX`` each prompt also carries its reply's length: a ShareGPT
conversation's first assistant turn after the prompt (a JSONL line's ``reply``,
``response``, ``completion`` or ``output``), counted with the tokenizer and capped at
MAX, as ``vllm bench serve --dataset-name sharegpt`` takes its output lengths; a prompt
without a reply is left out. Every malformed line is reported with its line number, as
one clear error.
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
_REPLY_KEYS = ("reply", "response", "completion", "output")
#: one prompt of the file, and its reply (None: the file has none for it)
Conversation = tuple[str, str | None]


def _reply(obj: dict[str, Any]) -> str | None:
    for key in _REPLY_KEYS:
        if isinstance(obj.get(key), str):
            return str(obj[key])
    return None


def _read_jsonl(path: Path) -> list[Conversation]:
    texts: list[Conversation] = []
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                obj: Any = json.loads(line)
            except json.JSONDecodeError as exc:
                raise UsageError(f"{path}:{lineno}: not JSON ({exc.msg})") from None
            if isinstance(obj, str):
                texts.append((obj, None))
                continue
            if not isinstance(obj, dict):
                raise UsageError(f"{path}:{lineno}: expected an object with a 'prompt' field")
            for key in _TEXT_KEYS:
                if isinstance(obj.get(key), str):
                    texts.append((obj[key], _reply(obj)))
                    break
            else:
                raise UsageError(f"{path}:{lineno}: no string field among {', '.join(_TEXT_KEYS)}")
    return texts


def _said(turn: Any, who: tuple[str, ...]) -> str | None:
    if isinstance(turn, dict) and turn.get("from") in who and isinstance(turn.get("value"), str):
        return str(turn["value"])
    return None


def _read_sharegpt(path: Path, data: Any) -> list[Conversation]:
    if not isinstance(data, list):
        raise UsageError(f"{path}: a ShareGPT file is a JSON list of conversations")
    texts: list[Conversation] = []
    for i, conv in enumerate(data):
        turns = conv.get("conversations") if isinstance(conv, dict) else None
        if not isinstance(turns, list):
            raise UsageError(f"{path}: item {i} has no 'conversations' list")
        for k, turn in enumerate(turns):
            prompt = _said(turn, ("human", "user"))
            if prompt is not None:
                after = turns[k + 1] if k + 1 < len(turns) else None
                texts.append((prompt, _said(after, ("gpt", "assistant", "chatgpt", "bing"))))
                break
    return texts


def read_texts(path: Path) -> list[str]:
    """The file's prompts, in order."""
    return [t for t, _ in read_conversations(path)]


def read_conversations(path: Path) -> list[Conversation]:
    """The file's prompts, each with its reply where the file has one."""
    if not path.is_file():
        what = "is a folder, not a file" if path.is_dir() else "does not exist"
        raise UsageError(f"prompt file {path} {what}")
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
    texts = [(t, r) for t, r in texts if t.strip()]
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
    reply_cap: int | None = None,
) -> list[Prompt]:
    """``count`` prompts from the file (cycled if short), fitted to ``input_tokens``,
    ids ``first`` onwards; with ``reply_cap``, only the prompts with a non-empty reply,
    each asking for its reply's token count (at most ``reply_cap``)."""
    convs = read_conversations(path)
    if input_tokens is not None and tokenizer is None:
        raise UsageError(
            "--input-tokens with a prompt file needs a tokenizer (--tokenizer, or an engine "
            "with /tokenize) to trim or pad the prompts"
        )
    replies: list[int] = []
    if reply_cap is not None:
        if tokenizer is None:
            raise UsageError(
                "output lengths dataset:MAX count the replies with a tokenizer (--tokenizer, "
                "or an engine with /tokenize)"
            )
        kept = []
        for text, reply in convs:
            n = len(tokenizer.encode(reply)) if reply is not None and reply.strip() else 0
            if n:
                kept.append((text, reply))
                replies.append(min(n, reply_cap))
        if not kept:
            raise UsageError(f"{path}: no prompt has a reply to take its output length from")
        convs = kept
    prompts = []
    for i in range(first, first + count):
        text = convs[i % len(convs)][0]
        out = replies[i % len(convs)] if replies else None
        if input_tokens is not None and tokenizer is not None:
            rng = random.Random(f"crossover:{seed}:{i}")
            fitted = fit_to_tokens(text, input_tokens, tokenizer, rng)
            prompts.append(Prompt(i, fitted, input_tokens, output_tokens=out))
        else:
            counted = len(tokenizer.encode(text)) if tokenizer is not None else None
            prompts.append(Prompt(i, text, counted, output_tokens=out))
    return prompts

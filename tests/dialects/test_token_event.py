"""``token_event``, the lean transport's per-token shortcut, says exactly what
``OpenAIDialect.parse`` says for every event it takes, and declines the rest."""

from __future__ import annotations

import itertools
from typing import Any

from crossover.dialects.base import ChunkInfo
from crossover.dialects.openai import OpenAIDialect, token_event

CHOICES: list[Any] = [
    {"index": 0, "text": " tok", "logprobs": None, "finish_reason": None},
    {"index": 0, "text": " tok", "finish_reason": "length"},
    {"text": "x"},
    {"index": 0, "text": None, "finish_reason": 3},
    {"index": 0, "text": 5},
    {"index": 1, "text": "other"},
    {"index": False, "text": "b"},
    {"index": 0.0, "text": "f"},
    {"index": "0", "text": "s"},
    {"index": 0, "text": "lp", "logprobs": {"tokens": ["a", "b"]}},
    {"index": 0, "delta": {"content": "c"}, "finish_reason": None},
    {"index": 0, "delta": {"content": "c", "reasoning_content": "r", "reasoning": "r"}},
    {"index": 0, "delta": {"reasoning": "r2"}},
    {"index": 0, "delta": None, "message": {"content": "m"}},
    {"index": 0, "delta": "not a dict"},
    {"index": 0, "delta": {}},
    "not a dict",
]
EXTRAS: list[dict[str, Any]] = [
    {},
    {"crossover_emit_ns": 123},
    {"crossover_emit_ns": 5.0},
    {"crossover_emit_ns": "7"},
    {"usage": None},
    {"usage": {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}},
    {"timings": {"cache_n": 4}},
    {"timings": None},
]


def events() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for extra in EXTRAS:
        out.append({"choices": [], **extra})
        out.append({"choices": None, **extra})
        for a in CHOICES:
            out.append({"choices": [a], **extra})
        for a, b in itertools.product(CHOICES[:3], CHOICES[5:7]):
            out.append({"choices": [a, b], **extra})
    return out


def test_token_event_matches_parse() -> None:
    dialect = OpenAIDialect()
    taken = 0
    for endpoint in ("completions", "chat"):
        for ev in events():
            got = token_event(ev, endpoint == "chat")
            if got is None:
                continue
            taken += 1
            text, finish, emitted = got
            want = dialect.parse(ev, endpoint)
            assert want == ChunkInfo(text=text, finish_reason=finish, emitted_ns=emitted), ev
    assert taken > 50  # the shortcut is taken for the common shapes, not declined for all

"""Multi-turn sessions: conversations whose every turn carries the history, still matched.

A session of T turns is T requests: request ``i`` is turn ``i mod T`` of session ``i div
T``. Turn ``t``'s prompt is the session's history — for each earlier turn its user text and
a stand-in for the assistant's reply of exactly that turn's output length — then the new
user text of ``input_tokens`` (or a drawn length). The stand-in is synthetic text, not what
the engine answered: a history built from real replies would differ between engines, and
the work would no longer be matched; its length is the reply's, so the prompt grows as a
real conversation's does and a prefix cache can reuse the earlier turns.

Sessions start on a Poisson schedule (``rate_rps`` is sessions per second) and each turn
is sent ``think_s`` after the previous turn's last token (its scheduled time; a late send
shows in ``queue_ms``). The summary splits TTFT by turn (``RunSummary.turns``).
"""

from __future__ import annotations

import random
import re

from pydantic import BaseModel, Field

from crossover.words import plural
from crossover.workload.prompts import Prompt, fit_to_tokens, random_words
from crossover.workload.shape import LengthDist
from crossover.workload.tokenizers import Tokenizer


class Sessions(BaseModel):
    """``turns`` per session, ``think_s`` between a reply and the next turn."""

    model_config = {"extra": "forbid", "frozen": True}

    turns: int = Field(..., ge=1, le=1000)
    think_s: float = Field(0.0, ge=0.0, le=3600.0)

    def spec(self) -> str:
        # stored with each run as it is ("1 turns" too): shown() is how it reads
        return f"{self.turns} turns, think {self.think_s:g} s"

    def turn_of(self, index: int) -> int:
        return index % self.turns

    def session_of(self, index: int) -> int:
        return index // self.turns


def shown(spec: str) -> str:
    """A stored ``Sessions.spec()`` as it reads: ``1 turn, think 0 s`` for the ``1 turns``
    stored (runs already stored keep that form, so it is not changed there); text of
    another form as it is."""
    match = re.fullmatch(r"(\d+) turns(, think .*)", spec)
    return spec if match is None else plural(int(match[1]), "turn") + match[2]


def _text(seed: int, what: str, session: int, turn: int, n: int, tok: Tokenizer | None) -> str:
    rng = random.Random(f"crossover-session:{seed}:{what}:{session}:{turn}")
    text = random_words(rng, n)
    return fit_to_tokens(text, n, tok, rng) if tok is not None else text


def session_prompts(
    sessions: Sessions,
    count: int,
    input_tokens: int,
    output_tokens: int,
    seed: int,
    tokenizer: Tokenizer | None,
    first: int = 0,
    *,
    input_lengths: LengthDist | None = None,
    output_lengths: LengthDist | None = None,
) -> list[Prompt]:
    """Prompts ``first`` .. ``first + count - 1``: each turn with its session's history."""
    out = []
    for i in range(first, first + count):
        s, t = sessions.session_of(i), sessions.turn_of(i)
        parts: list[tuple[str, str]] = []
        total = 0
        for k in range(t + 1):
            j = s * sessions.turns + k  # the request index of turn k
            n_in = input_lengths.draw(seed, "input", j) if input_lengths else input_tokens
            parts.append(("user", _text(seed, "user", s, k, n_in, tokenizer)))
            total += n_in
            if k < t:
                n_out = output_lengths.draw(seed, "output", j) if output_lengths else output_tokens
                parts.append(("assistant", _text(seed, "reply", s, k, n_out, tokenizer)))
                total += n_out
        text = "\n".join(part for _, part in parts)
        n_out_i = output_lengths.draw(seed, "output", i) if output_lengths else None
        # each part is its own exact length, so the messages hold ``total`` tokens of
        # content as the flattened text does (a chat template adds its own around them)
        messages = tuple(parts)
        if tokenizer is None:
            out.append(Prompt(i, text, None, n_out_i, messages=messages))
            continue
        rng = random.Random(f"crossover:{seed}:{i}")
        fitted = fit_to_tokens(text, total, tokenizer, rng)
        out.append(Prompt(i, fitted, total, n_out_i, messages=messages))
    return out

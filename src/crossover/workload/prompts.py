"""Prompts with exact input token counts, deterministic by seed.

Each prompt starts differently (its own random words) so no engine gets a
prefix-cache hit that another does not. Texts are built from common words, then
cut to exactly ``P`` tokens with the tokenizer and checked by re-encoding.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from crossover.errors import UsageError
from crossover.workload.shape import LengthDist, SharedPrefix
from crossover.workload.tokenizers import Tokenizer

_WORDS = (
    "the of and to in is was for that on as with by he at from his it an were are "
    "which this also be has had or one first their its new after but who not they "
    "have her she two been other when there all during into school time may years "
    "more most only over city some world would where later up such used many can "
    "state about national out known university united then made between through "
    "both under long well part people year three called while being american film "
    "since him season team however number early war series day history government "
    "film music game high until work before along several life since around area "
    "family found home second small four north south east west water river light "
    "system power group house order point place right left large field public case"
).split()


@dataclass(frozen=True, slots=True)
class Prompt:
    id: int
    text: str
    #: token count by the tokenizer (without special tokens); None when uncounted
    tokens: int | None
    #: this request's exact output length when the workload draws one per request
    #: (``WorkloadShape``); None: the run's ``output_tokens``
    output_tokens: int | None = None
    #: the shared prefix it starts with (``SharedPrefix``); None: none
    prefix_id: int | None = None
    #: the prompt as chat turns, ``(role, content)`` in order (a session's history: user,
    #: assistant, ..., user), sent as such on a chat endpoint; ``text`` is their flattened
    #: form, for a completions endpoint. None: one user message of ``text``
    messages: tuple[tuple[str, str], ...] | None = None


def prompt_row(p: Prompt) -> dict[str, Any]:
    """``p`` as plain data (JSON, Ray messages), every field kept: a prompt that crosses a
    process or is stored for a resume must keep its own output length and messages."""
    return {
        "id": p.id,
        "text": p.text,
        "tokens": p.tokens,
        "output_tokens": p.output_tokens,
        "prefix_id": p.prefix_id,
        "messages": [list(m) for m in p.messages] if p.messages is not None else None,
    }


def prompt_of_row(row: dict[str, Any]) -> Prompt:
    """``prompt_row`` read back (a row stored before the later fields has them None)."""
    messages = row.get("messages")
    return Prompt(
        row["id"],
        row["text"],
        row["tokens"],
        row.get("output_tokens"),
        row.get("prefix_id"),
        tuple((str(r), str(c)) for r, c in messages) if messages is not None else None,
    )


def random_words(rng: random.Random, n: int) -> str:
    """``n`` words drawn by ``rng`` (about ``n`` tokens: ``fit_to_tokens`` makes it exact);
    the text every synthetic prompt, prefix, session turn and trace block is made of."""
    return " ".join(rng.choice(_WORDS) for _ in range(n))


def fit_to_tokens(text: str, n: int, tok: Tokenizer, rng: random.Random) -> str:
    """Trim or pad ``text`` to exactly ``n`` tokens (as re-encoded)."""
    ids = tok.encode(text)
    guard = 0
    while len(ids) < n:
        text = text + " " + random_words(rng, max(8, (n - len(ids)) * 2))
        ids = tok.encode(text)
        guard += 1
        if guard > 50:
            raise UsageError(f"could not pad a prompt to {n} tokens")
    want = n
    for _ in range(20):
        cut = tok.decode(ids[:want])
        got = len(tok.encode(cut))
        if got == n:
            return cut
        want += n - got
        if want <= 0 or want > len(ids):
            break
    raise UsageError(
        f"could not cut a prompt to exactly {n} tokens with {tok.name} "
        "(decode/encode does not round-trip)"
    )


def synthetic_prompts(
    count: int,
    input_tokens: int,
    seed: int = 0,
    tokenizer: Tokenizer | None = None,
    first: int = 0,
    *,
    input_lengths: LengthDist | None = None,
    output_lengths: LengthDist | None = None,
    shared_prefix: SharedPrefix | None = None,
) -> list[Prompt]:
    """``count`` distinct prompts of ``input_tokens`` tokens each, ids ``first`` onwards
    (prompt ``i`` is the same whatever ``first`` and ``count`` were asked).

    ``input_lengths`` / ``output_lengths`` draw each prompt's own lengths instead
    (``crossover.workload.shape``); ``shared_prefix`` starts each prompt with one of P shared
    prefixes of L tokens, the drawn input length then being the part after it.

    Without a tokenizer the length is approximate (one common word ~ one token)
    and ``Prompt.tokens`` is None: verification then relies on the server's usage.
    """
    if input_tokens < 1:
        raise UsageError("--input-tokens must be at least 1")
    prefixes: dict[int, str] = {}

    def prefix_text(j: int) -> str:
        assert shared_prefix is not None
        if j not in prefixes:
            rng = random.Random(f"crossover-prefix-text:{seed}:{j}")
            text = random_words(rng, shared_prefix.tokens)
            if tokenizer is not None:
                text = fit_to_tokens(text, shared_prefix.tokens, tokenizer, rng)
            prefixes[j] = text
        return prefixes[j]

    prompts = []
    for i in range(first, first + count):
        rng = random.Random(f"crossover:{seed}:{i}")
        n_in = input_lengths.draw(seed, "input", i) if input_lengths else input_tokens
        n_out = output_lengths.draw(seed, "output", i) if output_lengths else None
        head, pid = "", None
        if shared_prefix is not None:
            pid = shared_prefix.prefix_of(seed, i)
            head = prefix_text(pid) + " "
        text = head + random_words(rng, n_in)
        total = n_in + (shared_prefix.tokens if shared_prefix else 0)
        if tokenizer is None:
            prompts.append(Prompt(i, text, None, n_out, pid))
            continue
        fitted = fit_to_tokens(text, total, tokenizer, rng)
        if head and not fitted.startswith(head.rstrip()):
            raise UsageError(
                f"prompt {i}: fitting it to {total} tokens changed its shared prefix "
                f"({tokenizer.name} does not round-trip the prefix text)"
            )
        prompts.append(Prompt(i, fitted, total, n_out, pid))
    return prompts

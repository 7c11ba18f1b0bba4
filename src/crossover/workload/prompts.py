"""Prompts with exact input token counts, deterministic by seed.

Each prompt starts differently (its own random words) so no engine gets a
prefix-cache hit that another does not. Texts are built from common words, then
cut to exactly ``P`` tokens with the tokenizer and checked by re-encoding.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from crossover.errors import UsageError
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


def _words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(n))


def fit_to_tokens(text: str, n: int, tok: Tokenizer, rng: random.Random) -> str:
    """Trim or pad ``text`` to exactly ``n`` tokens (as re-encoded)."""
    ids = tok.encode(text)
    guard = 0
    while len(ids) < n:
        text = text + " " + _words(rng, max(8, (n - len(ids)) * 2))
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
) -> list[Prompt]:
    """``count`` distinct prompts of ``input_tokens`` tokens each, ids ``first`` onwards
    (prompt ``i`` is the same whatever ``first`` and ``count`` were asked).

    Without a tokenizer the length is approximate (one common word ~ one token)
    and ``Prompt.tokens`` is None: verification then relies on the server's usage.
    """
    if input_tokens < 1:
        raise UsageError("--input-tokens must be at least 1")
    prompts = []
    for i in range(first, first + count):
        rng = random.Random(f"crossover:{seed}:{i}")
        text = _words(rng, input_tokens)
        if tokenizer is None:
            prompts.append(Prompt(i, text, None))
        else:
            prompts.append(
                Prompt(i, fit_to_tokens(text, input_tokens, tokenizer, rng), input_tokens)
            )
    return prompts

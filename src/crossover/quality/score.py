"""Scoring one position, one prompt and a whole candidate; pure functions.

At a scored position both engines saw the same token context, so their next-token
distributions are comparable: **top-1 agreement** (the candidate's greedy token is the
reference's) and **KL(reference || candidate)** in nats over what the APIs return, the
top-K tokens with their log-probabilities. Each side's probabilities are known for its
own top-K; the support is the union of both top-K sets plus one "rest" bucket, and a
side's mass outside its top-K (1 - the sum it gave) is spread evenly over the tokens of
the union it did not list and the bucket. With K = 5-20 and the sharp distributions of
greedy decoding the top-K carry nearly all the mass; the figure is an estimate of the
full-vocabulary KL, exact when both sides put all their mass in the union.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

#: floor on a probability inside a log (a side that gives a token ~nothing)
P_FLOOR = 1e-10


@dataclass(frozen=True, slots=True)
class Position:
    """One generated position as an API reported it."""

    token: int | str  # the chosen token: id where the engine gives ids, else its text
    logprob: float | None
    top: dict[int | str, float]  # top-K: token -> logprob (empty where not given)


def _spread(top: dict[int | str, float], support: set[int | str]) -> dict[int | str, float]:
    """Probabilities over ``support`` + the rest bucket (key ``None`` is not a token)."""
    known = {t: math.exp(lp) for t, lp in top.items()}
    mass = sum(known.values())
    rest = max(0.0, 1.0 - mass)
    unknown = [t for t in support if t not in known]
    share = rest / (len(unknown) + 1)
    out: dict[int | str, float] = {t: known.get(t, share) for t in support}
    out["\x00rest"] = share
    return out


def kl_top(ref: dict[int | str, float], cand: dict[int | str, float]) -> float | None:
    """KL(ref || cand) in nats over both top-K sets and a rest bucket; None without data."""
    if not ref or not cand:
        return None
    support = set(ref) | set(cand)
    p = _spread(ref, support)
    q = _spread(cand, support)
    total = 0.0
    for t, pt in p.items():
        if pt <= 0.0:
            continue
        total += pt * (math.log(max(pt, P_FLOOR)) - math.log(max(q[t], P_FLOOR)))
    return max(total, 0.0)


@dataclass
class PromptScore:
    """What one prompt contributed."""

    scored: int = 0  # positions compared (same context on both sides)
    agreed: int = 0  # of those, where the candidate's greedy token was the reference's
    kl_sum: float = 0.0
    kl_n: int = 0  # positions with a KL (both sides gave top-K)
    first_divergence: int | None = None  # position of the first disagreement, if any
    reanchors: int = 0  # requests restarted from the reference's context

    def add(self, pos: int, ref: Position, cand: Position) -> bool:
        """Score one position; True when the greedy tokens agree."""
        self.scored += 1
        same = ref.token == cand.token
        if same:
            self.agreed += 1
        elif self.first_divergence is None:
            self.first_divergence = pos
        kl = kl_top(ref.top, cand.top)
        if kl is not None:
            self.kl_sum += kl
            self.kl_n += 1
        return same


def compare_run(
    scores: PromptScore, start: int, ref: Sequence[Position], cand: Sequence[Position]
) -> int | None:
    """Score ``cand`` (generated from the reference's context at ``start``) against the
    reference from ``start`` on; the position where they diverged (its context was still
    the same: it is scored), or None if they agreed throughout ``cand``."""
    for j, c in enumerate(cand):
        pos = start + j
        if pos >= len(ref):
            return None
        if not scores.add(pos, ref[pos], c):
            return pos
    return None


@dataclass(frozen=True)
class Interval:
    low: float
    high: float


def bootstrap(
    prompts: Sequence[PromptScore],
    stat: str,
    resamples: int = 2000,
    seed: int = 0,
    level: float = 0.95,
) -> Interval | None:
    """Percentile bootstrap over prompts of ``agreement`` or ``kl`` (token-weighted)."""
    if not prompts:
        return None
    rng = random.Random(f"quality:{seed}:{stat}")
    n = len(prompts)
    values = []
    for _ in range(resamples):
        sample = [prompts[rng.randrange(n)] for _ in range(n)]
        v = _stat(sample, stat)
        if v is not None:
            values.append(v)
    if not values:
        return None
    values.sort()
    lo = values[int((1 - level) / 2 * (len(values) - 1))]
    hi = values[int((1 + level) / 2 * (len(values) - 1))]
    return Interval(lo, hi)


def _stat(prompts: Sequence[PromptScore], stat: str) -> float | None:
    if stat == "agreement":
        scored = sum(p.scored for p in prompts)
        return sum(p.agreed for p in prompts) / scored if scored else None
    n = sum(p.kl_n for p in prompts)
    return sum(p.kl_sum for p in prompts) / n if n else None


def agreement(prompts: Sequence[PromptScore]) -> float | None:
    return _stat(prompts, "agreement")


def mean_kl(prompts: Sequence[PromptScore]) -> float | None:
    return _stat(prompts, "kl")

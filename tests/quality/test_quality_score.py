"""KL over top-K sets, position scoring with re-anchoring, the bootstrap."""

from __future__ import annotations

import math

import pytest

from crossover.quality.score import (
    Position,
    PromptScore,
    agreement,
    bootstrap,
    compare_run,
    kl_top,
    mean_kl,
)


def lp(**probs: float) -> dict[int | str, float]:
    return {k: math.log(v) for k, v in probs.items()}


def test_kl_is_zero_for_the_same_distribution_and_grows_with_the_difference() -> None:
    p = lp(a=0.7, b=0.2, c=0.1)
    assert kl_top(p, p) == pytest.approx(0.0, abs=1e-12)
    near = kl_top(p, lp(a=0.6, b=0.3, c=0.1))
    far = kl_top(p, lp(a=0.1, b=0.2, c=0.7))
    assert near is not None and far is not None
    assert 0 < near < far
    exact = 0.7 * math.log(0.7 / 0.6) + 0.2 * math.log(0.2 / 0.3)
    assert near == pytest.approx(exact, rel=1e-9)  # all mass in the union: exact


def test_kl_spreads_a_side_s_missing_mass_over_tokens_it_did_not_list() -> None:
    # the candidate did not list "b": it gets the candidate's rest (0.1) shared with the
    # rest bucket, 0.05; the reference's rest is 0
    got = kl_top(lp(a=0.8, b=0.2), lp(a=0.9))
    want = 0.8 * math.log(0.8 / 0.9) + 0.2 * math.log(0.2 / 0.05)
    assert got == pytest.approx(want, rel=1e-6)
    assert kl_top({}, lp(a=1.0)) is None


def pos(tok: int, **probs: float) -> Position:
    return Position(tok, None, {int(k[1:]): math.log(v) for k, v in probs.items()})


def test_compare_run_scores_up_to_and_including_the_divergence() -> None:
    ref = [pos(1, t1=0.9), pos(2, t2=0.9), pos(3, t3=0.9), pos(4, t4=0.9)]
    s = PromptScore()
    assert compare_run(s, 0, ref, [pos(1, t1=0.9), pos(2, t2=0.9), pos(9, t9=0.9)]) == 2
    assert (s.scored, s.agreed, s.first_divergence) == (3, 2, 2)
    # re-anchored after the divergence: continues from position 3, agrees to the end
    assert compare_run(s, 3, ref, [pos(4, t4=0.9), pos(5, t5=0.9)]) is None
    assert (s.scored, s.agreed, s.first_divergence) == (4, 3, 2)
    assert agreement([s]) == pytest.approx(0.75)
    kl = mean_kl([s])
    assert kl is not None and kl > 0  # the divergent position has disjoint top tokens


def test_bootstrap_interval_holds_the_estimate_and_is_reproducible() -> None:
    scores = []
    for i in range(40):
        s = PromptScore(scored=100, agreed=90 + (i % 10), kl_sum=float(i % 5), kl_n=100)
        scores.append(s)
    iv = bootstrap(scores, "agreement")
    est = agreement(scores)
    assert iv is not None and est is not None
    assert iv.low <= est <= iv.high and iv.low < iv.high
    assert bootstrap(scores, "agreement") == iv  # seeded
    assert bootstrap([], "kl") is None

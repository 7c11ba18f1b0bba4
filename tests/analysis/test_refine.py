from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from crossover.analysis import METRICS, Finding, SweepFile, analyze_sweep, refine_until
from crossover.analysis.refine import bisect_level, propose_refinement

from .synthetic_servers import TRUE_CROSSOVER, synthetic_runs

TOTAL = [METRICS[0]]
GRID = [1, 2, 4, 8, 16, 32, 64, 128, 256]
NOISE = 0.001  # low enough that the interval is limited by the levels, not the noise


def _analyze(runs: list[dict[str, Any]]) -> list[Finding]:
    return analyze_sweep(SweepFile.model_validate({"runs": runs}), metrics=TOTAL)


def _crossover(findings: Sequence[Finding]) -> Finding:
    (x,) = [f for f in findings if f.kind == "crossover"]
    return x


def test_bisect_level() -> None:
    assert bisect_level(16, 32) == 23
    assert bisect_level(1, 3) == 2
    assert bisect_level(1, 2) is None
    assert bisect_level(8, 9) is None
    assert bisect_level(1, 256) == 16


def test_propose_bisects_around_the_crossover_and_respects_budget() -> None:
    x = Finding(
        "crossover",
        "m",
        "A",
        "B",
        (1, 4, 16),
        below="A",
        above="B",
        concurrency=6.0,
        interval=(3.0, 12.0),
        bracket=(4, 16),
    )
    assert propose_refinement([x], [1, 4, 16]) == [8]
    assert propose_refinement([x], [1, 4, 16], target_rel_width=2.0) == []
    assert propose_refinement([x], [1, 4, 16], budget=0) == []
    assert propose_refinement([x], [1, 4, 16], metrics={"other"}) == []
    inc = Finding("inconclusive", "m", "A", "B", (1, 4), bracket=(1, 4))
    assert propose_refinement([inc], [1, 4]) == [2]
    assert propose_refinement([inc], [1, 4], include_inconclusive=False) == []
    # adjacent integers cannot be split: nothing left to do
    tight = Finding(
        "crossover",
        "m",
        "A",
        "B",
        (2, 3),
        below="A",
        above="B",
        concurrency=2.5,
        interval=(2.0, 3.0),
        bracket=(2, 3),
    )
    assert propose_refinement([tight], [2, 3], target_rel_width=0.01) == []


def _refine(seed: int, target: float) -> tuple[Finding, list[int]]:
    rng = np.random.default_rng(seed)
    runs: list[dict[str, Any]] = []

    def measure(new: list[int]) -> list[Finding]:
        runs.extend(synthetic_runs(new, rng, noise=NOISE, repeats=3))
        return _analyze(runs)

    findings, levels = refine_until(measure, GRID, target_rel_width=target, budget=16)
    return _crossover(findings), levels


@pytest.mark.parametrize("seed", range(6))
def test_refinement_contains_truth_and_beats_a_fine_grid(seed: int) -> None:
    x, levels = _refine(seed, target=0.06)
    assert x.interval is not None
    assert x.rel_width is not None
    assert x.rel_width <= 0.06
    assert x.interval[0] <= TRUE_CROSSOVER <= x.interval[1]
    # the coarse grid alone is not narrow enough
    coarse = _crossover(
        _analyze(synthetic_runs(GRID, np.random.default_rng(seed), noise=NOISE, repeats=3))
    )
    assert coarse.rel_width is not None
    assert coarse.rel_width > x.rel_width
    # a geometric grid, made finer until it is as narrow, needs more levels
    for k in range(2, 12):
        grid = sorted({round(2 ** (i / k)) for i in range(8 * k + 1)})
        fine = _crossover(
            _analyze(synthetic_runs(grid, np.random.default_rng(seed), noise=NOISE, repeats=3))
        )
        assert fine.rel_width is not None
        if fine.rel_width <= x.rel_width:
            break
    assert len(levels) < len(grid)

"""``crossover compare`` of two sweeps pools each side's repeat noise over its levels (per
target and metric): two repeats a level give Welch's interval about one degree of
freedom, too few to call even a sixfold change; a level reads the larger of the pooled
spread and its own, with the pooled degrees of freedom, a level measured once the larger
of the pooled spread and the other side's own spread at that level (the assumed 3% where
its side has nothing pooled), and the note says so."""

from __future__ import annotations

import math
import statistics
from pathlib import Path

import pytest

from crossover.analysis import SweepFile
from crossover.analysis.stats import ratio_interval, t_ppf
from crossover.report.compare import compare_sweeps
from crossover.report.load import load_sweep

from .test_compare_noise import _row, _sweep

ROOT = Path(__file__).resolve().parents[2]
DECIDED = ROOT / "docs/results/h100/moe-open-decide-freeze"
SLOTS = ROOT / "docs/results/h100/sglang-slots-open"


def test_sglang_ttft_p99_at_20_requests_per_s_is_worse() -> None:
    """SGLang's TTFT p99 at 20 requests/s went from 1,004 / 1,131 ms to 4,189 / 8,733 ms
    (6.05x): per-level Welch read [0.112x, 326.592x], no significant change. Pooled,
    before over its 6 levels (6 df), after over its 2 (2 df; its own spread at 20, the
    larger, is what it reads), the interval is [1.316x, 27.829x]."""
    cmp = compare_sweeps(
        load_sweep(DECIDED), load_sweep(SLOTS), "before", "after", pairs=[("sglang", "sglang-512")]
    )
    row = _row(cmp, "sglang->sglang-512 rate=20", "TTFT p99 ms")
    assert row.change == "worse"
    lo, hi = row.ratio_interval
    assert 1.0 < lo < row.ratio < hi
    assert row.cells()[4:] == ("6.051x", "[1.316x, 27.829x]", "worse")
    # throughput at 16 requests/s was level (0.990x); both kept up there, a tie. Its
    # interval pools without the short level 20 (ramp-up and drain): before over 5 levels,
    # after (16 alone left) over none, Welch
    flat = _row(cmp, "sglang->sglang-512 rate=16", "output tok/s")
    assert flat.change == "no significant change"
    assert flat.cells()[4:] == (
        "0.990x",
        "[0.883x, 1.110x]",
        "no significant change (both kept up)",
    )
    assert flat.before_noise is not None and flat.before_noise.levels == 5
    assert flat.after_noise is not None and not flat.after_noise.pools
    assert (
        "before: up to 2 repeats per level: intervals from their spread pooled over 5-6 levels "
        "(df 5-6, per metric); repeats measured back to back share an engine start"
    ) in "\n".join(cmp.notes)
    assert any(
        n.startswith(
            "after: up to 2 repeats per level: intervals from their spread pooled over 2 "
            "levels (df 2, per metric);"
        )
        for n in cmp.notes
    ), cmp.notes


# TTFT p50: a 2% spread of two repeats at every level; after is 5% slower at c=4
SPREAD = 1.02
LEVELS = (1, 2, 4, 8, 16)


def _pair(
    before_at_4: tuple[float, float], after_at_4: tuple[float, float]
) -> tuple[SweepFile, SweepFile]:
    before = {c: (20.0 * c, 20.0 * c * SPREAD) for c in LEVELS}
    after = dict(before)
    before[4], after[4] = before_at_4, after_at_4
    return _sweep(before), _sweep(after)


def test_pooled_noise_calls_what_one_level_alone_cannot() -> None:
    before, after = _pair((80.0, 80.0 * SPREAD), (84.0, 84.0 * SPREAD))
    row = _row(compare_sweeps(before, after), "A c=4", "TTFT p50 ms")
    # per-level Welch: 2 df, t = 4.30, the 5% change is inside its interval
    plain = ratio_interval(row.after_values, row.before_values)
    assert plain is not None and not plain.significant
    # pooled over 5 levels a side (5 df each): t = 2.23
    assert row.change == "worse"
    lo, _ = row.ratio_interval
    assert lo > 1.0
    # the levels where nothing changed stay level
    assert _row(compare_sweeps(before, after), "A c=8", "TTFT p50 ms").change == (
        "no significant change"
    )


def test_a_level_noisier_than_the_pool_reads_its_own_spread() -> None:
    """At c=4 both sides spread by 20% (the others by 2%) and after is 25% slower: the
    pooled variance alone would call it, the level's own spread (the larger) does not."""
    before, after = _pair((80.0, 96.0), (100.0, 120.0))
    cmp = compare_sweeps(before, after)
    row = _row(cmp, "A c=4", "TTFT p50 ms")
    assert row.change == "no significant change"
    lo, hi = row.ratio_interval
    assert lo < 1.0 < hi
    # what the pool alone would have said: each side's pooled log variance over 2 repeats,
    # on 5 + 5 df
    noise_b, noise_a = row.before_noise, row.after_noise
    assert noise_b is not None and noise_a is not None and noise_b.df == noise_a.df == 5
    half = t_ppf(0.975, 10) * math.sqrt(noise_b.var / 2 + noise_a.var / 2)
    assert math.log(row.ratio) > half


GRID = ROOT / "docs/results/h100/moe-warm-grid"
DECIDE = ROOT / "docs/results/h100/moe-warm-decide"


def test_a_level_the_decision_measured_once_reads_the_grids_spread_there() -> None:
    """docs/results/h100/reproducibility.md: the decision measured SGLang at c=256 once.
    That run has no spread of its own, and cannot show that its level is noisier than
    SGLang's others: it reads the larger of the spread of SGLang's TTFT p50 pooled over the
    decision's 7 levels with two repeats (7 df) and the grid's own two repeats at 256
    (708 and 527 ms, 21%, the larger), on the decision's 7 df; the grid's two repeats read
    their own spread on the grid's 9. The decision's pool alone read [1.084x, 2.254x] and
    called it worse; the assumed 3% widened to the grid's own t (1 df) read
    [0.244x, 10.014x]."""
    cmp = compare_sweeps(load_sweep(GRID), load_sweep(DECIDE), "grid", "decision")
    row = _row(cmp, "sglang c=256", "TTFT p50 ms")
    assert len(row.before_values) == 2 and len(row.after_values) == 1
    floor = ratio_interval(row.after_values, row.before_values)
    assert floor is not None and floor.method == "noise_floor"
    assert (f"{floor.lo:.3f}", f"{floor.hi:.3f}") == ("0.244", "10.014")
    assert row.cells()[4:] == ("1.563x", "[0.902x, 2.709x]", "no significant change")
    assert row.pooled_sides() == (True, True) and row.lone_reads() == (None, "pooled")
    # by hand: the run's variance is the grid's own at 256 (above the decision's pool)
    # over 1 run, the grid's the same over its 2
    after, before = row.after_noise, row.before_noise
    assert after is not None and (after.levels, after.df) == (7, 7)
    assert before is not None and (before.levels, before.df) == (9, 9)
    own = statistics.variance([math.log(v) for v in row.before_values])
    assert own > before.var and own > after.var  # 708 and 527 ms: louder than either pool

    def interval(va: float, vb: float) -> tuple[float, float]:
        df = (va + vb) ** 2 / (va * va / 7 + vb * vb / 9)
        half = t_ppf(0.975, df) * math.sqrt(va + vb)
        return row.ratio * math.exp(-half), row.ratio * math.exp(half)

    lo, hi = row.ratio_interval
    assert (lo, hi) == pytest.approx(interval(own, own / 2))
    # the decision's pool alone on the lone run: the interval that called it worse
    alone = interval(after.var, own / 2)
    assert (f"{alone[0]:.3f}", f"{alone[1]:.3f}") == ("1.084", "2.254")
    # SGLang's throughput at 256: the grid's two repeats agree to 0.1%, under the
    # decision's pooled 0.25%, so the run reads the pool and the row is called
    flat = _row(cmp, "sglang c=256", "total tok/s")
    assert flat.after_noise is not None and flat.lone_reads() == (None, "pooled")
    assert statistics.variance([math.log(v) for v in flat.before_values]) < flat.after_noise.var
    assert flat.cells()[4:] == ("0.976x", "[0.970x, 0.982x]", "worse")
    # llama.cpp at c=16, the other level measured once: throughput 1.082x, the grid's two
    # repeats there (two engine starts) 4.7% apart, above the decision's pooled 0.6%
    once = _row(cmp, "llamacpp-q8 c=16", "total tok/s")
    assert once.after_noise is not None and once.lone_reads() == (None, "pooled")
    assert statistics.variance([math.log(v) for v in once.before_values]) > once.after_noise.var
    assert once.cells()[4:] == ("1.082x", "[0.941x, 1.243x]", "no significant change")
    assert (
        "decision: up to 2 repeats per level: intervals from their spread pooled over 3-8 "
        "levels (df 3-8, per target and metric; 2 levels measured once read it, or the other "
        "side's spread at the level where larger); repeats measured back to back share an "
        "engine start"
    ) in "\n".join(cmp.notes)
    assert not any("no spread of its own" in n for n in cmp.notes)


def test_a_level_measured_once_with_nothing_to_pool_reads_the_floor() -> None:
    """After has two repeats at one level only and one run at c=4 (9% slower): its noise does not pool,
    so the run at c=4 reads the assumed 3% noise (``ratio_interval`` exactly), and its note
    says so. With a second level of two repeats it pools, and the run reads that."""
    before = _sweep({c: (20.0 * c, 20.0 * c * SPREAD) for c in (1, 2, 4)})
    after = _sweep({1: (20.0, 20.0 * SPREAD), 4: (88.0,)})
    cmp = compare_sweeps(before, after, "before", "after")
    row = _row(cmp, "A c=4", "TTFT p50 ms")
    assert row.lone_reads() == (None, "floor")
    floor = ratio_interval(row.after_values, row.before_values)
    assert floor is not None and floor.method == "noise_floor"
    assert row.ratio_interval == (floor.lo, floor.hi)
    notes = "\n".join(cmp.notes)
    assert (
        "after: up to 2 repeats per level: intervals from their spread (Welch; 1 level "
        "measured once, with nothing pooled, reads the assumed 3% run-to-run noise); "
    ) in notes
    assert "before: up to 2 repeats per level: intervals from their spread pooled over 3 " in notes

    after = _sweep({1: (20.0, 20.0 * SPREAD), 2: (40.0, 40.0 * SPREAD), 4: (88.0,)})
    cmp = compare_sweeps(before, after, "before", "after")
    row = _row(cmp, "A c=4", "TTFT p50 ms")
    assert row.lone_reads() == (None, "pooled")
    assert row.change == "worse"  # 9% on a 2% spread, pooled on 2 and 3 df
    assert not floor.significant  # the floor, widened to before's own t (1 df), did not
    assert (
        "after: up to 2 repeats per level: intervals from their spread pooled over 2 levels "
        "(df 2, per metric; 1 level measured once reads it, or the other side's spread at "
        "the level where larger); "
    ) in "\n".join(cmp.notes)


def test_the_second_decisions_readme_states_the_compare_counts() -> None:
    """docs/results/h100/moe-warm-decide-b/README.md: rows called better or worse between
    the grid and the two decisions (at a 3% margin in brackets), levels measured once
    included."""
    decide_b = ROOT / "docs/results/h100/moe-warm-decide-b"
    readme = " ".join((decide_b / "README.md").read_text("utf-8").split())
    for before, after, text in (
        (GRID, decide_b, "grid → this decision 9 (3)"),
        (GRID, DECIDE, "grid → the first decision 27 (6)"),
        (DECIDE, decide_b, "the first decision → this one 28 (7)"),
    ):
        counts = []
        for margin in (0.0, 0.03):
            cmp = compare_sweeps(load_sweep(before), load_sweep(after), tie_rel=margin)
            counts.append(sum(r.change in ("better", "worse") for r in cmp.rows))
        assert text.endswith(f" {counts[0]} ({counts[1]})")
        assert text in readme

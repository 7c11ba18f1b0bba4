"""``crossover compare`` of two sweeps pools each side's repeat noise over its levels (per
target and metric): two repeats a level give Welch's interval about one degree of
freedom, too few to call even a sixfold change; a level reads the larger of the pooled
spread and its own, with the pooled degrees of freedom, and the note says so."""

from __future__ import annotations

import math
from pathlib import Path

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
    # throughput at 16 requests/s was level (0.990x) and stays so
    flat = _row(cmp, "sglang->sglang-512 rate=16", "output tok/s")
    assert flat.change == "no significant change"
    assert flat.cells()[4:6] == ("0.990x", "[0.892x, 1.098x]")
    assert (
        "before: up to 2 repeats per level: intervals from their spread pooled over 6 levels "
        "(df 6, per metric); repeats measured back to back share an engine start"
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

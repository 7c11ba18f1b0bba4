"""``crossover.analysis.stats``: the repeat noise of a sweep pooled over its levels, and the
ratio interval that reads it (``ratio_interval_pooled``), against numbers worked by hand
and against today's per-level Welch interval where pooling adds nothing."""

from __future__ import annotations

import math

import numpy as np
import pytest

from crossover.analysis.stats import (
    PooledNoise,
    pooled_log_noise,
    ratio_interval,
    ratio_interval_pooled,
    t_ppf,
)

E = math.exp


def test_pooled_noise_sums_the_degrees_of_freedom_of_the_levels_with_repeats() -> None:
    # logs (0, 0.1): var 0.005; (0, 0.3): var 0.045; (0, 0.2, 0.4): var 0.04, 2 df;
    # one repeat, or a value that is not positive, adds nothing
    groups = [
        (10.0, 10.0 * E(0.1)),
        (5.0, 5.0 * E(0.3)),
        (7.0,),
        (3.0, 3.0 * E(0.2), 3.0 * E(0.4)),
        (0.0, 1.0),
    ]
    noise = pooled_log_noise(groups)
    assert noise is not None
    assert (noise.df, noise.levels) == (4, 3)
    assert noise.var == pytest.approx((0.005 + 0.045 + 2 * 0.04) / 4, rel=1e-12)
    assert noise.pools
    assert pooled_log_noise([(1.0,), (2.0,)]) is None
    one = pooled_log_noise([(1.0, E(0.2))])
    assert one == PooledNoise(pytest.approx(0.02), 1, 1) and not one.pools


def test_the_interval_from_two_pooled_sides_worked_by_hand() -> None:
    """Each side: pooled log variance 0.01 on 4 df, two repeats that agree (own spread 0,
    below the pooled). Each contributes 0.01 / 2; Welch-Satterthwaite gives
    0.01^2 / (2 * 0.005^2 / 4) = 8 df, and t(0.975, 8) = 2.306004 (tables)."""
    noise = PooledNoise(0.01, 4, 2)
    found = ratio_interval_pooled((2.0, 2.0), (1.0, 1.0), noise_a=noise, noise_b=noise)
    assert found is not None and found.method == "pooled"
    half = 2.306004 * math.sqrt(0.01)
    assert found.ratio == 2.0
    assert found.lo == pytest.approx(2.0 * E(-half), rel=1e-6)
    assert found.hi == pytest.approx(2.0 * E(half), rel=1e-6)
    # today's Welch has no spread to read here: a point
    plain = ratio_interval((2.0, 2.0), (1.0, 1.0))
    assert plain is not None and plain.lo == plain.hi == 2.0


def test_one_pooled_side_against_one_that_is_not() -> None:
    """After pools (0.02 on 6 df, own spread 0); before has a single level with repeats
    that agree: its term is 0, so the interval has after's 6 df: t(0.975, 6) = 2.446912."""
    found = ratio_interval_pooled(
        (2.0, 2.0), (1.0, 1.0), noise_a=PooledNoise(0.02, 6, 3), noise_b=PooledNoise(0.0, 1, 1)
    )
    assert found is not None and found.method == "pooled"
    half = 2.446912 * math.sqrt(0.02 / 2)
    assert found.lo == pytest.approx(2.0 * E(-half), rel=1e-6)


def test_never_narrower_than_the_levels_own_spread_with_the_pooled_t() -> None:
    """A level whose own log variance is above the pooled one reads its own, with the
    pooled degrees of freedom: as if the pool had been that wide."""
    a, b = (100.0, 160.0), (50.0, 52.0)
    own_a = (math.log(160.0) - math.log(100.0)) ** 2 / 2
    own_b = (math.log(52.0) - math.log(50.0)) ** 2 / 2
    quiet = PooledNoise(1e-4, 10, 5)
    found = ratio_interval_pooled(a, b, noise_a=quiet, noise_b=quiet)
    as_wide = ratio_interval_pooled(
        a, b, noise_a=PooledNoise(own_a, 10, 5), noise_b=PooledNoise(own_b, 10, 5)
    )
    assert found == as_wide
    va, vb = own_a / 2, own_b / 2
    df = (va + vb) ** 2 / (va * va / 10 + vb * vb / 10)
    half = t_ppf(0.975, df) * math.sqrt(va + vb)
    assert found is not None and math.log(found.hi / found.ratio) == pytest.approx(half)
    # and wider than the pool alone would give
    assert half > t_ppf(0.975, 20) * math.sqrt(1e-4)


def test_a_pool_of_one_level_or_none_is_todays_welch() -> None:
    a, b = (10.0, 12.0), (9.0, 9.5)
    plain = ratio_interval(a, b)
    assert plain is not None and plain.method == "welch"
    for noise in (None, PooledNoise(0.5, 1, 1)):
        assert ratio_interval_pooled(a, b, noise_a=noise, noise_b=noise) == plain


def test_one_run_without_pooled_noise_is_still_the_noise_floor() -> None:
    noise = PooledNoise(1e-4, 10, 5)
    for na, nb in ((None, noise), (PooledNoise(1e-4, 1, 1), noise), (None, None)):
        found = ratio_interval_pooled((10.4,), (10.0, 10.1), noise_a=na, noise_b=nb)
        assert found == ratio_interval((10.4,), (10.0, 10.1))
        assert found is not None and found.method == "noise_floor"


def test_one_run_reads_its_sides_noise_pooled_over_the_other_levels() -> None:
    """A level measured once on one side (its target's other levels twice): the run's
    noise is the pooled one, by hand: var = 0.01/1 + max(0.01, own)/2 with own the log
    variance of (100, 110), df by Welch-Satterthwaite from 8 and 8."""
    noise = PooledNoise(0.01, 8, 4)
    a, b = (150.0,), (100.0, 110.0)
    found = ratio_interval_pooled(a, b, noise_a=noise, noise_b=noise)
    assert found is not None and found.method == "pooled"
    own = float(np.var(np.log(b), ddof=1))
    va, vb = 0.01, max(0.01, own) / 2
    df = (va + vb) ** 2 / (va * va / 8 + vb * vb / 8)
    half = t_ppf(0.975, df) * math.sqrt(va + vb)
    r = 150.0 / 105.0
    assert found.lo == pytest.approx(r * math.exp(-half))
    assert found.hi == pytest.approx(r * math.exp(half))
    # a 43% change on 10% noise: called, where the floor widened to b's own df-1 t was not
    assert found.significant
    plain = ratio_interval_pooled(a, b, noise_a=None, noise_b=None)
    assert plain is not None and plain.method == "noise_floor" and not plain.significant


def test_pooling_is_what_makes_two_repeats_tell() -> None:
    """Two repeats a side with a 3% spread and a 7% change: Welch (2 df, t = 4.30) spans
    1; the same spread pooled over five levels a side (5 df each, 10 together, t = 2.23)
    does not."""
    a, b = (107.0, 107.0 * 1.03), (100.0, 103.0)
    plain = ratio_interval(a, b)
    assert plain is not None and not plain.significant
    own = math.log(1.03) ** 2 / 2
    noise = PooledNoise(own, 5, 5)
    found = ratio_interval_pooled(a, b, noise_a=noise, noise_b=noise)
    assert found is not None and found.significant and found.lo > 1.0


def test_one_run_reads_the_other_sides_spread_at_the_level_where_larger() -> None:
    """A lone run cannot show that its level is noisier than its side's others: the other
    side's two repeats there, (100, 100 e^0.3), spread with log variance 0.09 / 2 = 0.045,
    above both pools (0.01 on 5 df), and the run reads that. By hand: va = 0.045 / 1,
    vb = 0.045 / 2, df = 0.0675^2 / (0.045^2 / 5 + 0.0225^2 / 5) = 9, t(0.975, 9) =
    2.262157 (tables), half = 2.262157 * sqrt(0.0675) = 0.5877 > log(1.702) = 0.5319: no
    significant change. The pool alone on the lone side (0.01) would have called it."""
    noise = PooledNoise(0.01, 5, 3)
    a, b = (200.0,), (100.0, 100.0 * E(0.3))
    found = ratio_interval_pooled(a, b, noise_a=noise, noise_b=noise)
    assert found is not None and found.method == "pooled"
    r = 200.0 / ((100.0 + 100.0 * E(0.3)) / 2)
    half = 2.262157 * math.sqrt(0.045 + 0.0225)
    assert found.ratio == pytest.approx(r)
    assert found.lo == pytest.approx(r * E(-half), rel=1e-6)
    assert found.hi == pytest.approx(r * E(half), rel=1e-6)
    assert not found.significant
    # the pooled variance alone on the lone side: 0.01 + 0.0225 on Welch-Satterthwaite df
    va, vb = 0.01, 0.0225
    df = (va + vb) ** 2 / (va * va / 5 + vb * vb / 5)
    assert math.log(r) > t_ppf(0.975, df) * math.sqrt(va + vb)
    # the same holds with the sides swapped (the lone run after, not before)
    swapped = ratio_interval_pooled(b, a, noise_a=noise, noise_b=noise)
    assert swapped is not None
    assert swapped.lo == pytest.approx(1.0 / found.hi, rel=1e-9)
    assert swapped.hi == pytest.approx(1.0 / found.lo, rel=1e-9)


def test_one_run_keeps_the_pool_where_the_other_side_spreads_less() -> None:
    """The other side's repeats, (100, 100 e^0.2), spread with log variance 0.02, below the
    pools (0.04 on 5 df): the run reads the pool. By hand: va = 0.04, vb = 0.04 / 2, df =
    0.06^2 / (0.04^2 / 5 + 0.02^2 / 5) = 9, half = 2.262157 * sqrt(0.06). A lone run on
    both sides borrows nothing: 0.04 + 0.04 on 10 df, t(0.975, 10) = 2.228139."""
    noise = PooledNoise(0.04, 5, 3)
    a, b = (200.0,), (100.0, 100.0 * E(0.2))
    found = ratio_interval_pooled(a, b, noise_a=noise, noise_b=noise)
    assert found is not None and found.method == "pooled"
    r = 200.0 / ((100.0 + 100.0 * E(0.2)) / 2)
    half = 2.262157 * math.sqrt(0.04 + 0.02)
    assert found.lo == pytest.approx(r * E(-half), rel=1e-6)
    assert found.hi == pytest.approx(r * E(half), rel=1e-6)

    both = ratio_interval_pooled((200.0,), (100.0,), noise_a=noise, noise_b=noise)
    assert both is not None and both.method == "pooled"
    half = 2.228139 * math.sqrt(0.08)
    assert both.lo == pytest.approx(2.0 * E(-half), rel=1e-6)
    assert both.hi == pytest.approx(2.0 * E(half), rel=1e-6)

"""Small statistics used by the crossover analysis: Student's t quantile, Welch intervals,
and the repeat noise of a sweep pooled over its levels.

Kept here (numpy and the standard library only) so the core install needs no scipy.

Pooled noise (:func:`pooled_log_noise`, :func:`ratio_interval_pooled`, read by
``crossover compare``). Two repeats a level give Welch's interval about one degree of
freedom (t = 12.7 at 95%), so a level alone cannot call even a sixfold change. A sweep
measures many levels with the same repeats, and the relative spread of a metric is much
alike from one level to the next: the variance of ``log(value)`` pooled over the levels
(``sum((n_i - 1) * var_i) / sum(n_i - 1)``) has as many degrees of freedom as all its
levels together (six levels of two repeats: 6, t = 2.45): the within-group variance of a
one-way analysis of variance, in logs.

It assumes that relative spread is the same at every level, and tail metrics break it:
TTFT p99 near overload spreads far more than at light load, where a few quiet levels would
pull the pooled variance down. So a side's variance at a level is
``max(pooled, that level's own)``, with the pooled degrees of freedom. This is
conservative against the pooled interval (never narrower: where the levels do agree, the
level's own variance, one degree of freedom, exceeds the pooled one by chance about a
third of the time and only widens it) and never narrower than the level's own spread read
with the pooled t. It is a compromise, and the right one here: taking the level's own
degrees of freedom with its own variance, wherever that variance is the larger, is
today's Welch again (an interval such as [0.112x, 326x] for a 6x change), and trusting
the pooled variance alone lets quiet levels narrow a loud one. What it cannot do is see
spread that two repeats did not show: a level noisier than the rest whose repeats happened
to agree reads with the pooled variance, as any estimate from two runs would. The other
way round costs width, not truth: one loud level raises the pool, and the quiet levels
beside it read that wider spread (SGLang's TTFT p99 at 16 requests/s, beside 20).

A level measured once on a side has no spread of its own, and where that side's noise
pools its run reads the pooled variance (over one run, with the pooled degrees of
freedom): what the side's other levels measured is the best that is known of it. But the
blind spot above is wider here: a lone run cannot show that its level is louder than its
side's other levels, and the quieter pool would stand in for it. ``compare`` pairs two
measurements of one target at the same level, so the other side's repeats there, where it
has two or more, are the best evidence of that level's spread: the lone run reads
``max(pooled, the other side's own log variance at the level)``, still over one run and
with the pooled degrees of freedom. SGLang's TTFT p50 at 256 concurrent requests, measured
once by an H100 decision and twice by the grid it was compared with (708 and 527 ms, a 21%
spread against SGLang's pooled 9%), read [0.244x, 10.014x] for a 1.56x change on the
assumed noise floor widened to the grid's own t at the level (one degree of freedom),
[1.084x, 2.254x] on the decision's pool alone, and reads [0.902x, 2.709x] now. Where the
other side's repeats there agree more closely than the pool, the pool stands; a lone run
on both sides has no repeats at the level to borrow, and each reads its own pool alone.
A run whose side has nothing pooled (repeats at fewer than two levels) keeps the floor.
The crossover analysis and ``crossover decide`` keep their per-level intervals
(:func:`difference_interval`, :func:`ratio_interval`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the regularized incomplete beta (modified Lentz)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-14:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """Regularized incomplete beta function I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    ln_front = (
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    front = math.exp(ln_front)
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    """CDF of Student's t with ``df`` (real, > 0) degrees of freedom."""
    tail = 0.5 * betainc(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t >= 0 else tail


@functools.lru_cache(maxsize=4096)
def t_ppf(p: float, df: float) -> float:
    """Quantile of Student's t (bisection on the CDF; exact to ~1e-10). Cached: an
    analysis asks for the same few (confidence, repeats) pairs many times."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"probability must be in (0, 1), got {p}")
    if p < 0.5:
        return -t_ppf(1.0 - p, df)
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < p:
        hi *= 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-12 * max(1.0, hi):
            break
    return 0.5 * (lo + hi)


@dataclass(frozen=True)
class DiffInterval:
    """``mean(a) - mean(b)`` with a two-sided confidence interval ``[lo, hi]``.

    ``method`` is ``"welch"`` when both sides had at least two repeats, else
    ``"noise_floor"`` (see :func:`difference_interval`).
    """

    mean: float
    lo: float
    hi: float
    method: str

    @property
    def significant(self) -> bool:
        """The interval excludes zero."""
        return self.lo > 0.0 or self.hi < 0.0


def _mean_halfwidth(x: np.ndarray, confidence: float) -> float:
    n = x.size
    se = float(np.std(x, ddof=1)) / math.sqrt(n)
    return t_ppf(0.5 + confidence / 2.0, n - 1) * se


@dataclass(frozen=True)
class RatioInterval:
    """``mean(a) / mean(b)`` with a two-sided confidence interval ``[lo, hi]`` found in
    log space, so it is never below zero and a halving reads like a doubling.

    ``method``: ``"welch"``, ``"noise_floor"`` (:func:`ratio_interval`) or ``"pooled"``
    (:func:`ratio_interval_pooled`).
    """

    ratio: float
    lo: float
    hi: float
    method: str

    @property
    def significant(self) -> bool:
        """The interval excludes 1."""
        return self.lo > 1.0 or self.hi < 1.0


def ratio_interval(
    a: Sequence[float],
    b: Sequence[float],
    *,
    confidence: float = 0.95,
    noise_floor_rel: float = 0.03,
) -> RatioInterval | None:
    """Ratio of means of two groups of repeats, with its interval in log space.

    The log of a mean has standard error ``sd / (sqrt(n) * mean)`` (the delta method);
    with two or more repeats a side the two are combined as Welch's are (unequal
    variances, Welch-Satterthwaite degrees of freedom). A side with one run cannot tell
    its own noise: the half-width is then ``log(1 + noise_floor_rel)``, widened to the
    t half-width of the side that has repeats if that is larger (as
    :func:`difference_interval` does). None when a mean is not positive (no log).
    """
    xa = np.asarray(a, dtype=float)
    xb = np.asarray(b, dtype=float)
    if xa.size == 0 or xb.size == 0:
        raise ValueError("ratio_interval needs at least one value on each side")
    ma, mb = float(xa.mean()), float(xb.mean())
    if ma <= 0.0 or mb <= 0.0:
        return None
    log_r = math.log(ma / mb)
    z = 0.5 + confidence / 2.0
    if xa.size >= 2 and xb.size >= 2:
        va = float(np.var(xa, ddof=1)) / (xa.size * ma * ma)
        vb = float(np.var(xb, ddof=1)) / (xb.size * mb * mb)
        var = va + vb
        if var == 0.0:
            return RatioInterval(ma / mb, ma / mb, ma / mb, "welch")
        df = var * var / (va * va / (xa.size - 1) + vb * vb / (xb.size - 1))
        half = t_ppf(z, df) * math.sqrt(var)
        method = "welch"
    else:
        half = math.log1p(noise_floor_rel)
        for side, m in ((xa, ma), (xb, mb)):
            if side.size >= 2:
                half = max(half, _mean_halfwidth(side, confidence) / m)
        method = "noise_floor"
    return RatioInterval(ma / mb, math.exp(log_r - half), math.exp(log_r + half), method)


@dataclass(frozen=True)
class PooledNoise:
    """One side's repeat noise pooled over its levels (one sweep, one target, one metric).

    ``var`` is the pooled variance of ``log(value)``, ``sum((n_i - 1) * var_i) / df``
    over the ``levels`` levels that have two or more repeats, and ``df`` is
    ``sum(n_i - 1)``. Logs because spread scales with the level (a run at 20 requests/s
    moves by more milliseconds than one at 1) while its relative size stays put, and
    because the ratio's interval is found in log space anyway.
    """

    var: float
    df: int
    levels: int

    @property
    def pools(self) -> bool:
        """It adds to what one level knows: two or more levels went into it."""
        return self.levels >= 2


def pooled_log_noise(groups: Iterable[Sequence[float]]) -> PooledNoise | None:
    """The pooled variance of ``log(value)`` over ``groups`` (a level's repeats each).

    A group counts when it has two or more values, all positive (a log needs them); None
    when none does.
    """
    ss, df, levels = 0.0, 0, 0
    for g in groups:
        x = np.asarray(g, dtype=float)
        if x.size < 2 or not bool(np.all(x > 0.0)):
            continue
        ss += float(np.var(np.log(x), ddof=1)) * (x.size - 1)
        df += x.size - 1
        levels += 1
    if levels == 0:
        return None
    return PooledNoise(ss / df, df, levels)


def ratio_interval_pooled(
    a: Sequence[float],
    b: Sequence[float],
    *,
    noise_a: PooledNoise | None,
    noise_b: PooledNoise | None,
    confidence: float = 0.95,
    noise_floor_rel: float = 0.03,
) -> RatioInterval | None:
    """:func:`ratio_interval`, with each side's noise pooled over its levels where that
    adds to what this level's repeats know.

    A side whose ``noise`` :attr:`~PooledNoise.pools` (its values here all positive) puts
    ``max(noise.var, own) / n`` into the interval, ``own`` being the variance of the log of
    its ``n`` repeats here, with ``noise.df`` degrees of freedom. For one run (``n = 1``)
    ``own`` is the other side's log variance here where that side has two or more repeats
    (a lone run cannot show its level's spread, and the same level measured twice on the
    other side is the best evidence of it), and nothing where it has one: the pooled
    variance alone; another side with two or more repeats puts in what
    :func:`ratio_interval` does (``var / (n mean^2)``, ``n - 1``). The two are combined
    with the Welch-Satterthwaite degrees of freedom and the interval is
    ``method="pooled"``. A side with one run here and no pooled noise keeps the assumed
    noise floor: this is then :func:`ratio_interval` exactly, as it is where neither side
    pools. See the module docstring for why the level's own spread (or, for one run, the
    other side's) bounds the pooled one from below.
    """
    xa = np.asarray(a, dtype=float)
    xb = np.asarray(b, dtype=float)
    plain = ratio_interval(a, b, confidence=confidence, noise_floor_rel=noise_floor_rel)
    if plain is None:
        return None
    pooled = [
        noise is not None and noise.pools and bool(np.all(x > 0.0))
        for x, noise in ((xa, noise_a), (xb, noise_b))
    ]
    # a lone run's noise is known only from its other levels: without them, the floor
    lone_unpooled = any(x.size < 2 and not p for x, p in zip((xa, xb), pooled, strict=True))
    if not any(pooled) or lone_unpooled:
        return plain

    def own(x: np.ndarray) -> float:
        """The log variance of a level's repeats (0 for one run or a value not positive)."""
        return float(np.var(np.log(x), ddof=1)) if x.size >= 2 and bool(np.all(x > 0)) else 0.0

    terms: list[tuple[float, float]] = []
    sides = ((xa, noise_a, pooled[0], xb), (xb, noise_b, pooled[1], xa))
    for x, noise, pools, other in sides:
        if noise is not None and pools:
            # a lone run cannot show its level's spread: the other side's repeats at this
            # level stand in for it, where they spread more than the pool
            here = own(x) if x.size >= 2 else own(other)
            terms.append((max(noise.var, here) / x.size, float(noise.df)))
        else:
            m = float(x.mean())
            terms.append((float(np.var(x, ddof=1)) / (x.size * m * m), float(x.size - 1)))
    (va, dfa), (vb, dfb) = terms
    var = va + vb
    r = plain.ratio
    if var == 0.0:
        return RatioInterval(r, r, r, "pooled")
    df = var * var / (va * va / dfa + vb * vb / dfb)
    half = t_ppf(0.5 + confidence / 2.0, df) * math.sqrt(var)
    log_r = math.log(r)
    return RatioInterval(r, math.exp(log_r - half), math.exp(log_r + half), "pooled")


def difference_interval(
    a: Sequence[float],
    b: Sequence[float],
    *,
    confidence: float = 0.95,
    noise_floor_rel: float = 0.03,
) -> DiffInterval:
    """Difference of means of two groups of repeats, with its confidence interval.

    * Both sides with >= 2 repeats: Welch's t interval (unequal variances,
      Welch-Satterthwaite degrees of freedom).
    * Otherwise one run cannot tell its own noise, so the half-width is
      ``noise_floor_rel`` times the larger of the two means (3% by default: the
      run-to-run spread of a closed-loop run on a quiet machine), widened to the
      t half-width of the side that does have repeats if that is larger.
    """
    xa = np.asarray(a, dtype=float)
    xb = np.asarray(b, dtype=float)
    if xa.size == 0 or xb.size == 0:
        raise ValueError("difference_interval needs at least one value on each side")
    ma, mb = float(xa.mean()), float(xb.mean())
    d = ma - mb
    if xa.size >= 2 and xb.size >= 2:
        va = float(np.var(xa, ddof=1)) / xa.size
        vb = float(np.var(xb, ddof=1)) / xb.size
        var = va + vb
        if var == 0.0:
            return DiffInterval(d, d, d, "welch")
        df = var * var / (va * va / (xa.size - 1) + vb * vb / (xb.size - 1))
        half = t_ppf(0.5 + confidence / 2.0, df) * math.sqrt(var)
        return DiffInterval(d, d - half, d + half, "welch")
    half = noise_floor_rel * max(abs(ma), abs(mb))
    for side in (xa, xb):
        if side.size >= 2:
            half = max(half, _mean_halfwidth(side, confidence))
    return DiffInterval(d, d - half, d + half, "noise_floor")

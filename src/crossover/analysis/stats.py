"""Small statistics used by the crossover analysis: Student's t quantile, Welch intervals.

Kept here (numpy and the standard library only) so the core install needs no scipy.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
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
    log space, so it is never below zero and a halving reads like a doubling."""

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

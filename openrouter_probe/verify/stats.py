"""The statistics behind a precision verdict: intervals, paired tests, the floor, power.

Clopper-Pearson for an accuracy; mid-p McNemar for a paired gap (Fagerland, Lydersen and Laake
2013, BMC Med Res Methodol 13:91); the floor test for disagreement against the reference's own;
Tango's score interval for equivalence (Tango 1998, Stat Med 17:891-908); Holm's correction; the
exact power of the mid-p test (its normal approximation above ``EXACT_POWER_LIMIT`` pairs) and the
normal approximation of the equivalence power. Why each, and what it assumes: ``docs/verify.md``,
"Statistics and verdicts". No statistics library: ``math.lgamma``, ``statistics.NormalDist`` and
numpy's convolution; ``tests/verify/test_stats.py`` checks the values against closed forms,
published tables and scipy/statsmodels.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from statistics import NormalDist

from openrouter_probe.errors import ConfigError, Message
from openrouter_probe.verify.binomial import log_pmf, pmf_sum

__all__ = [
    "DEFAULT_ALPHA",
    "DEFAULT_POWER",
    "DEFAULT_REPEATS",
    "DEFAULT_TOLERANCE",
    "EXACT_POWER_LIMIT",
    "PLANNING_DISCORDANCE",
    "Interval",
    "binom_cdf",
    "binom_sf",
    "check_statistics",
    "clopper_pearson",
    "equivalence_power",
    "floor_test",
    "holm",
    "mcnemar_exact",
    "mcnemar_midp",
    "mcnemar_power",
    "min_detectable_gap",
    "prompts_for_equivalence",
    "tango_interval",
]


#: Family-wise error rate over all the endpoints (and deciding measures) compared with the reference.
DEFAULT_ALPHA = 0.05
#: The power at which the minimum detectable gap and the prompts needed are stated.
DEFAULT_POWER = 0.8
#: The margin of ``consistent``: the largest accuracy gap (or excess disagreement over the
#: reference's own) whose whole interval still counts as the same.
DEFAULT_TOLERANCE = 0.10
#: How often the reference is sent: twice measures its disagreement with itself (the floor).
DEFAULT_REPEATS = 2
#: Above this many pairs the power is the normal approximation (exact below it).
EXACT_POWER_LIMIT = 5000
#: The share of discordant prompts the plan assumes before anything is measured.
PLANNING_DISCORDANCE = 0.05

_Z = NormalDist()


def _in_unit(name: str, value: float, example: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 < value < 1.0:
        raise ConfigError(
            Message(
                "not-in-unit",
                f"{{{name}=}}: must be a number strictly between 0 and 1, e.g. {{example:s}}",
                **{name: value},
                example=example,
            )
        )


def check_statistics(
    *,
    alpha: float | None = None,
    power: float | None = None,
    tolerance: float | None = None,
    repeats: int | None = None,
    n: int | None = None,
) -> None:
    """Raise ``ConfigError`` (one line naming the option and its range) for a bad statistical
    argument: ``alpha``, ``power`` and ``tolerance`` in (0, 1), ``repeats`` an integer
    from 2 to 10, ``n`` an integer >= 1. Called before anything is sent."""
    for name, value, example in (
        ("alpha", alpha, "0.05"),
        ("power", power, "0.8"),
        ("tolerance", tolerance, "0.1 (10 pp)"),
    ):
        if value is not None:
            _in_unit(name, value, example)
    if repeats is not None and (
        isinstance(repeats, bool) or not isinstance(repeats, int) or not 2 <= repeats <= 10
    ):
        raise ConfigError(
            Message(
                "repeats-range",
                "{repeats=}: must be an integer from 2 to 10 (the reference is sent that many "
                "times to measure its disagreement with itself)",
                repeats=repeats,
            )
        )
    if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
        raise ConfigError(f"n={n!r}: must be an integer >= 1")


@dataclass(frozen=True)
class Interval:
    """A two-sided confidence interval: of a proportion (in 0..1) or a paired difference (-1..1)."""

    low: float
    high: float
    level: float = 0.95


def binom_cdf(k: int, n: int, p: float) -> float:
    """Return P(X <= k) for X ~ Binomial(n, p)."""
    if k < 0:
        return 0.0
    return 1.0 if k >= n else min(1.0, pmf_sum(0, k, n, p))


def binom_sf(k: int, n: int, p: float) -> float:
    """Return P(X >= k) for X ~ Binomial(n, p)."""
    if k <= 0:
        return 1.0
    return 0.0 if k > n else min(1.0, pmf_sum(k, n, n, p))


def clopper_pearson(successes: int, n: int, *, level: float = 0.95) -> Interval:
    """Return the exact (Clopper-Pearson) interval for ``successes`` out of ``n``.

    The lower bound is the p at which P(X >= successes) = (1 - level)/2, the upper the p at which
    P(X <= successes) = (1 - level)/2; at 0 and n they have closed forms, e.g. 0 of 10 gives
    ``(0, 1 - 0.025 ** (1/10))`` = ``(0, 0.3085)``. ``n == 0`` gives ``(0, 1)``: no information.
    """
    if n < 0 or successes < 0 or successes > n:
        raise ValueError(f"need 0 <= successes <= n, got {successes} of {n}")
    tail = (1.0 - level) / 2
    if n == 0:
        return Interval(0.0, 1.0, level)
    if successes == 0:
        low = 0.0
    elif successes == n:
        low = tail ** (1.0 / n)
    else:
        low = _root(lambda p: tail - binom_sf(successes, n, p), 0.0, 1.0, tol=1e-15)
    if successes == n:
        high = 1.0
    elif successes == 0:
        high = 1.0 - tail ** (1.0 / n)
    else:
        # P(X <= x) falls as p rises: solve 1 - cdf (rising) = 1 - tail.
        rest = 1.0 - tail
        high = _root(lambda p: rest - (1.0 - binom_cdf(successes, n, p)), 0.0, 1.0, tol=1e-15)
    return Interval(low, high, level)


def mcnemar_exact(b: int, c: int) -> float:
    """Return the two-sided exact McNemar p-value for discordant counts ``b`` and ``c``.

    ``b``: pairs right on the reference and wrong on the endpoint; ``c``: the reverse. Under the null
    hypothesis (equal accuracy) ``b`` given ``b + c`` is Binomial(b + c, 1/2); the p-value doubles the
    smaller tail, capped at 1. No discordant pair gives 1.
    """
    if b < 0 or c < 0:
        raise ValueError(f"discordant counts must be >= 0, got {b} and {c}")
    d = b + c
    if d == 0:
        return 1.0
    return min(1.0, 2.0 * binom_cdf(min(b, c), d, 0.5))


def holm(p_values: Mapping[str, float]) -> dict[str, float]:
    """Return Holm's step-down adjusted p-values (compare each with the family-wise alpha).

    Sorted ascending, the i-th smallest (from 0) is multiplied by ``m - i``, made non-decreasing, and
    capped at 1. Ties keep the order of the mapping.
    """
    m = len(p_values)
    order = sorted(p_values, key=lambda name: p_values[name])
    adjusted: dict[str, float] = {}
    running = 0.0
    for i, name in enumerate(order):
        running = max(running, min(1.0, (m - i) * p_values[name]))
        adjusted[name] = running
    return {name: adjusted[name] for name in p_values}


def mcnemar_midp(b: int, c: int) -> float:
    """Return the two-sided mid-p McNemar p-value for discordant counts ``b`` and ``c``.

    With ``k = min(b, c)`` and X ~ Binomial(b + c, 1/2): ``2 * (P(X < k) + P(X = k) / 2)``, capped
    at 1. It is the exact p-value less the probability of the observed outcome, so it rejects more
    often than the exact test and stays close to the nominal level. No discordant pair gives 1.
    """
    if b < 0 or c < 0:
        raise ValueError(f"discordant counts must be >= 0, got {b} and {c}")
    d = b + c
    if d == 0:
        return 1.0
    k = min(b, c)
    return min(1.0, 2.0 * binom_cdf(k - 1, d, 0.5) + math.exp(log_pmf(k, d, 0.5)))


def floor_test(groups: Mapping[int, tuple[int, int]], *, repeats: int) -> float:
    """Return the one-sided mid-p value that the endpoint disagrees with the reference more than the
    reference disagrees with itself.

    ``groups`` maps ``t`` (1..repeats-1: on an item, how many of the endpoint and the reference's
    runs 2..R differ from run 1) to ``(items, endpoint_differs)``: how many items have that ``t`` and
    on how many of them the endpoint is one that differs. Under the null hypothesis the endpoint is
    one more run of the reference, so on an item with total ``t`` it differs with probability
    ``t / repeats``; the statistic is the sum, and the p-value ``P(S > s) + P(S = s) / 2``. Above
    20,000 items the sum's distribution is the normal approximation.
    """
    if repeats < 2:
        raise ValueError(f"repeats must be >= 2, got {repeats}")
    s = sum(hits for _, hits in groups.values())
    m = sum(items for items, _ in groups.values())
    if m == 0:
        return 1.0
    if m > 20_000:
        mean = sum(items * t / repeats for t, (items, _) in groups.items())
        var = sum(items * (t / repeats) * (1 - t / repeats) for t, (items, _) in groups.items())
        if var == 0:
            return 1.0 if s <= mean else 0.0
        return 1.0 - _Z.cdf((s - mean) / math.sqrt(var))
    import numpy as np

    pmf = np.ones(1)  # the sum's distribution: each group's binomial convolved in
    for t, (items, _) in sorted(groups.items()):
        if not 0 < t < repeats:
            raise ValueError(f"a group's total must be in 1..{repeats - 1}, got {t}")
        pmf = np.convolve(pmf, [math.exp(log_pmf(k, items, t / repeats)) for k in range(items + 1)])
    return min(1.0, math.fsum(pmf[s + 1 :]) + float(pmf[s]) / 2)


def tango_interval(b: float, c: float, n: float, *, level: float = 0.95) -> Interval:
    """Return Tango's score interval for the paired difference ``(b - c) / n``.

    ``b`` and ``c`` are the discordant counts (``b``: reference right and endpoint wrong, or the
    endpoint alone disagreeing), ``n`` all pairs. The bounds solve ``T(d) = +-z`` for the score
    statistic ``T(d) = (b - c - n d) / sqrt(n (2 q(d) + d (1 - d)))``, ``q(d)`` the restricted
    maximum likelihood estimate of the reverse discordance; ``T(0)`` is McNemar's statistic.
    Fractional counts are accepted (the floor with more than two runs of the reference).
    """
    if n <= 0:
        return Interval(-1.0, 1.0, level)
    if b < 0 or c < 0 or b + c > n + 1e-9:
        raise ValueError(f"need 0 <= b, c and b + c <= n, got {b}, {c} of {n}")
    z = _Z.inv_cdf(1 - (1 - level) / 2)

    def statistic(d: float) -> float:
        return (b - c - n * d) / math.sqrt(n * _restricted_var(b / n, c / n, d))

    estimate = (b - c) / n
    low = -1.0 if estimate <= -1 else _root(lambda d: statistic(d) - z, -1.0, estimate)
    high = 1.0 if estimate >= 1 else _root(lambda d: statistic(d) + z, estimate, 1.0)
    return Interval(low, high, level)


def _root(fn: Callable[[float], float], lo: float, hi: float, tol: float = 1e-12) -> float:
    """The root of a decreasing ``fn`` in [lo, hi] (bisection to ``tol``)."""
    for _ in range(200):
        mid = (lo + hi) / 2
        if fn(mid) > 0:
            lo = mid
        else:
            hi = mid
        if hi - lo < tol:
            break
    return (lo + hi) / 2


@lru_cache(maxsize=16384)
def _critical_b(d: int, alpha: float, mid_p: bool) -> int:
    """The largest ``k`` such that min(b, c) <= k rejects at ``alpha`` with d discordant pairs (-1:
    no outcome rejects)."""
    k, tail = -1, 0.0
    while k + 1 <= d // 2:
        pmf = math.exp(log_pmf(k + 1, d, 0.5))
        p = 2.0 * tail + pmf if mid_p else 2.0 * (tail + pmf)
        if min(1.0, p) > alpha:
            break
        tail += pmf
        k += 1
    return k


#: Above this many discordant pairs (and ``EXACT_POWER_LIMIT`` pairs) the conditional rejection
#: probability is the normal approximation.
_EXACT_DISCORDANT = 200


def _reject_given(d: int, share: float, alpha: float, *, mid_p: bool, exact: bool) -> float:
    """P(the test rejects | d discordant pairs), b ~ Binomial(d, share)."""
    if exact or d <= _EXACT_DISCORDANT:
        k = _critical_b(d, alpha, mid_p)
        if k < 0:
            return 0.0
        # reject when b <= k or b >= d - k
        return min(1.0, binom_cdf(k, d, share) + binom_sf(d - k, d, share))
    half = _Z.inv_cdf(1 - alpha / 2) * math.sqrt(d) / 2
    mean, var = d * share, d * share * (1 - share)
    if var == 0:
        return 1.0 if abs(mean - d / 2) >= half else 0.0
    sd = math.sqrt(var)
    upper = 1 - _Z.cdf((d / 2 + half - 0.5 - mean) / sd)
    lower = _Z.cdf((d / 2 - half + 0.5 - mean) / sd)
    return min(1.0, upper + lower)


def mcnemar_power(n: int, *, p10: float, p01: float, alpha: float, mid_p: bool = True) -> float:
    """Return the power of the two-sided McNemar test (mid-p, or exact with ``mid_p=False``).

    ``n`` pairs, each discordant "reference right, endpoint wrong" with probability ``p10`` and the
    reverse with ``p01``. The discordant count D is Binomial(n, p10 + p01); given D = d, b is
    Binomial(d, p10 / (p10 + p01)); the test rejects when min(b, d - b) is at or below its critical
    value. Above ``EXACT_POWER_LIMIT`` pairs the rejection probability given more than 200
    discordant pairs is the normal approximation (D's distribution stays exact).
    """
    return min(1.0, _power_sum(n, p10, p01, alpha, mid_p, enough=math.inf))


def _power_sum(
    n: int, p10: float, p01: float, alpha: float, mid_p: bool, *, enough: float
) -> float:
    """``mcnemar_power``'s sum, stopped once it reaches ``enough``: its terms are never negative,
    so a sum stopped there says "at least ``enough``" exactly as the whole sum would."""
    if n < 0 or p10 < 0 or p01 < 0 or p10 + p01 > 1 + 1e-12:
        raise ValueError(f"need n >= 0 and p10, p01 >= 0 with p10 + p01 <= 1, got {p10}, {p01}")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    psi = min(1.0, p10 + p01)
    if n == 0 or psi == 0.0:
        return 0.0
    share = p10 / psi
    centre, spread = n * psi, math.sqrt(n * psi * (1 - psi))
    first = max(1, math.floor(centre - 12 * spread) - 2)
    last = min(n, math.ceil(centre + 12 * spread) + 2)
    exact = n <= EXACT_POWER_LIMIT
    total = 0.0
    for d in range(first, last + 1):
        weight = math.exp(log_pmf(d, n, psi))
        if weight >= 1e-16:
            total += weight * _reject_given(d, share, alpha, mid_p=mid_p, exact=exact)
            if total >= enough:
                break
    return total


@lru_cache(maxsize=1024)
def min_detectable_gap(
    n: int,
    *,
    alpha: float,
    power: float = DEFAULT_POWER,
    background: float = 0.0,
    mid_p: bool = True,
) -> float | None:
    """Return the smallest accuracy gap ``p10 - p01`` that ``n`` pairs detect with ``power``.

    ``background`` is ``p01``, the rate at which the endpoint is right where the reference is wrong
    (noise that both directions share). ``None`` when no gap up to ``1 - 2 * background`` reaches the
    power: the sample is too small for any claim. Resolution: 1e-4. Fast at any ``n`` (the normal
    approximation above ``EXACT_POWER_LIMIT`` pairs); a repeated question is answered from a cache.
    """
    if not 0.0 < power < 1.0:
        raise ValueError(f"power must be in (0, 1), got {power}")
    if not 0.0 <= background < 0.5:
        raise ValueError(f"background must be in [0, 0.5), got {background}")

    def reaches(gap: float) -> bool:
        p10 = background + gap
        return _power_sum(n, p10, background, alpha, mid_p, enough=power) >= power

    limit = 1.0 - 2.0 * background
    if n == 0 or not reaches(limit):
        return None
    lo, hi = 0.0, limit
    while hi - lo > 1e-4:
        mid = (lo + hi) / 2
        if reaches(mid):
            hi = mid
        else:
            lo = mid
    return hi


def _restricted_var(p10: float, p01: float, d: float) -> float:
    """The per-pair variance in Tango's statistic at the margin ``d``: ``2 q + d (1 - d)``, ``q``
    the restricted estimate of the reverse discordance for data at the rates ``p10``, ``p01``
    (floored above 0: at a margin of +-1 it vanishes, and the statistic is then infinite)."""
    big_b = -p10 - p01 + (2 - p10 + p01) * d
    big_c = -p01 * d * (1 - d)
    q = (math.sqrt(max(0.0, big_b * big_b - 8 * big_c)) - big_b) / 4
    return max(2 * q + d * (1 - d), 1e-12)


def equivalence_power(
    n: int, *, discordance: float, tolerance: float, alpha: float, gap: float = 0.0
) -> float:
    """Return the probability that the ``1 - 2 alpha`` Tango interval of a paired gap lies inside
    ``+-tolerance`` (the two one-sided score tests at ``alpha`` each), by the normal approximation.

    ``discordance`` is the share of discordant pairs ``p10 + p01``, ``gap`` the true ``p10 - p01``.
    The upper bound is below the tolerance exactly when Tango's statistic at the tolerance is below
    ``-z``, i.e. when the estimate is below ``tolerance - z * sqrt(V / n)`` with ``V`` the
    restricted variance there (``_restricted_var``, larger than at the estimate: what makes a small
    sample's interval wide); the estimate is normal with variance ``(discordance - gap**2) / n``.
    """
    if n <= 0 or abs(gap) >= tolerance:
        return 0.0
    p10 = (discordance + gap) / 2
    p01 = (discordance - gap) / 2
    if p10 < 0 or p01 < 0:
        raise ValueError(f"need |gap| <= discordance, got {gap} and {discordance}")
    z = _Z.inv_cdf(1 - alpha)
    spread = math.sqrt(max(discordance - gap * gap, 1e-12) / n)  # the estimate's standard error
    upper_margin = tolerance - z * math.sqrt(_restricted_var(p10, p01, tolerance) / n)
    lower_margin = -tolerance + z * math.sqrt(_restricted_var(p10, p01, -tolerance) / n)
    upper = _Z.cdf((upper_margin - gap) / spread)
    lower = _Z.cdf((lower_margin - gap) / spread)
    return max(0.0, upper - lower)


def prompts_for_equivalence(
    *, tolerance: float, alpha: float, power: float = DEFAULT_POWER, discordance: float
) -> int:
    """Return the fewest pairs with which an endpoint equal to the reference is called
    ``consistent`` (its interval inside ``+-tolerance``) with ``power``, at ``discordance``."""
    check_statistics(alpha=alpha, power=power, tolerance=tolerance)
    if not 0.0 < discordance <= 1.0:
        raise ValueError(f"discordance must be in (0, 1], got {discordance}")

    def enough(n: int) -> bool:
        return (
            equivalence_power(n, discordance=discordance, tolerance=tolerance, alpha=alpha) >= power
        )

    hi = 1
    while not enough(hi):
        hi *= 2
    return bisect.bisect_left(range(hi + 1), True, lo=hi // 2, key=enough)

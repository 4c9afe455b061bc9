"""The statistics behind a precision verdict: intervals, the paired exact test, power, verdicts.

Choices, and why:

- **Accuracy interval: Clopper-Pearson (exact).** Its coverage is at least the stated level for every
  n and every true accuracy; Wilson's is closer to nominal on average but dips below it, most of all
  near 0 and 1, which is where a good model's accuracy sits. A verdict that must never claim more than
  the numbers support wants the interval that never under-covers. ``wilson`` is here too, for
  comparison.
- **Test: exact McNemar on paired outcomes.** The same prompts go to the reference and to each
  endpoint, so the outcomes are pairs. Prompts differ in difficulty far more than endpoints do; pairing
  cancels that, and only the discordant prompts (right on one side, wrong on the other) carry
  information. Fisher's test on the 2x2 of totals would treat the two samples as independent: the
  wrong model, and less power. The exact (binomial) form is used because the discordant counts are
  small exactly when it matters (n = 10, or a nearly perfect pair).
- **Correction: Holm.** Every endpoint is tested against the same reference, so the tests are
  dependent; Holm controls the family-wise error under any dependence and rejects everything
  Bonferroni rejects, and sometimes more.
- **Power: exact, for the paired test at the Bonferroni level alpha/K.** Holm's first step is that
  level and every later step is laxer, so a gap detectable at alpha/K is detectable under Holm.
  The gap is ``p10 - p01`` (reference right and endpoint wrong, minus the reverse); the model holds
  ``p01`` at the background rate of reverse disagreements (observed, or 0 before any data) and raises
  ``p10`` until the test rejects with the wanted probability.

Everything is computed with the standard library (``math.lgamma``, ``statistics.NormalDist``); the
values are checked in ``tests/test_verify_stats.py`` against closed forms, hand computations and
published tables.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from statistics import NormalDist
from typing import Literal

__all__ = [
    "DEFAULT_ALPHA",
    "DEFAULT_POWER",
    "DEFAULT_TOLERANCE",
    "Comparison",
    "Interval",
    "MeasuredVerdict",
    "PairedCounts",
    "binom_cdf",
    "binom_sf",
    "clopper_pearson",
    "compare_to_reference",
    "holm",
    "mcnemar_exact",
    "mcnemar_power",
    "min_detectable_gap",
    "wilson",
]

MeasuredVerdict = Literal["consistent", "differs", "inconclusive"]

#: Family-wise error rate over all the endpoints compared with the reference.
DEFAULT_ALPHA = 0.05
#: The power at which the minimum detectable gap is stated.
DEFAULT_POWER = 0.8
#: The accuracy gap (a fraction, reference minus endpoint) below which two endpoints count as the
#: same: ``consistent`` needs a sample that would have caught a gap this large with 80% power.
DEFAULT_TOLERANCE = 0.10


@dataclass(frozen=True)
class Interval:
    """A two-sided confidence interval for a proportion (fractions in 0..1)."""

    low: float
    high: float
    level: float = 0.95
    method: str = "clopper-pearson"


def _log_pmf(k: int, n: int, p: float) -> float:
    if p <= 0.0:
        return 0.0 if k == 0 else -math.inf
    if p >= 1.0:
        return 0.0 if k == n else -math.inf
    return (
        math.lgamma(n + 1)
        - math.lgamma(k + 1)
        - math.lgamma(n - k + 1)
        + k * math.log(p)
        + (n - k) * math.log1p(-p)
    )


def binom_cdf(k: int, n: int, p: float) -> float:
    """Return P(X <= k) for X ~ Binomial(n, p)."""
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    return min(1.0, math.fsum(math.exp(_log_pmf(i, n, p)) for i in range(k + 1)))


def binom_sf(k: int, n: int, p: float) -> float:
    """Return P(X >= k) for X ~ Binomial(n, p)."""
    if k <= 0:
        return 1.0
    if k > n:
        return 0.0
    return min(1.0, math.fsum(math.exp(_log_pmf(i, n, p)) for i in range(k, n + 1)))


def _solve(fn: Callable[[float], float], target: float) -> float:
    """Return p in [0, 1] with fn(p) == target for a monotone increasing ``fn`` (bisection)."""
    lo, hi = 0.0, 1.0
    for _ in range(200):
        mid = (lo + hi) / 2
        if fn(mid) < target:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-15:
            break
    return (lo + hi) / 2


def _check_counts(successes: int, n: int) -> None:
    if n < 0 or successes < 0 or successes > n:
        raise ValueError(f"need 0 <= successes <= n, got {successes} of {n}")


def clopper_pearson(successes: int, n: int, *, level: float = 0.95) -> Interval:
    """Return the exact (Clopper-Pearson) interval for ``successes`` out of ``n``.

    The lower bound is the p at which P(X >= successes) = (1 - level)/2, the upper the p at which
    P(X <= successes) = (1 - level)/2; at 0 and n they have closed forms, e.g. 0 of 10 gives
    ``(0, 1 - 0.025 ** (1/10))`` = ``(0, 0.3085)``. ``n == 0`` gives ``(0, 1)``: no information.
    """
    _check_counts(successes, n)
    tail = (1.0 - level) / 2
    if n == 0:
        return Interval(0.0, 1.0, level)
    if successes == 0:
        low = 0.0
    elif successes == n:
        low = tail ** (1.0 / n)
    else:
        low = _solve(lambda p: binom_sf(successes, n, p), tail)
    if successes == n:
        high = 1.0
    elif successes == 0:
        high = 1.0 - tail ** (1.0 / n)
    else:
        # P(X <= x) falls as p rises: solve 1 - cdf (rising) = 1 - tail.
        high = _solve(lambda p: 1.0 - binom_cdf(successes, n, p), 1.0 - tail)
    return Interval(low, high, level)


def wilson(successes: int, n: int, *, level: float = 0.95) -> Interval:
    """Return the Wilson score interval (closer to nominal on average, but may under-cover)."""
    _check_counts(successes, n)
    if n == 0:
        return Interval(0.0, 1.0, level, "wilson")
    z = NormalDist().inv_cdf(1 - (1 - level) / 2)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return Interval(max(0.0, centre - half), min(1.0, centre + half), level, "wilson")


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


@lru_cache(maxsize=4096)
def _critical_b(d: int, alpha: float) -> int:
    """The largest ``k`` such that min(b, c) <= k rejects at ``alpha`` with d discordant pairs (-1:
    no outcome rejects)."""
    k, tail = -1, 0.0
    while k + 1 <= d // 2:
        # the lower tail P(X <= k + 1), summed as it grows
        tail += math.exp(_log_pmf(k + 1, d, 0.5))
        if 2.0 * tail > alpha:
            break
        k += 1
    return k


def mcnemar_power(n: int, *, p10: float, p01: float, alpha: float) -> float:
    """Return the exact power of the two-sided exact McNemar test at level ``alpha``.

    ``n`` pairs, each discordant "reference right, endpoint wrong" with probability ``p10`` and the
    reverse with ``p01``. The discordant count D is Binomial(n, p10 + p01); given D = d, b is
    Binomial(d, p10 / (p10 + p01)); the test rejects when min(b, d - b) is at or below its critical
    value.
    """
    if n < 0 or p10 < 0 or p01 < 0 or p10 + p01 > 1 + 1e-12:
        raise ValueError(f"need n >= 0 and p10, p01 >= 0 with p10 + p01 <= 1, got {p10}, {p01}")
    psi = min(1.0, p10 + p01)
    if n == 0 or psi == 0.0:
        return 0.0
    share = p10 / psi
    total = 0.0
    for d in range(1, n + 1):
        weight = math.exp(_log_pmf(d, n, psi))
        if weight < 1e-16:
            continue
        k = _critical_b(d, alpha)
        if k < 0:
            continue
        # reject when b <= k or b >= d - k
        reject = binom_cdf(k, d, share) + binom_sf(d - k, d, share)
        total += weight * min(1.0, reject)
    return min(1.0, total)


def min_detectable_gap(
    n: int, *, alpha: float, power: float = DEFAULT_POWER, background: float = 0.0
) -> float | None:
    """Return the smallest accuracy gap ``p10 - p01`` that ``n`` pairs detect with ``power``.

    ``background`` is ``p01``, the rate at which the endpoint is right where the reference is wrong
    (noise that both directions share). ``None`` when no gap up to ``1 - 2 * background`` reaches the
    power: the sample is too small for any claim. Resolution: 1e-4.
    """
    if not 0.0 <= background < 0.5:
        raise ValueError(f"background must be in [0, 0.5), got {background}")
    limit = 1.0 - 2.0 * background
    if n == 0 or mcnemar_power(n, p10=background + limit, p01=background, alpha=alpha) < power:
        return None
    lo, hi = 0.0, limit
    while hi - lo > 1e-4:
        mid = (lo + hi) / 2
        if mcnemar_power(n, p10=background + mid, p01=background, alpha=alpha) >= power:
            hi = mid
        else:
            lo = mid
    return hi


@dataclass(frozen=True)
class PairedCounts:
    """Known-answer outcomes of one endpoint paired with the reference's on the same prompts.

    ``both`` right on both, ``ref_only`` right on the reference only (b), ``endpoint_only`` right on
    the endpoint only (c), ``neither`` wrong on both.
    """

    both: int = 0
    ref_only: int = 0
    endpoint_only: int = 0
    neither: int = 0

    @property
    def n(self) -> int:
        return self.both + self.ref_only + self.endpoint_only + self.neither

    @property
    def gap(self) -> float | None:
        """Reference accuracy minus endpoint accuracy on the paired prompts."""
        return None if self.n == 0 else (self.ref_only - self.endpoint_only) / self.n


@dataclass(frozen=True)
class Comparison:
    """One endpoint against the reference: the test, its power and the verdict with its reason."""

    counts: PairedCounts
    p_value: float
    p_adjusted: float
    min_detectable_gap: float | None
    verdict: MeasuredVerdict
    reason: str


def _pct(x: float) -> str:
    return f"{100 * x:.1f} pp"


def compare_to_reference(
    counts: Mapping[str, PairedCounts],
    *,
    alpha: float = DEFAULT_ALPHA,
    tolerance: float = DEFAULT_TOLERANCE,
    power: float = DEFAULT_POWER,
) -> dict[str, Comparison]:
    """Judge each endpoint's paired counts against the reference, Holm-corrected over all of them.

    - ``differs``: the exact McNemar test rejects equal accuracy at family-wise ``alpha``.
    - ``consistent``: it does not, the smallest gap the sample detects with ``power`` (at alpha/K,
      with the observed reverse disagreements as background) is at most ``tolerance``, and the observed
      gap is below ``tolerance``.
    - ``inconclusive``: anything else; the reason says what would be needed.

    Example::

        compare_to_reference({"chutes/int4": PairedCounts(both=180, ref_only=14, neither=6)})
        # {'chutes/int4': Comparison(..., verdict='differs', ...)}
    """
    if not 0.0 < alpha < 1.0 or not 0.0 < power < 1.0 or not 0.0 < tolerance < 1.0:
        raise ValueError("alpha, power and tolerance must be in (0, 1)")
    k = max(1, len(counts))
    raw = {tag: mcnemar_exact(c.ref_only, c.endpoint_only) for tag, c in counts.items()}
    adjusted = holm(raw)
    level = alpha / k
    out: dict[str, Comparison] = {}
    for tag, c in counts.items():
        n = c.n
        if n == 0:
            out[tag] = Comparison(
                c, 1.0, 1.0, None, "inconclusive", "no prompt with a known answer scored on both"
            )
            continue
        background = min(c.endpoint_only / n, 0.4999)
        mdg = min_detectable_gap(n, alpha=level, power=power, background=background)
        gap = c.gap or 0.0
        p_adj = adjusted[tag]
        mdg_text = "none up to 100 pp" if mdg is None else f"{_pct(mdg)}"
        power_text = f"smallest gap detectable with {power:.0%} power at n={n}: {mdg_text}"
        if p_adj <= alpha:
            side = "less" if gap > 0 else "more"
            verdict: MeasuredVerdict = "differs"
            reason = (
                f"{side} accurate than the reference by {_pct(abs(gap))} "
                f"(exact McNemar {c.ref_only} vs {c.endpoint_only}, Holm p={p_adj:.2g} <= {alpha:g})"
            )
        # abs(gap) < tolerance is a guard: a gap that large with this much power is nearly always
        # significant, but "consistent" must never sit beside an observed gap past the tolerance.
        elif mdg is not None and mdg <= tolerance and abs(gap) < tolerance:
            verdict = "consistent"
            reason = (
                f"gap {_pct(gap)} not significant (Holm p={p_adj:.2g}); {power_text} <= "
                f"tolerance {_pct(tolerance)}"
            )
        else:
            verdict = "inconclusive"
            why = (
                f"observed gap {_pct(abs(gap))} is not below tolerance {_pct(tolerance)}"
                if mdg is not None and mdg <= tolerance
                else f"{power_text} > tolerance {_pct(tolerance)}: more prompts needed"
            )
            reason = f"gap {_pct(gap)} not significant (Holm p={p_adj:.2g}); {why}"
        out[tag] = Comparison(c, raw[tag], p_adj, mdg, verdict, reason)
    return out

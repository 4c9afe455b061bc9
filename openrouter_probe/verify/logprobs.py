"""A token-level comparison of top-k logprobs, on the reference's own completions.

Per prompt, the mean total variation on the positions whose context both sides share, against the
same for the reference's second run; a one-sided exact sign test, reported beside the verdict and
never deciding it (``docs/verify.md``, "Token-level logprobs").
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from statistics import fmean
from typing import TYPE_CHECKING

from openrouter_probe.verify.results import TestResult, TestVerdict
from openrouter_probe.verify.stats import binom_sf

if TYPE_CHECKING:
    from openrouter_probe.verify.observation import Observation

__all__ = [
    "LogprobComparison",
    "compare_logprobs",
    "logprob_result",
    "top_k_distance",
]


def top_k_distance(
    p_logprobs: Mapping[str, float], q_logprobs: Mapping[str, float]
) -> tuple[float, float]:
    """Return (total variation, unlisted mass) between two top-k distributions at one position.

    Each side is extended to the union of both top-k lists plus an "other" bucket holding
    ``1 - sum(listed)``; a token one side did not list gets 0 there. The result is exact when both
    lists carry all the mass, and within ``p_rest + q_rest`` (the second value) of the true total
    variation otherwise.
    """
    p = {t: math.exp(v) for t, v in p_logprobs.items()}
    q = {t: math.exp(v) for t, v in q_logprobs.items()}
    p_rest = max(0.0, 1.0 - math.fsum(p.values()))
    q_rest = max(0.0, 1.0 - math.fsum(q.values()))
    tokens = set(p) | set(q)
    tv = 0.5 * (
        math.fsum(abs(p.get(t, 0.0) - q.get(t, 0.0)) for t in tokens) + abs(p_rest - q_rest)
    )
    return min(1.0, tv), p_rest + q_rest


def _shared_distance(mine: Observation, ref: Observation) -> tuple[float, int] | None:
    """Mean total variation over the positions with a shared context, and their number."""
    if mine.failed or ref.failed or not mine.top_logprobs or not ref.top_logprobs:
        return None
    a, b = mine.tokens or (), ref.tokens or ()
    shared = 0
    limit = min(len(mine.top_logprobs), len(ref.top_logprobs), len(a), len(b))
    while shared < limit:
        shared += 1  # this position's context is shared; does the next one's stay so?
        if a[shared - 1] != b[shared - 1]:
            break
    if shared == 0:
        return None
    found = [top_k_distance(mine.top_logprobs[i], ref.top_logprobs[i])[0] for i in range(shared)]
    return fmean(found), shared


@dataclass(frozen=True)
class LogprobComparison:
    """Per prompt: the endpoint's and the floor's mean distance on shared positions."""

    pairs: int  # prompts with logprobs on the endpoint, the reference and its second run
    positions: int  # shared positions compared, over those prompts
    mean_distance: float | None
    mean_floor: float | None
    higher: int  # prompts where the endpoint is further from run 1 than run 2 is
    lower: int

    @property
    def statistic(self) -> float | None:
        if self.mean_distance is None or self.mean_floor is None:
            return None
        return self.mean_distance - self.mean_floor

    @property
    def p_value(self) -> float | None:
        """One-sided exact sign test: ``P(X >= higher)``, ``X ~ Binomial(higher + lower, 1/2)``."""
        n = self.higher + self.lower
        return None if n == 0 else binom_sf(self.higher, n, 0.5)


def compare_logprobs(
    run: Mapping[str, Observation],
    reference: Mapping[str, Observation],
    floor: Mapping[str, Observation] | None,
) -> LogprobComparison:
    """Compare ``run`` with the reference's first run, against its second (``floor``)."""
    d_all, f_all, higher, lower, positions = [], [], 0, 0, 0
    for item, ref in reference.items():
        if floor is None or item not in run or item not in floor:
            continue
        d, f = _shared_distance(run[item], ref), _shared_distance(floor[item], ref)
        if d is None or f is None:
            continue
        d_all.append(d[0])
        f_all.append(f[0])
        positions += d[1]
        higher += d[0] > f[0] + 1e-12
        lower += d[0] < f[0] - 1e-12
    return LogprobComparison(
        len(d_all),
        positions,
        fmean(d_all) if d_all else None,
        fmean(f_all) if f_all else None,
        higher,
        lower,
    )


def logprob_result(found: LogprobComparison, *, alpha: float, tests: int = 1) -> TestResult | None:
    """The comparison as a test result beside the verdict (``None`` with no logprob pairs).

    ``p_adjusted`` is Bonferroni over the ``tests`` endpoints compared (``min(1, tests * p)``),
    so that no endpoint of a null check is called ``differs`` by it more than ``alpha`` of the
    time; ``differs`` when it is at most ``alpha``, else ``inconclusive`` (no margin is set for
    logprobs, so no equivalence is claimed)."""
    if found.pairs == 0:
        return None
    p = found.p_value
    adjusted = None if p is None else min(1.0, max(1, tests) * p)
    verdict: TestVerdict = (
        "differs" if adjusted is not None and adjusted <= alpha else "inconclusive"
    )
    detail = (
        f"top-k logprobs on the reference's own completions: mean total variation "
        f"{found.mean_distance:.4f} against the floor's {found.mean_floor:.4f} over "
        f"{found.positions} shared positions of {found.pairs} prompts; further than the floor "
        f"on {found.higher}, nearer on {found.lower} (one-sided sign test, Bonferroni over "
        f"{max(1, tests)} endpoint(s)); supporting "
        "evidence only"
    )
    finding = None
    if verdict == "differs" and adjusted is not None:
        finding = (
            "token logprobs differ from the reference's more than its own second run's "
            f"(sign test, adjusted p={adjusted:.2g}; supporting evidence, not the verdict)"
        )
    return TestResult(
        "logprobs", found.statistic, p, None, verdict, detail, p_adjusted=adjusted, finding=finding
    )

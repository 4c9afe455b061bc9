"""The sampled arm's two-sample test: MMD with a Hamming kernel (issue 35 item 1).

Gao, Liang & Guestrin, "Model Equality Testing: Which Model Is This API
Serving?" (ICLR 2025) compare an endpoint's completions with the reference's
by the maximum mean discrepancy under the Hamming kernel: for two completions
``x`` and ``y`` cut to ``length`` units, ``k(x, y)`` counts the positions
``i < length`` where both have a unit and ``x[i] == y[i]``, divided by
``length``. Units are tokens when the caller has them; a character string is
the documented proxy (each character one unit).

The statistic is the unbiased estimate of MMD squared; its p-value comes from
``permutations`` seeded random relabellings of the pooled samples (the
observed split counted once, so ``p >= 1 / (permutations + 1)``).

Not yet built here (see the branch report): the fake's sampling model, the
plan's N and power, and joining these p-values to ``stats.holm``'s family.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from openrouter_probe.verify.stats import Interval

Completion = Sequence[object]

__all__ = ["SampledTest", "hamming_kernel", "mmd_squared", "mmd_test"]


@dataclass(frozen=True)
class SampledTest:
    """One endpoint's sampled-arm result, shaped to plug into any report.

    ``verdict`` is ``differs`` when ``p_value`` is at or under the level the
    caller judged it at, else ``inconclusive`` (an MMD test cannot show
    equality). ``interval`` is ``None``: the permutation test gives none."""

    name: str
    statistic: float
    p_value: float
    verdict: str
    permutations: int
    interval: Interval | None = None


def hamming_kernel(x: Completion, y: Completion, length: int) -> float:
    """Share of the first ``length`` positions where ``x`` and ``y`` agree."""
    if length < 1:
        raise ValueError(f"length must be >= 1 (got {length}); use e.g. 50")
    same = sum(1 for a, b in zip(x[:length], y[:length], strict=False) if a == b)
    return same / length


def _gram(pool: Sequence[Completion], length: int) -> list[list[float]]:
    size = len(pool)
    gram = [[0.0] * size for _ in range(size)]
    for i in range(size):
        for j in range(i + 1, size):
            gram[i][j] = gram[j][i] = hamming_kernel(pool[i], pool[j], length)
    return gram


def _mmd_from_gram(gram: list[list[float]], first: list[int], second: list[int]) -> float:
    def mean_within(idx: list[int]) -> float:
        n = len(idx)
        total = sum(gram[a][b] for a in idx for b in idx if a != b)
        return total / (n * (n - 1))

    cross = sum(gram[a][b] for a in first for b in second)
    return mean_within(first) + mean_within(second) - 2 * cross / (len(first) * len(second))


def _check(reference: Sequence[Completion], endpoint: Sequence[Completion]) -> None:
    if len(reference) < 2 or len(endpoint) < 2:
        raise ValueError(
            f"the MMD test needs >= 2 samples per side (got {len(reference)} reference, "
            f"{len(endpoint)} endpoint); raise the sampled arm's N"
        )


def mmd_squared(
    reference: Sequence[Completion], endpoint: Sequence[Completion], *, length: int
) -> float:
    """Unbiased MMD squared between the two samples under the Hamming kernel."""
    _check(reference, endpoint)
    pool = [*reference, *endpoint]
    n = len(reference)
    return _mmd_from_gram(_gram(pool, length), list(range(n)), list(range(n, len(pool))))


def mmd_test(
    name: str,
    reference: Sequence[Completion],
    endpoint: Sequence[Completion],
    *,
    length: int,
    permutations: int,
    seed: int,
    alpha: float,
) -> SampledTest:
    """Permutation MMD test of ``endpoint`` against ``reference`` at level ``alpha``."""
    _check(reference, endpoint)
    if permutations < 1:
        raise ValueError(f"permutations must be >= 1 (got {permutations}); use e.g. 1000")
    pool = [*reference, *endpoint]
    gram = _gram(pool, length)
    n = len(reference)
    idx = list(range(len(pool)))
    observed = _mmd_from_gram(gram, idx[:n], idx[n:])
    rng = random.Random(seed)
    at_least = 1
    for _ in range(permutations):
        rng.shuffle(idx)
        if _mmd_from_gram(gram, idx[:n], idx[n:]) >= observed:
            at_least += 1
    p_value = at_least / (permutations + 1)
    verdict = "differs" if p_value <= alpha else "inconclusive"
    return SampledTest(name, observed, p_value, verdict, permutations)

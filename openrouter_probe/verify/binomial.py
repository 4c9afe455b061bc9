"""The binomial distribution's probabilities for the exact tests and power sums of
``verify.stats``: a power sum takes millions of terms for one ``min_detectable_gap``, each from
three log factorials, read here from a table kept across calls (the same floats as
``math.lgamma``'s)."""

from __future__ import annotations

import math
import threading

__all__ = ["log_pmf", "pmf_sum"]

#: Up to this ``n`` the log factorials come from a table kept across calls (at most 3.2 MB).
_TABLE_LIMIT = 100_000
_LOG_FACTORIALS = [0.0]
#: One thread grows the table at a time: ``verify`` plans in worker threads, and two growing it
#: at once would append the same entries twice (every later lookup wrong).
_GROWING = threading.Lock()


def _log_factorials(n: int) -> list[float]:
    """``math.lgamma(i + 1)`` for i in 0..n at least (``n <= _TABLE_LIMIT``), grown once and kept."""
    table = _LOG_FACTORIALS
    if len(table) <= n:
        with _GROWING:
            table.extend([math.lgamma(i + 1) for i in range(len(table), n + 1)])
    return table


def log_pmf(k: int, n: int, p: float) -> float:
    """Return log P(X = k) for X ~ Binomial(n, p) (``-inf`` where it is 0)."""
    if p <= 0.0:
        return 0.0 if k == 0 else -math.inf
    if p >= 1.0:
        return 0.0 if k == n else -math.inf
    if n > _TABLE_LIMIT:
        top, low, high = math.lgamma(n + 1), math.lgamma(k + 1), math.lgamma(n - k + 1)
    else:
        table = _log_factorials(n)
        top, low, high = table[n], table[k], table[n - k]
    return top - low - high + k * math.log(p) + (n - k) * math.log1p(-p)


def pmf_sum(first: int, last: int, n: int, p: float) -> float:
    """P(first <= X <= last) for X ~ Binomial(n, p): the terms of ``log_pmf`` (the same floats),
    with the table looked up once and the logs of p and 1 - p taken once, summed by ``fsum``."""
    if p <= 0.0 or p >= 1.0 or n > _TABLE_LIMIT:
        return math.fsum(math.exp(log_pmf(i, n, p)) for i in range(first, last + 1))
    table, exp = _log_factorials(n), math.exp
    top, log_p, log_q = table[n], math.log(p), math.log1p(-p)
    return math.fsum(
        [
            exp(top - table[i] - table[n - i] + i * log_p + (n - i) * log_q)
            for i in range(first, last + 1)
        ]
    )

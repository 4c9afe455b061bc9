"""The binomial probabilities' kept table of log factorials."""

from __future__ import annotations

import math
import threading

import pytest

from openrouter_probe.verify import binomial


def test_threads_growing_the_table_at_once_leave_it_whole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``verify`` plans in worker threads: eight of them growing an empty table to 60,000 at
    once leave exactly one entry per factorial, and every later probability right."""
    monkeypatch.setattr(binomial, "_LOG_FACTORIALS", [0.0])
    start = threading.Barrier(8)

    def grow() -> None:
        start.wait()
        binomial._log_factorials(60_000)

    threads = [threading.Thread(target=grow) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    table = binomial._LOG_FACTORIALS
    assert len(table) == 60_001
    assert all(table[i] == math.lgamma(i + 1) for i in range(0, 60_001, 997))
    n, k, p = 50_000, 15_000, 0.3
    by_lgamma = (
        math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)
        + k * math.log(p) + (n - k) * math.log1p(-p)
    )  # fmt: skip
    assert binomial.log_pmf(k, n, p) == by_lgamma

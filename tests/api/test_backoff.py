"""``api.backoff``: bounded waits, grown and capped, a ``Retry-After`` honoured within the cap,
the deadline and the attempts kept (no test waits: each wait is computed, never slept)."""

from __future__ import annotations

from openrouter_probe.api.backoff import Backoff


def test_backoff_grows_and_is_capped() -> None:
    b = Backoff(wait_initial_s=0.5, wait_max_s=4.0, wait_jitter_s=1.0, attempts=10, timeout_s=None)
    waits = [b.next_wait(attempt=n, rand=lambda: 0.0).wait_s for n in range(1, 6)]
    assert waits == [0.5, 1.0, 2.0, 4.0, 4.0]
    assert b.next_wait(attempt=1, rand=lambda: 1.0).wait_s == 1.5
    assert b.next_wait(attempt=4, rand=lambda: 1.0).wait_s == 4.0  # jitter never passes the cap


def test_backoff_honours_retry_after_within_cap() -> None:
    b = Backoff(wait_max_s=20.0, attempts=5, timeout_s=60.0)
    d = b.next_wait(attempt=1, retry_after_s=3.0)
    assert (d.wait_s, d.give_up) == (3.0, False)
    assert b.next_wait(attempt=1, retry_after_s=0.0).wait_s == 0.0


def test_backoff_refuses_a_long_retry_after_at_once() -> None:
    b = Backoff(wait_max_s=20.0, attempts=5, timeout_s=60.0)
    d = b.next_wait(attempt=1, retry_after_s=3600.0)
    assert d.give_up
    assert d.retry_after_s == 3600.0
    assert "60 min" in d.reason and "20 s" in d.reason


def test_backoff_respects_deadline_and_attempts() -> None:
    b = Backoff(wait_initial_s=8.0, wait_max_s=20.0, wait_jitter_s=0.0, attempts=3, timeout_s=10.0)
    assert b.next_wait(attempt=1, elapsed_s=7.0).wait_s == 3.0  # only the time left
    assert b.next_wait(attempt=1, retry_after_s=5.0, elapsed_s=7.0).give_up
    assert b.next_wait(attempt=1, elapsed_s=10.0).give_up
    assert b.next_wait(attempt=3).give_up
    assert "3 attempts" in b.next_wait(attempt=3).reason

"""Bounded waits: how long to wait before a retry, and when to stop retrying.

One policy serves the sync client and the run, and so does what it reads from the wire:
``TRANSIENT_STATUSES`` and ``retry_after_s`` (``Retry-After``, in seconds or as an HTTP date).
Every wait is capped by ``wait_max_s`` and by the time left; a server that asks for more is
answered "give up now, retry after ..." rather than slept on in silence (docs/api.md, "Retries,
bounded and visible"). The computation is a pure function of its inputs (the random draw is
injected), so it is tested without waiting.

Example::

    from openrouter_probe.api.backoff import Backoff

    policy = Backoff(wait_initial_s=0.5, wait_max_s=20, attempts=5, timeout_s=60)
    decision = policy.next_wait(attempt=1, retry_after_s=2.0, elapsed_s=0.3)
    if decision.give_up:
        raise SomeError(decision.reason)
    await asyncio.sleep(decision.wait_s)
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC
from email.utils import parsedate_to_datetime
from typing import Any

__all__ = [
    "MAX_RETRY_AFTER_S",
    "TRANSIENT_STATUSES",
    "Backoff",
    "WaitDecision",
    "http_date",
    "retry_after_s",
    "said_wait_s",
]

#: The HTTP statuses worth another attempt, for every caller (the sync client, the run's failure
#: table): 408 (timeout), 429 (rate limited), 500, 502 (provider returned an invalid answer), 503,
#: 504, Cloudflare's 520 (unknown origin error) and 522 (origin connection timed out) in front of
#: openrouter.ai, 524 (edge timeout) and 529 (provider overloaded) (OPENROUTER.md 9.1).
TRANSIENT_STATUSES = frozenset({408, 429, 500, 502, 503, 504, 520, 522, 524, 529})

#: The longest ``Retry-After`` read as such (a day): a date years ahead is a day, which every
#: caller's cap turns into "give up, retry after ..." anyway.
MAX_RETRY_AFTER_S = 86_400.0


def retry_after_s(
    value: str | None, *, date: str | None = None, now_s: Callable[[], float] = time.time
) -> float | None:
    """Read a ``Retry-After`` header: seconds (``"61"``) or an HTTP date
    (``"Tue, 01 Dec 2026 18:30:00 GMT"``), as seconds from now, capped at ``MAX_RETRY_AFTER_S``.

    A date is measured from the answer's own ``Date`` header when it has one (the server's clock
    against the server's clock), else from ``now_s()`` (epoch seconds). A date in the past is 0;
    anything else (empty, ``"soon"``, NaN) is ``None``, as if there were no header.
    """
    if value is None:
        return None
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        when = http_date(text)
        if when is None:
            return None
        base = http_date(date)
        seconds = when - (base if base is not None else now_s())
    if not math.isfinite(seconds):
        return None
    return min(MAX_RETRY_AFTER_S, max(0.0, seconds))


def said_wait_s(
    headers: Mapping[str, str], metadata: Mapping[str, Any] | None = None
) -> float | None:
    """The one reading of "wait": the answer's ``Retry-After`` header, else the one its body
    carries in ``error.metadata.headers`` (2026 in-flight 402s and key-wide 429s say their wait
    there, with no header: OPENROUTER.md 15, 19), read by ``retry_after_s`` (names matched
    whatever their case). ``None``: neither says."""
    found = retry_after_s(headers.get("Retry-After"), date=headers.get("Date"))
    inner = (metadata or {}).get("headers")
    if found is not None or not isinstance(inner, Mapping):
        return found
    named = {str(name).lower(): value for name, value in inner.items()}
    value = named.get("retry-after")
    return retry_after_s(str(value) if value is not None else None, date=named.get("date"))


def http_date(text: str | None) -> float | None:
    """An HTTP date (RFC 9110: IMF-fixdate, or the obsolete forms) in epoch seconds (``None``:
    absent or unreadable)."""
    if not text:
        return None
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # "-0000" or no zone: HTTP dates are GMT
        when = when.replace(tzinfo=UTC)
    return when.timestamp()


@dataclass(frozen=True)
class WaitDecision:
    """What to do before the next attempt: wait ``wait_s`` seconds, or give up (with ``reason``)."""

    wait_s: float
    give_up: bool = False
    reason: str = ""
    retry_after_s: float | None = None


@dataclass(frozen=True)
class Backoff:
    """Exponential backoff with jitter, honouring ``Retry-After`` within a cap.

    ``attempts`` counts every try, the first included. ``timeout_s`` bounds the whole series of
    attempts (``None``: no overall deadline). Waits grow as ``wait_initial_s * 2**(attempt-1)`` up to
    ``wait_max_s``, plus up to ``wait_jitter_s`` of random jitter (never past the cap).
    """

    wait_initial_s: float = 0.5
    wait_max_s: float = 20.0
    wait_jitter_s: float = 1.0
    attempts: int = 5
    timeout_s: float | None = 60.0

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError("attempts must be at least 1")
        if self.wait_initial_s < 0 or self.wait_max_s < 0 or self.wait_jitter_s < 0:
            raise ValueError("waits must not be negative")

    def next_wait(
        self,
        *,
        attempt: int,
        retry_after_s: float | None = None,
        elapsed_s: float = 0.0,
        rand: Callable[[], float] = random.random,
        wait_the_cap: bool = False,
    ) -> WaitDecision:
        """Decide the wait after failed attempt number ``attempt`` (1-based).

        ``retry_after_s`` is what the server asked for (``Retry-After``), ``elapsed_s`` the time spent
        since the first attempt started. Gives up when the attempts are used up, when the server asks
        for more than ``wait_max_s`` or than the time left, or when no time is left.
        ``wait_the_cap``: a server that asks for more than the cap is waited the cap instead, so
        that a transient failure becomes final only when its attempts or its time are spent (the
        run's rows; the sync client answers at once, saying when to retry).
        """
        if attempt >= self.attempts:
            return WaitDecision(
                0.0, give_up=True, reason=f"gave up after {attempt} attempts", retry_after_s=None
            )
        left = None if self.timeout_s is None else self.timeout_s - elapsed_s
        if left is not None and left <= 0:
            return WaitDecision(
                0.0, give_up=True, reason=f"gave up after {elapsed_s:.0f} s of retries"
            )
        cap = self.wait_max_s if left is None else min(self.wait_max_s, left)
        if retry_after_s is not None:
            asked = max(0.0, retry_after_s)
            if asked > cap and wait_the_cap:
                return WaitDecision(cap, retry_after_s=asked)
            if asked > cap:
                return WaitDecision(
                    0.0,
                    give_up=True,
                    reason=f"the server asked to retry after {_seconds(asked)}, "
                    f"longer than the {_seconds(cap)} this call may wait",
                    retry_after_s=asked,
                )
            return WaitDecision(asked, retry_after_s=asked)
        exp = self.wait_initial_s * (2 ** (attempt - 1))
        wait = min(cap, exp + self.wait_jitter_s * rand())
        return WaitDecision(max(0.0, wait))


def _seconds(value: float) -> str:
    if value >= 120:
        return f"{value / 60:.0f} min"
    if value >= 10:
        return f"{value:.0f} s"
    return f"{value:.1f} s"

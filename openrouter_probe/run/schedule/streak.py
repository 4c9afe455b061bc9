"""When nearly every recent attempt fails for one transient reason: ``FailureStreak``.

A transient failure is retried (``run.send.failure``: 408, 429, 5xx, cut streams); that is right for one
row, and wrong for a run in which every row meets the same wall (an upstream that answers 502 to
everything, a key throttled for an hour): each row would spend its attempts and fail in turn, and
the output would hold a column of failures to redo. So the run watches its recent attempts: when at
least ``share`` of the last ``window`` (and at least ``least`` of them) failed transiently for the
same reason, it stops with that reason (exit 1; the rows not yet answered stay unsent, and a rerun of
the same command resumes them).

A reason is what the failure says, with its numbers and ids taken out: the HTTP status (or the
error's own code inside a 200) and the first words of the message (not the provider: with
fallbacks allowed, every provider may fail the same way). An answer is a success in the window, whatever its finish; a row's first failure is left out (a
burst its retries get through is not a wall), its retries that fail again count.

The detector knows nothing of money or scheduling: the run calls ``see`` once per attempt's outcome
and stops when it returns a message.
"""

from __future__ import annotations

import re
from collections import Counter, deque
from typing import Any

from openrouter_probe.run.send.failure import Failure

__all__ = ["FailureStreak"]

_NUMBERS = re.compile(r"\d+(?:\.\d+)?")


def reason_of(failure: Failure) -> str:
    """The reason a transient failure gives, without what varies from one attempt to the next
    (numbers, ids, which provider said it: with fallbacks every provider may fail alike):
    ``"HTTP 502 Provider returned error"``."""
    status = failure.status if failure.status not in (None, 200) else failure.code
    words = _NUMBERS.sub("N", failure.message.split(" (", 1)[0].split(";", 1)[0])[:80]
    head = f"HTTP {status} " if status is not None else ""
    return f"{head}{words}"


class FailureStreak:
    """Watch the last ``window`` attempts; say when at least ``share`` of them (and ``least`` in
    number) failed transiently for one reason."""

    def __init__(self, *, window: int = 50, share: float = 0.9, least: int = 30) -> None:
        if not 0 < share <= 1 or least < 1 or window < least:
            raise ValueError("need 0 < share <= 1 and 1 <= least <= window")
        self.window = window
        self.share = share
        self.least = least
        self._recent: deque[str | None] = deque(maxlen=window)
        self._counts: Counter[str] = Counter()

    def see(self, outcome: Any, attempt: int = 2) -> str | None:
        """Count one attempt's outcome (an answer or a ``Failure``; ``attempt``, its row's attempt
        number from 1); return the message to stop with when the run should stop, else ``None``.

        A row's first failure is not counted: a burst of 429s that the retries get through (a
        rate-limit storm at the start, 100 rows in flight) is not a wall. What counts is a retry
        that fails again, and every answer."""
        failed = isinstance(outcome, Failure)
        if failed and attempt < 2:
            return None
        reason = reason_of(outcome) if failed and outcome.kind == "transient" else None
        if len(self._recent) == self.window:
            gone = self._recent[0]
            if gone is not None:
                self._counts[gone] -= 1
        self._recent.append(reason)
        if reason is None:
            return None
        self._counts[reason] += 1
        count = self._counts[reason]
        if count < self.least or count < self.share * len(self._recent):
            return None
        return (
            f"{count} of the last {len(self._recent)} attempts failed the same way: {reason}. "
            "Nothing suggests the next rows would fare better; the rows not answered are left "
            "unsent: rerun the same command later to resume them"
        )

"""Why a paid run ended (``StopReason``), each reason with its exit code.

A reason is a ``StrEnum``: its value is the string the summary's JSON, the progress line and its
text (``run.report.render_result``) have always written (``"done"``, ``"budget-spent"``, ...),
and it compares equal to that string, so journals, summaries and callers that compare with
strings read as before.
The CLI exits with ``reason.exit_code``: 0 for a run that ended as asked, 130 for one stopped by
Ctrl-C (or SIGTERM), 1 otherwise.

``WriteStop`` is what a failed write of the output, its journal or the turns file calls: it says
the first in one line and stops the run (``write-failed``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from enum import StrEnum

__all__ = ["StopReason", "WriteStop"]

log = logging.getLogger(__name__)

#: The reasons of a run that ended as asked (exit 0).
_AS_ASKED = frozenset({"done", "budget", "target", "dry-run", "pilot"})
#: The reasons of a run stopped by a signal (exit 130, as a shell reports SIGINT).
_SIGNALLED = frozenset({"interrupted", "cancelled"})


class StopReason(StrEnum):
    """Why a run stopped; ``exit_code`` is the CLI's (see the module), ``words`` what the summary
    says of it."""

    words: str

    def __new__(cls, value: str, words: str = "") -> StopReason:  # ("": a lookup by value)
        member = str.__new__(cls, value)
        member._value_ = value
        member.words = words
        return member

    DONE = "done", "every row was sent (or was finished before)"
    BUDGET = "budget", "the spend cap (or every dataset's share of it) is reached"
    TARGET = "target", "every dataset reached target_tokens"
    DRY_RUN = "dry-run", "dry_run=True: nothing was sent"
    PILOT = "pilot", "the first N rows of each dataset were sent; the rest wait for a rerun"
    INTERRUPTED = "interrupted", "stopped by a signal; the requests in flight finished"
    #: the second Ctrl-C, or the drain took too long
    CANCELLED = "cancelled", "a second signal cancelled the requests in flight"
    #: rows in a row got no answer at all
    UNREACHABLE = "unreachable", "the server could not be reached"
    #: the key's own 429 asked for longer than ``max_wait_s``
    RATE_LIMITED = "rate-limited", "the key is rate limited for longer than the run may wait"
    CREDITS = "credits", "OpenRouter says the credits are insufficient"
    #: a 402 or 403 saying so
    KEY_LIMIT = "key-limit", "the key's own limit is spent"
    #: one request alone refused by it, again and again
    IN_FLIGHT = "in-flight", "OpenRouter's in-flight budget held no more requests"
    KEY = "key", "OpenRouter refused the key"
    NO_ROUTE = "no-route", "OpenRouter admits no endpoint: policy or account settings"
    #: a 403, or one is below a request's worst case
    BUDGET_SPENT = "budget-spent", "an OpenRouter budget is spent"
    #: one transient way (``run.schedule.streak``)
    FAILING = "failing", "nearly every recent attempt failed the same way"
    ALL_FAILED = "all-failed", "every row sent failed"
    #: the output, its journal or the turns file
    WRITE_FAILED = "write-failed", "the output could not be written"
    #: batch mode, as the three below (a rerun fetches the results, polls a running batch)
    BATCH_REFUSED = "batch-refused", "OpenRouter refused a batch"
    BATCH_UNREAD = "batch-unread", "a batch's results could not be read"
    BATCH_FAILED = "batch-failed", "a batch failed"
    BATCH_RUNNING = "batch-running", "a batch is still running"

    @property
    def exit_code(self) -> int:
        """0: the run ended as asked; 130: a signal stopped it; 1: anything else."""
        if self.value in _AS_ASKED:
            return 0
        return 130 if self.value in _SIGNALLED else 1

    def why(self) -> list[str]:
        """The summary's first line for a run that did not end as asked, in words (``[]`` for
        one that did): ``["not finished (exit 1): every row sent failed"]``."""
        if self.as_asked:
            return []
        return [f"not finished (exit {self.exit_code}): {self.words}"]

    @property
    def as_asked(self) -> bool:
        """Whether the run ended as its caller asked (done, a cap, a target, a dry run)."""
        return self.value in _AS_ASKED


class WriteStop:
    """What a failed write of the output or the journal calls (once each): say it in one line
    (the first only) and stop sending (``stop``: the run's, ``Waits.stop``); what is in flight
    settles into the journal if it can."""

    def __init__(self, stop: Callable[[StopReason, str], None]) -> None:
        self.stop = stop
        self.line: str | None = None  # the first

    def __call__(self, line: str) -> None:
        if self.line is not None:
            return
        self.line = line
        log.error(line)
        self.stop(StopReason.WRITE_FAILED, line)

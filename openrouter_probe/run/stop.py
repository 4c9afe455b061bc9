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


#: What each reason of a run that did not end as asked means, in words.
_WORDS = {
    "interrupted": "stopped by a signal; the requests in flight finished",
    "cancelled": "a second signal cancelled the requests in flight",
    "unreachable": "the server could not be reached",
    "rate-limited": "the key is rate limited for longer than the run may wait",
    "credits": "OpenRouter says the credits are insufficient",
    "key-limit": "the key's own limit is spent",
    "in-flight": "OpenRouter's in-flight budget held no more requests",
    "key": "OpenRouter refused the key",
    "no-route": "OpenRouter admits no endpoint: policy or account settings",
    "budget-spent": "an OpenRouter budget is spent",
    "failing": "nearly every recent attempt failed the same way",
    "all-failed": "every row sent failed",
    "write-failed": "the output could not be written",
    "batch-refused": "OpenRouter refused a batch",
    "batch-unread": "a batch's results could not be read",
    "batch-failed": "a batch failed",
    "batch-running": "a batch is still running",
}


class StopReason(StrEnum):
    """Why a run stopped; ``exit_code`` is the CLI's (see the module)."""

    #: every row was sent (or was finished before)
    DONE = "done"
    #: the spend cap (or every dataset's share of it) is reached
    BUDGET = "budget"
    #: every dataset reached ``target_tokens``
    TARGET = "target"
    #: ``dry_run=True``: nothing was sent
    DRY_RUN = "dry-run"
    #: ``pilot=N``: the first N rows of each dataset were sent; the rest wait for a rerun
    PILOT = "pilot"
    #: the first Ctrl-C (or SIGTERM): the requests in flight finished
    INTERRUPTED = "interrupted"
    #: the second Ctrl-C, or the drain took too long: requests in flight were cancelled
    CANCELLED = "cancelled"
    #: rows in a row got no answer at all
    UNREACHABLE = "unreachable"
    #: the key's own 429 asked for longer than ``max_wait_s``
    RATE_LIMITED = "rate-limited"
    #: OpenRouter said the credits are insufficient (402)
    CREDITS = "credits"
    #: a 402 or 403 saying the key's own limit is spent
    KEY_LIMIT = "key-limit"
    #: one request alone refused by the in-flight budget, again and again
    IN_FLIGHT = "in-flight"
    #: the key was refused (401)
    KEY = "key"
    #: OpenRouter found no endpoint for the request (404)
    NO_ROUTE = "no-route"
    #: an OpenRouter budget is spent (403), or one is below a request's worst case
    BUDGET_SPENT = "budget-spent"
    #: nearly every recent attempt failed one transient way (``run.schedule.streak``)
    FAILING = "failing"
    #: every row the run sent failed: nothing was answered
    ALL_FAILED = "all-failed"
    #: the output or its journal could not be written
    WRITE_FAILED = "write-failed"
    #: OpenRouter refused a batch submit (batch mode, as the four below)
    BATCH_REFUSED = "batch-refused"
    #: a batch finished, but its results could not be read (a rerun fetches them)
    BATCH_UNREAD = "batch-unread"
    #: a batch failed
    BATCH_FAILED = "batch-failed"
    #: a batch is still running past the batch window (a rerun polls it again)
    BATCH_RUNNING = "batch-running"

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
        return [f"not finished (exit {self.exit_code}): {_WORDS.get(self.value, self.value)}"]

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

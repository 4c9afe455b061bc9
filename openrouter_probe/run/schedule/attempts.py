"""The attempt policy: what a failed attempt leads to, in one table (``ON_FAILURE``).

``run.send.failure``'s table of OpenRouter's errors decides a failure's kind; this module decides, by
that kind, what follows: a ``Decision`` the scheduler (``run.schedule.runner``) carries out, never a branch
of its own.

- ``transient`` (408, upstream 429, 5xx, timeouts, cut streams, keep-alives only): ``Retry`` after
  the backoff's wait (Retry-After, else exponential with jitter, from the row's first send; a
  rate limit's Retry-After up to ``max_wait_s``); when the attempts or the time run out, ``Fail``
  the row.
- ``pause`` (OpenRouter's own 429 for the key): ``Pause`` the pool for Retry-After; beyond
  ``max_wait_s``, or after ``PAUSES_BEFORE_STOP`` pauses with no answer between, ``Stop`` the run
  (``rate-limited``), the row unsent.
- ``held`` (a 402 saying the account's in-flight budget is full): ``Hold``: the row waits for
  Retry-After and goes again, never counted a failure; the dollar window shrinks. A request refused
  alone ``LONE_REFUSALS_BEFORE_STOP`` times in a row: ``Lower`` (under ``lower_max_tokens``) or
  ``Stop`` (``in-flight``; ``budget`` when the run held ``SHRUNK_BELOW_REQUESTS`` such requests
  before and the cap has room for fewer than ``CAP_TAIL_REQUESTS`` more). Why each: docs/wire.md,
  the ``in_flight`` row.
- ``row`` (400, 403, 413, 422: this request itself is wrong): ``Fail`` the row; the run goes on.
- ``run`` (401 key, 402 credits, the key's own limit, a 403 budget spent, 404 no route: no request
  can succeed): ``Stop`` the run, the row unsent; a 402 that affords fewer tokens is sent again
  ``Lower`` under ``lower_max_tokens``.
- nearly every recent attempt failing for one transient reason (``run.schedule.streak``): ``Stop`` the run
  (``failing``), the rows left unsent.

Every reason a run stops for is decided here, as a ``Stop`` (``stop_for`` by status, and
``row_failed``: ``UNREACHABLE_AFTER_ROWS`` rows in a row with no answer at all): a new one (a
budget 403, a failure streak) is one more function returning a ``Stop``. Every attempt settles its
money in the books first, whatever follows.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from openrouter_probe.errors import Message
from openrouter_probe.run.config import RunPlan
from openrouter_probe.run.counts import Counts
from openrouter_probe.run.money.limit import DollarWindow
from openrouter_probe.run.rows import PromptRow
from openrouter_probe.run.schedule.streak import FailureStreak
from openrouter_probe.run.send.attempt import Attempt
from openrouter_probe.run.send.failure import Failure, FailureKind
from openrouter_probe.run.stop import StopReason

__all__ = [
    "HELD_LINE",
    "LONE_REFUSALS_BEFORE_STOP",
    "ON_FAILURE",
    "PAUSES_BEFORE_STOP",
    "UNREACHABLE_AFTER_ROWS",
    "AttemptPolicy",
    "Decision",
    "Fail",
    "Hold",
    "Lower",
    "Pause",
    "Retry",
    "Stop",
]

#: Rows failed in a row with no HTTP answer at all after which a run stops as ``unreachable``.
UNREACHABLE_AFTER_ROWS = 8
#: Pauses for the key's own 429 in a row, with no answer between, after which the run stops.
PAUSES_BEFORE_STOP = 5
#: In-flight 402s in a row for a request alone in flight after which it is too large to hold.
LONE_REFUSALS_BEFORE_STOP = 3
#: A request refused alone while the run once held this many such requests' worst case: the
#: budget shrank with the balance it is a share of, and the run stops at ``budget``.
SHRUNK_BELOW_REQUESTS = 2
#: A run stopped by the in-flight budget while its cap has room for fewer than this many more
#: requests stopped at the cap (``budget``, exit 0); with more room, the balance stopped it.
CAP_TAIL_REQUESTS = 10
#: The line a longer in-flight wait is said with (the row, the seconds).
HELD_LINE = "OpenRouter's in-flight budget is full: %s waits %.0f s as it asked, then goes again"
#: The wait after an in-flight 402 that names no Retry-After.
HOLD_WAIT_S = 2.0
_ZERO = Decimal(0)


@dataclass(frozen=True, slots=True)
class Retry:
    """Send again after ``wait_s`` (a stop cancels the wait: the row is unsent)."""

    wait_s: float


@dataclass(frozen=True, slots=True)
class Hold:
    """The account's in-flight budget is full: send again after ``wait_s``, not a failure (a stop
    cancels the wait: the row is unsent)."""

    wait_s: float


@dataclass(frozen=True, slots=True)
class Pause:
    """Every request waits ``wait_s``; ``joined``: the attempt left before the pool's pause began,
    which was for it too: wait for that one, and send again."""

    wait_s: float
    joined: bool = False


@dataclass(frozen=True, slots=True)
class Fail:
    """The row fails (``why`` is added to the failure's message); the run goes on."""

    why: str = ""


@dataclass(frozen=True, slots=True)
class Stop:
    """The run stops (``reason`` is the summary's ``stop_reason``); the row is unsent."""

    reason: StopReason
    message: str


@dataclass(frozen=True, slots=True)
class Lower:
    """Send again at ``max_tokens`` (a 402 affording fewer tokens, ``lower_max_tokens``)."""

    max_tokens: int


Decision = Retry | Hold | Pause | Fail | Stop | Lower


class AttemptPolicy:
    """Decides what follows a failed attempt (``decide``) and when failures stop the run."""

    def __init__(
        self,
        options: RunPlan,
        *,
        model: str,
        policy: str,
        max_tokens_of: Callable[[PromptRow], int],
        window: DollarWindow | None = None,
        held: Callable[[], tuple[Decimal, int]] | None = None,
        cap_left: Callable[[], Decimal | None] | None = None,
    ) -> None:
        self.options = options
        #: the dollars in flight, and what the others in flight hold (``run.money.limit``; the runner's)
        self.window = window or DollarWindow()
        self.held = held or (lambda: (_ZERO, 0))
        #: what is left of the user's cap (``None``: no cap): whether it is the cap that stops
        self.cap_left = cap_left or (lambda: None)
        self.model = model
        self.policy = policy  # the policy's name, for the no-route advice
        self.max_tokens_of = max_tokens_of
        self.pauses_in_a_row = 0
        # Rows given up on in a row without one HTTP answer (refused, reset, stalled): the server
        # is unreachable, and going on would only grind through every row.
        self.unanswered_streak = 0
        self.streak = FailureStreak()  # nearly every recent attempt failing for one reason

    def decide(self, row: PromptRow, failure: Failure, attempt: Attempt, pauses: int) -> Decision:
        """What follows ``failure`` of ``row``'s attempt (``pauses``: the pool's so far): the
        run stops when nearly every recent attempt failed this way (``run.schedule.streak``)."""
        same = self.streak.see(failure, attempt.number)
        if same is not None:
            return Stop(StopReason.FAILING, same)
        return ON_FAILURE[failure.kind](self, row, failure, attempt, pauses)

    def answered(self) -> None:
        """An attempt got an answer: the streaks of pauses and of unanswered rows end."""
        self.streak.see(None)
        self.unanswered_streak = 0
        self.pauses_in_a_row = 0

    def all_failed(self, counts: Counts, reason: StopReason) -> Stop | None:
        """A run that would end as asked although every row it sent failed ends ``all-failed``
        (exit 1): it answered nothing."""
        if not reason.as_asked or not counts.failed or counts.ok + counts.truncated:
            return None
        return Stop(
            StopReason.ALL_FAILED,
            Message(
                "all-failed",
                "every row sent failed ({failed:d}; their records say why): fix the cause, then "
                "rerun the same command with {redo_failed=True}",
                failed=counts.failed,
            ),
        )

    def row_failed(self, failure: Failure) -> Stop | None:
        """A row failed: stop the run when too many in a row got no HTTP answer at all."""
        if failure.status is not None:
            self.unanswered_streak = 0
            return None
        self.unanswered_streak += 1
        if self.unanswered_streak < UNREACHABLE_AFTER_ROWS:
            return None
        return Stop(
            StopReason.UNREACHABLE,
            Message(
                "unreachable",
                "{rows:d} rows in a row got no answer from the server, the last: {last:s}. Check "
                "OPENROUTER_BASE_URL and the network, then rerun the same command "
                "({redo_failed=True} also resends the rows that failed)",
                rows=self.unanswered_streak,
                last=failure.message,
            ),
        )

    def _transient(
        self, row: PromptRow, failure: Failure, attempt: Attempt, pauses: int
    ) -> Decision:
        clock = self.options.clock
        decision = self.options.backoff.next_wait(
            attempt=attempt.number - attempt.held,
            retry_after_s=failure.retry_after_s,
            elapsed_s=clock() - (attempt.first_s or clock()),
            wait_the_cap=True,  # final only when its attempts or its time are spent
        )
        if decision.give_up:
            return Fail(decision.reason)
        asked = failure.retry_after_s
        if failure.rate_limited and asked is not None and asked > decision.wait_s:
            # a rate limit's own wait: as asked, up to max_wait_s (the one setting for rate
            # limits, the key's pauses too), not the backoff's cap
            return Retry(max(decision.wait_s, min(asked, self.options.max_wait_s)))
        return Retry(decision.wait_s)

    def _held(self, row: PromptRow, failure: Failure, attempt: Attempt, pauses: int) -> Decision:
        """An in-flight 402: shrink the dollar window and wait Retry-After; a request refused
        alone again and again is larger than the budget holds (see the module)."""
        attempt.held += 1
        others_usd, others = self.held()
        window = self.window
        alone = window.refused(others_usd, others, attempt.request.worst_usd)
        if alone and window.lone_in_a_row >= LONE_REFUSALS_BEFORE_STOP:
            max_tokens = attempt.request.max_tokens
            lower = max_tokens // 2
            if self.options.lower_max_tokens and lower >= max(1, self.max_tokens_of(row) // 4):
                window.lone_in_a_row = 0
                return Lower(lower)
            hold = attempt.request.worst_usd
            if window.most_held_usd >= hold * SHRUNK_BELOW_REQUESTS:
                # it held more before: the balance it is a share of is spent down; the cap's
                # stop only when the cap itself has room for few more such requests
                left = self.cap_left()
                tail = left is not None and left < hold * CAP_TAIL_REQUESTS
                return Stop(
                    StopReason.BUDGET if tail else StopReason.IN_FLIGHT,
                    f"{row.id}: OpenRouter's in-flight budget, a share of the balance left, "
                    f"no longer holds one request (worst case ${hold:.6f}; this run held "
                    f"${window.most_held_usd:.6f} in flight at most): the account's balance is "
                    "spent down (or another job on it holds the rest). Add credits, then rerun "
                    f"the same command to resume ({failure.message})",
                )
            return Stop(
                StopReason.IN_FLIGHT,
                Message(
                    "in-flight-too-large",
                    "{row:s}: OpenRouter's in-flight budget refused this request {times:d} times "
                    "with nothing else in flight (its worst case ${worst:.6f}): one request is "
                    "larger than the account can hold. Lower {max_tokens:bare} (now {now:d}; "
                    "{lower_max_tokens=True} halves it on this refusal) or add credits, then "
                    "rerun the same command to resume ({said:s})",
                    row=row.id,
                    times=window.lone_in_a_row,
                    worst=attempt.worst,
                    now=max_tokens,
                    said=failure.message,
                ),
            )
        # as long as OpenRouter asks (the header, or its body's ``metadata.headers``): the
        # backoff's cap and ``max_wait_s`` bound failures and the key's 429s, not this wait
        wait = HOLD_WAIT_S if failure.retry_after_s is None else failure.retry_after_s
        return Hold(max(0.0, wait))

    def _pause(self, row: PromptRow, failure: Failure, attempt: Attempt, pauses: int) -> Decision:
        options = self.options
        wait = failure.retry_after_s
        if wait is None and failure.reset_epoch_s is not None:
            wait = max(0.0, failure.reset_epoch_s - options.wall_clock())
        wait = 10.0 if wait is None else wait
        if attempt.pauses_seen < pauses:
            return Pause(wait, joined=True)
        self.pauses_in_a_row += 1
        if wait > options.max_wait_s or self.pauses_in_a_row > PAUSES_BEFORE_STOP:
            resume = failure.reset_epoch_s or options.wall_clock() + wait
            at = datetime.datetime.fromtimestamp(resume, datetime.UTC).strftime("%H:%M")
            return Stop(
                StopReason.RATE_LIMITED,
                Message(
                    "rate-limited",
                    "rate limited by the key: resume after {at:s} UTC (OpenRouter asked to wait "
                    "{wait:.0f} s, more than {max_wait_s=} s: {said:s}); rerun the same command "
                    "then",
                    at=at,
                    wait=wait,
                    max_wait_s=round(options.max_wait_s),
                    said=failure.message,
                ),
            )
        return Pause(wait)

    def _fail_row(
        self, row: PromptRow, failure: Failure, attempt: Attempt, pauses: int
    ) -> Decision:
        return Fail()

    def _stop_run(
        self, row: PromptRow, failure: Failure, attempt: Attempt, pauses: int
    ) -> Decision:
        """A 402 that says the credits afford N tokens is sent again at N under
        ``lower_max_tokens``, never below a quarter of the row's own (a near-empty answer would
        be recorded as truncated, and a resume never buys it again)."""
        afford = failure.afford_tokens
        floor = self.max_tokens_of(row) // 4
        lower = self.options.lower_max_tokens
        if afford and lower and floor <= afford < attempt.request.max_tokens:
            return Lower(afford)
        return self.stop_for(failure)

    def stop_for(self, failure: Failure) -> Stop:
        """The stop a failure of kind ``run`` leads to, by its status."""
        status = failure.status if failure.status not in (None, 200) else failure.code
        if failure.refusal == "key_limit":
            return Stop(
                StopReason.KEY_LIMIT,
                f"the key's own limit is spent ({status}): {failure.message}. Raise the key's "
                "limit at https://openrouter.ai/settings/keys (or use another key), then rerun "
                "the same command to resume",
            )
        if failure.refusal == "attestation":
            return Stop(
                StopReason.NO_ROUTE,
                Message(
                    "attestation",
                    "OpenRouter refuses {model:s} until the account confirms what it asks "
                    "(403): {said:s} Confirm it in the account's settings, then rerun the same "
                    "command to resume",
                    model=self.model,
                    said=failure.message,
                ),
            )
        if failure.budget:
            return Stop(
                StopReason.BUDGET_SPENT,
                f"an OpenRouter budget is spent (403): {failure.message}. Raise it or wait for "
                "its reset, then rerun the same command to resume",
            )
        stop = failure.metadata.get("stop")
        if isinstance(stop, StopReason):  # a sender's own (the batch sender: a failed batch)
            return Stop(stop, failure.message)
        if status == 402:
            hint = (
                " (allow a lower max_tokens with {lower_max_tokens=True})"
                if failure.afford_tokens and not self.options.lower_max_tokens
                else ""
            )
            if failure.refusal == "too_large" and not hint:
                hint = " (one request is larger than the account can hold: lower max_tokens)"
            # OpenRouter's own text usually names the credits page already: say it once.
            then = (
                "Then rerun"
                if "openrouter.ai/settings/credits" in failure.message
                else "Add credits at https://openrouter.ai/settings/credits, then rerun"
            )
            return Stop(
                StopReason.CREDITS,
                Message(
                    "credits",
                    "OpenRouter says the credits are insufficient (402): {said:s}"
                    + hint
                    + ". {then:s} the same command to resume",
                    said=failure.message,
                    then=then,
                ),
            )
        if status == 401:
            return Stop(StopReason.KEY, failure.message)
        configure = _configure_url(failure.metadata)
        if configure or "guardrail" in failure.message.lower():
            return Stop(
                StopReason.NO_ROUTE,
                Message(
                    "guardrail",
                    "the account's guardrails and data policy admit no endpoint of {model:s} "
                    "({status:s}): {said:s}. Change them at {url:s} (the policy is not the "
                    "cause), then rerun the same command to resume",
                    model=self.model,
                    status=str(status),
                    said=failure.message,
                    url=configure or "https://openrouter.ai/settings/privacy",
                ),
            )
        return Stop(
            StopReason.NO_ROUTE,
            f"OpenRouter found no endpoint for the request ({status}): {failure.message}. "
            f"The policy {self.policy} admits nothing that serves {self.model} now: re-compile it",
        )


def _configure_url(metadata: Mapping[str, Any]) -> str | None:
    """Where a guardrail 404 says its restriction is configured
    (``metadata.ineligibility_reasons[].configure_url``, OPENROUTER.md 19)."""
    reasons = metadata.get("ineligibility_reasons")
    for reason in reasons if isinstance(reasons, list) else ():
        url = reason.get("configure_url") if isinstance(reason, dict) else None
        if isinstance(url, str) and url.startswith("https://"):
            return url
    return None


#: What a failed attempt leads to, by the failure's kind (``run.send.failure``'s table decides the
#: kind): the one place a reader finds every retry decision (see the module docstring).
ON_FAILURE: dict[
    FailureKind, Callable[[AttemptPolicy, PromptRow, Failure, Attempt, int], Decision]
] = {
    "transient": AttemptPolicy._transient,
    "pause": AttemptPolicy._pause,
    "held": AttemptPolicy._held,
    "row": AttemptPolicy._fail_row,
    "run": AttemptPolicy._stop_run,
}

"""What the Batch API sender (``run.send.batch_sender``) watches: one batch (``Watched``: its own, or
one an earlier run left open), the requests waiting in it (``Line``), and the outcomes it gives
them when the batch cannot answer a line (``unknown``: counted at the worst case and sent again
later; ``not_submitted``, ``refused``, ``withheld``, ``unread``, ``failed``, ``still_running``:
the run's stop reasons).
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from openrouter_probe.api.translate import connection_failure
from openrouter_probe.errors import (
    APIConnectionError,
    APIError,
    APIStatusError,
    InsufficientCreditsError,
    Message,
)
from openrouter_probe.run.money.replay import OpenBatch
from openrouter_probe.run.send.failure import Failure
from openrouter_probe.run.send.transport import Answer
from openrouter_probe.run.stop import StopReason

if TYPE_CHECKING:
    from openrouter_probe.api.batches import Batch
    from openrouter_probe.run.send.sender import SendKey

__all__ = [
    "Line",
    "Outcome",
    "Watched",
    "awaited",
    "failed",
    "lost_message",
    "not_submitted",
    "refused",
    "refused_submit",
    "resolve",
    "running_message",
    "still_running",
    "unknown",
    "unread",
    "withheld",
]

Outcome = Answer | Failure
TERMINAL = frozenset({"completed", "failed", "expired", "cancelled"})


@dataclass
class Line:
    cid: str
    key: SendKey
    body: dict[str, Any]
    size: int
    answer: asyncio.Future[Outcome]


@dataclass
class Watched:
    """One batch this sender watches: its own, or one an earlier run left open."""

    plan: str
    run: str | None  # the run that planned it (None: this one)
    lines: dict[str, Line] = field(default_factory=dict)  # this run's waiting requests
    earlier: OpenBatch | None = None
    batch_id: str | None = None
    status: str = "planned"
    done: int = 0
    failed: int = 0
    results: dict[str, Outcome] = field(default_factory=dict)  # earlier: not yet asked for
    over: asyncio.Event = field(default_factory=asyncio.Event)  # earlier: results or dropped
    #: earlier: looked at once (found or not, polled once, a finished one's results fetched)
    looked: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def plans(self) -> list[OpenBatch]:
        """The earlier runs' plans of this batch: its first, then those that moved its lines
        (``joined``)."""
        return [] if self.earlier is None else [self.earlier, *self.joined]

    def held(self) -> set[str]:
        """The custom ids earlier runs' plans of this batch hold."""
        return {cid for plan in self.plans for cid in plan.lines}

    def unclaimed(self, wanted: Collection[str] | None) -> set[str]:
        """Custom ids of answers an earlier run's batch served for rows this run may send
        (``wanted``; ``None``: any) that no request claimed yet (they are paid: the plan stays
        open until they are recorded)."""
        rows = {cid: row for plan in self.plans for cid, (*_, row) in plan.lines.items()}
        return {
            cid
            for cid, outcome in self.results.items()
            if isinstance(outcome, Answer) and (wanted is None or rows.get(cid) in wanted)
        }

    def unnamed(self, count: int) -> bool:
        """Whether this is a plan of ``count`` lines whose batch id is not known (its POST in
        flight, or its answer lost)."""
        size = self.earlier.count if self.earlier is not None else len(self.lines)
        return self.batch_id is None and not self.closed and size == count

    def seen(self, now: Batch) -> str | None:
        """Take a poll's status and counts; what changed, said (``None``: nothing)."""
        c = now.request_counts
        if (now.status, c.completed, c.failed) == (self.status, self.done, self.failed):
            return None
        self.status, self.done, self.failed = now.status, c.completed, c.failed
        return f"{now.status}, {c.completed}/{c.total} done, {c.failed} failed"

    def answer_all(self, outcome: Failure) -> None:
        """Give every waiting line the same failure (a value: one is shared)."""
        for line in self.lines.values():
            resolve(line.answer, outcome)
        self.lines.clear()
        for cid in self.held():
            self.results.setdefault(cid, outcome)

    async def outcome_of(self, cid: str, key: SendKey) -> Outcome | None:
        """An earlier run's batch: the outcome of ``cid`` (waiting for it); ``None`` when the
        batch was never found (the line is packed afresh)."""
        if not self.over.is_set() and cid not in self.results:
            loop = asyncio.get_running_loop()
            waiting = Line(cid, key, {}, 0, loop.create_future())
            self.lines[cid] = waiting
            done: asyncio.Future[Any] = asyncio.ensure_future(self.over.wait())
            answer: asyncio.Future[Any] = waiting.answer
            try:
                await asyncio.wait({answer, done}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                done.cancel()
            if waiting.answer.done():
                return waiting.answer.result()
            self.lines.pop(cid, None)
        return self.results.pop(cid, None)

    closed: bool = False
    moved: list[str] = field(default_factory=list)  # earlier: this run's plans of its lines
    #: earlier runs' other plans of the same batch (a line's move: ``BatchClaims``)
    joined: list[OpenBatch] = field(default_factory=list)
    #: the status it ended with while answers it served wait for their rows' requests (the
    #: plan stays open until each is claimed: a paid answer is never dropped)
    ended: str | None = None


def resolve(future: asyncio.Future[Outcome], outcome: Outcome) -> None:
    if not future.done():
        future.set_result(outcome)


def unknown(message: str) -> Failure:
    """A line whose batch may have billed it: counted at its worst case, sent again later."""
    return Failure("transient", message, status=200, cost_unknown=True)


def not_submitted() -> Failure:
    """A request that waited for a batch when the run stopped: never sent, billed nothing; the
    row stays unsent for a rerun."""
    return Failure(
        "run",
        "not submitted: the run stopped while it waited for a batch",
        metadata={"stop": StopReason.INTERRUPTED},
    )


def refused(exc: APIStatusError, status: int) -> Failure:
    """A submit OpenRouter refused (nothing was made, nothing billed)."""
    if status == 429:
        return Failure("transient", f"batch submit: {exc.message}", status=429, rate_limited=True)
    stop = StopReason.CREDITS if status == 402 else StopReason.BATCH_REFUSED
    return Failure(
        "run",
        f"the batch submit was refused ({status}): {exc.message}",
        status=status,
        metadata={"stop": stop},
    )


def refused_submit(exc: APIError) -> tuple[str, Failure] | None:
    """A submit that made no batch, the plan's closing status and what its lines get: refused
    (a 4xx), or a connection that reached no server (refused, no such host: the body was never
    sent; a line goes to a later batch, billed nothing). ``None``: the answer is lost (a 5xx,
    a timeout, a reset): the batch may exist."""
    if isinstance(exc, APIStatusError) and exc.status_code < 500:
        return f"refused {exc.status_code}", refused(exc, exc.status_code)
    cause = exc.__cause__
    if isinstance(exc, APIConnectionError) and cause is not None and connection_failure(cause)[1]:
        return "not sent", Failure("transient", f"batch submit: {exc}")
    return None


def withheld(batch_id: str, exc: InsufficientCreditsError) -> Failure:
    return Failure(
        "run",
        f"batch {batch_id}: results withheld until the charge is covered (402): add credits at "
        "https://openrouter.ai/settings/credits, then rerun the same command to fetch them "
        "(the batch is not re-run)",
        status=402,
        cost_unknown=True,
        metadata={"stop": StopReason.CREDITS},
    )


def unread(batch_id: str, exc: APIError) -> Failure:
    return Failure(
        "run",
        f"batch {batch_id}: finished, but its results could not be read ({exc}); rerun the "
        "same command to fetch them (the batch is not re-run)",
        cost_unknown=True,
        metadata={"stop": StopReason.BATCH_UNREAD},
    )


def failed(batch_id: str, reason: str) -> Failure:
    return Failure(
        "run",
        f"batch {batch_id} failed: {reason}"[:400],
        metadata={"stop": StopReason.BATCH_FAILED},
    )


def awaited(row_id: str, outcome: Outcome | None) -> Outcome:
    """What a row recorded ``failed`` gets from the earlier batch line it awaits (``outcome``;
    ``None``: none): its answer, recorded after the ``failed`` line (it wins); a run's stop
    (withheld, still running: it stays awaiting); else it fails again (a ``row`` failure: never
    sent again), counted as that line's outcome (unknown, or none: at its worst case)."""
    if isinstance(outcome, Answer) or (outcome is not None and outcome.kind == "run"):
        return outcome
    why = "its earlier batch gave no answer" if outcome is None else outcome.message
    return Failure(
        "row",
        f"row {row_id} was recorded failed; {why}"[:400],
        status=None if outcome is None else outcome.status,
        cost_unknown=True if outcome is None else outcome.cost_unknown,
    )


def still_running(batch_id: str, status: str) -> Failure:
    return Failure(
        "run",
        f"batch {batch_id} is still {status} past the batch window; rerun the same command "
        "to poll it again",
        cost_unknown=True,
        metadata={"stop": StopReason.BATCH_RUNNING},
    )


def running_message(batches: Collection[Watched]) -> list[str]:
    """What to say of the batches still running on OpenRouter: each id once, with the status
    last seen (``not polled``: an earlier run's, this run ended before its first poll)."""
    running: dict[str, str] = {}
    for b in batches:
        if b.closed or b.batch_id is None or b.ended is not None or b.status in TERMINAL:
            continue
        status = "not polled" if b.status in ("open", "planned") else b.status
        running.setdefault(b.batch_id, status)
    if not running:
        return []
    ids = ", ".join(f"{i} ({status})" for i, status in list(running.items())[:5])
    more = f" and {len(running) - 5} more" if len(running) > 5 else ""
    return [
        Message(
            "batches-running",
            "{count:d} batch(es) still running: {ids:s}{more:s}. There is no cancel: rerun the "
            "same command to poll them and write their results ({abandon=True} forgets them; "
            "what completes is billed)",
            count=len(running),
            ids=ids,
            more=more,
        )
    ]


def lost_message(plan: str, rows: int, worst_usd: object, lag_s: float, why: str) -> Message:
    """What to say of a plan whose batch no list showed (a lost submit, ``why``): not proof that
    it was never made, so its rows stay counted and its plan open until a run finds it."""
    return Message(
        "batch-not-found-yet",
        "batch plan {plan:s} ({why:s}): no batch in the list holds its {rows:d} row(s) after "
        "{lag_s:.0f} s, which is no proof that it was never made (the list may lag longer): "
        "they stay counted at their worst case (${worst_usd:s}) and the plan open until a run "
        "finds its batch; a row is sent again only while the cap pays for both",
        plan=plan,
        why=why,
        rows=rows,
        worst_usd=str(worst_usd),
        lag_s=lag_s,
    )

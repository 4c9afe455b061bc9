"""The run's side of batch mode (``generate --batch``): the plan journal and the claims of open batches.

``BatchJournal`` journals the events the Batch API sender (``run.send.batch_sender``) reports to the run
(``record``: ``run.send.batch_plan.BatchEvent``; the sender holds no books): the plan before its POST
(``Planned``), its batch's id (``Submitted``), its close (``Closed``). Plan lines carry no money:
the attempts they name were reserved and journaled by the books (``Books.sent``) before the sender
got them, and their ``sent`` lines hold the money (``run.money.journal``).

``BatchClaims`` holds the lines that earlier runs' open batches carry (``Held``): each is a claim on
one of the run's rows (``Claim``): a request for such a row is not bought again, its reservation
takes over the line's worst case (``Books.reserve``), and the attempt that carries it journals the
move in the same write as its own line (a plan of one line in this run, naming the batch) while
the books settle the earlier attempt to 0. ``moved`` answers the sender's ``Claimed``; ``release``
names the claims taken and never carried (the books hand them back); ``settlements`` what an earlier
batch's served lines settle.

Neither holds the books: every money figure (the cap, the counts, the journal's ``settled`` and
``reconciled`` lines) is the books' (``run.senders`` hands them the money events), so that the cap
and the summary can never disagree about a line that moved.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal

from openrouter_probe.run.money.journal import Journal
from openrouter_probe.run.money.replay import OpenBatch, Pending
from openrouter_probe.run.rows import PromptRow
from openrouter_probe.run.send.batch_plan import (
    BatchEvent,
    Claimed,
    Closed,
    Held,
    Planned,
    Submitted,
)
from openrouter_probe.run.send.request import dumps

__all__ = ["BatchClaims", "BatchJournal", "Claim", "claimed_first", "settlements"]


@dataclass(frozen=True)
class Claim:
    """A reservation the journal holds for a row already: the ``earlier`` attempt, counted at its
    worst case (``reserved_usd``, in ``dataset``) whose answer may still come (``known``: its cost
    is settled already). ``journal(number)`` writes, buffered, that this run's attempt ``number``
    carries it from now on (``Books.sent`` calls it right after that attempt's own line)."""

    reserved_usd: Decimal
    dataset: str | None
    earlier: Pending
    known: bool
    journal: Callable[[int], None]


class BatchClaims:
    """The claims of earlier runs' open batches on this run's rows (see the module); the books'
    ``claims`` (``Books.reserve`` takes them over)."""

    def __init__(self, journal: Journal) -> None:
        self.journal = journal
        #: rows an earlier run's open batch carries: the row id (JSON) -> (that batch, the custom
        #: id); ``taken``: those whose line's worst case this run's attempt took over
        #: (``Books.reserve``), until the attempt that carries it is journaled
        self.held: dict[str, tuple[OpenBatch, str]] = {}
        self.taken: dict[str, tuple[OpenBatch, str]] = {}
        #: rows whose move was journaled -> the plan of one line that holds it now
        self.moves: dict[str, str] = {}

    def hold(self, batch: OpenBatch) -> None:
        """Note an earlier run's open batch: a request for one of its rows claims its line."""
        for cid, (_, _, _, row_id) in batch.lines.items():
            self.held[dumps(row_id)] = (batch, cid)

    def claim(self, row_json: str) -> Claim | None:
        """The open claim of row ``row_json``: the line an earlier batch holds for it."""
        held = self.held.get(row_json)
        return None if held is None else self._claim(row_json, *held)

    def take(self, row_json: str) -> None:
        """This run's attempt for row ``row_json`` took over its line's worst case."""
        self.taken[row_json] = self.held.pop(row_json)

    def carried(self, row_json: str) -> Claim | None:
        """The line row ``row_json``'s attempt took over, carried by the attempt just journaled
        (``None``: none taken)."""
        taken = self.taken.pop(row_json, None)
        return None if taken is None else self._claim(row_json, *taken)

    def _claim(self, row_json: str, batch: OpenBatch, cid: str) -> Claim:
        old_number, reserved, dataset, _ = batch.lines[cid]
        earlier = Pending(batch.run, old_number, "", reserved, dataset)

        def journal_move(number: int) -> None:
            """Journal the move, buffered with the attempt's ``sent`` line (after the books'
            ``reconciled`` of the earlier one): a plan of one line in this run naming the batch.
            A kill lands before all three lines or after them: the line is counted once."""
            plan = f"{batch.plan.split('.')[0]}.{secrets.token_hex(3)}"
            journal = self.journal
            journal.batch_plan(
                plan,
                model=batch.model,
                after=batch.after,
                worst_usd=reserved,
                lines=[[cid, number]],
                count=batch.count,
            )
            if batch.batch_id is not None:
                journal.batch_id(journal.run_id, plan, batch.batch_id)
            self.moves[row_json] = plan

        return Claim(reserved, dataset, earlier, cid in batch.settled, journal_move)

    def moved(self, row_id: str) -> str | None:
        """The plan that journaled the move of row ``row_id``'s earlier batch line to this run;
        ``None``: its reservation took none over."""
        return self.moves.pop(dumps(row_id), None)

    def release(self) -> list[Claim]:
        """The claims taken over and never carried (the run stopped first): their earlier worst
        cases count again (``Books.hand_back``)."""
        released = [self._claim(row, batch, cid) for row, (batch, cid) in self.taken.items()]
        self.taken.clear()
        return released


class BatchJournal:
    """The plan journal of one run's batches (see the module): ``record`` takes the sender's
    plan events (the money events are the books': ``run.senders``)."""

    def __init__(self, journal: Journal, claims: BatchClaims) -> None:
        self.journal = journal
        self.claims = claims

    def record(self, event: BatchEvent) -> str | None:
        """Journal one event of the batch sender; a ``Claimed`` row gets the plan that journaled
        its move (``BatchClaims.moved``)."""
        journal = self.journal
        match event:
            case Planned(plan, model, after, worst, lines):
                # flushed before the POST; the lines' money is their attempts' (``Books.sent``)
                journal.batch_plan(plan, model=model, after=after, worst_usd=worst, lines=lines)
            case Submitted(run, plan, batch_id):
                journal.batch_id(run or journal.run_id, plan, batch_id)
            case Closed(run, plan, status):
                journal.batch_done(run or journal.run_id, plan, status)
            case Held(batch):
                self.claims.hold(batch)
            case Claimed(row_id):
                return self.claims.moved(row_id)
            case _:
                raise TypeError(f"not a plan event: {event!r}")
        return None


def settlements(batch: OpenBatch, costs: Mapping[str, Decimal]) -> list[tuple[Pending, Decimal]]:
    """What an earlier run's served batch lines settle: ``costs`` (custom id -> its share; 0 for
    a line this run's own attempt carries) replaces each line's worst case, as ``/generation``
    settles an unknown attempt (``Books.reconciled``). Lines not in ``costs``, and lines settled
    at their cost already, stay as they are."""
    settled = []
    for custom_id, cost in costs.items():
        line = batch.lines.get(custom_id)
        if line is None or custom_id in batch.settled:
            continue
        number, reserved, dataset, _ = line
        settled.append((Pending(batch.run, number, "", reserved, dataset), cost))
    return settled


def claimed_first(rows: Sequence[PromptRow], batches: Sequence[OpenBatch]) -> list[PromptRow]:
    """``rows`` with those earlier runs' open batches carry first (otherwise in order): their
    answers are paid, and each claims its line's own worst case (``Books.reserve``), so a row
    that does not fit what the cap leaves never closes its dataset before them."""
    held = {row_id for batch in batches for (_, _, _, row_id) in batch.lines.values()}
    return sorted(rows, key=lambda row: str(row.id) not in held)

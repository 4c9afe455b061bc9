"""The batch side of a run's books (``generate --batch``): the plan journal and the held lines.

``BatchBooks`` journals the events the Batch API sender (``run.batch_sender``) reports to the run
(``record``: ``run.batch_plan.BatchEvent``; the sender holds no books): the plan before its POST
(``planned``), its batch's id (``submitted``), its close (``closed``). Plan lines
carry no money: the attempts they name were reserved and journaled by the books (``Books.sent``)
before the sender got them, and their ``sent`` lines hold the money (``run.ledger``).

It also holds the lines that earlier runs' open batches carry (``hold``): a request for such a row
is not bought again, its reservation takes over the line's worst case (``Books.reserve`` asks
``reservation``, then calls ``take_over``). ``moved`` journals that this run's attempt carries the
line (a plan of one line in this run, written with the attempt's ``sent`` line: ``carried``) and
has the books settle the earlier attempt to 0; ``release`` hands back the takeovers never journaled; ``settle_earlier`` settles an earlier batch's
lines from what its batch served.

Every money figure (the cap, the counts, the journal's ``settled``/``reconciled`` lines) is written
by the ``Books``: this class only asks them (``Books.reconciled``, ``Books.hand_back``), so that
the cap and the summary can never disagree about a line that moved.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

from openrouter_probe.run.batch_plan import (
    BatchEvent,
    Claimed,
    Closed,
    Held,
    Planned,
    Released,
    Said,
    SettledEarlier,
    Submitted,
)
from openrouter_probe.run.books import Books
from openrouter_probe.run.ledger import OpenBatch, Pending
from openrouter_probe.run.request import dumps
from openrouter_probe.run.rows import PromptRow

__all__ = ["BatchBooks", "claimed_first"]

_ZERO = Decimal(0)


class BatchBooks:
    """The plan journal and the held lines of one run's books (see the module). Made from the
    books, it becomes their ``holds``."""

    def __init__(self, books: Books) -> None:
        self.books = books
        #: rows an earlier run's open batch carries: the row id (JSON) -> (that batch, the custom
        #: id); ``taken``: those whose line's worst case this run's attempt took over
        #: (``Books.reserve``), until ``moved`` journals the move
        self.held: dict[str, tuple[OpenBatch, str]] = {}
        self.taken: dict[str, tuple[OpenBatch, str]] = {}
        #: rows whose move ``carried`` journaled -> the plan of one line that holds it now
        self.moves: dict[str, str] = {}
        books.holds = self

    def record(self, event: BatchEvent) -> str | None:
        """Journal (or act on) one event of the batch sender; a ``Claimed`` row gets the plan
        that journaled its move (``moved``)."""
        match event:
            case Planned(plan, model, after, worst, lines):
                self.planned(plan, model=model, after=after, worst=worst, lines=lines)
            case Submitted(run, plan, batch_id):
                self.submitted(run, plan, batch_id)
            case Closed(run, plan, status):
                self.closed(run, plan, status)
            case Held(batch):
                self.hold(batch)
            case Claimed(row_id):
                return self.moved(row_id)
            case Released():
                self.release()
            case SettledEarlier(batch, costs):
                self.settle_earlier(batch, costs)
            case Said(text):
                self.books.warn(text)
        return None

    # -- the plan journal -----------------------------------------------------------------------

    def planned(
        self, plan: str, *, model: str, after: int, worst: Decimal, lines: list[list[Any]]
    ) -> None:
        """Journal a batch about to be submitted (flushed before the POST). Its lines' money is
        their attempts': each was reserved and journaled (``Books.sent``) before it was handed
        over."""
        ledger = self.books.ledger
        if ledger is not None:
            ledger.batch_plan(plan, model=model, after=after, worst_usd=worst, lines=lines)

    def submitted(self, run: str | None, plan: str, batch_id: str) -> None:
        """Journal the id of a plan's batch (its 202, or the orphan found by the list)."""
        ledger = self.books.ledger
        if ledger is not None:
            ledger.batch_id(run or ledger.run_id, plan, batch_id)

    def closed(self, run: str | None, plan: str, status: str) -> None:
        """Journal that a plan is closed: its lines are settled, or it was never submitted."""
        ledger = self.books.ledger
        if ledger is not None:
            ledger.batch_done(run or ledger.run_id, plan, status)

    # -- the held lines (``HeldLines``, for ``Books.reserve``) ----------------------------------

    def hold(self, batch: OpenBatch) -> None:
        """Note an earlier run's open batch: a request for one of its rows claims its line."""
        for cid, (_, _, _, row_id) in batch.lines.items():
            self.held[dumps(row_id)] = (batch, cid)

    def reservation(self, row_json: str) -> tuple[Decimal, str | None] | None:
        """The worst case and dataset of the line held for row ``row_json`` (``None``: none)."""
        held = self.held.get(row_json)
        if held is None:
            return None
        batch, cid = held
        _, reserved, dataset, _ = batch.lines[cid]
        return reserved, dataset

    def take_over(self, row_json: str) -> None:
        """This run's attempt for row ``row_json`` took over its line's worst case."""
        self.taken[row_json] = self.held.pop(row_json)

    def carried(self, row_json: str, number: int) -> None:
        """This run's attempt ``number`` for row ``row_json`` was just journaled (``Books.sent``,
        buffered): if its reservation took over an earlier batch's line, journal the move in the
        same write: the earlier attempt settled to 0 (its worst case moved to this one), then a
        plan of one line in this run naming the batch (flushed, with the attempt's ``sent``
        line). A kill lands before all three lines or after them: the line is counted once."""
        taken = self.taken.pop(row_json, None)
        if taken is None:
            return
        batch, cid = taken
        old_number, reserved, dataset, _ = batch.lines[cid]
        plan = f"{batch.plan.split('.')[0]}.{secrets.token_hex(3)}"
        earlier = Pending(batch.run, old_number, "", reserved, dataset)
        self.books.reconciled(earlier, _ZERO, taken_over=True, known=cid in batch.settled)
        ledger = self.books.ledger
        if ledger is not None:
            ledger.batch_plan(
                plan,
                model=batch.model,
                after=batch.after,
                worst_usd=reserved,
                lines=[[cid, number]],
                count=batch.count,
            )
            if batch.batch_id is not None:
                ledger.batch_id(ledger.run_id, plan, batch.batch_id)
        self.moves[row_json] = plan

    def moved(self, row_id: str) -> str | None:
        """The plan that journaled the move of row ``row_id``'s earlier batch line to this run
        (``carried``); ``None``: its reservation took none over."""
        return self.moves.pop(dumps(row_id), None)

    def release(self) -> None:
        """Takeovers never journaled (the run stopped first): the earlier worst cases count
        again (``Books.hand_back``)."""
        for batch, cid in self.taken.values():
            _, reserved, dataset, _ = batch.lines[cid]
            self.books.hand_back(reserved, dataset)
        self.taken.clear()

    def settle_earlier(self, batch: OpenBatch, costs: Mapping[str, Decimal]) -> None:
        """Settle an earlier run's batch lines: ``costs`` (custom id -> its share; 0 for a line
        this run's own attempt carries) replaces each line's worst case, as ``/generation``
        settles an unknown attempt (``Books.reconciled``). Lines not in ``costs`` stay at their
        worst case."""
        for custom_id, cost in costs.items():
            line = batch.lines.get(custom_id)
            if line is None or custom_id in batch.settled:  # settled already at its cost
                continue
            number, reserved, dataset, _ = line
            self.books.reconciled(Pending(batch.run, number, "", reserved, dataset), cost)


def claimed_first(rows: Sequence[PromptRow], batches: Sequence[OpenBatch]) -> list[PromptRow]:
    """``rows`` with those earlier runs' open batches carry first (otherwise in order): their
    answers are paid, and each claims its line's own worst case (``Books.reserve``), so a row
    that does not fit what the cap leaves never closes its dataset before them."""
    held = {row_id for batch in batches for (_, _, _, row_id) in batch.lines.values()}
    return sorted(rows, key=lambda row: str(row.id) not in held)

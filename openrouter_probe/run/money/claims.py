"""The claims of a run's rows: a reservation the journal already holds for a row (an earlier
run's attempt whose answer may still come, or a row an open batch carries), which the row's next
attempt takes over instead of reserving again (``run.books.books`` explains how the money moves).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Protocol

from openrouter_probe.run.money.replay import Pending

__all__ = ["Claim", "Claims"]


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


class Claims(Protocol):
    """The claims of a run's rows (see the module): one open claim a row at most."""

    def claim(self, row_json: str) -> Claim | None:
        """The open claim of row ``row_json`` (``None``: none)."""

    def take(self, row_json: str) -> None:
        """This run's attempt for row ``row_json`` took its open claim over (``reserve``)."""

    def carried(self, row_json: str) -> Claim | None:
        """The claim row ``row_json``'s attempt took over, now carried by the attempt just
        journaled (``None``: it took none)."""

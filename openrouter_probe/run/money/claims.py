"""A claim on a run's row: a reservation the journal already holds for a row (an earlier run's
attempt whose answer may still come, or a row an open batch carries), which the row's next attempt
takes over instead of reserving again (``run.books.books`` explains how the money moves; the
claims of a batch run are ``run.books.batch_books.BatchClaims``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal

from openrouter_probe.run.money.replay import Pending

__all__ = ["Claim"]


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

"""One row's attempts at the wire: the request the next one sends, what it reserves (its worst
case and room for output billed past ``max_tokens``), what earlier ones cost.

The scheduler makes one per row (``run.schedule.queues``), the retry policy decides what follows a
failed one (``run.schedule.attempts``), and the books reserve and settle by it (``run.books.books``).
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from openrouter_probe.run.money.spend import Prices
from openrouter_probe.run.send.request import Request

__all__ = ["Attempt"]

_ZERO = Decimal(0)


@dataclass(slots=True)
class Attempt:
    """One request's attempts so far: what the next one sends and reserves, what earlier ones
    cost, and where the latest one is."""

    request: Request
    prices: Prices
    id_json: str  # the row id as JSON, for the journal
    ceiling_s: float  # how long an attempt may take (``RunPlan.ceiling_s``)
    first_s: float | None = None  # the first send: the retry deadline runs from here
    number: int = 0
    extra_cost: Decimal = _ZERO  # what earlier, failed attempts cost (known ones)
    flying: bool = False  # an attempt is in flight (a cancellation records it)
    cost: Decimal | None = None  # the answered attempt's usage.cost (None: unknown)
    pauses_seen: int = 0  # the pool's pauses when the attempt left
    held: int = 0  # attempts the in-flight budget refused (not tries of the backoff's)
    #: room for output billed past ``max_tokens`` (``run.books.overshoot``), set when it is reserved
    overshoot_usd: Decimal = _ZERO

    @property
    def worst(self) -> Decimal:
        """What the next attempt reserves: its request's worst case, and room for output billed
        past its ``max_tokens``."""
        return self.request.worst_usd + self.overshoot_usd

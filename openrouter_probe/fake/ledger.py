"""The fake server's own record of what it billed: the truth client-side accounting is tested against.

One entry per billed generation id; errors are not billed (zero-completion insurance) and only
counted. The server's event loop writes, any thread reads (``fake.ledger`` from a test or a
notebook), so every access takes a lock. Entries are kept as tuples of plain values, which the
garbage collector stops tracking, so a ledger of a million entries does not slow the server's
collections; ``entries`` and ``get`` hand out ``LedgerEntry`` objects.
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import asdict, dataclass, fields
from decimal import Decimal
from operator import attrgetter
from typing import Any

__all__ = ["Ledger", "LedgerEntry"]


@dataclass(slots=True)
class LedgerEntry:
    """One billed generation: who served it, its tokens and its cost in USD."""

    generation_id: str
    model: str
    provider: str
    tag: str
    prompt_tokens: int
    completion_tokens: int
    reasoning_tokens: int
    cost_usd: Decimal
    streamed: bool
    cancelled: bool
    created: int

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["cost_usd"] = float(self.cost_usd)
        return out


#: An entry as the plain tuple the ledger keeps (``LedgerEntry(*row)`` reads it back).
_ROW = attrgetter(*(f.name for f in fields(LedgerEntry)))


class Ledger:
    """Billed generations in the order they settled, with their total (``Decimal`` USD)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[str, tuple[Any, ...]] = {}
        self._total = Decimal(0)
        self._errors: Counter[str] = Counter()

    def add(self, entry: LedgerEntry) -> None:
        """Record a billed generation; an id is billed once."""
        with self._lock:
            if entry.generation_id in self._entries:
                raise ValueError(f"generation {entry.generation_id} is already billed")
            self._entries[entry.generation_id] = _ROW(entry)
            self._total += entry.cost_usd

    def count_error(self, kind: str) -> None:
        """Count a request that ended in an error (not billed)."""
        with self._lock:
            self._errors[kind] += 1

    def get(self, generation_id: str) -> LedgerEntry | None:
        with self._lock:
            row = self._entries.get(generation_id)
        return None if row is None else LedgerEntry(*row)

    @property
    def entries(self) -> list[LedgerEntry]:
        with self._lock:
            rows = list(self._entries.values())
        return [LedgerEntry(*row) for row in rows]

    @property
    def total_usd(self) -> Decimal:
        with self._lock:
            return self._total

    @property
    def errors(self) -> dict[str, int]:
        """Unbilled errors by kind (``upstream_429``, ``no_route``, ``insufficient_credits``, ...)."""
        with self._lock:
            return dict(self._errors)

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def to_json(self) -> dict[str, Any]:
        """The ledger as ``GET /_fake/ledger`` serves it: ``total_usd``, ``entries``, ``errors``."""
        with self._lock:
            total, rows, errors = self._total, list(self._entries.values()), dict(self._errors)
        return {
            "total_usd": float(total),
            "count": len(rows),
            "entries": [LedgerEntry(*row).to_json() for row in rows],
            "errors": errors,
        }

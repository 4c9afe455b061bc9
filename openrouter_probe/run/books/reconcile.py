"""The reconciler: settle attempts counted at their worst case from ``GET /generation?id=``.

An attempt whose cost is unknown (it timed out or was cut after it left, its answer had no valid
``usage.cost``, it was cancelled, or its run was killed while it was in flight) counts at its whole
reservation: "possibly billed". When the journal holds its generation id, the reconciler asks
OpenRouter what it really cost, in the background, and gives the difference back to the cap.
``/generation`` is eventually consistent (a lookup 3 s after the call returned 404, ~8 s later it
answered, in a third party's audit of the API), so a 404 is retried: after ``waits`` seconds
(1, 2, 4, 8, 16, 32 by default: about a minute), then the attempt is given up and stays at its
worst case (a later resume tries again). What it found goes into the journal as a ``reconciled``
line (``run.money.journal``), so a later start counts the settled cost.

Waits use the injected ``sleep`` and count the time it slept (not a clock): an attempt is looked
up once the reconciler has slept its wait since it was queued, so a test's sleep can move the fake
server's clock through the lag, and a sleep that does not wait makes the retries immediate.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal

from openrouter_probe.run.money.replay import Pending
from openrouter_probe.run.send.transport import CacheSource, via_cache

__all__ = ["DEFAULT_WAITS_S", "CacheHits", "Lookup", "Reconciler", "unsettled_note"]

log = logging.getLogger(__name__)

#: Seconds before each lookup of an attempt (the first counts from when it ended).
DEFAULT_WAITS_S: tuple[float, ...] = (1.0, 2.0, 4.0, 8.0, 16.0, 32.0)
#: Lookups in flight at once.
PARALLEL_LOOKUPS = 16

#: ``generation id ->`` its cost (``Decimal``: settled), ``None`` (not there yet: retry), why it
#: cannot be read (``str``: give up), or another generation to look up (``CacheSource``: a cache
#: hit's source, for a ``via_cache`` id).
Lookup = Callable[[str], Awaitable[Decimal | str | CacheSource | None]]


@dataclass
class _Item:
    pending: Pending
    due_s: float
    tries: int = 0


class CacheHits:
    """Earlier runs' attempts counted at their worst case with no generation id (in flight at a
    kill, before the headers came), by row id. A resend of the row answered from the response
    cache replayed a generation one of them was: ``take`` gives one back, pointed at the hit
    (``run.send.transport.via_cache``), for the reconciler to settle from the hit's source."""

    def __init__(self, unidentified: Mapping[str, Sequence[Pending]]) -> None:
        self._waiting = {row: list(found) for row, found in unidentified.items() if found}

    def take(self, row_id: str, hit_id: str | None) -> Pending | None:
        """One of ``row_id``'s unidentified attempts, to settle by the cache hit ``hit_id``."""
        waiting = self._waiting.get(row_id)
        if not waiting or hit_id is None:
            return None
        return dataclasses.replace(waiting.pop(), generation_id=via_cache(hit_id))


class Reconciler:
    """Settle ``Pending`` attempts in the background; ``on_settled(pending, cost)`` applies each,
    ``on_change()`` is called whenever attempts leave the queue (settled or given up).

    ``add`` queues an attempt; ``run`` is the background task; ``finish`` waits (boundedly) for
    what is queued (``Books.settle_the_rest`` cancels the task past its waits). ``outstanding``
    is what is still queued.
    """

    def __init__(
        self,
        lookup: Lookup,
        *,
        on_settled: Callable[[Pending, Decimal], None],
        on_change: Callable[[], None] = lambda: None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        waits_s: Sequence[float] = DEFAULT_WAITS_S,
        counted: Callable[[str], bool] = lambda _: False,
        on_source: Callable[[Pending], None] = lambda _: None,
    ) -> None:
        self.lookup = lookup
        #: told each attempt a cache hit's source identified (the journal records its id)
        self.on_source = on_source
        #: whether the journal already counts a generation (a cache hit's source that is one is
        #: not settled twice)
        self.counted = counted
        self.on_settled = on_settled
        self.on_change = on_change
        self.sleep = sleep
        self.waits_s = tuple(waits_s)
        self.given_up: list[Pending] = []
        self.settled = 0
        self._items: list[_Item] = []
        self._wake = asyncio.Event()
        self._finishing = False
        self._slept_s = 0.0  # the reconciler's own time: what it has slept

    @property
    def outstanding(self) -> int:
        """Attempts queued and not yet settled or given up."""
        return len(self._items)

    def queued(self) -> list[Pending]:
        """The attempts still queued (not settled, not given up)."""
        return [item.pending for item in self._items]

    def add(self, pending: Pending, *, now: bool = False) -> None:
        """Queue ``pending``: looked up after the first wait (``now``: at once, an attempt of an
        earlier run, long over)."""
        due = self._slept_s + (0.0 if now else self.waits_s[0])
        self._items.append(_Item(pending, due))
        self._wake.set()

    async def _try(self, item: _Item) -> _Item | None:
        """Look ``item`` up once; return it when it is done (settled or given up)."""
        item.tries += 1
        found = await self.lookup(item.pending.generation_id)
        if isinstance(found, CacheSource):  # a cache hit: the generation it replayed was billed
            if self.counted(found.generation_id):
                found = f"its cache hit replayed {found.generation_id}, already counted"
            else:
                item.pending = dataclasses.replace(item.pending, generation_id=found.generation_id)
                item.tries, item.due_s = 0, self._slept_s
                self.on_source(item.pending)
                return None
        if isinstance(found, Decimal):
            self.settled += 1
            self.on_settled(item.pending, found)
            return item
        if found is None and item.tries < len(self.waits_s):
            item.due_s = self._slept_s + self.waits_s[item.tries]
            return None
        log.warning(
            "%s: could not settle its cost from /generation after %d tries (%s); it stays "
            "counted at its worst case, $%s",
            item.pending.generation_id,
            item.tries,
            found or "not found",
            item.pending.reserved_usd,
        )
        self.given_up.append(item.pending)
        return item

    async def _round(self) -> None:
        due = [item for item in self._items if item.due_s <= self._slept_s]
        for start in range(0, len(due), PARALLEL_LOOKUPS):
            batch = due[start : start + PARALLEL_LOOKUPS]
            done = {id(item) for item in await asyncio.gather(*map(self._try, batch)) if item}
            if done:
                self._items = [item for item in self._items if id(item) not in done]
                self.on_change()

    async def run(self) -> None:
        """Settle what is queued, waiting between tries, until ``finish`` and nothing is left."""
        while True:
            await self._round()
            if not self._items:
                if self._finishing:
                    return
                self._wake.clear()
                await self._wake.wait()
                continue
            delay = min(item.due_s for item in self._items) - self._slept_s
            if delay > 0:
                await self.sleep(delay)
                self._slept_s += delay

    def finish(self) -> None:
        """Settle what is queued (within its waits), then end ``run``."""
        self._finishing = True
        self._wake.set()


def unsettled_note(reconciler: Reconciler | None) -> str | None:
    """What to say of what ``/generation`` left unsettled this run (given up, or still queued
    when the run ended): how much stays at its worst case, and that a rerun settles it."""
    if reconciler is None:
        return None
    left = list(reconciler.given_up) + reconciler.queued()
    if not left:
        return None
    worst = sum((p.reserved_usd for p in left), Decimal(0))
    return (
        f"{len(left)} attempt(s) could not be settled from /generation in this run: "
        f"${worst:.6f} stays counted at the worst case (the cap is safe, this money is not "
        "spendable); rerun the same command later to settle them (nothing recorded is "
        "bought again)"
    )

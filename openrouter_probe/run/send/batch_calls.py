"""The Batch API calls of one batch run, off the event loop: submit, look for a lost submit in the
list, fetch a finished batch's results with each answer's share of its cost, and record an
accepted submit in the snapshot's history.

``run.send.batch_sender`` decides when to call them and journals what they return; these only talk to
OpenRouter (``api.batches.BatchClient``, whose calls block: each runs in a thread) and to the
snapshot file.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Collection, Iterator
from datetime import UTC, datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from openrouter_probe.errors import (
    APIError,
    APIStatusError,
    InsufficientCreditsError,
    Message,
    NoRouteError,
    SnapshotError,
)
from openrouter_probe.rules.batch import record_batch_acceptance
from openrouter_probe.run.money.spend import allocate
from openrouter_probe.run.send.batch_plan import BatchSettings, line_outcome, priced_tokens
from openrouter_probe.run.send.batch_watch import unknown, withheld
from openrouter_probe.run.send.failure import Failure
from openrouter_probe.run.send.transport import Answer

if TYPE_CHECKING:
    from openrouter_probe.api.batches import Batch, BatchClient

__all__ = ["BatchCalls", "cadence"]

log = logging.getLogger(__name__)

_NO_BATCH_ENDPOINT = "does not have a :batch endpoint"
#: How far below the plan's time (this clock's) the orphan search looks, beside the skew the
#: list's ``Date`` shows now: that reading is of today's clocks, not of the two at the plan
#: (one of them may have been reset since). The match is by content (a finished batch's
#: custom ids), so a wider window costs only pages of the list.
SKEW_MARGIN_S = 3600.0


class BatchCalls:
    """The calls a ``BatchSender`` makes (see the module)."""

    def __init__(
        self,
        settings: BatchSettings,
        client: BatchClient,
        *,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self.client = client
        self.sleep, self.clock, self.wall_clock = sleep, clock, wall_clock
        self._recorded: set[str] = set()  # endpoints whose acceptance this run recorded

    async def create(self, requests: list[dict[str, Any]]) -> Batch:
        """POST the batch; on the exact no-``:batch``-endpoint 400 try the ``:batch`` slug once
        (sources disagree on which form the API wants; a 400 created nothing)."""
        model = self.settings.model
        provider = self.settings.provider
        try:
            return await asyncio.to_thread(
                self.client.create, model=model, requests=requests, provider=provider
            )
        except APIStatusError as exc:
            if exc.status_code != 400 or _NO_BATCH_ENDPOINT not in exc.message:
                raise
            if model.endswith(":batch"):
                raise
            log.warning("%s: %s; trying %s:batch once", model, exc.message, model)
            return await asyncio.to_thread(
                self.client.create, model=f"{model}:batch", requests=requests, provider=provider
            )

    async def search(
        self,
        plan: str,
        known: Collection[str],
        after: int,
        count: int,
        cids: Collection[str],
        *,
        sure: bool = False,
    ) -> str | None:
        """The id of plan ``plan``'s batch, looked for in the list for ``list_lag_s``: the same
        model and line count, created after ``after`` in the server's time (``_listed``), not
        one of ``known`` (every batch the job's journal records, and those this run watches); of
        those, one whose results hold every custom id of ``cids`` (a finished batch's are read:
        that costs nothing), else the one whose custom ids cannot be read yet (running, or
        withheld) when it is the only such and not ``sure`` (another plan of this size may
        own it: only a finished batch is told apart); ``None``: not found (no proof it was
        never made). A finished batch whose results miss one of ``cids`` is another plan's,
        never adopted."""
        deadline = self.clock() + self.settings.list_lag_s
        while True:
            try:
                found = await asyncio.to_thread(
                    self._candidates, known, after, count, set(cids), sure
                )
            except APIError as exc:
                log.warning("listing batches to find plan %s: %s", plan, exc)
                found = None
            if found is not None:
                return found
            if self.clock() >= deadline:
                return None
            await self.sleep(min(self.settings.poll_s, self.settings.list_lag_s))

    def _candidates(
        self, known: Collection[str], after: int, count: int, cids: set[str], sure: bool
    ) -> str | None:
        """One look at the list (see ``search``); blocks."""
        model = self.settings.model
        listed = [
            b
            for b in self._listed(after)
            if b.id not in known and b.request_counts.total == count and _same_model(b.model, model)
        ]
        unverified = []  # running, or results withheld (402): the custom ids are not shown yet
        for b in reversed(listed):  # newest first: the oldest first
            if not b.terminal:
                unverified.append(b.id)
                continue
            try:
                now = self.client.get(b.id)
                results = now.results
                if results is None or len(results) < count:
                    results = list(self.client.results(b.id))
            except APIError as exc:
                log.warning("reading batch %s to match a plan: %s", b.id, exc)
                unverified.append(b.id)
                continue
            if cids <= {r.custom_id for r in results}:
                return b.id
        return unverified[0] if len(unverified) == 1 and not sure else None

    def _listed(self, after: int) -> Iterator[Batch]:
        """The batches created since ``after`` (this clock's, at the plan) in the server's time:
        the list's pages newest first, none asked ``created_after`` by this clock; the bound is
        moved back by how far the server's clock (its ``Date``) is behind this one, and by
        ``SKEW_MARGIN_S`` more, so a clock minutes ahead skips no batch, whatever either clock
        did since the plan (a server clock ahead only widens the window; blocks)."""
        bound: float | None = None
        cursor: str | None = None
        while True:
            page = self.client.list(after=cursor)
            if bound is None:
                skew = 0.0 if page.served_at is None else page.served_at - self.wall_clock()
                bound = after + min(0.0, skew) - SKEW_MARGIN_S
            for b in page.data:
                if b.created_at is not None and b.created_at < bound:
                    return  # newest first: the rest are older still
                yield b
            if not page.has_more or not page.last_id or page.last_id == cursor:
                return
            cursor = page.last_id

    async def get(self, batch_id: str, started: float) -> Batch | Failure | None:
        """One poll of a batch polled since ``started`` (this clock): the batch, what its lines
        get when it cannot answer them, or ``None`` (ask again: an error that may pass, or a
        404: a batch whose id came from a 202 or the list was stored, and its record is written
        asynchronously, so a 404 is no proof it is gone; logged past ``not_written_s``)."""
        try:
            return await asyncio.to_thread(self.client.get, batch_id)
        except InsufficientCreditsError as exc:
            return withheld(batch_id, exc)
        except NoRouteError as exc:
            waited = self.clock() - started
            if waited >= self.settings.not_written_s:
                log.warning(
                    "batch %s: %s (%.0f s on); it was stored: polled on", batch_id, exc, waited
                )
        except APIStatusError as exc:
            if exc.status_code == 410:
                return unknown(f"batch {batch_id}: gone (410)")
            log.warning("polling batch %s: %s", batch_id, exc)
        except APIError as exc:
            log.warning("polling batch %s: %s", batch_id, exc)
        return None

    async def outcomes(self, batch_id: str, now: Batch) -> dict[str, Answer | Failure]:
        """Every line's outcome, each answer with its share of ``usage.cost``."""
        results = list(now.results or [])
        if len(results) < now.request_counts.completed + now.request_counts.failed:
            # an error here is the caller's: a finished batch's lines were billed, and a line
            # whose result could not be read must not go into another batch
            results = await asyncio.to_thread(lambda: list(self.client.results(batch_id)))
        outcomes: dict[str, Answer | Failure] = {
            r.custom_id: line_outcome(r, batch_id=batch_id, provider=now.provider) for r in results
        }
        answers = [(cid, o) for cid, o in outcomes.items() if isinstance(o, Answer)]
        cost = now.cost_usd
        if cost is not None and answers:
            weights = [priced_tokens(a, self.settings.prices) for _, a in answers]
            for (_, answer), share in zip(
                answers, allocate(Decimal(str(cost)), weights), strict=True
            ):
                answer.usage = {**(answer.usage or {}), "cost": str(share)}
        return outcomes

    async def accepted(self, batch_id: str, warn: Callable[[str], object]) -> None:
        """Record the run's first accepted submit to its ``:batch`` endpoint in the snapshot's
        history (``settings.history``); a history that cannot be written is said (``warn``),
        never fatal."""
        only = [str(tag) for tag in (self.settings.provider or {}).get("only") or []]
        tag = only[0] if len(only) == 1 else None
        if (tag or "") in self._recorded:
            return
        self._recorded.add(tag or "")
        path = self.settings.history
        if path is None:
            if self.settings.history_off:
                warn(
                    Message(
                        "batch-accepted-no-history",
                        "batch {batch:s} was accepted; {why:s}",
                        batch=batch_id,
                        why=self.settings.history_off,
                    )
                )
            return
        if tag is None:  # which one OpenRouter chose is not known at the 202
            log.info("batch %s accepted for one of %s: none recorded", batch_id, ", ".join(only))
            return
        at = datetime.fromtimestamp(self.wall_clock(), UTC)
        try:
            await asyncio.to_thread(record_batch_acceptance, path, tag, batch_id, at=at)
        except SnapshotError as exc:  # the history is never worth the run
            warn(f"{exc} (the run goes on)")
            return
        log.info("%s: batch %s recorded as accepted for %s", path, batch_id, tag)


def cadence(first_s: float, most_s: float) -> Iterator[float]:
    """The waits between polls: ``first_s``, growing by half up to ``most_s``."""
    wait = first_s
    while True:
        yield wait
        wait = min(wait * 1.5, most_s)


def _same_model(found: str | None, model: str) -> bool:
    """A listed batch's model is the plan's: the same slug, its ``:batch`` form, or a dated
    slug of it (``z-ai/glm-5.3-20260816``)."""
    if not found:
        return False
    base = model.removesuffix(":batch")
    found = found.removesuffix(":batch")
    return found == base or found.startswith(base + "-")

"""The Batch API sender (``generate --batch``): a ``run.send.sender.Sender`` that packs the requests
handed to it in one turn of the event loop into batches, and answers each when its batch ends.

Every request it is handed was reserved at its worst case (the ``:batch`` row's price) and
journaled (``sent``) by the run first. Per batch: the plan is journaled before the POST
(``Planned``); the POST once fewer than ``live`` batches run, then the id (``Submitted``); a
refusal closes the plan, a lost answer does not (the orphan search, ``_find``: same model, line
count and custom ids, created after the plan in the server's time, no batch the journal
records); polling on the run's injected sleep; at the end each ``Answer`` gets its share of
``usage.cost`` (``run.money.spend.allocate``), a failed line goes back to the attempt policy.

**Resume.** Plans an earlier run left open are looked at before anything new is reserved
(``ready``): polled by id at once (a finished batch's paid results fetched), or found by the
list and adopted. One the list does not show stays open at its worst case (no proof it was
never made): its rows are sent again only where the cap pays for both. A row in an open plan
waits for it (a claim of the row source) instead of being packed again; one recorded
``failed`` (``awaiting``) takes only its answer (``batch_watch.awaited``).

**Events, not books.** Every step is a ``run.send.batch_plan.BatchEvent`` given to the sink
it is made with; the run journals each (``run.books.batch_books``). No cancel: ``aclose`` says
which batches still run (a rerun polls them); ``abandon`` forgets earlier runs' open batches.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import secrets
import time
from collections import deque
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from openrouter_probe.errors import (
    APIConnectionError,
    APIError,
    APIStatusError,
    InsufficientCreditsError,
)
from openrouter_probe.files import WriteFailed
from openrouter_probe.run.money.replay import OpenBatch
from openrouter_probe.run.send.batch_calls import BatchCalls, cadence
from openrouter_probe.run.send.batch_plan import (
    MAX_BATCH_BYTES,
    BatchSettings,
    Claimed,
    Closed,
    EventSink,
    Held,
    Planned,
    Released,
    Said,
    SettledEarlier,
    Submitted,
    custom_id,
    line_body,
)
from openrouter_probe.run.send.batch_watch import (
    Line,
    Outcome,
    Watched,
    awaited,
    failed,
    lost_message,
    not_submitted,
    refused_submit,
    resolve,
    running_message,
    still_running,
    unknown,
    unread,
    withheld,
)
from openrouter_probe.run.send.failure import Failure
from openrouter_probe.run.send.transport import Answer

if TYPE_CHECKING:
    from openrouter_probe.api.batches import Batch, BatchClient
    from openrouter_probe.run.send.sender import SendKey

__all__ = ["BatchSender"]

log = logging.getLogger(__name__)

#: A plan's created-after bound is this much before the plan (the list's own ``Date`` moves it
#: back further when the server's clock is behind this one: ``BatchCalls.search``).
_SKEW_S = 300


class BatchSender:
    """Sends a run's requests as batches (see the module): ``events`` is where every event goes
    (the run journals them: ``run.books.batch_books``); ``stopped``, the run's stop: from then on
    nothing more is submitted, and the requests still waiting for a batch are answered unsent
    (nothing was billed). Await ``ready()`` before the run, ``aclose()`` after it."""

    def __init__(
        self,
        settings: BatchSettings,
        *,
        events: EventSink,
        stopped: asyncio.Future[None],
        client: BatchClient,
        earlier: Sequence[OpenBatch] = (),
        recorded: Mapping[str, str] | None = None,
        wanted: Collection[str] | None = None,
        awaiting: Collection[str] = (),
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings, self.client = settings, client
        self.calls = BatchCalls(settings, client, sleep=sleep, clock=clock, wall_clock=wall_clock)
        self.sleep, self.clock, self.wall_clock = sleep, clock, wall_clock
        self._earlier_plans = list(earlier)
        #: every plan's batch id the journal records (closed plans' too): never adopted again
        self._recorded = dict(recorded or {})
        #: the rows this run may send (``None``: any): an answer served for one of them is
        #: recorded before its plan closes; another row's (finished already) is only settled
        self._wanted = None if wanted is None else set(wanted)
        self._awaiting = set(awaiting)  # recorded failed, held: the held answer only
        self._by_cid: dict[str, Watched] = {}  # custom id -> the earlier batch that holds it
        self._queue: list[Line] = []  # handed over in this turn of the loop
        self._pending: deque[Line] = deque()  # waiting for a batch to be submitted in
        self._live = 0  # batches running: this run's submitted, earlier runs' taken up
        self._stopped = False  # the run stops: nothing more is submitted
        self._halt = asyncio.Event()  # the same, for ``ready`` to wait on
        self._flushing, self._tasks = False, set[asyncio.Future[None]]()
        self.batches: dict[str, Watched] = {}  # plan -> batch
        self._events = events
        stopped.add_done_callback(lambda _: self._stop())
        self._began = False  # earlier runs' batches were taken up (``ready``)
        #: what the batch calls say (a history not written), reported to the run
        self._said: Callable[[str], object] = lambda text: self._events(Said(text))
        self._random = random.Random()

    # -- the run's side -----------------------------------------------------------------------

    def _take_up_earlier(self) -> None:
        """Take up (or, with ``abandon``, forget) earlier runs' batches."""
        self._began = True
        events = self._events
        roots: dict[str, Watched] = {}
        for plan in self._earlier_plans:
            if self.settings.abandon:
                events(Closed(plan.run, plan.plan, "abandoned"))
                events(
                    Said(
                        f"abandoned batch {plan.batch_id or '(id unknown)'} of plan "
                        f"{plan.plan}: there is no cancel, so what completes is billed; its "
                        f"{len(plan.lines)} row(s) stay counted at their worst case and go "
                        "into new batches"
                    )
                )
                continue
            root = plan.plan.split(".")[0]  # a moved line's plan is named after its first
            batch_id = plan.batch_id or self._recorded.get(root)
            events(Held(plan))
            watched = roots.get(root)
            if watched is not None:  # one batch, one watch: polled once, counted once
                watched.joined.append(plan)
                watched.batch_id = watched.batch_id or batch_id
            else:
                watched = roots[root] = Watched(plan.plan, plan.run, earlier=plan)
                watched.batch_id, watched.status = batch_id, "open"
                self.batches[plan.plan] = watched
            for cid in plan.lines:
                self._by_cid[cid] = watched
        for watched in roots.values():
            self._live += 1  # it runs on OpenRouter: it counts against ``live``
            self._start(self._take_up(watched))

    async def __call__(
        self,
        body: bytes,
        *,
        stream: bool,
        on_id: Callable[[str], None] | None = None,
        ceiling_s: float | None = None,
        key: SendKey | None = None,
    ) -> Outcome:
        if key is None:
            raise TypeError("the batch sender needs each request's key (run.send.sender.SendKey)")
        cid = custom_id(key.row_id)
        earlier = self._by_cid.pop(cid, None)
        outcome: Outcome | None = None
        if earlier is not None:
            # the move was journaled with the attempt (``BatchClaims``)
            moved = self._events(Claimed(key.row_id))
            if moved is not None:
                earlier.moved.append(moved)
            outcome = await earlier.outcome_of(cid, key)
        if key.row_id in self._awaiting:  # recorded failed: only its earlier line's answer
            return awaited(key.row_id, outcome)
        if outcome is not None:
            return outcome
        line_json = line_body(body)
        loop = asyncio.get_running_loop()
        line = Line(cid, key, line_json, len(body), loop.create_future())
        self._queue.append(line)
        if not self._flushing:
            self._flushing = True
            loop.call_soon(self._flush)
        return await line.answer

    async def aclose(self) -> list[str]:
        """Stop watching; settle what earlier runs' batches served that no request asked for;
        return (and log) what to say: which batches still run (a rerun polls them)."""
        self._stop()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        bound = self._began
        if bound:
            self._events(Released())
        unrecorded = []
        for b in self.batches.values():
            if bound and b.earlier is None and b.ended is not None:
                self._close(b, b.ended)  # this run's own: every answer was written
            if not bound or b.earlier is None or b.closed:
                continue
            waiting = b.unclaimed(self._wanted)  # paid answers no request of this run claimed
            served = {
                c: o.cost_usd
                for c, o in b.results.items()
                if isinstance(o, Answer) and o.cost_usd is not None and c not in waiting
            }
            for plan in b.plans:  # rows finished already: only their money is settled
                costs = {c: v for c, v in served.items() if c in plan.lines}
                self._events(SettledEarlier(plan, costs))
            if b.ended is not None and not waiting:
                self._close(b, b.ended)
            elif waiting:
                unrecorded.append(f"{len(waiting)} of {b.batch_id}")
        said = running_message(self.batches.values())
        if unrecorded:
            said.append(
                f"answers fetched but not recorded: {', '.join(unrecorded)}; they are paid and "
                "their batch stays open: rerun the same command to record them (not re-run)"
            )
        for text in said:
            log.warning(text)
        return said

    async def ready(self) -> None:
        """Take up earlier runs' batches, and wait until every one left open was looked at once:
        found in the list (or not), polled, and a finished one's results fetched (they are paid:
        a rerun records them before it reserves anything new); or until the run stops."""
        self._take_up_earlier()
        looks = asyncio.gather(*(b.looked.wait() for b in self.batches.values() if b.earlier))
        halt = asyncio.ensure_future(self._halt.wait())
        waits: set[asyncio.Future[Any]] = {looks, halt}
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            looks.cancel()
            halt.cancel()

    def status_line(self) -> str:
        """Batches by status, lines done and failed (the progress a poll shows)."""
        by: dict[str, int] = {}
        for b in self.batches.values():
            by[b.status] = by.get(b.status, 0) + 1
        done = sum(b.done for b in self.batches.values())
        failed = sum(b.failed for b in self.batches.values())
        states = ", ".join(f"{n} {s}" for s, n in sorted(by.items())) or "none"
        return f"batches: {states}; lines done {done}, failed {failed}"

    # -- packing and submitting ---------------------------------------------------------------

    def _start(self, work: Awaitable[None]) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _flush(self) -> None:
        """Pack what was handed over in this turn of the loop into batches and submit them."""
        self._flushing = False
        self._pending.extend(self._queue)
        self._queue = []
        self._pump()

    def _pump(self) -> None:
        """Submit what waits, in batches of ``size`` lines at most, while fewer than ``live``
        batches run; once the run stops, answer what waits unsent instead."""
        pending = self._pending
        if self._stopped:
            while pending:
                resolve(pending.popleft().answer, not_submitted())
            return
        while pending and self._live < self.settings.live:
            lines: list[Line] = []
            size = 0
            while pending and len(lines) < self.settings.size:
                line = pending[0]
                if line.answer.done():  # cancelled while it waited
                    pending.popleft()
                    continue
                if lines and size + line.size > MAX_BATCH_BYTES * 0.9:
                    break
                lines.append(pending.popleft())
                size += line.size
            if lines:
                self._live += 1  # counted now: the next turn of this loop sees it
                self._start(self._submit(lines))

    def _stop(self) -> None:
        self._stopped = True
        self._halt.set()
        self._pump()

    def _ended(self) -> None:
        """A batch stopped running (or was never made): another may be submitted."""
        self._live -= 1
        self._pump()

    async def _submit(self, lines: list[Line]) -> None:
        try:
            await self._submit_and_poll(lines)
        finally:
            self._ended()

    async def _submit_and_poll(self, lines: list[Line]) -> None:
        plan = secrets.token_hex(5)
        batch = Watched(plan, None, lines={line.cid: line for line in lines})
        self.batches[plan] = batch
        worst = sum((line.key.worst_usd for line in lines), Decimal(0))
        after = int(self.wall_clock()) - _SKEW_S
        try:
            self._events(
                Planned(
                    plan,
                    model=self.settings.model,
                    after=after,
                    worst_usd=worst,
                    lines=[[line.cid, line.key.number] for line in lines],
                )
            )
        except WriteFailed:  # the plan is not journaled: the batch must not be made
            batch.closed, batch.status = True, "not submitted"
            batch.answer_all(not_submitted())
            return
        requests = [{"custom_id": line.cid, "body": line.body} for line in lines]
        try:
            created = await self.calls.create(requests)
        except (APIStatusError, APIConnectionError) as exc:
            said = refused_submit(exc)  # a 4xx, or no server reached: nothing made or billed
            if said is not None:
                self._events(Closed(None, plan, said[0]))
                batch.closed, batch.status = True, said[0]
                batch.answer_all(said[1])
                return
            if not await self._lost(batch, after, len(lines), exc):  # the answer is lost
                return
        else:
            batch.batch_id = created.id
            with contextlib.suppress(WriteFailed):  # the plan is journaled: a rerun finds it
                self._events(Submitted(None, plan, created.id))
            await self.calls.accepted(created.id, self._said)
        log.info(
            "batch %s submitted: %d line(s), worst case $%s", batch.batch_id, len(lines), worst
        )
        await self._poll(batch)

    async def _lost(self, batch: Watched, after: int, count: int, exc: APIError) -> bool:
        """The POST's answer is lost (no connection, 5xx): the batch may exist; look for it
        (False: not found, ``_not_found``)."""
        log.warning("batch plan %s: %s; looking for it in the list", batch.plan, exc)
        if await self._find(batch, after, count, set(batch.lines)):
            return True
        worst = sum((line.key.worst_usd for line in batch.lines.values()), Decimal(0))
        self._not_found(batch, count, worst, f"its submit: {exc}")
        return False

    def _not_found(self, batch: Watched, rows: int, worst: Decimal, why: str) -> None:
        """No list showed the batch of a lost submit: no proof that it was never made. Its plan
        stays open (counted at its worst case; the next run looks again); each line gets
        ``unknown``: its attempt stays counted, and its row is sent again only if the cap
        pays for a fresh reservation besides it. Said."""
        lag = self.settings.list_lag_s
        self._events(Said(lost_message(batch.plan, rows, worst, lag, why)))
        batch.status = "not found"
        batch.answer_all(unknown(f"batch plan {batch.plan}: {why}; its batch is not found yet"))

    # -- finding, polling, ending -------------------------------------------------------------

    async def _find(self, batch: Watched, after: int, count: int, cids: set[str]) -> bool:
        """Look for the batch of a plan whose POST answer was lost: the same model and line
        count, created after the plan, holding the plan's custom ids, and no batch a plan of
        this job records or this run watches; True when found (its id journaled)."""
        known = {b.batch_id for b in self.batches.values() if b.batch_id}
        known |= set(self._recorded.values())
        # another plan of this size without a batch id: a running batch (its custom ids not
        # shown) may be either's, so only a finished one whose results hold these is adopted
        twins = any(b is not batch and b.unnamed(count) for b in self.batches.values())
        found = await self.calls.search(batch.plan, known, after, count, cids, sure=twins)
        if found is None:
            return False
        batch.batch_id = found
        self._events(Submitted(batch.run, batch.plan, found))
        for plan in batch.joined:
            self._events(Submitted(plan.run, plan.plan, found))
        for moved in batch.moved:
            self._events(Submitted(None, moved, found))
        log.warning("batch plan %s: adopted %s (found in the list)", batch.plan, found)
        await self.calls.accepted(found, self._said)
        return True

    async def _take_up(self, batch: Watched) -> None:
        """An earlier run's open plan: find it by the list if it has no id, then poll it."""
        plan = batch.earlier
        assert plan is not None
        try:
            if batch.batch_id is None and not await self._find(
                batch, plan.after, plan.count, batch.held()
            ):
                held = [line for p in batch.plans for line in p.lines.values()]
                worst = sum((line[1] for line in held), Decimal(0))
                why = f"run {plan.run}: its batch id was never journaled"
                self._not_found(batch, len(held), worst, why)
                return
            await self._poll(batch, first_s=0.0)  # at once: its answers may be paid already
        finally:
            batch.looked.set()
            batch.over.set()
            self._ended()

    async def _poll(self, batch: Watched, *, first_s: float | None = None) -> None:
        """Poll ``batch`` until it ends (or the window), the first time after ``first_s`` (by
        default ``poll_s``). An earlier run's is ``looked`` at once the first poll is answered
        (a finished one's results fetched), or the poll failed."""
        started = self.clock()
        assert batch.batch_id is not None
        waits = cadence(self.settings.poll_s, self.settings.poll_max_s)
        pause = next(waits) if first_s is None else first_s
        while True:
            if pause > 0:
                await self.sleep(pause * self._random.uniform(0.8, 1.2))
            pause = next(waits)
            now = await self.calls.get(batch.batch_id, started)
            if now is None:  # not read now: asked again
                batch.looked.set()
                continue
            if isinstance(now, Failure):  # the batch cannot answer its lines
                batch.answer_all(now)
                return
            changed = batch.seen(now)
            if changed is not None:
                log.info("batch %s: %s; %s", batch.batch_id, changed, self.status_line())
            if now.terminal:
                await self._end(batch, now)
                return
            batch.looked.set()
            if self.clock() - started > self.settings.window_s:
                batch.answer_all(still_running(batch.batch_id, now.status))
                return

    async def _end(self, batch: Watched, now: Batch) -> None:
        """Answer every line of a finished batch (its plan is closed at the run's end)."""
        assert batch.batch_id is not None
        if now.status == "failed":
            reason = (now.error or {}).get("message") or "no reason given"
            batch.answer_all(failed(batch.batch_id, str(reason)))
        else:
            try:
                outcomes = await self.calls.outcomes(batch.batch_id, now)
            except InsufficientCreditsError as exc:  # the results gate: billed, not shown
                batch.answer_all(withheld(batch.batch_id, exc))
                return  # the plan stays open: a rerun after credit fetches the results
            except APIError as exc:  # finished and billed: never sent again, fetched again
                batch.answer_all(unread(batch.batch_id, exc))
                return
            for cid in set(batch.lines) | batch.held():
                outcome = outcomes.get(cid) or unknown(
                    f"batch {batch.batch_id} ended {now.status} without this line's result; "
                    "it goes into a later batch"
                )
                waiting = batch.lines.pop(cid, None)
                if waiting is not None:
                    resolve(waiting.answer, outcome)
                elif batch.earlier is not None:
                    batch.results[cid] = outcome
        # closed at the run's end (``aclose``), once every answer's record is written and every
        # served answer claimed: a kill before leaves it open, and the rerun fetches it again
        batch.ended = now.status

    def _close(self, batch: Watched, status: str) -> None:
        """Journal that ``batch``'s plan (and the plans that moved its lines) is closed."""
        if batch.closed:
            return
        batch.closed, batch.status = True, status
        self._events(Closed(batch.run, batch.plan, status))
        for earlier in batch.joined:
            self._events(Closed(earlier.run, earlier.plan, status))
        for plan in batch.moved:
            self._events(Closed(None, plan, status))

"""The senders a paid run may send through, a small registry (``SENDERS``): the first whose
``chosen(options, learned)`` holds sends the run.

- ``batch``: the Batch API sender (``learned.batch``, ``generate --batch``: ``run.send.batch_sender``),
  its events journaled by the run (``run.books.batch_books``);
- ``given``: the sender a caller passed (``options.send``: a test's double, a replay);
- ``http``: the HTTP transport (``run.send.transport``, aiohttp), the default; a key-limit stop adds
  what ``/key`` says of the limit.

Each kind's ``open(options, learned, replay, rows, awaiting)`` holds what the run sends through (the
transport, the batch client) for the run and yields a ``Channel``, which ``run.paid.run_job`` uses
in the order its protocol lists; the sender is made once the run's books exist (the batch sender
reports its events to them and stops with the run).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Collection
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import TYPE_CHECKING, Protocol

from openrouter_probe.errors import APIError
from openrouter_probe.rules.quantities import format_usd
from openrouter_probe.run.books.books import Books
from openrouter_probe.run.books.reconcile import Lookup
from openrouter_probe.run.config import Learned, RunPlan
from openrouter_probe.run.money.replay import JournalReplay
from openrouter_probe.run.result import RunResult
from openrouter_probe.run.rows import PromptRow
from openrouter_probe.run.schedule.waits import Waits
from openrouter_probe.run.send.sender import Sender
from openrouter_probe.run.stop import StopReason

if TYPE_CHECKING:
    from openrouter_probe.api.batches import BatchClient
    from openrouter_probe.run.books.batch_books import BatchClaims
    from openrouter_probe.run.send.batch_plan import BatchEvent, EventSink
    from openrouter_probe.run.send.batch_sender import BatchSender

__all__ = ["SENDERS", "Channel", "SenderKind", "key_figures", "sender_for"]


class Channel(Protocol):
    """A way out opened for one run (see the module)."""

    #: what the books settle an attempt left unknown from (``/generation``; ``None``: nothing)
    lookup: Lookup | None

    def sender(self, books: Books, claims: BatchClaims | None, waits: Waits) -> Sender:
        """The run's sender, reporting to ``books`` (and ``claims``), stopping with ``waits``."""
        ...

    async def ready(self) -> None:
        """What the sender does before the first request is taken."""

    async def finish(self, result: RunResult) -> RunResult:
        """``result`` with what the sender adds to it, once it is closed."""
        ...


#: ``open(options, learned, replay, rows, awaiting)``: ``awaiting`` the rows recorded ``failed``
#: whose line an open batch holds (``ResumeState.awaiting``): only that answer is taken
Opener = Callable[
    [RunPlan, Learned, JournalReplay, list[PromptRow], Collection[str]],
    contextlib.AbstractAsyncContextManager[Channel],
]


@dataclass(frozen=True)
class SenderKind:
    """One way to send a run: its ``name``, when the options and what the job learned choose
    it, and how it opens."""

    name: str
    chosen: Callable[[RunPlan, Learned], bool]
    open: Opener


def sender_for(options: RunPlan, learned: Learned) -> SenderKind:
    """The sender ``options`` and ``learned`` choose (the first of ``SENDERS``)."""
    return next(kind for kind in SENDERS if kind.chosen(options, learned))


class _Batches:
    """The batch sender (``generate --batch``), on the same path: the books journal each batch's
    plan and id and settle each line from the batch's cost; a batch line has no ``/generation``
    to settle it from."""

    def __init__(
        self,
        options: RunPlan,
        learned: Learned,
        client: BatchClient,
        replay: JournalReplay,
        rows: list[PromptRow],
        awaiting: Collection[str],
    ) -> None:
        self.options, self.client, self.replay = options, client, replay
        self.settings = learned.batch
        self.lookup: Lookup | None = None
        self.wanted, self.awaiting = {str(row.id) for row in rows}, awaiting
        self.made: BatchSender | None = None
        self.said: list[str] = []

    def sender(self, books: Books, claims: BatchClaims | None, waits: Waits) -> Sender:
        from openrouter_probe.run.send.batch_sender import BatchSender

        options, replay = self.options, self.replay
        assert self.settings is not None and claims is not None
        self.made = BatchSender(
            self.settings,
            events=_batch_sink(books, claims),
            stopped=waits.stopped,
            client=self.client,
            earlier=replay.batches,
            recorded=replay.batch_ids,
            wanted=self.wanted,
            awaiting=self.awaiting,
            sleep=options.sleep,
            clock=options.clock,
            wall_clock=options.wall_clock,
        )
        return self.made

    async def ready(self) -> None:
        # the batches earlier runs left are looked at (and a finished one's paid results
        # fetched) before anything new is reserved
        if self.made is not None:
            await self.made.ready()

    async def aclose(self) -> None:
        if self.made is not None:
            self.said = await self.made.aclose()

    async def finish(self, result: RunResult) -> RunResult:
        return replace(result, warnings=(*result.warnings, *self.said))


@contextlib.asynccontextmanager
async def _open_batches(
    options: RunPlan,
    learned: Learned,
    replay: JournalReplay,
    rows: list[PromptRow],
    awaiting: Collection[str],
) -> AsyncIterator[Channel]:
    from openrouter_probe.api.batches import TIMEOUT, BatchClient

    with BatchClient(connection=replace(options.connection, timeout=TIMEOUT)) as client:
        channel = _Batches(options, learned, client, replay, rows, awaiting)
        try:
            yield channel
        finally:
            await channel.aclose()


def _batch_sink(books: Books, claims: BatchClaims) -> EventSink:
    """Where the batch sender's events go: the plan events to the plan journal, the money
    events to the books (the claims the sender takes up are the books')."""
    from openrouter_probe.run.books.batch_books import BatchJournal, settlements
    from openrouter_probe.run.send.batch_plan import Released, Said, SettledEarlier

    journal = BatchJournal(claims.journal, claims)

    def record(event: BatchEvent) -> str | None:
        match event:
            case Said(text):
                books.warn(text)
            case Released():  # claims taken over that no attempt carries count again
                for claim in claims.release():
                    books.hand_back(claim.reserved_usd, claim.dataset)
            case SettledEarlier(batch, costs):
                for pending, cost in settlements(batch, costs):
                    books.reconciled(pending, cost)
            case _:
                return journal.record(event)
        return None

    return record


class _Given:
    """The caller's sender (``options.send``) and lookup."""

    def __init__(self, send: Sender, lookup: Lookup | None) -> None:
        self.send, self.lookup = send, lookup

    def sender(self, books: Books, claims: BatchClaims | None, waits: Waits) -> Sender:
        return self.send

    async def ready(self) -> None:
        return None

    async def finish(self, result: RunResult) -> RunResult:
        return result


def _open_given(options: RunPlan, *_: object) -> contextlib.nullcontext[Channel]:
    assert options.send is not None
    return contextlib.nullcontext(_Given(options.send, options.lookup))


class _Http(_Given):
    """The HTTP transport, ``/generation`` settling what it leaves unknown; a key-limit stop
    adds what ``/key`` says of the limit."""

    def __init__(self, send: Sender, lookup: Lookup | None, options: RunPlan) -> None:
        super().__init__(send, lookup)
        self.options = options

    async def finish(self, result: RunResult) -> RunResult:
        if result.stop_reason != StopReason.KEY_LIMIT:
            return result
        figures = await asyncio.to_thread(key_figures, self.options)
        return replace(result, message=result.message + figures)


@contextlib.asynccontextmanager
async def _open_http(options: RunPlan, *_: object) -> AsyncIterator[Channel]:
    from openrouter_probe.api.completion import response_cache_headers
    from openrouter_probe.run.send.transport import HttpTransport

    ttl = options.response_cache_ttl_s
    async with HttpTransport(
        options.connection,
        limit=options.concurrency,
        read_timeout_s=options.read_timeout_s,
        clock=options.clock,
        headers=None if ttl is None else response_cache_headers(ttl),
    ) as transport:
        yield _Http(transport.send, options.lookup or transport.generation_cost, options)


def key_figures(options: RunPlan) -> str:
    """What ``/key`` says of the key's own limit, for the key-limit stop (``""``: unreadable)."""
    from openrouter_probe.api.client import Client

    try:
        with Client(connection=options.connection, attempts=2, retry_timeout=10) as client:
            info = client.key()
    except APIError:
        return ""
    if info.limit is None:
        return ""
    said = f" (GET /key: the key's limit is {format_usd(Decimal(str(info.limit)))}"
    if info.usage is not None:
        said += f", {format_usd(Decimal(str(info.usage)))} used"
    if info.limit_remaining is not None:
        said += f", {format_usd(Decimal(str(info.limit_remaining)))} remaining"
    if info.limit_reset:
        said += f", reset {info.limit_reset}"
    return said + ")"


#: Every sender, in the order they are chosen (the first that ``chosen`` admits).
SENDERS: tuple[SenderKind, ...] = (
    SenderKind("batch", lambda options, learned: learned.batch is not None, _open_batches),
    SenderKind("given", lambda options, learned: options.send is not None, _open_given),
    SenderKind("http", lambda options, learned: True, _open_http),
)

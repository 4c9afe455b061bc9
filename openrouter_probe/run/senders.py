"""The senders a paid run may send through, a small registry (``SENDERS``): the first whose
``chosen(options, learned)`` holds sends the run.

- ``batch``: the Batch API sender (``learned.batch``, ``generate --batch``: ``run.send.batch_sender``),
  its events journaled by the run (``run.books.batch_books``);
- ``given``: the sender a caller passed (``options.send``: a test's double, a replay);
- ``http``: the HTTP transport (``run.send.transport``, aiohttp), the default; a key-limit stop adds
  what ``/key`` says of the limit.

Each takes the run's maker (``make(sender, lookup)``: the ``run.schedule.runner.Run`` with that sender and
``/generation`` lookup), runs it with the signal handlers the options ask for, and returns its
summary.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass, replace
from decimal import Decimal

from openrouter_probe.errors import APIError
from openrouter_probe.rules.quantities import format_usd
from openrouter_probe.run.books.batch_books import BatchClaims, BatchJournal, settlements
from openrouter_probe.run.books.reconcile import Lookup
from openrouter_probe.run.config import JobOptions, Learned
from openrouter_probe.run.money.replay import JournalReplay
from openrouter_probe.run.result import RunResult
from openrouter_probe.run.rows import PromptRow
from openrouter_probe.run.schedule.runner import Run
from openrouter_probe.run.send.batch_plan import (
    BatchEvent,
    EventSink,
    Released,
    Said,
    SettledEarlier,
)
from openrouter_probe.run.send.sender import Sender
from openrouter_probe.run.stop import StopReason

__all__ = ["SENDERS", "SenderKind", "key_figures", "sender_for"]

#: What makes the run with a sender and a ``/generation`` lookup (``None``: none).
MakeRun = Callable[[Sender, Lookup | None], Run]


@dataclass(frozen=True)
class SenderKind:
    """One way to send a run: its ``name``, when the options and what the job learned choose
    it, and how it runs."""

    name: str
    chosen: Callable[[JobOptions, Learned], bool]
    #: ``run(make, options, learned, replay, rows, awaiting)``; ``awaiting``: rows recorded
    #: ``failed`` whose line an open batch holds (``ResumeState.awaiting``): only that answer is
    #: taken
    run: Callable[
        [MakeRun, JobOptions, Learned, JournalReplay, list[PromptRow], Collection[str]],
        Awaitable[RunResult],
    ]


def sender_for(options: JobOptions, learned: Learned) -> SenderKind:
    """The sender ``options`` and ``learned`` choose (the first of ``SENDERS``)."""
    return next(kind for kind in SENDERS if kind.chosen(options, learned))


async def _run_batches(
    make: Callable[[Sender, Lookup | None], Run],
    options: JobOptions,
    learned: Learned,
    replay: JournalReplay,
    rows: list[PromptRow],
    awaiting: Collection[str] = (),
) -> RunResult:
    """The run with the batch sender (``generate --batch``), on the same path: the books journal
    each batch's plan and id and settle each line from the batch's cost."""
    from openrouter_probe.api.batches import TIMEOUT, BatchClient
    from openrouter_probe.run.send.batch_sender import BatchSender

    assert learned.batch is not None
    with BatchClient(connection=replace(options.connection, timeout=TIMEOUT)) as client:
        sender = BatchSender(
            learned.batch,
            client=client,
            earlier=replay.batches,
            recorded=replay.batch_ids,
            wanted={str(row.id) for row in rows},
            awaiting=awaiting,
            sleep=options.sleep,
            clock=options.clock,
            wall_clock=options.wall_clock,
        )
        run = make(sender, None)  # a batch line has no /generation to settle it from
        # the sender reports its plans' events (it holds no books): the plan journal takes
        # them, the books the money; the stop ends waiting for a batch
        sender.bind(_batch_sink(run), stopped=run.waits.stopped)
        try:
            # the batches earlier runs left are looked at (and a finished one's paid results
            # fetched) before anything new is reserved
            result = await _run(run, options.handle_signals, before=sender.ready())
        finally:
            said = await sender.aclose()
        return replace(result, warnings=(*result.warnings, *said))


def _batch_sink(run: Run) -> EventSink:
    """Where the batch sender's events go: the plan events to the plan journal, the money
    events to the books (the claims the sender takes up are the row source's)."""
    books, claims = run.books, run.source.claims
    assert isinstance(claims, BatchClaims)
    journal = BatchJournal(books.journal, claims)

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


async def _run_given(
    make: MakeRun,
    options: JobOptions,
    learned: Learned,
    replay: JournalReplay,
    rows: list[PromptRow],
    awaiting: Collection[str] = (),
) -> RunResult:
    """The run with the caller's sender (``options.send``) and lookup."""
    assert options.send is not None
    return await _run(make(options.send, options.lookup), options.handle_signals)


async def _run_http(
    make: MakeRun,
    options: JobOptions,
    learned: Learned,
    replay: JournalReplay,
    rows: list[PromptRow],
    awaiting: Collection[str] = (),
) -> RunResult:
    """The run with the HTTP transport, ``/generation`` settling what it leaves unknown."""
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
        lookup = options.lookup or transport.generation_cost
        result = await _run(make(transport.send, lookup), options.handle_signals)
    if result.stop_reason == StopReason.KEY_LIMIT:
        figures = await asyncio.to_thread(key_figures, options)
        result = replace(result, message=result.message + figures)
    return result


async def _run(
    run: Run, handle_signals: bool, *, before: Awaitable[None] | None = None
) -> RunResult:
    """``run`` to its end (``before`` awaited first, the signal handlers already in place)."""
    remove = run.install_signal_handlers() if handle_signals else None
    try:
        if before is not None:
            await before
        return await run.run()  # its warnings are said as they happen (Run.warn)
    finally:
        if remove is not None:
            remove()


def key_figures(options: JobOptions) -> str:
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
    SenderKind("batch", lambda options, learned: learned.batch is not None, _run_batches),
    SenderKind("given", lambda options, learned: options.send is not None, _run_given),
    SenderKind("http", lambda options, learned: True, _run_http),
)

"""The run: a fixed pool of C workers taking rows round-robin across datasets, the cap, retries.

A worker takes the next row in turn from the datasets (one row of each in rotation, so that every
dataset advances at the same pace), reserving its worst case under the cap and the dataset's
sub-cap (``SpendCap.shares``: equal by default, ``weights`` otherwise; what a finished dataset
leaves is lent to the others). It journals the attempt (``ledger``: flushed before the request
leaves), sends it, journals the generation id as soon as the headers bring it, settles the
reservation to the answer's cost and appends the row's record. An attempt whose cost is unknown (it
left and timed out, was cut, was cancelled, or its answer had no valid ``usage.cost``) counts at its
whole reservation until the reconciler (``run.reconcile``) settles it from ``/generation``.

What a failed attempt leads to is one table, ``ON_FAILURE`` (by ``Failure.kind``, which
``run.failure``'s table of OpenRouter's errors decides). Retries wait ``Backoff.next_wait`` from the
row's first send (the sleep is injected: tests never wait), and a stop cancels the waits. OpenRouter's
own, key-wide 429 pauses the whole pool for its ``Retry-After``, up to ``max_wait_s``; beyond that
the run stops (``rate-limited``) with the time to resume, and its rows stay unsent. An adaptive
limit lowers the number of requests in flight on 429 storms and raises it again.

Targets (``target_tokens`` per dataset, billed output tokens): a dataset gets no new request once
its settled tokens plus the expected tokens of its requests in flight (that dataset's mean so far)
reach the target.

Stopping: ``request_stop`` (the first SIGINT/SIGTERM) stops taking rows, cancels backoff and pause
waits, and lets what is in flight finish, for at most ``drain_timeout_s``; ``cancel`` (the second,
or the drain timing out) cancels the requests in flight: each is recorded as ``cancelled`` and
counted at its worst case until settled.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import signal
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Protocol

from openrouter_probe.api.backoff import Backoff
from openrouter_probe.run.failure import Failure, FailureKind
from openrouter_probe.run.ledger import Ledger, Pending
from openrouter_probe.run.output import OutputLog
from openrouter_probe.run.reconcile import Lookup, Reconciler
from openrouter_probe.run.request import RequestBuilder, dumps
from openrouter_probe.run.rows import PromptRow
from openrouter_probe.run.spend import Prices, RequestShape, SpendCap, request_shape
from openrouter_probe.run.streak import FailureStreak
from openrouter_probe.run.summary import DatasetTally, ProviderTally, RunSummary
from openrouter_probe.run.transport import Answer
from openrouter_probe.run.turns import TurnBook, new_turn, row_totals

__all__ = ["ON_FAILURE", "AdaptiveLimit", "Run", "RunSettings", "Sender"]

log = logging.getLogger(__name__)

#: Rows failed in a row with no HTTP answer at all after which a run stops as ``unreachable``.
UNREACHABLE_AFTER_ROWS = 8
#: Pauses for the key's own 429 in a row, with no answer between, after which the run stops.
PAUSES_BEFORE_STOP = 5

Sleep = Callable[[float], Awaitable[None]]


class Sender(Protocol):
    """What sends one request body: ``HttpTransport.send`` or a test double. ``on_id`` gets the
    generation id when the headers bring it; ``ceiling_s`` bounds the attempt."""

    def __call__(
        self,
        body: bytes,
        *,
        stream: bool,
        on_id: Callable[[str], None] | None = None,
        ceiling_s: float | None = None,
    ) -> Awaitable[Answer | Failure]: ...


class Progress(Protocol):
    def row_done(self, record: dict[str, Any], run: Run) -> None: ...

    def tick(self, run: Run) -> None: ...


@dataclass
class RunSettings:
    """What every request of a run shares, and how the run behaves.

    ``read_timeout_s`` and ``min_tokens_per_s`` give each attempt its ceiling:
    ``read_timeout_s + max_tokens / min_tokens_per_s``; ``max_wait_s`` is the longest pause for
    the key's own 429; ``weights`` split the cap between datasets (unnamed ones weigh 1).
    """

    model: str
    provider_json: str  # the policy's provider block, serialized once, sent byte for byte
    policy_sha256: str
    max_tokens: int
    stream: bool = False
    temperature: float | None = None
    reasoning: dict[str, Any] | None = None
    target_tokens: int | None = None
    concurrency: int = 256
    backoff: Backoff = field(
        default_factory=lambda: Backoff(
            wait_initial_s=1.0, wait_max_s=60.0, attempts=6, timeout_s=600.0
        )
    )
    lower_max_tokens: bool = False
    drain_timeout_s: float = 60.0
    read_timeout_s: float = 300.0
    min_tokens_per_s: float = 4.0
    max_wait_s: float = 60.0
    weights: Mapping[str, float] = field(default_factory=dict)

    def ceiling_s(self, max_tokens: int) -> float:
        """How long one attempt may take at most, from its send to its last byte."""
        return self.read_timeout_s + max_tokens / self.min_tokens_per_s

    def builder(self) -> RequestBuilder:
        return RequestBuilder(
            model=self.model,
            provider_json=self.provider_json,
            stream=self.stream,
            temperature=self.temperature,
            reasoning=self.reasoning,
        )


class AdaptiveLimit:
    """How many requests may be in flight: ``maximum`` at first, less after 429 storms.

    Multiplicative decrease (×0.7, at most once per ``cooldown_s``) on a rate-limited answer;
    additive increase (+1 per ``limit`` successes, about one per round trip) otherwise.
    """

    def __init__(self, maximum: int, *, cooldown_s: float = 1.0) -> None:
        self.maximum = maximum
        self.limit = float(maximum)
        self.allowed = maximum  # int(limit), at least 1: read for every request
        self.cooldown_s = cooldown_s
        self._last_decrease = -1e9

    def on_rate_limited(self, now: float) -> None:
        if now - self._last_decrease >= self.cooldown_s:
            self.limit = max(1.0, self.limit * 0.7)
            self.allowed = max(1, int(self.limit))
            self._last_decrease = now

    def on_success(self) -> None:
        if self.limit < self.maximum:
            self.limit = min(float(self.maximum), self.limit + 1.0 / self.limit)
            self.allowed = max(1, int(self.limit))


@dataclass(slots=True)
class _Attempts:
    """One row's attempts so far: what the next one sends and reserves, what earlier ones cost."""

    max_tokens: int
    body: bytes
    shape: RequestShape
    prices: Prices
    worst: Decimal
    first_s: float | None = None  # the first send: the retry deadline runs from here
    number: int = 0
    extra_cost: Decimal = Decimal(0)  # what earlier, failed attempts cost (known ones)
    id_json: str = ""  # the row id as JSON, for the journal
    ceiling_s: float | None = None  # how long an attempt may take (RunSettings.ceiling_s)
    flying: bool = False  # an attempt is in flight (a cancellation records it)
    cost: Decimal | None = None  # the answered attempt's usage.cost (None: unknown)
    pauses_seen: int = 0  # the pool's pauses when the attempt left


class Run:
    """One run over ``rows``: create it, then ``await run.run()``; read ``run.summary``."""

    def __init__(
        self,
        rows: list[PromptRow],
        *,
        settings: RunSettings,
        cap: SpendCap,
        prices: Prices,
        output: OutputLog,
        send: Sender,
        summary: RunSummary,
        tokens_before: dict[str, int] | None = None,
        sleep: Sleep = asyncio.sleep,
        progress: Progress | None = None,
        clock: Callable[[], float] = time.monotonic,
        prices_for: Callable[[PromptRow], Prices] | None = None,
        ledger: Ledger | None = None,
        lookup: Lookup | None = None,
        pending: list[Pending] | None = None,
        wall_clock: Callable[[], float] = time.time,
        turns: TurnBook | None = None,
    ) -> None:
        self.settings = settings
        self.turns = turns  # ``--turns all``: the rows that go turn by turn
        self.ledger = ledger
        self.run_id = ledger.run_id if ledger is not None else None
        self.cap = cap
        self.prices = prices
        # A row's own worst-case prices (a row pinned to one endpoint); ``None``: ``prices``.
        self.prices_for = prices_for
        self.output = output
        self.send = send
        self.summary = summary
        self.sleep = sleep
        self.progress = progress
        self.clock = clock
        self.wall_clock = wall_clock
        # Attempts counted at their worst case are settled from /generation when there is a
        # journal to write what it says (``lookup``: ``HttpTransport.generation_cost``).
        self.reconciler = (
            Reconciler(
                lookup,
                on_settled=self.reconciled,
                on_change=self._notify,
                sleep=sleep,
            )
            if lookup is not None and ledger is not None
            else None
        )
        for earlier in pending or ():
            if self.reconciler is not None:
                self.reconciler.add(earlier, now=True)
        self.limiter = AdaptiveLimit(settings.concurrency)
        self.queues: dict[str, deque[PromptRow]] = {}
        for row in rows:
            self.queues.setdefault(row.dataset, deque()).append(row)
        self._order = list(self.queues)
        self._open = list(self._order)  # the datasets still taking rows, in turn
        self._turn = 0
        self._prepared: dict[int, _Attempts] = {}
        self.settled_tokens: dict[str, int] = dict(tokens_before or {})
        self.observed: dict[str, tuple[int, int]] = {}  # dataset -> (tokens, rows) this run
        self.in_flight_by_dataset: dict[str, int] = dict.fromkeys(self._order, 0)
        self._dataset_json = {name: dumps(name) for name in self._order}
        self._flying_max_tokens: dict[str, int] = dict.fromkeys(self._order, 0)
        self.in_flight = 0
        self.stopping = False
        self._paused: asyncio.Future[None] | None = None  # open while the pool is paused
        self._pauses_in_a_row = 0
        # Rows given up on in a row without one HTTP answer (refused, reset, stalled): the server
        # is unreachable, and going on would only grind through every row (see _failed).
        self.unanswered_streak = 0
        self.streak = FailureStreak()  # nearly every recent attempt failing for one reason
        self._warned_cost: set[str] = set()
        self._waiters: list[asyncio.Future[None]] = []
        self._workers: list[asyncio.Task[None]] = []
        self._stopped: asyncio.Future[None] | None = None
        self._drain_handle: asyncio.TimerHandle | None = None
        self._builder = settings.builder()
        self._prefix = self._builder.prefix()
        self._prefix_bytes = len(self._prefix.encode())
        self.started = clock()
        if cap.cap_usd is not None and self._order:
            cap.shares({d: settings.weights.get(d, 1) for d in self._order})
        self._out_of_money: list[str] = []
        self._reconciling: asyncio.Future[None] | None = None

    # -- stopping ---------------------------------------------------------------------------------

    def request_stop(self, reason: str, message: str = "") -> None:
        """Stop taking rows and cancel waits; requests in flight finish (the first Ctrl-C, a 402,
        the budget)."""
        if not self.stopping:
            self.stopping = True
            self.summary.stop_reason = reason
            self.summary.message = message
            if reason == "interrupted":
                loop = asyncio.get_running_loop()
                self._drain_handle = loop.call_later(self.settings.drain_timeout_s, self.cancel)
        if self._stopped is not None and not self._stopped.done():
            self._stopped.set_result(None)
        self._notify()

    def cancel(self) -> None:
        """Cancel the requests in flight (the second Ctrl-C, or the drain taking too long)."""
        self.stopping = True
        if self.summary.stop_reason in ("done", "interrupted"):
            self.summary.stop_reason = "cancelled"
        if self._stopped is not None and not self._stopped.done():
            self._stopped.set_result(None)
        for task in self._workers:
            task.cancel()

    def install_signal_handlers(self) -> Callable[[], None]:
        """Make SIGINT/SIGTERM stop then cancel; return a function that removes the handlers."""
        loop = asyncio.get_running_loop()
        installed = []

        def on_signal(signame: str) -> None:
            if self.stopping:
                log.warning("%s again: cancelling the requests in flight", signame)
                self.cancel()
            else:
                log.warning(
                    "%s: no new requests; waiting up to %.0f s for the %d in flight "
                    "(again to cancel them)",
                    signame,
                    self.settings.drain_timeout_s,
                    self.in_flight,
                )
                self.request_stop("interrupted", f"stopped by {signame}")

        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.add_signal_handler(sig, on_signal, sig.name)
                installed.append(sig)
            except (NotImplementedError, RuntimeError, ValueError):
                pass  # not the main thread (a notebook), or a platform without it

        def remove() -> None:
            for sig in installed:
                loop.remove_signal_handler(sig)

        return remove

    # -- waiting ----------------------------------------------------------------------------------

    def _notify(self) -> None:
        waiters, self._waiters = self._waiters, []
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)

    async def _wait_change(self) -> None:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        await fut

    async def _sleep_unless_stopped(self, seconds: float) -> None:
        """Sleep (the injected sleep) unless and until the run stops."""
        if seconds <= 0 or self.stopping:
            return
        if self._stopped is None:
            self._stopped = asyncio.get_running_loop().create_future()
        sleeper = asyncio.ensure_future(self.sleep(seconds))
        try:
            await asyncio.wait({sleeper, self._stopped}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            sleeper.cancel()

    async def _until_resumed(self) -> None:
        """Wait while the pool is paused (the pause's own task does the sleeping)."""
        if self._paused is not None and not self._paused.done():
            await asyncio.wait({self._paused})

    # -- rows, datasets and targets ---------------------------------------------------------------

    def _flying_tokens(self, dataset: str) -> float:
        """Tokens ``dataset``'s requests in flight are expected to bill: its own mean so far
        times their number, else (no answer of it yet) their ``max_tokens``: never another
        dataset's mean."""
        tokens, rows = self.observed.get(dataset, (0, 0))
        if rows:
            return self.in_flight_by_dataset.get(dataset, 0) * tokens / rows
        return float(self._flying_max_tokens.get(dataset, 0))

    def _target_reached(self, dataset: str, *, in_flight_too: bool = True) -> bool:
        target = self.settings.target_tokens
        if target is None:
            return False  # the common case: no target, nothing to look up
        settled = self.settled_tokens.get(dataset, 0)
        if not in_flight_too:
            return settled >= target
        return settled + self._flying_tokens(dataset) >= target

    def _prepare(self, row: PromptRow) -> _Attempts:
        """The row's first attempt: its body, shape, prices and worst case (kept while it waits)."""
        attempt = self._prepared.get(id(row))
        if attempt is not None:
            return attempt
        max_tokens = int(row.params.get("max_tokens", self.settings.max_tokens))
        prefix = (
            self._prefix if row.provider_json is None else self._builder.prefix(row.provider_json)
        )
        body = (prefix + self._builder.own_part(row, max_tokens)).encode()
        # the bytes the row adds to the prefix: what its prompt may be made of
        shape = request_shape(len(body) - len(prefix.encode()), row.messages, row.params)
        prices = self.prices if self.prices_for is None else self.prices_for(row)
        return _Attempts(
            max_tokens=max_tokens,
            body=body,
            shape=shape,
            prices=prices,
            worst=prices.worst_case_usd(
                prompt_tokens=shape.prompt_tokens, max_tokens=max_tokens, shape=shape
            ),
            id_json=dumps(row.id),
            ceiling_s=self.settings.ceiling_s(max_tokens),
        )

    def _close(self, dataset: str, why: str) -> None:
        """``dataset`` sends nothing more: its rows left are not sent; its sub-cap is lent."""
        queue = self.queues.pop(dataset, None)
        if dataset in self._open:
            self._open.remove(dataset)
        if queue:
            self.summary.not_sent += len(queue)
            tally = self.summary.datasets.get(dataset)
            if tally is not None:
                tally.not_sent += len(queue)
            for row in queue:
                self._prepared.pop(id(row), None)
            log.info("%s: %s; %d row(s) not sent", dataset, why, len(queue))
        self.cap.close(dataset)
        self._notify()

    def _money_may_come(self, dataset: str, worst: Decimal) -> bool:
        """Whether money for ``dataset``'s next request may still free up: something settles,
        the reconciler gives some back, or another dataset closes and lends its share."""
        if self.cap.in_flight or (self.reconciler is not None and self.reconciler.outstanding):
            return True
        if not self.cap.fits(worst):
            return False
        return any(
            d != dataset and (q or self.in_flight_by_dataset.get(d)) for d, q in self.queues.items()
        )

    def _pick(self) -> tuple[PromptRow, _Attempts] | str:
        """The next row in turn that fits, reserved; else ``"wait"`` or ``"done"``. No await:
        the check and the reservation cannot interleave with another worker's."""
        while True:
            picked = self._pick_once()
            if picked != "again":
                return picked

    def _pick_alone(self) -> tuple[PromptRow, _Attempts] | None:
        """The common case in a few lines: one dataset, no target, a row that fits now."""
        if len(self._open) != 1 or self.settings.target_tokens is not None:
            return None
        queue = self.queues[self._open[0]]
        if not queue or self.in_flight >= self.limiter.allowed:
            return None
        row = queue[0]
        attempt = self._prepare(row)
        if not self.cap.try_reserve(attempt.worst, row.dataset):
            self._prepared[id(row)] = attempt
            return None  # the general path decides: wait, or the money is out
        queue.popleft()
        self._prepared.pop(id(row), None)
        return row, attempt

    def _pick_once(self) -> tuple[PromptRow, _Attempts] | str:
        if self.in_flight >= self.limiter.allowed:
            return "wait"
        blocked: list[tuple[str, Decimal]] = []
        datasets = self._open
        count = len(datasets)
        for k in range(count):
            dataset = datasets[(self._turn + k) % count]
            queue = self.queues[dataset]
            if not queue or self._target_reached(dataset, in_flight_too=False):
                if queue:
                    target = self.settings.target_tokens
                    self._close(dataset, f"reached its target of {target} tokens")
                    return "again"
                if not self.in_flight_by_dataset.get(dataset):
                    self._close(dataset, "all rows sent")
                    return "again"
                continue
            if self._target_reached(dataset):
                blocked.append((dataset, Decimal(0)))
                continue
            row = queue[0]
            attempt = self._prepare(row)
            if self.cap.try_reserve(attempt.worst, dataset):
                queue.popleft()
                self._prepared.pop(id(row), None)
                self._turn = (self._turn + k + 1) % count
                return row, attempt
            self._prepared[id(row)] = attempt  # it waits: keep what was computed
            if not self._money_may_come(dataset, attempt.worst):
                self._spent_out(dataset, row, attempt)
                return "again"
            blocked.append((dataset, attempt.worst))
        if not blocked:
            return "done" if not self.queues or not self.in_flight else "wait"
        reconciling = self.reconciler is not None and self.reconciler.outstanding
        if not self.cap.in_flight and not reconciling and all(worst for _, worst in blocked):
            # every dataset waits for another to close: the one that had the most closes first
            self._spent_out(*self._richest(blocked))
            return "again"
        return "wait"

    def _richest(self, blocked: list[tuple[str, Decimal]]) -> tuple[str, PromptRow, _Attempts]:
        def weight(dataset: str) -> Decimal:
            return Decimal(str(self.settings.weights.get(dataset, 1)))

        dataset = max(
            (d for d, _ in blocked),
            key=lambda d: self.cap.committed_by_dataset.get(d, Decimal(0)) / weight(d),
        )
        row = self.queues[dataset][0]
        return dataset, row, self._prepare(row)

    def _spent_out(self, dataset: str, row: PromptRow, attempt: _Attempts) -> None:
        """``dataset``'s next row does not fit in what it may still spend: close it."""
        share = self.cap.share_usd(dataset)
        if share is not None and len(self._order) > 1:
            left = max(Decimal(0), share - self.cap.committed_by_dataset.get(dataset, Decimal(0)))
            where = f"its share of the cap has ${left:.6f} left"
        else:
            left = self.cap.remaining_usd or Decimal(0)
            where = f"only ${left:.6f} of the ${self.cap.cap_usd} cap remains"
        message = f"{row.id}: the next request may cost up to ${attempt.worst:.6f} and {where}"
        # the advice is for the next start, where every dataset is open again: its share then
        shared = share is not None and len(self._order) > 1
        base = self._first_share(dataset) if shared else left
        fits = attempt.prices.max_tokens_within(
            base, prompt_tokens=attempt.shape.prompt_tokens, shape=attempt.shape
        )
        if self.summary.requests == 0 and fits < attempt.max_tokens:
            message += (
                f"; --max-tokens {fits} would fit"
                + (" its share with every dataset open" if shared else "")
                if fits >= 1
                else f"; raise --budget-usd above ${attempt.worst:.6f} for one row"
            )
        self._out_of_money.append(f"{dataset}: {message}" if len(self._order) > 1 else message)
        self._close(dataset, message)

    def _first_share(self, dataset: str) -> Decimal:
        """``dataset``'s share of the whole cap while every dataset is open (``--weights``)."""
        weight = Decimal(str(self.settings.weights.get(dataset, 1)))
        total = sum(
            (Decimal(str(self.settings.weights.get(d, 1))) for d in self._order), Decimal(0)
        )
        return (self.cap.cap_usd or Decimal(0)) * weight / total

    def _flying(self, row: PromptRow, attempt: _Attempts, step: int) -> None:
        """Count a request in (``step`` 1) or out (-1) of flight."""
        self.in_flight += step
        self.in_flight_by_dataset[row.dataset] += step
        self._flying_max_tokens[row.dataset] += step * attempt.max_tokens

    async def _take(self) -> tuple[PromptRow, _Attempts] | None:
        """Wait for the next row that fits (round-robin across datasets); ``None`` at the end."""
        while not self.stopping:
            if self._paused is not None and not self._paused.done():
                await self._until_resumed()
                continue
            picked = self._pick_alone() or self._pick()
            if picked == "done":
                return None
            if picked == "wait":
                await self._wait_change()
                continue
            assert not isinstance(picked, str)
            row, attempt = picked
            self._flying(row, attempt, 1)
            return row, attempt
        return None

    async def _reserve_again(self, row: PromptRow, attempt: _Attempts) -> bool:
        """Reserve a retry's worst case (waiting for the money, the limit, a pause)."""
        dataset = row.dataset
        while not self.stopping:
            if self._paused is not None and not self._paused.done():
                await self._until_resumed()
                continue
            if self.in_flight < self.limiter.allowed and self.cap.try_reserve(
                attempt.worst, dataset
            ):
                self._flying(row, attempt, 1)
                return True
            if self.in_flight < self.limiter.allowed and not self._money_may_come(
                dataset, attempt.worst
            ):
                self._spent_out(dataset, row, attempt)
                return False
            await self._wait_change()
        return False

    # -- one row ------------------------------------------------------------------------------------

    def _record(self, row: PromptRow, **fields: Any) -> dict[str, Any]:
        record: dict[str, Any] = {
            "id": row.id,
            "dataset": row.dataset,
            "status": None,
            "provider": None,
            "model": None,
            "finish_reason": None,
            "content": None,
            "reasoning": None,
            "usage": None,
            "cost_usd": None,
            "generation_id": None,
            "attempts": 0,
            "error": None,
            "messages": row.messages if self.turns is None else self.turns.prompt(row),
            "policy_sha256": self.settings.policy_sha256,
            "run_id": self.run_id,  # the journal holds this run's money, attempt by attempt
        }
        record.update(fields)
        return record

    def _write(self, record: dict[str, Any]) -> None:
        self.output.write(record)
        if self.progress is not None:
            self.progress.row_done(record, self)

    def _answered(self, row: PromptRow, answer: Answer, attempt: _Attempts) -> PromptRow | None:
        """Record an answer: the row's line, or, for a row that goes turn by turn, its turn (the
        request of its next turn is returned)."""
        if self.turns is not None and row.id in self.turns.rows:
            return self._turn_answered(row, answer, attempt)
        truncated = answer.finish_reason == "length"
        cost = attempt.cost
        record = self._record(
            row,
            status="truncated" if truncated else "ok",
            provider=answer.provider,
            model=answer.model,
            finish_reason=answer.finish_reason,
            content=answer.content,
            reasoning=answer.reasoning,
            usage=answer.usage,
            cost_usd=float(cost) if cost is not None else None,
            generation_id=answer.generation_id,
            attempts=attempt.number,
        )
        if answer.tool_calls:
            record["tool_calls"] = answer.tool_calls
        if answer.reasoning_details:
            record["reasoning_details"] = answer.reasoning_details  # verbatim: signatures
        if answer.logprobs is not None:
            record["logprobs"] = answer.logprobs
        if cost is None:
            record["possibly_billed_usd"] = float(attempt.worst)
        if attempt.extra_cost:
            record["failed_attempts_cost_usd"] = float(attempt.extra_cost)
        self._write(record)
        self._tally(row, answer, cost, truncated)
        return None

    def _turn_answered(
        self, row: PromptRow, answer: Answer, attempt: _Attempts
    ) -> PromptRow | None:
        """A turn of a row that goes turn by turn is answered: keep it (flushed to the turns file)
        and return the next turn's request; or, at the row's last turn (or a truncated one: the
        next turns would carry an answer the model never finished), write the row's line."""
        assert self.turns is not None
        progress = self.turns.rows[row.id]
        cost = attempt.cost
        turn = new_turn(
            progress.next_index,
            answer,
            attempts=attempt.number,
            cost=cost,
            worst=attempt.worst,
            extra_cost=attempt.extra_cost,
            run_id=self.run_id,
        )
        truncated = answer.finish_reason == "length"
        self.summary.turns_done += 1
        if not (progress.last or truncated):
            self.turns.log.keep(progress.row, turn)
            progress.done.append(turn)
            self._tally(row, answer, cost, truncated, turn=True)
            return progress.request()
        progress.done.append(turn)
        fields = row_totals(progress.done)
        self._write(self._record(row, status="truncated" if truncated else "ok", **fields))
        self._tally(row, answer, cost, truncated)
        return None

    def _tally(
        self,
        row: PromptRow,
        answer: Answer,
        cost: Decimal | None,
        truncated: bool,
        *,
        turn: bool = False,
    ) -> None:
        """Count an answer: its tokens and money, and the row it finishes (unless ``turn``: a turn
        before the row's last)."""
        s = self.summary
        tokens = answer.completion_tokens
        seen_tokens, seen_rows = self.observed.get(row.dataset, (0, 0))
        self.observed[row.dataset] = (seen_tokens + tokens, seen_rows + 1)
        self.settled_tokens[row.dataset] = self.settled_tokens.get(row.dataset, 0) + tokens
        s.output_tokens[row.dataset] = s.output_tokens.get(row.dataset, 0) + tokens
        dataset = s.datasets.get(row.dataset)
        if dataset is not None:
            dataset.done += not turn
            dataset.output_tokens += tokens
        name = answer.provider or "?"
        tally = s.providers.get(name)
        if tally is None:  # (setdefault would build a tally for every row)
            tally = s.providers[name] = ProviderTally()
        tally.rows += not turn
        tally.turns += self.turns is not None and row.id in self.turns.rows
        tally.completion_tokens += tokens
        usage = answer.usage or {}
        tally.prompt_tokens += int(usage.get("prompt_tokens") or 0)
        details = usage.get("completion_tokens_details") or {}
        tally.reasoning_tokens += int(details.get("reasoning_tokens") or 0)
        tally.cost_usd += cost or 0
        if not turn:
            s.truncated += truncated
            s.ok += not truncated
            tally.truncated += truncated

    def _failed(self, row: PromptRow, failure: Failure, attempt: _Attempts, why: str = "") -> None:
        error = failure.to_record()
        if why:
            error["message"] = f"{failure.message}; {why}"
        record = self._record(row, status="failed", attempts=attempt.number, error=error)
        if attempt.extra_cost:
            record["failed_attempts_cost_usd"] = float(attempt.extra_cost)
        if self.turns is not None and self.turns.started(row.id):
            record["turns"] = list(self.turns.rows[row.id].done)  # the turns it finished
        self._write(record)
        self.summary.failed += 1
        dataset = self.summary.datasets.get(row.dataset)
        if dataset is not None:
            dataset.done += 1
        if failure.status is not None:
            self.unanswered_streak = 0
            return
        self.unanswered_streak += 1
        if self.unanswered_streak >= UNREACHABLE_AFTER_ROWS:
            self.request_stop(
                "unreachable",
                f"{self.unanswered_streak} rows in a row got no answer from the server, the last: "
                f"{failure.message}. Check OPENROUTER_BASE_URL and the network, then rerun the "
                "same command (--redo-failed also resends the rows that failed)",
            )

    async def _do_row(self, row: PromptRow, attempt: _Attempts) -> None:
        """Send one row (reserved) until it is answered, fails, or the run stops; a row that
        goes turn by turn (``--turns all``) sends its next turn as soon as one is answered,
        reserved like a retry (under its dataset's share, waiting for the money)."""
        try:
            while True:
                following = await self._attempts(row, attempt)
                if following is None:
                    return
                row, attempt = following, self._prepare(following)
                if not await self._reserve_again(row, attempt):
                    self._unsent(row)
                    return
        except asyncio.CancelledError:
            if not attempt.flying:  # cancelled between attempts: nothing to record
                self._unsent(row)
            raise

    async def _attempts(self, row: PromptRow, attempt: _Attempts) -> PromptRow | None:
        """Send ``row`` until it is answered, fails or the run stops; return the request of its
        next turn, if it has one."""
        while True:
            attempt.number += 1
            outcome = await self._send_reserved(row, attempt)
            self._notify()
            if (same := self.streak.see(outcome, attempt.number)) is not None:
                self.request_stop("failing", same)
            if isinstance(outcome, Answer):
                return self._answered(row, outcome, attempt)
            if not await ON_FAILURE[outcome.kind](self, row, outcome, attempt):
                return None
            attempt.worst = attempt.prices.worst_case_usd(
                prompt_tokens=attempt.shape.prompt_tokens,
                max_tokens=attempt.max_tokens,
                shape=attempt.shape,
            )
            if not await self._reserve_again(row, attempt):
                self._unsent(row)
                return None

    def _unsent(self, row: PromptRow) -> None:
        """Count a row that stops unsent: ``not_sent``, or, when some of its turns are done,
        stopped mid-way (its finished turns are kept in the turns file for the resume)."""
        if self.turns is not None and self.turns.started(row.id):
            self.summary.rows_partial += 1
        else:
            self.summary.not_sent += 1

    def _unknown(
        self,
        row: PromptRow,
        worst: Decimal,
        number: int,
        generation_id: str | None,
        journaled: bool = True,
    ) -> None:
        """An attempt that left and whose cost is unknown: its worst case counts as spent until
        the reconciler settles it from ``/generation`` (when it has a generation id; one only the
        body named, not the headers, is journaled now, so that a restart can settle it too)."""
        if self.ledger is not None:
            if generation_id is not None and not journaled:
                self.ledger.generation(number, generation_id)
            self.ledger.settle_unknown(number)
        self.cap.settle(worst, worst, row.dataset)
        self.summary.spent_usd += worst
        self.summary.possibly_billed_usd += worst
        if generation_id is None or self.reconciler is None or self.run_id is None:
            self.summary.unsettleable += 1
            return
        self.reconciler.add(Pending(self.run_id, number, generation_id, worst, row.dataset))

    def _cancelled(self, row: PromptRow, attempt: _Attempts, number: int, gen: str | None) -> None:
        self._unknown(row, attempt.worst, number, gen)
        self.summary.cancelled += 1
        record = self._record(
            row,
            status="cancelled",
            attempts=attempt.number,
            error={"kind": "cancelled", "message": "cancelled in flight"},
            possibly_billed_usd=float(attempt.worst),
            generation_id=gen,
        )
        if attempt.extra_cost:
            record["failed_attempts_cost_usd"] = float(attempt.extra_cost)
        self.output.write(record)

    async def _send_reserved(self, row: PromptRow, attempt: _Attempts) -> Answer | Failure:
        """Send one attempt whose worst case is reserved; settle it in the cap and the journal.

        Journaled (in the OS) before it leaves, so a SIGKILL from then on cannot hide it; its
        generation id is journaled as soon as the headers bring it.
        """
        ledger, worst = self.ledger, attempt.worst
        if attempt.first_s is None:
            attempt.first_s = self.clock()
        attempt.pauses_seen = self.summary.pauses
        self.summary.requests += 1
        number = (
            ledger.sent(attempt.id_json, worst, self._dataset_json[row.dataset])
            if ledger is not None
            else 0
        )
        seen: list[str] = []

        def on_id(generation_id: str) -> None:
            seen.append(generation_id)
            if ledger is not None:
                ledger.generation(number, generation_id)

        attempt.flying = True
        try:
            outcome = await self.send(
                attempt.body,
                stream=self.settings.stream,
                on_id=on_id,
                ceiling_s=attempt.ceiling_s,
            )
        except asyncio.CancelledError:
            self._cancelled(row, attempt, number, seen[0] if seen else None)
            raise
        finally:
            self._flying(row, attempt, -1)
        attempt.flying = False
        if seen:
            self._settle(row, attempt, number, outcome, seen[0], journaled=True)
        else:
            self._settle(row, attempt, number, outcome, outcome.generation_id, journaled=False)
        return outcome

    def _settle(
        self,
        row: PromptRow,
        attempt: _Attempts,
        number: int,
        outcome: Answer | Failure,
        generation_id: str | None,
        *,
        journaled: bool,
    ) -> None:
        worst = attempt.worst
        if isinstance(outcome, Answer):
            self.limiter.on_success()
            self.unanswered_streak = 0
            self._pauses_in_a_row = 0
            cost = attempt.cost = outcome.cost_usd
            if cost is None:
                self._warn_cost(outcome, worst)
                self._unknown(row, worst, number, generation_id, journaled)
                return
        elif outcome.cost_unknown:
            self._unknown(row, worst, number, generation_id, journaled)
            return
        else:
            cost = outcome.cost_usd
            if cost:
                attempt.extra_cost += cost
        if self.ledger is not None:
            self.ledger.settle(number, cost)
        self.cap.settle(worst, cost, row.dataset)
        self.summary.spent_usd += cost or 0

    def _warn_cost(self, answer: Answer, worst: Decimal) -> None:
        provider = answer.provider or "?"
        raw = (answer.usage or {}).get("cost")
        if provider in self._warned_cost:
            return
        self._warned_cost.add(provider)
        what = f"usage.cost {raw!r} is not a cost" if answer.cost_invalid else "no usage.cost"
        self.warn(
            f"{provider}: {what}; its answers count at their worst case (${worst:.6f} here) "
            "until /generation settles them"
        )

    def warn(self, text: str) -> None:
        """Say ``text`` on stderr now and in the summary."""
        self.summary.warnings.append(text)
        log.warning("%s", text)

    # -- what a failed attempt leads to (ON_FAILURE) ---------------------------------------------

    async def _retry_transient(self, row: PromptRow, failure: Failure, attempt: _Attempts) -> bool:
        """Wait as the backoff says and send again (True), or fail the row when it gives up."""
        if failure.rate_limited:
            self.limiter.on_rate_limited(self.clock())
        decision = self.settings.backoff.next_wait(
            attempt=attempt.number,
            retry_after_s=failure.retry_after_s,
            elapsed_s=self.clock() - (attempt.first_s or self.clock()),
            wait_the_cap=True,  # final only when its attempts or its time are spent
        )
        if decision.give_up:
            self._failed(row, failure, attempt, decision.reason)
            return False
        self.summary.retries += 1
        log.warning(
            "%s: attempt %d failed (%s); retrying in %.1f s",
            row.id,
            attempt.number,
            failure.message[:200],
            decision.wait_s,
        )
        await self._sleep_unless_stopped(decision.wait_s)
        if self.stopping:
            self._unsent(row)
            return False
        return True

    async def _pause_pool(self, row: PromptRow, failure: Failure, attempt: _Attempts) -> bool:
        """OpenRouter's own 429: every worker waits ``Retry-After``; beyond ``max_wait_s`` (or
        after ``PAUSES_BEFORE_STOP`` pauses with no answer between) the run stops."""
        wait = failure.retry_after_s
        if wait is None and failure.reset_epoch_s is not None:
            wait = max(0.0, failure.reset_epoch_s - self.wall_clock())
        wait = 10.0 if wait is None else wait
        if attempt.pauses_seen < self.summary.pauses:
            # it left before the pool paused: that pause was for it too; just send it again
            await self._until_resumed()
            if self.stopping:
                self._unsent(row)
                return False
            return True
        self._pauses_in_a_row += 1
        if wait > self.settings.max_wait_s or self._pauses_in_a_row > PAUSES_BEFORE_STOP:
            resume = failure.reset_epoch_s or self.wall_clock() + wait
            at = datetime.datetime.fromtimestamp(resume, datetime.UTC).strftime("%H:%M")
            self.request_stop(
                "rate-limited",
                f"rate limited by the key: resume after {at} UTC (OpenRouter asked to wait "
                f"{wait:.0f} s, more than --max-wait {self.settings.max_wait_s:.0f} s: "
                f"{failure.message}); rerun the same command then",
            )
            self._unsent(row)
            return False
        if self._paused is None or self._paused.done():
            self.summary.pauses += 1
            log.warning(
                "rate limited by the key (OpenRouter's own 429): every request waits %.0f s", wait
            )
            self._paused = asyncio.ensure_future(self._sleep_unless_stopped(wait))
        await self._until_resumed()
        if self.stopping:
            self._unsent(row)
            return False
        return True

    async def _fail_row(self, row: PromptRow, failure: Failure, attempt: _Attempts) -> bool:
        """A final error for this row: record it as failed; the run goes on."""
        self._failed(row, failure, attempt)
        return False

    async def _stop_run(self, row: PromptRow, failure: Failure, attempt: _Attempts) -> bool:
        """No row can succeed (401, 402, 404): stop the run, the row unsent. A 402 that says the
        credits afford N tokens is sent again with ``max_tokens=N`` under ``--lower-max-tokens``,
        never below a quarter of the row's own (a near-empty answer would be recorded as
        truncated, and a resume never buys it again)."""
        afford = failure.afford_tokens
        floor = int(row.params.get("max_tokens", self.settings.max_tokens)) // 4
        if afford and self.settings.lower_max_tokens and floor <= afford < attempt.max_tokens:
            log.warning(
                "%s: credits afford only %d tokens; retrying with max_tokens=%d",
                row.id,
                afford,
                afford,
            )
            attempt.max_tokens = afford
            attempt.ceiling_s = self.settings.ceiling_s(afford)
            prefix = (
                self._prefix
                if row.provider_json is None
                else self._builder.prefix(row.provider_json)
            )
            attempt.body = (prefix + self._builder.own_part(row, afford)).encode()
            return True
        self._stop_for(failure)
        self._unsent(row)
        return False

    def _stop_for(self, failure: Failure) -> None:
        status = failure.status if failure.status not in (None, 200) else failure.code
        if failure.budget:
            self.request_stop(
                "budget-spent",
                f"an OpenRouter budget is spent (403): {failure.message}. Raise it or wait for "
                "its reset, then rerun the same command to resume",
            )
        elif status == 402:
            hint = (
                " (allow a lower max_tokens with --lower-max-tokens)"
                if failure.afford_tokens and not self.settings.lower_max_tokens
                else ""
            )
            # OpenRouter's own text usually names the credits page already: say it once.
            then = (
                "Then rerun"
                if "openrouter.ai/settings/credits" in failure.message
                else "Add credits at https://openrouter.ai/settings/credits, then rerun"
            )
            self.request_stop(
                "credits",
                f"OpenRouter says the credits are insufficient (402): {failure.message}{hint}. "
                f"{then} the same command to resume",
            )
        elif status == 401:
            self.request_stop("key", failure.message)
        else:
            self.request_stop(
                "no-route",
                f"OpenRouter found no endpoint for the request ({status}): {failure.message}. "
                f"The policy {self.summary.policy} admits nothing that serves "
                f"{self.settings.model} now: re-compile it",
            )

    # -- the money the reconciler settles -------------------------------------------------------

    def reconciled(self, pending: Pending, cost: Decimal) -> None:
        """``/generation`` says what an attempt counted at its worst case cost: journal it and
        give the difference back (this run's attempts and earlier runs' alike)."""
        if self.ledger is not None:
            self.ledger.reconciled(pending.run, pending.attempt, cost)
        back = pending.reserved_usd - cost
        if back >= 0:
            self.cap.give_back(back, pending.dataset)
        else:
            self.cap.add_spent(-back, pending.dataset)
            self.cap.overruns += 1
        s = self.summary
        if pending.run == self.run_id:
            s.spent_usd -= back
            s.possibly_billed_usd -= pending.reserved_usd
            s.reconciled += 1
            s.reconciled_back_usd += back
        else:
            s.spent_before_usd -= back
            s.possibly_billed_before_usd -= pending.reserved_usd
            s.reconciled_before += 1
            s.reconciled_before_back_usd += back
        self._notify()

    # -- the pool -----------------------------------------------------------------------------------

    async def _worker(self) -> None:
        while True:
            taken = await self._take()
            if taken is None:
                return
            await self._do_row(*taken)

    async def _settle_the_rest(self) -> None:
        """Let the reconciler settle what it holds (boundedly), unless the run was cancelled."""
        reconciler = self.reconciler
        if reconciler is None or self._reconciling is None:
            return
        reconciler.finish()
        if reconciler.outstanding and self.summary.stop_reason not in ("cancelled",):
            log.info("settling %d attempt(s) from /generation", reconciler.outstanding)
            stop = self._stopped
            waits = {self._reconciling} | (
                {stop} if stop is not None and not stop.done() else set()
            )
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        if not self._reconciling.done():
            self._reconciling.cancel()
        await asyncio.gather(self._reconciling, return_exceptions=True)

    async def run(self) -> RunSummary:
        """Run every worker to the end (or the stop); return the summary."""
        self._stopped = asyncio.get_running_loop().create_future()
        self._reconciling = (
            asyncio.ensure_future(self.reconciler.run()) if self.reconciler is not None else None
        )
        count = max(1, min(self.settings.concurrency, sum(len(q) for q in self.queues.values())))
        self._workers = [asyncio.ensure_future(self._worker()) for _ in range(count)]
        ticker = asyncio.ensure_future(self._tick()) if self.progress is not None else None
        try:
            results = await asyncio.gather(*self._workers, return_exceptions=True)
            await self._settle_the_rest()
        finally:
            if ticker is not None:
                ticker.cancel()
            if self.progress is not None:
                self.progress.tick(self)
            if self._drain_handle is not None:
                self._drain_handle.cancel()
            for task in (self._reconciling, self._paused):
                if task is not None and not task.done():
                    task.cancel()
        for result in results:
            if isinstance(result, BaseException) and not isinstance(result, asyncio.CancelledError):
                raise result
        self._finish_summary()
        return self.summary

    def _finish_summary(self) -> None:
        s = self.summary
        s.not_sent += sum(len(q) for q in self.queues.values())
        s.peak_committed_usd = self.cap.peak_committed_usd
        for name, tally in s.datasets.items():
            tally.spent_usd = self.cap.committed_by_dataset.get(name, tally.spent_usd)
        if self.cap.overruns:
            self.warn(
                f"{self.cap.overruns} answer(s) cost more than their reserved worst case (did the "
                "endpoints' prices rise during the run?): the cap may be exceeded by the difference"
            )
        s.elapsed_s = self.clock() - self.started
        if s.stop_reason == "done" and self._out_of_money:
            s.stop_reason = "budget"
            s.message = "; ".join(self._out_of_money[:3]) + (
                f"; and {len(self._out_of_money) - 3} more" if len(self._out_of_money) > 3 else ""
            )
        elif s.stop_reason == "done" and self.settings.target_tokens is not None and s.not_sent:
            s.stop_reason = "target"

    async def _tick(self) -> None:
        assert self.progress is not None
        while True:
            self.progress.tick(self)
            await asyncio.sleep(0.25)


#: What a failed attempt leads to, by the failure's kind (``run.failure``'s table decides the
#: kind): the one place a reader finds every retry decision. Each returns True to send again.
#:
#: ``transient`` (408, upstream 429, 5xx, timeouts, cut streams, keep-alives only): wait (Retry-After,
#:     else exponential with jitter, from the row's first send) and retry, until the attempts or
#:     the time budget run out; then the row fails. A stop cancels the wait (the row is unsent).
#: ``pause`` (OpenRouter's own 429 for the key): every worker waits Retry-After; beyond
#:     ``max_wait_s`` the run stops (``rate-limited``), the row unsent, not failed.
#: ``row`` (400, 403, 413, 422: this request itself is wrong): the row fails; the run goes on.
#: ``run`` (401 key, 402 credits, a 403 budget spent, 404 no route: no request can succeed): the
#:     run stops, the row unsent; a 402 affording fewer tokens retries lower under
#:     ``--lower-max-tokens``.
#:
#: Every attempt settles its reservation first (in the cap and the journal), whatever follows;
#: one whose cost is unknown (``Failure.cost_unknown``) stays at its worst case until settled.
ON_FAILURE: dict[FailureKind, Callable[[Run, PromptRow, Failure, _Attempts], Awaitable[bool]]] = {
    "transient": Run._retry_transient,
    "pause": Run._pause_pool,
    "row": Run._fail_row,
    "run": Run._stop_run,
}


def dataset_tallies(
    rows_by_dataset: Mapping[str, int],
    done_by_dataset: Mapping[str, int],
    tokens_by_dataset: Mapping[str, int],
) -> dict[str, DatasetTally]:
    """A tally per dataset of the prompts (0 included), with what earlier runs finished."""
    return {
        name: DatasetTally(
            rows=count,
            done=done_by_dataset.get(name, 0),
            output_tokens=tokens_by_dataset.get(name, 0),
        )
        for name, count in rows_by_dataset.items()
    }

"""The scheduler of a paid run: a fixed pool of C workers, each taking the next request and
carrying it through its attempts until it is answered, fails, or the run stops.

It holds no money: which request goes next is ``run.schedule.queues``', every attempt's money
``run.books.books``', what a failed attempt leads to ``run.schedule.attempts``' (the run's parts:
docs/generate.md, "The run's parts, and the sender interface").

One attempt: reserved (``RowQueues.pick``; ``_reserve_again`` for a retry or a next turn), journaled
(flushed before it is sent), sent, settled; then its record is appended (or the turn kept), or the
policy's decision carried out. OpenRouter's own, key-wide 429 pauses the whole pool for its
``Retry-After``; an adaptive limit lowers the number of requests in flight on 429 storms.

Stopping: ``request_stop`` (the first SIGINT/SIGTERM) stops taking rows, cancels backoff and pause
waits, and lets what is in flight finish, for at most ``drain_timeout_s``; ``cancel`` (the second,
or the drain timing out) cancels the requests in flight: each is recorded as ``cancelled`` and
counted at its worst case until settled.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import signal
from collections.abc import Callable
from typing import Any

from openrouter_probe.errors import Message
from openrouter_probe.files import WriteFailed
from openrouter_probe.run.books.books import Books
from openrouter_probe.run.books.output import OutputLog
from openrouter_probe.run.config import Learned, Progress, RunPlan
from openrouter_probe.run.money.limit import AdaptiveLimit, DollarWindow
from openrouter_probe.run.money.spend import Prices
from openrouter_probe.run.result import RunResult
from openrouter_probe.run.rows import PromptRow
from openrouter_probe.run.schedule.attempts import (
    HELD_LINE,
    HOLD_WAIT_S,
    AttemptPolicy,
    Decision,
    Fail,
    Hold,
    Lower,
    Retry,
    Stop,
)
from openrouter_probe.run.schedule.queues import Idle, RowQueues
from openrouter_probe.run.schedule.source import RowSource
from openrouter_probe.run.schedule.waits import Waits
from openrouter_probe.run.send.attempt import Attempt
from openrouter_probe.run.send.failure import Failure
from openrouter_probe.run.send.request import RequestBuilder
from openrouter_probe.run.send.sender import Sender, SendKey
from openrouter_probe.run.send.transport import Answer
from openrouter_probe.run.start import RunStart
from openrouter_probe.run.stop import StopReason

__all__ = ["Run"]
log = logging.getLogger(__name__)


class Run:
    """One run over a row source: create it, then ``await run.run()`` for the summary."""

    def __init__(
        self,
        source: RowSource,
        *,
        options: RunPlan,
        learned: Learned,
        builder: RequestBuilder,
        prices: Prices,
        books: Books,
        output: OutputLog,
        send: Sender,
        before: RunStart,
        waits: Waits,
        dollars: DollarWindow,
        progress: Progress | None = None,
    ) -> None:
        self.options = options
        self.source = source
        self.books = books
        self.waits = waits  # (the books' ``on_change`` notifies them)
        self.output = output
        self.send = send
        self.before = before  # what the job learned before sending: the result starts from it
        self.progress = progress
        self.clock = options.clock
        self.stream = builder.stream
        self.dollars = dollars  # in flight (OpenRouter's in-flight budget, learned; journaled)
        self.policy = AttemptPolicy(
            options,
            model=builder.model,
            policy=before.policy,
            max_tokens_of=builder.max_tokens_of,
            window=self.dollars,
            held=lambda: (books.cap.held_usd, books.cap.in_flight),
            cap_left=lambda: books.cap.remaining_usd,
        )
        self.limiter = AdaptiveLimit(options.concurrency)
        self.queues = RowQueues(
            source.requests(),
            books=books,
            builder=builder,
            prices=prices,
            options=options,
            weights=learned.weights,
            on_close=self.waits.notify,
        )
        self.retries = self.pauses = 0
        self._longest_hold_s = HOLD_WAIT_S  # the longest in-flight wait said so far
        self._workers: list[asyncio.Task[None]] = []
        self._live = 0  # workers not yet ended (``waits.waiting`` of them wait for a change)
        self._drain_handle: asyncio.TimerHandle | None = None
        self.started = self.clock()

    @property
    def in_flight(self) -> int:
        return self.queues.in_flight

    @property
    def stopping(self) -> bool:
        return self.waits.stopping

    # -- stopping ---------------------------------------------------------------------------------

    def request_stop(self, reason: StopReason, message: str = "") -> None:
        """Stop taking rows and cancel waits; requests in flight finish (the first Ctrl-C, a 402,
        the budget)."""
        if not self.stopping and reason == StopReason.INTERRUPTED:
            loop = asyncio.get_running_loop()
            self._drain_handle = loop.call_later(self.options.drain_timeout_s, self.cancel)
        self.waits.stop(reason, message)

    def cancel(self) -> None:
        """Cancel the requests in flight (the second Ctrl-C, or the drain taking too long)."""
        if self.waits.reason in (StopReason.DONE, StopReason.INTERRUPTED):
            self.waits.why(StopReason.CANCELLED)
        self.waits.stop()
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
                    self.options.drain_timeout_s,
                    self.in_flight,
                )
                self.request_stop(StopReason.INTERRUPTED, f"stopped by {signame}")

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

    # -- taking requests --------------------------------------------------------------------------

    def _stuck(self) -> bool:
        """Whether a worker about to wait would wait for good: every other worker waits too,
        nothing is in flight, the reconciler holds nothing and the pool is not paused (nothing
        can free money or close a dataset). The waiting worker then borrows past its share what
        fits the cap, or closes its dataset (``spent_out``): the run progresses or stops."""
        return (
            self.waits.waiting + 1 >= self._live
            and not self.queues.in_flight
            and not self.books.cap.in_flight
            and not self.books.outstanding
            and not self.waits.is_paused
        )

    async def _take(self) -> tuple[PromptRow, Attempt] | None:
        """Wait for the next request that fits; ``None`` at the end (or the stop)."""
        woken = False  # by a change, first in line (``Waits.turn``)
        while not self.stopping:
            if self.waits.is_paused:
                await self.waits.until_resumed()
                continue
            picked = self.queues.pick(self.limiter.allowed)
            if picked is Idle.WAIT and self._stuck():
                picked = self.queues.pick(self.limiter.allowed, stuck=True)
            if picked is Idle.DONE:
                return None
            if isinstance(picked, Idle):
                await self.waits.turn()
                woken = True
                continue
            self.queues.flying(*picked, 1)
            if woken:
                self.waits.pass_turn()  # another may fit too: the next in line looks
            return picked
        return None

    async def _reserve_again(self, row: PromptRow, attempt: Attempt) -> bool:
        """Reserve a retry's (or a next turn's) worst case, waiting for the money, the limit, a
        pause; False when the run stops or the dataset's money is out."""
        queues = self.queues
        while not self.stopping:
            if self.waits.is_paused:
                await self.waits.until_resumed()
                continue
            if queues.in_flight < self.limiter.allowed:
                stuck = self._stuck()
                if queues.reserve(row.dataset, attempt, stuck=stuck):
                    queues.flying(row, attempt, 1)
                    return True
                if stuck or not queues.money_may_come(row.dataset, attempt.worst):
                    queues.spent_out(row.dataset, row, attempt)
                    return False
            await self.waits.change()
        return False

    # -- one request ------------------------------------------------------------------------------

    async def _worker(self) -> None:
        try:
            while True:
                taken = await self._take()
                if taken is None:
                    return
                row, attempt = taken
                try:
                    while True:
                        following = await self._attempts(row, attempt)
                        if following is None:
                            break
                        row, attempt = following, self.queues.prepare(following)
                        if not await self._reserve_again(row, attempt):
                            self._unsent(row)
                            break
                except asyncio.CancelledError:
                    if not attempt.flying:  # cancelled between attempts: nothing to record
                        self._unsent(row)
                    raise
                except WriteFailed as exc:  # its journal line could not be written: it never left
                    self.request_stop(StopReason.WRITE_FAILED, str(exc))
                    self._unsent(row)
                    return
        finally:
            self._live -= 1
            self.waits.notify()  # the others may now be all that is left: they look again

    async def _attempts(self, row: PromptRow, attempt: Attempt) -> PromptRow | None:
        """Send ``row`` until it is answered, fails or the run stops; return the request of its
        next turn, if it has one."""
        while True:
            attempt.number += 1
            outcome = await self._send_reserved(row, attempt)
            self.waits.notify()
            if isinstance(outcome, Answer):
                self.limiter.on_success()
                self.dollars.on_success(attempt.request.worst_usd)
                self.policy.answered()
                following, record = self.source.answered(row, outcome, attempt)
                turn = self.source.turn_by_turn
                self.books.answered(row, outcome, attempt.cost, last=record is not None, turn=turn)
                if record is not None:
                    self._write(record)
                return following
            decision = self.policy.decide(row, outcome, attempt, self.pauses)
            if not await self._carry_out(decision, row, outcome, attempt):
                return None
            if not await self._reserve_again(row, attempt):
                self._unsent(row)
                return None

    async def _carry_out(
        self, decision: Decision, row: PromptRow, failure: Failure, attempt: Attempt
    ) -> bool:
        """Do what the attempt policy decided; True to send the row again."""
        if isinstance(decision, Fail):
            self._failed(row, failure, attempt, decision.why)
            return False
        if isinstance(decision, Stop):
            self.request_stop(decision.reason, decision.message)
            self._unsent(row)
            return False
        if isinstance(decision, Lower):
            log.warning(
                Message(
                    "lower-max-tokens",
                    "{row:s}: credits afford only {tokens:d} tokens; retrying with {max_tokens=}",
                    row=row.id,
                    tokens=decision.max_tokens,
                    max_tokens=decision.max_tokens,
                )
            )
            lower = self.queues.prepare(row, max_tokens=decision.max_tokens)
            attempt.request, attempt.ceiling_s = lower.request, lower.ceiling_s
            return True
        if isinstance(decision, Hold):  # the in-flight budget: not a retry of a failure
            if decision.wait_s > self._longest_hold_s:  # said once per longer wait
                self._longest_hold_s = decision.wait_s
                log.warning(HELD_LINE, row.id, decision.wait_s)
            await self.waits.sleep_unless_stopped(decision.wait_s)
        elif isinstance(decision, Retry):
            if failure.rate_limited:
                self.limiter.on_rate_limited(self.clock())
            self.retries += 1
            if failure.status == 200:  # a bad answer: the retry is a new one, never its replay
                kind = f"{row.cache_kind}/retry-{attempt.number}".lstrip("/")
                fresh = self.queues.prepare(
                    dataclasses.replace(row, cache_kind=kind), max_tokens=attempt.request.max_tokens
                )
                attempt.request = fresh.request
            log.warning(
                "%s: attempt %d failed (%s); retrying in %.1f s",
                row.id,
                attempt.number,
                failure.message[:200],
                decision.wait_s,
            )
            await self.waits.sleep_unless_stopped(decision.wait_s)
        else:
            if not decision.joined and self.waits.pause(decision.wait_s):
                self.pauses += 1
                log.warning(
                    "rate limited by the key (OpenRouter's own 429): every request waits %.0f s",
                    decision.wait_s,
                )
            await self.waits.until_resumed()
        if self.stopping:
            self._unsent(row)
            return False
        return True

    async def _send_reserved(self, row: PromptRow, attempt: Attempt) -> Answer | Failure:
        """Send one attempt whose worst case is reserved; settle it in the books.

        Journaled (in the OS) before it leaves, so a SIGKILL from then on cannot hide it; its
        generation id is journaled as soon as the headers bring it.
        """
        books = self.books
        if attempt.first_s is None:
            attempt.first_s = self.clock()
        attempt.pauses_seen = self.pauses
        try:
            number = books.sent(row, attempt)  # (WriteFailed: it never leaves, nothing reserved)
        except WriteFailed:
            self.queues.flying(row, attempt, -1)
            raise
        seen: list[str] = []

        def on_id(generation_id: str) -> None:
            seen.append(generation_id)
            books.generation(number, generation_id)
            if self.dollars.admitted():  # its 200 status: admissions open the probe's window
                self.waits.notify()

        attempt.flying = True
        try:
            key = SendKey(row.id, number, attempt.worst, row.dataset)
            outcome = await self.send(
                attempt.request.body,
                stream=self.stream,
                on_id=on_id,
                ceiling_s=attempt.ceiling_s,
                key=key,
            )
        except asyncio.CancelledError:
            books.cancelled(row, attempt, number, seen[0] if seen else None)
            self.output.write(self.source.cancelled(row, attempt, seen[0] if seen else None))
            raise
        finally:
            self.queues.flying(row, attempt, -1)
        attempt.flying = False
        gen = seen[0] if seen else outcome.generation_id
        books.settle(row, attempt, number, outcome, gen, journaled=bool(seen))
        return outcome

    # -- what a row comes to ----------------------------------------------------------------------

    def _write(self, record: dict[str, Any]) -> None:
        self.output.write(record)
        if self.progress is not None:
            self.progress.row_done(record, self)

    def _failed(self, row: PromptRow, failure: Failure, attempt: Attempt, why: str) -> None:
        self._write(self.source.failed(row, failure, attempt, why))
        self.books.failed(row)
        stop = self.policy.row_failed(failure)
        if stop is not None:
            self.request_stop(stop.reason, stop.message)

    def _unsent(self, row: PromptRow) -> None:
        """A row that stops unsent: ``not_sent``, or stopped mid-way when some of its turns are
        done (they are kept in the turns file for the resume)."""
        self.books.unsent(row.dataset, partial=self.source.started(row))

    # -- the pool ---------------------------------------------------------------------------------

    async def run(self) -> RunResult:
        """Run every worker to the end (or the stop); return the summary."""
        reconciler = self.books.reconciler
        reconciling = asyncio.ensure_future(reconciler.run()) if reconciler is not None else None
        count = max(1, min(self.options.concurrency, self.queues.left()))
        self._live = count  # (each worker counts itself out as it ends)
        self._workers = [asyncio.ensure_future(self._worker()) for _ in range(count)]
        ticker = asyncio.ensure_future(self._tick()) if self.progress is not None else None
        try:
            results = await asyncio.gather(*self._workers, return_exceptions=True)
            # a cancelled run settles nothing more
            wait = self.waits.reason != StopReason.CANCELLED
            await self.books.settle_the_rest(reconciling, self.waits.stopped, wait=wait)
        finally:
            if ticker is not None:
                ticker.cancel()
            self._finish()
            if self.progress is not None:
                self.progress.tick(self)
            if self._drain_handle is not None:
                self._drain_handle.cancel()
            for task in (reconciling, self.waits.paused):
                if task is not None and not task.done():
                    task.cancel()
        for result in results:
            if isinstance(result, BaseException) and not isinstance(result, asyncio.CancelledError):
                raise result
        return self._summary()

    def _finish(self) -> None:
        """Why the run ended, now that it has: the budget, a target, or as it was stopped."""
        queued = self.queues.left()
        if queued:
            self.books.unsent("", queued)  # (their datasets were never closed: none to name)
            self.queues.queues.clear()
        out_of_money = list(self.books.out_of_money.values())
        if self.waits.reason == StopReason.DONE and out_of_money:
            shown = out_of_money[:3]
            fields = {f"m{i}": m for i, m in enumerate(shown)}
            more = f"; and {len(out_of_money) - 3} more" if len(out_of_money) > 3 else ""
            said = "; ".join(f"{{m{i}:s}}" for i in range(len(shown))) + more
            self.waits.why(StopReason.BUDGET, Message("out-of-money", said, **fields))
        elif self.waits.reason == StopReason.DONE and self.options.target_tokens is not None:
            done = not self.books.counts.not_sent
            self.waits.why(StopReason.DONE if done else StopReason.TARGET)
        stop = self.policy.all_failed(self.books.counts, StopReason(self.waits.reason))
        if stop is not None:
            self.waits.why(stop.reason, stop.message)

    def _summary(self) -> RunResult:
        """The books' result of the run, with the scheduler's own figures."""
        return self.books.summarize(
            self.before,
            stop_reason=self.waits.reason,
            message=self.waits.message,
            retries=self.retries,
            pauses=self.pauses,
            elapsed_s=self.clock() - self.started,
        )

    async def _tick(self) -> None:
        assert self.progress is not None
        while True:
            self.progress.tick(self)
            await asyncio.sleep(0.25)

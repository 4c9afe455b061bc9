"""The run: a fixed pool of C workers pulling rows, the cap and the targets, retries, signals.

Each worker takes the next row, reserves its worst case under the cap (waiting while other requests
are in flight and the money is committed; stopping the run when nothing is in flight and it still
does not fit), journals the attempt (``ledger``: flushed before the request leaves), sends it,
settles the reservation to ``usage.cost`` (in the cap and the journal) and appends the row's record.
Retries of transient failures wait ``Backoff.next_wait`` (the sleep is injected: tests never wait)
and each attempt reserves again. An adaptive limit lowers the number of requests in flight on 429
storms and raises it again, one step per round of successes.

Targets (``target_tokens`` per dataset, billed output tokens): a dataset gets no new request once its
settled tokens plus the expected tokens of its requests in flight reach the target; datasets are
served in the order they first appear.

Stopping: ``request_stop`` (the first SIGINT/SIGTERM) stops taking rows and lets what is in flight
finish, for at most ``drain_timeout_s``; ``cancel`` (the second, or the drain timing out) cancels the
requests in flight: each is recorded as ``cancelled`` with its reservation as possibly billed.
"""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Protocol

from openrouter_probe.api.backoff import Backoff
from openrouter_probe.run.ledger import Ledger
from openrouter_probe.run.output import OutputLog
from openrouter_probe.run.rows import PromptRow
from openrouter_probe.run.spend import Prices, SpendCap, prompt_tokens_bound
from openrouter_probe.run.summary import ProviderTally, RunSummary
from openrouter_probe.run.transport import Answer, Failure, FailureKind

__all__ = ["ON_FAILURE", "AdaptiveLimit", "Run", "RunSettings", "Sender"]

log = logging.getLogger(__name__)

#: Rows failed in a row with no HTTP answer at all after which a run stops as ``unreachable``.
UNREACHABLE_AFTER_ROWS = 8

Sleep = Callable[[float], Awaitable[None]]


class Sender(Protocol):
    """What sends one request body: ``HttpTransport.send`` or a test double."""

    def __call__(self, body: bytes, *, stream: bool) -> Awaitable[Answer | Failure]: ...


class Progress(Protocol):
    def row_done(self, record: dict[str, Any], run: Run) -> None: ...

    def tick(self, run: Run) -> None: ...


@dataclass
class RunSettings:
    """What every request of a run shares, and how the run behaves."""

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


class AdaptiveLimit:
    """How many requests may be in flight: ``maximum`` at first, less after 429 storms.

    Multiplicative decrease (×0.7, at most once per ``cooldown_s``) on a rate-limited answer;
    additive increase (+1 per ``limit`` successes, about one per round trip) otherwise.
    """

    def __init__(self, maximum: int, *, cooldown_s: float = 1.0) -> None:
        self.maximum = maximum
        self.limit = float(maximum)
        self.cooldown_s = cooldown_s
        self._last_decrease = -1e9

    @property
    def allowed(self) -> int:
        return max(1, int(self.limit))

    def on_rate_limited(self, now: float) -> None:
        if now - self._last_decrease >= self.cooldown_s:
            self.limit = max(1.0, self.limit * 0.7)
            self._last_decrease = now

    def on_success(self) -> None:
        if self.limit < self.maximum:
            self.limit = min(float(self.maximum), self.limit + 1.0 / self.limit)


@dataclass
class _Attempts:
    """One row's attempts so far: what the next one sends and what the earlier ones cost."""

    max_tokens: int
    body: bytes
    prompt_tokens: int
    prices: Prices
    first_s: float
    number: int = 0
    extra_cost: Decimal = Decimal(0)  # what earlier, failed attempts cost
    cost: Decimal | None = None  # the answered attempt's cost
    estimated: bool = False  # ... estimated from its tokens (no usage.cost)


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
    ) -> None:
        self.settings = settings
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
        self.limiter = AdaptiveLimit(settings.concurrency)
        self.queues: dict[str, deque[PromptRow]] = {}
        for row in rows:
            self.queues.setdefault(row.dataset, deque()).append(row)
        self.settled_tokens: dict[str, int] = dict(tokens_before or {})
        self.in_flight_by_dataset: dict[str, int] = {}
        self.observed_tokens = 0
        self.observed_rows = 0
        self.in_flight = 0
        self.stopping = False
        # Rows given up on in a row without one HTTP answer (refused, reset, stalled): the server
        # is unreachable, and going on would only grind through every row (see _failed).
        self.unanswered_streak = 0
        self._waiters: list[asyncio.Future[None]] = []
        self._workers: list[asyncio.Task[None]] = []
        self._drain_handle: asyncio.TimerHandle | None = None
        self._prefix = self._make_prefix(settings.provider_json)
        self.started = clock()

    # -- stopping ---------------------------------------------------------------------------------

    def request_stop(self, reason: str, message: str = "") -> None:
        """Stop taking rows; requests in flight finish (the first Ctrl-C, a 402, the budget)."""
        if not self.stopping:
            self.stopping = True
            self.summary.stop_reason = reason
            self.summary.message = message
            if reason == "interrupted":
                loop = asyncio.get_running_loop()
                self._drain_handle = loop.call_later(self.settings.drain_timeout_s, self.cancel)
        self._notify()

    def cancel(self) -> None:
        """Cancel the requests in flight (the second Ctrl-C, or the drain taking too long)."""
        self.stopping = True
        if self.summary.stop_reason in ("done", "interrupted"):
            self.summary.stop_reason = "cancelled"
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

    # -- rows and targets -------------------------------------------------------------------------

    def _expected_tokens(self) -> float:
        """Tokens a request in flight is expected to bill: the mean so far, else ``max_tokens``."""
        if self.observed_rows:
            return self.observed_tokens / self.observed_rows
        return float(self.settings.max_tokens)

    def _target_reached(self, dataset: str, *, in_flight_too: bool = True) -> bool:
        target = self.settings.target_tokens
        if target is None:
            return False
        settled = self.settled_tokens.get(dataset, 0)
        if not in_flight_too:
            return settled >= target
        flying = self.in_flight_by_dataset.get(dataset, 0) * self._expected_tokens()
        return settled + flying >= target

    async def _next_row(self) -> PromptRow | None:
        while not self.stopping:
            blocked = False
            for dataset in list(self.queues):
                queue = self.queues[dataset]
                if not queue:
                    del self.queues[dataset]
                    continue
                if self._target_reached(dataset, in_flight_too=False):
                    self.summary.not_sent += len(queue)
                    del self.queues[dataset]
                    log.info(
                        "%s: reached its target of %s output tokens",
                        dataset,
                        self.settings.target_tokens,
                    )
                    continue
                if self._target_reached(dataset):
                    blocked = True  # its requests in flight may still fall short: wait for them
                    continue
                return queue.popleft()
            if not blocked:
                return None
            await self._wait_change()
        return None

    # -- one row ------------------------------------------------------------------------------------

    def _make_prefix(self, provider_json: str) -> str:
        s = self.settings
        return (
            '{"model":'
            + _dumps(s.model)
            + ',"provider":'
            + provider_json
            + ',"stream":'
            + ("true" if s.stream else "false")
        )

    def _body(self, row: PromptRow, max_tokens: int) -> bytes:
        s = self.settings
        parts = [
            self._prefix if row.provider_json is None else self._make_prefix(row.provider_json),
            ',"messages":',
            _dumps(row.messages),
            ',"max_tokens":',
            str(max_tokens),
        ]
        if s.temperature is not None and "temperature" not in row.params:
            parts += [',"temperature":', _dumps(s.temperature)]
        if s.reasoning is not None and "reasoning" not in row.params:
            parts += [',"reasoning":', _dumps(s.reasoning)]
        for key, value in row.params.items():
            if key != "max_tokens":
                parts += [",", _dumps(key), ":", _dumps(value)]
        parts.append("}")
        return "".join(parts).encode()

    async def _reserve(self, worst: Decimal) -> bool:
        while True:
            if self.stopping:
                return False
            fits = self.cap.fits(worst)
            if fits and self.in_flight < self.limiter.allowed:
                # Check and reserve with no await in between: atomic within the event loop.
                self.cap.try_reserve(worst)
                self.in_flight += 1
                return True
            if not fits and self.cap.in_flight == 0:
                self.request_stop(
                    "budget",
                    f"the next request may cost up to ${worst:.6f} and only "
                    f"${self.cap.remaining_usd:.6f} of the ${self.cap.cap_usd} cap remains",
                )
                return False
            await self._wait_change()

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
            "messages": row.messages,
            "policy_sha256": self.settings.policy_sha256,
            "run_id": self.run_id,  # the journal's attempts of this run for this row: accounted
        }
        record.update(fields)
        return record

    def _write(self, record: dict[str, Any]) -> None:
        self.output.write(record)
        if self.progress is not None:
            self.progress.row_done(record, self)

    def _cost(self, answer: Answer) -> tuple[Decimal | None, bool]:
        """``usage.cost``; without it (not OpenRouter?), the tokens at the worst admitted prices,
        so that the cap still holds. Returns the cost and whether it was estimated."""
        cost = answer.cost_usd
        if cost is not None or answer.usage is None:
            return cost, False
        estimate = self.prices.worst_case_usd(
            prompt_tokens=int(answer.usage.get("prompt_tokens") or 0),
            max_tokens=answer.completion_tokens,
        )
        return estimate, True

    def _answered(
        self,
        row: PromptRow,
        answer: Answer,
        attempts: int,
        extra_cost: Decimal,
        cost: Decimal | None,
        estimated: bool,
    ) -> None:
        truncated = answer.finish_reason == "length"
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
            attempts=attempts,
        )
        if answer.tool_calls:
            record["tool_calls"] = answer.tool_calls
        if answer.logprobs is not None:
            record["logprobs"] = answer.logprobs
        if estimated:
            record["cost_estimated"] = True
        if extra_cost:
            record["failed_attempts_cost_usd"] = float(extra_cost)
        self._write(record)
        s = self.summary
        tokens = answer.completion_tokens
        s.truncated += truncated
        s.ok += not truncated
        self.observed_tokens += tokens
        self.observed_rows += 1
        self.settled_tokens[row.dataset] = self.settled_tokens.get(row.dataset, 0) + tokens
        s.output_tokens[row.dataset] = s.output_tokens.get(row.dataset, 0) + tokens
        tally = s.providers.setdefault(answer.provider or "?", ProviderTally())
        tally.rows += 1
        tally.completion_tokens += tokens
        usage = answer.usage or {}
        tally.prompt_tokens += int(usage.get("prompt_tokens") or 0)
        details = usage.get("completion_tokens_details") or {}
        tally.reasoning_tokens += int(details.get("reasoning_tokens") or 0)
        tally.cost_usd += cost or 0
        tally.truncated += truncated

    def _failed(
        self, row: PromptRow, failure: Failure, attempts: int, extra_cost: Decimal, why: str = ""
    ) -> None:
        error = failure.to_record()
        if why:
            error["message"] = f"{failure.message}; {why}"
        record = self._record(row, status="failed", attempts=attempts, error=error)
        if extra_cost:
            record["failed_attempts_cost_usd"] = float(extra_cost)
        self._write(record)
        self.summary.failed += 1
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

    async def _do_row(self, row: PromptRow) -> None:
        """Send one row until it is answered, fails, or the run stops (see ``ON_FAILURE``)."""
        s = self.settings
        max_tokens = int(row.params.get("max_tokens", s.max_tokens))
        attempt = _Attempts(
            max_tokens=max_tokens,
            body=self._body(row, max_tokens),
            prompt_tokens=prompt_tokens_bound(row.prompt_bytes, len(row.messages)),
            prices=self.prices if self.prices_for is None else self.prices_for(row),
            first_s=self.clock(),
        )
        while True:
            attempt.number += 1
            worst = attempt.prices.worst_case_usd(
                prompt_tokens=attempt.prompt_tokens, max_tokens=attempt.max_tokens
            )
            if not await self._reserve(worst):
                self.summary.not_sent += 1
                return
            outcome = await self._send_reserved(row, attempt, worst)
            if isinstance(outcome, Answer):
                self._answered(
                    row, outcome, attempt.number, attempt.extra_cost, *self._cost(outcome)
                )
                self._notify()
                return
            if outcome.cost_usd:
                attempt.extra_cost += outcome.cost_usd
                self.summary.spent_usd += outcome.cost_usd
            self._notify()
            if not await ON_FAILURE[outcome.kind](self, row, outcome, attempt):
                return

    async def _send_reserved(
        self, row: PromptRow, attempt: _Attempts, worst: Decimal
    ) -> Answer | Failure:
        """Send one attempt whose worst case is reserved; settle it in the cap and the journal.

        Journaled (in the OS) before it leaves, so a SIGKILL from then on cannot hide it. Cancelled
        in flight, it may be billed anyway: its reservation counts as spent and a ``cancelled``
        line records it (the row itself is sent again by a resumed run).
        """
        ledger = self.ledger
        self.in_flight_by_dataset[row.dataset] = self.in_flight_by_dataset.get(row.dataset, 0) + 1
        self.summary.requests += 1
        try:
            sent = ledger.sent(_dumps(row.id), worst) if ledger is not None else 0
            outcome = await self.send(attempt.body, stream=self.settings.stream)
        except asyncio.CancelledError:
            if ledger is not None:
                ledger.settle(sent, worst, cancelled=True)
            self.cap.settle(worst, worst)
            self.summary.cancelled += 1
            self.summary.possibly_billed_usd += worst
            self.summary.spent_usd += worst
            record = self._record(
                row,
                status="cancelled",
                attempts=attempt.number,
                error={"kind": "cancelled", "message": "cancelled in flight"},
                possibly_billed_usd=float(worst),
            )
            if attempt.extra_cost:
                record["failed_attempts_cost_usd"] = float(attempt.extra_cost)
            self.output.write(record)
            raise
        finally:
            self.in_flight -= 1
            self.in_flight_by_dataset[row.dataset] -= 1
        if isinstance(outcome, Answer):
            cost, attempt.estimated = self._cost(outcome)
            attempt.cost = cost
            self.summary.spent_usd += cost or 0
            self.limiter.on_success()
            self.unanswered_streak = 0
        else:
            cost = outcome.cost_usd
        if ledger is not None:
            ledger.settle(sent, cost)
        self.cap.settle(worst, cost)
        return outcome

    # -- what a failed attempt leads to (ON_FAILURE) ---------------------------------------------

    async def _retry_transient(self, row: PromptRow, failure: Failure, attempt: _Attempts) -> bool:
        """Wait as the backoff says and send again (True), or fail the row when it gives up."""
        if failure.rate_limited:
            self.limiter.on_rate_limited(self.clock())
        decision = self.settings.backoff.next_wait(
            attempt=attempt.number,
            retry_after_s=failure.retry_after_s,
            elapsed_s=self.clock() - attempt.first_s,
        )
        if decision.give_up:
            self._failed(row, failure, attempt.number, attempt.extra_cost, decision.reason)
            return False
        self.summary.retries += 1
        await self.sleep(decision.wait_s)
        return True

    async def _fail_row(self, row: PromptRow, failure: Failure, attempt: _Attempts) -> bool:
        """A final error for this row: record it as failed; the run goes on."""
        self._failed(row, failure, attempt.number, attempt.extra_cost)
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
            attempt.body = self._body(row, afford)
            return True
        self._stop_for(failure)
        self.summary.not_sent += 1
        return False

    def _stop_for(self, failure: Failure) -> None:
        status = failure.status if failure.status not in (None, 200) else failure.code
        if status == 402:
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

    # -- the pool -----------------------------------------------------------------------------------

    async def _worker(self) -> None:
        while True:
            row = await self._next_row()
            if row is None:
                return
            await self._do_row(row)

    async def run(self) -> RunSummary:
        """Run every worker to the end (or the stop); return the summary."""
        count = max(1, min(self.settings.concurrency, sum(len(q) for q in self.queues.values())))
        self._workers = [asyncio.ensure_future(self._worker()) for _ in range(count)]
        ticker = asyncio.ensure_future(self._tick()) if self.progress is not None else None
        try:
            results = await asyncio.gather(*self._workers, return_exceptions=True)
        finally:
            if ticker is not None:
                ticker.cancel()
            if self.progress is not None:
                self.progress.tick(self)
            if self._drain_handle is not None:
                self._drain_handle.cancel()
        for result in results:
            if isinstance(result, BaseException) and not isinstance(result, asyncio.CancelledError):
                raise result
        self.summary.not_sent += sum(len(q) for q in self.queues.values())
        self.summary.peak_committed_usd = self.cap.peak_committed_usd
        if self.cap.overruns:
            self.summary.warnings.append(
                f"{self.cap.overruns} answer(s) cost more than their reserved worst case (did the "
                "endpoints' prices rise during the run?): the cap may be exceeded by the difference"
            )
        self.summary.elapsed_s = self.clock() - self.started
        if (
            self.summary.stop_reason == "done"
            and self.settings.target_tokens is not None
            and (self.summary.not_sent)
        ):
            self.summary.stop_reason = "target"
        return self.summary

    async def _tick(self) -> None:
        assert self.progress is not None
        while True:
            self.progress.tick(self)
            await asyncio.sleep(0.25)


#: What a failed attempt leads to, by the failure's kind (``transport.classify_error``): the one
#: place a reader finds every retry decision. Each returns True to send the row again.
#:
#: ``transient`` (408, 429, 5xx, timeouts, cut streams): wait (Retry-After, else exponential with
#:     jitter) and retry, until the attempts or the time budget run out; then the row fails.
#: ``row`` (400, 403, 413, 422: this request itself is wrong): the row fails; the run goes on.
#: ``run`` (401 key, 402 credits, 404 no route: no request can succeed): the run stops, the row
#:     unsent; a 402 affording fewer tokens retries lower under ``--lower-max-tokens``.
#:
#: Every attempt settles its reservation first (in the cap and the journal), whatever follows.
ON_FAILURE: dict[FailureKind, Callable[[Run, PromptRow, Failure, _Attempts], Awaitable[bool]]] = {
    "transient": Run._retry_transient,
    "row": Run._fail_row,
    "run": Run._stop_run,
}


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))

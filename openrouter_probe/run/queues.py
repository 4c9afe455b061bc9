"""Which request goes next: the datasets' queues, taken in turn, each under its share and target.

``RowQueues.pick`` takes the next request in turn from the datasets (one of each in rotation, so
that every dataset advances at the same pace) and reserves its worst case in the books under the
cap and the dataset's share (``SpendCap.shares``: equal by default, ``weights`` otherwise; what a
finished dataset leaves is lent to the others). It returns the request with its ``Attempt``, or
an ``Idle``: wait for a change (a settle, a close), or nothing is left. No await: the check and
the reservation cannot interleave with another worker's.

Targets (``target_tokens`` per dataset, billed output tokens): a dataset gets no new request once
its settled tokens plus the expected tokens of its requests in flight (that dataset's mean so far)
reach the target. A dataset whose next request cannot fit in what it may still spend, with no
money to come, closes (``spent_out``): the books keep one reason per dataset for the budget stop.
"""

from __future__ import annotations

import enum
import logging
from collections import deque
from collections.abc import Callable
from decimal import Decimal

from openrouter_probe.rules.quantities import format_usd
from openrouter_probe.run.attempts import Attempt
from openrouter_probe.run.books import Books
from openrouter_probe.run.config import JobOptions
from openrouter_probe.run.request import RequestBuilder, dumps
from openrouter_probe.run.rows import PromptRow
from openrouter_probe.run.spend import Prices

__all__ = ["Idle", "RowQueues"]

log = logging.getLogger(__name__)

_ZERO = Decimal(0)


class Idle(enum.Enum):
    """Why ``pick`` returned no request."""

    WAIT = "wait"  # nothing fits now: wait for a change (a settle, a close, the limit)
    DONE = "done"  # nothing is left to send
    AGAIN = "again"  # a dataset closed: look again


class RowQueues:
    """The requests still to send, per dataset, and what is in flight of each."""

    def __init__(
        self,
        requests: list[PromptRow],
        *,
        books: Books,
        builder: RequestBuilder,
        prices: Prices,
        options: JobOptions,
        on_close: Callable[[], None],
    ) -> None:
        self.books = books
        self.builder = builder
        self.prices = prices
        self.options = options
        self._on_close = on_close
        self.queues: dict[str, deque[PromptRow]] = {}
        for row in requests:
            self.queues.setdefault(row.dataset, deque()).append(row)
        self.order = list(self.queues)
        self._open = list(self.order)  # the datasets still taking rows, in turn
        self._turn = 0
        self._prepared: dict[int, Attempt] = {}
        self.in_flight = 0
        self.in_flight_by_dataset: dict[str, int] = dict.fromkeys(self.order, 0)
        self._flying_max_tokens: dict[str, int] = dict.fromkeys(self.order, 0)
        books.share(self.order, options.weights)

    def left(self) -> int:
        """Requests queued and not taken."""
        return sum(len(q) for q in self.queues.values())

    def prepare(self, row: PromptRow, *, max_tokens: int | None = None) -> Attempt:
        """A request's first attempt: its body, prices and worst case (kept while it waits)."""
        attempt = self._prepared.get(id(row)) if max_tokens is None else None
        if attempt is not None:
            return attempt
        prices = self.prices if row.prices is None else row.prices
        request = self.builder.build(row, prices, max_tokens=max_tokens)
        return Attempt(request, prices, dumps(row.id), self.options.ceiling_s(request.max_tokens))

    def flying(self, row: PromptRow, attempt: Attempt, step: int) -> None:
        """Count a request in (``step`` 1) or out (-1) of flight."""
        self.in_flight += step
        self.in_flight_by_dataset[row.dataset] += step
        self._flying_max_tokens[row.dataset] += step * attempt.request.max_tokens

    def _flying_tokens(self, dataset: str) -> float:
        """Tokens ``dataset``'s requests in flight are expected to bill: its own mean so far
        times their number, else (no answer of it yet) their ``max_tokens``: never another
        dataset's mean."""
        tokens, answers = self.books.observed.get(dataset, (0, 0))
        if answers:
            return self.in_flight_by_dataset.get(dataset, 0) * tokens / answers
        return float(self._flying_max_tokens.get(dataset, 0))

    def _target_reached(self, dataset: str, *, in_flight_too: bool = True) -> bool:
        target = self.options.target_tokens
        if target is None:
            return False  # the common case: no target, nothing to look up
        settled = self.books.settled_tokens.get(dataset, 0)
        if not in_flight_too:
            return settled >= target
        return settled + self._flying_tokens(dataset) >= target

    def close(self, dataset: str, why: str) -> None:
        """``dataset`` sends nothing more: its rows left are not sent; its share is lent."""
        queue = self.queues.pop(dataset, None)
        if dataset in self._open:
            self._open.remove(dataset)
        if queue:
            self.books.unsent(dataset, len(queue))
            for row in queue:
                self._prepared.pop(id(row), None)
            log.info("%s: %s; %d row(s) not sent", dataset, why, len(queue))
        self.books.close(dataset)
        self._on_close()

    def money_may_come(self, dataset: str, worst: Decimal) -> bool:
        """Whether money for ``dataset``'s next request may still free up: something settles,
        the reconciler gives some back, or another dataset closes and lends its share."""
        cap = self.books.cap
        if cap.in_flight or self.books.outstanding:
            return True
        if not cap.fits(worst):
            return False
        return any(
            d != dataset and (q or self.in_flight_by_dataset.get(d)) for d, q in self.queues.items()
        )

    def pick(self, allowed: int) -> tuple[PromptRow, Attempt] | Idle:
        """The next request in turn that fits, reserved (``allowed``: the requests that may be
        in flight); else ``Idle.WAIT`` or ``Idle.DONE``."""
        alone = self._pick_alone(allowed)
        if alone is not None:
            return alone
        while True:
            picked = self._pick_once(allowed)
            if picked is not Idle.AGAIN:
                return picked

    def _pick_alone(self, allowed: int) -> tuple[PromptRow, Attempt] | None:
        """The common case in a few lines: one dataset, no target, a request that fits now."""
        if len(self._open) != 1 or self.options.target_tokens is not None:
            return None
        queue = self.queues[self._open[0]]
        if not queue or self.in_flight >= allowed:
            return None
        row = queue[0]
        attempt = self.prepare(row)
        if not self.books.reserve(row.dataset, attempt):
            self._prepared[id(row)] = attempt
            return None  # the general path decides: wait, or the money is out
        queue.popleft()
        self._prepared.pop(id(row), None)
        return row, attempt

    def _pick_once(self, allowed: int) -> tuple[PromptRow, Attempt] | Idle:
        if self.in_flight >= allowed:
            return Idle.WAIT
        blocked: list[tuple[str, Decimal]] = []
        datasets = self._open
        count = len(datasets)
        for k in range(count):
            dataset = datasets[(self._turn + k) % count]
            queue = self.queues[dataset]
            if not queue or self._target_reached(dataset, in_flight_too=False):
                if queue:
                    target = self.options.target_tokens
                    self.close(dataset, f"reached its target of {target} tokens")
                    return Idle.AGAIN
                if not self.in_flight_by_dataset.get(dataset):
                    self.close(dataset, "all rows sent")
                    return Idle.AGAIN
                continue
            if self._target_reached(dataset):
                blocked.append((dataset, _ZERO))
                continue
            row = queue[0]
            attempt = self.prepare(row)
            if self.books.reserve(dataset, attempt):
                queue.popleft()
                self._prepared.pop(id(row), None)
                self._turn = (self._turn + k + 1) % count
                return row, attempt
            self._prepared[id(row)] = attempt  # it waits: keep what was computed
            if not self.money_may_come(dataset, attempt.worst):
                self.spent_out(dataset, row, attempt)
                return Idle.AGAIN
            blocked.append((dataset, attempt.worst))
        if not blocked:
            # nothing left to take: rows never come back to a queue (a retry or a next turn
            # stays with its worker), so this worker is done; the last one closes the datasets
            return Idle.DONE
        idle = not self.books.cap.in_flight and not self.books.outstanding
        if idle and all(worst for _, worst in blocked):
            # every dataset waits for another to close: the one that had the most closes first
            dataset = max((d for d, _ in blocked), key=self._committed_per_weight)
            row = self.queues[dataset][0]
            self.spent_out(dataset, row, self.prepare(row))
            return Idle.AGAIN
        return Idle.WAIT

    def _weight(self, dataset: str) -> Decimal:
        return Decimal(str(self.options.weights.get(dataset, 1)))

    def _committed_per_weight(self, dataset: str) -> Decimal:
        return self.books.cap.committed_by_dataset.get(dataset, _ZERO) / self._weight(dataset)

    def spent_out(self, dataset: str, row: PromptRow, attempt: Attempt) -> None:
        """``dataset``'s next request does not fit in what it may still spend: close it."""
        cap = self.books.cap
        shared = cap.share_usd(dataset) is not None and len(self.order) > 1
        if shared:
            share = cap.share_usd(dataset) or _ZERO
            left = max(_ZERO, share - cap.committed_by_dataset.get(dataset, _ZERO))
            where = f"its share of the cap has ${left:.6f} left"
        else:
            left = cap.remaining_usd or _ZERO
            where = f"only ${left:.6f} of the {format_usd(cap.cap_usd)} cap remains"
        message = f"{row.id}: the next request may cost up to ${attempt.worst:.6f} and {where}"
        # the advice is for the next start, where every dataset is open again: its share then
        base = self._first_share(dataset) if shared else left
        shape = attempt.request.shape
        # the output and the room the reservation keeps past it (``run.overshoot``) must fit
        fits = self.books.overshoot.within(
            attempt.prices.max_tokens_within(base, prompt_tokens=shape.prompt_tokens, shape=shape)
        )
        if self.books.counts.requests == 0 and fits < attempt.request.max_tokens:
            message += (
                f"; max_tokens={fits} would fit"
                + (" its share with every dataset open" if shared else "")
                if fits >= 1
                else f"; raise budget_usd above ${attempt.worst:.6f} for one row"
            )
        self.books.spent_out(dataset, f"{dataset}: {message}" if len(self.order) > 1 else message)
        self.close(dataset, message)

    def _first_share(self, dataset: str) -> Decimal:
        """``dataset``'s share of the whole cap while every dataset is open (``weights``)."""
        total = sum((self._weight(d) for d in self.order), _ZERO)
        return (self.books.cap.cap_usd or _ZERO) * self._weight(dataset) / total

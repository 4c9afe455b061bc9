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
from collections.abc import Callable, Mapping
from decimal import Decimal

from openrouter_probe.errors import Message
from openrouter_probe.rules.quantities import format_usd
from openrouter_probe.run.books.books import Books
from openrouter_probe.run.config import RunPlan
from openrouter_probe.run.money.spend import Prices
from openrouter_probe.run.rows import PromptRow
from openrouter_probe.run.send.attempt import Attempt
from openrouter_probe.run.send.request import RequestBuilder, dumps

__all__ = ["Idle", "RowQueues", "unaffordable_shares"]

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
        options: RunPlan,
        weights: Mapping[str, float],
        on_close: Callable[[], None],
    ) -> None:
        self.books = books
        self.builder = builder
        self.prices = prices
        self.options = options
        self.weights = weights
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
        books.share(self.order, weights)

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

    def reserve(self, dataset: str, attempt: Attempt, *, stuck: bool = False) -> bool:
        """Reserve ``attempt`` under ``dataset``'s share; past it, borrow from the cap what the
        others leave unspent when ``dataset`` has committed the least per weight of the datasets
        that still want money (so none is left with 0 rows while money remains), or when the
        run is ``stuck`` (every worker waits and nothing is in flight: no one else can use it).

        When the money left cannot buy every open dataset its next request (``tight``), only
        the poorest go, whatever their shares say: the last rows go to those that had least."""
        books = self.books
        cap = books.cap
        held = books.claims is not None  # (claims come back inside books.reserve)
        tight = (
            not held
            and cap.cap_usd is not None
            and len(self._open) > 1
            and cap.cap_usd - cap.committed_usd < len(self._open) * attempt.worst
        )
        if not tight:
            if books.reserve(dataset, attempt):
                return True
            if books.window_full:
                return False  # a loan moves the cap alone: the window refuses it the same
        if held and not stuck:
            return False  # the held lines' money is planned line by line: no loans beside it
        if not held and not cap.fits(attempt.worst, borrow=True):
            return False
        if not (stuck or self._poorest(dataset)):
            return False
        return books.reserve(dataset, attempt, borrow=True)

    def _poorest(self, dataset: str) -> bool:
        """Whether ``dataset`` has committed no more per weight than any other open dataset with
        rows queued (those still want their share)."""
        mine = self._committed_per_weight(dataset)
        return all(
            self._committed_per_weight(d) >= mine
            for d in self._open
            if d != dataset and self.queues[d]
        )

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

    def pick(self, allowed: int, *, stuck: bool = False) -> tuple[PromptRow, Attempt] | Idle:
        """The next request in turn that fits, reserved (``allowed``: the requests that may be
        in flight); else ``Idle.WAIT`` or ``Idle.DONE``. ``stuck``: every worker waits and
        nothing is in flight, so a request that fits the cap borrows past its share."""
        alone = None if stuck else self._pick_alone(allowed)
        if alone is not None:
            return alone
        while True:
            picked = self._pick_once(allowed, stuck=stuck)
            if picked is not Idle.AGAIN:
                return picked

    def _pick_alone(self, allowed: int) -> tuple[PromptRow, Attempt] | Idle | None:
        """The common case in a few lines: one dataset, no target, a request that fits now, or
        the dollar window full (``Idle.WAIT``, as ``_pick_once`` would find it)."""
        if len(self._open) != 1 or self.options.target_tokens is not None:
            return None
        queue = self.queues[self._open[0]]
        if not queue or self.in_flight >= allowed:
            return None
        row = queue[0]
        attempt = self.prepare(row)
        if not self.books.reserve(row.dataset, attempt):
            self._prepared[id(row)] = attempt
            if self.books.window_full and not self.never_fits(attempt):
                return Idle.WAIT  # something is in flight (a request alone always goes): wait
            return None  # the general path decides: skip the row, wait, or the money is out
        queue.popleft()
        self._prepared.pop(id(row), None)
        return row, attempt

    def _pick_once(self, allowed: int, *, stuck: bool) -> tuple[PromptRow, Attempt] | Idle:
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
            if self.reserve(dataset, attempt, stuck=stuck):
                queue.popleft()
                self._prepared.pop(id(row), None)
                self._turn = (self._turn + k + 1) % count
                return row, attempt
            if self.never_fits(attempt):
                queue.popleft()
                self._prepared.pop(id(row), None)
                self.skip(row, attempt)
                return Idle.AGAIN
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
        return Decimal(str(self.weights.get(dataset, 1)))

    def _committed_per_weight(self, dataset: str) -> Decimal:
        return self.books.cap.committed_by_dataset.get(dataset, _ZERO) / self._weight(dataset)

    def never_fits(self, attempt: Attempt) -> bool:
        """Whether ``attempt`` is a row's own problem: it costs more at worst than the whole
        cap left to this run (no share, loan or settle can ever make room for it) while a
        request of its ``max_tokens`` with no prompt would fit (else the cap is too small for
        the job's ``max_tokens``: a budget stop, whose reason says the ``max_tokens`` that fits)."""
        cap = self.books.cap
        if cap.cap_usd is None or self.books.claims is not None:
            return False  # (claimed rows' worst cases come back: the room is not known)
        room = cap.cap_usd  # (a resumed run's spent cap is a budget stop, not the row's)
        if attempt.worst <= room:
            return False
        bare = attempt.prices.worst_case_usd(prompt_tokens=0, max_tokens=attempt.request.max_tokens)
        return bare <= room

    def skip(self, row: PromptRow, attempt: Attempt) -> None:
        """``row`` can never be bought under this cap: it is not sent and named; its dataset
        goes on with its other rows. The caller has taken it off its queue. (A row already
        started, whose next turn or retry does not fit, stops the run at ``budget`` instead:
        its turns are kept, and a rerun at a higher cap finishes it.)"""
        cap = self.books.cap
        room = cap.cap_usd or _ZERO
        shape = attempt.request.shape
        fits = attempt.prices.max_tokens_within(
            room, prompt_tokens=shape.prompt_tokens, shape=shape
        )
        advice = "{max_tokens=} would fit it" if fits >= 1 else "its prompt alone does not fit"
        if shape.web_searches and fits < 1:  # the results may fill the whole context
            advice = "its web search's results may fill the whole context"
        said = Message(
            "row-over-cap",
            "{row:s}: skipped, not sent: its request may cost up to ${worst:.6f}, more than the "
            "whole {cap:s} cap; " + advice + ", or raise {budget_usd:bare}",
            row=row.id,
            worst=attempt.worst,
            cap=format_usd(cap.cap_usd),
            max_tokens=fits,
        )
        self.books.warn(said)
        # the run ends at ``budget`` (the other rows went): the first such row names why
        where = Message("in-dataset", "{dataset:s}: {said:s}", dataset=row.dataset, said=said)
        self.books.spent_out(row.dataset, where if len(self.order) > 1 else said)
        self.books.unsent(row.dataset)

    def spent_out(self, dataset: str, row: PromptRow, attempt: Attempt) -> None:
        """``dataset``'s next request does not fit in what it may still spend: close it."""
        cap = self.books.cap
        shared = cap.share_usd(dataset) is not None and len(self.order) > 1
        left = max(_ZERO, (cap.cap_usd or _ZERO) - cap.committed_usd)
        where = f"only ${left:.6f} of the {format_usd(cap.cap_usd)} cap remains"
        if shared:
            share = cap.share_usd(dataset) or _ZERO
            mine = max(_ZERO, share - cap.committed_by_dataset.get(dataset, _ZERO))
            where += f" (its share has ${mine:.6f} left; nothing is left to borrow)"
        template = "{row:s}: the next request may cost up to ${worst:.6f} and {where:s}"
        values: dict[str, object] = {"row": row.id, "worst": attempt.worst, "where": where}
        # the advice is for the next start, where every dataset is open again: its share then
        base = self._first_share(dataset) if shared else left
        shape = attempt.request.shape
        # the output and the room the reservation keeps past it (``run.books.overshoot``) must fit
        fits = self.books.overshoot.within(
            attempt.prices.max_tokens_within(base, prompt_tokens=shape.prompt_tokens, shape=shape)
        )
        if self.books.counts.requests == 0 and fits < attempt.request.max_tokens:
            template += (
                "; {max_tokens=} would fit"
                + (" its share with every dataset open" if shared else "")
                if fits >= 1
                else "; raise {budget_usd:bare} above ${worst:.6f} for one row"
            )
            values["max_tokens"] = fits
        elif self.books.counts.requests:
            now = attempt.prices.max_tokens_within(
                left, prompt_tokens=shape.prompt_tokens, shape=shape
            )
            if 1 <= now < attempt.request.max_tokens:
                template += "; {max_tokens=} fits what remains"
                values["max_tokens"] = now
        message = Message("spent-out", template, **values)
        said = Message("in-dataset", "{dataset:s}: {said:s}", dataset=dataset, said=message)
        self.books.spent_out(dataset, said if len(self.order) > 1 else message)
        self.close(dataset, message)

    def _first_share(self, dataset: str) -> Decimal:
        """``dataset``'s share of the whole cap while every dataset is open (``weights``)."""
        total = sum((self._weight(d) for d in self.order), _ZERO)
        return (self.books.cap.cap_usd or _ZERO) * self._weight(dataset) / total


def unaffordable_shares(
    rows: list[PromptRow],
    *,
    builder: RequestBuilder,
    prices: Prices,
    budget_usd: Decimal | None,
    weights: Mapping[str, float],
) -> list[str]:
    """What a dry run says of each dataset whose share of ``budget_usd`` (every dataset open,
    ``weights``) cannot buy even its cheapest request at the job's ``max_tokens``: the share, the
    worst case, and the ``max_tokens`` that fits (such a dataset borrows what the others leave
    unspent, so it may still get rows; at that ``max_tokens`` it gets its own)."""
    datasets = sorted({row.dataset for row in rows})
    if budget_usd is None or len(datasets) < 2:
        return []
    weight = {d: Decimal(str(weights.get(d, 1))) for d in datasets}
    total = sum(weight.values(), _ZERO)
    cheapest: dict[str, Attempt | None] = dict.fromkeys(datasets)
    for row in rows:
        row_prices = prices if row.prices is None else row.prices
        request = builder.build(row, row_prices)
        best = cheapest[row.dataset]
        if best is None or request.worst_usd < best.worst:
            cheapest[row.dataset] = Attempt(request, row_prices, "", 0.0)
    said: list[str] = []
    for dataset, attempt in cheapest.items():
        share = budget_usd * weight[dataset] / total
        if attempt is None or attempt.worst <= share:
            continue
        shape = attempt.request.shape
        fits = attempt.prices.max_tokens_within(
            share, prompt_tokens=shape.prompt_tokens, shape=shape
        )
        advice = (
            Message("fits-share", "{max_tokens=} fits its share", max_tokens=fits)
            if fits >= 1
            else Message(
                "no-share-fits", "no {max_tokens:bare} fits its share: raise {budget_usd:bare}"
            )
        )
        said.append(
            Message(
                "share-too-small",
                "{dataset:s}: its share of the cap, ${share:.6f}, cannot buy one request at "
                "{max_tokens=} (worst case ${worst:.6f}); {advice:s} (it borrows what the "
                "others leave unspent, so it may still get rows)",
                dataset=dataset,
                share=share,
                max_tokens=attempt.request.max_tokens,
                worst=attempt.worst,
                advice=advice,
            )
        )
    return said

"""The books of a run: the only place its money is counted, and what its rows and tokens came to.

The books hold the cap (``run.money.spend``), the journal (``run.money.journal``) and the
reconciler (``run.books.reconcile``), and know nothing of which row goes next; what the scheduler
asks and tells them (``reserve``, ``sent``, ``settle``, ``answered``, ...):
docs/generate.md, "The run's parts, and the sender interface". The run's ``RunResult`` is made from
them once, at the end (``summarize``): nothing else writes a money figure.

Money: an attempt counts at its reservation from the moment it is reserved; when it comes back, at
its cost (``usage.cost``, or the error body's; ``None``: an error status, never billed; $0 for
an answer of OpenRouter's response cache, ``cache_hit``), or, when nothing says what it cost, at
its whole reservation ("possibly billed"), or its own token counts at the dearest admitted price
when they cost more (an answer billed past ``max_tokens``), until ``/generation`` settles it.
Each reservation keeps room for output billed past ``max_tokens`` (``run.books.overshoot``: the unseen
room until the first answers, then a margin, or the largest overshoot any provider of the run
billed). A run without a dollar window keeps the margin from its first line: its sender may
answer its lines all at once, so a first wave would be all of them, made eight times smaller.
Earlier runs' attempts that a restart settles change what was spent before this run.

A row may come with a claim (``run.books.batch_books.Claim``): a reservation the journal already holds for
it, an earlier run's attempt whose answer may still arrive (``claims``: a batch run's,
``run.books.batch_books.BatchClaims``): a reservation for a claimed row takes the claim's worst
case over instead of buying it again, and the attempt that carries it settles the earlier one to 0 in the same
write as its own line. The books know claims, not what made them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import replace
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from openrouter_probe.errors import Message
from openrouter_probe.files import WriteFailed
from openrouter_probe.run.books.overshoot import (
    Overshoot,
    billed_output,
    cost_warning,
    overrun_warning,
    own_cost,
)
from openrouter_probe.run.books.reconcile import CacheHits, Lookup, Reconciler, unsettled_note
from openrouter_probe.run.counts import Counts
from openrouter_probe.run.money.journal import Journal
from openrouter_probe.run.money.limit import DollarWindow
from openrouter_probe.run.money.replay import Pending
from openrouter_probe.run.money.spend import SpendCap
from openrouter_probe.run.result import RunResult
from openrouter_probe.run.rows import PromptRow
from openrouter_probe.run.send.attempt import Attempt
from openrouter_probe.run.send.failure import Failure
from openrouter_probe.run.send.request import dumps
from openrouter_probe.run.send.transport import Answer
from openrouter_probe.run.start import RunStart
from openrouter_probe.run.tallies import ProviderTally, count_answer

if TYPE_CHECKING:
    from openrouter_probe.run.books.batch_books import BatchClaims

__all__ = ["Books"]

log = logging.getLogger(__name__)

_ZERO = Decimal(0)
BYOK_FEE_SHARE = Decimal("0.05")  # OpenRouter's fee on a BYOK answer (its docs: 5% of the cost)


class Books:
    """The cap, the journal and the reconciler of one run, and its tallies (see the module)."""

    def __init__(
        self,
        cap: SpendCap,
        *,
        datasets: Sequence[str],
        journal: Journal,
        lookup: Lookup | None = None,
        pending: Sequence[Pending] = (),
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        tokens_before: Mapping[str, int] | None = None,
        unidentified: Mapping[str, Sequence[Pending]] | None = None,
        generation_ids: Collection[str] = (),
        on_change: Callable[[], None] = lambda: None,
        claims: BatchClaims | None = None,
        window: DollarWindow | None = None,
    ) -> None:
        self.cap = cap
        self.on_change = on_change  # money freed up (the scheduler's wake-up: ``Waits.notify``)
        self.journal = journal
        self.run_id = journal.run_id
        self.counts = Counts()
        # Attempts counted at their worst case are settled from /generation, when the sender
        # has a lookup (``HttpTransport.generation_cost``; a batch's has none).
        self.reconciler = (
            Reconciler(
                lookup,
                on_settled=self.reconciled,
                on_change=on_change,
                sleep=sleep,
                counted=set(generation_ids).__contains__,
                on_source=lambda earlier: self.generation(
                    earlier.attempt, earlier.generation_id, run_id=earlier.run
                ),
            )
            if lookup is not None
            else None
        )
        if self.reconciler is not None:
            for earlier in pending:
                self.reconciler.add(earlier, now=True)
        #: earlier runs' attempts with no generation id, by row: a cache hit settles one
        self.cache_hits = CacheHits(unidentified or {})
        self._dataset_json = {name: dumps(name) for name in datasets}
        #: billed output tokens per dataset, earlier runs included (the targets')
        self.settled_tokens: dict[str, int] = dict(tokens_before or {})
        self.observed: dict[str, tuple[int, int]] = {}  # dataset -> (tokens, answers) this run
        #: why datasets closed for want of money, one entry per dataset (the budget stop's text)
        self.out_of_money: dict[str, str] = {}
        self.warnings: list[str] = []
        self._said_once: set[str] = set()
        self.claims = claims  # on the run's rows (a batch run's): ``reserve`` takes them over
        #: the dollars that may be in flight (``run.money.limit.DollarWindow``; none for a batch),
        #: counted as OpenRouter holds them (``SpendCap.held_usd``): worst cases without the room
        #: past ``max_tokens``, the cap's own guard
        self.window = window
        #: output billed past ``max_tokens`` so far, and the room each reservation keeps for it
        self.overshoot = Overshoot()
        self.byok_fee = False  # a BYOK answer came: reservations keep OpenRouter's fee too
        #: the last ``reserve`` was refused by the dollar window: no share, loan or margin lets
        #: it go until something in flight settles (the scheduler tries nothing else meanwhile)
        self.window_full = False

    @property
    def outstanding(self) -> int:
        """Attempts the reconciler still holds at their worst case."""
        return 0 if self.reconciler is None else self.reconciler.outstanding

    def share(self, datasets: Sequence[str], weights: Mapping[str, float]) -> None:
        """Split the cap between ``datasets`` by ``weights`` (unnamed ones weigh 1)."""
        if self.cap.cap_usd is not None and datasets:
            self.cap.shares({d: weights.get(d, 1) for d in datasets})

    def close(self, dataset: str) -> None:
        """``dataset`` sends nothing more: what its share leaves is lent to the others."""
        self.cap.close(dataset)

    # -- before an attempt leaves -----------------------------------------------------------------

    def reserve(self, dataset: str, attempt: Attempt, *, borrow: bool = False) -> bool:
        """Reserve ``attempt``'s worst case under the cap and ``dataset``'s share (``borrow``:
        the cap alone), if it fits.

        A claimed row takes over its claim's worst case (still counted in the journal until the
        attempt that carries it is journaled): its result is claimed, not bought again, so the cap
        an earlier run filled does not lock its own results out, nor does its dataset's share."""
        # the room for output past max_tokens, fixed for this attempt to its settle: the unseen
        # room in the first wave (``run.books.overshoot``), else (or when only that fits, nothing
        # else in flight) the margin; one that does not fit is judged at the margin (``never_fits``)
        max_tokens, price = attempt.request.max_tokens, attempt.prices.output_usd_per_token
        overshoot, cap, window = self.overshoot, self.cap, self.window
        first = overshoot.first_wave and window is not None  # (no window: the module)
        hold = attempt.request.worst_usd  # what OpenRouter holds for it
        fee = hold * BYOK_FEE_SHARE if self.byok_fee else _ZERO  # beside the provider's bill
        margin = overshoot.extra_usd(max_tokens, price) + fee
        room = overshoot.first_room_usd(max_tokens, price) if first else margin - fee
        attempt.overshoot_usd = room + fee
        claims = self.claims
        self.window_full = False
        while True:
            if window is not None and not window.admits(cap.held_usd, cap.in_flight, hold):
                # the dollars in flight are full: wait for one to settle (``window_full``
                # tells the queues so: a loan or another try holds the same ``hold``)
                self.window_full, attempt.overshoot_usd = True, margin
                return False
            claim = None if claims is None else claims.claim(attempt.id_json)
            if claim is not None:
                cap.give_back(claim.reserved_usd, claim.dataset)
            lend = borrow or claim is not None  # paid already: the cap alone, not the share
            fits = cap.try_reserve(attempt.worst, dataset, borrow=lend, held_usd=hold)
            if claim is not None and claims is not None:
                if fits:
                    claims.take(attempt.id_json)
                else:
                    self.hand_back(claim.reserved_usd, claim.dataset)
            if fits or not first:
                return fits
            first, attempt.overshoot_usd = False, margin
            if cap.in_flight:
                return False  # it waits for the first answers

    def hand_back(self, reserved: Decimal, dataset: str | None) -> None:
        """A claim's worst case that ``reserve`` took over and no attempt of this run carries
        (the reservation did not fit, or the run stopped before the attempt was journaled): it
        counts again, as it still does in the journal."""
        self.cap.add_spent(reserved, dataset)

    def sent(self, row: PromptRow, attempt: Attempt) -> int:
        """Journal an attempt about to leave (reserved) and flush it to the OS; return its
        number (a flush costs less than the wait for a shared one: a wake-up per request).

        A line the journal cannot take (``files.WriteFailed``, raised on): the attempt never
        leaves, and its reservation is released (nothing was billed)."""
        journal = self.journal
        self.counts.requests += 1
        dataset = self._dataset_json[row.dataset]
        try:
            claims = self.claims
            if claims is None:
                return journal.sent(attempt.id_json, attempt.worst, dataset)
            number = journal.sending(attempt.id_json, attempt.worst, dataset)
            # a claim this attempt took over (``reserve``) goes in the same write: the earlier
            # attempt settled to 0 (its worst case is this one's), then what carries it now
            claim = claims.carried(attempt.id_json)
            if claim is not None:
                self.reconciled(claim.earlier, _ZERO, taken_over=True, known=claim.known)
                claim.journal(number)
            journal.flush()
            return number
        except WriteFailed:
            self.counts.requests -= 1
            self.cap.settle(attempt.worst, None, row.dataset, held_usd=attempt.request.worst_usd)
            raise

    def generation(self, number: int, generation_id: str, *, run_id: str | None = None) -> None:
        """Journal the generation id the headers brought for attempt ``number`` (of an earlier
        run, ``run_id``: the one a cache hit named)."""
        self.journal.generation(number, generation_id, run_id=run_id)

    # -- when it comes back -----------------------------------------------------------------------

    def settle(
        self,
        row: PromptRow,
        attempt: Attempt,
        number: int,
        outcome: Answer | Failure,
        generation_id: str | None,
        *,
        journaled: bool,
    ) -> None:
        """Settle attempt ``number``'s reservation to what it cost, in the cap and the journal.

        An answer is read against its request here first: cut at ``max_tokens`` with no finish
        reason (``mark_cut``), billed past it (``overshoot``), from the response cache (billed
        nothing, whatever its usage says)."""
        worst = attempt.worst
        if isinstance(outcome, Answer):
            max_tokens = attempt.request.max_tokens
            outcome.mark_cut(max_tokens)
            cost = outcome.cost_usd
            if outcome.cache_hit:
                cost = cost or _ZERO
                self.counts.cache_hits += 1
                earlier = self.cache_hits.take(row.id, generation_id or outcome.generation_id)
                if earlier is not None and self.reconciler is not None:
                    self.reconciler.add(earlier)
            attempt.cost = cost
            self.byok_fee |= outcome.byok_usd is not None
            billed = billed_output(outcome.usage)
            if self.overshoot.see(
                outcome.provider, billed_tokens=billed, max_tokens=max_tokens, cost_usd=cost
            ):
                log.info(
                    Message(
                        "billed-past-max-tokens",
                        "{row:s} billed {billed:d} tokens for {max_tokens=}",
                        row=row.id,
                        billed=billed,
                        max_tokens=max_tokens,
                    )
                )
            if cost is None:
                own = own_cost(outcome.usage, attempt)
                self.warn(
                    cost_warning(outcome, max(worst, own)), once=f"cost {outcome.provider or '?'}"
                )
                self.unknown(row, attempt, number, generation_id, journaled=journaled, counted=own)
                return
        elif outcome.cost_unknown:
            self.unknown(row, attempt, number, generation_id, journaled=journaled)
            return
        else:
            cost = outcome.cost_usd
            if cost:
                attempt.extra_cost += cost
        self.journal.settle(number, cost)
        self.cap.settle(worst, cost, row.dataset, held_usd=attempt.request.worst_usd)
        self.counts.spent_usd += cost or 0

    def unknown(
        self,
        row: PromptRow,
        attempt: Attempt,
        number: int,
        generation_id: str | None,
        *,
        journaled: bool = True,
        counted: Decimal = _ZERO,
    ) -> None:
        """An attempt that left and whose cost is unknown: its worst case (or ``counted``, when
        that is more: an answer's own token counts) counts as spent until the reconciler settles
        it from ``/generation`` (when it has a generation id; one only the body named, not the
        headers, is journaled now, so that a restart can settle it too)."""
        reserved = attempt.worst
        worst = max(reserved, counted)
        if generation_id is not None and not journaled:
            self.journal.generation(number, generation_id)
        self.journal.settle_unknown(number, counted_usd=worst if worst > reserved else None)
        self.cap.settle(reserved, worst, row.dataset, held_usd=attempt.request.worst_usd)
        self.counts.spent_usd += worst
        self.counts.possibly_billed_usd += worst
        if generation_id is None or self.reconciler is None:
            self.counts.unsettleable += 1
            return
        self.reconciler.add(Pending(self.run_id, number, generation_id, worst, row.dataset))

    def reconciled(
        self, pending: Pending, cost: Decimal, *, taken_over: bool = False, known: bool = False
    ) -> None:
        """``/generation`` (or a sender's own cost) says what an attempt counted at its worst case
        cost: journal it and give the difference back (this run's attempts and earlier runs'
        alike). ``taken_over``: an earlier run's attempt whose worst case this run's attempt
        took over (``reserve``, a claim): the cap already gave it back, only the journal and the
        counts change. ``known``: it was settled at its answer's cost, not possibly billed."""
        self.journal.reconciled(pending.run, pending.attempt, cost)
        back = pending.reserved_usd - cost
        if taken_over:
            pass
        elif back >= 0:
            self.cap.give_back(back, pending.dataset)
        else:
            self.cap.add_spent(-back, pending.dataset)
            self.cap.overruns += 1
        c = self.counts
        if pending.run == self.run_id:
            c.spent_usd -= back
            c.possibly_billed_usd -= pending.reserved_usd
            c.reconciled += 1
            c.reconciled_back_usd += back
        else:
            c.possibly_billed_before_settled_usd += _ZERO if known else pending.reserved_usd
            c.reconciled_before += 1
            c.reconciled_before_back_usd += back
        self.on_change()

    def warn(self, text: str, *, once: str | None = None) -> None:
        """Say ``text`` on stderr now and in the summary (``once``: a key said only the first
        time, such as one provider's missing ``usage.cost``)."""
        if once is not None:
            if once in self._said_once:
                return
            self._said_once.add(once)
        self.warnings.append(text)
        log.warning(text)

    async def settle_the_rest(
        self,
        reconciling: asyncio.Future[None] | None,
        stop: asyncio.Future[None] | None,
        *,
        wait: bool = True,
    ) -> None:
        """Let the reconciler settle what it holds, within its waits (or until ``stop``; not at
        all without ``wait``), then end it."""
        reconciler = self.reconciler
        if reconciler is None or reconciling is None:
            return
        reconciler.finish()
        if reconciler.outstanding and wait:
            log.info("settling %d attempt(s) from /generation", reconciler.outstanding)
            waits = {reconciling} | ({stop} if stop is not None and not stop.done() else set())
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        if not reconciling.done():
            reconciling.cancel()
        await asyncio.gather(reconciling, return_exceptions=True)

    # -- rows and tokens --------------------------------------------------------------------------

    def answered(
        self, row: PromptRow, answer: Answer, cost: Decimal | None, *, last: bool, turn: bool
    ) -> None:
        """Count an answer: its tokens and cost, and the row it finishes when it is the ``last``
        of its row (``turn``: an answer to one turn of a row that goes turn by turn)."""
        c, dataset, truncated = self.counts, row.dataset, answer.truncated
        byok = None if cost is None or answer.cache_hit else answer.byok_usd  # (billed: in cost)
        name = answer.provider or "?"
        tokens = count_answer(c.providers, name, answer.usage, cost, byok, turn, last, truncated)
        seen_tokens, seen_answers = self.observed.get(dataset, (0, 0))
        self.observed[dataset] = (seen_tokens + tokens, seen_answers + 1)
        self.settled_tokens[dataset] = self.settled_tokens.get(dataset, 0) + tokens
        c.output_tokens[dataset] = c.output_tokens.get(dataset, 0) + tokens
        c.turns_done += turn
        c.lengths.add(tokens, truncated)
        if last:
            c.done[dataset] = c.done.get(dataset, 0) + 1
            c.truncated += truncated
            c.ok += not truncated

    def failed(self, row: PromptRow) -> None:
        """Count a row recorded as failed."""
        self.counts.failed += 1
        self.counts.done[row.dataset] = self.counts.done.get(row.dataset, 0) + 1

    def cancelled(self, row: PromptRow, attempt: Attempt, number: int, gen: str | None) -> None:
        """Count an attempt cancelled in flight: at its worst case until settled."""
        self.unknown(row, attempt, number, gen)
        self.counts.cancelled += 1

    def unsent(self, dataset: str, count: int = 1, *, partial: bool = False) -> None:
        """Count rows that stop unsent (``partial``: some of its turns are done: kept for the
        resume)."""
        if partial:
            self.counts.rows_partial += count
            return
        self.counts.not_sent += count
        by = self.counts.not_sent_by
        by[dataset] = by.get(dataset, 0) + count

    def spent_out(self, dataset: str, message: str) -> None:
        """``dataset`` closed for want of money (the first reason is kept: one per dataset)."""
        self.out_of_money.setdefault(dataset, message)

    # -- the summary ------------------------------------------------------------------------------

    def summarize(self, start: RunStart, **ended: Any) -> RunResult:
        """The run's ``RunResult``, made once: ``start`` (what the job learned before sending),
        what the books counted, and ``ended`` (the scheduler's own figures: the stop reason and
        message, retries, pauses, the time taken)."""
        c, cap = self.counts, self.cap
        datasets = {
            name: replace(
                tally,
                done=tally.done + c.done.get(name, 0),
                not_sent=tally.not_sent + c.not_sent_by.get(name, 0),
                output_tokens=tally.output_tokens + c.output_tokens.get(name, 0),
                spent_usd=cap.committed_by_dataset.get(name, tally.spent_usd),
            )
            for name, tally in start.datasets.items()
        }
        unsettled = unsettled_note(self.reconciler)
        if unsettled:
            self.warn(unsettled)
        window = self.window
        if cap.overruns:
            self.warn(overrun_warning(cap.overruns, bool(self.overshoot.by_provider)))
        return RunResult.of(
            start,
            **c.figures(),
            output_tokens=c.output_tokens,
            spent_before_usd=start.spent_before_usd - c.reconciled_before_back_usd,
            possibly_billed_before_usd=(
                start.possibly_billed_before_usd - c.possibly_billed_before_settled_usd
            ),
            overshoot={
                name: (seen.answers, seen.worst_ratio, seen.over_usd)
                for name, seen in self.overshoot.by_provider.items()
            },
            providers={name: ProviderTally(**f) for name, f in c.providers.items()},
            datasets=datasets,
            peak_committed_usd=cap.peak_committed_usd,
            held_max_usd=window.most_held_usd if window is not None else _ZERO,
            in_flight_refusals=window.refusals if window is not None else 0,
            notes=(*start.notes, *c.lengths.note()),
            warnings=(*start.warnings, *self.warnings),
            **ended,
        )

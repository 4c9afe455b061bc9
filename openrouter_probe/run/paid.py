"""The one way to run a paid job: ``generate`` and ``verify`` both start their requests here.

``open_run`` opens the output for a run (``RunPlan.resolve`` checked the plan before): it takes
the output's lock (``run.lock``) before anything is read or repaired, refuses an output another
command (or another model) wrote, and reads what the output and its spend journal already record.
``run_job`` then checks the key's limit (``PaidRun.before_sending``) and makes the run's parts in
order, each from the ones before it, with constructor arguments only (the composition root; the
parts and their order: docs/generate.md, "The run's parts, and the sender interface"). A guarantee
added here holds for both commands.

Example::

    options = RunPlan.resolve(command="generate", out="out.jsonl", inputs=["prompts.jsonl"],
                                 budget_usd=100, concurrency=256)
    with open_run(options) as paid:
        todo = [row for row in rows if row.id not in paid.state.finished]
        before = RunStart.opened(paid.held, policy="policies/kimi-k2.5.yaml", model=MODEL, ...)
        builder = RequestBuilder(model=MODEL, provider_json=block, max_tokens=4096)
        result = await run_job(paid, todo, builder=builder, prices=prices, before=before,
                               learned=Learned.nothing(options))

A run of the other command on the same output stops with one line; a run of the same command under
another policy or plan (a re-compiled policy) warns and resumes: its finished rows are kept.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Awaitable, Iterator, Sequence
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from openrouter_probe.errors import ConfigError, Message
from openrouter_probe.files import WriteFailed, open_append, write_error
from openrouter_probe.rules.quantities import format_usd
from openrouter_probe.run.books.books import Books
from openrouter_probe.run.books.output import OutputLog, ResumeState, load_resume_state
from openrouter_probe.run.books.turns import TurnBook, TurnLog
from openrouter_probe.run.checks import KeyCheck, account_window, key_check
from openrouter_probe.run.config import Learned, Progress, RunPlan
from openrouter_probe.run.lock import OutputLock
from openrouter_probe.run.money.journal import Adopted, Journal, adopt
from openrouter_probe.run.money.limit import WindowStart
from openrouter_probe.run.money.replay import JournalReplay, replay_journal
from openrouter_probe.run.money.spend import Prices, SpendCap
from openrouter_probe.run.result import RunResult
from openrouter_probe.run.rows import PromptRow
from openrouter_probe.run.schedule.garbage import paced
from openrouter_probe.run.schedule.runner import Run
from openrouter_probe.run.schedule.source import RowSource, TurnSource
from openrouter_probe.run.schedule.waits import Waits
from openrouter_probe.run.send.request import RequestBuilder
from openrouter_probe.run.senders import sender_for
from openrouter_probe.run.start import Held, RunStart, Said
from openrouter_probe.run.stop import StopReason, WriteStop

if TYPE_CHECKING:
    from openrouter_probe.run.books.batch_books import BatchClaims

__all__ = [
    "Job",
    "PaidRun",
    "RunPlan",
    "open_run",
    "run_job",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Job:
    """What a run makes: its model, a hash of what decides its requests (the policy's provider
    block, the verify plan) and a name for people (the policy's path)."""

    model: str
    sha256: str
    label: str


def _check_job(options: RunPlan, headers: list[dict[str, Any]], job: Job | None) -> str | None:
    """Refuse an output another command or another model wrote; warn (return why) when the same
    command wrote it under another policy or plan: resuming after a re-compile stays possible."""
    for header in headers:
        command = header.get("command")
        if isinstance(command, str) and command != options.command:
            raise ConfigError(
                Message(
                    "out-of-another-command",
                    "{path:s} was written by `{by:s}` ({policy:s}); `{command:s}` does not add "
                    "rows to it: give {out} another file",
                    path=str(options.out),
                    by=command,
                    policy=str(header.get("policy", "?")),
                    command=options.command,
                )
            )
        model = header.get("model")
        if job is not None and isinstance(model, str) and model != job.model:
            raise ConfigError(
                Message(
                    "out-of-another-model",
                    "{path:s} holds rows of {model:s}, not {job:s}: give {out} another file",
                    path=str(options.out),
                    model=model,
                    job=job.model,
                )
            )
    last = headers[-1] if headers else {}
    if job is not None and isinstance(last.get("job"), str) and last["job"] != job.sha256:
        what = "policy" if options.command == "generate" else "plan"
        return Message(
            "out-of-another-plan",
            "{path:s} was written under another {what:s} ({policy:s}); its finished rows are kept "
            "and not sent again (give {out} another file to start afresh)",
            path=str(options.out),
            what=what,
            policy=str(last.get("policy", "?")),
        )
    return None


class PaidRun:
    """An output opened for a run: what it already records, and ``run`` to send more rows."""

    def __init__(
        self,
        options: RunPlan,
        state: ResumeState,
        replay: JournalReplay,
        job: Job | None,
        warnings: Sequence[str],
        lock: OutputLock,
    ) -> None:
        self.options = options
        self.state = state
        self.replay = replay
        self.job = job
        self.warnings = list(warnings)
        self.lock = lock

    def _created(self) -> None:
        """The output exists now: lock its inode too (``OutputLock.claim``)."""
        self.lock.claim()

    @property
    def spent_before_usd(self) -> Decimal:
        """What the output's journal holds as spent (the only record of money)."""
        return self.replay.spent_usd

    @property
    def held(self) -> Held:
        """What the output holds now, as a run starts from it (``RunStart.opened``)."""
        options, state, replay = self.options, self.state, self.replay
        return Held(
            out=str(options.out),
            journal=str(options.journal),
            budget_usd=options.budget_usd,
            spent_usd=self.spent_before_usd,
            possibly_billed_usd=replay.possibly_billed_usd,
            killed_in_flight=replay.in_flight,
            done_by_dataset=dict(state.rows_by_dataset),
            tokens_by_dataset=dict(state.output_tokens),
            spent_by_dataset=dict(replay.by_dataset),
            warnings=tuple(self.warnings),
        )

    def unjournaled(self, prices: Prices, max_tokens: int) -> list[Adopted]:
        """The output's records (and kept turns) the journal does not know, each at its worst
        case (``Unjournaled.worst_usd``): their money is unknown."""
        return [
            Adopted(u.key, u.row_id, u.dataset, u.worst_usd(prices, max_tokens), u.generation_id)
            for u in self.state.unjournaled
        ]

    def count_unjournaled(self, before: RunStart, prices: Prices, max_tokens: int) -> RunStart:
        """``before`` with the worst case of the records the journal does not know added to its
        money before this run (a dry run: nothing is written)."""
        records = self.unjournaled(prices, max_tokens)
        worst = sum((record.worst_usd for record in records), Decimal(0))
        by_dataset = {name: tally.spent_usd for name, tally in before.datasets.items()}
        for record in records:
            if record.dataset in by_dataset:
                by_dataset[record.dataset] += record.worst_usd
        return before.with_money_before(
            before.spent_before_usd + worst, before.possibly_billed_before_usd + worst, by_dataset
        )

    def _adopt(self, before: RunStart, prices: Prices, max_tokens: int) -> RunStart:
        """Journal the records the journal does not know (``run.money.journal.adopt``) and return
        ``before`` with the money the journal now holds: the books and the reconciler settle them
        from ``/generation`` like any attempt counted at its worst case."""
        records = self.unjournaled(prices, max_tokens)
        if not records:
            return before
        options = self.options
        try:
            open_append(options.output).close()  # the journal never stands without its output
        except OSError as exc:
            raise WriteFailed(write_error(options.output, exc)) from exc
        self._created()
        adopt(options.journal, records)
        unknown = sum(1 for r in records if r.generation_id is None)
        log.warning(
            "%s: %d record(s) of runs %s does not know: their money counts at its worst case "
            "(%s) until /generation settles it (%d without a generation id stay there)",
            options.out,
            len(records),
            options.journal.name,
            format_usd(sum((r.worst_usd for r in records), Decimal(0))),
            unknown,
        )
        self.replay = replay_journal(options.journal)
        self.state.unjournaled = []
        replay = self.replay
        return before.with_money_before(
            replay.spent_usd, replay.possibly_billed_usd, replay.by_dataset
        )

    async def _warn(
        self,
        before: RunStart,
        budget: Decimal | None,
        one_request_usd: Decimal | None = None,
    ) -> tuple[RunStart, KeyCheck | None]:
        """``before`` with what could surprise said (the key's limit below the budget, no cap; a
        blocking one is the stop's message instead), and what the key check read (``None``: a
        sender of its own; ``blocks``: a budget of the key blocks even one request)."""
        check, said = None, []
        if self.options.send is None:
            check = await asyncio.to_thread(
                functools.partial(key_check, lower_max_tokens=self.options.lower_max_tokens),
                self.options,
                budget,
                None,
                one_request_usd,
            )
            if check.warning and not check.blocks:
                said.append(check.warning)
        if budget is None:
            said.append(
                Message(
                    "no-budget",
                    "no {budget_usd:bare}: nothing caps this run's spend ({dry_run=True} shows the "
                    "worst case)",
                )
            )
        for text in (*before.warnings, *said):
            log.warning(text)
        return before.saying(Said(warnings=tuple(said))), check

    def _journal_header(
        self, builder: RequestBuilder, header: dict[str, Any] | None, budget: Decimal | None
    ) -> dict[str, Any]:
        """The fields of this run's header line in the journal."""
        return {
            "command": self.options.command,
            "model": self.job.model if self.job is not None else builder.model,
            "job": self.job.sha256 if self.job is not None else "",
            "out": self.options.output.name,
            "budget_usd": budget,
            **(header or {}),
        }

    def _spent_already(self, before: RunStart, rows: int, cap: Decimal | None) -> RunResult | None:
        """The result when the output already spent the budget (stop at once, ``budget``), unless
        what earlier runs left to settle (``/generation``, open batches) may free money."""
        spent_before = self.spent_before_usd
        unsettled = self.replay.pending or self.replay.batches
        if cap is None or spent_before < cap or unsettled:
            return None
        message = (
            f"{self.options.out} and {self.options.journal.name} already record "
            f"${spent_before:.6f} spent of the {format_usd(cap)} cap"
        )
        return RunResult.of(before, stop_reason=StopReason.BUDGET, message=message, not_sent=rows)

    async def before_sending(
        self,
        rows: list[PromptRow],
        builder: RequestBuilder,
        prices: Prices,
        before: RunStart,
        learned: Learned,
    ) -> tuple[RunStart, list[PromptRow], WindowStart | None] | RunResult:
        """What ``run_job`` checks before it makes anything: the records the journal does not
        know journaled, the key's limit and the budget said; the result when nothing is to be sent
        (the key's budget blocks even one request, or the output spent the budget already); else
        ``before`` with what was said, the rows in the order they go (an open batch's first) and
        where the dollar window opens."""
        options, budget = self.options, learned.cap_usd
        before = self._adopt(before, prices, builder.max_tokens)
        one_request = prices.worst_case_usd(prompt_tokens=0, max_tokens=builder.max_tokens)
        before, check = await self._warn(before, budget, one_request)
        if check is not None and check.blocks:
            said_why = {"stop_reason": StopReason.BUDGET_SPENT, "message": check.warning}
            return RunResult.of(before, not_sent=len(rows), **(said_why if check.warning else {}))
        if (spent := self._spent_already(before, len(rows), budget)) is not None:
            return spent
        if learned.batch is not None:  # an open batch's rows first: its answers are paid
            from openrouter_probe.run.books.batch_books import claimed_first

            return before, claimed_first(rows, self.replay.batches), None  # (nothing in flight)
        start = account_window(
            options, check, rows, builder, prices, resumed_usd=self.replay.window_usd
        )
        log.info("%s", start.why)
        return before.saying(Said(notes=(start.why,))), rows, start


async def run_job(
    paid: PaidRun,
    rows: list[PromptRow],
    *,
    builder: RequestBuilder,
    prices: Prices,
    before: RunStart,
    header: dict[str, Any] | None = None,
    turns: TurnBook | None = None,
    learned: Learned,
) -> RunResult:
    """Send ``rows`` under one cap over everything ``paid``'s output has spent, starting from
    ``before`` (what the job found before sending); return the result.

    The one place a run is put together: after ``PaidRun.before_sending``, each part is made once,
    in order, from the parts before it (see the module). ``builder`` makes each row's body and
    worst case at ``prices`` (a row's own ``prices`` when it has them). ``header`` goes into the
    journal's run line; ``turns`` holds the rows that go turn by turn (``--turns all``);
    ``learned``: what the job learned as it opened (the cap, the weights, the batch settings).
    """
    options, state, budget = paid.options, paid.state, learned.cap_usd
    if not rows and not state.exists:  # nothing to send or recorded: no empty output and journal
        return RunResult.of(before)
    ready = await paid.before_sending(rows, builder, prices, before, learned)
    if isinstance(ready, RunResult):
        return ready
    (before, rows, start), replay = ready, paid.replay  # (read again: the records adopted)
    cap = SpendCap(budget, spent_usd=replay.spent_usd, spent_by_dataset=replay.by_dataset)
    bar = _progress_bar(options.progress, len(rows))
    # (the bar is shown while the run goes; a caller's own may be no context manager)
    showing = (
        bar if isinstance(bar, contextlib.AbstractContextManager) else contextlib.nullcontext()
    )
    job_sha256 = paid.job.sha256 if paid.job is not None else ""
    waits = Waits(options.sleep)
    stop = WriteStop(waits.stop)  # a failed write of any of the run's files stops it
    turn_log = TurnLog(turns.path, stop) if turns is not None else None
    head = paid._journal_header(builder, header, budget)
    with (
        OutputLog(options.output, on_failure=stop) as output,
        Journal(options.journal, header=head, on_failure=stop) as journal,
        showing,
    ):
        paid._created()
        source = (
            RowSource(rows, job_sha256=job_sha256, run_id=journal.run_id)
            if turns is None or turn_log is None
            else TurnSource(rows, turns, log=turn_log, job_sha256=job_sha256, run_id=journal.run_id)
        )
        claims = _batch_claims(journal) if learned.batch is not None else None  # open batches'
        # OpenRouter's in-flight budget, learned from ``start`` (what the account allows) on
        dollars = (start or WindowStart()).window(journal)
        with contextlib.closing(source):
            kind = sender_for(options, learned)  # (``run.senders.SENDERS``)
            async with kind.open(options, learned, replay, rows, state.awaiting) as channel:
                books = Books(
                    cap,
                    datasets=sorted({r.dataset for r in rows}),
                    journal=journal,
                    lookup=channel.lookup,
                    pending=replay.pending,
                    sleep=options.sleep,
                    tokens_before=state.output_tokens,
                    unidentified=replay.unidentified,
                    generation_ids=replay.generation_ids,
                    on_change=waits.notify,
                    claims=claims,
                    window=dollars if learned.batch is None else None,  # a batch holds none
                )
                run = Run(
                    source,
                    options=options,
                    learned=learned,
                    builder=builder,
                    prices=prices,
                    books=books,
                    output=output,
                    send=channel.sender(books, claims, waits),
                    before=before,
                    waits=waits,
                    dollars=dollars,
                    progress=bar,
                )
                result = await _run(run, options.handle_signals, before=channel.ready())
            result = await channel.finish(result)
    # (or failed only as the files closed)
    failed = output.writes.line or journal.writes.line or (turn_log and turn_log.writes.line)
    if failed:
        stop(failed)
        message = stop.line or failed
        result = replace(result, stop_reason=StopReason.WRITE_FAILED, message=message)
    return result


async def _run(run: Run, handle_signals: bool, *, before: Awaitable[None]) -> RunResult:
    """``run`` to its end (``before`` awaited first, the signal handlers already in place); the
    garbage collector paced from ``before`` on (earlier batches' results fetched are the job's)."""
    remove = run.install_signal_handlers() if handle_signals else None
    try:
        with paced():  # the garbage collector less often while the requests are in flight
            await before
            return await run.run()  # its warnings are said as they happen (Run.warn)
    finally:
        if remove is not None:
            remove()


@contextlib.contextmanager
def open_run(
    options: RunPlan,
    *,
    redo_failed: bool = False,
    job: Job | None = None,
    take_up_batches: bool = False,
) -> Iterator[PaidRun]:
    """Open ``options.out`` for a run and yield the ``PaidRun`` that sends the rest.

    Takes the output's lock first (held until the block ends; a second run stops with one line
    naming the holder), then reads the journal (the money) and the output (the finished rows),
    cutting a torn last line of either. ``job`` names what this run makes: an output another
    command or model wrote is refused, one written under another policy or plan warns.
    ``take_up_batches``: the run takes up earlier runs' open batches (``generate --batch``
    without ``abandon``): a row recorded ``failed`` that one holds a line for awaits its answer
    (``ResumeState.awaiting``).
    """
    out = options.output  # a plan only priced is refused here, before anything is opened
    with OutputLock(out, command=options.command) as lock:
        replay = replay_journal(options.journal, output_exists=out.exists())
        warning = _check_job(options, replay.headers, job)
        # a row an open batch holds a line for: its answer may be paid (``BatchSender``)
        batches = replay.batches if take_up_batches else []
        state = load_resume_state(
            out,
            redo_failed=redo_failed,
            journal_runs=replay.runs,
            adopted=replay.adopted,
            awaited={str(line[3]) for b in batches for line in b.lines.values()},
        )
        yield PaidRun(options, state, replay, job, [warning] if warning else [], lock)


def _progress_bar(progress: bool | Progress, rows: int) -> Progress | None:
    if progress is True and rows:
        from openrouter_probe.run.progress import progress_for

        return progress_for(rows)
    return None if isinstance(progress, bool) else progress


def _batch_claims(journal: Journal) -> BatchClaims:
    """The claims of the open batches ``journal`` holds (a batch run's; its module only then)."""
    from openrouter_probe.run.books.batch_books import BatchClaims

    return BatchClaims(journal)

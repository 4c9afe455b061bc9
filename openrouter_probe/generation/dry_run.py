"""``generate(dry_run=True)``: what the run would do and cost, sending nothing.

``dry_run_job`` makes the result of the worst case of every request to send (every
turn with ``turns="all"``) and the budget planner's expected cost, and says where the run's
in-flight window would start (``run.checks.account_window``), the key's limit against the budget
of every shard, and the account's balance.
"""

from __future__ import annotations

import asyncio
import logging
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from openrouter_probe.errors import Message
from openrouter_probe.generation.plan import GeneratePlan
from openrouter_probe.run import checks
from openrouter_probe.run.books.turns import TurnBook
from openrouter_probe.run.counts import useful_rows
from openrouter_probe.run.money.spend import Prices
from openrouter_probe.run.result import RunResult
from openrouter_probe.run.rows import PromptRow
from openrouter_probe.run.schedule.queues import unaffordable_shares
from openrouter_probe.run.send.request import RequestBuilder
from openrouter_probe.run.start import RunStart, Said
from openrouter_probe.run.stop import StopReason

if TYPE_CHECKING:
    from openrouter_probe.generation.opening import OpenedJob

__all__ = ["dry_run_job"]

#: Bytes per token assumed for the dry run's *expected* prompt size (the cap uses a strict bound).
_BYTES_PER_TOKEN = 4


def _worst_total(
    todo: list[PromptRow], prices: Prices, builder: RequestBuilder, book: TurnBook | None
) -> Decimal:
    """The worst case of every request to send: a row's, or each of its turns' (the answers of
    earlier turns in its prompt at their ``max_tokens`` each, the tokens the model wrote them in),
    each with the room the run reserves for output past ``max_tokens`` (``run.books.overshoot``)."""
    from openrouter_probe.run.books.overshoot import Overshoot

    room, price = Overshoot().extra_usd, prices.output_usd_per_token
    total = Decimal(0)
    for row in todo:
        progress = None if book is None else book.rows.get(row.id)
        if progress is None:
            request = builder.build(row, prices)
            total += request.worst_usd + room(request.max_tokens, price)
            continue
        row_max = builder.max_tokens_of(row)
        for turn, earlier in progress.planned():
            request = builder.build(turn, prices, extra_prompt_tokens=earlier * row_max)
            total += request.worst_usd + room(request.max_tokens, price)
    return total


def _shard_shares(
    every_shard: list[PromptRow],
    asked: GeneratePlan,
    prices: Prices,
    builder: RequestBuilder,
    book: TurnBook | None,
) -> tuple[list[dict[str, Any]], str]:
    """The dry run of a sharded job: each shard's rows and worst case, before resume (the other
    shards' turn by turn with ``--turns all`` are unknown: their turns files are elsewhere), and
    the note that says them."""
    from openrouter_probe.generation.prompts import shard_of
    from openrouter_probe.generation.shards import ShardShare, shard_shares_note

    assert asked.shard is not None
    index, count = asked.shard
    parts: list[list[PromptRow]] = [[] for _ in range(count)]
    for row in every_shard:
        # a sample (ID#k) goes with its prompt's id, as the rows were sharded before sampling
        ident = row.id.rsplit("#", 1)[0] if asked.samples > 1 else row.id
        parts[shard_of(ident, count)].append(row)

    def worst(part: list[PromptRow]) -> Decimal | None:
        return None if book is not None else _worst_total(part, prices, builder, None)

    shares = [ShardShare(i, count, len(p), worst(p), i == index) for i, p in enumerate(parts)]
    return [s.to_dict() for s in shares], shard_shares_note(shares)


def _mix_shares(todo: list[PromptRow], builder: RequestBuilder) -> list[str]:
    """The sampling mix's draws over the rows to send, per dataset (what ``audit`` will count)."""
    from openrouter_probe.rules.sampling_mix import Shares, count_sampling

    counts: dict[str, dict[str, dict[str, int]]] = {}
    for row in todo:
        count_sampling(counts, row.dataset, builder.sampling_of(row))
    return [f"drawn for the rows to send, {line}" for line in Shares(counts).lines()]


def _summary(job: OpenedJob, asked: GeneratePlan, before: RunStart) -> RunResult:
    """What the run of ``job`` would do, sending nothing: the worst case of every request (every
    turn with ``--turns all``), the expected cost; sharded, every shard's rows and worst case."""
    from openrouter_probe.analysis.budget import plan_budget

    todo, prices, book, compiled = job.rows, job.prices, job.turns, job.compiled
    options, learned = job.paid.options, job.learned
    budget, max_tokens, target = learned.cap_usd, asked.max_tokens, options.target_tokens
    # the provider block adds no prompt bytes; the row identity does, as in the real run
    builder = asked.request_builder(compiled.model, {}, identity=asked.response_cache)
    worst_total = _worst_total(todo, prices, builder, book)
    shares: list[dict[str, Any]] = []
    notes: list[str] = []
    if asked.shard is not None and job.every_shard:
        shares, note = _shard_shares(job.every_shard, asked, prices, builder, book)
        notes.append(note)
    if asked.mix is not None:
        notes.extend(_mix_shares(todo, builder))
    dry = {"stop_reason": StopReason.DRY_RUN, "worst_case_usd": worst_total, "shard_shares": shares}
    dry["not_sent"] = len(todo)
    if not todo:
        return RunResult.of(before.saying(Said(notes=tuple(notes))), **dry)
    datasets = sorted({r.dataset for r in todo})
    requests = len(todo) if book is None else book.to_send(todo)
    wanted = max_tokens * requests
    if target is not None:
        wanted = min(wanted, target * len(datasets))
    prompt_avg = max(1, sum(r.prompt_size for r in todo) // len(todo) // _BYTES_PER_TOKEN)
    plan = plan_budget(
        job.snap,
        budget_usd=budget if budget is not None else max(worst_total, Decimal(1)),
        output_tokens=wanted,
        prompt_tokens_per_request=prompt_avg,
        output_tokens_per_request=max_tokens,
        provider=compiled.provider,
        parameters=asked.parameters,
        max_tokens=max_tokens,
        concurrency=options.concurrency,
        model=compiled.model,
    )
    figures = plan.blended.all_in or plan.blended.output_only
    if asked.shard_source and asked.shard is not None:
        dry["shard_from"] = (
            f"shard {asked.shard[0]}/{asked.shard[1]} from the launcher ({asked.shard_source})"
        )
    warnings = unaffordable_shares(
        todo, builder=builder, prices=prices, budget_usd=budget, weights=learned.weights
    )
    if budget is not None and asked.shards:
        warnings.append(
            Message(
                "budget-per-shard",
                "{budget_usd=} is per shard: the {shards:d} shards may spend ${total:,.2f} on the "
                "key in all",
                budget_usd=budget,
                shards=asked.shards,
                total=budget * asked.shards,
            )
        )
    notes.extend(useful_rows(len(todo), figures.cost_usd, job.paid.state.lengths))
    return RunResult.of(
        before.saying(Said(tuple(notes), tuple(warnings))),
        **dry,
        expected_usd=figures.cost_usd,
        message=plan.headline if budget is not None else _no_budget(asked),
    )


def _no_budget(asked: GeneratePlan) -> str:
    """What the dry run says of a job without a budget: the cap the real run will read."""
    if asked.budget_from_key:
        return Message(
            "dry-run-key-budget",
            "no {budget_usd:bare}: the real run is capped at what the key's limit has left "
            "(GET /key), or refused if the key has none; give {budget_usd} to choose the cap",
        )
    return Message(
        "dry-run-no-budget",
        "no {budget_usd:bare}: nothing would cap the real run's spend; give one to cap it",
    )


async def _key_check(job: OpenedJob, asked: GeneratePlan) -> Said:
    """The dry run's look at the key and the account: the key's limit against the budget of
    every shard (a warning), and where the run's in-flight window would start (a note:
    ``run.checks.account_window``, the balance read, or the last run's window from the job's
    journal)."""
    paid, todo = job.paid, job.rows
    options = paid.options
    read: checks.KeyCheck | None = None
    said = Said()
    if asked.offline or not options.connection.has_key:
        read = checks.KeyCheck(None, False, None, "offline: the account is not read")
    elif options.send is None:  # with a sender of one's own, no OpenRouter
        total = None if options.budget_usd is None else options.budget_usd * (asked.shards or 1)
        # the sync client runs in a thread: the event loop (a notebook's, a test server's) goes on
        read = await asyncio.to_thread(checks.key_check, options, total, asked.shards)
        if read.warning and total is not None:
            said = Said(warnings=(read.warning,))
    if todo and asked.batch is None:  # (a batch holds nothing in flight)
        builder = asked.request_builder(job.compiled.model, {}, identity=asked.response_cache)
        resumed = paid.replay.window_usd
        start = checks.account_window(options, read, todo, builder, job.prices, resumed_usd=resumed)
        said += Said(notes=(start.why,))
    return said


async def dry_run_job(job: OpenedJob, asked: GeneratePlan) -> RunResult:
    """The dry run of the opened ``job``: its start with the records the journal does not know
    counted at their worst case and what the key check says (warned here: a real run says its
    warnings in ``run_job``), then what the run would do (``_summary``)."""
    before = job.paid.count_unjournaled(job.before, job.prices, asked.max_tokens)
    before = before.saying(await _key_check(job, asked))
    for text in before.warnings:
        logging.getLogger(__name__).warning(text)
    return _summary(job, asked, before)

"""``generate(dry_run=True)``: what the run would do and cost, sending nothing.

``summarize_dry_run`` fills the summary with the worst case of every request to send (every
turn with ``turns="all"``) and the budget planner's expected cost, and says where the run's
in-flight window would start (``run.checks.account_window``); ``key_check`` looks at the key's limit
against the budget of every shard, and at the account's balance.
"""

from __future__ import annotations

import asyncio
from decimal import Decimal
from typing import Any

from openrouter_probe.errors import Message
from openrouter_probe.generation.plan import GeneratePlan
from openrouter_probe.run import checks
from openrouter_probe.run.books.turns import TurnBook
from openrouter_probe.run.config import JobOptions, Learned
from openrouter_probe.run.counts import AnswerLengths, useful_rows
from openrouter_probe.run.money.spend import Prices
from openrouter_probe.run.paid import PaidRun
from openrouter_probe.run.rows import PromptRow
from openrouter_probe.run.schedule.queues import unaffordable_shares
from openrouter_probe.run.send.request import RequestBuilder
from openrouter_probe.run.stop import StopReason
from openrouter_probe.run.summary import RunSummary, SummaryDraft

__all__ = ["key_check", "summarize_dry_run"]

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
    summary: SummaryDraft,
    every_shard: list[PromptRow],
    shard: tuple[int, int],
    prices: Prices,
    builder: RequestBuilder,
    book: TurnBook | None,
    samples: int = 1,
) -> None:
    """The dry run of a sharded job: each shard's rows and worst case, before resume (the other
    shards' turn by turn with ``--turns all`` are unknown: their turns files are elsewhere)."""
    from openrouter_probe.generation.prompts import shard_of
    from openrouter_probe.generation.shards import shard_shares, shard_shares_note

    def worst(part: list[PromptRow]) -> Decimal:
        return _worst_total(part, prices, builder, None)

    parts: list[list[PromptRow]] = [[] for _ in range(shard[1])]
    for row in every_shard:
        # a sample (ID#k) goes with its prompt's id, as the rows were sharded before sampling
        ident = row.id.rsplit("#", 1)[0] if samples > 1 else row.id
        parts[shard_of(ident, shard[1])].append(row)
    shares = shard_shares(parts, shard[0], None if book is not None else worst)
    summary.shard_shares = [s.to_dict() for s in shares]
    summary.notes.append(shard_shares_note(shares))


def _mix_shares(summary: SummaryDraft, todo: list[PromptRow], builder: RequestBuilder) -> None:
    """The sampling mix's draws over the rows to send, per dataset (what ``audit`` will count)."""
    from openrouter_probe.rules.sampling_mix import Shares

    shares = Shares()
    for row in todo:
        shares.add(row.dataset, builder.sampling_of(row))
    summary.notes.extend(f"drawn for the rows to send, {line}" for line in shares.lines())


def summarize_dry_run(
    summary: SummaryDraft,
    todo: list[PromptRow],
    prices: Prices,
    *,
    snap: Any,
    compiled: Any,
    options: JobOptions,
    learned: Learned,
    asked: GeneratePlan,
    book: TurnBook | None,
    every_shard: list[PromptRow] | None = None,
    lengths: AnswerLengths | None = None,
) -> RunSummary:
    """What the run would do, sending nothing: the worst case of every request (every turn with
    ``--turns all``), the expected cost; sharded, every shard's rows and worst case."""
    from openrouter_probe.analysis.budget import plan_budget

    budget, max_tokens, target = learned.cap_usd, asked.max_tokens, options.target_tokens
    # the provider block adds no prompt bytes; the row identity does, as in the real run
    builder = asked.request_builder(compiled.model, {}, identity=asked.response_cache)
    summary.stop_reason = StopReason.DRY_RUN
    worst_total = _worst_total(todo, prices, builder, book)
    summary.worst_case_usd = worst_total
    summary.not_sent = len(todo)
    if asked.shard is not None and every_shard:
        _shard_shares(summary, every_shard, asked.shard, prices, builder, book, asked.samples)
    if asked.mix is not None:
        _mix_shares(summary, todo, builder)
    if not todo:
        return summary.build()
    datasets = sorted({r.dataset for r in todo})
    requests = len(todo) if book is None else book.to_send(todo)
    wanted = max_tokens * requests
    if target is not None:
        wanted = min(wanted, target * len(datasets))
    prompt_avg = max(1, sum(r.prompt_size for r in todo) // len(todo) // _BYTES_PER_TOKEN)
    plan = plan_budget(
        snap,
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
        summary.shard_from = (
            f"shard {asked.shard[0]}/{asked.shard[1]} from the launcher ({asked.shard_source})"
        )
    summary.warnings.extend(
        unaffordable_shares(
            todo, builder=builder, prices=prices, budget_usd=budget, weights=learned.weights
        )
    )
    if budget is not None and asked.shards:
        summary.warnings.append(
            Message(
                "budget-per-shard",
                "{budget_usd=} is per shard: the {shards:d} shards may spend ${total:,.2f} on the "
                "key in all",
                budget_usd=budget,
                shards=asked.shards,
                total=budget * asked.shards,
            )
        )
    summary.expected_usd = figures.cost_usd
    summary.notes.extend(useful_rows(len(todo), figures.cost_usd, lengths or AnswerLengths()))
    summary.message = plan.headline if budget is not None else _no_budget(asked)
    return summary.build()


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


async def key_check(
    summary: SummaryDraft,
    paid: PaidRun,
    asked: GeneratePlan,
    todo: list[PromptRow],
    prices: Prices,
    model: str,
) -> None:
    """The dry run's look at the key and the account: the key's limit against the budget of
    every shard, and where the run's in-flight window would start (``run.checks.account_window``:
    the balance read, or the last run's window from ``paid``'s journal)."""
    options = paid.options
    read: checks.KeyCheck | None = None
    if asked.offline or not options.api_key:
        read = checks.KeyCheck(None, False, None, "offline: the account is not read")
    elif options.send is None:  # with a sender of one's own, no OpenRouter
        total = None if options.budget_usd is None else options.budget_usd * (asked.shards or 1)
        # the sync client runs in a thread: the event loop (a notebook's, a test server's) goes on
        read = await asyncio.to_thread(checks.key_check, options, total, asked.shards)
        if read.warning and total is not None:
            summary.warnings.append(read.warning)
    if todo and asked.batch is None:  # (a batch holds nothing in flight)
        builder = asked.request_builder(model, {}, identity=asked.response_cache)
        resumed = paid.replay.window_usd
        start = checks.account_window(options, read, todo, builder, prices, resumed_usd=resumed)
        summary.notes.append(start.why)

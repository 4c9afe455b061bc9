"""``generate``: read the prompts, the policy and the output so far; check; run; summarize.

Example (in a notebook, whose event loop is already running)::

    import openrouter_probe as orp

    summary = await orp.generate(
        "prompts.jsonl", policy="policies/kimi-k2.5.yaml", out="out.jsonl",
        budget_usd=100, concurrency=2000, max_tokens=4096, target_tokens="10M",
    )
    print(summary.render())
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from decimal import Decimal
from pathlib import Path
from typing import Any

from openrouter_probe.api.backoff import Backoff
from openrouter_probe.errors import ConfigError, Message
from openrouter_probe.generation.admission import (
    admitted_prices,
    batch_settings,
    model_endpoints,
    skip_unservable,
)
from openrouter_probe.generation.dry_run import key_check, summarize_dry_run
from openrouter_probe.generation.manifest import Inputs, SourceOptions, read_inputs
from openrouter_probe.generation.plan import GeneratePlan, parse_weights
from openrouter_probe.generation.prompts import PromptSet
from openrouter_probe.generation.sources import read_from_note
from openrouter_probe.run.books.turns import TurnBook, tool_rows, turns_path
from openrouter_probe.run.config import JobOptions, Progress
from openrouter_probe.run.paid import Job, open_run
from openrouter_probe.run.rows import PromptRow
from openrouter_probe.run.send.batch_plan import BatchOptions
from openrouter_probe.run.send.sender import Sender
from openrouter_probe.run.summary import RunSummary, SummaryDraft

__all__ = ["generate"]

log = logging.getLogger(__name__)


#: Skipped rows the warnings name one by one (``RunSummary.skipped_rows`` holds every one).
_SHOWN_SKIPPED = 10


def _policy(path: str | Path, snapshot: Any) -> tuple[Any, dict[str, Any], str]:
    """The compiled policy, its provider mapping exactly as the YAML holds it, and their hash."""
    from openrouter_probe.policy.compiled import compiled_from_document
    from openrouter_probe.policy.spec import read_yaml

    doc = read_yaml(path)
    compiled = compiled_from_document(doc, source=str(path))
    raw = doc["provider"]
    canonical = json.dumps({"model": compiled.model, "provider": raw}, sort_keys=True)
    return compiled, raw, "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


def _source_notes(summary: SummaryDraft, prompts: str | Path, snap: Any) -> None:
    """Say where the rows and the prices came from when it is not plain: the Parquet files a
    folder was read from (every ``*.parquet`` under it counts), the snapshot the endpoints and
    prices were read from (``snap``: ``None`` when live), as every command on one says it."""
    read_from = read_from_note(prompts)
    if read_from is not None:
        summary.notes.append(read_from)
    if snap is not None:
        summary.notes.append(f"endpoints and prices from a snapshot: {snap.provenance}")


def _sampling_note(summary: SummaryDraft, model: str, asked: GeneratePlan) -> None:
    """Say the sampling the model's card fixes and the run sends (``rules.sampling``)."""
    from openrouter_probe.rules.sampling import sampling_advice

    advice = sampling_advice(model)
    if advice is not None:
        note = advice.describe()
        if asked.temperature is not None:
            note += f"; this run sets temperature={asked.temperature:g}, which wins"
        summary.notes.append(note)


def _warn_duplicates(summary: SummaryDraft, prompts: str | Path, rows: PromptSet) -> None:
    summary.warnings.extend(rows.duplicate_lines()[:5])
    if len(rows.duplicates) > 5:
        summary.warnings.append(f"... and {len(rows.duplicates) - 5} more duplicate ids")
    summary.rows_skipped = len(rows.skipped)
    summary.skipped_rows = list(rows.skipped)
    summary.rows_ending_on_assistant = rows.ending_on_assistant
    shown = rows.skipped[:_SHOWN_SKIPPED]
    summary.warnings.extend(f"skipped, never sent: {why}" for why in shown)
    if len(rows.skipped) > len(shown):
        summary.warnings.append(
            f"... and {len(rows.skipped) - len(shown)} more rows skipped (the summary's "
            f"skipped_rows names all {len(rows.skipped)}, each with its line and reason)"
        )


def _turn_book(
    asked: GeneratePlan,
    options: JobOptions,
    todo: list[PromptRow],
    kept: dict[str, list[dict[str, Any]]],
    summary: SummaryDraft,
    inputs: Inputs | None = None,
) -> TurnBook | None:
    """``--turns all`` (or a manifest dataset's ``turns: all``): the rows that go turn by turn,
    each from its first missing turn; say what it counts and what it sends once."""
    if inputs is not None and inputs.turns:
        todo_all = [r for r in todo if inputs.turns_of(r.dataset, asked.turns) == "all"]
    else:
        todo_all = todo if asked.turns == "all" else []
    if asked.turns != "all" and not todo_all:
        waiting = sorted({r.id for r in todo} & kept.keys())
        if waiting:  # paid turns a turns="last" run would throw away
            shown = ", ".join(waiting[:5]) + (" ..." if len(waiting) > 5 else "")
            raise ConfigError(
                Message(
                    "turns-kept",
                    "{path:s} keeps turns of {count:d} unfinished row(s) that a {turns=all} run "
                    "paid for ({shown:s}): resume with {turns=all}, or delete that file to answer "
                    "those rows after their last message instead (the spend journal keeps "
                    "counting what they cost)",
                    path=str(turns_path(options.out)),
                    count=len(waiting),
                    shown=shown,
                )
            )
        return None
    book = TurnBook.start(options.out, todo_all, kept)
    summary.turns_to_send = book.to_send(todo)
    summary.turns_resumed = book.resumed
    summary.turns_file = str(book.path)
    tools = tool_rows(todo_all)
    if tools:
        shown = ", ".join(tools[:5]) + (f" and {len(tools) - 5} more" if len(tools) > 5 else "")
        summary.warnings.append(
            Message(
                "turns-tools-once",
                "{turns=all}: {count:d} row(s) hold tool messages or tool calls, sent once as "
                "with {turns=last} (a tool result in the prompts file answers the prompt file's "
                "call, not the model's): {shown:s}",
                count=len(tools),
                shown=shown,
            )
        )
    if book.dropped:
        summary.warnings.append(
            f"{book.path}: the kept turns of {len(book.dropped)} row(s) no longer fit their "
            f"messages (the prompts changed?): regenerated from their first turn: "
            + ", ".join(book.dropped[:5])
        )
    return book


def _truncated_rows(
    rows: PromptSet, out: str | Path, max_tokens: int
) -> tuple[list[PromptRow], list[str], dict[str, str]]:
    """``--redo-truncated``: the rows whose answer in ``out`` is the one cut at ``max_tokens``
    (a later answer supersedes it), each with the new limit; what to warn about them; and the
    dataset each cut record names (a dataset renamed since is counted where it was)."""
    from dataclasses import replace

    from openrouter_probe.generation.audit import merged_records
    from openrouter_probe.run.books.output import output_tokens_of

    records = [r for r in merged_records([out]) if r.get("status") == "truncated"]
    cut = {str(r["id"]): output_tokens_of(r) for r in records}
    recorded = {str(r["id"]): str(r.get("dataset") or "default") for r in records}
    todo = [
        replace(r, params={**r.params, "max_tokens": max_tokens}) if "max_tokens" in r.params else r
        for r in rows
        if r.id in cut
    ]
    warnings: list[str] = []
    longest = max((cut[r.id] for r in todo), default=0)
    if todo and max_tokens <= longest:
        warnings.append(
            Message(
                "redo-truncated-same-limit",
                "{redo_truncated=True}: {max_tokens=} is no more than the {longest:,} output "
                "tokens some were cut at: they may be cut again; raise it above {above:s}",
                max_tokens=max_tokens,
                longest=longest,
                above=Message("above", "{max_tokens=}", max_tokens=longest),
            )
        )
    return todo, warnings, recorded


async def generate(
    prompts: str | Path,
    *,
    policy: str | Path,
    out: str | Path,
    budget_usd: float | int | str | Decimal | None = None,
    concurrency: int = 256,
    max_tokens: int = 4096,
    target_tokens: int | str | None = None,
    stream: bool = False,
    temperature: float | None = None,
    reasoning_effort: str | None = None,
    reasoning_max_tokens: int | None = None,
    dry_run: bool = False,
    shard: str | tuple[int, int] | None = None,
    redo_failed: bool = False,
    redo_truncated: bool = False,
    lower_max_tokens: bool = False,
    weights: str | Mapping[str, float] | None = None,
    turns: str = "last",
    source: SourceOptions | None = None,
    max_wait_s: float = 60.0,
    snapshot: Any = None,
    offline: bool = False,
    api_key: str | None = None,
    base_url: str | None = None,
    attempts: int | None = None,
    read_timeout_s: float = 300.0,
    drain_timeout_s: float = 60.0,
    handle_signals: bool = False,
    progress: bool | Progress = False,
    send: Sender | None = None,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    clock: Callable[[], float] = time.monotonic,
    backoff: Backoff | None = None,
    batch: bool | BatchOptions = False,
    response_cache: bool = True,
) -> RunSummary:
    """Run ``prompts`` (a file, folder, ``hf:`` id or manifest) through ``policy`` into ``out``.

    Finished rows are skipped (resume); ``budget_usd`` caps the output's spend across runs, shared
    by ``weights``; ``target_tokens`` stops each dataset; ``turns``: ``"last"`` or ``"all"``;
    ``batch`` (``True`` or ``BatchOptions``) uses the Batch API; ``offline=True`` is the dry run
    on the bundled snapshot that touches no network (no key check); ``response_cache=False`` never
    asks OpenRouter's response cache; ``send``, ``sleep``, ``clock`` replace the transport, waits
    and time (docs/generate.md says every option and guarantee).
    Raises ``ConfigError``/``PolicyError`` before sending when the inputs are unusable."""
    # every keyword, by its name: the plan's fields are generate()'s keywords (a test holds them
    # equal), so the plan is built from them whole, in one place
    keywords = dict(locals())
    plan = GeneratePlan.of(keywords.pop("prompts"), **keywords)
    return await _run_job(plan)


async def _run_job(asked: GeneratePlan) -> RunSummary:
    """Read the prompts, open the output, check the policy against the endpoints now, then
    dry-run or send."""
    options, prompts, policy, snapshot = asked.options, asked.prompts, asked.policy, asked.snapshot
    redo, reading = asked.redo, asked.source
    inputs = read_inputs(prompts, turns=asked.turns, shard=asked.shard, options=reading)
    rows = inputs.prompts
    compiled, provider_raw, policy_hash = _policy(policy, snapshot)
    # a manifest's weights, unless --weights is given
    weights = parse_weights(
        asked.weights if asked.weights is not None else inputs.weights or None, rows.datasets
    )
    endpoints, snap = await model_endpoints(compiled.model, policy, snapshot, options)
    skip_unservable(rows, endpoints, snap, compiled, asked)  # after the weights: they name them
    options = dataclasses.replace(options, weights=weights)
    job = Job(model=compiled.model, sha256=policy_hash, label=str(policy))
    with open_run(options, redo_failed="failed" in redo, job=job) as paid:
        todo = [r for r in rows if r.id not in paid.state.finished]
        redone: list[str] = []
        if "truncated" in redo:  # only the rows cut at max_tokens, with the new limit
            todo, redone, recorded = _truncated_rows(rows, options.out, asked.max_tokens)
            paid.state.reopen((r.id, recorded[r.id]) for r in todo)
        per_dataset: dict[str, int] = {}
        for row in rows:
            per_dataset[row.dataset] = per_dataset.get(row.dataset, 0) + 1
        summary = paid.new_summary(
            datasets=per_dataset,
            policy=str(policy),
            model=compiled.model,
            rows_total=len(rows),
            rows_already_done=len(rows) - len(todo),
            rows_to_send=len(todo),
            duplicates=len(rows.duplicates),
            shards=asked.shards,
        )
        _warn_duplicates(summary, prompts, rows)
        _source_notes(summary, prompts, snap if snapshot is not None else None)
        _sampling_note(summary, compiled.model, asked)
        summary.warnings.extend(redone)
        book = _turn_book(asked, options, todo, paid.state.turns, summary, inputs)
        prices = admitted_prices(compiled, policy, endpoints, asked, summary)
        if asked.batch is not None:
            settings = batch_settings(compiled, policy, snap, prices, asked, options, snapshot)
            prices = settings.prices
            paid.options = options = dataclasses.replace(options, batch=settings)
        if asked.dry_run:
            paid.count_unjournaled(summary, prices, asked.max_tokens)
            await key_check(summary, paid, asked, todo, prices, compiled.model)
            for text in summary.warnings:  # a real run says them in PaidRun.run
                log.warning(text)
            return summarize_dry_run(
                summary,
                todo,
                prices,
                snap=snap,
                compiled=compiled,
                options=options,
                asked=asked,
                book=book,
                every_shard=rows.every_shard,
                lengths=paid.state.lengths,
            )
        return await paid.run(
            todo,
            builder=asked.request_builder(
                compiled.model, provider_raw, identity=asked.response_cache
            ),
            prices=prices,
            summary=summary,
            header={
                "policy": str(policy),
                "prompts": str(prompts),  # the export's dataset card names it
                **({"turns": "all"} if book is not None else {}),
                # keys status matches a shard's key to its journals by it
                **({"shard": f"{asked.shard[0]}/{asked.shard[1]}"} if asked.shard else {}),
            },
            turns=book,
        )

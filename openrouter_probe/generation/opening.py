"""Opening a ``generate`` job (``open_job``): read the prompts and the policy, fetch the
endpoints, open the output (``run.paid.open_run``: its lock, journal and finished rows), decide
the rows to send and what to say of them, and hand the run one value (``OpenedJob``) holding
everything ``run.paid.run_job`` (or the dry run) takes (``generation.job.generate`` is the
caller).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import secrets
from collections import Counter
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

from openrouter_probe.errors import ConfigError, Message, OptionError, Shown, braced
from openrouter_probe.generation.admission import (
    admitted_prices,
    batch_settings,
    model_endpoints,
    skip_unservable,
)
from openrouter_probe.generation.manifest import Inputs, read_inputs
from openrouter_probe.generation.plan import GeneratePlan
from openrouter_probe.generation.prompts import PromptSet, with_samples
from openrouter_probe.generation.sources import read_from_note
from openrouter_probe.run.books.turns import TurnBook, tool_rows, turns_path
from openrouter_probe.run.checks import key_budget
from openrouter_probe.run.config import Learned
from openrouter_probe.run.money.spend import Prices
from openrouter_probe.run.paid import Job, PaidRun, open_run

if TYPE_CHECKING:
    from openrouter_probe.generation.pilot import Pilot
from openrouter_probe.run.rows import PromptRow
from openrouter_probe.run.send.request import RequestBuilder
from openrouter_probe.run.start import RunStart, Said

__all__ = ["OpenedJob", "open_job", "parse_weights"]


@dataclass(frozen=True)
class OpenedJob:
    """A job opened: the output (``paid``, open until ``open_job``'s block ends), the rows to
    send, the request builder, the prices they are counted at, what the job starts from
    (``before``), the journal header's job fields, the turn book (``--turns all``), what it
    learned (the cap, the weights, the batch settings); and for the dry run, the endpoints'
    snapshot (``None``: live), the compiled policy and every shard's rows."""

    paid: PaidRun
    rows: list[PromptRow]
    builder: RequestBuilder | None  # None: a dry run (it sends nothing)
    prices: Prices
    before: RunStart
    header: dict[str, Any]
    turns: TurnBook | None
    learned: Learned
    snap: Any
    compiled: Any
    every_shard: list[PromptRow]
    pilot: Pilot | None = None  # ``pilot=N``: the first N rows of each dataset (``rows`` theirs)


#: Skipped rows the warnings name one by one (``RunResult.skipped_rows`` holds every one).
_SHOWN_SKIPPED = 10


def _policy(path: str | Path) -> tuple[Any, dict[str, Any], str]:
    """The compiled policy, its provider mapping exactly as the YAML holds it, and their hash."""
    from openrouter_probe.policy.compiled import compiled_from_document
    from openrouter_probe.policy.spec import read_yaml

    doc = read_yaml(path)
    compiled = compiled_from_document(doc, source=str(path))
    raw = doc["provider"]
    canonical = json.dumps({"model": compiled.model, "provider": raw}, sort_keys=True)
    return compiled, raw, "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


def _source_notes(prompts: str | Path, snap: Any) -> Said:
    """Say where the rows and the prices came from when it is not plain: the Parquet files a
    folder was read from (every ``*.parquet`` under it counts), the snapshot the endpoints and
    prices were read from (``snap``: ``None`` when live), as every command on one says it."""
    read_from = read_from_note(prompts)
    notes = [] if read_from is None else [read_from]
    if snap is not None:
        notes.append(f"endpoints and prices from a snapshot: {snap.provenance}")
    return Said(notes=tuple(notes))


def _sampling_note(model: str, asked: GeneratePlan) -> Said:
    """Say the sampling the model's card fixes and the run sends (``rules.sampling``)."""
    from openrouter_probe.rules.sampling import sampling_advice

    advice = sampling_advice(model)
    notes = []
    if advice is not None:
        note = advice.describe()
        if asked.temperature is not None:
            note += f"; this run sets temperature={asked.temperature:g}, which wins"
        notes.append(note)
    if asked.mix is not None:
        notes.append(asked.mix.describe())
    return Said(notes=tuple(notes))


def _journal_header(
    asked: GeneratePlan, book: TurnBook | None, cache_job: str, *, skipped: int
) -> dict[str, Any]:
    """What this run's header line in the spend journal says besides the run's own fields."""
    return {
        "policy": str(asked.policy),
        "prompts": str(asked.prompts),  # the export's dataset card names it
        "rows_skipped": skipped,  # rows of the prompts never sent (named)
        "cache_job": cache_job,  # the response cache's job: a resume keeps it
        **({"turns": "all"} if book is not None else {}),
        # keys status matches a shard's key to its journals by it
        **({"shard": f"{asked.shard[0]}/{asked.shard[1]}"} if asked.shard else {}),
        **(asked.journal_header or {}),  # a rank given whole (the datatrove step), its key
    }


def _cache_job(headers: list[dict[str, Any]]) -> str:
    """The job part of the response cache's identity (``run.send.request.row_session``): the salt
    the output's first run drew and wrote in its journal header, so that a resume (a new run of
    the same job) resends the same bytes and a fresh output of the same prompts is a new job;
    ``""`` for an output whose runs came before it (their rows' identity as it was)."""
    for header in headers:
        if isinstance(header.get("cache_job"), str):
            return str(header["cache_job"])
    return "" if headers else secrets.token_hex(8)


def _warn_duplicates(rows: PromptSet) -> Said:
    """What the rows read say: their duplicate ids, the rows skipped (the first few), notes."""
    warnings = [
        f"{rows.path}:{again}: id {ident!r} already on line {first}; sent once"
        for ident, first, again in rows.duplicates[:5]
    ]
    if len(rows.duplicates) > 5:
        warnings.append(f"... and {len(rows.duplicates) - 5} more duplicate ids")
    shown = rows.skipped[:_SHOWN_SKIPPED]
    warnings.extend(f"skipped, never sent: {why}" for why in shown)
    if len(rows.skipped) > len(shown):
        warnings.append(
            f"... and {len(rows.skipped) - len(shown)} more rows skipped (the summary's "
            f"skipped_rows names all {len(rows.skipped)}, each with its line and reason)"
        )
    return Said(notes=tuple(rows.notes), warnings=tuple(warnings))


def _turn_book(
    asked: GeneratePlan,
    todo: list[PromptRow],
    kept: dict[str, list[dict[str, Any]]],
    inputs: Inputs | None = None,
    *,
    model: str,
) -> tuple[TurnBook | None, Said]:
    """``--turns all`` (or a manifest dataset's ``turns: all``): the rows that go turn by turn,
    each from its first missing turn, earlier turns' reasoning sent back if ``model`` reads it;
    and what to say of what it counts and what it sends once."""
    if inputs is not None and inputs.turns:
        todo_all = [r for r in todo if inputs.turns.get(r.dataset, asked.turns) == "all"]
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
                    path=str(turns_path(asked.run.output)),
                    count=len(waiting),
                    shown=shown,
                )
            )
        return None, Said()
    from openrouter_probe.rules.sampling import history_reasoning

    back, why = history_reasoning(model)
    book = TurnBook.start(asked.run.output, todo_all, kept, reasoning_back=back)
    note = (
        f"turns: earlier turns' reasoning {'goes back' if back else 'is not sent back'} in each "
        f"request's history ({model}: {why})"
    )
    warnings: list[str] = []
    tools = tool_rows(todo_all)
    if tools:
        shown = ", ".join(tools[:5]) + (f" and {len(tools) - 5} more" if len(tools) > 5 else "")
        warnings.append(
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
        warnings.append(
            f"{book.path}: the kept turns of {len(book.dropped)} row(s) no longer fit their "
            f"messages (the prompts changed?): regenerated from their first turn: "
            + ", ".join(book.dropped[:5])
        )
    return book, Said(notes=(note,), warnings=tuple(warnings))


def _rows_counted(rows: PromptSet, todo: list[PromptRow]) -> dict[str, Any]:
    """What the run starts from of the rows read: how many, done before, to send, skipped."""
    return {
        "rows_total": len(rows),
        "rows_already_done": len(rows) - len(todo),
        "rows_to_send": len(todo),
        "duplicates": len(rows.duplicates),
        "rows_skipped": len(rows.skipped),
        "skipped_rows": rows.skipped,
        "rows_ending_on_assistant": rows.ending_on_assistant,
    }


def _turns_counted(book: TurnBook, todo: list[PromptRow]) -> dict[str, Any]:
    """What the run starts from of ``book``: the turns to send, those kept, its file."""
    return {
        "turns_to_send": book.to_send(todo),
        "turns_resumed": book.resumed,
        "turns_file": str(book.path),
    }


async def _capped(asked: GeneratePlan, spent: Decimal) -> Decimal | None:
    """The run's cap: the plan's; with ``budget_usd="key"``, a paid run's is what the output
    spent before plus what the key's limit has left (or refused)."""
    if asked.budget_from_key and not asked.dry_run:
        return await asyncio.to_thread(key_budget, asked.run, spent)
    return asked.run.budget_usd


def _check_one_source(headers: list[dict[str, Any]], prompts: str | Path, out: Path) -> None:
    """Refuse a second prompts source run into an output an earlier run wrote from another:
    its rows would be appended to the first's, and the counts mixed. The same file named
    another way (relative, absolute) is the same; one no longer found here cannot be told."""

    def where(spec: str) -> str | None:
        path = Path(spec)
        return str(path.resolve()) if path.exists() else (spec if spec.startswith("hf:") else None)

    mine = where(str(prompts))
    for header in headers:
        earlier = header.get("prompts")
        theirs = where(earlier) if isinstance(earlier, str) else None
        if mine is not None and theirs is not None and theirs != mine:
            raise ConfigError(
                Message(
                    "out-of-another-source",
                    "{out_path:s} holds the rows of {earlier:s}; {prompts:s} is another source: "
                    "give {out} another file (or merge the sources into one file or manifest)",
                    out_path=str(out),
                    earlier=str(earlier),
                    prompts=str(prompts),
                )
            )


@contextlib.asynccontextmanager
async def open_job(asked: GeneratePlan) -> AsyncIterator[OpenedJob]:
    """Read the prompts, check the policy against the endpoints now, open the output (held until
    the block ends) and yield what the run takes (``OpenedJob``)."""
    options, prompts, policy, snapshot = asked.run, asked.prompts, asked.policy, asked.snapshot
    redo = asked.redo
    inputs = read_inputs(prompts, turns=asked.turns, shard=asked.shard, options=asked.source)
    rows = with_samples(inputs.prompts, asked.samples)
    compiled, provider_raw, policy_hash = _policy(policy)
    # a manifest's weights, unless --weights is given
    weights = parse_weights(
        asked.weights if asked.weights is not None else inputs.weights or None, rows.datasets
    )
    endpoints, snap = await model_endpoints(compiled.model, asked)
    skip_unservable(rows, endpoints, snap, compiled, asked)  # after the weights: they name them
    job = Job(model=compiled.model, sha256=policy_hash, label=str(policy))
    take_up = asked.batch is not None and not asked.batch.abandon
    with open_run(options, redo_failed="failed" in redo, job=job, take_up_batches=take_up) as paid:
        _check_one_source(paid.replay.headers, prompts, options.output)
        cap = await _capped(asked, paid.spent_before_usd)
        todo = [r for r in rows if r.id not in paid.state.finished]
        redone: list[str] = []
        recorded: dict[str, str] = {}
        if "truncated" in redo:  # only the rows cut at max_tokens, with the new limit
            from openrouter_probe.generation.records import truncated_rows

            todo, redone, recorded = truncated_rows(rows, options.output, asked.max_tokens)
        counted = _rows_counted(rows, todo)
        pilot: Pilot | None = None
        if options.pilot is not None:  # the first rows of each dataset; the rest wait for a rerun
            from openrouter_probe.generation.pilot import Pilot

            pilot, todo = Pilot.of(rows, options.pilot, todo)
            counted["rows_to_send"] = len(todo)
        if recorded:  # a redone row is not finished until answered again: those this run sends
            paid.state.reopen((r.id, recorded[r.id]) for r in todo)
        said = (
            _warn_duplicates(rows)
            + _source_notes(prompts, snap if snapshot is not None else None)
            + _sampling_note(compiled.model, asked)
            + Said(warnings=tuple(redone))
        )
        book, turns_said = _turn_book(asked, todo, paid.state.turns, inputs, model=compiled.model)
        prices, lint = admitted_prices(compiled, endpoints, asked)
        before = RunStart.opened(
            paid.held,
            datasets=Counter(row.dataset for row in rows),
            said=said + turns_said + lint,
            policy=str(policy),
            model=compiled.model,
            shards=asked.shards,
            budget_usd=cap,
            **counted,
            **(_turns_counted(book, todo) if book is not None else {}),
        )
        settings = batch_settings(compiled, snap, prices, asked)
        prices = prices if settings is None else settings.prices
        learned = Learned(cap_usd=cap, weights=weights, batch=settings)  # beside the plan
        cache_job = "" if asked.dry_run else _cache_job(paid.replay.headers)
        yield OpenedJob(
            paid=paid,
            rows=todo,
            builder=None
            if asked.dry_run
            else asked.request_builder(
                compiled.model, provider_raw, identity=asked.response_cache, job=cache_job
            ),
            prices=prices,
            before=before,
            header=_journal_header(asked, book, cache_job, skipped=len(rows.skipped)),
            turns=book,
            learned=learned,
            snap=snap,
            compiled=compiled,
            every_shard=rows.every_shard,
            pilot=pilot,
        )


def parse_weights(
    weights: str | Mapping[str, float] | None, datasets: list[str]
) -> dict[str, float]:
    """``--weights B3=2,B4=1`` (or a mapping) checked against the prompts' datasets: each share
    of the cap is its weight over the sum (a dataset not named weighs 1)."""
    if weights is None:
        return {}
    if isinstance(weights, str):
        pairs: dict[str, Any] = {}
        for item in filter(None, (part.strip() for part in weights.split(","))):
            name, sep, value = item.partition("=")
            if not sep or not name.strip():
                raise ConfigError(
                    Message(
                        "weights-form",
                        "{weights=}: give DATASET=WEIGHT, e.g. B3=2,B4=1",
                        weights=item,
                    )
                )
            pairs[name.strip()] = value.strip()
    else:
        pairs = dict(weights)
    out: dict[str, float] = {}
    for name, value in pairs.items():
        if name not in datasets:
            known = braced(", ".join(datasets) or "none")
            raise OptionError(
                f"{{weights=}}: no such dataset in the prompts (they are: {known})", weights=name
            )
        try:
            weight = float(value)
        except (TypeError, ValueError):
            weight = -1.0
        if not weight > 0 or weight == float("inf"):
            raise ConfigError(
                Message(
                    "weight-not-positive",
                    "{weights=}: a weight is a number above 0, e.g. 2",
                    weights=Shown(f"{name}={value}"),
                )
            )
        out[name] = weight
    return out

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
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

from openrouter_probe.api.backoff import Backoff
from openrouter_probe.api.completion import RESPONSE_CACHE_TTL_S
from openrouter_probe.api.schema import Endpoint
from openrouter_probe.errors import APIError, ConfigError, NoRouteError, OptionError, PolicyError
from openrouter_probe.generation.manifest import Inputs, SourceOptions, read_inputs
from openrouter_probe.generation.prompts import PromptSet, parse_shard
from openrouter_probe.rules.quantities import parse_token_count
from openrouter_probe.run.batch_plan import BatchOptions
from openrouter_probe.run.config import JobOptions, Progress
from openrouter_probe.run.paid import Job, endpoints_now, key_warning, open_run
from openrouter_probe.run.queues import unaffordable_shares
from openrouter_probe.run.request import RequestBuilder
from openrouter_probe.run.rows import PromptRow
from openrouter_probe.run.sender import Sender
from openrouter_probe.run.spend import Prices, worst_case_prices
from openrouter_probe.run.summary import RunSummary
from openrouter_probe.run.turns import TURNS_MODES, TurnBook, tool_rows, turns_path

__all__ = ["REASONING_EFFORTS", "generate"]

log = logging.getLogger(__name__)

REASONING_EFFORTS = ("max", "xhigh", "high", "medium", "low", "minimal", "none")
#: Bytes per token assumed for the dry run's *expected* prompt size (the cap uses a strict bound).
_BYTES_PER_TOKEN = 4
#: Skipped rows the warnings name one by one (``RunSummary.skipped_rows`` holds every one).
_SHOWN_SKIPPED = 10
#: How long a row's retries may run in batch mode: a batch may take 24 h, and a retry another.
_BATCH_RETRY_WINDOW_S = 3 * 24 * 3600.0


def _policy(path: str | Path, snapshot: Any) -> tuple[Any, dict[str, Any], str]:
    """The compiled policy, its provider mapping exactly as the YAML holds it, and their hash."""
    from openrouter_probe.policy.compiled import compiled_from_document
    from openrouter_probe.policy.spec import read_yaml, snapshot_args

    doc = read_yaml(path)
    args = snapshot_args(snapshot=snapshot)  # a command an error suggests is offline if the run is
    compiled = compiled_from_document(doc, source=str(path), snapshot_args=args)
    raw = doc["provider"]
    canonical = json.dumps({"model": compiled.model, "provider": raw}, sort_keys=True)
    return compiled, raw, "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


def _reasoning(effort: str | None, max_tokens: int | None) -> dict[str, Any] | None:
    if effort is not None and max_tokens is not None:
        raise OptionError(
            "give {reasoning_effort} or {reasoning_max_tokens}, not both",
            reasoning_effort=effort,
            reasoning_max_tokens=max_tokens,
        )
    if effort is not None:
        if effort not in REASONING_EFFORTS:
            raise OptionError(
                f"{{reasoning_effort=}}: use one of {', '.join(REASONING_EFFORTS)}",
                reasoning_effort=effort,
            )
        return {"effort": effort}
    if max_tokens is not None:
        return {"max_tokens": max_tokens}
    return None


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
                raise ConfigError(f"weights={item!r}: give DATASET=WEIGHT, e.g. B3=2,B4=1")
            pairs[name.strip()] = value.strip()
    else:
        pairs = dict(weights)
    out: dict[str, float] = {}
    for name, value in pairs.items():
        if name not in datasets:
            known = (", ".join(datasets) or "none").replace("{", "{{").replace("}", "}}")
            raise OptionError(
                f"{{weights=}}: no such dataset in the prompts (they are: {known})", weights=name
            )
        try:
            weight = float(value)
        except (TypeError, ValueError):
            weight = -1.0
        if not weight > 0 or weight == float("inf"):
            raise ConfigError(f"weights={name}={value}: a weight is a number above 0, e.g. 2")
        out[name] = weight
    return out


@dataclass(frozen=True)
class _Asked:
    """What every request of ``generate``'s run asks for, and how its prompts are read (how the
    run sends and spends is its ``JobOptions``)."""

    max_tokens: int
    stream: bool
    temperature: float | None
    reasoning: dict[str, Any] | None
    weights: Mapping[str, float] | str | None = None
    shard: tuple[int, int] | None = None
    #: ``shard="auto"``: the launcher's variables that gave the shard (said in the dry run)
    shard_source: str = ""
    turns: str = "last"
    #: ``--batch``: the batch sender's size, live batches, first poll interval, ``--abandon``
    #: (None: sync)
    batch: dict[str, Any] | None = None

    @property
    def shards(self) -> int | None:
        """How many shards the prompts are split into (``None``: not sharded)."""
        return None if self.shard is None else self.shard[1]

    @property
    def parameters(self) -> set[str]:
        """The request parameters an endpoint must support (``require_parameters``)."""
        named = {"max_tokens"} | ({"temperature"} if self.temperature is not None else set())
        return named | ({"reasoning"} if self.reasoning is not None else set())


def _ask(
    max_tokens: int,
    *,
    stream: bool,
    temperature: float | None,
    reasoning: dict[str, Any] | None,
    weights: str | Mapping[str, float] | None,
    shard: str | tuple[int, int] | None,
    turns: str = "last",
) -> _Asked:
    from openrouter_probe.rules.quantities import whole_number

    if turns not in TURNS_MODES:
        raise ConfigError(
            f"turns={turns!r}: use 'last' (answer after the last message) or 'all' (regenerate "
            "every assistant turn)"
        )
    max_tokens = whole_number(max_tokens, "max_tokens")
    _check_sampling(max_tokens, temperature, reasoning)
    source = ""
    if isinstance(shard, str) and shard.strip() == "auto":
        from openrouter_probe.generation.shards import shard_from_launcher

        launcher = shard_from_launcher()
        shard, source = launcher.pair, launcher.source
    return _Asked(
        max_tokens=max_tokens,
        stream=stream,
        temperature=temperature,
        reasoning=reasoning,
        weights=weights,
        shard=parse_shard(shard) if isinstance(shard, str) else shard,
        shard_source=source,
        turns=turns,
    )


def _check_sampling(
    max_tokens: int, temperature: float | None, reasoning: dict[str, Any] | None
) -> None:
    """Refuse what OpenRouter would refuse or the run could not use: a temperature outside
    [0, 2] (or not a number), a reasoning budget that leaves no room for the answer."""
    if temperature is not None and (
        isinstance(temperature, bool)
        or not isinstance(temperature, int | float)
        or not 0 <= temperature <= 2
    ):
        raise OptionError(
            "{temperature=}: a number from 0 to 2 (OpenRouter's range)", temperature=temperature
        )
    budget = (reasoning or {}).get("max_tokens")
    if budget is not None and budget >= max_tokens:
        raise OptionError(
            "{reasoning_max_tokens=} leaves no room for the answer within {max_tokens=} "
            "(reasoning counts within it): lower the first or raise the second",
            reasoning_max_tokens=budget,
            max_tokens=max_tokens,
        )


def _builder(
    asked: _Asked, model: str, provider_raw: Any, *, identity: bool = False
) -> RequestBuilder:
    """What every request of the run shares: the policy's model and provider block, byte for
    byte, the sampling the run asked for and what the model's card fixes (``rules.sampling``);
    ``identity``: each row's ``session_id`` (the response cache's rows kept apart)."""
    from openrouter_probe.rules.sampling import sampling_advice

    return RequestBuilder(
        model=model,
        provider_json=json.dumps(provider_raw, ensure_ascii=False, separators=(",", ":")),
        max_tokens=asked.max_tokens,
        stream=asked.stream,
        temperature=asked.temperature,
        reasoning=asked.reasoning,
        advice=sampling_advice(model),
        identity=identity,
    )


def _cached(options: JobOptions) -> bool:
    """Whether the run asks OpenRouter's response cache (then each row carries its identity)."""
    return options.response_cache_ttl_s is not None


def _sampling_note(summary: RunSummary, model: str, asked: _Asked) -> None:
    """Say the sampling the model's card fixes and the run sends (``rules.sampling``)."""
    from openrouter_probe.rules.sampling import sampling_advice

    advice = sampling_advice(model)
    if advice is not None:
        note = advice.describe()
        if asked.temperature is not None:
            note += f"; this run sets temperature={asked.temperature:g}, which wins"
        summary.notes.append(note)


def _warn_duplicates(summary: RunSummary, prompts: str | Path, rows: PromptSet) -> None:
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


def _skip_unservable(
    rows: PromptSet, endpoints: list[Endpoint], snap: Any, compiled: Any, asked: _Asked
) -> None:
    """Take the rows no admitted endpoint can serve (longer than every context, an image the
    model cannot take) out of ``rows``: skipped with their line and why, counted; the others go."""
    from openrouter_probe.generation.fit import input_modalities, unservable

    found = unservable(
        rows.rows,
        endpoints=endpoints,
        provider=compiled.provider,
        parameters=asked.parameters,
        max_tokens=asked.max_tokens,
        input_modalities=input_modalities(snap),
        model=compiled.model,
    )
    if found:
        rows.drop({row.id: why for row, why in found})


def _admitted_prices(
    compiled: Any,
    policy: str | Path,
    endpoints: list[Endpoint],
    asked: _Asked,
    summary: RunSummary,
) -> Prices:
    """The start-up check: the policy against the endpoints serving the model now; return the
    worst-case prices of what it admits for any request of the run (the cap's prices): a row with
    its own ``max_tokens`` or parameters may be routed where the run's own parameters are not."""
    from openrouter_probe.policy.lint import lint_block
    from openrouter_probe.rules.routing import RequestParams, route

    decision = route(
        compiled.provider,
        endpoints,
        RequestParams(max_tokens=asked.max_tokens, parameters=_sent_parameters(compiled, asked)),
    )
    if not decision.admitted:
        raise PolicyError(_admits_none(compiled, endpoints, asked), source=str(policy))
    for finding in lint_block(compiled.provider, endpoints):
        if finding.loc.startswith("provider.order") and finding.code in (
            "no-match",
            "order-excluded",
        ):
            summary.warnings.append(f"{policy}: {finding.loc}: {finding.message}")
    anything = route(compiled.provider, endpoints, RequestParams())
    try:
        return worst_case_prices(anything.admitted)
    except ValueError as exc:
        raise PolicyError(f"{exc}; the spend cap needs prices", source=str(policy)) from exc


def _sent_parameters(compiled: Any, asked: _Asked) -> frozenset[str]:
    """The parameters every request sends: the run's, and the sampling its model card fixes
    (``require_parameters`` routes only to endpoints that take them all)."""
    from openrouter_probe.rules.sampling import sampling_advice

    advice = sampling_advice(compiled.model)
    return frozenset(asked.parameters) | frozenset(advice.names if advice is not None else ())


def _admits_none(compiled: Any, endpoints: list[Endpoint], asked: _Asked) -> str:
    """Why no endpoint would serve the run's requests, pointing at the fix: a ``max_tokens``
    above the output limit of every endpoint the policy admits is lowered, not re-compiled."""
    from openrouter_probe.rules.routing import RequestParams, route

    head = f"admits none of the {len(endpoints)} endpoints serving {compiled.model} now"
    params = _sent_parameters(compiled, asked)
    loose = route(compiled.provider, endpoints, RequestParams(parameters=params)).admitted
    limits = [e.max_completion_tokens for e in loose]
    if loose and None not in limits:
        largest = max(limit for limit in limits if limit is not None)
        fits = route(
            compiled.provider, endpoints, RequestParams(max_tokens=largest, parameters=params)
        )
        if fits.admitted:
            takers = ", ".join(e.tag for e in fits.admitted)
            return (
                f"{head} with max_tokens={asked.max_tokens}: above the output limit of each of "
                f"the {len(loose)} it admits. Lower it to max_tokens={largest} or less, "
                f"the largest they take ({takers})"
            )
    return (
        f"{head} (with max_tokens={asked.max_tokens}); every request would fail with 404. "
        "Re-compile the policy against a fresh snapshot (`openrouter-probe policy compile`)"
    )


def _worst_total(
    todo: list[PromptRow], prices: Prices, builder: RequestBuilder, book: TurnBook | None
) -> Decimal:
    """The worst case of every request to send: a row's, or each of its turns' (the answers of
    earlier turns in its prompt at their ``max_tokens`` each, the tokens the model wrote them in),
    each with the room the run reserves for output past ``max_tokens`` (``run.overshoot``)."""
    from openrouter_probe.run.overshoot import Overshoot

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
    summary: RunSummary,
    every_shard: list[PromptRow],
    shard: tuple[int, int],
    prices: Prices,
    builder: RequestBuilder,
    book: TurnBook | None,
) -> None:
    """The dry run of a sharded job: each shard's rows and worst case, before resume (the other
    shards' turn by turn with ``--turns all`` are unknown: their turns files are elsewhere)."""
    from openrouter_probe.generation.shards import shard_shares, shard_shares_note

    def worst(part: list[PromptRow]) -> Decimal:
        return _worst_total(part, prices, builder, None)

    shares = shard_shares(every_shard, shard, None if book is not None else worst)
    summary.shard_shares = [s.to_dict() for s in shares]
    summary.notes.append(shard_shares_note(shares))


def _dry_run(
    summary: RunSummary,
    todo: list[PromptRow],
    prices: Prices,
    *,
    snap: Any,
    compiled: Any,
    options: JobOptions,
    asked: _Asked,
    book: TurnBook | None,
    every_shard: list[PromptRow] | None = None,
) -> RunSummary:
    """What the run would do, sending nothing: the worst case of every request (every turn with
    ``--turns all``), the expected cost; sharded, every shard's rows and worst case."""
    from openrouter_probe.analysis.budget import plan_budget

    budget, max_tokens, target = options.budget_usd, asked.max_tokens, options.target_tokens
    # the provider block adds no prompt bytes; the row identity does, as in the real run
    builder = _builder(asked, compiled.model, {}, identity=_cached(options))
    summary.stop_reason = "dry-run"
    worst_total = _worst_total(todo, prices, builder, book)
    summary.worst_case_usd = worst_total
    summary.not_sent = len(todo)
    if asked.shard is not None and every_shard:
        _shard_shares(summary, every_shard, asked.shard, prices, builder, book)
    if not todo:
        return summary
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
            todo, builder=builder, prices=prices, budget_usd=budget, weights=options.weights
        )
    )
    if budget is not None and asked.shards:
        summary.warnings.append(
            f"budget_usd={budget} is per shard: the {asked.shards} shards may spend "
            f"${budget * asked.shards:,.2f} on the key in all"
        )
    summary.expected_usd = figures.cost_usd
    summary.message = (
        plan.headline
        if budget is not None
        else "no budget_usd: nothing would cap the real run's spend; give one to cap it"
    )
    return summary


def _turn_book(
    asked: _Asked,
    options: JobOptions,
    todo: list[PromptRow],
    kept: dict[str, list[dict[str, Any]]],
    summary: RunSummary,
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
                f"{turns_path(options.out)} keeps turns of {len(waiting)} unfinished row(s) "
                f'that a turns="all" run paid for ({shown}): resume with turns="all", or '
                "delete that file to answer those rows after their last message instead "
                "(the spend journal keeps counting what they cost)"
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
            f'turns="all": {len(tools)} row(s) hold tool messages or tool calls, sent once as '
            'with turns="last" (a tool result in the prompts file answers the prompt file\'s '
            f"call, not the model's): {shown}"
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
) -> tuple[list[PromptRow], list[str]]:
    """``--redo-truncated``: the rows whose answer in ``out`` is the one cut at ``max_tokens``
    (a later answer supersedes it), each with the new limit; and what to warn about them."""
    from dataclasses import replace

    from openrouter_probe.generation.audit import merged_records
    from openrouter_probe.run.output import output_tokens_of

    cut = {str(r["id"]): output_tokens_of(r) for r in merged_records([out]) if r.get("status") == "truncated"}  # fmt: skip
    todo = [
        replace(r, params={**r.params, "max_tokens": max_tokens}) if "max_tokens" in r.params else r
        for r in rows
        if r.id in cut
    ]
    warnings = []
    longest = max((cut[r.id] for r in todo), default=0)
    if todo and max_tokens <= longest:
        warnings.append(
            f"redo_truncated=True: max_tokens={max_tokens} is no more than the {longest:,} output "
            f"tokens some were cut at: they may be cut again; raise it above max_tokens={longest}"
        )
    return todo, warnings


async def _endpoints(
    model: str, policy: str | Path, snapshot: Any, options: JobOptions
) -> tuple[list[Any], Any]:
    """The model's endpoints now; a model OpenRouter does not know names the policy it came from."""
    try:
        # the sync client runs in a thread: the event loop (a notebook's, a test server's) goes on
        return await asyncio.to_thread(
            endpoints_now, model, snapshot, api_key=options.api_key, base_url=options.base_url
        )
    except NoRouteError as exc:
        raise PolicyError(
            f"its model: {exc.message.rstrip('.')}; fix `model` in the policy's spec and "
            "re-compile it",
            source=str(policy),
        ) from exc


async def _key_check(summary: RunSummary, options: JobOptions, asked: _Asked) -> None:
    """The dry run's look at the key: its limit against the budget of every shard."""
    if not options.api_key or options.send is not None or options.budget_usd is None:
        return
    total = options.budget_usd * (asked.shards or 1)
    # the sync client runs in a thread: the event loop (a notebook's, a test server's) goes on
    warning = await asyncio.to_thread(key_warning, options, total, asked.shards)
    if warning:
        summary.warnings.append(warning)


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
    ``batch`` (``True`` or ``BatchOptions``) uses the Batch API; ``response_cache=False`` never
    asks OpenRouter's response cache; ``send``, ``sleep``, ``clock`` replace the transport, waits
    and time (docs/generate.md says every option and guarantee).
    Raises ``ConfigError``/``PolicyError`` before sending when the inputs are unusable."""
    reasoning = _reasoning(reasoning_effort, reasoning_max_tokens)
    asked = _ask(max_tokens, stream=stream, temperature=temperature, reasoning=reasoning,
                 weights=weights, shard=shard, turns=turns)  # fmt: skip
    target = (
        None if target_tokens is None else parse_token_count(target_tokens, what="target_tokens")
    )
    options = JobOptions.resolve(
        command="generate",
        out=out,
        inputs=(prompts, policy),
        budget_usd=budget_usd,
        concurrency=concurrency,
        api_key=api_key,
        base_url=base_url,
        need_key=not dry_run,
        attempts=attempts,
        read_timeout_s=read_timeout_s,
        drain_timeout_s=drain_timeout_s,
        handle_signals=handle_signals,
        progress=progress,
        send=send,
        sleep=sleep,
        clock=clock,
        backoff=backoff,
        max_wait_s=max_wait_s,
        target_tokens=target,
        lower_max_tokens=lower_max_tokens,
        response_cache_ttl_s=RESPONSE_CACHE_TTL_S if response_cache else None,
    )
    redo = ("failed",) * redo_failed + ("truncated",) * redo_truncated
    asked, options = _batch_mode(asked, options, batch)
    return await _run_job(options, prompts, policy, asked, snapshot, dry_run, redo, source)


def _batch_mode(
    asked: _Asked, options: JobOptions, batch: bool | BatchOptions
) -> tuple[_Asked, JobOptions]:
    """Batch mode's options, checked; the run's options as batch mode wants them (unchanged
    without ``batch``)."""
    from openrouter_probe.rules.quantities import whole_number

    if batch is False:
        return asked, options
    if asked.stream:
        raise OptionError(
            "{stream=True} and {batch=True} exclude each other: a batch's answers come back "
            "whole, never streamed",
            stream=True,
            batch=True,
        )
    chosen = BatchOptions() if batch is True else batch
    size = whole_number(chosen.size, "batch size")
    asked = dataclasses.replace(
        asked,
        batch={
            "size": size,
            "live": chosen.live,
            "poll_s": chosen.poll_s,
            "abandon": chosen.abandon,
        },
    )
    # no cancel route: the first Ctrl-C stops submitting and leaves the batches running;
    # a line retried in a later batch waits for a batch (hours), not 10 minutes
    timeout = max(options.backoff.timeout_s or 0.0, _BATCH_RETRY_WINDOW_S)
    options = dataclasses.replace(
        options,
        drain_timeout_s=min(options.drain_timeout_s, 1.0),
        backoff=dataclasses.replace(options.backoff, timeout_s=timeout),
    )
    return asked, options


def _batch_listing(snap: Any, model: str, options: JobOptions) -> list[Endpoint]:
    """The model's ``:batch`` endpoints: the snapshot's, or (a live one without them) asked now;
    empty when unknown."""
    if snap is not None and snap.batch is not None:
        return list(snap.batch_endpoints)
    if snap is not None and snap.source != "api":
        return []
    from openrouter_probe.api.client import Client
    from openrouter_probe.rules.batch import batch_model_id

    try:
        with Client(api_key=options.api_key, base_url=options.base_url) as client:
            return list(client.endpoints(batch_model_id(model), diagnose=False).endpoints)
    except APIError as exc:
        log.warning("%s: %s", batch_model_id(model), exc)
        return []


def _batch_settings(
    compiled: Any,
    policy: str | Path,
    snap: Any,
    prices: Prices,
    asked: _Asked,
    options: JobOptions,
    snapshot: Any = None,
) -> Any:
    """The batch sender's settings: the policy's batch block and the ``:batch`` row's prices
    (the sync ones, which are higher, where the listing is unknown)."""
    from openrouter_probe.run.batch_plan import BatchSettings

    assert asked.batch is not None
    provider = compiled.batch_provider()
    if provider is None or not provider.get("only"):
        note = (compiled.batch or {}).get("note") or "no :batch endpoint admitted"
        raise PolicyError(
            f"batch=True: the policy's batch block names no endpoint ({note}); run without "
            "batch=, or re-compile the policy from a snapshot that lists one",
            source=str(policy),
        )
    batch_prices = prices
    listed = _batch_listing(snap, compiled.model, options)
    chosen = [e for e in listed if e.tag in provider["only"]]
    if chosen:
        batch_prices = worst_case_prices(chosen)
    else:
        log.warning(
            "batch=True: no :batch price known for %s; each batch is reserved at the sync price",
            ", ".join(provider["only"]),
        )
    return BatchSettings(
        model=compiled.model,
        provider=dict(provider),
        prices=batch_prices,
        size=asked.batch["size"],
        live=asked.batch["live"],
        poll_s=asked.batch["poll_s"],
        poll_max_s=max(120.0, asked.batch["poll_s"]),
        abandon=asked.batch["abandon"],
        **_batch_history(snapshot, snap),
    )


def _batch_history(snapshot: Any, snap: Any) -> dict[str, Any]:
    """Where the run records its accepted submits: the snapshot file it was given (a path), or
    nowhere, with why when the user would look for it there (the bundled snapshot)."""
    if isinstance(snapshot, str | Path) and snapshot != "bundled":
        return {"history": Path(snapshot)}
    if snapshot == "bundled" or getattr(snap, "source", None) == "bundled":
        return {
            "history_off": "the bundled snapshot (package data) does not record it: save one "
            "(`openrouter-probe endpoints MODEL --save PATH`) and pass --snapshot PATH "
            "(snapshot=PATH) to keep a batch history"
        }
    return {}  # a live probe, or a Snapshot object: no file to record it in


async def _run_job(
    options: JobOptions,
    prompts: str | Path,
    policy: str | Path,
    asked: _Asked,
    snapshot: Any,
    dry_run: bool,
    redo: tuple[str, ...],
    reading: SourceOptions | None = None,
) -> RunSummary:
    """Read the prompts, open the output, check the policy against the endpoints now, then
    dry-run or send."""
    inputs = read_inputs(prompts, turns=asked.turns, shard=asked.shard, options=reading)
    rows = inputs.prompts
    compiled, provider_raw, policy_hash = _policy(policy, snapshot)
    # a manifest's weights, unless --weights is given
    weights = parse_weights(
        asked.weights if asked.weights is not None else inputs.weights or None, rows.datasets
    )
    endpoints, snap = await _endpoints(compiled.model, policy, snapshot, options)
    _skip_unservable(rows, endpoints, snap, compiled, asked)  # after the weights: they name them
    options = dataclasses.replace(options, weights=weights)
    job = Job(model=compiled.model, sha256=policy_hash, label=str(policy))
    with open_run(options, redo_failed="failed" in redo, job=job) as paid:
        todo = [r for r in rows if r.id not in paid.state.finished]
        redone: list[str] = []
        if "truncated" in redo:  # only the rows cut at max_tokens, with the new limit
            todo, redone = _truncated_rows(rows, options.out, asked.max_tokens)
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
        _sampling_note(summary, compiled.model, asked)
        summary.warnings.extend(redone)
        book = _turn_book(asked, options, todo, paid.state.turns, summary, inputs)
        prices = _admitted_prices(compiled, policy, endpoints, asked, summary)
        if asked.batch is not None:
            settings = _batch_settings(compiled, policy, snap, prices, asked, options, snapshot)
            prices = settings.prices
            paid.options = options = dataclasses.replace(options, batch=settings)
        if dry_run:
            paid.count_unjournaled(summary, prices, asked.max_tokens)
            await _key_check(summary, options, asked)
            for text in summary.warnings:  # a real run says them in PaidRun.run
                log.warning("%s", text)
            return _dry_run(
                summary,
                todo,
                prices,
                snap=snap,
                compiled=compiled,
                options=options,
                asked=asked,
                book=book,
                every_shard=rows.every_shard,
            )
        return await paid.run(
            todo,
            builder=_builder(asked, compiled.model, provider_raw, identity=_cached(options)),
            prices=prices,
            summary=summary,
            header={
                "policy": str(policy),
                "prompts": str(prompts),  # the export's dataset card names it
                **({"turns": "all"} if book is not None else {}),
            },
            turns=book,
        )

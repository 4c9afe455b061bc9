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
import contextlib
import hashlib
import json
import logging
import os
from collections.abc import Awaitable, Callable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

from openrouter_probe.backoff import Backoff
from openrouter_probe.errors import (
    APIConnectionError,
    APIError,
    ConfigError,
    NoRouteError,
    PolicyError,
)
from openrouter_probe.files import ensure_not_input
from openrouter_probe.generate.ledger import Ledger, ledger_path, replay_ledger
from openrouter_probe.generate.output import OutputLog, load_resume_state
from openrouter_probe.generate.prompts import parse_shard, read_prompts
from openrouter_probe.generate.runner import Progress, Run, RunSettings, Sender
from openrouter_probe.generate.spend import SpendCap, prompt_tokens_bound, worst_case_prices
from openrouter_probe.generate.summary import RunSummary
from openrouter_probe.schema import Endpoint

__all__ = ["REASONING_EFFORTS", "generate"]

log = logging.getLogger(__name__)

REASONING_EFFORTS = ("max", "xhigh", "high", "medium", "low", "minimal", "none")
_DEFAULT_BASE_URL = "https://openrouter.ai/api/v1"
#: Bytes per token assumed for the dry run's *expected* prompt size (the cap uses a strict bound).
_BYTES_PER_TOKEN = 4


def _policy(path: str | Path) -> tuple[Any, dict[str, Any], str]:
    """The compiled policy, its provider mapping exactly as the YAML holds it, and their hash."""
    from openrouter_probe.policy_file import compiled_from_document, read_yaml

    doc = read_yaml(path)
    compiled = compiled_from_document(doc, source=str(path))
    raw = doc["provider"]
    canonical = json.dumps({"model": compiled.model, "provider": raw}, sort_keys=True)
    return compiled, raw, "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


def _endpoints(
    model: str, snapshot: Any, *, api_key: str, base_url: str
) -> tuple[list[Endpoint], Any]:
    """The model's endpoints now: from ``snapshot`` (a Snapshot, a path or "bundled") or live."""
    from openrouter_probe.client import Client
    from openrouter_probe.snapshot import Snapshot, bundled_snapshot, load_snapshot

    if isinstance(snapshot, Snapshot):
        snap = snapshot
    elif snapshot == "bundled":
        snap = bundled_snapshot(model)
    elif snapshot is not None:
        snap = load_snapshot(snapshot)
    else:
        try:
            with Client(api_key=api_key, base_url=base_url) as client:
                data = client.endpoints(model)
        except APIError as exc:
            if isinstance(exc, NoRouteError):
                raise
            # The client's own advice names --offline, which generate does not have.
            reason = "no connection" if isinstance(exc, APIConnectionError) else str(exc)
            raise APIError(
                f"cannot read {model}'s endpoints from {base_url} to check the policy and price "
                f"the cap ({reason}); check the network or OPENROUTER_BASE_URL, or pass "
                "--snapshot bundled|PATH (snapshot= in Python) to use a saved one",
                url=exc.url,
            ) from exc
        snap = Snapshot.from_endpoints(
            data, model=model, source="api", origin=f"{base_url}/models/{model}/endpoints"
        )
    return list(snap.endpoints), snap


def _key_warning(budget: Decimal | None, *, api_key: str, base_url: str) -> str | None:
    from openrouter_probe.client import Client

    try:
        with Client(api_key=api_key, base_url=base_url, attempts=2, retry_timeout=10) as client:
            info = client.key()
    except APIError as exc:
        return f"could not read the key's limit (GET /key): {exc}"
    remaining = info.limit_remaining
    if budget is not None and remaining is not None and Decimal(str(remaining)) < budget:
        return (
            f"the key's remaining limit is ${remaining:,.2f}, below the ${budget:,.2f} budget: "
            "the run will stop with 402 before the budget is spent"
        )
    return None


def _reasoning(effort: str | None, max_tokens: int | None) -> dict[str, Any] | None:
    if effort is not None and max_tokens is not None:
        raise ConfigError("give --reasoning-effort or --reasoning-max-tokens, not both")
    if effort is not None:
        if effort not in REASONING_EFFORTS:
            raise ConfigError(
                f"--reasoning-effort {effort!r}: use one of {', '.join(REASONING_EFFORTS)}"
            )
        return {"effort": effort}
    if max_tokens is not None:
        return {"max_tokens": max_tokens}
    return None


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
    lower_max_tokens: bool = False,
    snapshot: Any = None,
    api_key: str | None = None,
    base_url: str | None = None,
    attempts: int = 6,
    read_timeout_s: float = 300.0,
    drain_timeout_s: float = 60.0,
    handle_signals: bool = False,
    progress: bool | Progress = False,
    send: Sender | None = None,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    backoff: Backoff | None = None,
) -> RunSummary:
    """Run ``prompts`` through the model and ``provider`` block of ``policy`` into ``out``.

    Rows already finished in ``out`` are skipped (resume); ``budget_usd`` caps the spend of this
    output file across runs; ``target_tokens`` (``10M``) stops each dataset at that many billed
    output tokens. ``snapshot`` (a ``Snapshot``, a path or ``"bundled"``) replaces the live
    endpoints read at start. ``dry_run`` sends nothing and returns the plan. ``send`` and ``sleep``
    replace the HTTP transport and the retry waits (tests). Returns a ``RunSummary``; raises
    ``ConfigError``/``PolicyError`` before sending anything when the inputs are unusable.
    ``progress=True`` shows a rich progress bar on stderr (in Jupyter too); ``handle_signals=True``
    makes SIGINT/SIGTERM drain then cancel (the CLI sets both).
    """
    from openrouter_probe.budget import plan_budget
    from openrouter_probe.lint import lint_block
    from openrouter_probe.quantities import parse_decimal, parse_token_count
    from openrouter_probe.routing import RequestParams, route

    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise ConfigError(f"--concurrency {concurrency!r}: a whole number >= 1")
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise ConfigError(f"--max-tokens {max_tokens!r}: a whole number >= 1")
    budget = None if budget_usd is None else parse_decimal(budget_usd, "--budget-usd")
    if budget is not None and budget <= 0:
        raise ConfigError(f"--budget-usd {budget_usd}: a positive amount of USD, e.g. 100")
    target = (
        None if target_tokens is None else parse_token_count(target_tokens, what="--target-tokens")
    )
    reasoning = _reasoning(reasoning_effort, reasoning_max_tokens)
    shard_pair = parse_shard(shard) if isinstance(shard, str) else shard
    journal = ledger_path(out)
    try:
        ensure_not_input(out, prompts, policy)
        ensure_not_input(journal, prompts, policy)
    except ValueError as exc:
        raise ConfigError(f"--out: {exc}; name another file") from exc

    key = (api_key if api_key is not None else os.environ.get("OPENROUTER_API_KEY", "")).strip()
    url = (base_url or os.environ.get("OPENROUTER_BASE_URL") or _DEFAULT_BASE_URL).rstrip("/")
    if not key and not dry_run:
        raise ConfigError(
            "generate needs an API key: export OPENROUTER_API_KEY=... "
            "(create one at https://openrouter.ai/settings/keys)"
        )

    compiled, provider_raw, policy_hash = _policy(policy)
    rows = read_prompts(prompts, shard=shard_pair)
    state = load_resume_state(out, redo_failed=redo_failed)
    # What the journal holds that no record does (requests in flight at a SIGKILL): spent too.
    replay = replay_ledger(journal, accounted=state.accounted, output_exists=state.exists)
    spent_before = state.spent_usd + replay.extra_usd
    todo = [r for r in rows if r.id not in state.finished]
    summary = RunSummary(
        out=str(out),
        policy=str(policy),
        model=compiled.model,
        rows_total=len(rows),
        rows_already_done=len(rows) - len(todo),
        rows_to_send=len(todo),
        duplicates=len(rows.duplicates),
        spent_before_usd=spent_before,
        possibly_billed_before_usd=state.possibly_billed_usd + replay.possibly_billed_usd,
        cancelled_before_usd=state.possibly_billed_usd,
        killed_in_flight_before=replay.in_flight,
        unrecorded_before_usd=replay.unrecorded_usd,
        ledger=str(journal),
        budget_usd=budget,
    )
    for ident, first, again in rows.duplicates[:5]:
        summary.warnings.append(
            f"{prompts}:{again}: id {ident!r} already on line {first}; sent once"
        )
    if len(rows.duplicates) > 5:
        summary.warnings.append(f"... and {len(rows.duplicates) - 5} more duplicate ids")

    # The start-up check: the policy against the endpoints serving the model now.
    # The sync client runs in a thread: the event loop (a notebook's, a test server's) keeps going.
    endpoints, snap = await asyncio.to_thread(
        _endpoints, compiled.model, snapshot, api_key=key, base_url=url
    )
    parameters = {"max_tokens"} | ({"temperature"} if temperature is not None else set())
    parameters |= {"reasoning"} if reasoning is not None else set()
    decision = route(
        compiled.provider,
        endpoints,
        RequestParams(max_tokens=max_tokens, parameters=frozenset(parameters)),
    )
    if not decision.admitted:
        raise PolicyError(
            f"admits none of the {len(endpoints)} endpoints serving {compiled.model} now "
            f"(with max_tokens={max_tokens}); every request would fail with 404. "
            "Re-compile the policy against a fresh snapshot (`openrouter-probe policy compile`)",
            source=str(policy),
        )
    for finding in lint_block(compiled.provider, endpoints):
        if finding.loc.startswith("provider.order") and finding.code in (
            "no-match",
            "order-excluded",
        ):
            summary.warnings.append(f"{policy}: {finding.loc}: {finding.message}")
    try:
        prices = worst_case_prices(decision.admitted)
    except ValueError as exc:
        raise PolicyError(f"{exc}; the spend cap needs prices", source=str(policy)) from exc

    worst_total = sum(
        (
            prices.worst_case_usd(
                prompt_tokens=prompt_tokens_bound(r.prompt_bytes, len(r.messages)),
                max_tokens=int(r.params.get("max_tokens", max_tokens)),
            )
            for r in todo
        ),
        Decimal(0),
    )
    if dry_run:
        summary.stop_reason = "dry-run"
        summary.worst_case_usd = worst_total
        summary.not_sent = len(todo)
        if todo:
            datasets = sorted({r.dataset for r in todo})
            wanted = max_tokens * len(todo)
            if target is not None:
                wanted = min(wanted, target * len(datasets))
            prompt_avg = max(1, sum(r.prompt_bytes for r in todo) // len(todo) // _BYTES_PER_TOKEN)
            plan = plan_budget(
                snap,
                budget_usd=budget if budget is not None else max(worst_total, Decimal(1)),
                output_tokens=wanted,
                prompt_tokens_per_request=prompt_avg,
                output_tokens_per_request=max_tokens,
                provider=compiled.provider,
                parameters=parameters,
                concurrency=concurrency,
                model=compiled.model,
            )
            figures = plan.blended.all_in or plan.blended.output_only
            summary.expected_usd = figures.cost_usd
            summary.message = (
                plan.headline
                if budget is not None
                else "no --budget-usd: nothing would cap the real run's spend; give one to cap it"
            )
        return summary

    warning = (
        await asyncio.to_thread(_key_warning, budget, api_key=key, base_url=url)
        if send is None
        else None
    )
    if warning:
        summary.warnings.append(warning)
    if budget is None:
        summary.warnings.append(
            "no --budget-usd: nothing caps this run's spend (--dry-run shows the worst case)"
        )
    for text in summary.warnings:
        log.warning("%s", text)

    settings = RunSettings(
        model=compiled.model,
        provider_json=json.dumps(provider_raw, ensure_ascii=False, separators=(",", ":")),
        policy_sha256=policy_hash,
        max_tokens=max_tokens,
        stream=stream,
        temperature=temperature,
        reasoning=reasoning,
        target_tokens=target,
        concurrency=concurrency,
        backoff=backoff
        or Backoff(wait_initial_s=1.0, wait_max_s=60.0, attempts=attempts, timeout_s=600.0),
        lower_max_tokens=lower_max_tokens,
        drain_timeout_s=drain_timeout_s,
    )
    cap = SpendCap(budget, spent_usd=spent_before)
    if budget is not None and spent_before >= budget:
        summary.stop_reason = "budget"
        summary.message = (
            f"{out} and {journal.name} already record ${spent_before:.6f} spent of the "
            f"${budget} cap"
        )
        summary.not_sent = len(todo)
        return summary

    bar: Progress | None
    if progress is True and todo:
        from openrouter_probe.generate.progress import RichProgress

        bar = RichProgress(len(todo))
    else:
        bar = None if isinstance(progress, bool) else progress
    header = {"out": Path(out).name, "budget_usd": budget, "policy": str(policy)}
    with OutputLog(out) as output, Ledger(journal, header=header) as ledger, _showing(bar):

        def make(sender: Sender) -> Run:
            return Run(
                todo,
                settings=settings,
                cap=cap,
                prices=prices,
                output=output,
                send=sender,
                summary=summary,
                tokens_before=state.output_tokens,
                sleep=sleep,
                progress=bar,
                ledger=ledger,
            )

        if send is not None:
            return await _run(make(send), handle_signals)
        from openrouter_probe.generate.transport import HttpTransport

        async with HttpTransport(
            base_url=url, api_key=key, limit=concurrency, read_timeout_s=read_timeout_s
        ) as transport:
            return await _run(make(transport.send), handle_signals)


@contextlib.contextmanager
def _showing(bar: Any) -> Iterator[None]:
    if bar is None or not hasattr(bar, "__enter__"):
        yield
        return
    with bar:
        yield


async def _run(run: Run, handle_signals: bool) -> RunSummary:
    remove = run.install_signal_handlers() if handle_signals else None
    known = len(run.summary.warnings)
    try:
        summary = await run.run()
    finally:
        if remove is not None:
            remove()
    for text in summary.warnings[known:]:
        log.warning("%s", text)
    return summary

"""Send a precision check: the plan's pinned requests through the generator, then the report.

``plan_precision_check`` resolves the endpoints (a snapshot, or the live ones), picks the endpoints
to compare (``endpoints=`` tags, the ones a ``policy`` admits, or every endpoint) and returns the
``VerifyPlan`` (cost and power before anything is sent). ``verify_precision`` sends it and returns
the ``VerifyReport``.

Sending reuses the generator's run (``generate.runner.Run``): one run over every (endpoint, item)
pair, each row carrying its own pin (``provider: {only: [TAG], allow_fallbacks: false}``) and its
own worst-case prices, all under ONE spend cap (the generator's reservation) for the whole check.
Rows are interleaved item by item, so a run stopped by the cap leaves mostly complete pairs behind
(near the cap, cheaper endpoints' requests still fit when dearer ones wait; unpaired items are not
scored against the reference). The
output file is the generator's JSONL (one line per finished request, id ``TAG|ITEM``); a rerun with
the same ``out`` sends nothing already recorded there and judges everything it holds.

Example (in a notebook, whose event loop is already running)::

    import openrouter_probe as orp

    report = await orp.verify_precision(
        "moonshotai/kimi-k2.5", endpoints=["chutes/int4", "deepinfra/int4"],
        out="verify.jsonl", budget_usd=1, snapshot="bundled",
    )
    report.verdicts   # {'chutes/int4': 'consistent', 'deepinfra/int4': 'inconclusive'}
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import logging
import os
from collections.abc import Awaitable, Callable, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

from openrouter_probe.backoff import Backoff
from openrouter_probe.errors import ConfigError, PolicyError
from openrouter_probe.files import ensure_not_input
from openrouter_probe.verify.measures import Observation
from openrouter_probe.verify.plan import DEFAULT_N, VerifyPlan, pin_block, plan_verify
from openrouter_probe.verify.report import VerifyReport, build_report
from openrouter_probe.verify.stats import DEFAULT_TOLERANCE
from openrouter_probe.verify.suites import load_suites

__all__ = ["plan_precision_check", "row_key", "verify_precision"]

log = logging.getLogger(__name__)

_DEFAULT_BASE_URL = "https://openrouter.ai/api/v1"
#: The output file's rows: ``TAG|ITEM`` (a tag never holds ``|``).
_SEP = "|"
#: The ``dataset`` of every row the check writes (one dataset: rows keep their interleaved order).
DATASET = "verify"


def row_key(tag: str, item_id: str) -> str:
    """Return the output-file id of ``item_id`` sent to ``tag``: ``TAG|ITEM``."""
    return f"{tag}{_SEP}{item_id}"


def _selected(
    model: str, snap: Any, endpoints: Sequence[str] | None, policy: str | Path | None
) -> list[str]:
    if endpoints is not None and policy is not None:
        raise ConfigError("give --endpoints or --policy, not both")
    if endpoints is not None:
        tags = [t.strip() for t in endpoints if t.strip()]
        if not tags:
            raise ConfigError("--endpoints is empty; give full tags such as chutes/int4")
        return tags
    if policy is not None:
        from openrouter_probe.policy_file import compiled_from_document, read_yaml
        from openrouter_probe.routing import route

        compiled = compiled_from_document(read_yaml(policy), source=str(policy))
        if compiled.model != model:
            raise PolicyError(
                f"is compiled for {compiled.model}, not {model}; pass that model or another policy",
                source=str(policy),
            )
        admitted = route(compiled.provider, snap.endpoints).admitted_tags
        if not admitted:
            raise PolicyError(
                f"admits none of {model}'s endpoints in the snapshot", source=str(policy)
            )
        return list(admitted)
    return [e.tag for e in snap.endpoints]


def _resolve(model: str, snapshot: Any, *, api_key: str, base_url: str) -> Any:
    from openrouter_probe.generate.job import _endpoints

    _, snap = _endpoints(model, snapshot, api_key=api_key, base_url=base_url)
    return snap


def plan_precision_check(
    model: str,
    *,
    endpoints: Sequence[str] | None = None,
    policy: str | Path | None = None,
    reference: str | None = None,
    suite: str | Sequence[str] = "arith",
    n: int = DEFAULT_N,
    seed: int = 0,
    budget_usd: float | int | str | Decimal | None = None,
    snapshot: Any = None,
    api_key: str | None = None,
    base_url: str | None = None,
) -> VerifyPlan:
    """Return the plan of a check of ``model``: what it sends where, and what it may cost.

    ``endpoints`` (full tags) or ``policy`` (a compiled policy: the endpoints it admits) choose what
    is compared; neither compares every endpoint. ``reference`` defaults to the first party.
    ``suite`` is ``arith``, ``tools`` or JSONL paths (comma-separated or a list); ``n`` arith items
    from ``seed``. ``snapshot`` (a ``Snapshot``, a path or ``"bundled"``) replaces the live
    endpoints. Sends nothing.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ConfigError(f"--n {n!r}: a whole number >= 1")
    key = (api_key if api_key is not None else os.environ.get("OPENROUTER_API_KEY", "")).strip()
    url = (base_url or os.environ.get("OPENROUTER_BASE_URL") or _DEFAULT_BASE_URL).rstrip("/")
    snap = _resolve(model, snapshot, api_key=key, base_url=url)
    tags = _selected(model, snap, endpoints, policy)
    items = load_suites(suite, n=n, seed=seed)
    plan = plan_verify(
        snap.endpoints,
        model=model,
        tags=tags,
        items=items,
        reference=reference,
        budget_usd=budget_usd,
    )
    return dataclasses.replace(plan, snapshot_sha256=getattr(snap, "sha256", None))


def _plan_hash(plan: VerifyPlan) -> str:
    canonical = json.dumps(
        {"model": plan.model, "reference": plan.reference, "pinned": sorted(plan.pinned)},
        sort_keys=True,
    )
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


def observations_from(path: str | Path, plan: VerifyPlan) -> list[Observation]:
    """Read the check's output file back into observations (every finished request it records)."""
    from openrouter_probe.generate.output import FINISHED, iter_records

    if not Path(path).exists():
        return []
    out = []
    for _, record in iter_records(path):
        tag, sep, item_id = str(record["id"]).partition(_SEP)
        if not sep or record.get("status") not in FINISHED:
            continue
        out.append(Observation.from_output_line(record, endpoint=tag, item_id=item_id))
    return out


async def verify_precision(
    model: str,
    *,
    out: str | Path,
    endpoints: Sequence[str] | None = None,
    policy: str | Path | None = None,
    reference: str | None = None,
    suite: str | Sequence[str] = "arith",
    n: int = DEFAULT_N,
    seed: int = 0,
    budget_usd: float | int | str | Decimal | None = None,
    tolerance: float = DEFAULT_TOLERANCE,
    snapshot: Any = None,
    api_key: str | None = None,
    base_url: str | None = None,
    concurrency: int = 32,
    attempts: int = 6,
    read_timeout_s: float = 300.0,
    handle_signals: bool = False,
    progress: bool = False,
    on_plan: Callable[[VerifyPlan], None] | None = None,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    backoff: Backoff | None = None,
) -> VerifyReport:
    """Check ``model``'s endpoints against the reference and return the report.

    Plans as ``plan_precision_check`` (``on_plan`` sees the plan before anything is sent), then
    sends every (endpoint, item) not yet recorded in ``out``, pinned, under one ``budget_usd`` cap
    for the whole check (and for ``out`` across reruns, as ``generate``), and judges everything
    ``out`` holds for this plan. Responses served by another provider than the pinned one are
    discarded and counted (``leaked``). Raises ``ConfigError`` before sending when the inputs are
    unusable.
    """
    from openrouter_probe.generate.job import _run, _showing
    from openrouter_probe.generate.output import OutputLog, load_resume_state
    from openrouter_probe.generate.prompts import PromptRow
    from openrouter_probe.generate.runner import Run, RunSettings
    from openrouter_probe.generate.spend import SpendCap, worst_case_prices
    from openrouter_probe.generate.summary import RunSummary
    from openrouter_probe.generate.transport import HttpTransport
    from openrouter_probe.quantities import parse_decimal

    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise ConfigError(f"--concurrency {concurrency!r}: a whole number >= 1")
    budget = None if budget_usd is None else parse_decimal(budget_usd, "--budget-usd")
    if budget is not None and budget <= 0:
        raise ConfigError(f"--budget-usd {budget_usd}: a positive amount of USD, e.g. 1")
    inputs = [p for p in [policy, *(s for s in _suite_files(suite))] if p is not None]
    try:
        ensure_not_input(out, *inputs)
    except ValueError as exc:
        raise ConfigError(f"--out: {exc}; name another file") from exc
    key = (api_key if api_key is not None else os.environ.get("OPENROUTER_API_KEY", "")).strip()
    url = (base_url or os.environ.get("OPENROUTER_BASE_URL") or _DEFAULT_BASE_URL).rstrip("/")
    if not key:
        raise ConfigError(
            "verify needs an API key: export OPENROUTER_API_KEY=... "
            "(create one at https://openrouter.ai/settings/keys), or use --dry-run or --fake"
        )
    plan = await asyncio.to_thread(
        plan_precision_check,
        model,
        endpoints=endpoints,
        policy=policy,
        reference=reference,
        suite=suite,
        n=n,
        seed=seed,
        budget_usd=budget,
        snapshot=snapshot,
        api_key=key,
        base_url=url,
    )
    if on_plan is not None:
        on_plan(plan)

    try:
        prices = {tag: worst_case_prices([e]) for tag, e in plan.pinned.items()}
        worst = worst_case_prices(plan.pinned.values())
    except ValueError as exc:
        raise ConfigError(f"{exc}; the spend cap needs every endpoint's prices") from exc
    state = load_resume_state(out)
    bodies = {tag: plan.bodies(tag) for tag in plan.pinned}
    rows: list[PromptRow] = []
    for index in range(len(plan.items)):
        for tag in plan.pinned:
            item_id, body = bodies[tag][index]
            rid = row_key(tag, item_id)
            if rid in state.finished:
                continue
            messages = body["messages"]
            params = {k: v for k, v in body.items() if k not in ("model", "provider", "messages")}
            size = len(json.dumps(messages, ensure_ascii=False).encode())
            if "tools" in body:
                size += len(json.dumps(body["tools"], ensure_ascii=False).encode())
            rows.append(
                PromptRow(
                    rid,
                    DATASET,
                    messages,
                    params,
                    0,
                    size,
                    provider_json=json.dumps(pin_block(tag), separators=(",", ":")),
                )
            )
    total = len(plan.items) * len(plan.pinned)
    summary = RunSummary(
        out=str(out),
        policy=f"verify {model} (pins)",
        model=model,
        rows_total=total,
        rows_already_done=total - len(rows),
        rows_to_send=len(rows),
        spent_before_usd=state.spent_usd,
        budget_usd=budget,
    )
    if rows:
        settings = RunSettings(
            model=model,
            provider_json=json.dumps(pin_block(plan.reference), separators=(",", ":")),
            policy_sha256=_plan_hash(plan),
            max_tokens=max(item.max_tokens for item in plan.items),
            concurrency=concurrency,
            backoff=backoff
            or Backoff(wait_initial_s=1.0, wait_max_s=60.0, attempts=attempts, timeout_s=600.0),
        )
        cap = SpendCap(budget, spent_usd=state.spent_usd)
        if budget is not None and state.spent_usd >= budget:
            summary.stop_reason = "budget"
            summary.message = f"{out} already records ${state.spent_usd:.6f} spent of the ${budget}"
            summary.not_sent = len(rows)
        else:
            bar = None
            if progress:
                from openrouter_probe.generate.progress import RichProgress

                bar = RichProgress(len(rows))
            with OutputLog(out) as output, _showing(bar):
                async with HttpTransport(
                    base_url=url, api_key=key, limit=concurrency, read_timeout_s=read_timeout_s
                ) as transport:
                    run = Run(
                        rows,
                        settings=settings,
                        cap=cap,
                        prices=worst,
                        output=output,
                        send=transport.send,
                        summary=summary,
                        sleep=sleep,
                        progress=bar,
                        prices_for=lambda row: prices[row.id.partition(_SEP)[0]],
                    )
                    summary = await _run(run, handle_signals)
    report = build_report(
        plan,
        observations_from(out, plan),
        tolerance=tolerance,
        snapshot_sha256=plan.snapshot_sha256,
    )
    notes = list(report.notes)
    notes.append(
        f"sent {summary.requests} request(s) ({summary.rows_already_done} of {total} already in "
        f"{out}); spent ${summary.spent_usd:.6f} this run, "
        f"${summary.spent_before_usd + summary.spent_usd:.6f} in all"
        + (f" of the ${budget} cap" if budget is not None else "")
    )
    if summary.stop_reason not in ("done",):
        notes.append(f"the run stopped early ({summary.stop_reason}): {summary.message}")
    notes.extend(summary.warnings)
    return dataclasses.replace(report, notes=tuple(notes), run=summary)


def _suite_files(suite: str | Sequence[str]) -> list[str]:
    names = suite.split(",") if isinstance(suite, str) else list(suite)
    return [s.strip() for s in names if s.strip() not in ("arith", "tools", "")]

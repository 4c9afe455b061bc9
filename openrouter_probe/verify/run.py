"""Send a precision check: the plan's pinned requests through the generator, then the report.

One paid run (``generate``'s) over every (endpoint, item) pair, each row pinned and priced at its
own endpoint, under ONE spend cap; rows interleaved item by item; a rerun with the same ``out``
sends only what its output lacks (``docs/verify.md``, "How it sends").
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import hashlib
import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

from openrouter_probe.api.backoff import Backoff
from openrouter_probe.api.connection import Connection
from openrouter_probe.errors import ConfigError, Message, OptionError, PolicyError
from openrouter_probe.rules.quantities import format_usd, whole_number
from openrouter_probe.run.checks import endpoints_now
from openrouter_probe.run.config import Learned, RunPlan
from openrouter_probe.run.money.spend import Prices
from openrouter_probe.run.paid import Job, open_run, run_job
from openrouter_probe.run.result import RunResult
from openrouter_probe.run.rows import PromptRow
from openrouter_probe.run.send.request import RequestBuilder
from openrouter_probe.run.start import RunStart
from openrouter_probe.run.stop import StopReason
from openrouter_probe.verify.observation import Observation
from openrouter_probe.verify.pins import pin_block
from openrouter_probe.verify.plan import DEFAULT_N, VerifyPlan, plan_verify
from openrouter_probe.verify.report import VerifyReport, build_report
from openrouter_probe.verify.stats import (
    DEFAULT_ALPHA,
    DEFAULT_POWER,
    DEFAULT_REPEATS,
    DEFAULT_TOLERANCE,
    check_statistics,
)
from openrouter_probe.verify.suites import load_suites
from openrouter_probe.verify.thinking import (
    PILOT_MARGIN,
    PILOT_MAX_TOKENS,
    Thinking,
    room_from_pilot,
)

__all__ = ["parse_row_key", "plan_precision_check", "row_key", "verify_precision"]

log = logging.getLogger(__name__)

#: The output file's rows: ``TAG|ITEM`` (a tag never holds ``|``).
_SEP = "|"
#: The ``dataset`` of every row the check writes (one dataset: rows keep their interleaved order).
DATASET = "verify"


#: Marks a run of the reference after the first in a row id: ``TAG#2|ITEM`` (a tag never holds it).
_RUN = "#"
#: The pilot's row ids: ``TAG|pilot:ITEM`` (no built-in item id starts so).
PILOT = "pilot:"
#: Requests of the pilot: the first temperature-0 items and sampled prompts, to the reference.
PILOT_REQUESTS = 6


def row_key(tag: str, item_id: str, repeat: int = 1) -> str:
    """Return the output-file id of ``item_id`` sent to ``tag``: ``TAG|ITEM``, or ``TAG#R|ITEM``
    for the reference's run ``R`` >= 2."""
    head = tag if repeat == 1 else f"{tag}{_RUN}{repeat}"
    return f"{head}{_SEP}{item_id}"


def parse_row_key(key: str) -> tuple[str, int, str] | None:
    """Return ``(tag, run, item id)`` of an output-file id (``None``: not one of the check's)."""
    head, sep, item_id = key.partition(_SEP)
    if not sep:
        return None
    tag, mark, run = head.partition(_RUN)
    if not mark:
        return tag, 1, item_id
    return (tag, int(run), item_id) if run.isdigit() and int(run) >= 2 else None


def _selected(
    model: str, snap: Any, endpoints: Sequence[str] | None, policy: str | Path | None
) -> list[str]:
    if endpoints is not None and policy is not None:
        raise OptionError("give {endpoints} or {policy}, not both", endpoints=endpoints,
                          policy=policy)  # fmt: skip
    if endpoints is not None:
        tags = [t.strip() for t in endpoints if t.strip()]
        if not tags:
            raise ConfigError(
                Message(
                    "no-endpoint-tag",
                    "{endpoints} names no tag; give full tags such as chutes/int4",
                )
            )
        return tags
    if policy is not None:
        from openrouter_probe.policy.compiled import load_compiled_policy
        from openrouter_probe.rules.routing import route

        compiled = load_compiled_policy(policy)
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
    alpha: float = DEFAULT_ALPHA,
    power: float = DEFAULT_POWER,
    tolerance: float = DEFAULT_TOLERANCE,
    repeats: int = DEFAULT_REPEATS,
    sampling: str = "greedy",
    sampled_n: int | None = None,
    thinking: str | Thinking = "job",
    run: RunPlan | None = None,
) -> VerifyPlan:
    """Return the plan of a check of ``model``: what it sends where, and what it may cost.

    ``endpoints`` (full tags) or ``policy`` (a compiled policy: the endpoints it admits) choose
    what is compared; neither compares every endpoint. ``suite`` is ``arith``, ``tools`` or JSONL
    paths (comma-separated or a list); ``n`` items of each generated suite from ``seed``.
    ``snapshot`` (a ``Snapshot``, a path or ``"bundled"``) replaces the live endpoints, read with
    ``api_key`` and ``base_url`` (the environment's when ``None``; beside a ``run``, its
    connection instead). The other keywords are ``plan_verify``'s, checked as it checks them
    before anything is read. Sends nothing.
    """
    whole_number(n, "n")
    check_statistics(alpha=alpha, power=power, tolerance=tolerance, repeats=repeats, n=n)
    connection = run.connection if run else Connection.resolve(api_key=api_key, base_url=base_url)
    _, snap = endpoints_now(model, snapshot, connection)
    tags = _selected(model, snap, endpoints, policy)
    items = load_suites(suite, n=n, seed=seed)
    return plan_verify(
        snap.endpoints,
        model=model,
        tags=tags,
        items=items,
        reference=reference,
        budget_usd=budget_usd,  # without a run: a plan only priced; beside one: refused
        alpha=alpha,
        power=power,
        tolerance=tolerance,
        repeats=repeats,
        sampling=sampling,
        sampled_n=sampled_n,
        thinking=thinking,
        snapshot_sha256=getattr(snap, "sha256", None),
        run=run,
    )


def _plan_hash(plan: VerifyPlan) -> str:
    canonical = json.dumps(
        {"model": plan.model, "reference": plan.reference, "pinned": sorted(plan.pinned)},
        sort_keys=True,
    )
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


def observations_from(path: str | Path, *, pilot: bool = False) -> list[Observation]:
    """Read the check's output file back into observations (every finished request it records;
    with ``pilot``, the pilot's instead)."""
    from openrouter_probe.run.books.output import FINISHED, iter_records

    if not Path(path).exists():
        return []
    out = []
    for _, record in iter_records(path):
        parsed = parse_row_key(str(record["id"]))
        if parsed is None or record.get("status") not in FINISHED:
            continue
        tag, run, item_id = parsed
        if item_id.startswith(PILOT) != pilot:
            continue
        out.append(Observation.from_output_line(record, endpoint=tag, item_id=item_id, repeat=run))
    return out


def _pilot_bodies(plan: VerifyPlan) -> list[tuple[str, dict[str, Any]]]:
    """The pilot: ``PILOT_REQUESTS`` of the check's own requests to the reference (temperature-0
    items and sampled prompts, half each when there is an arm) at ``_ceiling(plan)`` tokens."""
    ref = plan.reference
    greedy = plan.bodies(ref)
    sampled = plan.sampled_bodies(ref)[:: plan.sampled.n] if plan.sampled is not None else []
    half = PILOT_REQUESTS // 2 if sampled else PILOT_REQUESTS
    chosen = [*greedy[:half], *sampled[: PILOT_REQUESTS - min(half, len(greedy))]]
    ceiling = _ceiling(plan)
    return [(PILOT + item_id, {**body, "max_tokens": ceiling}) for item_id, body in chosen]


def _ceiling(plan: VerifyPlan) -> int:
    """The pilot's ``max_tokens``: ``PILOT_MAX_TOKENS``, or what the reference allows."""
    endpoint = plan.pinned[plan.reference]
    return min(PILOT_MAX_TOKENS, endpoint.max_completion_tokens or PILOT_MAX_TOKENS)


def _piloted(plan: VerifyPlan, out: str | Path) -> Thinking | None:
    """The thinking of ``plan`` with the room the pilot in ``out`` measured (``None``: no
    pilot answer to measure)."""
    rule = plan.thinking_rule
    found = [o for o in observations_from(out, pilot=True) if not o.failed]
    if not found:
        return None
    ceiling = _ceiling(plan)
    lengths = [o.reasoning_tokens for o in found]
    room = room_from_pilot(lengths, ceiling=ceiling)
    said = (
        f"{PILOT_MARGIN:g}x the longest reasoning, {max(lengths)} tokens, of a pilot of {len(found)} "
        f"requests to {plan.reference}"
    )
    if any(o.finish_reason == "length" for o in found):
        said += f"; a pilot answer was cut at {ceiling} tokens, so the room is that ceiling"
        room = ceiling
    return dataclasses.replace(rule, room=room, room_said=said, provisional=False)


def _requests(plan: VerifyPlan, *, pilot: bool) -> list[tuple[str, str, dict[str, Any]]]:
    """``(row id, tag, body)`` of every request of ``plan`` (with ``pilot``, the pilot's), one per
    (endpoint, run, item), interleaved item by item, each pinned; the reference's runs follow one
    another, and the sampled arm's samples come after, interleaved too (a capped run leaves
    comparable pairs)."""
    if pilot:
        ref = plan.reference
        return [(row_key(ref, item_id), ref, body) for item_id, body in _pilot_bodies(plan)]
    bodies = {tag: plan.bodies(tag) for tag in plan.pinned}
    runs = {tag: plan.repeats if tag == plan.reference else 1 for tag in plan.pinned}
    out: list[tuple[str, str, dict[str, Any]]] = []
    for index in range(len(plan.items)):
        for tag in plan.pinned:
            item_id, body = bodies[tag][index]
            out.extend((row_key(tag, item_id, run), tag, body) for run in range(1, runs[tag] + 1))
    samples = {tag: plan.sampled_bodies(tag) for tag in plan.pinned}
    for index in range(plan.sampled.requests_per_endpoint if plan.sampled else 0):
        for tag in plan.pinned:
            item_id, body = samples[tag][index]
            out.append((row_key(tag, item_id), tag, body))
    return out


def _row(rid: str, tag: str, body: dict[str, Any], prices: Prices) -> PromptRow:
    """The request of one (endpoint, item, run): pinned to the endpoint, at its own prices."""
    messages = body["messages"]
    params = {k: v for k, v in body.items() if k not in ("model", "provider", "messages")}
    size = len(json.dumps(messages, ensure_ascii=False).encode())
    if "tools" in body:
        size += len(json.dumps(body["tools"], ensure_ascii=False).encode())
    return PromptRow(
        rid,
        DATASET,
        messages,
        params,
        0,
        size,
        provider_json=json.dumps(pin_block(tag), separators=(",", ":")),
        prices=prices,
    )


async def _send(plan: VerifyPlan, *, pilot: bool = False) -> RunResult:
    """Send every request of ``plan`` that its run's output does not record yet, under its run's
    cap (with ``pilot``, the pilot's requests only)."""
    try:
        prices = {tag: Prices.worst_case([e]) for tag, e in plan.pinned.items()}
        worst = Prices.worst_case(plan.pinned.values())
    except ValueError as exc:
        raise ConfigError(f"{exc}; the spend cap needs every endpoint's prices") from exc
    job = Job(model=plan.model, sha256=_plan_hash(plan), label=f"verify {plan.model} (pins)")
    with open_run(plan.run, job=job) as paid:
        requests = _requests(plan, pilot=pilot)
        finished = paid.state.finished
        rows = [_row(r, tag, body, prices[tag]) for r, tag, body in requests if r not in finished]
        total = len(requests)
        before = RunStart.opened(
            paid.held,
            policy=f"verify {plan.model} (pins)",
            model=plan.model,
            rows_total=total,
            rows_already_done=total - len(rows),
            rows_to_send=len(rows),
        )
        if not rows:
            return RunResult.of(before)
        builder = RequestBuilder(
            model=plan.model,
            provider_json=json.dumps(pin_block(plan.reference), separators=(",", ":")),
            max_tokens=max(item.max_tokens for item in plan.items),
        )
        return await run_job(
            paid,
            rows,
            builder=builder,
            prices=worst,
            before=before,
            header={"policy": before.policy},
            learned=Learned.nothing(plan.run),  # a check learns nothing as it opens
        )


def _run_notes(summary: RunResult, out: str | Path, who: str = "") -> list[str]:
    """What the sending did (``who``: the pilot), for the report's notes."""
    budget = summary.budget_usd
    notes = [
        f"{who}sent {summary.requests} request(s) ({summary.rows_already_done} of {summary.rows_total} "
        f"already in {out}); spent ${summary.spent_usd:.6f} this run, "
        f"${summary.spent_before_usd + summary.spent_usd:.6f} in all"
        + (f" of the {format_usd(budget)} cap" if budget is not None else "")
    ]
    if summary.stop_reason != StopReason.DONE:
        notes.append(f"the run stopped early ({summary.stop_reason}): {summary.message}")
    notes.extend(summary.warnings)
    return notes


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
    alpha: float = DEFAULT_ALPHA,
    power: float = DEFAULT_POWER,
    repeats: int = DEFAULT_REPEATS,
    sampling: str = "greedy",
    sampled_n: int | None = None,
    thinking: str | Thinking = "job",
    snapshot: Any = None,
    api_key: str | None = None,
    base_url: str | None = None,
    concurrency: int = 32,
    attempts: int | None = None,
    read_timeout_s: float = 300.0,
    handle_signals: bool = False,
    progress: bool = False,
    on_plan: Callable[[VerifyPlan], None] | None = None,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    backoff: Backoff | None = None,
) -> VerifyReport:
    """Check ``model``'s endpoints against the reference and return the report: plan as
    ``plan_precision_check`` (``on_plan`` sees the plan first), send every request ``out`` does
    not record yet, pinned, under one ``budget_usd`` cap for the check and its reruns
    (``generate``'s run path and spend journal), judge all ``out`` holds for this plan (a
    response from another provider than the pinned one is discarded and counted, ``leaked``).
    ``ConfigError`` before sending for unusable inputs (``alpha``, ``power``, ``tolerance``
    outside (0, 1), ``repeats`` outside 2..10, ``n`` < 1)."""
    check_statistics(alpha=alpha, power=power, tolerance=tolerance, repeats=repeats, n=n)
    run = RunPlan.resolve(
        command="verify",
        out=out,
        inputs=[p for p in [policy, *_suite_files(suite)] if p is not None],
        budget_usd=budget_usd,
        concurrency=concurrency,
        api_key=api_key,
        base_url=base_url,
        key_hint=Message("plan-without-key", ", or plan without one ({@plan_verify})"),
        attempts=attempts,
        read_timeout_s=read_timeout_s,
        handle_signals=handle_signals,
        progress=progress,
        sleep=sleep,
        backoff=backoff,
    )
    planning = functools.partial(
        plan_precision_check, model, endpoints=endpoints, policy=policy, reference=reference,
        suite=suite, n=n, seed=seed, snapshot=snapshot, run=run, alpha=alpha, power=power,
        tolerance=tolerance, repeats=repeats, sampling=sampling, sampled_n=sampled_n,
    )  # fmt: skip
    plan, pilot = await _plan_with_pilot(planning, thinking)
    if on_plan is not None:
        on_plan(plan)
    stopped = pilot is not None and pilot.stop_reason != StopReason.DONE
    summary = pilot if stopped and pilot is not None else await _send(plan)
    report = build_report(plan, observations_from(out))
    ran = _run_notes(pilot, out, "the pilot ") if pilot is not None and not stopped else []
    notes = [*report.notes, *ran, *_run_notes(summary, out)]
    return dataclasses.replace(report, notes=tuple(notes), run=summary)


async def _plan_with_pilot(
    planning: Callable[..., VerifyPlan], thinking: str | Thinking
) -> tuple[VerifyPlan, RunResult | None]:
    """The plan; when it thinks with a provisional room, the pilot is sent first (under the
    check's cap, recorded in its output: a rerun does not send it again) and the plan made
    again with the room the pilot measured."""
    plan = await asyncio.to_thread(planning, thinking=thinking)
    if not plan.thinking_rule.provisional:
        return plan, None
    pilot = await _send(plan, pilot=True)
    rule = _piloted(plan, plan.run.output)
    if rule is not None:
        plan = await asyncio.to_thread(planning, thinking=rule)
    return plan, pilot


def _suite_files(suite: str | Sequence[str]) -> list[str]:
    names = suite.split(",") if isinstance(suite, str) else list(suite)
    return [s.strip() for s in names if s.strip() not in ("arith", "tools", "")]

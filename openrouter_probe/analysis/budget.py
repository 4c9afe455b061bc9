"""The budget planner: what a job costs, what a budget buys, and how far it gets.

A target is a number of **billed output tokens** (reasoning included). ``plan_budget`` prices it at
every endpoint the routing model admits, at the cheapest of them (the headline) and at the routing
blend (weighted by each endpoint's traffic share from ``routing.route``), output-only and all-in,
with a time to finish that is a lower bound. Prices are the ones the job pays: overrides resolved
for its prompt size, the reasoning share at ``internal_reasoning`` where listed (at the end of the
share range that costs more). Money is ``Decimal`` throughout. The inputs and every figure:
``docs/analysis.md``, "The budget planner"; the job is validated in ``budget_job``, the plan's
data classes live in ``budget_plan``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from openrouter_probe.analysis.budget_job import BudgetJob, job_figures, make_job, time_to_finish_s
from openrouter_probe.analysis.budget_plan import BudgetPlan, EndpointBudget, TimeWindowCost
from openrouter_probe.api.schema import Endpoint, Pricing
from openrouter_probe.errors import Message, PolicyError, SnapshotError
from openrouter_probe.rules.precision import PrecisionRegistry, default_registry
from openrouter_probe.rules.pricing import effective_pricing, price_windows
from openrouter_probe.rules.provider_block import ProviderBlock
from openrouter_probe.rules.routing import RequestParams, RouteDecision, matches, route

if TYPE_CHECKING:
    from openrouter_probe.rules.snapshot import Snapshot

__all__ = ["DEFAULT_CONCURRENCY", "plan_budget"]

#: Concurrent requests assumed for the time estimate (the scenario's 2000).
DEFAULT_CONCURRENCY = 2000

#: Said wherever a time to finish is shown.
CAPACITY_CAVEAT = (
    "time to finish = output tokens ÷ (p50 throughput per request × concurrency): a lower bound, "
    "since a provider's capacity (how many of those requests it serves at once) is not known"
)

_MILLION = Decimal(1_000_000)


@dataclass(frozen=True)
class _Price:
    """What one million billed output tokens (and input tokens) cost at an endpoint for the job."""

    out: Decimal
    completion: Decimal | None  # None: the blend, which lists no price of its own
    reasoning: Decimal | None
    prompt: Decimal | None


def _price(pricing: Pricing, shares: tuple[Decimal, Decimal]) -> _Price | None:
    """The job's prices at ``pricing`` (overrides already resolved); ``None`` when unpriced.

    With ``internal_reasoning`` listed, a billed output token costs
    ``completion × (1 − share) + internal_reasoning × share``, taken at the end of the share range
    that costs more, so the budget never promises more than it buys.
    """
    completion = pricing.completion_usd_per_m
    if completion is None:
        return None
    reasoning = pricing.listed_reasoning_usd_per_m  # a listed 0 is the completion rate
    out = completion
    if reasoning is not None:
        share = shares[1] if reasoning > completion else shares[0]
        out = completion * (1 - share) + reasoning * share
    return _Price(out, completion, reasoning, pricing.prompt_usd_per_m)


def _some(tags: Sequence[str]) -> str:
    return ", ".join(tags[:4]) + (f" and {len(tags) - 4} more" if len(tags) > 4 else "")


def _for_job(endpoints: Sequence[Endpoint], prompt_tokens: int | None) -> list[Endpoint]:
    """The endpoints with their prices for a request of ``prompt_tokens`` (tiers applied; time
    windows left at their default), so routing sorts and balances on what the job pays."""
    return [
        e.model_copy(update={"pricing": effective_pricing(e.pricing, prompt_tokens=prompt_tokens)})
        if e.pricing.overrides
        else e
        for e in endpoints
    ]


def _endpoint_budget(
    job: BudgetJob,
    *,
    tag: str,
    provider: str,
    verdict: str | None,
    role: str,
    position: int | None,
    weight: float,
    price: _Price,
    throughput_tps: float | None,
) -> EndpointBudget:
    output_only, all_in = job_figures(
        job, price_out_usd_per_m=price.out, price_in_usd_per_m=price.prompt
    )
    return EndpointBudget(
        tag=tag,
        provider=provider,
        verdict=verdict,
        role=role,
        position=position,
        weight=weight,
        price_in_usd_per_m=price.prompt,
        price_out_usd_per_m=price.out,
        price_completion_usd_per_m=price.completion,
        price_reasoning_usd_per_m=price.reasoning,
        throughput_p50_tps=throughput_tps,
        time_to_finish_s=time_to_finish_s(job, throughput_tps),
        output_only=output_only,
        all_in=all_in,
    )


def _tps(e: Endpoint) -> float | None:
    thr = e.throughput_last_30m
    return None if thr is None or thr.p50 is None else float(thr.p50)


def _cheapest_window(
    job: BudgetJob, priced: Sequence[tuple[Endpoint, _Price]], originals: Mapping[str, Endpoint]
) -> TimeWindowCost | None:
    """The cheapest (endpoint, UTC window) when some admitted endpoint's price varies by time."""
    best: TimeWindowCost | None = None
    for e, default in priced:
        windows = price_windows(
            originals[e.tag].pricing, prompt_tokens=job.prompt_tokens_per_request
        )
        if len(windows) < 2:
            continue
        for w in windows:
            p = _price(w.pricing, job.shares)
            if p is None or (best is not None and p.out >= best.price_out_usd_per_m):
                continue
            cost = Decimal(job.output_tokens) * p.out / _MILLION
            best = TimeWindowCost(e.tag, w.start_hhmm, w.end_hhmm, p.out, cost, default.out)
    return best


def _unmatched(block: ProviderBlock, endpoints: Sequence[Endpoint]) -> tuple[str, ...]:
    """``order``/``only`` entries that name no endpoint (a stale policy names gone endpoints)."""
    entries = [*(block.order or ()), *(block.only or ())]
    return tuple(dict.fromkeys(x for x in entries if not any(matches(x, e) for e in endpoints)))


def _notes(
    job: BudgetJob,
    decision: RouteDecision,
    per_endpoint: Sequence[EndpointBudget],
    endpoints: Sequence[Endpoint],
    unmatched: Sequence[str],
    window: TimeWindowCost | None,
) -> list[str]:
    notes = [CAPACITY_CAVEAT, *decision.notes]
    if job.input_per_output is None:
        notes.append(
            Message(
                "budget-needs-prompt-size",
                "all-in figures need the prompt size: give {prompt_tokens_per_request:bare} with "
                "{output_tokens_per_request:bare}, or {prompt_to_output_ratio:bare}",
            )
        )
    if any(b.throughput_p50_tps is None for b in per_endpoint):
        notes.append("some endpoints carry no throughput stats (they need an API key): no time")
    tiered = sorted(
        {
            e.tag
            for e in endpoints
            for o in e.pricing.overrides or ()
            if o.min_prompt_tokens is not None
        }
    )
    if tiered and job.prompt_tokens_per_request is None:
        notes.append(
            Message(
                "budget-tiered-prices",
                "{tags:s} price long prompts higher (pricing overrides by prompt size): give "
                "{prompt_tokens_per_request:bare} with {output_tokens_per_request:bare} to apply "
                "them",
                tags=", ".join(tiered),
            )
        )
    if any(b.price_reasoning_usd_per_m is not None for b in per_endpoint):
        notes.append(
            Message(
                "budget-reasoning-price",
                "where an endpoint lists an internal_reasoning price, the reasoning share of "
                "output is priced at it (at the end of {reasoning_share:bare} that costs more)",
            )
        )
    zero = sorted(
        e.tag for e in endpoints if e.pricing.reasoning_price_rule == "listed 0: completion rate"
    )
    if zero:
        notes.append(
            f"{_some(zero)} list internal_reasoning 0: reasoning is priced at the completion rate "
            "there (a listed zero is not free reasoning; 2025 bills charged it as output)"
        )
    for entry in unmatched:
        notes.append(
            f"the provider block names {entry!r}, which no endpoint of the snapshot matches: "
            "the policy is stale; re-compile it from its spec"
        )
    if window is not None:
        notes.append(
            f"prices vary by time of day: the cheapest window is {window.label} at {window.tag} "
            f"(${window.price_out_usd_per_m:.2f}/M output, ${window.default_price_out_usd_per_m:.2f}"
            f"/M otherwise): the target costs ${window.cost_usd:,.2f} there"
        )
    return notes


def _no_price(where: object, model: str | None) -> SnapshotError:
    return SnapshotError(
        Message(
            "no-output-price",
            "{where:s}: no endpoint of {model:s} lists an output price, so there is nothing to "
            "plan with; take a fresh snapshot ({@save_snapshot})",
            where=str(where),
            model=model or "the model",
        )
    )


def plan_budget(
    snapshot: Snapshot | Iterable[Endpoint],
    *,
    budget_usd: float | int | str | Decimal,
    output_tokens: int | str | None = None,
    output_tokens_per_dataset: int | str | None = None,
    datasets: int = 1,
    dataset_names: Sequence[str] | None = None,
    reasoning_share: float | str | Decimal | tuple[Any, Any] = 0,
    prompt_tokens_per_request: int | str | None = None,
    output_tokens_per_request: int | str | None = None,
    prompt_to_output_ratio: float | str | Decimal | None = None,
    provider: ProviderBlock | Mapping[str, Any] | None = None,
    parameters: Iterable[str] = (),
    max_tokens: int | None = None,
    concurrency: int = DEFAULT_CONCURRENCY,
    registry: PrecisionRegistry | None = None,
    model: str | None = None,
) -> BudgetPlan:
    """Plan a job of ``output_tokens`` billed output tokens against ``budget_usd``.

    The target is ``output_tokens`` in total or ``output_tokens_per_dataset`` × ``datasets`` (token
    counts accept ``60M``, ``7.5M``, ``500k``). ``reasoning_share`` is the reasoning part of output,
    a fraction or a ``(low, high)`` range / ``"0.5:0.8"``. For the all-in figures give the prompt
    size: ``prompt_tokens_per_request`` with ``output_tokens_per_request``, or
    ``prompt_to_output_ratio`` (input tokens per output token). ``provider`` is a ``provider`` block
    (or ``None`` for OpenRouter's default routing); ``parameters`` are the request keys sent (they
    matter under ``require_parameters``); ``max_tokens`` is the requests' own, when they carry one:
    an endpoint whose output limit is below it cannot serve them, so it is neither priced nor
    blended (one routing model, as the run's). ``concurrency`` feeds the time estimate only.

    Raises ``ConfigError`` for bad numbers, ``SnapshotError`` when no endpoint lists a price and
    ``PolicyError`` when the block is invalid or admits no priced endpoint.

    Example::

        plan = plan_budget(snap, budget_usd=100, output_tokens="60M", datasets=6,
                           reasoning_share="0.5:0.8")
        print(plan.headline)
    """
    from openrouter_probe.rules.snapshot import Snapshot

    if isinstance(snapshot, Snapshot):
        endpoints = list(snapshot.endpoints)
        model = model or snapshot.model
        provenance: str | None = snapshot.provenance
        where = snapshot.origin
    else:
        endpoints = list(snapshot)
        provenance, where = None, "the endpoints given"
    job = make_job(
        budget_usd=budget_usd,
        output_tokens=output_tokens,
        output_tokens_per_dataset=output_tokens_per_dataset,
        datasets=datasets,
        dataset_names=dataset_names,
        reasoning_share=reasoning_share,
        prompt_tokens_per_request=prompt_tokens_per_request,
        output_tokens_per_request=output_tokens_per_request,
        prompt_to_output_ratio=prompt_to_output_ratio,
        concurrency=concurrency,
    )
    if not any(e.pricing.completion_usd_per_m is not None for e in endpoints):
        raise _no_price(where, model)
    block = provider if isinstance(provider, ProviderBlock) else ProviderBlock.parse(provider or {})
    return _plan(
        job,
        endpoints,
        block,
        frozenset(parameters),
        max_tokens=max_tokens,
        registry=registry if registry is not None else default_registry(),
        model=model,
        provenance=provenance,
        policy=block.to_request() if provider is not None else None,
    )


def _route_priced(
    job: BudgetJob,
    endpoints: Sequence[Endpoint],
    block: ProviderBlock,
    parameters: frozenset[str],
    model: str | None,
    max_tokens: int | None = None,
) -> tuple[RouteDecision, list[tuple[Endpoint, _Price]]]:
    """The routing decision for the job's request, and its admitted endpoints with their prices."""
    params = RequestParams(
        max_tokens=max_tokens,
        parameters=parameters,
        prompt_tokens=job.prompt_tokens_per_request,
        output_tokens=job.output_tokens_per_request,
    )
    decision = route(block, _for_job(endpoints, job.prompt_tokens_per_request), params)
    priced = [
        (c.endpoint, p)
        for c in decision.candidates
        if (p := _price(c.endpoint.pricing, job.shares)) is not None
    ]
    if not priced:
        what = "admits no endpoint" if not decision.candidates else "admits no priced endpoint"
        raise PolicyError(
            f"the provider block {what} of {model or 'the model'} "
            f"({len(decision.excluded)} excluded); loosen it or recompile the policy"
        )
    return decision, priced


def _per_endpoint(
    job: BudgetJob,
    decision: RouteDecision,
    priced: Sequence[tuple[Endpoint, _Price]],
    registry: PrecisionRegistry,
    model: str | None,
) -> list[EndpointBudget]:
    """The job's figures at every admitted, priced endpoint, in routing order."""
    by_tag = {c.endpoint.tag: c for c in decision.candidates}
    return [
        _endpoint_budget(
            job,
            tag=e.tag,
            provider=e.provider_name,
            verdict=registry.verdict(model, e).verdict if model else None,
            role=by_tag[e.tag].role,
            position=by_tag[e.tag].position,
            weight=by_tag[e.tag].weight,
            price=p,
            throughput_tps=_tps(e),
        )
        for e, p in priced
    ]


def _blended(
    job: BudgetJob, decision: RouteDecision, priced: Sequence[tuple[Endpoint, _Price]]
) -> EndpointBudget:
    """The job's figures at the routing blend: traffic-weighted output and input prices (no listed
    completion/reasoning price of its own), and the effective p50 throughput.

    Requests go to endpoint i with probability w_i and take output/tps_i there, so the mean request
    runs at the weighted *harmonic* mean of the throughputs.
    """
    weights = {c.endpoint.tag: Decimal(repr(c.weight)) for c in decision.candidates}
    total = sum((weights[e.tag] for e, _ in priced), Decimal(0))
    if total == 0:
        # Nothing carries traffic in the model (e.g. every weight 0): fall back to an even spread.
        weights = {e.tag: Decimal(1) for e, _ in priced}
        total = Decimal(len(priced))
    out = sum((weights[e.tag] * p.out for e, p in priced), Decimal(0)) / total
    with_in = [(e, p.prompt) for e, p in priced if p.prompt is not None]
    in_total = sum((weights[e.tag] for e, _ in with_in), Decimal(0))
    p_in = (
        sum((weights[e.tag] * p for e, p in with_in), Decimal(0)) / in_total if in_total else None
    )
    inverse, share = 0.0, 0.0
    for e, _ in priced:
        tps = _tps(e)
        if tps:
            w = float(weights[e.tag])
            inverse += w / tps
            share += w
    return _endpoint_budget(
        job,
        tag="blended",
        provider=f"routing weights ({decision.mode})",
        verdict=None,
        role="blend",
        position=None,
        weight=1.0,
        price=_Price(out, None, None, p_in),
        throughput_tps=share / inverse if inverse > 0 else None,
    )


def _plan(
    job: BudgetJob,
    endpoints: Sequence[Endpoint],
    block: ProviderBlock,
    parameters: frozenset[str],
    *,
    max_tokens: int | None,
    registry: PrecisionRegistry,
    model: str | None,
    provenance: str | None,
    policy: dict[str, Any] | None,
) -> BudgetPlan:
    """Route the job's endpoints under ``block``, price every admitted one, then the blend."""
    decision, priced = _route_priced(job, endpoints, block, parameters, model, max_tokens)
    per_endpoint = _per_endpoint(job, decision, priced, registry, model)
    cheapest = min(
        per_endpoint,
        key=lambda b: (
            b.price_out_usd_per_m,
            b.price_in_usd_per_m if b.price_in_usd_per_m is not None else Decimal(0),
            b.position or 0,
        ),
    )
    blended = _blended(job, decision, priced)
    unmatched = _unmatched(block, endpoints)
    window = _cheapest_window(job, priced, {e.tag: e for e in endpoints})
    return BudgetPlan(
        model=model,
        snapshot=provenance,
        budget_usd=job.budget_usd,
        output_tokens=job.output_tokens,
        datasets=len(job.targets),
        dataset_names=job.names,
        output_tokens_per_dataset=job.targets,
        reasoning_share_min=job.shares[0],
        reasoning_share_max=job.shares[1],
        prompt_tokens_per_request=job.prompt_tokens_per_request,
        output_tokens_per_request=job.output_tokens_per_request,
        input_tokens_per_output_token=job.input_per_output,
        input_tokens=job.input_tokens,
        requests=job.requests,
        concurrency=job.concurrency,
        routing_mode=decision.mode,
        policy=policy,
        cheapest=cheapest,
        blended=blended,
        endpoints=tuple(per_endpoint),
        excluded=tuple((x.endpoint.tag, x.reason, x.detail) for x in decision.excluded),
        notes=tuple(_notes(job, decision, per_endpoint, endpoints, unmatched, window)),
        unmatched_entries=unmatched,
        cheapest_window=window,
    )

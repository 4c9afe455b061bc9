"""The budget planner: what a job costs, what a budget buys, and how far it gets.

A target is a number of **billed output tokens** (reasoning included: OpenRouter bills reasoning
tokens as output), in total or per dataset times the number of datasets. Given a budget in USD,
``plan_budget`` works out, for every endpoint the routing model admits (under a ``provider`` block or
OpenRouter's default routing):

- the cost of the target, and the shortfall or headroom against the budget (USD and percent);
- what the budget buys: billed output tokens, and the visible (non-reasoning) part of them for the
  reasoning share's range (``visible = billed × (1 − share)``);
- the feasible target per dataset, and "run until the money runs out": the datasets in order, how
  many complete and how far the last one gets;
- all of it twice: output tokens only, and all-in with the input tokens the requests send (when the
  prompt size is given);
- a time to finish from p50 throughput and concurrency: a lower bound, since a provider's capacity
  is not known.

The headline is the cheapest admitted endpoint; the blended figure weighs every admitted endpoint by
its expected traffic share from ``routing.route`` (ordered, sorted or load-balanced). Money is
``Decimal`` throughout; figures are rounded only where they are shown.

Example (the Kimi K2.5 scenario)::

    from openrouter_probe.budget import plan_budget
    from openrouter_probe.snapshot import bundled_snapshot

    plan = plan_budget(
        bundled_snapshot("moonshotai/kimi-k2.5"),
        budget_usd=100,
        output_tokens=60_000_000,
        datasets=6,
        reasoning_share=(0.5, 0.8),
    )
    plan.cheapest.output_only.cost_usd                            # Decimal('132.0')
    plan.cheapest.output_only.affordable_output_tokens            # 45454545
    plan.cheapest.output_only.affordable_output_tokens_per_dataset  # 7575757
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import ROUND_FLOOR, Decimal
from typing import TYPE_CHECKING, Any, Literal

from openrouter_probe.errors import ConfigError, PolicyError, SnapshotError
from openrouter_probe.precision import PrecisionRegistry, default_registry
from openrouter_probe.quantities import (
    format_tokens,
    format_usd,
    format_usd_per_m,
    parse_decimal,
    parse_reasoning_share,
    parse_token_count,
)
from openrouter_probe.routing import ProviderBlock, RequestParams, RouteDecision, route
from openrouter_probe.schema import Endpoint

if TYPE_CHECKING:
    import pandas as pd

    from openrouter_probe.snapshot import Snapshot

__all__ = [
    "DEFAULT_CONCURRENCY",
    "BudgetPlan",
    "DatasetRun",
    "EndpointBudget",
    "Figures",
    "plan_budget",
]

#: Concurrent requests assumed for the time estimate (the scenario's 2000).
DEFAULT_CONCURRENCY = 2000

#: Said wherever a time to finish is shown.
CAPACITY_CAVEAT = (
    "time to finish = output tokens ÷ (p50 throughput per request × concurrency): a lower bound, "
    "since a provider's capacity (how many of those requests it serves at once) is not known"
)

_MILLION = Decimal(1_000_000)
_HUNDRED = Decimal(100)


# -- results ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DatasetRun:
    """One dataset in "run until the money runs out": what it wanted, got and cost."""

    dataset: str
    target_output_tokens: int
    funded_output_tokens: int
    cost_usd: Decimal
    completed_pct: Decimal
    status: Literal["complete", "partial", "not started"]

    def to_dict(self) -> dict[str, Any]:
        return {
            "dataset": self.dataset,
            "target_output_tokens": self.target_output_tokens,
            "funded_output_tokens": self.funded_output_tokens,
            "cost_usd": float(self.cost_usd),
            "completed_pct": float(self.completed_pct),
            "status": self.status,
        }


@dataclass(frozen=True)
class Figures:
    """What the target costs and what the budget buys at one effective price.

    ``basis`` is ``output_only`` (output tokens at the output price) or ``all_in`` (input tokens
    added: the effective price per million output tokens includes the prompts they need).
    Token counts bought are ``None`` when the price is zero (the budget does not bind).
    """

    basis: Literal["output_only", "all_in"]
    effective_usd_per_m: Decimal
    cost_usd: Decimal
    affordable_output_tokens: int | None
    affordable_output_tokens_per_dataset: int | None
    affordable_visible_tokens_min: int | None
    affordable_visible_tokens_max: int | None
    target_covered_pct: Decimal | None
    shortfall_usd: Decimal
    shortfall_pct: Decimal
    headroom_usd: Decimal
    headroom_pct: Decimal
    datasets_completed: int
    run: tuple[DatasetRun, ...]

    def to_dict(self) -> dict[str, Any]:
        def f(value: Decimal | None) -> float | None:
            return None if value is None else float(value)

        return {
            "basis": self.basis,
            "effective_usd_per_m": float(self.effective_usd_per_m),
            "cost_usd": float(self.cost_usd),
            "affordable_output_tokens": self.affordable_output_tokens,
            "affordable_output_tokens_per_dataset": self.affordable_output_tokens_per_dataset,
            "affordable_visible_tokens_min": self.affordable_visible_tokens_min,
            "affordable_visible_tokens_max": self.affordable_visible_tokens_max,
            "target_covered_pct": f(self.target_covered_pct),
            "shortfall_usd": float(self.shortfall_usd),
            "shortfall_pct": float(self.shortfall_pct),
            "headroom_usd": float(self.headroom_usd),
            "headroom_pct": float(self.headroom_pct),
            "datasets_completed": self.datasets_completed,
            "run": [r.to_dict() for r in self.run],
        }


@dataclass(frozen=True)
class EndpointBudget:
    """The budget figures for one admitted endpoint, or for the routing blend (``tag="blended"``).

    ``weight`` is the expected share of traffic from the routing model (1 for the blend).
    """

    tag: str
    provider: str
    verdict: str | None
    role: str
    position: int | None
    weight: float
    price_in_usd_per_m: Decimal | None
    price_out_usd_per_m: Decimal
    throughput_p50_tps: float | None
    time_to_finish_s: float | None
    output_only: Figures
    all_in: Figures | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "tag": self.tag,
            "provider": self.provider,
            "verdict": self.verdict,
            "role": self.role,
            "position": self.position,
            "weight": self.weight,
            "price_in_usd_per_m": (
                None if self.price_in_usd_per_m is None else float(self.price_in_usd_per_m)
            ),
            "price_out_usd_per_m": float(self.price_out_usd_per_m),
            "throughput_p50_tps": self.throughput_p50_tps,
            "time_to_finish_s": self.time_to_finish_s,
            "time_to_finish_h": None
            if self.time_to_finish_s is None
            else self.time_to_finish_s / 3600,
            "output_only": self.output_only.to_dict(),
            "all_in": None if self.all_in is None else self.all_in.to_dict(),
        }


@dataclass(frozen=True)
class BudgetPlan:
    """Everything ``plan_budget`` worked out; ``to_dict()`` gives every figure by name."""

    model: str | None
    snapshot: str | None
    budget_usd: Decimal
    output_tokens: int
    datasets: int
    dataset_names: tuple[str, ...]
    output_tokens_per_dataset: tuple[int, ...]
    reasoning_share_min: Decimal
    reasoning_share_max: Decimal
    prompt_tokens_per_request: int | None
    output_tokens_per_request: int | None
    input_tokens_per_output_token: Decimal | None
    input_tokens: int | None
    requests: int | None
    concurrency: int
    routing_mode: str
    policy: dict[str, Any] | None
    cheapest: EndpointBudget
    blended: EndpointBudget
    endpoints: tuple[EndpointBudget, ...]
    excluded: tuple[tuple[str, str, str], ...]
    notes: tuple[str, ...] = field(default=())

    @property
    def target_visible_tokens_min(self) -> int:
        """Visible tokens in the target at the highest reasoning share."""
        return _visible(self.output_tokens, self.reasoning_share_max)

    @property
    def target_visible_tokens_max(self) -> int:
        """Visible tokens in the target at the lowest reasoning share."""
        return _visible(self.output_tokens, self.reasoning_share_min)

    @property
    def headline(self) -> str:
        """One sentence with the scenario's numbers: cost, shortfall, what the budget buys."""
        c, fig = self.cheapest, self.cheapest.output_only
        where = "over" if fig.shortfall_usd > 0 else "under"
        pct = fig.shortfall_pct if fig.shortfall_usd > 0 else fig.headroom_pct
        per = (
            f", {format_tokens(fig.affordable_output_tokens_per_dataset)} per dataset over "
            f"{self.datasets}"
            if self.datasets > 1
            else ""
        )
        text = (
            f"{format_tokens(self.output_tokens)} output tokens at the cheapest admitted "
            f"{format_usd_per_m(c.price_out_usd_per_m)} ({c.provider}) cost "
            f"{format_usd(fig.cost_usd)}, {pct:.0f}% {where} the {format_usd(self.budget_usd)} "
            f"budget; {format_usd(self.budget_usd)} buys {_buys(fig.affordable_output_tokens)} "
            f"output tokens{per}"
        )
        if c.all_in is not None:
            text += (
                f"; all-in with the prompts ({format_usd(c.all_in.effective_usd_per_m)} per "
                f"million output tokens) the target costs {format_usd(c.all_in.cost_usd)} and "
                f"{format_usd(self.budget_usd)} buys {_buys(c.all_in.affordable_output_tokens)} "
                "output tokens"
            )
        return text

    def __repr__(self) -> str:
        c = self.cheapest
        return (
            f"<BudgetPlan {self.model or 'model'}: {format_tokens(self.output_tokens)} output "
            f"tokens, {format_usd(self.budget_usd)} budget, {len(self.endpoints)} endpoints; "
            f"cheapest {c.tag} {format_usd_per_m(c.price_out_usd_per_m)} costs "
            f"{format_usd(c.output_only.cost_usd)}>"
        )

    def to_dict(self) -> dict[str, Any]:
        """Every figure by name, units in the names (JSON-ready: floats, ints, strings)."""
        return {
            "model": self.model,
            "snapshot": self.snapshot,
            "headline": self.headline,
            "budget_usd": float(self.budget_usd),
            "output_tokens": self.output_tokens,
            "datasets": self.datasets,
            "dataset_names": list(self.dataset_names),
            "output_tokens_per_dataset": list(self.output_tokens_per_dataset),
            "reasoning_share_min": float(self.reasoning_share_min),
            "reasoning_share_max": float(self.reasoning_share_max),
            "target_visible_tokens_min": self.target_visible_tokens_min,
            "target_visible_tokens_max": self.target_visible_tokens_max,
            "prompt_tokens_per_request": self.prompt_tokens_per_request,
            "output_tokens_per_request": self.output_tokens_per_request,
            "input_tokens_per_output_token": None
            if self.input_tokens_per_output_token is None
            else float(self.input_tokens_per_output_token),
            "input_tokens": self.input_tokens,
            "requests": self.requests,
            "concurrency": self.concurrency,
            "routing_mode": self.routing_mode,
            "policy": self.policy,
            "cheapest": self.cheapest.to_dict(),
            "blended": self.blended.to_dict(),
            "endpoints": [e.to_dict() for e in self.endpoints],
            "excluded": [
                {"tag": tag, "reason": reason, "detail": detail}
                for tag, reason, detail in self.excluded
            ],
            "notes": list(self.notes),
        }

    def endpoint_rows(self) -> list[dict[str, Any]]:
        """One plain row per admitted endpoint (then the blend): prices, cost, what it buys."""
        rows = []
        for e in (*self.endpoints, self.blended):
            out, all_in = e.output_only, e.all_in
            rows.append(
                {
                    "tag": e.tag,
                    "provider": e.provider,
                    "verdict": e.verdict,
                    "role": e.role,
                    "weight": e.weight,
                    "price_in_usd_per_m": _f(e.price_in_usd_per_m),
                    "price_out_usd_per_m": float(e.price_out_usd_per_m),
                    "cost_usd": float(out.cost_usd),
                    "shortfall_usd": float(out.shortfall_usd),
                    "shortfall_pct": float(out.shortfall_pct),
                    "over_budget_pct": float(out.shortfall_pct - out.headroom_pct),
                    "affordable_output_tokens": out.affordable_output_tokens,
                    "affordable_output_tokens_per_dataset": out.affordable_output_tokens_per_dataset,
                    "affordable_visible_tokens_min": out.affordable_visible_tokens_min,
                    "affordable_visible_tokens_max": out.affordable_visible_tokens_max,
                    "datasets_completed": out.datasets_completed,
                    "all_in_cost_usd": None if all_in is None else float(all_in.cost_usd),
                    "all_in_affordable_output_tokens": None
                    if all_in is None
                    else all_in.affordable_output_tokens,
                    "time_to_finish_h": None
                    if e.time_to_finish_s is None
                    else e.time_to_finish_s / 3600,
                }
            )
        return rows

    def endpoints_frame(self) -> pd.DataFrame:
        """``endpoint_rows`` as a DataFrame (nullable integers for the token counts)."""
        import pandas as pd

        frame = pd.DataFrame(self.endpoint_rows())
        for column in (
            "affordable_output_tokens",
            "affordable_output_tokens_per_dataset",
            "affordable_visible_tokens_min",
            "affordable_visible_tokens_max",
            "all_in_affordable_output_tokens",
        ):
            frame[column] = frame[column].astype("Int64")
        for column in ("price_in_usd_per_m", "all_in_cost_usd", "time_to_finish_h"):
            frame[column] = frame[column].astype("float64")
        return frame

    def run_frame(self, *, which: Literal["cheapest", "blended"] = "cheapest") -> pd.DataFrame:
        """ "Run until the money runs out" at the cheapest (or blended) price, one row per dataset,
        output-only and, when the prompt size is known, all-in."""
        import pandas as pd

        entry = self.cheapest if which == "cheapest" else self.blended
        rows = []
        for figures in (entry.output_only, entry.all_in):
            if figures is None:
                continue
            for r in figures.run:
                rows.append({"basis": figures.basis, **r.to_dict()})
        return pd.DataFrame(rows)


def _f(value: Decimal | None) -> float | None:
    return None if value is None else float(value)


def _buys(tokens: int | None) -> str:
    return "unlimited" if tokens is None else format_tokens(tokens)


def _visible(billed: int, share: Decimal) -> int:
    return int((Decimal(billed) * (1 - share)).to_integral_value(rounding=ROUND_FLOOR))


def _floor(value: Decimal) -> int:
    return int(value.to_integral_value(rounding=ROUND_FLOOR))


# -- planning ---------------------------------------------------------------------------------------


def _run(
    names: Sequence[str], targets: Sequence[int], budget: Decimal, price_usd_per_m: Decimal
) -> tuple[DatasetRun, ...]:
    """Spend ``budget`` on the datasets in order at ``price_usd_per_m`` until it runs out."""
    remaining = budget
    runs = []
    for name, target in zip(names, targets, strict=True):
        full_cost = Decimal(target) * price_usd_per_m / _MILLION
        if price_usd_per_m == 0 or remaining >= full_cost:
            funded, cost = target, full_cost
        else:
            funded = min(target, _floor(remaining / price_usd_per_m * _MILLION))
            cost = Decimal(funded) * price_usd_per_m / _MILLION
        remaining -= cost
        pct = Decimal(funded) / Decimal(target) * _HUNDRED if target else _HUNDRED
        status: Literal["complete", "partial", "not started"] = (
            "complete" if funded >= target else "partial" if funded > 0 else "not started"
        )
        runs.append(DatasetRun(name, target, funded, cost, pct, status))
    return tuple(runs)


@dataclass(frozen=True)
class _Job:
    budget_usd: Decimal
    output_tokens: int
    names: tuple[str, ...]
    targets: tuple[int, ...]
    shares: tuple[Decimal, Decimal]
    input_per_output: Decimal | None
    input_tokens: int | None
    concurrency: int


def _figures(
    basis: Literal["output_only", "all_in"],
    job: _Job,
    *,
    effective_usd_per_m: Decimal,
    cost_usd: Decimal,
) -> Figures:
    budget_usd, output_tokens, shares = job.budget_usd, job.output_tokens, job.shares
    if effective_usd_per_m > 0:
        affordable: int | None = _floor(budget_usd / effective_usd_per_m * _MILLION)
    else:
        affordable = None
    per_dataset = None if affordable is None else affordable // len(job.targets)
    over = cost_usd - budget_usd
    run = _run(job.names, job.targets, budget_usd, effective_usd_per_m)
    return Figures(
        basis=basis,
        effective_usd_per_m=effective_usd_per_m,
        cost_usd=cost_usd,
        affordable_output_tokens=affordable,
        affordable_output_tokens_per_dataset=per_dataset,
        affordable_visible_tokens_min=None
        if affordable is None
        else _visible(affordable, shares[1]),
        affordable_visible_tokens_max=None
        if affordable is None
        else _visible(affordable, shares[0]),
        target_covered_pct=None
        if affordable is None or output_tokens == 0
        else Decimal(affordable) / Decimal(output_tokens) * _HUNDRED,
        shortfall_usd=max(over, Decimal(0)),
        shortfall_pct=max(over, Decimal(0)) / budget_usd * _HUNDRED,
        headroom_usd=max(-over, Decimal(0)),
        headroom_pct=max(-over, Decimal(0)) / budget_usd * _HUNDRED,
        datasets_completed=sum(r.status == "complete" for r in run),
        run=run,
    )


def _endpoint_budget(
    job: _Job,
    *,
    tag: str,
    provider: str,
    verdict: str | None,
    role: str,
    position: int | None,
    weight: float,
    price_in: Decimal | None,
    price_out: Decimal,
    throughput_tps: float | None,
) -> EndpointBudget:
    output_only = _figures(
        "output_only",
        job,
        effective_usd_per_m=price_out,
        cost_usd=Decimal(job.output_tokens) * price_out / _MILLION,
    )
    all_in = None
    if job.input_per_output is not None and job.input_tokens is not None and price_in is not None:
        all_in = _figures(
            "all_in",
            job,
            effective_usd_per_m=price_out + job.input_per_output * price_in,
            cost_usd=(Decimal(job.output_tokens) * price_out + Decimal(job.input_tokens) * price_in)
            / _MILLION,
        )
    time_s = (
        job.output_tokens / (throughput_tps * job.concurrency)
        if throughput_tps is not None and throughput_tps > 0
        else None
    )
    return EndpointBudget(
        tag=tag,
        provider=provider,
        verdict=verdict,
        role=role,
        position=position,
        weight=weight,
        price_in_usd_per_m=price_in,
        price_out_usd_per_m=price_out,
        throughput_p50_tps=throughput_tps,
        time_to_finish_s=time_s,
        output_only=output_only,
        all_in=all_in,
    )


def _split(total: int, parts: int) -> tuple[int, ...]:
    """``total`` split into ``parts`` near-equal whole targets that sum to it exactly."""
    base, extra = divmod(total, parts)
    return tuple(base + (1 if i < extra else 0) for i in range(parts))


def _blend(
    decision: RouteDecision, priced: Sequence[tuple[Endpoint, Decimal, Decimal | None]]
) -> tuple[Decimal, Decimal | None, float | None]:
    """Traffic-weighted output and input prices, and the effective p50 throughput, of the blend.

    Requests go to endpoint i with probability w_i and take output/tps_i there, so the mean request
    runs at the weighted *harmonic* mean of the throughputs.
    """
    weights = {c.endpoint.tag: Decimal(repr(c.weight)) for c in decision.candidates}
    total = sum((weights[e.tag] for e, _, _ in priced), Decimal(0))
    if total == 0:
        # Nothing carries traffic in the model (e.g. every weight 0): fall back to an even spread.
        weights = {e.tag: Decimal(1) for e, _, _ in priced}
        total = Decimal(len(priced))
    out = sum((weights[e.tag] * p_out for e, p_out, _ in priced), Decimal(0)) / total
    with_in = [(e, p_in) for e, _, p_in in priced if p_in is not None]
    in_total = sum((weights[e.tag] for e, _ in with_in), Decimal(0))
    p_in_blend = (
        sum((weights[e.tag] * p for e, p in with_in), Decimal(0)) / in_total if in_total else None
    )
    inverse, share = 0.0, 0.0
    for e, _, _ in priced:
        tps = e.throughput_last_30m.p50 if e.throughput_last_30m else None
        if tps:
            w = float(weights[e.tag])
            inverse += w / float(tps)
            share += w
    tps_blend = share / inverse if inverse > 0 else None
    return out, p_in_blend, tps_blend


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
    matter under ``require_parameters``). ``concurrency`` feeds the time estimate only.

    Raises ``ConfigError`` for bad numbers, ``SnapshotError`` when no endpoint lists a price and
    ``PolicyError`` when the block is invalid or admits no priced endpoint.

    Example::

        plan = plan_budget(snap, budget_usd=100, output_tokens="60M", datasets=6,
                           reasoning_share="0.5:0.8")
        print(plan.headline)
    """
    from openrouter_probe.snapshot import Snapshot

    if isinstance(snapshot, Snapshot):
        endpoints = list(snapshot.endpoints)
        model = model or snapshot.model
        provenance: str | None = snapshot.provenance
        where = snapshot.origin
    else:
        endpoints = list(snapshot)
        provenance, where = None, "the endpoints given"

    budget = parse_decimal(budget_usd, "budget_usd (--budget-usd)")
    if budget <= 0:
        raise ConfigError(
            f"budget_usd (--budget-usd): {budget_usd} is not a positive amount of USD; give e.g. 100"
        )
    if isinstance(datasets, bool) or not isinstance(datasets, int) or datasets < 1:
        raise ConfigError(f"datasets (--datasets): {datasets!r} must be a whole number >= 1")
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise ConfigError(
            f"concurrency (--concurrency): {concurrency!r} must be a whole number >= 1"
        )
    total = (
        None if output_tokens is None else parse_token_count(output_tokens, what="--output-tokens")
    )
    per = (
        None
        if output_tokens_per_dataset is None
        else parse_token_count(output_tokens_per_dataset, what="--tokens-per-dataset")
    )
    if total is None and per is None:
        raise ConfigError(
            "give the target: output_tokens (--output-tokens 60M) or "
            "output_tokens_per_dataset (--tokens-per-dataset 10M) with datasets"
        )
    if total is not None and per is not None and total != per * datasets:
        raise ConfigError(
            f"--output-tokens {format_tokens(total)} is not --tokens-per-dataset "
            f"{format_tokens(per)} × --datasets {datasets}; give one of them"
        )
    target = total if total is not None else (per or 0) * datasets
    if target <= 0:
        raise ConfigError("output_tokens (--output-tokens): the target must be more than 0 tokens")
    targets = _split(target, datasets)
    names = tuple(dataset_names) if dataset_names else tuple(str(i + 1) for i in range(datasets))
    if len(names) != datasets:
        raise ConfigError(
            f"dataset_names (--dataset-names): {len(names)} names for {datasets} datasets; "
            "give one name per dataset"
        )
    shares = parse_reasoning_share(reasoning_share, what="--reasoning-share")

    prompt_n = (
        None
        if prompt_tokens_per_request is None
        else parse_token_count(prompt_tokens_per_request, what="--prompt-tokens")
    )
    out_n = (
        None
        if output_tokens_per_request is None
        else parse_token_count(output_tokens_per_request, what="--output-tokens-per-request")
    )
    if out_n == 0:
        raise ConfigError("--output-tokens-per-request must be more than 0")
    ratio: Decimal | None = None
    if prompt_to_output_ratio is not None:
        ratio = parse_decimal(prompt_to_output_ratio, "--prompt-ratio")
        if ratio < 0:
            raise ConfigError(f"--prompt-ratio: {prompt_to_output_ratio} must be >= 0")
        if prompt_n is not None and out_n is not None:
            raise ConfigError(
                "give --prompt-ratio or --prompt-tokens with --output-tokens-per-request, not both"
            )
    elif prompt_n is not None:
        if out_n is None:
            raise ConfigError(
                "--prompt-tokens needs --output-tokens-per-request (billed output per request, "
                "reasoning included) to count the requests; or give --prompt-ratio instead"
            )
        ratio = Decimal(prompt_n) / Decimal(out_n)
    requests = None if out_n is None else math.ceil(target / out_n)
    input_tokens = None
    if ratio is not None:
        input_tokens = (
            requests * prompt_n
            if requests is not None and prompt_n is not None
            else _floor(Decimal(target) * ratio)
        )

    priced_all = [e for e in endpoints if e.pricing.completion_usd_per_m is not None]
    if not priced_all:
        raise SnapshotError(
            f"{where}: no endpoint of {model or 'the model'} lists an output price, so there is "
            "nothing to plan with; take a fresh snapshot (openrouter-probe endpoints MODEL --save)"
        )
    params = RequestParams(
        parameters=frozenset(parameters), prompt_tokens=prompt_n, output_tokens=out_n
    )
    decision = route(provider, endpoints, params)
    reg = registry if registry is not None else default_registry()
    priced = []
    for c in decision.candidates:
        p_out = c.endpoint.pricing.completion_usd_per_m
        if p_out is not None:
            priced.append((c.endpoint, p_out, c.endpoint.pricing.prompt_usd_per_m))
    if not priced:
        what = "admits no endpoint" if not decision.candidates else "admits no priced endpoint"
        raise PolicyError(
            f"the provider block {what} of {model or 'the model'} "
            f"({len(decision.excluded)} excluded); loosen it or recompile the policy"
        )

    job = _Job(budget, target, names, targets, shares, ratio, input_tokens, concurrency)
    by_tag = {c.endpoint.tag: c for c in decision.candidates}
    per_endpoint = []
    for e, p_out, p_in in priced:
        c = by_tag[e.tag]
        per_endpoint.append(
            _endpoint_budget(
                job,
                tag=e.tag,
                provider=e.provider_name,
                verdict=reg.verdict(model or "", e).verdict if model else None,
                role=c.role,
                position=c.position,
                weight=c.weight,
                price_in=p_in,
                price_out=p_out,
                throughput_tps=_tps(e),
            )
        )
    cheapest = min(
        per_endpoint,
        key=lambda b: (
            b.price_out_usd_per_m,
            b.price_in_usd_per_m if b.price_in_usd_per_m is not None else Decimal(0),
            b.position or 0,
        ),
    )
    out_blend, in_blend, tps_blend = _blend(decision, priced)
    blended = _endpoint_budget(
        job,
        tag="blended",
        provider=f"routing weights ({decision.mode})",
        verdict=None,
        role="blend",
        position=None,
        weight=1.0,
        price_in=in_blend,
        price_out=out_blend,
        throughput_tps=tps_blend,
    )
    notes = [CAPACITY_CAVEAT, *decision.notes]
    if ratio is None:
        notes.append(
            "all-in figures need the prompt size: give prompt_tokens_per_request with "
            "output_tokens_per_request (--prompt-tokens, --output-tokens-per-request) or "
            "prompt_to_output_ratio (--prompt-ratio)"
        )
    if any(b.throughput_p50_tps is None for b in per_endpoint):
        notes.append("some endpoints carry no throughput stats (they need an API key): no time")
    block = provider if isinstance(provider, ProviderBlock) else ProviderBlock.parse(provider or {})
    return BudgetPlan(
        model=model,
        snapshot=provenance,
        budget_usd=budget,
        output_tokens=target,
        datasets=datasets,
        dataset_names=names,
        output_tokens_per_dataset=targets,
        reasoning_share_min=shares[0],
        reasoning_share_max=shares[1],
        prompt_tokens_per_request=prompt_n,
        output_tokens_per_request=out_n,
        input_tokens_per_output_token=ratio,
        input_tokens=input_tokens,
        requests=requests,
        concurrency=concurrency,
        routing_mode=decision.mode,
        policy=block.to_request() if provider is not None else None,
        cheapest=cheapest,
        blended=blended,
        endpoints=tuple(per_endpoint),
        excluded=tuple((x.endpoint.tag, x.reason, x.detail) for x in decision.excluded),
        notes=tuple(notes),
    )


def _tps(e: Endpoint) -> float | None:
    thr = e.throughput_last_30m
    return None if thr is None or thr.p50 is None else float(thr.p50)

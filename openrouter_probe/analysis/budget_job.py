"""The job a budget is planned for (``make_job``: every error names its option and the fix), and
what it costs at one price (``job_figures``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Literal

from openrouter_probe.analysis.budget_plan import DatasetRun, Figures, floor_tokens, visible_tokens
from openrouter_probe.errors import ConfigError, Message, OptionError, Shown
from openrouter_probe.rules.quantities import (
    format_tokens,
    parse_decimal,
    parse_reasoning_share,
    parse_token_count,
    positive_usd,
    whole_number,
)

__all__ = ["BudgetJob", "job_figures", "make_job", "time_to_finish_s"]

_MILLION = Decimal(1_000_000)
_HUNDRED = Decimal(100)

Status = Literal["complete", "partial", "not started"]


@dataclass(frozen=True)
class BudgetJob:
    """A validated job: the target split over the datasets, the reasoning share, the prompt mix.

    ``input_per_output`` is input tokens per billed output token (``None`` without a prompt size);
    ``input_tokens`` the input tokens the whole target sends, ``requests`` how many requests.
    """

    budget_usd: Decimal
    output_tokens: int
    names: tuple[str, ...]
    targets: tuple[int, ...]
    shares: tuple[Decimal, Decimal]
    prompt_tokens_per_request: int | None
    output_tokens_per_request: int | None
    input_per_output: Decimal | None
    input_tokens: int | None
    requests: int | None
    concurrency: int


def _tokens(value: int | str | None, what: str) -> int | None:
    return None if value is None else parse_token_count(value, what=what)


def _target(total_given: int | str | None, per_given: int | str | None, datasets: int) -> int:
    total = _tokens(total_given, "output_tokens")
    per = _tokens(per_given, "output_tokens_per_dataset")
    if total is None and per is None:  # a usage error, as every refused option (exit 2)
        raise OptionError(
            "give the target: {output_tokens=60M}, or {output_tokens_per_dataset=10M} with "
            "{datasets}",
            output_tokens=None,
            output_tokens_per_dataset=None,
            datasets=datasets,
        )
    if total is not None and per is not None and total != per * datasets:
        raise OptionError(
            "{output_tokens=} is not {output_tokens_per_dataset=} × {datasets=}; give one of them",
            output_tokens=Shown(format_tokens(total)),
            output_tokens_per_dataset=Shown(format_tokens(per)),
            datasets=datasets,
        )
    target = total if total is not None else (per or 0) * datasets
    if target <= 0:
        raise ConfigError(
            Message(
                "budget-target-zero",
                "the target must be more than 0 tokens: give {output_tokens} or "
                "{output_tokens_per_dataset} above 0",
            )
        )
    return target


def _split(total: int, parts: int) -> tuple[int, ...]:
    """``total`` split into ``parts`` near-equal whole targets that sum to it exactly (the first
    datasets take the remainder, one token each)."""
    base, extra = divmod(total, parts)
    return tuple(base + (1 if i < extra else 0) for i in range(parts))


def _names(dataset_names: Sequence[str] | None, datasets: int) -> tuple[str, ...]:
    names = tuple(dataset_names) if dataset_names else tuple(str(i + 1) for i in range(datasets))
    if len(names) != datasets:
        raise OptionError(
            f"{{dataset_names:bare}}: {len(names)} names for {datasets} datasets; give one name "
            "per dataset",
            dataset_names=",".join(names),
            datasets=datasets,
        )
    return names


def _ratio(prompt_n: int | None, out_n: int | None, given: Any) -> Decimal | None:
    """Input tokens per output token, from ``prompt_to_output_ratio`` or the two per-request sizes."""
    if given is not None:
        ratio = parse_decimal(given, "prompt_to_output_ratio")
        if ratio < 0:
            raise ConfigError(
                Message(
                    "ratio-negative",
                    "{prompt_to_output_ratio:bare}: {given:s} must be >= 0",
                    given=str(given),
                )
            )
        if prompt_n is not None and out_n is not None:
            raise OptionError(
                "give {prompt_to_output_ratio:bare} or {prompt_tokens_per_request:bare} with "
                "{output_tokens_per_request:bare}, not both",
                prompt_to_output_ratio=given,
                prompt_tokens_per_request=prompt_n,
                output_tokens_per_request=out_n,
            )
        return ratio
    if prompt_n is None:
        return None
    if out_n is None:
        raise OptionError(
            "{prompt_tokens_per_request:bare} needs {output_tokens_per_request:bare} (billed "
            "output per request, reasoning included) to count the requests; or give "
            "{prompt_to_output_ratio:bare} instead",
            prompt_tokens_per_request=prompt_n,
            output_tokens_per_request=None,
            prompt_to_output_ratio=None,
        )
    return Decimal(prompt_n) / Decimal(out_n)


def make_job(
    *,
    budget_usd: Any,
    output_tokens: int | str | None,
    output_tokens_per_dataset: int | str | None,
    datasets: int,
    dataset_names: Sequence[str] | None,
    reasoning_share: Any,
    prompt_tokens_per_request: int | str | None,
    output_tokens_per_request: int | str | None,
    prompt_to_output_ratio: Any,
    concurrency: int,
) -> BudgetJob:
    """Validate the job's numbers (see ``plan_budget``); raise ``ConfigError`` naming the option."""
    budget = positive_usd(budget_usd, "budget_usd")
    datasets = whole_number(datasets, "datasets")
    concurrency = whole_number(concurrency, "concurrency")
    target = _target(output_tokens, output_tokens_per_dataset, datasets)
    names = _names(dataset_names, datasets)
    shares = parse_reasoning_share(reasoning_share, what="reasoning_share")
    prompt_n = _tokens(prompt_tokens_per_request, "prompt_tokens_per_request")
    out_n = _tokens(output_tokens_per_request, "output_tokens_per_request")
    if out_n == 0:
        raise ConfigError(
            Message(
                "per-request-zero",
                "{output_tokens_per_request=}: must be more than 0",
                output_tokens_per_request=0,
            )
        )
    ratio = _ratio(prompt_n, out_n, prompt_to_output_ratio)
    requests = None if out_n is None else math.ceil(target / out_n)
    input_tokens = None
    if ratio is not None:
        input_tokens = (
            requests * prompt_n
            if requests is not None and prompt_n is not None
            else floor_tokens(Decimal(target) * ratio)
        )
    return BudgetJob(
        budget_usd=budget,
        output_tokens=target,
        names=names,
        targets=_split(target, datasets),
        shares=shares,
        prompt_tokens_per_request=prompt_n,
        output_tokens_per_request=out_n,
        input_per_output=ratio,
        input_tokens=input_tokens,
        requests=requests,
        concurrency=concurrency,
    )


def _run(job: BudgetJob, price_usd_per_m: Decimal) -> tuple[DatasetRun, ...]:
    """Spend the budget on the datasets in order at ``price_usd_per_m`` until it runs out."""
    remaining = job.budget_usd
    runs = []
    for name, target in zip(job.names, job.targets, strict=True):
        funded = (
            target
            if price_usd_per_m == 0
            else min(target, floor_tokens(remaining / price_usd_per_m * _MILLION))
        )
        cost = Decimal(funded) * price_usd_per_m / _MILLION
        remaining -= cost
        pct = Decimal(funded) / Decimal(target) * _HUNDRED if target else _HUNDRED
        status: Status = "complete" if funded >= target else "partial" if funded else "not started"
        runs.append(DatasetRun(name, target, funded, cost, pct, status))
    return tuple(runs)


def _figures(
    basis: Literal["output_only", "all_in"],
    job: BudgetJob,
    *,
    effective_usd_per_m: Decimal,
    cost_usd: Decimal,
) -> Figures:
    budget_usd = job.budget_usd
    affordable = (
        floor_tokens(budget_usd / effective_usd_per_m * _MILLION)
        if effective_usd_per_m > 0
        else None
    )
    over = cost_usd - budget_usd
    shortfall, headroom = max(over, Decimal(0)), max(-over, Decimal(0))
    run = _run(job, effective_usd_per_m)
    low, high = job.shares
    return Figures(
        basis=basis,
        effective_usd_per_m=effective_usd_per_m,
        cost_usd=cost_usd,
        affordable_output_tokens=affordable,
        affordable_output_tokens_per_dataset=None
        if affordable is None
        else affordable // len(job.targets),
        affordable_visible_tokens_min=None
        if affordable is None
        else visible_tokens(affordable, high),
        affordable_visible_tokens_max=None
        if affordable is None
        else visible_tokens(affordable, low),
        target_covered_pct=None
        if affordable is None
        else Decimal(affordable) / Decimal(job.output_tokens) * _HUNDRED,
        shortfall_usd=shortfall,
        shortfall_pct=shortfall / budget_usd * _HUNDRED,
        headroom_usd=headroom,
        headroom_pct=headroom / budget_usd * _HUNDRED,
        datasets_completed=sum(r.status == "complete" for r in run),
        run=run,
    )


def job_figures(
    job: BudgetJob, *, price_out_usd_per_m: Decimal, price_in_usd_per_m: Decimal | None
) -> tuple[Figures, Figures | None]:
    """Price ``job`` output-only and, when the prompt size and the input price are known, all-in
    (the input tokens' cost spread over the output tokens)."""
    p_out, p_in = price_out_usd_per_m, price_in_usd_per_m
    output_only = _figures(
        "output_only",
        job,
        effective_usd_per_m=p_out,
        cost_usd=Decimal(job.output_tokens) * p_out / _MILLION,
    )
    if job.input_per_output is None or job.input_tokens is None or p_in is None:
        return output_only, None
    all_in = _figures(
        "all_in",
        job,
        effective_usd_per_m=p_out + job.input_per_output * p_in,
        cost_usd=(Decimal(job.output_tokens) * p_out + Decimal(job.input_tokens) * p_in) / _MILLION,
    )
    return output_only, all_in


def time_to_finish_s(job: BudgetJob, throughput_tps: float | None) -> float | None:
    """Seconds to produce the target at ``throughput_tps`` per request × the job's concurrency."""
    if throughput_tps is None or throughput_tps <= 0:
        return None
    return job.output_tokens / (throughput_tps * job.concurrency)

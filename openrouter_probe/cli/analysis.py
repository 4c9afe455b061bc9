"""``openrouter-probe budget``: plan a job against a budget (``cli.matrix``: the matrix)."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any

import click

from openrouter_probe.cli._common import (
    budget_option,
    checked_by,
    cli,
    load_snapshot_for,
    note,
    plot_option,
    said,
    save_plot,
    snapshot_flags,
)
from openrouter_probe.cli.options import AliasedOption, format_option, snapshot_options
from openrouter_probe.cli.tables import echo_text, render_rows
from openrouter_probe.errors import ConfigError
from openrouter_probe.rules.quantities import (
    parse_decimal,
    parse_reasoning_share,
    parse_token_count,
)

if TYPE_CHECKING:
    from openrouter_probe.analysis.budget_plan import BudgetPlan


def _prompt_ratio(value: str) -> object:
    if parse_decimal(value, "--prompt-ratio") < 0:
        raise ConfigError(f"--prompt-ratio: {value} must be >= 0")
    return value


def _policy_block(compiled: Any, policy_path: str, model: str) -> dict[str, Any]:
    """The ``provider`` block of a compiled policy for ``model``; another model's is an error."""
    from openrouter_probe.errors import PolicyError

    if compiled.model != model:
        raise PolicyError(
            f"the policy is for {compiled.model}, not {model}; compile one for {model} "
            "or pass the matching MODEL",
            source=policy_path,
        )
    block: dict[str, Any] = compiled.provider.to_request()
    return block


def _warn_if_stale(compiled: Any, policy_path: str, snap: Any) -> None:
    """Warn (stderr) when the policy no longer fits the snapshot: an ``order`` entry that serves
    nothing any more, or any other drift that matters, with the command that fixes it."""
    from openrouter_probe.policy.drift import check_policy
    from openrouter_probe.rules.routing import matches

    fix = f"openrouter-probe policy check {policy_path}{snapshot_flags()} --write"
    gone = [
        entry
        for entry in compiled.provider.order or ()
        if not any(matches(entry, e) for e in snap.endpoints)
    ]
    if gone:
        which = "which no longer serves" if len(gone) == 1 else "which no longer serve"
        note(
            f"warning: {policy_path} is stale: provider.order names {', '.join(gone)}, {which} "
            f"{snap.model} (OpenRouter skips {'it' if len(gone) == 1 else 'them'}). "
            f"Re-compile it: {fix}"
        )
        return
    if not compiled.decisions:
        return
    report = check_policy(compiled, snap, policy_file=policy_path)
    drift = [c for c in report.changes if c.matters]
    if drift:
        note(
            f"warning: {policy_path} has drifted since it was compiled ({drift[0].message}"
            f"{f'; {len(drift) - 1} more' if len(drift) > 1 else ''}). Re-compile it: {fix}"
        )


@cli.command()
@click.argument("model")
@snapshot_options
@budget_option("The money to spend, in USD (e.g. 100).", required=True)
@click.option(
    "--output-tokens",
    "output_tokens",
    callback=checked_by(partial(parse_token_count, what="--output-tokens")),
    metavar="TOKENS",
    help="Billed output tokens wanted in total, reasoning included (60M, 7.5M, 500k).",
)
@click.option(
    "--target-tokens",
    "output_tokens_per_dataset",
    cls=AliasedOption,
    aliases=("--tokens-per-dataset",),
    callback=checked_by(partial(parse_token_count, what="--target-tokens")),
    metavar="TOKENS",
    help="Billed output tokens wanted per dataset (instead of --output-tokens).",
)
@click.option(
    "--datasets",
    type=click.IntRange(min=1),
    help="Number of datasets the target is split over, run in order [default: 1, or the number "
    "of --dataset-names].",
)
@click.option(
    "--dataset-names",
    "dataset_names",
    metavar="A,B,...",
    help="Names of the datasets in run order (e.g. B3,B4,B5,B6,B7,B8).",
)
@click.option(
    "--reasoning-share",
    "reasoning_share",
    default="0",
    show_default=True,
    metavar="S|LOW:HIGH",
    callback=checked_by(partial(parse_reasoning_share, what="--reasoning-share")),
    help="Reasoning part of output: a fraction in [0, 1) or a range such as 0.5:0.8.",
)
@click.option(
    "--prompt-tokens",
    "prompt_tokens_per_request",
    callback=checked_by(partial(parse_token_count, what="--prompt-tokens")),
    metavar="TOKENS",
    help="Average prompt tokens per request (with --output-tokens-per-request: all-in figures).",
)
@click.option(
    "--output-tokens-per-request",
    "output_tokens_per_request",
    callback=checked_by(partial(parse_token_count, what="--output-tokens-per-request")),
    metavar="TOKENS",
    help="Average billed output tokens per request, reasoning included.",
)
@click.option(
    "--prompt-ratio",
    "prompt_to_output_ratio",
    metavar="R",
    callback=checked_by(_prompt_ratio),
    help="Input tokens per output token (instead of the two per-request sizes).",
)
@click.option(
    "--concurrency",
    type=click.IntRange(min=1),
    default=2000,
    show_default=True,
    metavar="N",
    help="Concurrent requests, for the time estimate.",
)
@click.option(
    "--policy",
    "policy_path",
    type=click.Path(exists=True, dir_okay=False),
    metavar="POLICY",
    help="A compiled policy YAML: plan under its provider block (admitted endpoints, weights).",
)
@click.option(
    "--answers",
    "answers_path",
    type=click.Path(exists=True, dir_okay=False),
    metavar="OUT.jsonl",
    help="An earlier run's output (a pilot's): useful rows per dollar, whole as its answers were "
    "(with --output-tokens-per-request), and the --max-tokens that keeps 95% whole.",
)
@plot_option("cost against tokens for the reasoning shares, with the budget line")
@format_option()
def budget(
    model: str,
    offline: bool,
    snapshot: str | None,
    datasets: int | None,
    dataset_names: str | None,
    policy_path: str | None,
    answers_path: str | None,
    plot_path: str | None,
    fmt: str,
    **figures: Any,
) -> None:
    """Plan MODEL's job against a budget: cost, what the budget buys, shortfall, time.

    The target is billed output tokens (reasoning is billed as output): --output-tokens in total,
    or --target-tokens (per dataset) with --datasets. Figures are given for every admitted endpoint, the
    cheapest and the routing blend (under --policy, or OpenRouter's default routing without it),
    output-only and, with the prompt size, all-in. --format json gives every figure by name.

    Example: openrouter-probe budget moonshotai/kimi-k2.5 --offline --budget-usd 100
    --output-tokens 60M --datasets 6 --reasoning-share 0.5:0.8
    """
    from openrouter_probe.analysis.budget import plan_budget

    if figures["output_tokens"] is None and figures["output_tokens_per_dataset"] is None:
        raise click.UsageError("give the target: --output-tokens 60M or --target-tokens 10M")
    names = [n.strip() for n in dataset_names.split(",") if n.strip()] if dataset_names else None
    if datasets is None:
        datasets = len(names) if names else 1
    snap = load_snapshot_for(model, offline, snapshot)
    compiled = block = None
    if policy_path:
        from openrouter_probe.policy.compiled import load_compiled_policy

        compiled = load_compiled_policy(policy_path)
        block = _policy_block(compiled, policy_path, snap.model)
        _warn_if_stale(compiled, policy_path, snap)
    # ``figures``: the other options, named as plan_budget()'s keywords
    plan = plan_budget(snap, datasets=datasets, dataset_names=names, provider=block, **figures)
    batch = _batch_plan(snap, plan, compiled, block)
    if plot_path:
        from openrouter_probe.analysis.plots import plot_budget

        note(f"plot: {save_plot(plot_budget(plan), plot_path)}")
    useful = _useful_rows(plan, answers_path)
    if fmt == "json":
        figures = {**plan.to_dict(), "batch": batch.to_dict(), "useful_rows": useful}
        render_rows([], "json", json_rows=figures)
        return
    _render_plan(plan, batch.line)
    for line in useful:
        echo_text(said(line))


def _useful_rows(plan: BudgetPlan, answers_path: str | None) -> list[str]:
    """Rows per dollar at the blended cost (the plan's requests: --output-tokens-per-request),
    useful as the answers of ``answers_path`` were whole (``run.counts.useful_rows``)."""
    from openrouter_probe.run.books.output import load_resume_state
    from openrouter_probe.run.counts import AnswerLengths, useful_rows

    if plan.requests is None:
        if answers_path:
            raise click.UsageError("--answers needs --output-tokens-per-request (the rows)")
        return []
    figures = plan.blended.all_in or plan.blended.output_only
    if not answers_path:
        return useful_rows(plan.requests, figures.cost_usd, AnswerLengths())
    lengths = load_resume_state(answers_path, repair=False).lengths
    return useful_rows(plan.requests, figures.cost_usd, lengths, answers_path)


def _batch_plan(snap: Any, plan: BudgetPlan, compiled: Any, block: Any) -> Any:
    """The target at the batch price, under the compiled policy's batch block when given."""
    from openrouter_probe.analysis.budget_batch import plan_batch

    admitted, why = None, None
    if compiled is not None:
        from openrouter_probe.rules.routing import route

        if compiled.batch is not None:
            admitted, why = list(compiled.batch.get("order") or []), compiled.batch.get("note")
        else:
            admitted = route(block, snap.batch_endpoints).admitted_tags
    return plan_batch(
        snap,
        output_tokens=plan.output_tokens,
        budget_usd=plan.budget_usd,
        admitted=admitted,
        policy_note=why,
    )


def _target_line(plan: BudgetPlan) -> str:
    """The target in billed tokens, and its visible part at the reasoning share."""
    from openrouter_probe.rules.quantities import format_pct, format_tokens

    low, high = plan.reasoning_share_min, plan.reasoning_share_max
    target = (
        f"target: {format_tokens(plan.output_tokens)} billed output tokens over {plan.datasets} "
    )
    target += "dataset" if plan.datasets == 1 else "datasets"
    if high == 0:
        target += " (no --reasoning-share given: all of it counted as visible)"
    elif low == high:
        target += (
            f"; at {format_pct(low)} reasoning that is "
            f"{format_tokens(plan.target_visible_tokens_min)} visible"
        )
    else:
        target += (
            f"; at {format_pct(low)}-{format_pct(high)} reasoning that is "
            f"{format_tokens(plan.target_visible_tokens_min)}-"
            f"{format_tokens(plan.target_visible_tokens_max)} visible"
        )
    return target


def _render_run(plan: BudgetPlan) -> None:
    """'Run until the money runs out' at the cheapest endpoint, output-only and all-in."""
    from openrouter_probe.rules.quantities import format_tokens, format_usd_per_m

    for figures in (plan.cheapest.output_only, plan.cheapest.all_in):
        if figures is None:
            continue
        run_rows = [
            {
                "dataset": r.dataset,
                "target_tokens": format_tokens(r.target_output_tokens),
                "funded_tokens": format_tokens(r.funded_output_tokens),
                "cost_usd": float(r.cost_usd),
                "completed_pct": float(r.completed_pct),
                "status": r.status,
            }
            for r in figures.run
        ]
        basis = figures.basis.replace("_", "-")
        render_rows(
            run_rows,
            "table",
            title=f"run until the money runs out at {plan.cheapest.tag}, {basis} "
            f"({format_usd_per_m(figures.effective_usd_per_m)} output)",
        )


# What a narrow budget table leaves out first (after its empty columns): what the budget buys stays.
_BUDGET_DROP_ORDER = (
    "time_to_finish_h",
    "visible_tokens",
    "weight_pct",
    "over_budget_pct",
    "per_dataset_tokens",
    "budget_buys_tokens",
)


def _render_plan(plan: BudgetPlan, batch_line: str) -> None:
    """The plan as tables: the headline and the batch line, per endpoint, and the run until the
    money runs out."""
    from openrouter_probe.rules.quantities import (
        format_tokens,
        format_usd,
        format_usd_per_m,
    )

    echo_text(plan.headline)
    echo_text(batch_line)
    blend = plan.blended
    echo_text(
        f"blended over the routing weights ({plan.routing_mode.replace('_', '-')}): "
        f"{format_usd_per_m(blend.price_out_usd_per_m)} output, the target costs "
        f"{format_usd(blend.output_only.cost_usd)}; the budget buys "
        f"{format_tokens(blend.output_only.affordable_output_tokens)} output tokens"
    )
    echo_text(_target_line(plan))
    # The plan's own rows, shown for people: token counts as 45.45M, the weight in percent.
    rows = [
        {
            "tag": r["tag"],
            "verdict": r["verdict"],
            "weight_pct": r["weight"] * 100,
            "price_out_usd_per_m": r["price_out_usd_per_m"],
            "cost_usd": r["cost_usd"],
            "over_budget_pct": r["over_budget_pct"],
            "budget_buys_tokens": format_tokens(r["affordable_output_tokens"]),
            "per_dataset_tokens": format_tokens(r["affordable_output_tokens_per_dataset"]),
            "visible_tokens": f"{format_tokens(r['affordable_visible_tokens_min'])}-"
            f"{format_tokens(r['affordable_visible_tokens_max'])}",
            "all_in_cost_usd": r["all_in_cost_usd"],
            "time_to_finish_h": r["time_to_finish_h"],
        }
        for r in plan.endpoint_rows()
    ]
    mode = plan.routing_mode.replace("_", "-")
    render_rows(
        rows,
        "table",
        title=f"{plan.model}: ${plan.budget_usd:,.2f} budget per admitted endpoint ({mode} routing)",
        drop_order=_BUDGET_DROP_ORDER,
    )
    _render_run(plan)
    for tag, _reason, detail in plan.excluded:
        note(f"excluded {tag}: {detail}")
    for text in plan.notes:
        note("note: " + said(text))

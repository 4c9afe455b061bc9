"""``openrouter-probe verify``: check endpoints' precision by measuring it (plan first, then send)."""

from __future__ import annotations

import sys
from typing import Any

import click

from openrouter_probe.cli._common import (
    budget_option,
    check_snapshot_options,
    cli,
    load_snapshot_for,
    note,
    term_of,
    warn_unused,
)
from openrouter_probe.cli.options import AliasedOption, field_option, format_option, out_option
from openrouter_probe.run.config import RunPlan

#: verify's options up to 0.2.0 that configured the fake server: fake-server has them.
_MOVED = ("--fake", "--fake-seed", "--degrade", "--degrade-flip", "--degrade-tools", "--noise")


def _moved(ctx: click.Context, param: click.Parameter, value: Any) -> None:
    if value:
        name = param.opts[0]
        then = "--seed" if name == "--fake-seed" else name
        how = "" if name == "--fake" else f" {then} ..."
        raise click.UsageError(
            f"{name} is fake-server's option now: start `openrouter-probe fake-server --offline "
            f"--speed 0{how}` and set OPENROUTER_BASE_URL to the URL it prints",
            ctx,
        )


def _moved_options(func: Any) -> Any:
    """The moved options, hidden: each says where it went instead of "No such option"."""
    for name in _MOVED:
        flag = name == "--fake"
        func = click.option(
            name, f"_{name[2:].replace('-', '_')}", is_flag=flag, multiple=not flag,
            hidden=True, expose_value=False, callback=_moved,
        )(func)  # fmt: skip
    return func


@cli.command("verify")
@click.argument("model")
@click.option("--policy", metavar="POLICY", help="Compare the endpoints this policy admits.")
@click.option(
    "--endpoints",
    metavar="TAG,...",
    help="Compare these endpoints (tags such as chutes/int4, or a slug with one endpoint).",
)
@click.option(
    "--reference", metavar="TAG", help="The endpoint compared against (default: the first party)."
)
@click.option(
    "--suite",
    default="arith",
    show_default=True,
    metavar="arith,tools,FILE.jsonl",
    help="Prompts: arith and tools (generated, --n each), JSONL files; comma-separated.",
)
@click.option(
    "--n",
    type=click.IntRange(min=1),
    default=200,
    show_default=True,
    help="Prompts of each generated suite.",
)
@click.option(
    "--suite-seed",
    "seed",
    cls=AliasedOption,
    aliases=("--seed",),
    type=int,
    default=0,
    show_default=True,
    help="Seed of the generated prompts (the arith and tools suites).",
)
@budget_option("Spend cap in USD for the whole check (and --out across runs).")
@out_option(
    "Output JSONL; a rerun sends nothing it already records.",
    default="verify.jsonl",
    show_default=True,
    metavar="FILE",
)
@field_option(
    RunPlan,
    "concurrency",
    type=click.IntRange(min=1),
    default=32,
    show_default=True,
    metavar="N",
)
@click.option(
    "--tolerance",
    type=click.FloatRange(min=0, max=1, min_open=True, max_open=True),
    default=0.1,
    show_default=True,
    help="Margin of consistent: the whole interval of each gap (or excess disagreement) inside it.",
)
@click.option(
    "--alpha",
    type=click.FloatRange(min=0, max=1, min_open=True, max_open=True),
    default=0.05,
    show_default=True,
    help="Family-wise error rate over every endpoint and measure.",
)
@click.option(
    "--power",
    type=click.FloatRange(min=0, max=1, min_open=True, max_open=True),
    default=0.8,
    show_default=True,
    help="The power the plan's figures are stated at.",
)
@click.option(
    "--repeats",
    type=click.IntRange(min=2, max=10),
    default=2,
    show_default=True,
    help="Times the reference is sent: its disagreement with itself is the floor.",
)
@click.option(
    "--sampling",
    type=click.Choice(["greedy", "job"]),
    default="greedy",
    show_default=True,
    help="greedy: temperature 0 only; job: also the sampled arm, samples at the job's own "
    "sampling (the model card's) compared with the reference's by an MMD test.",
)
@click.option(
    "--thinking",
    type=click.Choice(["job", "on", "off"]),
    default="job",
    show_default=True,
    help="Reasoning in both arms. job: as the job runs the model (Kimi K2.5 thinks, sampled at "
    "its card's values with thinking); on; off (reasoning effort none).",
)
@click.option(
    "--sampled-n",
    type=click.IntRange(min=2),
    metavar="N",
    help="Samples per prompt and endpoint in the sampled arm (default: the plan's choice, the "
    "fewest for --power within --budget-usd).",
)
@click.option("--dry-run", is_flag=True, help="Print the plan and its cost; send nothing.")
@click.option("--offline", is_flag=True, help="Plan on the bundled snapshot (no key to plan).")
@click.option("--snapshot", metavar="bundled|PATH", help="Plan on a saved snapshot.")
@click.option(
    "--evidence",
    metavar="FILE.yaml",
    help="Also write the dated evidence (read back with --precision-file).",
)
@field_option(RunPlan, "progress", "quiet", is_flag=True)
@format_option("evidence")
@_moved_options
def verify(model: str, **opts: Any) -> None:
    """Send the same pinned prompts to each endpoint of MODEL and compare them with the reference.

    Prints the plan first (requests per endpoint, expected and worst-case cost at each endpoint's
    prices, power); --dry-run stops there. Then sends under --budget-usd (one cap for every
    endpoint, the reference sent --repeats times), writes --out, and prints one verdict per
    endpoint: consistent, differs, "differs, within tolerance" or inconclusive (docs/verify.md).
    --sampling job also samples open prompts at the job's own temperature and top_p on every
    endpoint and tests each one's distribution against the reference's (an MMD test).
    Set OPENROUTER_API_KEY (and OPENROUTER_BASE_URL for another server). To rehearse on the fake, start `fake-server --speed 0`
    (its --degrade*, --noise and --seed options shape its endpoints) and
    point OPENROUTER_BASE_URL at the URL it prints. Exit 0 when the check ran as asked (to the end
    or to the budget), 1 on a 401/402/404 stop, 2 on a usage error, 130 when interrupted; the
    verdicts are data, not the exit code.
    """
    import asyncio

    from openrouter_probe.verify.run import plan_precision_check, verify_precision

    fmt, dry_run = opts["fmt"], opts["dry_run"]
    _check_options(opts)
    _warn_unused(opts)
    tags = opts["endpoints"].split(",") if opts["endpoints"] is not None else None
    source = None  # live: the check probes the endpoints itself
    if opts["offline"] or opts["snapshot"]:
        source = load_snapshot_for(model, opts["offline"], opts["snapshot"])
    options: dict[str, Any] = {
        "endpoints": tags,
        "snapshot": source,
        **{k: opts[k] for k in ("policy", "reference", "suite", "n", "seed", "budget_usd")},
        **{k: opts[k] for k in ("alpha", "power", "tolerance", "repeats", "sampling", "thinking")},
        "sampled_n": opts["sampled_n"],
    }

    def show(plan: Any) -> None:
        # With --format json/evidence stdout carries only the data: the plan goes to stderr.
        click.echo(plan.render(), err=fmt != "text" and not dry_run)

    if opts["offline"] and not dry_run:
        # --offline promises no network and no spending: plan only, never send.
        note(
            "verify: --offline sends nothing, so this is the plan only; for a rehearsal, start "
            "`openrouter-probe fake-server --offline --speed 0` and set OPENROUTER_BASE_URL to its URL"
        )
        dry_run = True
    if dry_run:
        show(plan_precision_check(model, **options))
        return
    report = asyncio.run(
        verify_precision(
            model,
            handle_signals=True,
            out=opts["out"],
            concurrency=opts["concurrency"],
            progress=not opts["quiet"],
            on_plan=show,
            **options,
        )
    )
    _show_report(report, fmt=fmt, evidence=opts["evidence"])
    run = report.run
    sys.exit(0 if run is None else run.exit_code)


def _show_report(report: Any, *, fmt: str, evidence: str | None) -> None:
    import json

    from openrouter_probe.files import atomic_write_text

    if evidence is not None:
        atomic_write_text(evidence, report.to_evidence_yaml())
        note(f"evidence: {evidence} (read it back with --precision-file {evidence})")
    if fmt == "json":
        click.echo(json.dumps(report.rows(), indent=2, default=str))
    elif fmt == "evidence":
        click.echo(report.to_evidence_yaml(), nl=False)
    else:
        click.echo("")
        click.echo(report.render(term_of(click.get_current_context().command)))


def _warn_unused(opts: dict[str, Any]) -> None:
    """Options given that this check does not read."""
    if opts["dry_run"] or opts["offline"]:
        why = "is written after the prompts are sent, and this run sends none"
        warn_unused("evidence", why)
        warn_unused("out", why)
    if opts["sampling"] != "job":
        warn_unused("sampled_n", "sizes the sampled arm, and --sampling is greedy")
    suites = {part.strip() for part in str(opts["suite"]).split(",")}
    if not suites & {"arith", "tools"}:
        for name in ("n", "seed"):
            warn_unused(name, "shapes the generated suites (arith, tools), and --suite has none")


def _check_options(opts: dict[str, Any]) -> None:
    from openrouter_probe.files import ensure_not_input

    check_snapshot_options(opts["offline"], opts["snapshot"])
    evidence = opts["evidence"]
    if evidence is not None:
        inputs = (opts["out"], *(p for p in (opts["policy"],) if p))
        try:
            ensure_not_input(evidence, *inputs)
        except ValueError as exc:
            raise click.UsageError(f"--evidence: {exc}; name another file") from exc

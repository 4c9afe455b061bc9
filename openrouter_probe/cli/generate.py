"""``openrouter-probe generate|audit|export``: run the job, check who served it, export it."""

from __future__ import annotations

import json
import sys

import click

from openrouter_probe.cli._common import (
    cli,
    format_option,
    load_snapshot_for,
    note,
    render_rows,
    snapshot_options,
)


@cli.command()
@click.argument("prompts", type=click.Path(exists=True, dir_okay=False))
@click.option(
    "--policy",
    required=True,
    type=click.Path(exists=True, dir_okay=False),
    metavar="POLICY",
    help="A compiled policy YAML: its model and provider block go into every request.",
)
@click.option(
    "-o",
    "--out",
    required=True,
    type=click.Path(dir_okay=False),
    help="The output JSONL: appended to; rerunning the same command resumes from it.",
)
@click.option(
    "--budget-usd",
    metavar="USD",
    help="Spend cap in USD for this output file, across runs (per shard with --shard).",
)
@click.option(
    "--concurrency",
    type=click.IntRange(min=1),
    default=256,
    show_default=True,
    metavar="N",
    help="Requests in flight at most.",
)
@click.option(
    "--max-tokens",
    type=click.IntRange(min=1),
    default=4096,
    show_default=True,
    help="Output tokens per answer at most, reasoning included (a row's max_tokens wins).",
)
@click.option(
    "--target-tokens",
    help="Stop each dataset at this many billed output tokens (reasoning included), e.g. 10M.",
)
@click.option(
    "--stream/--no-stream",
    default=False,
    show_default=True,
    help="Ask for answers as streams (SSE); the records are the same either way.",
)
@click.option("--temperature", type=float, help="Of every request (a row's temperature wins).")
@click.option(
    "--reasoning-effort",
    type=click.Choice(["max", "xhigh", "high", "medium", "low", "minimal", "none"]),
    help="reasoning.effort of every request (a row's reasoning wins).",
)
@click.option(
    "--reasoning-max-tokens",
    type=click.IntRange(min=1),
    help="reasoning.max_tokens of every request, instead of --reasoning-effort.",
)
@click.option("--dry-run", is_flag=True, help="Print the plan and its cost; send nothing.")
@click.option("--shard", metavar="i/n", help="Send only shard i of n (0 <= i < n), by row id.")
@click.option(
    "--weights",
    metavar="DS=W,...",
    help="Share the budget between datasets by weight, e.g. B3=2,B4=1 (others weigh 1; "
    "default: equal shares).",
)
@click.option(
    "--turns",
    type=click.Choice(["last", "all"]),
    default="last",
    show_default=True,
    help="last: answer after the last message; all: regenerate every assistant turn of "
    "multi-turn rows in order, each request carrying the model's own earlier turns.",
)
@click.option("--redo-failed", is_flag=True, help="Send again the rows recorded as failed.")
@click.option(
    "--lower-max-tokens",
    is_flag=True,
    help='On a 402 "can only afford N", retry that row with max_tokens N instead of stopping.',
)
@click.option(
    "--snapshot",
    metavar="bundled|PATH",
    help="Price and check the policy against this snapshot instead of the live endpoints.",
)
@click.option(
    "--attempts",
    type=click.IntRange(min=1),
    default=6,
    show_default=True,
    help="Tries per row, the first included, before the row is recorded as failed.",
)
@click.option(
    "--read-timeout",
    "read_timeout_s",
    type=float,
    default=300.0,
    show_default=True,
    help="Seconds without data, or a stream without a token (keep-alives only), before an "
    "attempt counts as stalled.",
)
@click.option(
    "--max-wait",
    "max_wait_s",
    type=click.FloatRange(min=0),
    default=60.0,
    show_default=True,
    help="Longest pause, in seconds, for OpenRouter's own 429 on the key; longer: stop.",
)
@click.option(
    "--drain-timeout",
    "drain_timeout_s",
    type=float,
    default=60.0,
    show_default=True,
    help="After the first Ctrl-C, seconds to wait for requests in flight.",
)
@click.option(
    "--batch",
    is_flag=True,
    help="Send through OpenRouter's Batch API at the policy's :batch endpoint (its price, "
    "results within 24 h); the same output, journal, cap and resume.",
)
@click.option(
    "--batch-size",
    type=click.IntRange(min=1, max=5000),
    default=None,
    help="With --batch: lines per batch at most (default and OpenRouter's limit: 5000).",
)
@click.option(
    "--abandon",
    is_flag=True,
    help="With --batch: forget the batches an earlier run left running (there is no cancel: "
    "what completes is still billed) and send their rows again.",
)
@click.option("--quiet", is_flag=True, help="No progress bar (for scripts).")
@format_option("text", "json", default="text")
def generate(
    prompts: str,
    policy: str,
    out: str,
    budget_usd: str | None,
    concurrency: int,
    max_tokens: int,
    target_tokens: str | None,
    stream: bool,
    temperature: float | None,
    reasoning_effort: str | None,
    reasoning_max_tokens: int | None,
    dry_run: bool,
    shard: str | None,
    weights: str | None,
    turns: str,
    redo_failed: bool,
    lower_max_tokens: bool,
    snapshot: str | None,
    attempts: int,
    read_timeout_s: float,
    max_wait_s: float,
    drain_timeout_s: float,
    batch: bool,
    batch_size: int | None,
    abandon: bool,
    quiet: bool,
    fmt: str,
) -> None:
    """Run PROMPTS (JSONL) through the policy's providers into --out, within --budget-usd.

    Each line of PROMPTS has `messages` or `prompt`, optional `id`, `dataset` and request
    parameters. Set OPENROUTER_API_KEY (and OPENROUTER_BASE_URL for another server, e.g. the fake
    one). The summary goes to stdout; progress, warnings and each retry to stderr. Exit 0 when the
    run ended as asked (done, budget, target), 1 on a 401/402/404 stop or a rate limit longer than
    --max-wait, 130 when interrupted.
    """
    import asyncio

    from openrouter_probe.generation import generate as run_generate

    summary = asyncio.run(
        run_generate(
            prompts,
            policy=policy,
            out=out,
            budget_usd=budget_usd,
            concurrency=concurrency,
            max_tokens=max_tokens,
            target_tokens=target_tokens,
            stream=stream,
            temperature=temperature,
            reasoning_effort=reasoning_effort,
            reasoning_max_tokens=reasoning_max_tokens,
            dry_run=dry_run,
            shard=shard,
            weights=weights,
            turns=turns,
            redo_failed=redo_failed,
            lower_max_tokens=lower_max_tokens,
            snapshot=snapshot,
            attempts=attempts,
            read_timeout_s=read_timeout_s,
            max_wait_s=max_wait_s,
            drain_timeout_s=drain_timeout_s,
            batch=batch,
            batch_size=batch_size,
            abandon=abandon,
            handle_signals=True,
            progress=not quiet and not dry_run,
        )
    )
    if fmt == "json":
        click.echo(json.dumps(summary.to_dict(), indent=2))
    else:
        click.echo(summary.render())
    if summary.stop_reason in ("interrupted", "cancelled"):
        sys.exit(130)
    sys.exit(summary.exit_code)


@cli.command("audit")
@click.argument("outputs", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
@click.option(
    "--policy",
    required=True,
    type=click.Path(exists=True, dir_okay=False),
    metavar="POLICY",
    help="The compiled policy the rows were generated under: who it admits.",
)
@snapshot_options
@format_option("table", "json", "csv")
def audit_cmd(
    outputs: tuple[str, ...], policy: str, offline: bool, snapshot: str | None, fmt: str
) -> None:
    """Report per provider what OUTPUTS (one or more shards) cost, and flag rows served outside
    the policy (exit 1 if there is one)."""
    from openrouter_probe.generation.audit import audit
    from openrouter_probe.policy.compiled import load_compiled_policy
    from openrouter_probe.policy.spec import snapshot_args

    args = snapshot_args(offline=offline, snapshot=snapshot)
    model = load_compiled_policy(policy, snapshot_args=args).model
    snap = load_snapshot_for(model, offline, snapshot)
    report = audit(outputs, policy=policy, snapshot=snap)
    if fmt == "json":
        click.echo(json.dumps(report.to_dict(), indent=2))
    else:
        render_rows(report.provider_rows(), fmt, title=f"{model}: served rows by provider")
        note(report.render_notes())
    sys.exit(report.exit_code)


@cli.command("export")
@click.argument("outputs", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
@click.option(
    "--format",
    "fmt",
    # the same as generate.export.EXPORT_FORMATS (a test checks), spelled out so that --help does
    # not import the generator
    type=click.Choice(["sharegpt", "specforge", "jsonl", "parquet"]),
    default="sharegpt",
    show_default=True,
    help="specforge: SpecForge's regenerated-data rows (its validator's shape); sharegpt and "
    "jsonl keep everything (tools, every turn's reasoning, image parts).",
)
@click.option(
    "-o",
    "--output",
    required=True,
    type=click.Path(dir_okay=False),
    help="The file to write (atomically). NAME.json gets one JSON array (sharegpt, jsonl); "
    "other names JSON Lines.",
)
@click.option(
    "--include-truncated",
    is_flag=True,
    help="Also export answers cut at max_tokens (never an empty one).",
)
@click.option(
    "--only-generated",
    is_flag=True,
    help="Leave out rows that hold assistant turns from the prompts file (not model-written).",
)
@click.option(
    "--require-reasoning",
    is_flag=True,
    help="Leave out rows with an assistant turn that has no reasoning.",
)
@click.option(
    "--preserve-thinking/--no-preserve-thinking",
    default=True,
    show_default=True,
    help="specforge: set preserve_thinking: true on rows with reasoning, for a chat template "
    "that reads it.",
)
@click.option(
    "--prompts",
    type=click.Path(exists=True, dir_okay=False),
    help="The prompts file of the run: adds each row's `tools` (the output does not hold them).",
)
def export_cmd(
    outputs: tuple[str, ...],
    fmt: str,
    output: str,
    include_truncated: bool,
    only_generated: bool,
    require_reasoning: bool,
    preserve_thinking: bool,
    prompts: str | None,
) -> None:
    """Export the answered rows of OUTPUTS for drafter training (reasoning as
    reasoning_content; each assistant turn marked generated: true/false).

    Never exports an empty answer. The summary on stderr says how many rows were left out and
    why. docs/training-data.md: from here to a SpecForge or speculators run.
    """
    from openrouter_probe.generation.export import export

    summary = export(
        outputs,
        fmt=fmt,
        output=output,
        include_truncated=include_truncated,
        only_generated=only_generated,
        require_reasoning=require_reasoning,
        preserve_thinking=preserve_thinking,
        prompts=prompts,
    )
    note(summary.render())

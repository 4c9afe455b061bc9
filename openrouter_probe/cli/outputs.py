"""``openrouter-probe audit|export``: check who served a run's outputs, and export them."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from openrouter_probe.cli._common import cli, load_snapshot_for, note, term_of, warn_unused
from openrouter_probe.cli.options import format_option, out_option, snapshot_options
from openrouter_probe.cli.tables import render_rows


@cli.command("audit")
@click.argument("outputs", nargs=-1, required=True)
@click.option(
    "--policy",
    required=True,
    type=click.Path(exists=True, dir_okay=False),
    metavar="POLICY",
    help="The compiled policy the rows were generated under: who it admits.",
)
@click.option(
    "--key-file",
    type=click.Path(exists=True, dir_okay=False),
    metavar="KEYS.json",
    help="The job's keys (`keys create`): check the shards' journals against the keys' usage "
    "as OpenRouter reports it (OPENROUTER_MANAGEMENT_KEY).",
)
@snapshot_options
@format_option("csv")
def audit_cmd(
    outputs: tuple[str, ...],
    policy: str,
    key_file: str | None,
    offline: bool,
    snapshot: str | None,
    fmt: str,
) -> None:
    """Report per provider what OUTPUTS (files, folders or globs: every shard) cost, and flag rows
    served outside the policy (exit 1 if there is one, or if the keys used more than the
    journals count)."""
    from openrouter_probe.generation.audit import audit
    from openrouter_probe.generation.books import expand_outputs, job_books
    from openrouter_probe.policy.compiled import load_compiled_policy

    files = expand_outputs(outputs)
    model = load_compiled_policy(policy).model
    snap = load_snapshot_for(model, offline, snapshot)
    report = audit(files, policy=policy, snapshot=snap)
    books = job_books(key_file, files) if key_file else None
    if fmt == "json":
        body = report.to_dict()
        if books is not None:
            body["keys"] = books.to_dict()
        click.echo(json.dumps(body, indent=2))
    else:
        render_rows(report.provider_rows(), fmt, title=f"{model}: served rows by provider")
        note(report.render_notes(term_of(click.get_current_context().command)))
        if books is not None:
            note(books.render())
    sys.exit(max(report.exit_code, books.exit_code if books is not None else 0))


@cli.command("export", keywords={"paths": "outputs", "output": "out"})
@click.argument("outputs", nargs=-1, required=True)
@click.option(
    "--format",
    "fmt",
    # the same as generation.formats.EXPORT_FORMATS (a test checks), spelled out so that --help does
    # not import the generator
    type=click.Choice(["sharegpt", "specforge", "jsonl", "parquet", "hf"]),
    default="sharegpt",
    show_default=True,
    help="specforge: SpecForge's regenerated-data rows (its validator's shape); sharegpt and "
    "jsonl keep everything (tools, every turn's reasoning, image parts); hf: a Hugging Face "
    "dataset folder (Parquet shards and a dataset card).",
)
@out_option(
    "The file to write (atomically). NAME.json gets one JSON array (sharegpt, jsonl); "
    "other names JSON Lines; --format hf: a folder.",
    required=True,
    type=click.Path(),
    metavar="FILE",
)
@click.option(
    "--push-to-hub",
    metavar="REPO",
    help="--format hf: upload the folder to this Hugging Face dataset repo (huggingface_hub; "
    "its token, e.g. HF_TOKEN).",
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
def export_cmd(outputs: tuple[str, ...], fmt: str, out: str, **options: Any) -> None:
    """Export the answered rows of OUTPUTS (files, folders or globs) for drafter training
    (reasoning as reasoning_content; each assistant turn marked generated: true/false).

    Never exports an empty answer. The summary on stderr says how many rows were left out and
    why. docs/training-data.md: from here to a SpecForge or speculators run.
    """
    from openrouter_probe.generation.books import expand_outputs
    from openrouter_probe.generation.export import export
    from openrouter_probe.generation.formats import FORMATS

    if "preserve_thinking" not in FORMATS[fmt].options:
        warn_unused("preserve_thinking", f"is specforge's; --format {fmt} has no such key")
    summary = export(
        expand_outputs(outputs),
        fmt=fmt,
        output=out,
        command=" ".join(["openrouter-probe", *sys.argv[1:]]),
        **options,  # the other options, named as export()'s keywords
    )
    note(summary.render(term_of(click.get_current_context().command)))

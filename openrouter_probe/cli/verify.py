"""``openrouter-probe verify``: check endpoints' precision by measuring it (plan first, then send)."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import Any

import click

from openrouter_probe.cli._common import cli, format_option, note


@contextlib.contextmanager
def _fake_server(snap: Any, degrade: tuple[str, ...], seed: int) -> Iterator[str]:
    from openrouter_probe.fake import serve
    from openrouter_probe.fake.faults import parse_degrade

    rates = parse_degrade(list(degrade))
    with serve(snap, speed=0, degrade=rates, seed=seed) as fake:
        note(
            f"fake server: {fake.base_url} (speed 0"
            + (f", degraded: {', '.join(f'{t}={r:g}' for t, r in rates.items())}" if rates else "")
            + ")"
        )
        yield fake.base_url


@cli.command("verify")
@click.argument("model")
@click.option("--policy", metavar="POLICY", help="Compare the endpoints this policy admits.")
@click.option(
    "--endpoints", metavar="TAG,...", help="Compare these endpoints (full tags, e.g. chutes/int4)."
)
@click.option(
    "--reference", metavar="TAG", help="The endpoint compared against (default: the first party)."
)
@click.option(
    "--suite",
    default="arith",
    show_default=True,
    metavar="arith,tools,FILE.jsonl",
    help="Prompts: arith (generated), tools (built in), JSONL files; comma-separated.",
)
@click.option(
    "--n", type=click.IntRange(min=1), default=200, show_default=True, help="Arith prompts."
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the arith prompts.")
@click.option(
    "--budget-usd",
    metavar="USD",
    help="Spend cap in USD for the whole check (and --out across runs).",
)
@click.option(
    "-o",
    "--out",
    default="verify.jsonl",
    show_default=True,
    metavar="FILE",
    help="Output JSONL; a rerun sends nothing it already records.",
)
@click.option(
    "--concurrency",
    type=click.IntRange(min=1),
    default=32,
    show_default=True,
    metavar="N",
    help="Requests in flight at most.",
)
@click.option(
    "--tolerance",
    type=click.FloatRange(min=0, max=1, min_open=True),
    default=0.1,
    show_default=True,
    help="Largest accuracy gap still called consistent (0.1 = 10 pp).",
)
@click.option("--dry-run", is_flag=True, help="Print the plan and its cost; send nothing.")
@click.option(
    "--fake",
    is_flag=True,
    help="Start the fake OpenRouter on the snapshot (speed 0) and check against it.",
)
@click.option(
    "--degrade",
    multiple=True,
    metavar="TAG=RATE",
    help="With --fake: make an endpoint perturb its answers at RATE (repeatable).",
)
@click.option(
    "--fake-seed", type=int, default=0, show_default=True, help="With --fake: the server's seed."
)
@click.option("--offline", is_flag=True, help="Plan on the bundled snapshot (no key to plan).")
@click.option("--snapshot", metavar="bundled|PATH", help="Plan on a saved snapshot.")
@click.option(
    "--evidence",
    metavar="FILE.yaml",
    help="Also write the dated evidence (read back with --precision-file).",
)
@click.option("--quiet", is_flag=True, help="No progress bar (for scripts).")
@format_option("table", "json", "evidence")
def verify(
    model: str,
    policy: str | None,
    endpoints: str | None,
    reference: str | None,
    suite: str,
    n: int,
    seed: int,
    budget_usd: str | None,
    out: str,
    concurrency: int,
    tolerance: float,
    dry_run: bool,
    fake: bool,
    degrade: tuple[str, ...],
    fake_seed: int,
    offline: bool,
    snapshot: str | None,
    evidence: str | None,
    quiet: bool,
    fmt: str,
) -> None:
    """Send the same pinned prompts to each endpoint of MODEL and compare them with the reference.

    Prints the plan first (requests per endpoint, expected and worst-case cost at each endpoint's
    prices); --dry-run stops there. Then sends under --budget-usd (one cap for every endpoint),
    writes --out, and prints one verdict per endpoint: consistent, differs or inconclusive. Set
    OPENROUTER_API_KEY (and OPENROUTER_BASE_URL for another server), or use --fake. Exit 0 when
    the check ran as asked (to the end or to the budget), 1 on a 401/402/404 stop, 130 when
    interrupted; the verdicts are data, not the exit code.
    """
    from openrouter_probe.verify.run import plan_precision_check

    _check_options(
        degrade=degrade,
        fake=fake,
        offline=offline,
        snapshot=snapshot,
        evidence=evidence,
        inputs=(out, *(p for p in (policy,) if p)),
    )
    tags = endpoints.split(",") if endpoints is not None else None
    source = _snapshot(model, offline=offline, snapshot=snapshot, fake=fake)
    options: dict[str, Any] = {
        "endpoints": tags,
        "policy": policy,
        "reference": reference,
        "suite": suite,
        "n": n,
        "seed": seed,
        "budget_usd": budget_usd,
        "snapshot": source,
    }

    def show(plan: Any) -> None:
        # With --format json/evidence stdout carries only the data: the plan goes to stderr.
        click.echo(plan.render(), err=fmt != "table" and not dry_run)

    if offline and not fake and not dry_run:
        # --offline promises no network and no spending: plan only, never send.
        note(
            "verify: --offline sends nothing, so this is the plan only; add --fake for a rehearsal "
            "on the fake server, or use --snapshot PATH to send to OpenRouter"
        )
        dry_run = True
    if dry_run:
        show(plan_precision_check(model, **options))
        return
    report = _send_check(
        model,
        fake=fake,
        degrade=degrade,
        fake_seed=fake_seed,
        out=out,
        tolerance=tolerance,
        concurrency=concurrency,
        progress=not quiet,
        on_plan=show,
        **options,
    )
    _show_report(report, fmt=fmt, evidence=evidence)
    run = report.run
    if run is not None and run.stop_reason in ("interrupted", "cancelled"):
        sys.exit(130)
    sys.exit(0 if run is None else run.exit_code)


def _snapshot(model: str, *, offline: bool, snapshot: str | None, fake: bool) -> Any:
    """What ``snapshot=`` gets: ``None`` (live), ``"bundled"``, or a loaded ``Snapshot`` (the fake
    serves one, and a --snapshot PATH is checked to be this model's)."""
    source: Any = "bundled" if offline and not snapshot else snapshot
    if fake and source is None:
        source = "bundled"
    if fake or source not in (None, "bundled"):
        from openrouter_probe.rules.snapshot import resolve_snapshot

        source = resolve_snapshot(model, offline=source == "bundled", snapshot=source)
        note(f"snapshot: {source.provenance}")
    return source


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
        click.echo(report.render())


def _send_check(
    model: str, *, fake: bool, degrade: tuple[str, ...], fake_seed: int, **kwargs: Any
) -> Any:
    """Run ``verify_precision`` (against a fake server on loopback with ``fake``)."""
    import asyncio

    from openrouter_probe.verify.run import verify_precision

    with contextlib.ExitStack() as stack:
        base_url = None
        api_key = None
        if fake:
            base_url = stack.enter_context(_fake_server(kwargs["snapshot"], degrade, fake_seed))
            api_key = "sk-fake"  # never send a real key, even to loopback
        return asyncio.run(
            verify_precision(
                model, api_key=api_key, base_url=base_url, handle_signals=True, **kwargs
            )
        )


def _check_options(
    *,
    degrade: tuple[str, ...],
    fake: bool,
    offline: bool,
    snapshot: str | None,
    evidence: str | None,
    inputs: tuple[str, ...],
) -> None:
    from openrouter_probe.files import ensure_not_input

    if degrade and not fake:
        raise click.UsageError("--degrade needs --fake (it configures the fake server)")
    if offline and snapshot and snapshot != "bundled":
        raise click.UsageError("--offline and --snapshot PATH exclude each other")
    if evidence is not None:
        try:
            ensure_not_input(evidence, *inputs)
        except ValueError as exc:
            raise click.UsageError(f"--evidence: {exc}; name another file") from exc

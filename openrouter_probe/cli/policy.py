"""``openrouter-probe policy compile|explain|lint|check``."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from openrouter_probe.cli._common import (
    check_snapshot_options,
    cli,
    load_snapshot_for,
    note,
    said,
    term_of,
)
from openrouter_probe.cli.options import (
    format_option,
    out_option,
    precision_option,
    snapshot_options,
)
from openrouter_probe.cli.tables import echo_text, essential_column, render_rows


@cli.group()
def policy() -> None:
    """Compile a policy spec into OpenRouter's provider block; explain, lint and check it."""


def _registry(precision_files: tuple[str, ...]) -> Any:
    from openrouter_probe.rules.precision import PrecisionRegistry

    return PrecisionRegistry.load(*precision_files)


@policy.command("compile")
@click.argument("spec", type=click.Path(exists=True, dir_okay=False))
@snapshot_options
@precision_option
@out_option("Write the YAML here (default stdout).")
def compile_cmd(
    spec: str,
    offline: bool,
    snapshot: str | None,
    precision_files: tuple[str, ...],
    out: str | None,
) -> None:
    """Compile SPEC against a snapshot of its model into a policy YAML (provider: at top level).

    -o never writes over SPEC (or the --snapshot / --precision-file it was compiled from), and the
    file is replaced atomically: a write that fails leaves the old policy whole.
    """
    from openrouter_probe.policy.compiler import compile_policy
    from openrouter_probe.policy.spec import load_spec

    inputs = [spec, *precision_files]
    if snapshot and snapshot != "bundled":
        inputs.append(snapshot)
    if out:
        _refuse_overwrite(out, inputs)
    parsed = load_spec(spec)
    snap = load_snapshot_for(parsed.model, offline, snapshot)
    compiled = compile_policy(parsed, snap, registry=_registry(precision_files), spec_file=spec)
    if out:
        compiled.save(out, inputs=inputs)
        note(f"wrote {out}: admits {', '.join(compiled.admitted)}")
    else:
        click.echo(compiled.to_yaml(), nl=False)


def _refuse_overwrite(output: str, inputs: list[str]) -> None:
    """Checked before any work: -o must not be one of the files the policy is made from."""
    from openrouter_probe.errors import PolicyError
    from openrouter_probe.files import same_file

    for source in inputs:
        if same_file(output, source):
            raise PolicyError(
                f"-o {output} is the input {source}: compiling would replace it; write the policy "
                "to another file (policies/NAME.yaml beside policies/NAME.spec.yaml)"
            )


# The explain table: what was decided first, then these of each ``Decision``; a short terminal
# loses the ``_EXPLAIN_DROP_ORDER`` first, in this order (the reason is then listed below it).
_EXPLAIN_COLUMNS = ("verdict", "input_usd_per_m", "output_usd_per_m", "uptime_30m_pct",
                    "provider", "declared", "effective", "status", "reason")  # fmt: skip
_EXPLAIN_DROP_ORDER = ("status", "effective", "declared", "provider", "uptime_30m_pct", "reason")


def _decision_rows(compiled: Any) -> list[dict[str, Any]]:
    from openrouter_probe.rules.quantities import format_pct

    rows = []
    for d in compiled.decisions:
        decision = "dropped"
        if d.kept:
            where = f"#{d.position}" if d.position is not None else "kept"
            decision = where + (f", {format_pct(d.share)}" if d.share is not None else "")
        rows.append(
            {"tag": d.tag, "decision": decision, **{c: getattr(d, c) for c in _EXPLAIN_COLUMNS}}
        )
    return rows


@policy.command()
@click.argument("path", metavar="SPEC|POLICY", type=click.Path(exists=True, dir_okay=False))
@snapshot_options
@precision_option
@format_option("csv")
def explain(
    path: str, offline: bool, snapshot: str | None, precision_files: tuple[str, ...], fmt: str
) -> None:
    """Show the decision table: every endpoint, kept or dropped, and why.

    A compiled POLICY is explained from its own recorded decisions (with --snapshot/--offline,
    its :batch rows' listed|accepted from that snapshot's history, which grows after the compile);
    a SPEC is compiled first. A spec that admits nothing still gets its table (why each endpoint
    is dropped), then exits 1.
    """
    from openrouter_probe.policy.compiled import compiled_from_document
    from openrouter_probe.policy.compiler import compile_policy
    from openrouter_probe.policy.spec import is_compiled, parse_spec, read_yaml
    from openrouter_probe.rules.quantities import format_usd_per_m

    check_snapshot_options(offline, snapshot)
    doc = read_yaml(path)
    history = None
    if is_compiled(doc):
        compiled = compiled_from_document(doc, source=path)
        if offline or snapshot:  # the history of the snapshot asked for, not a live probe
            history = load_snapshot_for(compiled.model, offline, snapshot).batch
    else:
        parsed = parse_spec(doc, source=path)
        snap = load_snapshot_for(parsed.model, offline, snapshot)
        compiled = compile_policy(
            parsed, snap, registry=_registry(precision_files), spec_file=path, allow_empty=True
        )
    total = len(compiled.decisions)
    if fmt == "json":
        render_rows([], "json", json_rows=compiled.to_dict())
    elif fmt == "csv":
        render_rows([d.to_dict() for d in compiled.decisions], "csv")
    else:
        rows = _decision_rows(compiled)
        dropped = render_rows(
            rows,
            fmt,
            title=f"{compiled.model}: {len(compiled.admitted)} of {total} endpoints admitted",
            keep=lambda c: essential_column(c) or c == "decision",
            drop_order=_EXPLAIN_DROP_ORDER,
        )
        if "reason" in dropped:
            for r in rows:
                echo_text(f"{r['tag']}: {r['reason']}")
        if compiled.admitted:
            echo_text(f"provider block: {json.dumps(compiled.provider.to_request())}")
        for line in _batch_lines(compiled.batch, history):
            echo_text(line)
        if compiled.tradeoff:
            t = compiled.tradeoff
            s, loose = t["strict"], t["ignore_list_alone"]
            echo_text(
                f"trade-off: strict precision also drops {', '.join(t['strict_precision_drops'])}: "
                f"{s['endpoints']} endpoints ({s['throughput_p50_sum_tps']:.0f} tok/s p50 summed) "
                f"instead of {loose['endpoints']} ({loose['throughput_p50_sum_tps']:.0f} tok/s); "
                f"cheapest output {format_usd_per_m(s['cheapest_output_usd_per_m'])} vs "
                f"{format_usd_per_m(loose['cheapest_output_usd_per_m'])}"
            )
        if compiled.routing.get("tools"):
            echo_text(f"tools: {compiled.routing['tools']}")
        for assumption in compiled.routing.get("assumptions", []):
            echo_text(f"assumption: {assumption}")
    if not compiled.admitted:
        click.echo(
            f"Error: {path}: the policy admits none of the {total} endpoints of "
            f"{compiled.model}; relax precision, ignore or max_price (the table says why each "
            "one is dropped)",
            err=True,
        )
        sys.exit(1)


def _batch_lines(batch: dict[str, Any] | None, history: Any = None) -> list[str]:
    """The batch block under the explain table: what a batch request carries, each row's batch
    price beside its sync price, and the note (or why no :batch endpoint is admitted).
    ``history`` (a snapshot's ``BatchListing``) says which rows a submit was accepted for since
    the compile."""
    from openrouter_probe.rules.quantities import format_usd_per_m

    if batch is None:
        return []
    lines, since = [], []
    if batch.get("provider") is not None:
        lines.append(f"batch block: {json.dumps(batch['provider'])}")
    for d in batch.get("decisions") or []:
        out, sync = d.get("output_usd_per_m"), d.get("sync_output_usd_per_m")
        ratio = f", {out / sync:.0%}" if out is not None and sync else ""
        sync_text = f" ({format_usd_per_m(sync)} sync{ratio})" if sync is not None else ""
        status = d.get("status")
        first = _accepted_since(history, d["tag"]) if status == "listed" else None
        if first is not None:
            status = "accepted"
            since.append(f"batch: {d['tag']}: a submit was accepted since the compile ({first})")
        lines.append(
            f"batch: {d['tag']}: {format_usd_per_m(out)} output at the batch price"
            f"{sync_text}, {status}; {d.get('reason')}"
        )
    lines.append(f"batch: {batch.get('note')}")
    return lines + since


def _accepted_since(history: Any, tag: str) -> str | None:
    """The first accepted submit to ``tag`` in ``history`` ("batch id, time"), if any."""
    for acceptance in [] if history is None else history.accepted:
        if acceptance.tag == tag:
            when = acceptance.to_json()["at"]
            return str(acceptance.batch_id) + (f", {when}" if when else "")
    return None


@policy.command()
@click.argument("block_path", metavar="BLOCK.yaml", type=click.Path(exists=True, dir_okay=False))
@click.option("--model", help="The model the block is for (default: the compiled policy's).")
@snapshot_options
@precision_option
@click.option("--strict", is_flag=True, help="Exit 1 on warnings too.")
def lint(
    block_path: str,
    model: str | None,
    offline: bool,
    snapshot: str | None,
    precision_files: tuple[str, ...],
    strict: bool,
) -> None:
    """Lint a provider block (a compiled policy or a hand-written one) against a snapshot.

    Every finding is reported, schema errors included. Exit 0 when clean (or warnings only), 1 on
    errors (or any finding with --strict).
    """
    from openrouter_probe.policy.compiled import provider_mapping
    from openrouter_probe.policy.lint import lint_block
    from openrouter_probe.policy.spec import read_yaml

    doc = read_yaml(block_path)
    block, compiled_for = provider_mapping(doc, source=block_path)
    model = model or compiled_for
    if not model and not offline and not snapshot:
        raise click.UsageError(
            "give --model MODEL (or --offline / --snapshot PATH) for a bare block"
        )
    snap = load_snapshot_for(model, offline, snapshot)
    findings = lint_block(
        block, snap.endpoints, model=snap.model, registry=_registry(precision_files)
    )
    batch = doc.get("batch") if isinstance(doc, dict) else None
    # The batch block: the compiled one always; the older form (sync tags as only) only against a
    # snapshot that lists the :batch rows it would need.
    known = isinstance(batch, dict) and ("decisions" in batch or snap.batch is not None)
    if known and isinstance(batch, dict) and batch.get("provider") is not None:
        from openrouter_probe.policy.lint import lint_batch_block

        findings += lint_batch_block(batch["provider"], snap.batch_endpoints)
    for f in findings:
        click.echo(f"{block_path}: {f}")
    errors = sum(f.severity == "error" for f in findings)
    warnings = len(findings) - errors
    note(f"{errors} error(s), {warnings} warning(s)" if findings else "clean")
    if errors or (strict and warnings):
        sys.exit(1)


@policy.command()
@click.argument("policy_path", metavar="POLICY", type=click.Path(exists=True, dir_okay=False))
@snapshot_options
@precision_option
@click.option(
    "--price-threshold-pct",
    type=click.FloatRange(min=0),
    default=5.0,
    show_default=True,
    help="Report price moves larger than this.",
)
@click.option(
    "--spec",
    "spec_path",
    type=click.Path(exists=True, dir_okay=False),
    metavar="SPEC",
    help="The spec POLICY was compiled from [default: the file its provenance names, beside it].",
)
@click.option(
    "--write", is_flag=True, help="Re-compile POLICY in place from its spec when it drifted."
)
@format_option()
def check(
    policy_path: str,
    offline: bool,
    snapshot: str | None,
    precision_files: tuple[str, ...],
    price_threshold_pct: float,
    spec_path: str | None,
    write: bool,
    fmt: str,
) -> None:
    """Check a compiled POLICY against a fresh probe (or a snapshot) of its model.

    Says what changed, what it does to the policy, what a re-compile would change (when the spec
    is at hand) and the fix. Exit 0 when nothing that matters moved, 1 on drift, 2 on error: made
    for other repos' CI. With --write, a drifted POLICY is re-compiled in place (exit 0 once written).
    """
    from openrouter_probe.errors import PolicyError, ProbeError
    from openrouter_probe.policy.compiled import load_compiled_policy
    from openrouter_probe.policy.drift import check_policy, find_spec
    from openrouter_probe.policy.spec import load_spec

    try:
        compiled = load_compiled_policy(policy_path)
        if spec_path is None:
            spec, where, spec_note = find_spec(compiled, policy_path)
            found = None if where is None else str(where)
        else:
            spec, found, spec_note = load_spec(spec_path), spec_path, None
        if spec is None and write:
            raise PolicyError(
                "--write re-compiles from the spec the policy was compiled from, and "
                f"{spec_note}; give it with --spec SPEC",
                source=policy_path,
            )
        if spec_note is not None and spec is not None:
            note(f"note: {spec_note}: a re-compile also applies those edits")
        snap = load_snapshot_for(compiled.model, offline, snapshot)
        report = check_policy(
            compiled,
            snap,
            price_threshold_pct=price_threshold_pct,
            spec=spec,
            spec_file=found,
            policy_file=policy_path,
            registry=_registry(precision_files),
        )
    except ProbeError as exc:
        click.echo(f"Error: {said(exc)}", err=True)
        sys.exit(2)
    here = term_of(click.get_current_context().command)  # the fix as this CLI's command line
    if fmt == "json":
        click.echo(json.dumps(report.to_dict(here), indent=2, ensure_ascii=False))
    else:  # whole lines: its fix is a command to copy
        click.echo(report.render(here))
    if write and report.drifted:
        _write_recompiled(report, policy_path, spec_path)
        sys.exit(0)
    sys.exit(report.exit_code)


def _write_recompiled(report: Any, policy_path: str, spec_path: str | None) -> None:
    """Write the re-compiled policy over POLICY atomically (or exit 2 when it cannot be)."""
    from openrouter_probe.files import atomic_write_text

    if report.recompiled is None:
        click.echo(
            f"Error: {policy_path}: not re-written: the re-compile failed (see above); "
            "edit the spec, then run --write again",
            err=True,
        )
        sys.exit(2)
    try:
        atomic_write_text(policy_path, report.recompiled.to_yaml())
    except OSError as exc:
        click.echo(f"Error: {policy_path}: cannot write the policy: {exc.strerror}", err=True)
        sys.exit(2)
    note(f"wrote {policy_path}: admits {', '.join(report.recompiled.admitted)}")

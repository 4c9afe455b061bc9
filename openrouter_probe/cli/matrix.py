"""``openrouter-probe matrix``: a model's provider matrix, or its changes across snapshots."""

from __future__ import annotations

from typing import Any

import click

from openrouter_probe.cli._common import cli, load_snapshot_for, note, plot_option, save_plot
from openrouter_probe.cli.options import format_option, precision_option, snapshot_options
from openrouter_probe.cli.tables import render_rows

# The matrix's table view: the columns that fit a terminal (csv and json carry them all).
_TABLE_COLUMNS = (
    "provider",
    "tag",
    "quantization_declared",
    "verdict",
    "measured",
    "input_usd_per_m",
    "output_usd_per_m",
    "cache_read_usd_per_m",
    "uptime_30m_pct",
    "status",
    "latency_p50_ms",
    "throughput_p50_tps",
    "max_output_tokens",
    "supports_tools",
)
# What a short terminal loses first (the tag, verdict and prices are never left out).
_TABLE_DROP_ORDER = (
    "supports_tools",
    "max_output_tokens",
    "cache_read_usd_per_m",
    "status",
    "latency_p50_ms",
    "quantization_declared",
    "throughput_p50_tps",
    "provider",
    "measured",
)


def _to_python(value: Any) -> Any:
    """A pandas cell as plain JSON/CSV data (NaN and <NA> become None)."""
    import pandas as pd

    if not isinstance(value, str | bool) and pd.isna(value):  # None, NaN, NaT, <NA>
        return None
    if hasattr(value, "item"):
        return value.item()
    if isinstance(value, pd.Timestamp):
        return value.isoformat().replace("+00:00", "Z")
    return value


def _frame_rows(frame: Any, columns: Any = None) -> list[dict[str, Any]]:
    cols = list(columns) if columns is not None else list(frame.columns)
    return [
        {c: _to_python(v) for c, v in zip(cols, row, strict=True)}
        for row in frame[cols].itertuples(index=False, name=None)
    ]


@cli.command()
@click.argument("model")
@snapshot_options
@click.option(
    "--history",
    "history",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False),
    metavar="PATH",
    help="Also load these saved snapshots of MODEL and show what changed over time (repeatable).",
)
@precision_option
@plot_option("price against uptime, coloured by precision verdict")
@format_option("csv")
def matrix(
    model: str,
    offline: bool,
    snapshot: str | None,
    history: tuple[str, ...],
    precision_files: tuple[str, ...],
    plot_path: str | None,
    fmt: str,
) -> None:
    """Show MODEL's provider matrix: precision verdict, prices, uptime, speed, limits.

    One row per endpoint. Prices are USD per million tokens with the discount applied; the table
    shows the main columns, --format csv and json carry every column (see docs/analysis.md).
    With --history PATH (repeatable), show price, tag and status changes across the snapshots.
    """
    from openrouter_probe.analysis.matrix import build_matrix, matrix_history
    from openrouter_probe.rules.precision import PrecisionRegistry

    snap = load_snapshot_for(model, offline, snapshot)
    if history:
        from openrouter_probe.rules.probing import resolve_snapshot

        # Each checked to be of MODEL, so that a mismatch names the file given.
        snaps = [snap, *(resolve_snapshot(snap.model, snapshot=p) for p in history)]
        frame = matrix_history(snaps)
        title = f"{snap.model}: changes across {len(snaps)} snapshots"
        render_rows(_frame_rows(frame), fmt, title=title)
        return
    frame = build_matrix(snap, registry=PrecisionRegistry.load(*precision_files))
    if plot_path:
        from openrouter_probe.analysis.plots import plot_price_uptime

        note(f"plot: {save_plot(plot_price_uptime(frame), plot_path)}")
    columns: tuple[str, ...] | None = _TABLE_COLUMNS if fmt == "text" else None
    if columns is not None and frame["measured"].isna().all():
        columns = tuple(c for c in columns if c != "measured")  # shown once something is measured
    if columns is not None and snap.batch is not None:
        at = columns.index("output_usd_per_m") + 1
        columns = (*columns[:at], "batch_output_usd_per_m", "batch_status", *columns[at:])
        from openrouter_probe.rules.batch import describe_batch

        note(describe_batch(snap.batch, snap.model))
    render_rows(
        _frame_rows(frame, columns),
        fmt,
        title=f"{snap.model} provider matrix (prices USD per 1M tokens)",
        drop_order=_TABLE_DROP_ORDER,
    )

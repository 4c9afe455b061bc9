"""Shared pieces of the command line: the group, its error handling, options and rendering.

A command parses options, calls one library function and renders. Data goes to stdout, provenance
and diagnostics to stderr. Any ``ProbeError`` becomes one line and exit code 1 (a traceback only with
``OPENROUTER_PROBE_DEBUG=1``); usage errors exit 2. Library modules are imported inside commands so
``openrouter-probe --help`` stays fast.
"""

from __future__ import annotations

import csv
import io
import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import click

if TYPE_CHECKING:
    from openrouter_probe.snapshot import Snapshot

F = TypeVar("F", bound=Callable[..., Any])

_DEBUG_ENV = "OPENROUTER_PROBE_DEBUG"


class _Group(click.Group):
    """Turns library errors into one clear line and exit code 1."""

    def invoke(self, ctx: click.Context) -> Any:
        from openrouter_probe.errors import ProbeError

        _setup_logging()
        try:
            return super().invoke(ctx)
        except ProbeError as exc:
            if os.environ.get(_DEBUG_ENV) == "1":
                raise
            raise click.ClickException(str(exc)) from exc
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            raise SystemExit(130) from None


def _setup_logging() -> None:
    """Diagnostics to stderr as plain lines; stamina's per-retry events only when debugging."""
    import logging

    debug = os.environ.get(_DEBUG_ENV) == "1"
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        logging.Formatter("%(levelname)s: %(message)s" if debug else "%(message)s")
    )
    root = logging.getLogger("openrouter_probe")
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG if debug else logging.INFO)
    root.propagate = False
    logging.getLogger("stamina").setLevel(logging.DEBUG if debug else logging.ERROR)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(
    package_name="openrouter-probe", prog_name="openrouter-probe", message="%(prog)s %(version)s"
)
def cli() -> None:
    """Probe OpenRouter providers for a model, compile a routing policy, plan the budget.

    Set OPENROUTER_API_KEY for latency/throughput stats (optional for public data) and
    OPENROUTER_BASE_URL to point at another server. --offline uses the bundled Kimi K2.5 snapshot.
    """


# -- shared options -------------------------------------------------------------------------------


def format_option(*choices: str, default: str = "table") -> Callable[[F], F]:
    return click.option(
        "--format",
        "fmt",
        type=click.Choice(choices),
        default=default,
        show_default=True,
        help="Output format (data goes to stdout).",
    )


def plot_option(what: str) -> Callable[[F], F]:
    """``--plot FILE.png``: save ``what`` as a PNG (the command passes ``plot_path``)."""
    return click.option(
        "--plot",
        "plot_path",
        type=click.Path(dir_okay=False, writable=True),
        metavar="FILE.png",
        help=f"Save a plot of {what}.",
    )


def snapshot_options(func: F) -> F:
    func = click.option(
        "--snapshot",
        "snapshot",
        metavar="bundled|PATH",
        help="Use a saved snapshot (or 'bundled') instead of probing OpenRouter.",
    )(func)
    func = click.option(
        "--offline",
        is_flag=True,
        help="Use the snapshot bundled with the package: no network, no key.",
    )(func)
    return func


def _load(model: str | None, offline: bool, snapshot: str | None) -> Snapshot:
    from openrouter_probe.snapshot import resolve_snapshot

    if offline and snapshot and snapshot != "bundled":
        raise click.UsageError("--offline and --snapshot PATH exclude each other")
    snap = resolve_snapshot(model, offline=offline, snapshot=snapshot)
    _note(f"snapshot: {snap.provenance}")
    if snap.source in ("api", "page") and snap.parsed.stats_missing:
        _note(
            "latency/throughput are null: OpenRouter only returns them with an API key "
            "(export OPENROUTER_API_KEY=...)"
        )
    return snap


def _note(text: str) -> None:
    click.echo(text, err=True)


def _fmt_num(value: Any, digits: int = 2) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _render_rows(
    rows: Sequence[dict[str, Any]], fmt: str, *, title: str | None = None, json_rows: Any = None
) -> None:
    """Write ``rows`` to stdout as a rich table, CSV or JSON (``json_rows`` overrides for JSON)."""
    if fmt == "json":
        payload = rows if json_rows is None else json_rows
        click.echo(json.dumps(payload, indent=2, ensure_ascii=False, default=str))
        return
    if fmt == "csv":
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=list(rows[0]) if rows else [], lineterminator="\n")
        writer.writeheader()
        writer.writerows({k: ("" if v is None else v) for k, v in r.items()} for r in rows)
        click.echo(buf.getvalue(), nl=False)
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title, show_lines=False)
    columns = list(rows[0]) if rows else []
    for col in columns:
        numeric = any(isinstance(r.get(col), int | float) for r in rows)
        table.add_column(_short_header(col), justify="right" if numeric else "left")
    for r in rows:
        table.add_row(*(_fmt_num(r[c]) for c in columns))
    console = Console(file=sys.stdout)
    if not console.is_terminal:
        console = Console(file=sys.stdout, width=200)
    console.print(table)


_UNIT_SUFFIXES = (
    ("_usd_per_m", " $/M"),
    ("_usd", " $"),
    ("_pct", " %"),
    ("_ms", " ms"),
    ("_tps", " tok/s"),
    ("_tokens", ""),
)


def _short_header(column: str) -> str:
    """A compact table header that keeps the unit: ``output_usd_per_m`` -> ``output $/M``."""
    for suffix, unit in _UNIT_SUFFIXES:
        if column.endswith(suffix):
            return column[: -len(suffix)].replace("_", " ") + unit
    return column.replace("_", " ")

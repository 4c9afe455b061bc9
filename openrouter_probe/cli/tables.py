"""Tables on stdout: rows rendered as a rich table that fits the terminal, CSV or JSON.

A table fits ``$COLUMNS`` (or the terminal, or 80 columns when piped): the essential columns (tag,
verdict, prices, costs) are never cut; other text columns wrap, then the lesser ones are left out
and one line on stderr names them.
"""

from __future__ import annotations

import csv
import io
import json
import shutil
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import click

from openrouter_probe.cli._common import note, wrapped
from openrouter_probe.run.progress import env_columns

_ESSENTIAL_NAMES = frozenset({"tag", "id", "verdict"})


def essential_column(column: str) -> bool:
    """Whether a table must show ``column`` whole: tag, id, verdict, input/output prices, costs."""
    if column in _ESSENTIAL_NAMES:
        return True
    if column.endswith("_usd_per_m"):
        return not column.startswith(("cache", "reasoning"))
    return column.endswith("cost_usd")


def format_cell(value: Any, column: str = "") -> str:
    """Show one table cell in the house number style, from the unit its column name carries.

    Money (``_usd_per_m``, ``_usd``) with two decimals (more only for a sub-cent price, never an
    exponent), ``_ms`` and ``_tps`` as whole numbers, percentages (``_pct``) and other floats with
    two decimals, booleans as yes/no; ``-`` for a missing value.
    """
    from decimal import Decimal

    from openrouter_probe.rules.quantities import format_number, format_usd

    if value is None or (isinstance(value, float) and value != value):
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int | float | Decimal):
        if column.endswith(("_usd_per_m", "_usd")):
            return format_usd(value).replace("$", "", 1)
        if column.endswith(("_ms", "_tps")):
            return format_number(value, decimals=0)
        if isinstance(value, int):
            return str(value)
        return format_number(value, decimals=2)
    return str(value)


#: The width a table fits when stdout is not a terminal and ``$COLUMNS`` is unset (a pipe, a file,
#: a CI log): the classic terminal's, so piped tables stay readable (``--format csv|json`` for all).
PIPE_WIDTH = 80


def table_width() -> int:
    """The width tables must fit: ``$COLUMNS`` when set (piped output too), else the terminal's,
    else (piped without ``$COLUMNS``) ``PIPE_WIDTH``."""
    if columns := env_columns():
        return columns
    return shutil.get_terminal_size().columns if sys.stdout.isatty() else PIPE_WIDTH


def echo_text(text: str) -> None:
    """Write prose to stdout (a table's notes, a summary) wrapped (``wrapped``) to the width
    tables fit (``table_width``: 80 columns when piped without ``$COLUMNS``)."""
    click.echo(wrapped(text, table_width()))


def _widest(parts: Iterable[str]) -> int:
    """The widest of ``parts`` in terminal cells (a wide character takes two)."""
    from rich.cells import cell_len

    return max((cell_len(part) for part in parts), default=0)


class ColumnPlan:
    """How one column of a table is shown: its header, cells and the widths it needs."""

    def __init__(self, column: str, cells: list[str], *, essential: bool, numeric: bool) -> None:
        self.column = column
        self.cells = cells
        self.empty = all(cell == "-" for cell in cells)
        # A column with nothing in it (every cell "-") has nothing to protect.
        self.essential = essential and not self.empty
        self.numeric = numeric
        # Essential and numeric columns never wrap; text columns (provider, reason) may.
        self.fixed = essential or numeric

    def header(self, two_lines: bool) -> str:
        text = short_header(self.column)
        if not two_lines or " " not in text:
            return text
        words = text.split(" ")
        # Split where the longer of the two lines is shortest: "uptime / 30m %".
        cut = min(
            range(1, len(words)),
            key=lambda i: max(len(" ".join(words[:i])), len(" ".join(words[i:]))),
        )
        return " ".join(words[:cut]) + "\n" + " ".join(words[cut:])

    def natural(self, two_lines: bool) -> int:
        return _widest(
            line for text in (self.header(two_lines), *self.cells) for line in text.splitlines()
        )

    def minimum(self, two_lines: bool) -> int:
        if self.fixed:
            return self.natural(two_lines)
        # A text column wraps, but not below its longest word or a readable 20 characters.
        words = _widest(w for text in (self.header(two_lines), *self.cells) for w in text.split())
        return max(words, 1, min(self.natural(two_lines), _WRAP_MIN))


_WRAP_MIN = 20


def _table_total(widths: Sequence[int]) -> int:
    # Rich's default box: one border per column plus one, and one space of padding each side.
    return sum(widths) + 3 * len(widths) + 1


def fit_columns(
    rows: Sequence[dict[str, Any]],
    width: int,
    *,
    keep: Callable[[str], bool] = essential_column,
    drop_order: Sequence[str] = (),
) -> tuple[list[ColumnPlan], bool, list[str]]:
    """Decide how a table fits ``width``: its column plans, whether headers take two lines, and
    the columns left out: empty ones (every cell ``-``) first, then those in ``drop_order``, in
    that order, then the others right to left, never one that ``keep`` protects; a column left out
    early comes back when the later ones leave room for it."""
    columns = list(rows[0]) if rows else []
    plans = [
        ColumnPlan(
            c,
            [format_cell(r.get(c), c) for r in rows],
            essential=keep(c),
            numeric=any(
                isinstance(r.get(c), int | float) and not isinstance(r.get(c), bool) for r in rows
            ),
        )
        for c in columns
    ]
    for two_lines in (False, True):
        if _table_total([p.minimum(two_lines) for p in plans]) <= width:
            return plans, two_lines, []
    rank = {c: i for i, c in enumerate(drop_order)}
    removed: list[ColumnPlan] = []
    while _table_total([p.minimum(True) for p in plans]) > width:
        lesser = [i for i, p in enumerate(plans) if not p.essential]
        if not lesser:
            break  # the essential columns alone are wider: their text folds (render_rows)
        # Empty columns (every cell "-") first, then the named ones (lowest rank), then the
        # rightmost of the rest.
        victim = min(
            lesser,
            key=lambda i: (not plans[i].empty, rank.get(plans[i].column, len(rank)), -i),
        )
        removed.append(plans.pop(victim))
    # Dropping one column at a time can leave room for an earlier one (a wide text column went
    # last): put back each that fits, the last left out first.
    for plan in reversed(removed):
        trial = sorted([*plans, plan], key=lambda p: columns.index(p.column))
        if _table_total([p.minimum(True) for p in trial]) <= width:
            plans = trial
    shown = {p.column for p in plans}
    return plans, True, [c for c in columns if c not in shown]


def render_rows(
    rows: Sequence[dict[str, Any]],
    fmt: str,
    *,
    title: str | None = None,
    json_rows: Any = None,
    keep: Callable[[str], bool] = essential_column,
    drop_order: Sequence[str] = (),
) -> list[str]:
    """Write ``rows`` to stdout as a rich table fitted as the module says (``keep``: the
    columns never cut; ``drop_order``: the first left out), CSV or JSON (``json_rows`` overrides
    for JSON; its floats rounded to what they mean: ``round_for_json``). Return the columns left
    out."""
    from openrouter_probe.rules.quantities import round_for_json

    if fmt == "json":
        payload = rows if json_rows is None else json_rows
        click.echo(json.dumps(round_for_json(payload), indent=2, ensure_ascii=False, default=str))
        return []
    if fmt == "csv":
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=list(rows[0]) if rows else [], lineterminator="\n")
        writer.writeheader()
        writer.writerows({k: ("" if v is None else v) for k, v in r.items()} for r in rows)
        click.echo(buf.getvalue(), nl=False)
        return []
    from rich.console import Console
    from rich.table import Table

    width = table_width()
    plans, two_lines, dropped = fit_columns(rows, width, keep=keep, drop_order=drop_order)
    # Wider than asked even with only the essential columns: their text (a long model id) folds
    # onto a second line, never cut; figures stay whole.
    fold = _table_total([p.minimum(two_lines) for p in plans]) > width
    table = Table(title=title, show_lines=False)
    for p in plans:
        whole = p.fixed and not (fold and not p.numeric)
        table.add_column(
            p.header(two_lines),
            justify="right" if p.numeric else "left",
            no_wrap=whole,
            overflow="fold",
            min_width=p.natural(two_lines) if whole else None,
        )
    for i in range(len(rows)):
        table.add_row(*(p.cells[i] for p in plans))
    Console(file=sys.stdout, width=width).print(table)
    if dropped:
        others = _other_formats()
        hint = f"; --format {others} has every column" if others else ""
        said = (
            f"left out to fit {width} columns: {', '.join(short_header(c) for c in dropped)} "
            f"(widen the terminal or set COLUMNS{hint})"
        )
        note(said)
    return dropped


def _other_formats() -> str:
    """The running command's --format choices besides the table (``csv or json``), if any."""
    ctx = click.get_current_context(silent=True)
    if ctx is None:
        return ""
    for param in ctx.command.params:
        if param.name == "fmt" and isinstance(param.type, click.Choice):
            return " or ".join(str(c) for c in param.type.choices if c != "text")
    return ""


_UNIT_SUFFIXES = (
    ("_usd_per_m", " $/M"),
    ("_usd", " $"),
    ("_pct", " %"),
    ("_ms", " ms"),
    ("_tps", " tok/s"),
    ("_h", " h"),
    ("_tokens", ""),
)


def short_header(column: str) -> str:
    """A compact table header that keeps the unit: ``output_usd_per_m`` -> ``output $/M``."""
    for suffix, unit in _UNIT_SUFFIXES:
        if column.endswith(suffix):
            return column[: -len(suffix)].replace("_", " ") + unit
    return column.replace("_", " ")

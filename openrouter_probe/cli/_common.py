"""Shared pieces of the command line: the group, its error handling, options and rendering.

A command parses options, calls one library function and renders. Data goes to stdout, provenance
and diagnostics to stderr. Any ``ProbeError`` becomes one line and exit code 1 (a traceback only with
``OPENROUTER_PROBE_DEBUG=1``): the job failed. Usage errors exit 2, the tool's own checks of an
option's value included (``checked_by``: option callbacks raise click's usage error). Library modules are imported inside commands so
``openrouter-probe --help`` stays fast.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import logging
import os
import shutil
import sys
import textwrap
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import click
from click.core import ParameterSource  # click.ParameterSource only from 8.3 on

from openrouter_probe.cli.options import field_option, format_option, out_option, snapshot_options
from openrouter_probe.run.config import RunPlan

if TYPE_CHECKING:
    from openrouter_probe.errors import OptionError
    from openrouter_probe.rules.snapshot import Snapshot

F = TypeVar("F", bound=Callable[..., Any])

#: Shared options, declared in ``cli.options`` (re-exported for the commands).
__all__ = ["budget_option", "format_option", "out_option", "snapshot_options"]

_DEBUG_ENV = "OPENROUTER_PROBE_DEBUG"


#: The commands that run a paid job: the collector is held off through their setup, until the
#: job sends (``run.schedule.garbage.held``).
RUNS_A_JOB = frozenset({"generate", "verify"})


class Command(click.Command):
    """A command whose library refusals of a keyword's value (``OptionError``) are usage errors:
    exit 2, the keyword said as this command's own flag, looked up in its click parameters.
    ``keywords`` maps a library keyword to the parameter that gives it where their names differ
    (``export``'s ``paths=`` is its ``OUTPUTS``)."""

    def __init__(self, *args: Any, keywords: Mapping[str, str] | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.keywords = dict(keywords or {})

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        # An old spelling kept for one release (``cli.options.AliasedOption``) works, and says so.
        for param in self.params:
            for alias in getattr(param, "aliases", ()):
                if any(str(a) == alias or str(a).startswith(f"{alias}=") for a in args):
                    new = next(o for o in param.opts if o.startswith("--") and o != alias)
                    note(f"{alias} is {new} now; the old name is accepted until 0.4.0")
        return super().parse_args(ctx, args)

    def invoke(self, ctx: click.Context) -> Any:
        from openrouter_probe.errors import OptionError, ProbeError
        from openrouter_probe.run.schedule.garbage import held

        try:
            with held() if self.name in RUNS_A_JOB else contextlib.nullcontext():
                return super().invoke(ctx)
        except OptionError as exc:
            if os.environ.get(_DEBUG_ENV) == "1":
                raise
            raise click.UsageError(as_flags(exc, ctx.command), ctx) from exc
        except ProbeError as exc:
            if os.environ.get(_DEBUG_ENV) == "1":
                raise
            raise click.ClickException(said(exc, ctx.command)) from exc


def _parameter(command: click.Command, keyword: str) -> click.Parameter | None:
    name = getattr(command, "keywords", {}).get(keyword, keyword)
    return next((p for p in command.params if p.name == name), None)


def _shown(value: Any) -> str:
    """A value as typed on a command line (a quoted word where it has spaces)."""
    import shlex

    if isinstance(value, tuple | list):
        return " ".join(_shown(v) for v in value)
    text = str(value)
    return shlex.quote(text) if text != shlex.quote(text) and " " in text else text


def snapshot_flags() -> str:
    """How the running command got its snapshot, for a command line its advice suggests:
    `` --offline``, `` --snapshot PATH`` or nothing (the suggested command probes, as it did)."""
    ctx = click.get_current_context(silent=True)
    params = ctx.params if ctx is not None else {}
    snapshot = params.get("snapshot")
    if params.get("offline") or snapshot == "bundled":
        return " --offline"
    return f" --snapshot {_shown(snapshot)}" if snapshot else ""


def _spec_flag() -> str:
    """`` --spec PATH`` when the running command was given one (``policy check --spec``)."""
    ctx = click.get_current_context(silent=True)
    spec = ctx.params.get("spec_path") if ctx is not None else None
    return f" --spec {_shown(spec)}" if spec else ""


def _recheck(tail: str) -> str:
    """``policy check POLICY`` with the running command's snapshot flags, then ``tail``."""
    return "openrouter-probe policy check {policy:s}" + snapshot_flags() + tail


#: The library's advice (``errors.ADVICE``) as the command lines that take the same step (a
#: function: the line repeats how the running command got its snapshot).
ADVICE: dict[str, str | Callable[[], str]] = {
    "save_snapshot": "`openrouter-probe endpoints MODEL --save PATH`",
    "no_cap": "`--no-budget`",
    "save_model_snapshot": "`openrouter-probe endpoints {model:s} --save PATH`",
    "verify_evidence": "`openrouter-probe verify --evidence FILE.yaml`",
    "plan_verify": "`openrouter-probe verify --dry-run`",
    "compile_policy": lambda: (
        "`openrouter-probe policy compile {spec:s}" + snapshot_flags() + " -o {output:s}`"
    ),
    "explain_policy": "`openrouter-probe policy explain {policy:s}`",
    "explain_spec": lambda: "`openrouter-probe policy explain {spec:s}" + snapshot_flags() + "`",
    "lint_policy": "`openrouter-probe policy lint {policy:s} --model MODEL`",
    "recompile_fresh": "`openrouter-probe policy compile`",
    "recheck_write": lambda: _recheck(_spec_flag() + " --write"),
    "recheck_with_spec": lambda: _recheck(" --spec SPEC --write"),
    "recheck_after_edit": lambda: "run " + _recheck(_spec_flag() + " --write"),
}


def _advice(step: str) -> str:
    said = ADVICE[step]
    return said() if callable(said) else said


def flag_of(command: click.Command, keyword: str, value: Any = None, *, given: bool = False) -> str:
    """How ``command`` spells the library keyword ``keyword`` (``read_timeout_s`` ->
    ``--read-timeout``), with ``value`` when ``given`` (``--read-timeout -1.0``; a flag alone,
    or its ``--no-`` form for ``False``). A keyword the command has no parameter for is said as
    the library says it (``name=VALUE``)."""
    from openrouter_probe.errors import keyword_term

    if keyword.startswith("@"):
        return _advice(keyword[1:])
    param = _parameter(command, keyword)
    if param is None:
        return keyword_term(keyword, value, given)
    if isinstance(param, click.Argument):
        label = param.make_metavar(click.Context(command))
        return f"{label} {_shown(value)}" if given and value is not None else label
    assert isinstance(param, click.Option)
    flag = next((o for o in param.opts if o.startswith("--")), param.opts[0])
    if not given:
        return flag
    if param.is_flag:
        return param.secondary_opts[0] if value is False and param.secondary_opts else flag
    return f"{flag} {_shown(value)}"


def as_flags(exc: OptionError, command: click.Command) -> str:
    """``exc``'s message with each keyword said as ``command``'s flag (``flag_of``)."""
    return exc.render(lambda name, value, given: flag_of(command, name, value, given=given))


def term_of(command: click.Command) -> Callable[[str, Any, bool], str]:
    """How ``command`` says a library keyword (``flag_of``), as ``errors.Term``."""
    return lambda name, value, given: flag_of(command, name, value, given=given)


def said(text: object, command: click.Command | None = None) -> str:
    """``text`` for this command line: a library ``Message`` (or an error carrying one) with
    each keyword said as ``command``'s own flag (the running command's by default, looked up in
    its click parameters: ``flag_of``); any other text as it is."""
    from openrouter_probe.errors import keyword_term, rendered

    if command is None:
        ctx = click.get_current_context(silent=True)
        command = None if ctx is None else ctx.command
    if command is None:
        return rendered(text, keyword_term)
    return rendered(text, term_of(command))


class _Group(click.Group):
    """Turns library errors into one clear line and exit code 1; its commands' refused values
    (``OptionError``) into usage errors, exit 2 (``Command``)."""

    command_class = Command
    group_class = type  # a sub-group (``policy``) is one of these too

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        """Click's, with the nearest command named for one it does not know (``fake`` ->
        ``fake-server``; click suggests options, not commands)."""
        try:
            return super().resolve_command(ctx, args)
        except click.UsageError as exc:
            import difflib

            given = args[0] if args else ""
            names = self.list_commands(ctx)
            near = difflib.get_close_matches(given, names, n=1, cutoff=0.5)
            near = near or [n for n in names if given and n.startswith(given)][:1]
            if not near or given in names:
                raise
            raise click.UsageError(f"{exc.message} Did you mean {near[0]!r}?", ctx) from None

    def invoke(self, ctx: click.Context) -> Any:
        from openrouter_probe.errors import ProbeError

        _setup_logging()
        # The command's pydantic models are its own reading of OpenRouter's answers and files:
        # pydantic's plugins (observability) are not looked for, a scan of every installed
        # package's entry points that cost a one-row ``generate`` 20 ms. Set the variable to say
        # otherwise (``PYDANTIC_DISABLE_PLUGINS=""`` loads them).
        os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
        try:
            return super().invoke(ctx)
        except ProbeError as exc:
            if os.environ.get(_DEBUG_ENV) == "1":
                raise
            raise click.ClickException(said(exc)) from exc
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            raise SystemExit(130) from None


class _Said(logging.Formatter):
    """Log lines whose ``Message`` says each keyword as the running command's flag (``said``)."""

    def format(self, record: logging.LogRecord) -> str:
        from openrouter_probe.errors import Message

        if not record.args and isinstance(record.msg, Message):
            record = logging.makeLogRecord({**record.__dict__, "msg": said(record.msg)})
        return super().format(record)


def _setup_logging() -> None:
    """Diagnostics to stderr as plain lines (each retry is one line); debug lines only when debugging."""

    debug = os.environ.get(_DEBUG_ENV) == "1"
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_Said("%(levelname)s: %(message)s" if debug else "%(message)s"))
    root = logging.getLogger("openrouter_probe")
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG if debug else logging.INFO)
    root.propagate = False


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(
    package_name="openrouter-probe", prog_name="openrouter-probe", message="%(prog)s %(version)s"
)
def cli() -> None:
    """Probe OpenRouter providers for a model, compile a routing policy, plan the budget,
    run the job within it, and check precision by measuring.

    OPENROUTER_API_KEY is needed to generate and verify (and gives latency/throughput stats);
    OPENROUTER_BASE_URL points every command at another server, such as `fake-server`.
    --offline uses the bundled Kimi K2.5 snapshot (reconstructed, not a live capture).
    """


# -- shared options -------------------------------------------------------------------------------


def checked_by(
    check: Callable[[Any], object],
) -> Callable[[click.Context, click.Parameter, Any], Any]:
    """An option callback that runs the library's own check of a value (``check`` raises
    ``ConfigError``) and turns a refusal into a usage error: exit 2, as click's own checks, not 1
    (which is for a job that failed). The value passes on as given; the library reads it again."""

    def callback(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
        from openrouter_probe.errors import ConfigError, OptionError

        if value is None or value == ():
            return value
        try:
            for one in value if isinstance(value, tuple) else (value,):
                check(one)
        except OptionError as exc:
            raise click.UsageError(as_flags(exc, ctx.command), ctx) from exc
        except ConfigError as exc:
            raise click.UsageError(said(exc, ctx.command), ctx) from exc
        return value

    return callback


def usd_amount(option: str) -> Callable[[Any], object]:
    """The check of ``--budget-usd``-like options: a positive, finite amount of USD."""

    def check(value: Any) -> object:
        from openrouter_probe.rules.quantities import positive_usd

        return positive_usd(value, option)

    return check


def budget_option(help: str | None = None, **attrs: Any) -> Callable[[F], F]:
    """``--budget-usd USD``: a positive amount of USD, checked as a usage error (``usd_amount``),
    the run's plan's ``budget_usd`` (its help, unless ``help`` says what another command caps).
    The parameter is ``budget_usd``; ``attrs`` go to ``click.option`` (``required``)."""
    if help is not None:
        attrs["help"] = help
    check = checked_by(usd_amount("--budget-usd"))
    return field_option(RunPlan, "budget_usd", metavar="USD", callback=check, **attrs)


def token_count(option: str) -> Callable[[Any], object]:
    """The check of a token-count option (``60M``, ``7.5M``, ``500k``)."""

    def check(value: Any) -> object:
        from openrouter_probe.rules.quantities import parse_token_count

        return parse_token_count(value, what=option)

    return check


def plot_option(what: str) -> Callable[[F], F]:
    """``--plot FILE.png``: save ``what`` as a PNG (the command passes ``plot_path``)."""
    return click.option(
        "--plot",
        "plot_path",
        type=click.Path(dir_okay=False, writable=True),
        metavar="FILE.png",
        help=f"Save a plot of {what}.",
    )


def given(name: str) -> bool:
    """Whether the running command's parameter ``name`` was given (not its default)."""
    ctx = click.get_current_context()
    source = ctx.get_parameter_source(name)
    return source is not None and source not in (
        ParameterSource.DEFAULT,
        ParameterSource.DEFAULT_MAP,
    )


def warn_unused(name: str, why: str) -> None:
    """Say on stderr that the option ``name``, given, does nothing here (``why``), as the
    running command spells it (``--no-preserve-thinking``)."""
    if not given(name):
        return
    ctx = click.get_current_context()
    note(f"warning: {flag_of(ctx.command, name, ctx.params.get(name), given=True)} {why}: ignored")


def check_snapshot_options(offline: bool, snapshot: str | None) -> None:
    """``--offline`` with ``--snapshot PATH`` is a usage error, even where neither is read."""
    if offline and snapshot and snapshot != "bundled":
        raise click.UsageError("--offline and --snapshot PATH exclude each other")


def load_snapshot_for(model: str | None, offline: bool, snapshot: str | None) -> Snapshot:
    """Resolve ``--offline`` / ``--snapshot`` / a live probe for ``model`` and say which on stderr."""
    from openrouter_probe.rules.snapshot import resolve_snapshot

    check_snapshot_options(offline, snapshot)
    snap = resolve_snapshot(model, offline=offline, snapshot=snapshot)
    note(f"snapshot: {snap.provenance}")
    if snap.source in ("api", "page") and snap.parsed.stats_missing:
        note(
            "latency/throughput are null: OpenRouter only returns them with an API key "
            "(export OPENROUTER_API_KEY=...)"
        )
    return snap


def note(text: object) -> None:
    """Write a diagnostic to stderr (data goes to stdout), a library ``Message`` said with the
    running command's flags (``said``). Each line is wrapped between words
    (never inside a figure, a path or an id) to ``$COLUMNS`` or the terminal, as tables are;
    piped without ``$COLUMNS``, one line per message (for logs and grep)."""
    width = _stderr_width()
    lines = [
        textwrap.fill(
            line, width, subsequent_indent="  ", break_long_words=False, break_on_hyphens=False
        )
        if width is not None and len(line) > width
        else line
        for line in said(text).splitlines() or [""]
    ]
    click.echo("\n".join(lines), err=True)


def _stderr_width() -> int | None:
    columns = os.environ.get("COLUMNS", "")
    if columns.strip().isdigit() and int(columns) > 0:
        return max(int(columns), 40)
    if sys.stderr.isatty():
        return max(shutil.get_terminal_size().columns, 40)
    return None


# -- tables -------------------------------------------------------------------------------------

# Columns a table never cuts (the tag, the verdict, the input/output prices and costs); every
# other column may wrap, then be left out (the command's drop order, then right to left).
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
    columns = os.environ.get("COLUMNS", "")
    if columns.strip().isdigit() and int(columns) > 0:
        return int(columns)
    if sys.stdout.isatty():
        return shutil.get_terminal_size().columns
    return PIPE_WIDTH


def echo_text(text: str) -> None:
    """Write prose to stdout (a table's notes, a summary) wrapped between words to the width tables
    fit (``table_width``: 80 columns when piped without ``$COLUMNS``), never inside a figure, a
    path or an id; a line that is one long word stays whole."""
    width = table_width()
    for line in text.splitlines() or [""]:
        if len(line) <= width:
            click.echo(line)
            continue
        click.echo(
            textwrap.fill(
                line, width, subsequent_indent="  ", break_long_words=False, break_on_hyphens=False
            )
        )


def _cell_width(text: str) -> int:
    from rich.cells import cell_len

    return max((cell_len(line) for line in text.splitlines() or [""]), default=0)


def _word_width(text: str) -> int:
    from rich.cells import cell_len

    return max((cell_len(word) for word in text.split()), default=0)


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
        header = self.header(two_lines)
        return max([_cell_width(header), *(_cell_width(c) for c in self.cells)])

    def minimum(self, two_lines: bool) -> int:
        if self.fixed:
            return self.natural(two_lines)
        header = self.header(two_lines)
        # A text column wraps, but not below its longest word or a readable 20 characters.
        words = max([_word_width(header), *(_word_width(c) for c in self.cells), 1])
        return max(words, min(self.natural(two_lines), _WRAP_MIN))


_WRAP_MIN = 20


def _table_total(widths: Sequence[int]) -> int:
    # Rich's default box: one border per column plus one, and one space of padding each side.
    return sum(widths) + 3 * len(widths) + 1


def fit_columns(
    rows: Sequence[dict[str, Any]],
    width: int | None,
    *,
    keep: Callable[[str], bool] = essential_column,
    drop_order: Sequence[str] = (),
) -> tuple[list[ColumnPlan], bool, list[str]]:
    """Decide how a table fits ``width``: its column plans, whether headers take two lines, and
    the columns left out: empty ones (every cell ``-``) first, then those in ``drop_order``, in
    that order, then the others right to left, never one that ``keep`` protects; a column left out
    early comes back when the later ones leave room for it. ``None`` fits nothing."""
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
    if width is None:
        return plans, False, []
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
    """Write ``rows`` to stdout as a rich table, CSV or JSON (``json_rows`` overrides for JSON).

    A table fits ``$COLUMNS`` (or the terminal, or 80 columns when piped): the tag, verdict and
    prices (``keep``) are never
    cut; other text columns wrap, then the lesser columns are left out (``drop_order`` first, then
    from the right), and one line on stderr names them. JSON floats are rounded to what they mean (``round_for_json``).
    """
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
    needed = _table_total([p.minimum(two_lines) for p in plans])
    natural = _table_total([p.natural(two_lines) for p in plans])
    # Wider than asked even with only the essential columns: their text (a long model id) folds
    # onto a second line, never cut; figures stay whole.
    fold = width is not None and needed > width
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
    render_width = natural if width is None else width
    Console(file=sys.stdout, width=render_width).print(table)
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

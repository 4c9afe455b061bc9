"""Shared pieces of the command line: the group, its error handling (the package's docstring
says what goes where and each exit code), options and diagnostics. The tool's own checks of an
option's value are usage errors too (``checked_by``: option callbacks raise click's).
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import logging
import os
import shutil
import sys
import textwrap
from collections.abc import Callable, Iterator, Mapping, MutableMapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import click
from click.core import ParameterSource  # click.ParameterSource only from 8.3 on

from openrouter_probe.cli.options import field_option
from openrouter_probe.rules.quantities import positive_usd
from openrouter_probe.run.config import RunPlan
from openrouter_probe.run.progress import env_columns

if TYPE_CHECKING:
    from openrouter_probe.rules.snapshot import Snapshot

F = TypeVar("F", bound=Callable[..., Any])

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
            own = getattr(ctx.find_root().command, "own_process", False)
            with held(at_exit=own) if self.name in RUNS_A_JOB else contextlib.nullcontext():
                return super().invoke(ctx)
        except OptionError as exc:
            if os.environ.get(_DEBUG_ENV) == "1":
                raise
            raise click.UsageError(said(exc, ctx.command), ctx) from exc
        except ProbeError as exc:
            if os.environ.get(_DEBUG_ENV) == "1":
                raise
            raise click.ClickException(said(exc, ctx.command)) from exc


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


def flag_of(command: click.Command, keyword: str, value: Any = None, *, given: bool = False) -> str:
    """How ``command`` spells the library keyword ``keyword`` (``read_timeout_s`` ->
    ``--read-timeout``), with ``value`` when ``given`` (``--read-timeout -1.0``; a flag alone,
    or its ``--no-`` form for ``False``). A keyword the command has no parameter for is said as
    the library says it (``name=VALUE``)."""
    from openrouter_probe.errors import keyword_term

    if keyword.startswith("@"):
        advice = ADVICE[keyword[1:]]
        return advice() if callable(advice) else advice
    name = getattr(command, "keywords", {}).get(keyword, keyword)
    param = next((p for p in command.params if p.name == name), None)
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
    return rendered(text, keyword_term if command is None else term_of(command))


#: Each command of the group and the module that registers it (``@cli.command``), imported when
#: the command is first looked up: a ``generate`` imports ``cli.generate`` alone, ``--help`` all of
#: them. ``tests/cli/test_commands.py`` holds the table to what the modules register.
COMMANDS = {
    "audit": "openrouter_probe.cli.outputs",
    "budget": "openrouter_probe.cli.analysis",
    "endpoints": "openrouter_probe.cli.probe",
    "export": "openrouter_probe.cli.outputs",
    "fake-server": "openrouter_probe.cli.fake",
    "generate": "openrouter_probe.cli.generate",
    "keys": "openrouter_probe.cli.keys",
    "matrix": "openrouter_probe.cli.matrix",
    "models": "openrouter_probe.cli.probe",
    "policy": "openrouter_probe.cli.policy",
    "verify": "openrouter_probe.cli.verify",
}


class _Commands(MutableMapping[str, click.Command]):
    """The group's commands by name (click's ``Group.commands``): a command of ``modules`` is
    there from the start, its module imported when the command is first looked up; listing the
    names imports nothing."""

    def __init__(self, modules: Mapping[str, str]) -> None:
        self.modules = dict(modules)
        self.loaded: dict[str, click.Command] = {}

    def __getitem__(self, name: str) -> click.Command:
        if name not in self.loaded and name in self.modules:
            importlib.import_module(self.modules[name])  # its ``@cli.command`` adds it
        return self.loaded[name]

    def __setitem__(self, name: str, command: click.Command) -> None:
        self.loaded[name] = command

    def __delitem__(self, name: str) -> None:
        if name not in self.loaded and name not in self.modules:
            raise KeyError(name)
        self.loaded.pop(name, None)
        self.modules.pop(name, None)

    def __iter__(self) -> Iterator[str]:
        return iter(self.modules | self.loaded)

    def __len__(self) -> int:
        return len(self.modules | self.loaded)


class _Group(click.Group):
    """The group: its commands (``Command``) turn library errors into one line, exit 1, and
    refused values into usage errors, exit 2; an interrupt exits 130."""

    command_class = Command
    group_class = type  # a sub-group (``policy``) is one of these too
    own_process = False  # run on this process's own command line (``main``)

    def main(self, args: Sequence[str] | None = None, *rest: Any, **extra: Any) -> Any:
        """Click's; ``args`` None is this process's own command line (the console script,
        ``python -m openrouter_probe``), which ends with the command (``run.schedule.garbage.held``
        then leaves the exit's collection out); not a notebook's call, nor ``CliRunner``'s."""
        self.own_process = args is None
        return super().main(args, *rest, **extra)

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
        _setup_logging()
        # The command's pydantic models are its own reading of OpenRouter's answers and files:
        # pydantic's plugins (observability) are not looked for, a scan of every installed
        # package's entry points that cost a one-row ``generate`` 20 ms. Set the variable to say
        # otherwise (``PYDANTIC_DISABLE_PLUGINS=""`` loads them).
        os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
        try:
            return super().invoke(ctx)
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


@click.group(
    cls=_Group,
    commands=_Commands(COMMANDS),
    context_settings={"help_option_names": ["-h", "--help"]},
)
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
        from openrouter_probe.errors import ConfigError

        if value is None or value == ():
            return value
        try:
            for one in value if isinstance(value, tuple) else (value,):
                check(one)
        except ConfigError as exc:  # an ``OptionError`` too: its keywords said as flags
            raise click.UsageError(said(exc, ctx.command), ctx) from exc
        return value

    return callback


def budget_option(help: str | None = None, **attrs: Any) -> Callable[[F], F]:
    """``--budget-usd USD``: a positive amount of USD, checked as a usage error (``positive_usd``),
    the run's plan's ``budget_usd`` (its help, unless ``help`` says what another command caps).
    The parameter is ``budget_usd``; ``attrs`` go to ``click.option`` (``required``)."""
    check = checked_by(functools.partial(positive_usd, what="--budget-usd"))
    return field_option(RunPlan, "budget_usd", metavar="USD", callback=check, help=help, **attrs)


def plot_option(what: str) -> Callable[[F], F]:
    """``--plot FILE.png``: save ``what`` as a PNG (the command passes ``plot_path``)."""
    return click.option(
        "--plot",
        "plot_path",
        type=click.Path(dir_okay=False, writable=True),
        metavar="FILE.png",
        help=f"Save a plot of {what}.",
    )


def save_plot(fig: Any, plot_path: str) -> Any:
    """``save_figure``, its refusal (``path=FILE: ...``) said with ``--plot FILE``."""
    from openrouter_probe.analysis.plots import save_figure
    from openrouter_probe.errors import ConfigError, keyword_term, rendered

    def term(name: str, value: Any, given: bool) -> str:
        if name != "path":
            return keyword_term(name, value, given)
        return f"--plot {value}" if given else "--plot"

    try:
        return save_figure(fig, plot_path)
    except ConfigError as exc:
        raise ConfigError(rendered(exc, term)) from exc


def warn_unused(name: str, why: str) -> None:
    """Say on stderr that the option ``name``, given (not its default), does nothing here
    (``why``), as the running command spells it (``--no-preserve-thinking``)."""
    ctx = click.get_current_context()
    source = ctx.get_parameter_source(name)
    if source is None or source in (ParameterSource.DEFAULT, ParameterSource.DEFAULT_MAP):
        return
    note(f"warning: {flag_of(ctx.command, name, ctx.params.get(name), given=True)} {why}: ignored")


def check_snapshot_options(offline: bool, snapshot: str | None) -> None:
    """``--offline`` with ``--snapshot PATH`` is a usage error, even where neither is read."""
    if offline and snapshot and snapshot != "bundled":
        raise click.UsageError("--offline and --snapshot PATH exclude each other")


def load_snapshot_for(model: str | None, offline: bool, snapshot: str | None) -> Snapshot:
    """Resolve ``--offline`` / ``--snapshot`` / a live probe for ``model`` and say which on stderr."""
    from openrouter_probe.rules.probing import resolve_snapshot

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
    running command's flags (``said``), wrapped (``wrapped``) to ``$COLUMNS`` or the terminal, as
    tables are; piped without ``$COLUMNS``, one line per message (for logs and grep)."""
    width = env_columns() or (shutil.get_terminal_size().columns if sys.stderr.isatty() else None)
    click.echo(wrapped(said(text), None if width is None else max(width, 40)), err=True)


def wrapped(text: str, width: int | None) -> str:
    """``text`` with each line longer than ``width`` wrapped between words, never inside a figure,
    a path or an id (a line that is one long word stays whole); ``None`` wraps nothing."""
    return "\n".join(
        textwrap.fill(
            line, width, subsequent_indent="  ", break_long_words=False, break_on_hyphens=False
        )
        if width is not None and len(line) > width
        else line
        for line in text.splitlines() or [""]
    )

"""The options every verb shares, declared once: one concept, one flag name.

``field_option`` is the option of a plan's field (``run.config.RunPlan``,
``generation.plan.GeneratePlan``): its flag, ``--help`` and default are the field's own, written
once in its metadata (``run.config.cli``). A spelling that changed stays accepted, hidden from
``--help``, until 0.4.0 (the CHANGELOG lists them): ``AliasedOption`` takes old option names,
``FormatChoice`` old choice names.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import click

from openrouter_probe.run.config import RunPlan

__all__ = [
    "AliasedOption",
    "FormatChoice",
    "field_option",
    "format_option",
    "out_option",
    "precision_option",
    "snapshot_options",
]

F = TypeVar("F", bound=Callable[..., Any])


class AliasedOption(click.Option):
    """An option that also answers to old names (``aliases``), which ``--help`` does not show."""

    def __init__(
        self, param_decls: Sequence[str], *, aliases: Sequence[str] = (), **attrs: Any
    ) -> None:
        super().__init__([*param_decls, *aliases], **attrs)
        self.aliases = tuple(aliases)

    def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
        shown = self.opts
        self.opts = [o for o in shown if o not in self.aliases]
        try:
            return super().get_help_record(ctx)
        finally:
            self.opts = shown


class FormatChoice(click.Choice):  # type: ignore[type-arg]
    """A ``click.Choice`` that also takes old names of its choices (``table`` for ``text``),
    unlisted, and gives the new one."""

    def __init__(self, choices: Sequence[str], aliases: Mapping[str, str]) -> None:
        super().__init__(choices)
        self.aliases = dict(aliases)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        return super().convert(self.aliases.get(value, value), param, ctx)


def format_option(*extra: str) -> Callable[[F], F]:
    """``--format``: ``text`` (tables and prose for people, the default), ``json``, then
    ``extra`` (``csv``, ``evidence``). The parameter is ``fmt``."""
    return click.option(
        "--format",
        "fmt",
        type=FormatChoice(("text", "json", *extra), {"table": "text"}),
        default="text",
        show_default=True,
        help="Output format (data goes to stdout).",
    )


def field_option(plan: type, name: str, *decls: str, **attrs: Any) -> Callable[[F], F]:
    """``click.option`` of the field ``name`` of a ``plan`` dataclass: its flag and help are the
    field's metadata (``run.config.cli``), its default the field's own value (shown), unless
    ``attrs`` give another (``help=None``: the field's). ``decls`` add short flags (``-o``) or
    name the parameter when the option sets the field under another name (``--attempts``: the
    backoff's tries); ``negatable``: ``--flag/--no-flag``; ``aliases``: old flags, hidden."""
    field = next(f for f in dataclasses.fields(plan) if f.name == name)
    flag = field.metadata["cli"].flag
    if attrs.pop("negatable", False):
        flag = f"{flag}/--no-{flag[2:]}"
    if attrs.get("help") is None:
        attrs["help"] = field.metadata["cli"].help
    if "default" not in attrs and field.default not in (dataclasses.MISSING, None, False):
        attrs.update(default=field.default, show_default=True)
    if "aliases" in attrs:
        attrs["cls"] = AliasedOption
    shorts = [decl for decl in decls if decl.startswith("-")]
    named = [decl for decl in decls if not decl.startswith("-")] or [name]
    return click.option(*shorts, flag, *named, **attrs)


def out_option(help: str | None = None, **attrs: Any) -> Callable[[F], F]:
    """``-o/--out FILE``: what the command writes (``--output`` kept hidden), the run's plan's
    ``out`` (its help, unless ``help`` says what another command writes). The parameter is
    ``out``; ``attrs`` go to ``click.option`` (``required``, ``default``, ``type``...)."""
    attrs.setdefault("type", click.Path(dir_okay=False))
    return field_option(RunPlan, "out", "-o", aliases=("--output",), help=help, **attrs)


def snapshot_options(func: F) -> F:
    """``--offline`` and ``--snapshot``: the bundled snapshot or a saved one instead of a probe."""
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


#: ``--precision-file PATH`` (repeatable): the parameter is ``precision_files``.
precision_option = click.option(
    "--precision-file",
    "precision_files",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False),
    help="A precision YAML (native precisions and provider facts, or `verify --evidence` "
    "output) merged over the bundled one (repeatable).",
)

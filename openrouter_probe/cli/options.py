"""The options every verb shares, declared once: one concept, one flag name.

``format_option`` (``--format``: ``text`` for people, ``json``, and ``csv`` or ``evidence`` where
a command has them), ``out_option`` (``-o/--out``: the file a command writes) and
``snapshot_options`` (``--offline``, ``--snapshot``). A spelling that changed stays accepted, hidden
from ``--help``, for one release (``ALIASES``, listed in the CHANGELOG): ``AliasedOption`` takes
old option names, ``FormatChoice`` old choice names.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import click

__all__ = [
    "ALIASES",
    "AliasedOption",
    "FormatChoice",
    "format_option",
    "out_option",
    "snapshot_options",
]

F = TypeVar("F", bound=Callable[..., Any])

#: Old spellings still accepted (hidden) until 0.4.0, and the flag that replaced each.
ALIASES: Mapping[str, str] = {
    "--output": "--out",  # export, policy compile
    "--tokens-per-dataset": "--target-tokens",  # budget
    # generate / verify (fake-server keeps --seed); generate's mixes draw from --mix-seed
    "--seed": "--sample-seed / --suite-seed",
    "--format table": "--format text",
}


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


def aliased(*param_decls: str, aliases: Sequence[str], **attrs: Any) -> Callable[[F], F]:
    """``click.option`` with old names kept hidden (``AliasedOption``)."""
    return click.option(*param_decls, cls=AliasedOption, aliases=aliases, **attrs)


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


def out_option(help: str, **attrs: Any) -> Callable[[F], F]:
    """``-o/--out FILE``: what the command writes (``--output`` kept hidden). The parameter is
    ``out``; ``attrs`` go to ``click.option`` (``required``, ``default``, ``type``...)."""
    attrs.setdefault("type", click.Path(dir_okay=False))
    return aliased("-o", "--out", "out", aliases=("--output",), help=help, **attrs)


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

"""Every command's options agree with the same option of every other command (issue 18).

Walks every command of ``openrouter-probe`` and of the pre-commit hooks' group, so an option added
later (by any branch) is held to the same rules: one metavar and one set of short aliases per option
name across commands, and a help text on every option. ``--format`` is the exception for the
metavar: each command offers its own formats (the choices are the metavar).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator

import click
import pytest

from openrouter_probe.cli import cli
from openrouter_probe.cli.hooks import hooks


def _commands(group: click.Group, path: str) -> Iterator[tuple[str, click.Command]]:
    for name, command in sorted(group.commands.items()):
        where = f"{path} {name}"
        if isinstance(command, click.Group):
            yield from _commands(command, where)
        else:
            yield where, command


def _options() -> dict[str, list[tuple[str, click.Option, str]]]:
    """Long option name -> (command, option, metavar as --help shows it) in every command."""
    found: dict[str, list[tuple[str, click.Option, str]]] = defaultdict(list)
    for group, name in ((cli, "openrouter-probe"), (hooks, "python -m openrouter_probe.cli.hooks")):
        for where, command in _commands(group, name):
            context = click.Context(command, info_name=where)
            for param in command.params:
                if not isinstance(param, click.Option) or param.hidden:
                    continue  # hidden: an option that moved, kept only to say where
                if param.name not in ("help", "version"):
                    long = max(param.opts, key=len)
                    shown = "" if param.is_flag else param.make_metavar(context)
                    found[long].append((where, param, shown))
    return found


OPTIONS = _options()


def test_every_option_has_a_help_text() -> None:
    missing = [
        f"{where} {long}"
        for long, uses in OPTIONS.items()
        for where, option, _ in uses
        if not (option.help or "").strip()
    ]
    assert not missing, f"options without a help text: {missing}"


@pytest.mark.parametrize("long", sorted(k for k, v in OPTIONS.items() if len(v) > 1))
def test_an_option_shared_by_commands_has_one_metavar_and_one_alias_set(long: str) -> None:
    uses = OPTIONS[long]
    aliases = {
        where: sorted(o for o in opt.opts + opt.secondary_opts if o != long)
        for where, opt, _ in uses
    }
    assert len({tuple(a) for a in aliases.values()}) == 1, f"{long} aliases differ: {aliases}"
    if all(isinstance(opt.type, click.Choice) for _, opt, _ in uses):
        return  # --format: each command offers its own choices
    metavars = {where: shown for where, _, shown in uses}
    assert len(set(metavars.values())) == 1, f"{long} metavars differ: {metavars}"


def test_the_options_issue_18_named() -> None:
    """`--budget-usd USD` everywhere, `--out`/`-o` in both generate and verify."""
    budget = {where: shown for where, _, shown in OPTIONS["--budget-usd"]}
    assert set(budget.values()) == {"USD"} and len(budget) >= 3, budget
    out = {where: sorted(opt.opts) for where, opt, _ in OPTIONS["--out"]}
    assert out == {
        "openrouter-probe generate": ["--out", "-o"],
        "openrouter-probe verify": ["--out", "-o"],
        "openrouter-probe keys create": ["--out", "-o"],
    }
    assert {shown for _, _, shown in OPTIONS["--out"]} == {"FILE"}
    assert {shown for _, _, shown in OPTIONS["--policy"]} == {"POLICY"}

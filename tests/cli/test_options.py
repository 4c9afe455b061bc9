"""Every command's options agree with the same option of every other command.

Walks every command of ``openrouter-probe`` and of the pre-commit hooks' group, so an option added
later (by any branch) is held to the same rules: one metavar and one set of short aliases per option
name across commands, and a help text on every option. ``--format`` is the exception for the
metavar: each command offers its own formats (the choices are the metavar).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

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
                    # an old spelling kept for one release (cli.options.AliasedOption) is not one
                    shown_opts = [o for o in param.opts if o not in getattr(param, "aliases", ())]
                    long = max(shown_opts, key=len)
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
        where: sorted(
            o
            for o in opt.opts + opt.secondary_opts
            if o != long and o not in getattr(opt, "aliases", ())
        )
        for where, opt, _ in uses
    }
    assert len({tuple(a) for a in aliases.values()}) == 1, f"{long} aliases differ: {aliases}"
    if all(isinstance(opt.type, click.Choice) for _, opt, _ in uses):
        return  # --format: each command offers its own choices
    metavars = {where: shown for where, _, shown in uses}
    assert len(set(metavars.values())) == 1, f"{long} metavars differ: {metavars}"


def test_the_options_issue_18_named() -> None:
    """`--budget-usd USD` everywhere, `-o/--out FILE` in every command that writes a file
    (issue 33: export and policy compile said `-o/--output`, kept hidden for one release)."""
    budget = {where: shown for where, _, shown in OPTIONS["--budget-usd"]}
    assert set(budget.values()) == {"USD"} and len(budget) >= 3, budget
    out = {where: sorted(opt.opts) for where, opt, _ in OPTIONS["--out"]}
    assert out == {
        f"openrouter-probe {where}": ["--out", "--output", "-o"]
        for where in ("export", "generate", "keys create", "policy compile", "verify")
    }
    assert "--output" not in OPTIONS
    assert {shown for _, _, shown in OPTIONS["--out"]} == {"FILE"}
    assert {shown for _, _, shown in OPTIONS["--policy"]} == {"POLICY"}


def _help(*args: str) -> str:
    from click.testing import CliRunner

    result = CliRunner().invoke(cli, [*args, "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    return result.stdout


def test_one_concept_one_flag_with_the_old_spellings_hidden() -> None:
    """Issue 33: one name per concept across verbs; each old spelling still parses (hidden from
    --help) for one release, as the CHANGELOG lists them."""
    old = {
        a for uses in OPTIONS.values() for _, opt, _ in uses for a in getattr(opt, "aliases", ())
    }
    assert old == {"--output", "--tokens-per-dataset", "--seed"}
    formats = [opt.type for _, opt, _ in OPTIONS["--format"] if "text" in opt.type.choices]
    assert formats and all(t.aliases == {"table": "text"} for t in formats)
    # the seed of generate's --sample and verify's suites are two concepts; fake-server's draws
    # keep --seed
    assert [w for w, _, _ in OPTIONS["--sample-seed"]] == ["openrouter-probe generate"]
    assert [w for w, _, _ in OPTIONS["--suite-seed"]] == ["openrouter-probe verify"]
    assert [w for w, _, _ in OPTIONS["--seed"]] == ["openrouter-probe fake-server"]
    # the target per dataset: --target-tokens in generate and budget
    assert sorted(w for w, _, _ in OPTIONS["--target-tokens"]) == [
        "openrouter-probe budget",
        "openrouter-probe generate",
    ]
    assert "--tokens-per-dataset" not in _help("budget")
    assert "--output " not in _help("export") and "--seed " not in _help("generate")
    # generate has --offline, as every command that reads a snapshot
    assert [w for w, _, _ in OPTIONS["--offline"] if w.endswith("generate")]


def test_every_format_option_offers_text_and_json_first() -> None:
    """One --format: ``text`` (tables and prose) and ``json`` everywhere, then the command's
    own (csv, evidence); ``table`` is an old name of ``text``. ``export --format`` names a
    training file format, not an output format, and is its own."""
    for where, option, _ in OPTIONS["--format"]:
        choices = list(option.type.choices)  # type: ignore[attr-defined]
        if where.endswith(" export"):
            assert "sharegpt" in choices
            continue
        assert choices[:2] == ["text", "json"], where
        assert set(choices[2:]) <= {"csv", "evidence"}, where
        assert option.default == "text", where
        assert option.type.convert("table", option, None) == "text"  # type: ignore[attr-defined]


def test_the_old_spellings_still_run(tmp_path: Path) -> None:
    from click.testing import CliRunner

    runner = CliRunner()
    spec = "policies/kimi-k2.5.spec.yaml"
    for flag in ("-o", "--out", "--output"):
        target = tmp_path / f"p{flag.strip('-')}.yaml"
        result = runner.invoke(cli, ["policy", "compile", spec, "--offline", flag, str(target)])
        assert result.exit_code == 0, result.output
        assert target.read_text(encoding="utf-8").startswith(("#", "model:", "provider:")), flag
    args = ["budget", "moonshotai/kimi-k2.5", "--offline", "--budget-usd", "100"]
    new = runner.invoke(cli, [*args, "--target-tokens", "10M", "--datasets", "2", "--format",
                              "json"])  # fmt: skip
    old = runner.invoke(cli, [*args, "--tokens-per-dataset", "10M", "--datasets", "2",
                              "--format", "json"])  # fmt: skip
    assert new.exit_code == old.exit_code == 0, (new.output, old.output)
    assert new.stdout == old.stdout and '"datasets": 2' in new.stdout
    said = "--tokens-per-dataset is --target-tokens now; the old name is accepted until 0.4.0"
    assert said in old.stderr and said not in new.stderr
    table = runner.invoke(cli, ["endpoints", "moonshotai/kimi-k2.5", "--offline", "--format",
                                "table"])  # fmt: skip
    text = runner.invoke(cli, ["endpoints", "moonshotai/kimi-k2.5", "--offline"])
    assert table.exit_code == 0 and table.stdout == text.stdout and "chutes/int4" in text.stdout

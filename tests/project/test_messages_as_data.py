"""Messages as data. The library names no CLI flag; every ``Message`` it builds
renders both ways (the library's keywords, each command's own flags); ``cli/terms.py`` is gone."""

from __future__ import annotations

import ast
import re
import string
from pathlib import Path
from typing import Any

import click
import pytest

from openrouter_probe.cli import cli
from openrouter_probe.cli._common import flag_of, said, term_of
from openrouter_probe.errors import ConfigError, Message, keyword_term, rendered
from tests.conftest import ROOT

PACKAGE = ROOT / "openrouter_probe"
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z-]+")
COMMAND_LINE = re.compile(r"`openrouter-probe [^`]*`")


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        first = body[0] if isinstance(body, list) and body else None
        value = first.value if isinstance(first, ast.Expr) else None
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            out.add(id(value))
    return out


def _scopes(tree: ast.Module) -> list[ast.AST]:
    """Each function, and each module-level statement outside one."""
    functions = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    top = [
        n
        for n in tree.body
        if not isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
    ]
    return [*functions, *top]


def _library() -> list[Path]:
    return [p for p in sorted(PACKAGE.rglob("*.py")) if "cli" not in p.relative_to(PACKAGE).parts]


def test_no_library_module_names_a_cli_flag() -> None:
    """A flag is the CLI's to say, and so is a whole command line: a step the library suggests
    is advice (``{@compile_policy}``), said by each interface its own way."""
    found = []
    for path in _library():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docs = _docstrings(tree)
        for scope in _scopes(tree):
            nodes = [
                n
                for n in ast.walk(scope)
                if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs
            ]
            found.extend(
                f"{path.relative_to(PACKAGE)}:{n.lineno}: {n.value!r}"
                for n in nodes
                if FLAG.search(n.value)
            )
    assert found == []
    assert not (PACKAGE / "cli" / "terms.py").exists()


def _templates() -> list[tuple[str, str, str]]:
    """``(where, code, template)`` of every ``Message`` built with a literal code and a template
    made of literals (concatenated or implicit)."""
    out = []
    for path in _library():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Message"):
                continue
            if len(node.args) < 2 or not isinstance(node.args[0], ast.Constant):
                continue
            try:
                template = ast.literal_eval(node.args[1])
            except ValueError:
                continue  # a template built at run time (a keyword named by a variable)
            out.append((f"{path.relative_to(PACKAGE)}:{node.lineno}", node.args[0].value, template))
    return out


TEMPLATES = _templates()


def _fields(template: str) -> list[tuple[str, str]]:
    return [(name, spec) for _, name, spec, _ in string.Formatter().parse(template) if name]


def _dummy(spec: str) -> Any:
    if spec.endswith(("d", ",")) or spec == ",":
        return 3
    if spec.endswith(("f", "g", "%")):
        return 1.5
    return "x"


def _advice_texts(step: str) -> list[str]:
    """The step as each interface says it (a CLI step may be a function of its context)."""
    from openrouter_probe.cli._common import ADVICE as CLI_ADVICE
    from openrouter_probe.errors import ADVICE

    cli_said = CLI_ADVICE[step]
    return [ADVICE[step], cli_said() if callable(cli_said) else cli_said]


def _values(template: str) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for name, spec in _fields(template):
        key, eq, _ = name.partition("=")
        if key.startswith("@"):  # the values the step names, in either interface
            for text in _advice_texts(key[1:]):
                values.update({k: v for k, v in _values(text).items() if k not in values})
        elif spec and spec != "bare" and not eq:
            values[key] = _dummy(spec)
        elif eq:
            values.setdefault(key, 7)
    return values


def _keywords(template: str) -> set[str]:
    return {
        name.partition("=")[0]
        for name, spec in _fields(template)
        if ("=" in name or not spec or spec == "bare") and not name.startswith("@")
    }


def _commands(group: click.Group = cli) -> list[click.Command]:
    out: list[click.Command] = []
    for command in group.commands.values():
        out.extend(_commands(command) if isinstance(command, click.Group) else [command])
    return out


#: Keywords of Python-only arguments: no command takes them (said as the library says them):
#: ``save_figure``'s ``path`` (the analysis commands say it as ``--plot``), the fake's ``hard``.
PYTHON_ONLY = {"path", "hard"}


def test_there_are_many_messages_and_their_codes_are_words() -> None:
    assert len(TEMPLATES) >= 80, len(TEMPLATES)
    assert all(re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", code) for _, code, _ in TEMPLATES)


@pytest.mark.parametrize(("where", "code", "template"), TEMPLATES, ids=[t[0] for t in TEMPLATES])
def test_every_message_renders_both_ways(where: str, code: str, template: str) -> None:
    message = Message(code, template, **_values(template))
    library = str(message)
    # the library says keywords, never flags (but in a suggested whole command, as typed)
    assert not FLAG.search(COMMAND_LINE.sub("", library)), library
    assert library == message.render(keyword_term) and message.code == code
    commands = _commands()
    for keyword in _keywords(template):
        takers = [c for c in commands if flag_of(c, keyword) != f"{keyword}="]
        if keyword in PYTHON_ONLY:
            continue
        # every keyword a message names is an option of some command, which says it as its flag
        assert takers, f"{where}: no command has an option for {keyword!r}"
        shown = message.render(term_of(takers[0]))
        assert flag_of(takers[0], keyword) in shown, shown


def test_a_keyword_is_said_as_the_running_commands_own_flag_or_as_the_library_says_it() -> None:
    m = Message(
        "wait", "more than {max_wait_s=} s; {budget_usd:bare} and {turns=all}", max_wait_s=60
    )
    assert str(m) == "more than max_wait_s=60 s; budget_usd and turns='all'"
    generate = cli.commands["generate"]
    assert m.render(term_of(generate)) == "more than --max-wait 60 s; --budget-usd and --turns all"
    # a command without the option says the keyword as the library does, not a flag it lacks
    verify = cli.commands["verify"]
    assert m.render(term_of(verify)) == "more than max_wait_s=60 s; --budget-usd and turns='all'"


def test_an_error_carries_its_message_and_the_cli_renders_it() -> None:
    exc = ConfigError(Message("out-folder-missing", "{out=}: the folder {folder:s} does not exist",
                              out=Path("/x/o.jsonl"), folder="/x"))  # fmt: skip
    assert str(exc) == "out=/x/o.jsonl: the folder /x does not exist"
    assert exc.args[0].code == "out-folder-missing" and exc.args[0].values["folder"] == "/x"
    assert said(exc, cli.commands["generate"]) == "--out /x/o.jsonl: the folder /x does not exist"
    assert rendered("plain text", keyword_term) == "plain text"


def test_a_message_inside_a_message_and_a_joined_one_keep_their_keywords() -> None:
    inner = Message("fits", "{max_tokens=} would fit", max_tokens=512)
    outer = Message("row", "{row:s}: over the cap; {advice:s}", row="r1", advice=inner)
    both = Message.joined("rows", "; ", [outer, "plain {braces}"])
    generate = cli.commands["generate"]
    assert str(both) == "r1: over the cap; max_tokens=512 would fit; plain {braces}"
    assert both.render(term_of(generate)) == (
        "r1: over the cap; --max-tokens 512 would fit; plain {braces}"
    )


def test_advice_is_a_step_each_interface_says_its_own_way() -> None:
    from openrouter_probe.cli._common import ADVICE as COMMAND_LINES
    from openrouter_probe.errors import ADVICE

    assert set(ADVICE) == set(COMMAND_LINES)  # every step has both sayings
    m = Message("not-a-snapshot", "{where:s}: not a snapshot; save one with {@save_snapshot}",
                where="x.json")  # fmt: skip
    assert str(m) == "x.json: not a snapshot; save one with `orp.probe(MODEL).save(PATH)`"
    assert m.render(term_of(cli.commands["matrix"])) == (
        "x.json: not a snapshot; save one with `openrouter-probe endpoints MODEL --save PATH`"
    )
    assert all(not FLAG.search(text) for text in ADVICE.values())

"""The docs stay true: the CLI reference matches ``--help``, and every file a page cites exists.

The docs are plain Markdown read on GitHub or in an editor, so there is no site build to warn about
broken links; this module is the check instead: relative links and backticked repository paths in
README.md, CHANGELOG.md (its top section: released ones are history), docs/*.md and
examples/*.md must point at files in the repository, and no page may send the reader to files only
the project's authors have (``OPENROUTER.md``, ``shared/``).
"""

from __future__ import annotations

import re
import runpy
import subprocess
import sys
from itertools import pairwise
from pathlib import Path

import pytest

from tests.conftest import ROOT

PAGES = sorted(
    [
        ROOT / "README.md",
        ROOT / "CHANGELOG.md",
        *(ROOT / "docs").glob("*.md"),
        *(ROOT / "examples").glob("**/*.md"),
    ]
)
# Files the authors had but a reader of a clone does not.
UNAVAILABLE = re.compile(r"OPENROUTER\.md|(?<![\w.-])(?:\.\./)?shared/")
_FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)
_LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)|!\[[^\]]*\]\(([^)\s]+)\)")
_CODE = re.compile(r"`([^`\n]+)`")
_PATHLIKE = re.compile(r"^[\w.\-/]+$")


def _top_level() -> set[str]:
    """The first path component of every file git tracks (docs/, policies/, README.md, ...)."""
    try:
        out = subprocess.run(
            ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout
        names = {line.split("/")[0] for line in out.splitlines() if line}
    except (OSError, subprocess.CalledProcessError):  # an exported tree without .git
        names = set()
    return names | {p.name for p in ROOT.iterdir() if not p.name.startswith(".venv")}


TOP = _top_level()


def _prose(text: str) -> str:
    """The page without its fenced code blocks (commands there are checked by running them)."""
    return _FENCE.sub("", text)


def cited_paths(text: str) -> list[tuple[str, str]]:
    """``("link", target)`` for relative link targets and ``("path", token)`` for backticked
    repository paths in a Markdown page's prose."""
    prose = _prose(text)
    found: list[tuple[str, str]] = []
    for m in _LINK.finditer(prose):
        target = (m.group(1) or m.group(2)).split("#", 1)[0]
        if target and not re.match(r"^[a-z][a-z0-9+.-]*:", target):  # skip http:, mailto:
            found.append(("link", target))
    for m in _CODE.finditer(prose):
        token = m.group(1).strip()
        if not _PATHLIKE.match(token) or token.startswith("/"):
            continue
        first = token.split("/", 1)[0]
        if first in TOP and (token != first or "." in token):
            found.append(("path", token))
    return found


def _page_id(page: Path) -> str:
    return str(page.relative_to(ROOT))


def _current(page: Path) -> str:
    """The page as it speaks of today's tree: the CHANGELOG's released sections are history (they
    name files as they were at the release, and files move), so only its top section is read."""
    text = page.read_text(encoding="utf-8")
    if page.name != "CHANGELOG.md":
        return text
    top = text.index("\n## [")
    end = text.find("\n## [", top + 1)
    return text if end == -1 else text[:end]


@pytest.mark.parametrize("page", PAGES, ids=_page_id)
def test_every_cited_file_exists(page: Path) -> None:
    missing = []
    for kind, target in cited_paths(_current(page)):
        # A link is relative to its page; a backticked path is a repository path.
        where = page.parent / target if kind == "link" else ROOT / target
        if not where.exists():
            missing.append(target)
    assert not missing, f"{_page_id(page)} cites files that do not exist: {missing}"


@pytest.mark.parametrize("page", PAGES, ids=_page_id)
def test_no_page_cites_files_the_reader_lacks(page: Path) -> None:
    hits = [
        f"line {text[: m.start()].count(chr(10)) + 1}: {m.group(0)}"
        for text in [page.read_text(encoding="utf-8")]
        for m in UNAVAILABLE.finditer(text)
    ]
    assert not hits, f"{_page_id(page)} cites files a reader of the repository lacks: {hits}"


def test_link_check_finds_what_it_should() -> None:
    page = (
        "See [the policy](docs/policy.md#lint), [site](https://openrouter.ai/docs), [top](#why),\n"
        "`policies/kimi-k2.5.yaml`, `moonshotai/kimi-k2.5`, `budget.png`, `docs/`, `--offline`,\n"
        "`policies/x.spec.yaml: invalid policy spec`, ![plot](docs/img.png)\n"
        "```bash\nopenrouter-probe policy compile `docs/in-a-fence.md`\n```\n"
    )
    assert cited_paths(page) == [
        ("link", "docs/policy.md"),
        ("link", "docs/img.png"),
        ("path", "policies/kimi-k2.5.yaml"),
        ("path", "docs/"),
    ]
    assert UNAVAILABLE.search("facts from `OPENROUTER.md` §6")
    assert UNAVAILABLE.search("see ../shared/captures")
    assert UNAVAILABLE.search("`shared/scenarios/x.json`")
    assert not UNAVAILABLE.search(
        "shared mechanisms; tests/data/captures (a copy of the shared ones)"
    )


def test_only_the_changelogs_top_section_is_read_for_paths() -> None:
    current = _current(ROOT / "CHANGELOG.md")
    assert current.count("\n## [") == 1 and "## [Unreleased]" in current
    assert len(current) < len((ROOT / "CHANGELOG.md").read_text(encoding="utf-8"))


def test_cli_reference_is_current() -> None:
    """docs/cli.md is what ``python docs/make_cli_reference.py`` writes for today's commands."""
    make = runpy.run_path(str(ROOT / "docs" / "make_cli_reference.py"))
    committed = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    assert make["render"]() == committed, (
        "docs/cli.md is out of date with the commands' --help: run python docs/make_cli_reference.py"
    )


def test_cli_reference_covers_every_command() -> None:
    from click import Group

    from openrouter_probe.cli import cli

    def paths(group: Group, prefix: str) -> list[str]:
        out = []
        for name, cmd in group.commands.items():
            out.append(f"{prefix} {name}")
            if isinstance(cmd, Group):
                out += paths(cmd, f"{prefix} {name}")
        return out

    text = runpy.run_path(str(ROOT / "docs" / "make_cli_reference.py"))["render"]()
    commands = paths(cli, "openrouter-probe")
    assert {"openrouter-probe budget", "openrouter-probe policy compile"} <= set(commands)
    for command in commands:
        assert f"`{command}`" in text
        assert f"Usage: {command} [OPTIONS]" in text


def test_cli_reference_ignores_the_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    make = runpy.run_path(str(ROOT / "docs" / "make_cli_reference.py"))
    monkeypatch.setenv("COLUMNS", "200")
    wide = make["render"]()
    monkeypatch.setenv("COLUMNS", "40")
    assert make["render"]() == wide
    assert max(len(line) for line in wide.split("```text", 1)[1].splitlines()) <= 80


def _api_reference() -> dict[str, object]:
    return runpy.run_path(str(ROOT / "docs" / "make_api_reference.py"))


def test_api_reference_is_current() -> None:
    """docs/reference.md is what ``python docs/make_api_reference.py`` writes for today's API."""
    committed = (ROOT / "docs" / "reference.md").read_text(encoding="utf-8")
    assert _api_reference()["render"]() == committed, (  # type: ignore[operator]
        "docs/reference.md is out of date with the docstrings: run python docs/make_api_reference.py"
    )


def test_api_reference_does_not_depend_on_what_was_imported_before(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``orp.generate`` is the callable subpackage or, resolved through ``__getattr__`` alone, the
    coroutine function: the page is the same either way (a fresh interpreter gives the former)."""
    import openrouter_probe
    from openrouter_probe.generation.job import generate

    monkeypatch.setattr(openrouter_probe, "generate", generate)
    script = str(ROOT / "docs" / "make_api_reference.py")
    code = f"import runpy; print(runpy.run_path({script!r})['render'](), end='')"
    fresh = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    ).stdout
    assert fresh == _api_reference()["render"]()  # type: ignore[operator]


def test_api_reference_covers_every_public_name() -> None:
    import openrouter_probe
    import openrouter_probe.fake

    text = _api_reference()["render"]()  # type: ignore[operator]
    for name in openrouter_probe.__all__:
        assert f"### `openrouter_probe.{name}`" in text
    for name in openrouter_probe.fake.__all__:
        assert f"### `openrouter_probe.fake.{name}`" in text
    assert "def save(self, path: str | Path, *, inputs: Sequence[str | Path] = ()) -> Path:" in text
    assert " at 0x" not in text  # no memory address: the page is the same on every run


def test_every_public_name_has_a_docstring() -> None:
    """Every class and function in ``__all__`` (the package's and its public subpackages') has a
    docstring of its own: not inherited, not the one ``dataclasses`` makes up from the fields."""
    make = _api_reference()
    own_docstring = make["own_docstring"]
    missing = [
        f"{section}.{name}"
        for section, name, obj, _ in make["public_names"]()  # type: ignore[operator]
        if (callable(obj) or isinstance(obj, type)) and not own_docstring(obj)  # type: ignore[operator]
    ]
    assert not missing, f"public names without a docstring: {missing}"


def test_docstring_check_sees_a_dataclass_without_one() -> None:
    from dataclasses import dataclass

    @dataclass
    class Bare:
        x: int

    @dataclass
    class Told:
        """Told something."""

        x: int

    own_docstring = _api_reference()["own_docstring"]
    assert own_docstring(Bare) is None  # type: ignore[operator]
    assert own_docstring(Told) == "Told something."  # type: ignore[operator]


_BLOCK = re.compile(r"^```(\w*)\n(.*?)^```$", re.M | re.S)


def python_examples(page: str) -> list[tuple[str, str]]:
    """``(code, output)`` for each ```python block followed directly by a plain ``` block."""
    blocks = list(_BLOCK.finditer(page))
    return [
        (code.group(2), out.group(2))
        for code, out in pairwise(blocks)
        if code.group(1) == "python"
        and out.group(1) == ""
        and not page[code.end() : out.start()].strip()
    ]


@pytest.mark.parametrize("name", ["probe.md", "precision.md"])
def test_python_examples_print_what_the_page_shows(name: str, tmp_path: Path) -> None:
    """Each Python example followed by an output block prints exactly that output (run offline in
    a scratch directory), so the figures pasted into the concept pages stay true."""
    examples = python_examples((ROOT / "docs" / name).read_text(encoding="utf-8"))
    assert examples, f"docs/{name} has no example with its output"
    for code, shown in examples:
        ran = subprocess.run(
            [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True
        )
        assert ran.stdout.strip() == shown.strip(), f"docs/{name}: the example\n{code}printed"

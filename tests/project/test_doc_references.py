"""Every module, name and test a doc names exists.

``docs/api.md`` once named modules that had gone, ``policy_file`` and ``generate``, and
``docs/generate.md`` cited a test that did not exist.

Read in ``README.md`` and every hand-written page of ``docs/`` (not ``reference.md`` and
``cli.md``, which ``docs/make_*.py`` write from the code): every ``openrouter_probe.X.Y`` and every
``folder.module[.name]`` in backticks resolves to a module or an attribute; every
``tests/**/test_*.py`` (or bare ``test_*.py``) is a file and every ``test_*`` name cited in
backticks is a test function of the suite; every test file the package, the scripts or the tests
name exists. (That every path a page cites exists is ``tests/project/test_docs.py``'s check.)
"""

from __future__ import annotations

import ast
import functools
import importlib
import re
from pathlib import Path

import pytest

from tests.conftest import ROOT

PACKAGE = ROOT / "openrouter_probe"
FOLDERS = sorted(p.parent.name for p in PACKAGE.glob("*/__init__.py"))
_GENERATED = ("reference.md", "cli.md")
PAGES = [
    ROOT / "README.md",
    *sorted(p for p in (ROOT / "docs").glob("*.md") if p.name not in _GENERATED),
]

_DOTTED = re.compile(
    r"(?<![\w./-])(?:openrouter_probe\.(\w+(?:\.\w+)*)|((?:"
    + "|".join([*FOLDERS, "errors", "files"])
    + r")(?:\.\w+)+))"
)
_TEST_FILE = re.compile(r"(?<![\w.-])((?:tests/(?:\w+/)*)?test_\w+\.py)\b")
_TEST_NAME = re.compile(r"^(test_\w+)(?:\[.*\])?(?:\(\))?$")

#: Backticked words that look like ``folder.name`` but are a value of a run, not a module path.
NOT_MODULES = {
    "fake.fake.requests": "the FakeServer's app's recorded requests (docs/fake-server.md)",
    "fake.response_cache.hits": "a FakeServer's response cache counter",
    "fake.credit.limit_usd": "a FakeServer's credit",
    "verify.jsonl": "a file name",
    "data.total_cost": "a field of /generation's answer",
}


def _code_spans(page: Path) -> list[tuple[int, str]]:
    spans = []
    for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        spans += [(n, code) for code in re.findall(r"`([^`]+)`", line)]
    return spans


def _resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    for i in range(len(parts), -1, -1):
        name = ".".join(["openrouter_probe", *parts[:i]])
        try:
            obj = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name is not None and exc.name.startswith("openrouter_probe"):
                continue
            raise
        except ImportError as exc:  # a module of an extra not installed here (datatrove)
            if "pip install 'openrouter-probe[" not in str(exc):
                raise
            return _defined_in_source(name, parts[i:])
        for attr in parts[i:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def _defined_in_source(module: str, attrs: list[str]) -> bool:
    """Whether ``module``'s source defines ``attrs[0]`` (read, not imported: its extra is
    missing)."""
    path = ROOT.joinpath(*module.split(".")).with_suffix(".py")
    if not path.exists():  # ``module`` names an attribute of the module above it
        parent, _, attr = module.rpartition(".")
        return bool(parent) and _defined_in_source(parent, [attr, *attrs])
    if not attrs:
        return True
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = {
        n.name
        for n in ast.walk(tree)
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
    }
    names |= {
        t.id
        for n in ast.walk(tree)
        if isinstance(n, ast.Assign | ast.AnnAssign)
        for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
        if isinstance(t, ast.Name)
    }
    exported = {
        e.value
        for n in ast.walk(tree)
        if isinstance(n, ast.Assign)
        and any(isinstance(x, ast.Name) and x.id == "__all__" for x in n.targets)
        for e in ast.walk(n.value)
        if isinstance(e, ast.Constant)
    }
    return attrs[0] in names | exported


@functools.cache
def _test_functions() -> frozenset[str]:
    names: set[str] = set()
    for path in (ROOT / "tests").rglob("test_*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names |= {
            node.name
            for node in ast.walk(tree)
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            and node.name.startswith("test_")
        }
    return frozenset(names)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_module_and_name_a_page_names_exists(page: Path) -> None:
    missing = []
    for n, code in _code_spans(page):
        for match in _DOTTED.finditer(code):
            dotted = match.group(1) or match.group(2)
            if dotted not in NOT_MODULES and not _resolves(dotted):
                missing.append(f"{page.name}:{n}: {dotted}")
    assert not missing, missing


def _test_file_exists(cited: str) -> bool:
    """``tests/run/money/test_spend.py`` is that file; a bare ``test_spend.py`` is a file of
    that name anywhere under ``tests/``."""
    if cited.startswith("tests/"):
        return (ROOT / cited).is_file()
    return any((ROOT / "tests").rglob(cited))


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_test_a_page_cites_exists(page: Path) -> None:
    functions = _test_functions()
    missing = []
    for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        for match in _TEST_FILE.finditer(line):
            if not _test_file_exists(match.group(1)):
                missing.append(f"{page.name}:{n}: {match.group(1)}")
    for n, code in _code_spans(page):
        found = _TEST_NAME.match(code.strip())
        if found and not found.group(1).endswith(".py") and found.group(1) not in functions:
            missing.append(f"{page.name}:{n}: {code}")
    assert not missing, missing


def _code_files() -> list[Path]:
    """The package, the scripts, the benchmarks, the docs' generators, the tests and the project's
    configuration: every file whose comments and docstrings may name a test file."""
    files = [ROOT / "pyproject.toml", ROOT / ".pre-commit-hooks.yaml", *(ROOT / ".ci").iterdir()]
    for folder in ("openrouter_probe", "scripts", "benchmarks", "docs", "tests"):
        files += [p for p in (ROOT / folder).rglob("*") if p.suffix in {".py", ".sh"}]
    return sorted(p for p in files if p.is_file() and p != Path(__file__).resolve())


def test_every_test_file_the_code_names_exists() -> None:
    """A docstring or comment that says where a check lives (``tests/api/test_translate.py``
    checks ...) names a file that is there: the tests moved into folders once, and a reference
    left at the old path would send the reader nowhere."""
    missing = [
        f"{path.relative_to(ROOT)}:{n}: {match.group(1)}"
        for path in _code_files()
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        for match in _TEST_FILE.finditer(line)
        if not _test_file_exists(match.group(1))
    ]
    assert missing == []


def test_the_check_sees_what_it_is_for() -> None:
    """The reader finds the references that went stale in issue 33, so it cannot pass by
    reading nothing."""
    assert not _resolves("policy_file")
    assert not _resolves("generate.audit")
    assert _resolves("api.error_rules.ERROR_RULES") and _resolves("generation.job.generate")
    spans = [m.group(2) for m in _DOTTED.finditer("`run.failure.classify_error`")]
    assert spans == ["run.failure.classify_error"]
    assert "test_spend_equals_the_fake_ledger" in _test_functions()
    cited = _TEST_FILE.findall("see `tests/run/money/test_spend.py` and `test_spend.py`")
    assert cited == ["tests/run/money/test_spend.py", "test_spend.py"]
    assert all(_test_file_exists(c) for c in cited)
    assert not _test_file_exists("tests/run/test_spend.py")  # not in its folder


#: A folder and the modules listed after it: `openrouter_probe/run/money/` (`spend`, `journal`).
_LISTED = re.compile(r"`(openrouter_probe/[\w/]+/)` \(((?:`\w+`(?:, )?)+)\)")


def _listed_modules(text: str) -> list[tuple[str, str]]:
    """Every (folder, module) a page lists in the ``folder (`a`, `b`)`` form."""
    return [
        (folder, name)
        for folder, names in _LISTED.findall(text)
        for name in re.findall(r"`(\w+)`", names)
    ]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_module_a_folder_lists_exists(page: Path) -> None:
    """``docs/index.md`` listed the paid run's 20 modules as one flat folder after they moved
    into ``run/money``, ``run/send``, ``run/books`` and ``run/schedule``."""
    missing = [
        f"{page.name}: {folder}{name}"
        for folder, name in _listed_modules(page.read_text(encoding="utf-8"))
        if not (ROOT / folder / f"{name}.py").exists() and not (ROOT / folder / name).is_dir()
    ]
    assert not missing, missing


def test_the_folder_check_reads_the_index_form() -> None:
    listed = _listed_modules("| `openrouter_probe/run/` (`paid`, `ledger`) | x |")
    assert listed == [("openrouter_probe/run/", "paid"), ("openrouter_probe/run/", "ledger")]

"""The package's folders read as the data flow, and imports run one way.

``api`` -> ``rules`` -> ``policy``, ``analysis``, ``fake``, ``run`` -> ``generate``, ``verify`` ->
``cli``: a folder imports only the folders below it (and ``errors``/``files`` at the top), checked
for every import in the package, those inside functions included, so that no import circle can
form. Imports for type checkers only (``if TYPE_CHECKING:``) count too.
"""

from __future__ import annotations

import ast
import importlib
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from tests.conftest import ROOT

PACKAGE = ROOT / "openrouter_probe"

#: The top level: at most four modules beside the folders.
TOP_MODULES = {"__init__", "__main__", "errors", "files"}

#: What each folder (or top-level module) may import of the package. ``openrouter_probe`` itself
#: (``__version__``, ``lazy_exports``) is open to every module.
MAY_IMPORT: dict[str, set[str]] = {
    "errors": set(),
    "files": {"errors"},
    "data": set(),
    "api": {"errors", "files", "data"},
    "rules": {"api", "errors", "files", "data"},
    "policy": {"rules", "api", "errors", "files"},
    "analysis": {"rules", "api", "errors", "files"},
    "fake": {"rules", "api", "errors", "files"},
    "run": {"rules", "api", "errors", "files"},
    "generation": {"run", "policy", "analysis", "rules", "api", "errors", "files"},
    "verify": {"run", "policy", "rules", "api", "errors", "files"},
    "cli": {
        "generation",
        "verify",
        "run",
        "fake",
        "policy",
        "analysis",
        "rules",
        "api",
        "errors",
        "files",
    },
    "__main__": {"cli"},
    # The root re-exports the public API lazily (strings, not imports), and names it for type
    # checkers only: it imports nothing at run time.
    "__init__": set(),
}


def _unit(module: str) -> str:
    """The folder (or top-level module) a dotted module belongs to."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _imports(path: Path) -> list[tuple[str, int, bool]]:
    """Every package module ``path`` imports (at any depth), with its line and whether the import
    is for type checkers only (under ``if TYPE_CHECKING:``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    typing_only = {
        id(node)
        for block in ast.walk(tree)
        if isinstance(block, ast.If) and ast.unparse(block.test) == "TYPE_CHECKING"
        for stmt in block.body
        for node in ast.walk(stmt)
    }
    found = []
    for node in ast.walk(tree):
        typing = id(node) in typing_only
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module.split(".")[0] != "openrouter_probe":
                continue
            base = PACKAGE.parent.joinpath(*node.module.split("."))
            for alias in node.names:
                # ``from openrouter_probe.fake import bodies`` imports the module fake.bodies
                if (base / f"{alias.name}.py").exists() or (base / alias.name).is_dir():
                    found.append((f"{node.module}.{alias.name}", node.lineno, typing))
                else:
                    found.append((node.module, node.lineno, typing))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "openrouter_probe":
                    found.append((alias.name, node.lineno, typing))
    return found


SOURCES = sorted(PACKAGE.rglob("*.py"))


def test_the_top_level_holds_four_modules_beside_the_folders() -> None:
    modules = {p.stem for p in PACKAGE.glob("*.py")}
    assert modules == TOP_MODULES
    folders = {p.name for p in PACKAGE.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert folders == set(MAY_IMPORT) - TOP_MODULES - {"errors", "files"}


@pytest.mark.parametrize("folder", sorted(set(MAY_IMPORT) - TOP_MODULES - {"data"}))
def test_each_folder_says_what_lives_there_and_what_it_may_import(folder: str) -> None:
    init = PACKAGE / folder / "__init__.py"
    doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
    assert doc, f"{folder}/__init__.py has no docstring"
    assert "import" in doc, f"{folder}/__init__.py does not say which folders it may import"


def test_imports_run_one_way() -> None:
    wrong = []
    for path in SOURCES:
        here = _module_name(path)
        unit = _unit(here)
        allowed = MAY_IMPORT[unit] | {unit, "__init__"}
        for target, line, typing in _imports(path):
            if unit == "__init__" and typing:
                continue  # the root names the public API for type checkers
            if _unit(target) not in allowed:
                wrong.append(f"{path.relative_to(PACKAGE)}:{line} imports {target}")
    assert wrong == []


def test_no_import_circle_between_modules() -> None:
    """No module reaches itself through the imports of others (function-level ones included)."""
    graph: dict[str, set[str]] = defaultdict(set)
    names = {_module_name(p) for p in SOURCES}
    for path in SOURCES:
        here = _module_name(path)
        for target, _, typing in _imports(path):
            if typing and path.name == "__init__.py":
                continue  # a package's re-exports for type checkers; it maps names lazily
            if target in names and target != here and target != "openrouter_probe":
                graph[here].add(target)
    circles = []
    state: dict[str, int] = {}

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                circles.append(" -> ".join([*trail[trail.index(nxt) :], nxt]))
            elif nxt not in state:
                visit(nxt, [*trail, nxt])
        state[node] = 2

    for node in sorted(names):
        if node not in state:
            visit(node, [node])
    assert circles == []


@pytest.mark.parametrize(
    "package",
    [
        "openrouter_probe",
        "openrouter_probe.api",
        "openrouter_probe.rules",
        "openrouter_probe.policy",
        "openrouter_probe.analysis",
        "openrouter_probe.run",
        "openrouter_probe.fake",
        "openrouter_probe.generation",
        "openrouter_probe.verify",
    ],
)
def test_each_folders_all_resolves(package: str) -> None:
    importlib.import_module(package)
    module = sys.modules[package]
    for name in module.__all__:
        assert getattr(module, name) is not None, name
    exports = getattr(module, "_EXPORTS", {})
    assert set(exports) <= set(module.__all__)


@pytest.mark.parametrize(
    "module",
    [
        "openrouter_probe.api.sse",
        "openrouter_probe.api.backoff",
        "openrouter_probe.rules.quantities",
        "openrouter_probe.run.rows",
    ],
)
def test_a_light_module_does_not_pull_its_folders_heavy_siblings(module: str) -> None:
    code = (
        f"import sys, {module};"
        "print(','.join(m for m in ('pandas','requests','pydantic','aiohttp') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def _function_lengths() -> list[tuple[int, str]]:
    """Every function's length in lines, its signature and docstring included."""
    lengths = []
    for path in SOURCES:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                assert node.end_lineno is not None
                name = f"{path.relative_to(PACKAGE)}:{node.name}"
                lengths.append((node.end_lineno - node.lineno + 1, name))
    return sorted(lengths, reverse=True)


def test_functions_are_short() -> None:
    """Nothing over 100 lines, and at most three over 80 (issue 14)."""
    lengths = _function_lengths()
    assert [f"{name} ({n})" for n, name in lengths if n > 100] == []
    assert len([n for n, _ in lengths if n > 80]) <= 3, lengths[:5]


#: The most methods a class may hold (issue 22): a bigger one is two nouns, one module each.
MAX_METHODS = 20


def _methods(node: ast.ClassDef) -> int:
    """The ``def``/``async def`` a class's own body holds (dunders and properties included; a
    nested class counts on its own)."""
    return sum(isinstance(d, ast.FunctionDef | ast.AsyncFunctionDef) for d in node.body)


def _method_counts() -> list[tuple[int, str]]:
    """Every class in the package with its method count, the biggest first."""
    counts = []
    for path in SOURCES:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                counts.append(
                    (_methods(node), f"{path.relative_to(PACKAGE)}:{node.lineno} {node.name}")
                )
    return sorted(counts, reverse=True)


def test_no_class_has_more_than_twenty_methods() -> None:
    """Issue 22: a class over the limit is split by what its methods are about (``run.books.books`` and
    ``run.books.batch_books``, ``fake.app`` and ``fake.router``), never by merging methods."""
    counts = _method_counts()
    assert len(counts) > 50, "the walk found too few classes: is PACKAGE right?"
    too_big = [f"{name}: {n} methods" for n, name in counts if n > MAX_METHODS]
    assert not too_big, (
        f"at most {MAX_METHODS} methods a class; move a coherent group of these into a class of "
        f"its own module: {'; '.join(too_big)}"
    )


def test_the_method_count_sees_every_kind_of_def() -> None:
    source = (
        "class A:\n"
        "    def __init__(self): ...\n"
        "    @property\n"
        "    def p(self): ...\n"
        "    async def a(self): ...\n"
        "    x = 1\n"
        "    class B:\n"
        "        def b(self): ...\n"
    )
    tree = ast.parse(source)
    counts = {n.name: _methods(n) for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}
    assert counts == {"A": 3, "B": 1}


def test_the_function_generate_hides_no_subpackage() -> None:
    # Up to 0.2.0 the folder ``generate`` shared the function's name: once the function had been
    # looked up, ``import openrouter_probe.generate.audit`` raised ImportError.
    code = (
        "import importlib, importlib.util, pkgutil, openrouter_probe as o;"
        "assert callable(o.generate) and o.generate.__module__ == 'openrouter_probe.generation.job';"
        "[importlib.import_module(m.name) for m in"
        " pkgutil.walk_packages(o.__path__, 'openrouter_probe.')"
        " if not m.name.endswith('__main__')"
        # the datatrove step needs its extra (without it its import says what to install)
        " and (not m.name.endswith('datatrove_step') or importlib.util.find_spec('datatrove'))];"
        "import openrouter_probe.generation.audit as a; assert callable(a.audit);"
        "print('ok')"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


# -- run/ in rooms (issue 33) ---------------------------------------------------------------------

RUN = PACKAGE / "run"

#: The run's values: any room of ``run`` may import them.
RUN_VALUES = {"rows", "stop", "tallies", "start", "result", "counts"}

#: What each room of ``run`` (or each module beside the rooms) may import of ``run``. The rooms
#: read bottom up, money -> send -> books -> schedule; the assembly (``paid``, ``senders``) may
#: import all of them.
RUN_MAY_IMPORT: dict[str, set[str]] = {
    "money": set(),
    "rows": {"money"},  # a row's own prices, for type checkers
    "stop": set(),
    "tallies": set(),
    "start": {"tallies"},
    "result": {"start", "stop", "tallies", "counts"},
    "counts": {"tallies"},
    "report": {"result", "stop"},  # a result's text: it reads the value, never the reverse
    "send": {"money"} | RUN_VALUES,
    "books": {"send", "money"} | RUN_VALUES,
    "config": {"books", "send", "money"},
    "schedule": {"config", "books", "send", "money"} | RUN_VALUES,
    "checks": {"config", "send", "money"} | RUN_VALUES,  # the window's start: the worst case
    "lock": set(),
    "progress": {"schedule", "stop"},
    "senders": {"schedule", "config", "books", "send", "money"} | RUN_VALUES,
    "paid": {"schedule", "config", "books", "send", "money", "checks", "lock", "progress"}
    | {"senders"}
    | RUN_VALUES,
    "__init__": {"money", "report"} | RUN_VALUES,
}

RUN_ROOMS = {"money", "send", "books", "schedule"}


def _run_room(module: str) -> str:
    """``openrouter_probe.run.send.transport`` -> ``send``; ``openrouter_probe.run.paid`` ->
    ``paid``; ``openrouter_probe.run`` -> ``__init__``."""
    parts = module.split(".")
    return parts[2] if len(parts) > 2 else "__init__"


def test_run_is_four_rooms_and_the_modules_beside_them() -> None:
    rooms = {p.name for p in RUN.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert rooms == RUN_ROOMS
    beside = {p.stem for p in RUN.glob("*.py")}
    assert beside | rooms == set(RUN_MAY_IMPORT)
    for room in rooms:
        doc = ast.get_docstring(ast.parse((RUN / room / "__init__.py").read_text())) or ""
        assert "import" in doc, f"run/{room}/__init__.py does not say what it may import"


def test_each_room_of_run_imports_only_the_rooms_below_it() -> None:
    wrong = []
    for path in sorted(RUN.rglob("*.py")):
        room = _run_room(_module_name(path))
        for target, line, _ in _imports(path):
            if not target.startswith("openrouter_probe.run."):
                continue
            there = _run_room(target)
            if there != room and there not in RUN_MAY_IMPORT[room]:
                wrong.append(f"{path.relative_to(PACKAGE)}:{line} ({room}) imports {target}")
    assert wrong == []


def test_the_rooms_of_run_form_no_circle() -> None:
    """The table itself reads one way: no room may import a room that may import it back."""
    order: list[str] = []
    left = dict(RUN_MAY_IMPORT)
    while left:
        ready = [r for r, deps in left.items() if deps <= set(order)]
        assert ready, f"a circle among {sorted(left)}"
        order.extend(sorted(ready))
        for r in ready:
            del left[r]
    assert order.index("money") < order.index("send") < order.index("books")
    assert order.index("books") < order.index("schedule") < order.index("paid")


def test_no_module_of_run_is_over_500_lines() -> None:
    long = {
        str(p.relative_to(PACKAGE)): n
        for p in RUN.rglob("*.py")
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > 500
    }
    assert long == {}


def test_the_clients_journal_is_not_named_like_the_fakes_ledger() -> None:
    """``fake.ledger`` is the server's billing; the client's record is ``run.money.journal``."""
    assert (PACKAGE / "fake" / "ledger.py").exists()
    assert not list(RUN.rglob("ledger.py"))
    assert (RUN / "money" / "journal.py").exists()


def test_tests_are_named_after_what_they_test_not_after_an_issue() -> None:
    """A test file is found by the concept it tests: its name and its docstring's opening
    paragraphs cite no issue number (the history is in git and the CHANGELOG)."""
    cited = re.compile(r"issue[ _-]?\d|issues? \d|#\d", re.IGNORECASE)
    offenders = []
    for path in sorted((PACKAGE.parent / "tests").rglob("*.py")):
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
        opening = "\n\n".join(doc.split("\n\n")[:2])
        opening = re.sub(r"[\w.-]+/[\w.-]+(?: issue |#)\d+", "", opening)  # another repo's
        if cited.search(path.name) or cited.search(opening):
            offenders.append(str(path.relative_to(PACKAGE.parent)))
    assert offenders == []


TESTS = ROOT / "tests"
#: The folder of the tests of the project as a whole: layout, docs, messages, the public API, the
#: examples, the cassettes, the notebook, the pre-commit hooks, and the top-level modules.
PROJECT = Path("project")


def test_the_tests_mirror_the_package() -> None:
    """``tests/`` is laid out as ``openrouter_probe/`` is: a test file lives in the folder of the
    subpackage it tests (``tests/run/money/`` for ``run/money/``) or in ``tests/project/``, is not
    named after its folder again (``tests/verify/test_stats.py`` tests ``verify/stats.py``),
    and each of those folders is a package; only the shared helpers sit at ``tests/``'s root."""
    misplaced, repeated = [], []
    for path in sorted(TESTS.rglob("test_*.py")):
        folder = path.parent.relative_to(TESTS)
        if folder.parts[:1] in {("data",), ("cassettes",)}:
            continue
        if folder != PROJECT and not (folder.parts and (PACKAGE / folder / "__init__.py").exists()):
            misplaced.append(str(path.relative_to(ROOT)))
        elif folder.parts and path.name.startswith(f"test_{folder.name}_"):
            repeated.append(str(path.relative_to(ROOT)))
    assert misplaced == [], "move each into tests/<subpackage>/ or tests/project/"
    assert repeated == []
    folders = {p.parent for p in TESTS.rglob("test_*.py")} - {TESTS}
    assert sorted(str(f) for f in folders if not (f / "__init__.py").exists()) == []
    helpers = {p.name for p in TESTS.glob("*.py")}
    assert {h for h in helpers if not h.startswith("_") and h != "conftest.py"} == set()


def test_the_layout_check_reads_a_folder_as_a_subpackage() -> None:
    """The rule above passes only where it should: ``run/money`` is a subpackage of the package,
    ``money`` alone and ``tests`` are not."""
    assert (PACKAGE / "run" / "money" / "__init__.py").exists()
    assert not (PACKAGE / "money" / "__init__.py").exists()
    assert not (PACKAGE / "project").exists()
    assert {p.parent.relative_to(TESTS) for p in TESTS.rglob("test_*.py")} >= {
        PROJECT,
        Path("run/money"),
        Path("verify"),
    }

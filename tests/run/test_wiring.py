"""A paid run is put together by constructor arguments only: no code of ``run/`` or
``generation/`` assigns an attribute of a run's parts (the books, the scheduler, a sender, a row
source, the output, the journal, the turns log, their write failures, the waits, the claims, the
opened output) from outside the part's own class, and nothing is wired in after construction by
a ``bind``.

The check reads the code (``ast``): a name is one of those parts when its annotation names the
class, when it is bound to the class's constructor (or to a function of the package whose return
annotation names it), in an assignment or a ``with``; ``self.x`` is one when the class assigns
it so. Every assignment ``part.attr = ...`` (or ``part.inner.attr = ...``) to such a name
outside ``self`` is reported.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from tests.conftest import ROOT

PACKAGE = ROOT / "openrouter_probe"

#: The parts of a paid run, by class name.
PARTS = {
    "Books",
    "Run",
    "RowSource",
    "TurnSource",
    "BatchSender",
    "HttpTransport",
    "OutputLog",
    "Journal",
    "TurnLog",
    "TurnBook",
    "WriteFailures",
    "Waits",
    "BatchClaims",
    "PaidRun",
    "WriteStop",
}

#: Assignments the check reports that stay, each with why (file, line text): none.
ALLOWED: dict[tuple[str, str], str] = {}


def _mentions_part(annotation: ast.expr | None) -> bool:
    if annotation is None:
        return False
    text = ast.unparse(annotation)
    return any(name.strip("'\"") in PARTS for name in _words(text))


def _words(text: str) -> list[str]:
    for sep in "[]|,.() ":
        text = text.replace(sep, " ")
    return text.split()


def _returns_part(files: dict[str, ast.Module]) -> set[str]:
    """The package's functions whose return annotation names a part (``open_run``,
    ``PaidRun._books``)."""
    return {
        node.name
        for tree in files.values()
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and _mentions_part(node.returns)
    }


def _makes_part(value: ast.expr | None, makers: set[str]) -> bool:
    """Whether ``value`` calls a part's constructor (or ``Part.start``, or a maker)."""
    if value is None:
        return False
    for node in ast.walk(value):
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr in makers:  # self._books(...)
                return True
            if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
                func = func.value if func.value.id in PARTS else func  # TurnBook.start(...)
            if isinstance(func, ast.Name) and (func.id in PARTS or func.id in makers):
                return True
    return False


def _assigned(node: ast.AST) -> Iterator[tuple[ast.expr, ast.expr | None]]:
    """Each target of an assignment in ``node`` with the value it gets (tuples unpacked)."""
    if isinstance(node, ast.Assign):
        pairs = [(t, node.value) for t in node.targets]
    elif isinstance(node, ast.AugAssign | ast.AnnAssign):
        pairs = [(node.target, node.value)]
    elif isinstance(node, ast.With | ast.AsyncWith):
        pairs = [(i.optional_vars, i.context_expr) for i in node.items if i.optional_vars]
    else:
        pairs = []
    while pairs:
        target, value = pairs.pop()
        if isinstance(target, ast.Tuple | ast.List):
            pairs.extend((element, None) for element in target.elts)
        else:
            yield target, value


def _root(target: ast.Attribute) -> tuple[ast.expr, list[str]]:
    """``a.b.c`` -> (``a``, [``b``, ``c``])."""
    chain: list[str] = []
    node: ast.expr = target
    while isinstance(node, ast.Attribute):
        chain.insert(0, node.attr)
        node = node.value
    return node, chain


def _typed(function: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """The parameters of ``function`` whose annotation names a part."""
    args = function.args
    every = [*args.posonlyargs, *args.args, *args.kwonlyargs]
    return {a.arg for a in every if a.arg != "self" and _mentions_part(a.annotation)}


def _own_parts(cls: ast.ClassDef, makers: set[str]) -> set[str]:
    """The attributes of ``self`` a class sets to a part (made there, or given to a method)."""
    own = set()
    for method in cls.body:
        if not isinstance(method, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        typed = _typed(method)
        for node in ast.walk(method):
            for target, value in _assigned(node):
                if (
                    isinstance(target, ast.Attribute)
                    and isinstance(target.value, ast.Name)
                    and target.value.id == "self"
                    and (
                        _makes_part(value, makers)
                        or (isinstance(value, ast.Name) and value.id in typed)
                    )
                ):
                    own.add(target.attr)
    return own


def wiring_by_assignment(files: dict[str, ast.Module]) -> list[tuple[str, int, str]]:
    """Every assignment into a part from outside its own class: (file, line, the target)."""
    makers = _returns_part(files)
    found = []
    for name, tree in files.items():
        own_of: dict[ast.AST, set[str]] = {}  # a method -> its class's parts of self
        for cls in ast.walk(tree):
            if isinstance(cls, ast.ClassDef):
                own = _own_parts(cls, makers)
                own_of.update((method, own) for method in cls.body)
        for scope in ast.walk(tree):
            if not isinstance(scope, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            own = own_of.get(scope, set())
            parts = _typed(scope)
            for node in ast.walk(scope):
                for target, value in _assigned(node):
                    if isinstance(target, ast.Name) and _makes_part(value, makers):
                        parts.add(target.id)
            for node in ast.walk(scope):
                for target, _ in _assigned(node):
                    if not isinstance(target, ast.Attribute):
                        continue
                    root, chain = _root(target)
                    if not isinstance(root, ast.Name):
                        continue
                    outside = root.id in parts
                    through_self = root.id == "self" and len(chain) > 1 and chain[0] in own
                    if outside or through_self:
                        found.append((name, node.lineno, ast.unparse(target)))
    return sorted(set(found), key=lambda f: (f[0], f[1]))


def _package_files(containing: str = "") -> dict[str, ast.Module]:
    """The modules of run/ and generation/, parsed; only those whose text holds ``containing``
    (parsing is most of these tests' time, and a module without the word cannot match)."""
    paths = [
        *sorted((PACKAGE / "run").rglob("*.py")),
        *sorted((PACKAGE / "generation").rglob("*.py")),
    ]
    texts = {str(p.relative_to(PACKAGE)): p.read_text() for p in paths}
    return {name: ast.parse(text) for name, text in texts.items() if containing in text}


def _line(name: str, lineno: int) -> str:
    return (PACKAGE / name).read_text().splitlines()[lineno - 1].strip()


def test_no_part_of_a_run_is_wired_in_by_assignment() -> None:
    found = wiring_by_assignment(_package_files())
    said = [(name, line, target, _line(name, line)) for name, line, target in found]
    wrong = [f"{n}:{line}: {text}" for n, line, _, text in said if (n, text) not in ALLOWED]
    assert wrong == [], "give it to the part's constructor instead:\n" + "\n".join(wrong)
    stale = set(ALLOWED) - {(n, text) for n, _, _, text in said}
    assert not stale, f"allowed assignments no longer there: drop them from ALLOWED: {stale}"


def test_nothing_is_bound_after_construction() -> None:
    binds = [
        f"{name}:{node.lineno}"
        for name, tree in _package_files(containing="bind").items()
        for node in ast.walk(tree)
        if (isinstance(node, ast.FunctionDef) and node.name == "bind")
        or (isinstance(node, ast.Attribute) and node.attr == "bind")
    ]
    assert binds == []


def test_the_check_sees_the_wiring_it_forbids() -> None:
    """The ways parts were wired in by assignment are each reported; a part's own attribute,
    a value's field and a local object's are not."""
    source = """
class Run:
    def __init__(self, books: Books, waits) -> None:
        self.books = books
        books.on_change = waits.notify           # a parameter named a part
        self.books.window = None                 # through self's part
        self.count = 0                           # its own attribute

def make(journal: "Journal | None", summary) -> None:
    output = OutputLog("out")
    output.writes.on_failure = print            # a part made here, its inner writer
    journal.writes.on_failure = print            # an annotated parameter
    summary.message = "said"                     # a value, not a part
    with open_run(None) as paid:
        paid.options = None                      # a part a package function returns

def open_run(options) -> "Iterator[PaidRun]":
    yield None
"""
    found = wiring_by_assignment({"x.py": ast.parse(source)})
    assert [target for _, _, target in found] == [
        "books.on_change",
        "self.books.window",
        "output.writes.on_failure",
        "journal.writes.on_failure",
        "paid.options",
    ]

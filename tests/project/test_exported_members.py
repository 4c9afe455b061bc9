"""The public API is exactly __all__, sorted, and every name resolves (httpx's test, adapted)."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import openrouter_probe
from openrouter_probe import exports_of


def test_all_is_sorted_and_resolves() -> None:
    assert openrouter_probe.__all__ == sorted(openrouter_probe.__all__)
    for name in openrouter_probe.__all__:
        member = getattr(openrouter_probe, name)
        if name != "__version__":
            assert member.__module__.startswith("openrouter_probe."), name


def test_exports_match_the_lazy_table() -> None:
    assert set(openrouter_probe._EXPORTS) | {"__version__"} == set(openrouter_probe.__all__)


def _type_checking_imports() -> dict[str, str]:
    """What a type checker reads in the package root: every import under ``if TYPE_CHECKING:``."""
    tree = ast.parse(Path(openrouter_probe.__file__).read_text(encoding="utf-8"))
    found: dict[str, str] = {}
    for block in tree.body:
        if isinstance(block, ast.If) and ast.unparse(block.test) == "TYPE_CHECKING":
            for node in block.body:
                assert isinstance(node, ast.ImportFrom) and node.module, ast.unparse(node)
                for alias in node.names:
                    # ``name as name``: an explicit re-export under mypy --strict
                    assert alias.asname == alias.name, ast.unparse(node)
                    found[alias.name] = node.module
    return found


def test_the_lazy_table_is_the_type_checking_block() -> None:
    # One table: the lazy loader reads the imports the type checker reads, none left out.
    assert _type_checking_imports() == openrouter_probe._EXPORTS
    assert len(openrouter_probe._EXPORTS) == 67  # RunResult, RunSummary its old name, its text


def test_a_notebooks_last_steps_are_at_the_top_level() -> None:
    from openrouter_probe.analysis.plots import plot_budget
    from openrouter_probe.generation.audit import audit
    from openrouter_probe.generation.export import export

    assert openrouter_probe.audit is audit
    assert openrouter_probe.export is export
    assert openrouter_probe.plot_budget is plot_budget
    assert "plot_price_uptime" in openrouter_probe.__all__


def test_dead_names_are_gone() -> None:
    import openrouter_probe.errors as errors

    # the cap stops a run (RunSummary.stop_reason == "budget"); nothing raised it
    assert not hasattr(errors, "BudgetExceededError")
    assert "BudgetExceededError" not in openrouter_probe.__all__
    # one class named Job: the budget's is BudgetJob
    from openrouter_probe.analysis import budget_job

    assert not hasattr(budget_job, "Job") and budget_job.BudgetJob.__name__ == "BudgetJob"


def test_import_does_not_pull_heavy_modules() -> None:
    code = (
        "import sys, openrouter_probe;"
        "print(','.join(m for m in ('pandas','requests','pydantic','bs4','matplotlib') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_cli_help_does_not_import_the_library() -> None:
    code = (
        "import sys; from openrouter_probe.cli import cli;"
        "print(','.join(m for m in ('pandas','requests','pydantic','bs4','rich') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_version_matches_metadata() -> None:
    from importlib.metadata import version

    assert openrouter_probe.__version__ == version("openrouter-probe")


FOLDERS = sorted(
    p.parent.name
    for p in Path(openrouter_probe.__file__).parent.glob("*/__init__.py")
    if p.parent.name != "__pycache__"
)


def test_every_folder_is_an_attribute_in_a_fresh_interpreter() -> None:
    """Issue 33: ``orp.generation`` raised AttributeError (a hand-kept list of subpackages lacked
    it). Every folder is reached as an attribute now, and ``orp.generation.generate`` is the
    function, in a process that imported nothing else first."""
    assert {"analysis", "api", "cli", "fake", "generation", "policy", "rules", "run"} <= set(
        FOLDERS
    )
    code = (
        "import openrouter_probe as o;"
        f"names = {FOLDERS!r};"
        "print(','.join(getattr(o, n).__name__ for n in names));"
        "print(o.generation.generate.__module__, o.fake.server.__name__)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    lines = out.stdout.splitlines()
    assert lines[0] == ",".join(f"openrouter_probe.{n}" for n in FOLDERS)
    assert lines[1] == "openrouter_probe.generation.job openrouter_probe.fake.server"
    missing = subprocess.run(
        [sys.executable, "-c", "import openrouter_probe as o; o.nothing_here"],
        capture_output=True,
        text=True,
    )
    assert "module 'openrouter_probe' has no attribute 'nothing_here'" in missing.stderr


@pytest.mark.parametrize("folder", [f for f in FOLDERS if f not in ("cli", "data")])
def test_every_folder_exports_by_one_mechanism(folder: str) -> None:
    """One lazy-export mechanism: each folder writes its public names once, as the imports of
    its ``TYPE_CHECKING`` block, and ``exports_of`` + ``lazy_exports`` make them its table,
    ``__all__`` and ``__getattr__`` (``cli`` exports its group; ``data`` is files)."""
    module = importlib.import_module(f"openrouter_probe.{folder}")
    assert exports_of(module.__file__) == module._EXPORTS
    assert module.__all__ == sorted(module._EXPORTS)
    assert module.__getattr__.__qualname__ == "lazy_exports.<locals>.__getattr__"
    source = Path(module.__file__).read_text(encoding="utf-8")
    assert "_EXPORTS: dict[str, str] = exports_of(__file__)" in source
    # nothing is imported for real at the folder's top but the mechanism itself
    tree = ast.parse(source)
    eager = [
        ast.unparse(node)
        for node in tree.body
        if isinstance(node, ast.ImportFrom) and node.module not in ("__future__", "typing")
    ]
    assert eager == ["from openrouter_probe import exports_of, lazy_exports"], eager

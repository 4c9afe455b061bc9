"""The public API is exactly __all__, sorted, and every name resolves (httpx's test, adapted)."""

from __future__ import annotations

import subprocess
import sys

import openrouter_probe


def test_all_is_sorted_and_resolves() -> None:
    assert openrouter_probe.__all__ == sorted(openrouter_probe.__all__)
    for name in openrouter_probe.__all__:
        member = getattr(openrouter_probe, name)
        if name != "__version__":
            assert member.__module__.startswith("openrouter_probe."), name


def test_exports_match_the_lazy_table() -> None:
    assert set(openrouter_probe._EXPORTS) | {"__version__"} == set(openrouter_probe.__all__)


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

"""The split modules keep the old import paths, and imports run one way (issue 11 item 7)."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "openrouter_probe"

MOVED = {
    "openrouter_probe.routing": (
        "openrouter_probe.provider_block",
        ["MAX_PRICE_UNITS", "MaxPrice", "ProviderBlock", "SortSpec"],
    ),
    "openrouter_probe.policy": (
        "openrouter_probe.policy_file",
        [
            "CompiledPolicy",
            "Decision",
            "PolicySpec",
            "PriceLimits",
            "compiled_from_document",
            "document_kind",
            "is_compiled",
            "load_compiled_policy",
            "load_provider_block",
            "load_spec",
            "parse_spec",
            "provider_mapping",
            "read_yaml",
            "require_document",
        ],
    ),
    "openrouter_probe.schema": (
        "openrouter_probe.chat",
        ["ChatCompletion", "Choice", "ErrorBody", "Generation", "KeyInfo", "Usage"],
    ),
}


@pytest.mark.parametrize("old", sorted(MOVED))
def test_moved_names_are_still_importable_from_the_old_module(old: str) -> None:
    new, names = MOVED[old]
    old_module, new_module = importlib.import_module(old), importlib.import_module(new)
    for name in names:
        assert getattr(old_module, name) is getattr(new_module, name), name
        assert name in old_module.__all__, name
        assert name in new_module.__all__, name


def test_schema_gives_an_attribute_error_for_unknown_names() -> None:
    schema = importlib.import_module("openrouter_probe.schema")
    with pytest.raises(AttributeError, match="no attribute 'NotAName'"):
        schema.NotAName


def test_chat_imports_first_in_a_fresh_interpreter() -> None:
    """``chat`` builds on ``schema``, and ``schema`` re-exports ``chat`` lazily: no import cycle."""
    code = (
        "import openrouter_probe.chat as c, openrouter_probe.schema as s; "
        "assert s.ChatCompletion is c.ChatCompletion"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


#: Lower layers never import higher ones (cli -> features -> routing -> schema -> errors).
LAYER = {
    "errors": 0,
    "schema": 1,
    "chat": 1,
    "provider_block": 2,
    "routing": 3,
    "policy_file": 3,
    "policy": 4,
}


def _imports(path: Path) -> list[tuple[str, int, bool]]:
    """Return the package modules ``path`` imports, their lines, and whether only for typing."""
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
        if isinstance(node, ast.ImportFrom) and node.module:
            parts = node.module.split(".")
            if parts[0] == "openrouter_probe" and len(parts) > 1:
                found.append((parts[1], node.lineno, id(node) in typing_only))
    return found


@pytest.mark.parametrize("module", sorted(LAYER))
def test_imports_run_one_way(module: str) -> None:
    upward = [
        f"{module}.py:{line} imports {target}"
        for target, line, typing_only in _imports(PACKAGE / f"{module}.py")
        if target in LAYER and LAYER[target] > LAYER[module] and not typing_only
    ]
    # schema names the chat models for type checkers and loads them on first use (__getattr__).
    assert upward == []

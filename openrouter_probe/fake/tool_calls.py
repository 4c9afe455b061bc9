"""The tool call the fake model makes: which offered tool the text names, and its arguments read
from the text by the tool's schema (``fake.content`` answers with it)."""

from __future__ import annotations

import re
from typing import Any

__all__ = ["tool_call_for"]

_WORD = re.compile(r"[a-z]+")
_QUOTED = re.compile(r'"([^"]+)"')
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def _function(tool: Any) -> dict[str, Any] | None:
    function = tool.get("function") if isinstance(tool, dict) else None
    if not isinstance(function, dict) or not isinstance(function.get("name"), str):
        return None
    return function


def _tool_score(name: str, words: set[str]) -> int:
    return sum(
        1 for w in name.lower().split("_") if len(w) > 3 and (w in words or f"{w}s" in words)
    )


def tool_call_for(text: str, tools: list[Any]) -> tuple[str, dict[str, Any], dict[str, Any]] | None:
    """Return the call the fake makes for ``text`` with ``tools`` offered: ``(name, arguments,
    schema)``, or ``None`` when the text names no tool (a word of four letters or more of the
    tool's name, e.g. "weather" for ``get_weather``; the best-named tool wins, the first on a tie).

    Arguments are read from the text by the schema's properties, in order: an ``enum`` by the first
    of its values the text holds; a ``pattern`` by its matches; numbers in order (integers as
    ``int``); other strings (and arrays of strings: all the rest) from double-quoted text.
    """
    words = set(_WORD.findall(text.lower()))
    best: tuple[int, dict[str, Any]] | None = None
    for tool in tools:
        function = _function(tool)
        if function is None:
            continue
        score = _tool_score(function["name"], words)
        if score and (best is None or score > best[0]):
            best = (score, function)
    if best is None:
        return None
    function = best[1]
    raw = function.get("parameters")
    schema: dict[str, Any] = raw if isinstance(raw, dict) else {}
    return function["name"], _arguments(text, schema), schema


def _arguments(text: str, schema: dict[str, Any]) -> dict[str, Any]:
    raw = schema.get("properties")
    properties: dict[str, Any] = raw if isinstance(raw, dict) else {}
    quoted = _QUOTED.findall(text)
    rest = _QUOTED.sub(" ", text)
    matched: dict[str, list[str]] = {}
    for spec in properties.values():
        pattern = spec.get("pattern") if isinstance(spec, dict) else None
        if isinstance(pattern, str) and pattern not in matched:
            core = pattern.removeprefix("^").removesuffix("$")
            matched[pattern] = re.findall(rf"(?<![\w-]){core}(?![\w-])", rest)
            rest = re.sub(rf"(?<![\w-]){core}(?![\w-])", " ", rest)
    numbers = _NUMBER.findall(rest)
    args: dict[str, Any] = {}
    lower = text.lower()
    for key, spec in properties.items():
        if not isinstance(spec, dict):
            continue
        value: Any = None
        if isinstance(spec.get("enum"), list):
            value = next((v for v in spec["enum"] if str(v).lower() in lower), None)
        elif isinstance(spec.get("pattern"), str):
            found = matched.get(spec["pattern"]) or []
            value = found.pop(0) if found else None
        elif spec.get("type") in ("number", "integer") and numbers:
            number = float(numbers.pop(0))
            value = int(number) if spec["type"] == "integer" or number.is_integer() else number
        elif spec.get("type") == "array" and quoted:
            value, quoted = list(quoted), []
        elif spec.get("type") == "string" and quoted:
            value = quoted.pop(0)
        if value is not None:
            args[key] = value
    return args

"""The prompts a precision check sends: ``arith``, ``tools`` and user JSONL files.

- ``arith``: multi-digit arithmetic generated from a seed, each with its exact answer and a strict
  answer format ("Answer with the number only"). Item ``i`` of a seed is the same whatever ``n`` is, so
  a larger run extends a smaller one (and its ids, ``arith/s<seed>/<i>``, are stable for resume).
- ``tools``: a small built-in set of tool-use prompts, each with JSON-schema'd tools and the call (or
  no call) a correct answer makes; ``check_schema`` validates tool-call arguments for the subset of
  JSON Schema the set uses (no new dependency: ``jsonschema`` would be the whole draft for eight
  schemas; the tests check this checker agrees with it).
- a user JSONL file: one object a line with ``messages`` and an optional ``answer`` (and ``id``,
  ``max_tokens``); errors name ``file:line`` and the fix.

``extract_number`` and ``normalise_text`` turn an answer into what is compared.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from openrouter_probe.errors import ConfigError

__all__ = [
    "ARITH_INSTRUCTION",
    "SCHEMA_KEYWORDS",
    "Extracted",
    "Item",
    "arith_suite",
    "check_schema",
    "extract_number",
    "load_jsonl_suite",
    "load_suites",
    "normalise_text",
    "tools_suite",
]

#: The strict answer format of the ``arith`` suite.
ARITH_INSTRUCTION = (
    "Answer with the number only: digits, with a leading minus sign if it is negative; "
    "no words, spaces, commas or units."
)

#: JSON Schema keywords ``check_schema`` implements; any other keyword in a schema is an error.
SCHEMA_KEYWORDS = frozenset(
    {
        "type",
        "properties",
        "required",
        "additionalProperties",
        "enum",
        "items",
        "minimum",
        "maximum",
        "minLength",
        "maxLength",
        "minItems",
        "maxItems",
        "pattern",
        "description",
        "title",
    }
)


@dataclass(frozen=True)
class Item:
    """One prompt of a suite.

    ``answer`` is the known answer (``None``: none known, scored against the reference only).
    ``tools``/``expect_tool``/``expect_arguments`` are set for tool-use prompts: the tool a correct
    answer calls (``None``: no call) and argument values it must carry. ``expected_output_tokens`` is
    the planner's guess of a typical answer; ``max_tokens`` is what a request may spend.
    """

    id: str
    suite: str
    messages: tuple[dict[str, Any], ...]
    answer: str | None = None
    answer_kind: str = "text"  # "number" | "text" | "tool"
    tools: tuple[dict[str, Any], ...] = ()
    expect_tool: str | None = None
    expect_arguments: dict[str, Any] = field(default_factory=dict)
    max_tokens: int = 256
    expected_output_tokens: int = 16

    @property
    def known(self) -> bool:
        """Whether the item has a known answer (a number, a text, or an expected tool decision)."""
        return self.answer is not None or self.answer_kind == "tool"


# --- arith -------------------------------------------------------------------------------------


def _arith_question(rng: random.Random) -> tuple[str, int]:
    op = rng.choice(("*", "*", "+", "-"))
    if op == "*":
        a, b = rng.randint(100, 9999), rng.randint(100, 9999)
        return f"{a} * {b}", a * b
    a, b = rng.randint(100_000, 99_999_999), rng.randint(100_000, 99_999_999)
    return (f"{a} + {b}", a + b) if op == "+" else (f"{a} - {b}", a - b)


def arith_suite(n: int, *, seed: int = 0) -> list[Item]:
    """Return ``n`` arithmetic prompts from ``seed``: 3-4 digit products, 6-8 digit sums and
    differences (negative ones included), each with its exact integer answer.

    Item ``i`` depends on ``seed`` and ``i`` only, so ``arith_suite(10)`` is a prefix of
    ``arith_suite(200)``.
    """
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    items = []
    for i in range(n):
        rng = random.Random(f"arith/{seed}/{i}")  # str seeds hash with sha512: stable across runs
        question, value = _arith_question(rng)
        items.append(
            Item(
                id=f"arith/s{seed}/{i:05d}",
                suite="arith",
                messages=({"role": "user", "content": f"What is {question}? {ARITH_INSTRUCTION}"},),
                answer=str(value),
                answer_kind="number",
                max_tokens=256,
                expected_output_tokens=8,
            )
        )
    return items


@dataclass(frozen=True)
class Extracted:
    """A number read from an answer: its canonical form and whether the strict format was kept."""

    value: str | None
    strict: bool


_STRICT = re.compile(r"[-−]?\d+")
_GROUPED = re.compile(r"[-−]?\d{1,3}(?:([,_ \u2009\u202f])\d{3})(?:\1\d{3})*")
_ANY_NUMBER = re.compile(r"[-−]?\d{1,3}(?:[,_\u2009\u202f]\d{3})+(?!\d)|[-−]?\d+")


def _canonical(token: str) -> str:
    digits = re.sub(r"[,_ \u2009\u202f]", "", token.replace("−", "-"))
    return str(int(digits))


def extract_number(text: str | None) -> Extracted:
    """Read an integer answer: strictly (the number alone, maybe in ``**``/backticks or with a final
    period), else leniently (the last number in the text, thousands separators allowed).

    ``extract_number("-1,234")`` gives ``Extracted("-1234", strict=False)``;
    ``extract_number("**42**")`` gives ``Extracted("42", strict=True)``.
    """
    if text is None:
        return Extracted(None, False)
    core = text
    for _ in range(2):  # "**42**." and "`42.`" alike
        core = core.strip().strip("*`").strip().removesuffix(".")
    if _STRICT.fullmatch(core):
        return Extracted(_canonical(core), True)
    if _GROUPED.fullmatch(core):
        return Extracted(_canonical(core), False)
    found = _ANY_NUMBER.findall(text)
    return Extracted(_canonical(found[-1]) if found else None, False)


def normalise_text(text: str | None) -> str:
    """Return ``text`` for comparison: case-folded, whitespace collapsed, trailing period dropped."""
    if text is None:
        return ""
    return " ".join(text.casefold().split()).strip().rstrip(".").strip()


# --- tools -------------------------------------------------------------------------------------


def _tool(name: str, description: str, parameters: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": parameters},
    }


_WEATHER = _tool(
    "get_weather",
    "Current weather for a city.",
    {
        "type": "object",
        "properties": {
            "city": {"type": "string", "minLength": 1},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        },
        "required": ["city", "unit"],
        "additionalProperties": False,
    },
)
_CONVERT = _tool(
    "convert_currency",
    "Convert an amount between currencies (ISO 4217 codes).",
    {
        "type": "object",
        "properties": {
            "amount": {"type": "number", "minimum": 0},
            "from_currency": {"type": "string", "pattern": "^[A-Z]{3}$"},
            "to_currency": {"type": "string", "pattern": "^[A-Z]{3}$"},
        },
        "required": ["amount", "from_currency", "to_currency"],
        "additionalProperties": False,
    },
)
_EVENT = _tool(
    "create_event",
    "Add an event to the user's calendar.",
    {
        "type": "object",
        "properties": {
            "title": {"type": "string", "minLength": 1, "maxLength": 100},
            "date": {"type": "string", "pattern": "^\\d{4}-\\d{2}-\\d{2}$"},
            "attendees": {
                "type": "array",
                "items": {"type": "string", "minLength": 1},
                "maxItems": 20,
            },
        },
        "required": ["title", "date"],
        "additionalProperties": False,
    },
)
_SEARCH = _tool(
    "search_docs",
    "Search the product documentation.",
    {
        "type": "object",
        "properties": {
            "query": {"type": "string", "minLength": 1},
            "max_results": {"type": "integer", "minimum": 1, "maximum": 20},
        },
        "required": ["query"],
        "additionalProperties": False,
    },
)
_ALL_TOOLS = (_WEATHER, _CONVERT, _EVENT, _SEARCH)

#: (id, prompt, the tool a correct answer calls or None, argument values it must carry)
_TOOL_CASES: tuple[tuple[str, str, str | None, dict[str, Any]], ...] = (
    ("weather-paris", "What's the weather in Paris right now, in celsius?", "get_weather",
     {"city": "Paris", "unit": "celsius"}),
    ("weather-austin", "Is it hot in Austin today? Give me the temperature in fahrenheit.",
     "get_weather", {"city": "Austin", "unit": "fahrenheit"}),
    ("convert-eur-jpy", "How many Japanese yen is 250 euros?", "convert_currency",
     {"amount": 250, "from_currency": "EUR", "to_currency": "JPY"}),
    ("convert-usd-gbp", "Convert 19.99 US dollars to British pounds.", "convert_currency",
     {"amount": 19.99, "from_currency": "USD", "to_currency": "GBP"}),
    ("event-review", "Put 'Quarterly review' in my calendar on 2026-12-15 with Ana and Bo.",
     "create_event", {"title": "Quarterly review", "date": "2026-12-15"}),
    ("search-rate-limits", "Find the three most relevant documentation pages about rate limits.",
     "search_docs", {"max_results": 3}),
    ("no-tool-capital", "What is the capital of France? Answer in one word.", None, {}),
    ("no-tool-arith", "What is 12 + 30? Answer with the number only.", None, {}),
)  # fmt: skip


def tools_suite() -> list[Item]:
    """Return the built-in tool-use prompts (8: six that call a tool, two that should not)."""
    for tool in _ALL_TOOLS:
        _check_schema_keywords(tool["function"]["parameters"], f"tool {tool['function']['name']}")
    return [
        Item(
            id=f"tools/{case_id}",
            suite="tools",
            messages=({"role": "user", "content": prompt},),
            answer_kind="tool",
            tools=_ALL_TOOLS,
            expect_tool=tool,
            expect_arguments=dict(arguments),
            max_tokens=512,
            expected_output_tokens=60,
        )
        for case_id, prompt, tool, arguments in _TOOL_CASES
    ]


def _check_schema_keywords(schema: Any, where: str) -> None:
    if not isinstance(schema, Mapping):
        raise ConfigError(f"{where}: a schema must be an object")
    unknown = sorted(set(schema) - SCHEMA_KEYWORDS)
    if unknown:
        raise ConfigError(
            f"{where}: schema keyword(s) {unknown} are not supported by the tool-call checker; "
            f"use only {sorted(SCHEMA_KEYWORDS)}"
        )
    for name, sub in (schema.get("properties") or {}).items():
        _check_schema_keywords(sub, f"{where}.properties.{name}")
    if "items" in schema:
        _check_schema_keywords(schema["items"], f"{where}.items")


_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "boolean": (bool,),
    "null": (type(None),),
    "number": (int, float),
    "integer": (int,),
}


def _is_type(value: Any, name: str) -> bool:
    if name in ("number", "integer") and isinstance(value, bool):
        return False
    if name == "integer" and isinstance(value, float):
        return value.is_integer()
    return isinstance(value, _TYPES.get(name, ()))


def check_schema(value: Any, schema: Mapping[str, Any], *, path: str = "$") -> list[str]:
    """Return what is wrong with ``value`` under ``schema`` (empty: valid), one line per fault.

    Implements ``SCHEMA_KEYWORDS`` with JSON Schema's meaning (``pattern`` searches, ``integer``
    accepts 1.0, booleans are not numbers).
    """
    errors: list[str] = []
    kinds = schema.get("type")
    if kinds is not None:
        names = [kinds] if isinstance(kinds, str) else list(kinds)
        if not any(_is_type(value, k) for k in names):
            return [f"{path}: expected {' or '.join(names)}, got {type(value).__name__}"]
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{path}: {value!r} is not one of {schema['enum']}")
    if isinstance(value, int | float) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            errors.append(f"{path}: {value} < minimum {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            errors.append(f"{path}: {value} > maximum {schema['maximum']}")
    if isinstance(value, str):
        if "minLength" in schema and len(value) < schema["minLength"]:
            errors.append(f"{path}: shorter than {schema['minLength']}")
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            errors.append(f"{path}: longer than {schema['maxLength']}")
        if "pattern" in schema and not re.search(schema["pattern"], value):
            errors.append(f"{path}: does not match {schema['pattern']!r}")
    if isinstance(value, list):
        if "minItems" in schema and len(value) < schema["minItems"]:
            errors.append(f"{path}: fewer than {schema['minItems']} items")
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            errors.append(f"{path}: more than {schema['maxItems']} items")
        if "items" in schema:
            for i, entry in enumerate(value):
                errors.extend(check_schema(entry, schema["items"], path=f"{path}[{i}]"))
    if isinstance(value, dict):
        properties = schema.get("properties") or {}
        errors.extend(
            f"{path}: missing {key!r}" for key in schema.get("required", ()) if key not in value
        )
        for key, entry in value.items():
            if key in properties:
                errors.extend(check_schema(entry, properties[key], path=f"{path}.{key}"))
            elif schema.get("additionalProperties") is False:
                errors.append(f"{path}: unexpected key {key!r}")
    return errors


# --- user JSONL --------------------------------------------------------------------------------

_JSONL_KEYS = frozenset({"id", "messages", "answer", "max_tokens"})


def _content_id(messages: Any) -> str:
    canonical = json.dumps(messages, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()[:16]


def _jsonl_item(row: Any, where: str, suite: str) -> Item:
    if not isinstance(row, dict):
        raise ConfigError(f'{where}: expected a JSON object like {{"messages": [...]}}')
    unknown = sorted(set(row) - _JSONL_KEYS)
    if unknown:
        raise ConfigError(
            f"{where}: unknown key(s) {unknown}; a row has messages and optionally "
            "answer, id, max_tokens"
        )
    messages = row.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ConfigError(
            f'{where}: needs "messages": a non-empty list of '
            '{"role": "user", "content": "..."} objects'
        )
    for i, message in enumerate(messages):
        if not (
            isinstance(message, dict)
            and isinstance(message.get("role"), str)
            and isinstance(message.get("content"), str)
        ):
            raise ConfigError(
                f'{where}: messages[{i}] needs a string "role" and a string "content"'
            )
    answer = row.get("answer")
    if answer is not None and (isinstance(answer, bool) or not isinstance(answer, str | int)):
        raise ConfigError(f'{where}: "answer" must be a string or an integer, or left out')
    max_tokens = row.get("max_tokens", 256)
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise ConfigError(f'{where}: "max_tokens" must be a positive integer')
    raw_id = row.get("id")
    if raw_id is not None and (not isinstance(raw_id, str | int) or isinstance(raw_id, bool)):
        raise ConfigError(f'{where}: "id" must be a string or an integer')
    numeric = isinstance(answer, int) or (
        isinstance(answer, str)
        and bool(_STRICT.fullmatch(answer.strip()) or _GROUPED.fullmatch(answer.strip()))
    )
    return Item(
        id=str(raw_id) if raw_id is not None else _content_id(messages),
        suite=suite,
        messages=tuple(messages),
        answer=None if answer is None else str(answer),
        answer_kind="number" if numeric else "text",
        max_tokens=max_tokens,
        expected_output_tokens=min(max_tokens, 64),
    )


def load_jsonl_suite(path: str | Path) -> list[Item]:
    """Read a user suite: one JSON object a line, ``messages`` and optional ``answer``/``id``/
    ``max_tokens``. Blank lines are skipped; a duplicate id is an error naming both lines."""
    return _jsonl_suite(path)[0]


def _jsonl_suite(path: str | Path) -> tuple[list[Item], dict[str, int]]:
    """The items of a user suite and the line of each id."""
    p = Path(path)
    try:
        lines = p.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ConfigError(f"{p}: cannot read the suite file: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{p}: not a UTF-8 text file ({exc.reason})") from exc
    items: list[Item] = []
    seen: dict[str, int] = {}
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{p}:{number}"
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ConfigError(
                f"{where}: not valid JSON ({exc.msg} at column {exc.colno}); "
                "write one JSON object per line"
            ) from None
        item = _jsonl_item(row, where, p.name)
        if item.id in seen:
            raise ConfigError(
                f"{where}: id {item.id!r} already used on line {seen[item.id]}; "
                'give each row a distinct "id" (or distinct messages)'
            )
        seen[item.id] = number
        items.append(item)
    if not items:
        raise ConfigError(f'{p}: no rows; write one JSON object per line with "messages"')
    return items, seen


def load_suites(spec: str | Sequence[str], *, n: int, seed: int = 0) -> list[Item]:
    """Return the items of a comma-separated suite list: ``arith`` (``n`` items from ``seed``),
    ``tools`` (the built-in set) and paths to JSONL files, in the order given."""
    names = [s.strip() for s in (spec.split(",") if isinstance(spec, str) else spec) if s.strip()]
    if not names:
        raise ConfigError("no suite given; use arith, tools, or a path to a JSONL file")
    items: list[Item] = []
    origin: dict[str, str] = {}  # id -> where it comes from, for the error naming both
    for name in names:
        if name in ("arith", "tools"):
            found = arith_suite(n, seed=seed) if name == "arith" else tools_suite()
            where = {item.id: f"the built-in {name} suite" for item in found}
        elif name.endswith(".jsonl") or Path(name).exists():
            found, lines = _jsonl_suite(name)
            where = {ident: f"{name}:{line}" for ident, line in lines.items()}
        else:
            raise ConfigError(
                f"unknown suite {name!r}; use arith, tools, or a path to a .jsonl file"
            )
        for item in found:
            if item.id in origin:
                raise ConfigError(
                    f"{where[item.id]}: id {item.id!r} is already used by {origin[item.id]}; "
                    "give the rows distinct ids"
                )
            origin[item.id] = where[item.id]
        items.extend(found)
    return items

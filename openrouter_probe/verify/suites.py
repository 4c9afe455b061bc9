"""The prompts a precision check sends: ``arith`` and ``tools`` (generated from a seed: item ``i``
depends on the seed and ``i`` only, so a larger ``n`` extends a smaller run) and user JSONL files
(errors name ``file:line`` and the fix); ``docs/verify.md``, "Suites". ``extract_number`` and
``normalise_text`` turn an answer into what is compared.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from openrouter_probe.errors import ConfigError, OptionError

__all__ = [
    "ARITH_INSTRUCTION",
    "TOOLS",
    "Extracted",
    "Item",
    "arith_suite",
    "check_schema",
    "extract_number",
    "load_suites",
    "normalise_text",
    "tools_suite",
]

#: The strict answer format of the ``arith`` suite.
ARITH_INSTRUCTION = (
    "Answer with the number only: digits, with a leading minus sign if it is negative; "
    "no words, spaces, commas or units."
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
    # str seeds hash with sha512: stable across runs
    questions = [_arith_question(random.Random(f"arith/{seed}/{i}")) for i in range(n)]
    return [
        Item(
            id=f"arith/s{seed}/{i:05d}",
            suite="arith",
            messages=({"role": "user", "content": f"What is {question}? {ARITH_INSTRUCTION}"},),
            answer=str(value),
            answer_kind="number",
            max_tokens=256,
            expected_output_tokens=8,
        )
        for i, (question, value) in enumerate(questions)
    ]


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


def _object(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


_CODE = {"type": "string", "pattern": "^[A-Z]{3}$"}
#: The built-in tools, each with its JSON schema (Draft 2020-12), offered together on every item.
TOOLS: tuple[dict[str, Any], ...] = (
    _tool("get_weather", "Current weather for a city.", _object(
        {"city": {"type": "string", "minLength": 1},
         "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
        ["city", "unit"])),
    _tool("convert_currency", "Convert an amount between currencies (ISO 4217 codes).", _object(
        {"amount": {"type": "number", "minimum": 0}, "from_currency": _CODE,
         "to_currency": _CODE},
        ["amount", "from_currency", "to_currency"])),
    _tool("create_event", "Add an event to the user's calendar.", _object(
        {"title": {"type": "string", "minLength": 1, "maxLength": 100},
         "date": {"type": "string", "pattern": "^\\d{4}-\\d{2}-\\d{2}$"},
         "attendees": {"type": "array", "items": {"type": "string", "minLength": 1},
                       "maxItems": 20}},
        ["title", "date"])),
    _tool("search_docs", "Search the product documentation.", _object(
        {"query": {"type": "string", "minLength": 1},
         "max_results": {"type": "integer", "minimum": 1, "maximum": 20}},
        ["query", "max_results"])),
    _tool("set_timer", "Start a countdown timer.", _object(
        {"minutes": {"type": "integer", "minimum": 1, "maximum": 180},
         "label": {"type": "string", "minLength": 1}},
        ["minutes", "label"])),
    _tool("send_email", "Send a short email.", _object(
        {"to": {"type": "string", "pattern": "^[a-z.]+@[a-z]+\\.[a-z]{2,}$"},
         "subject": {"type": "string", "minLength": 1}},
        ["to", "subject"])),
)  # fmt: skip

_CITIES = ("Paris", "Austin", "Nairobi", "Osaka", "Lima", "Oslo", "Hanoi", "Perth", "Quito",
           "Tunis", "Porto", "Denver", "Dakar", "Seoul", "Cusco", "Bergen")  # fmt: skip
_CURRENCIES = ("EUR", "USD", "JPY", "GBP", "CHF", "CAD", "AUD", "SEK", "NOK", "INR")
_TOPICS = ("rate limits", "streaming", "API keys", "billing alerts", "webhooks", "tool calling",
           "prompt caching", "batch jobs", "error codes", "model routing")  # fmt: skip
_TITLES = ("Quarterly review", "Design sync", "Dentist", "Team lunch", "Budget planning",
           "Launch retro", "Hiring panel", "Board prep")  # fmt: skip
_PEOPLE = ("Ana", "Bo", "Chen", "Dita", "Emeka", "Femi", "Gus", "Hana")
_LABELS = ("tea", "pasta", "standup", "laundry", "stretch", "oven")
_NAMES = ("ana.lopez", "bo.kim", "chen.wu", "dita.rai", "emeka.obi")
_DOMAINS = ("example.com", "mail.org", "corp.net")
_SUBJECTS = ("Invoice 42", "Lunch on Friday", "Draft attached", "Travel plans", "Weekly report")
_QUESTIONS = (
    "Name the capital of {country} in one word.",
    "Give one synonym for the word '{word}'.",
    "Is {a} a prime number? Answer yes or no.",
    "Spell the word '{word}' backwards.",
    "How many letters are in the word '{word}'? Answer with the number only.",
)
_COUNTRIES = ("France", "Kenya", "Peru", "Japan", "Norway", "Chile", "Ghana", "Nepal")
_PLAIN_WORDS = ("happy", "quick", "bright", "calm", "brave", "gentle", "clever")


def _tool_case(rng: random.Random) -> tuple[str, str | None, dict[str, Any]]:
    """One prompt and the call a correct answer makes (``None``: no call)."""
    kind = rng.choice(("weather", "currency", "event", "docs", "timer", "email", "none", "none"))
    if kind == "weather":
        city, unit = rng.choice(_CITIES), rng.choice(("celsius", "fahrenheit"))
        prompt = rng.choice((
            f'What is the weather in "{city}" right now, in {unit}?',
            f'Check the current weather for "{city}" and give it in {unit}.',
        ))  # fmt: skip
        return prompt, "get_weather", {"city": city, "unit": unit}
    if kind == "currency":
        amount = rng.choice((rng.randint(1, 5000), round(rng.uniform(1, 999), 2)))
        src, dst = rng.sample(_CURRENCIES, 2)
        prompt = rng.choice((
            f"Convert {amount} {src} to {dst}.",
            f"Please convert {amount} {src} into {dst} at today's currency rate.",
        ))  # fmt: skip
        return (
            prompt,
            "convert_currency",
            {"amount": amount, "from_currency": src, "to_currency": dst},
        )
    if kind == "event":
        title, people = rng.choice(_TITLES), rng.sample(_PEOPLE, rng.randint(0, 3))
        date = f"2027-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
        with_people = " with " + " and ".join(f'"{p}"' for p in people) if people else ""
        prompt = f'Create an event "{title}" in my calendar on {date}{with_people}.'
        expected: dict[str, Any] = {"title": title, "date": date}
        if people:
            expected["attendees"] = people
        return prompt, "create_event", expected
    if kind == "docs":
        topic, k = rng.choice(_TOPICS), rng.randint(1, 20)
        prompt = f'Search the docs for "{topic}" and return the top {k} results.'
        return prompt, "search_docs", {"query": topic, "max_results": k}
    if kind == "timer":
        minutes, label = rng.randint(1, 180), rng.choice(_LABELS)
        prompt = f'Start a timer for {minutes} minutes labelled "{label}".'
        return prompt, "set_timer", {"minutes": minutes, "label": label}
    if kind == "email":
        to = f"{rng.choice(_NAMES)}@{rng.choice(_DOMAINS)}"
        subject = rng.choice(_SUBJECTS)
        prompt = f'Send an email to {to} with the subject "{subject}".'
        return prompt, "send_email", {"to": to, "subject": subject}
    template = rng.choice((*_QUESTIONS, "arith"))
    if template == "arith":
        a, b = rng.randint(10, 999), rng.randint(10, 999)
        return f"What is {a} + {b}? Answer with the number only.", None, {}
    prompt = template.format(
        country=rng.choice(_COUNTRIES), word=rng.choice(_PLAIN_WORDS), a=rng.randint(10, 999)
    )
    return prompt, None, {}


def tools_suite(n: int = 200, *, seed: int = 0) -> list[Item]:
    """Return ``n`` tool-use prompts from ``seed``, each offered the six built-in ``TOOLS``.

    Three in four ask for one tool's call with argument values the prompt states (free text in
    double quotes, codes, dates, numbers, enum words); one in four needs no tool (a question, a
    sum). Item ``i`` depends on ``seed`` and ``i`` only (ids ``tools/s<seed>/<i>``), so a larger
    ``n`` extends a smaller run. Every expected call is valid under its tool's schema.
    """
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    cases = [_tool_case(random.Random(f"tools/{seed}/{i}")) for i in range(n)]
    return [
        Item(
            id=f"tools/s{seed}/{i:05d}",
            suite="tools",
            messages=({"role": "user", "content": prompt},),
            answer_kind="tool",
            tools=TOOLS,
            expect_tool=tool,
            expect_arguments=arguments,
            max_tokens=512,
            expected_output_tokens=30,
        )
        for i, (prompt, tool, arguments) in enumerate(cases)
    ]


@lru_cache(maxsize=64)
def _validator(schema_json: str) -> Any:
    import jsonschema

    schema = json.loads(schema_json)
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def check_schema(value: Any, schema: Mapping[str, Any]) -> list[str]:
    """Return what is wrong with ``value`` under the JSON ``schema`` (empty: valid), one line per
    fault, as ``jsonschema``'s Draft 2020-12 validator finds them (path: message)."""
    validator = _validator(json.dumps(schema, sort_keys=True))
    return [
        f"$.{'.'.join(str(p) for p in error.absolute_path)}: {error.message}".replace("$.:", "$:")
        for error in sorted(validator.iter_errors(value), key=lambda e: list(e.absolute_path))
    ]


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


def _jsonl_suite(path: str | Path) -> tuple[list[Item], dict[str, int]]:
    """The items of a user suite and the line of each id: one JSON object a line, ``messages``
    and optional ``answer``/``id``/``max_tokens``. Blank lines are skipped; a duplicate id is an
    error naming both lines."""
    p = Path(path)
    try:
        # utf-8-sig: a byte order mark (written by some Windows editors) is skipped, as the
        # prompts reader does
        lines = p.read_text(encoding="utf-8-sig").splitlines()
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
    """Return the items of a comma-separated suite list: ``arith`` and ``tools`` (``n`` items each
    from ``seed``) and paths to JSONL files, in the order given."""
    names = [s.strip() for s in (spec.split(",") if isinstance(spec, str) else spec) if s.strip()]
    if not names:
        raise ConfigError("no suite given; use arith, tools, or a path to a JSONL file")
    items: list[Item] = []
    origin: dict[str, str] = {}  # id -> where it comes from, for the error naming both
    for name in names:
        if name in ("arith", "tools"):
            found = arith_suite(n, seed=seed) if name == "arith" else tools_suite(n, seed=seed)
            where = {item.id: f"the built-in {name} suite" for item in found}
        elif name.endswith(".jsonl") or Path(name).exists():
            found, lines = _jsonl_suite(name)
            where = {ident: f"{name}:{line}" for ident, line in lines.items()}
        else:
            raise OptionError(
                "{suite=}: no such suite; use arith, tools, or a path to a .jsonl file", suite=name
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

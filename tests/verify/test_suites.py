"""Suites of the precision check: arith from a seed, the tools set and its checker, user JSONL."""

from __future__ import annotations

import json
import operator
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from openrouter_probe.errors import ConfigError
from openrouter_probe.verify.suites import (
    ARITH_INSTRUCTION,
    TOOLS,
    Extracted,
    arith_suite,
    check_schema,
    extract_number,
    load_suites,
    normalise_text,
    tools_suite,
)

_OPS = {"*": operator.mul, "+": operator.add, "-": operator.sub}


def test_arith_is_pinned_to_its_seed() -> None:
    # golden: a change here changes every stored run's items (ids are reused on resume)
    items = arith_suite(3)
    assert [i.id for i in items] == ["arith/s0/00000", "arith/s0/00001", "arith/s0/00002"]
    assert items[0].messages == (
        {"role": "user", "content": f"What is 11154489 - 36043281? {ARITH_INSTRUCTION}"},
    )
    assert [i.answer for i in items] == ["-24888792", "-66347567", "31572506"]
    assert items[2].messages[0]["content"].startswith("What is 4151 * 7606?")


def test_arith_is_deterministic_prefix_stable_and_exact() -> None:
    big = arith_suite(300, seed=7)
    assert arith_suite(40, seed=7) == big[:40]
    assert arith_suite(40, seed=8) != big[:40]
    kinds = set()
    for item in big:
        m = re.match(r"What is (\d+) ([*+-]) (\d+)\?", item.messages[0]["content"])
        assert m is not None
        a, op, b = int(m[1]), m[2], int(m[3])
        kinds.add(op)
        assert item.answer == str(_OPS[op](a, b))
        assert item.answer_kind == "number" and item.known
    assert kinds == {"*", "+", "-"}
    assert any(item.answer.startswith("-") for item in big if item.answer)
    assert len({i.id for i in big}) == 300


@pytest.mark.parametrize(
    ("text", "value", "strict"),
    [
        ("31572506", "31572506", True),
        ("  -24888792\n", "-24888792", True),
        ("**42**", "42", True),
        ("`42`.", "42", True),
        ("−17", "-17", True),  # unicode minus
        ("1,234,567", "1234567", False),  # separators break the strict format but not the value
        ("The answer is 2,493,522.", "2493522", False),
        ("4151 * 7606 = 31572506", "31572506", False),
        ("I cannot compute that.", None, False),
        (None, None, False),
    ],
)
def test_extract_number(text: str | None, value: str | None, strict: bool) -> None:
    assert extract_number(text) == Extracted(value, strict)


def test_normalise_text() -> None:
    assert normalise_text("  Paris.\n") == "paris"
    assert normalise_text("New   York") == normalise_text("new york")
    assert normalise_text(None) == ""


def test_tools_suite_is_several_hundred_deterministic_prompts() -> None:
    items = tools_suite(400, seed=3)
    assert len(items) == 400 and len({i.id for i in items}) == 400
    assert items[:50] == tools_suite(50, seed=3)  # a prefix: a larger n extends a smaller run
    assert items[0].id == "tools/s3/00000"
    counts = Counter(i.expect_tool for i in items)
    assert set(counts) == {
        "get_weather", "convert_currency", "create_event", "search_docs", "set_timer",
        "send_email", None,
    }  # fmt: skip
    assert 70 <= counts[None] <= 130  # about one in four needs no tool
    assert all(i.known and i.answer_kind == "tool" and i.tools == TOOLS for i in items)
    # every expected call is valid under its tool's schema, and carries every required key
    for item in items:
        if item.expect_tool is None:
            continue
        schema = next(
            t["function"]["parameters"] for t in TOOLS if t["function"]["name"] == item.expect_tool
        )
        assert set(schema["required"]) <= set(item.expect_arguments), item.id
        assert check_schema(item.expect_arguments, schema) == [], item.id


def test_tools_suite_prompts_say_the_values_they_expect() -> None:
    items = {i.id: i for i in tools_suite(30)}
    item = items["tools/s0/00000"]
    assert (
        item.messages[0]["content"]
        == "Please convert 942.52 SEK into CAD at today's currency rate."
    )
    assert item.expect_tool == "convert_currency"
    assert item.expect_arguments == {"amount": 942.52, "from_currency": "SEK", "to_currency": "CAD"}


WEATHER, CONVERT, EVENT, SEARCH = (TOOLS[i]["function"]["parameters"] for i in range(4))


@pytest.mark.parametrize(
    ("value", "schema", "errors"),
    [
        ({"city": "Paris", "unit": "celsius"}, WEATHER, []),
        ({"city": "Paris"}, WEATHER, ["$: 'unit' is a required property"]),
        ({"city": "Paris", "unit": "kelvin"}, WEATHER,
         ["$.unit: 'kelvin' is not one of ['celsius', 'fahrenheit']"]),
        ({"city": "", "unit": "celsius", "x": 1}, WEATHER,
         ["$: Additional properties are not allowed ('x' was unexpected)",
          "$.city: '' should be non-empty"]),
        ({"amount": 250, "from_currency": "EUR", "to_currency": "JPY"}, CONVERT, []),
        ({"amount": -1, "from_currency": "eur", "to_currency": "JPY"}, CONVERT,
         ["$.amount: -1 is less than the minimum of 0",
          "$.from_currency: 'eur' does not match '^[A-Z]{3}$'"]),
        ({"amount": True, "from_currency": "EUR", "to_currency": "JPY"}, CONVERT,
         ["$.amount: True is not of type 'number'"]),
        ({"title": "Review", "date": "2026-12-15", "attendees": ["Ana", 3]}, EVENT,
         ["$.attendees.1: 3 is not of type 'string'"]),
        ({"query": "rate limits", "max_results": 3.0}, SEARCH, []),  # 3.0 is an integer
        ({"query": "rate limits", "max_results": 21}, SEARCH,
         ["$.max_results: 21 is greater than the maximum of 20"]),
        ("not an object", SEARCH, ["$: 'not an object' is not of type 'object'"]),
    ],
)  # fmt: skip
def test_check_schema_is_jsonschema_draft_2020_12(
    value: Any, schema: dict[str, Any], errors: list[str]
) -> None:
    assert check_schema(value, schema) == errors


def _write(tmp_path: Path, *lines: str) -> Path:
    path = tmp_path / "mine.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_jsonl_suite_reads_rows(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        json.dumps({"messages": [{"role": "user", "content": "2+2?"}], "answer": 4}),
        "",
        json.dumps(
            {"id": "cap", "messages": [{"role": "user", "content": "Capital of France?"}],
             "answer": "Paris", "max_tokens": 32}
        ),
        json.dumps({"messages": [{"role": "user", "content": "Write a haiku."}]}),
        json.dumps({"messages": [{"role": "user", "content": "10^6?"}], "answer": "1,000,000"}),
    )  # fmt: skip
    items = load_suites([str(path)], n=0)
    assert [i.answer for i in items] == ["4", "Paris", None, "1,000,000"]
    assert [i.answer_kind for i in items] == ["number", "text", "text", "number"]
    assert items[0].id.startswith("sha256:") and len(items[0].id) == 7 + 16
    assert items[1].id == "cap" and items[1].max_tokens == 32
    assert [i.known for i in items] == [True, True, False, True]
    assert {i.suite for i in items} == {"mine.jsonl"}


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (['{"messages": [}'], r"mine.jsonl:1: not valid JSON .*write one JSON object per line"),
        (['{"prompt": "hi"}'], r"mine.jsonl:1: unknown key\(s\) \['prompt'\]; a row has messages"),
        (['{"messages": []}'], r"mine.jsonl:1: needs \"messages\": a non-empty list"),
        (['{"messages": [{"role": "user"}]}'], r"mine.jsonl:1: messages\[0\] needs a string"),
        (['{"messages": [{"role": "user", "content": "a"}], "answer": [1]}'],
         r"mine.jsonl:1: \"answer\" must be a string or an integer"),
        (['{"messages": [{"role": "user", "content": "a"}], "max_tokens": 0}'],
         r"mine.jsonl:1: \"max_tokens\" must be a positive integer"),
        (["", '{"id": "a", "messages": [{"role": "user", "content": "a"}]}',
          '{"id": "a", "messages": [{"role": "user", "content": "b"}]}'],
         r"mine.jsonl:3: id 'a' already used on line 2; give each row a distinct \"id\""),
        (["[1, 2]"], r"mine.jsonl:1: expected a JSON object"),
        ([""], r"mine.jsonl: no rows"),
    ],
)  # fmt: skip
def test_jsonl_suite_errors_name_file_line_and_fix(
    tmp_path: Path, lines: list[str], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        load_suites([str(_write(tmp_path, *lines))], n=0)


def test_jsonl_suite_unreadable(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read the suite file"):
        load_suites([str(tmp_path / "absent.jsonl")], n=0)
    binary = tmp_path / "bin.jsonl"
    binary.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(ConfigError, match="not a UTF-8 text file"):
        load_suites([str(binary)], n=0)


def test_load_suites(tmp_path: Path) -> None:
    path = _write(tmp_path, json.dumps({"messages": [{"role": "user", "content": "hi"}]}))
    items = load_suites(f"arith, tools,{path}", n=5, seed=3)
    assert [i.suite for i in items] == ["arith"] * 5 + ["tools"] * 5 + ["mine.jsonl"]
    with pytest.raises(ConfigError, match="suite='arithmetic': no such suite; use arith, tools"):
        load_suites("arithmetic", n=5)
    with pytest.raises(ConfigError, match="no suite given"):
        load_suites(" , ", n=5)
    ident = items[-1].id
    # issue 18: a duplicate id across suites names both places, as one within a file does
    with pytest.raises(ConfigError) as info:
        load_suites([str(path), str(path)], n=0)
    assert str(info.value) == (
        f"{path}:1: id {ident!r} is already used by {path}:1; give the rows distinct ids"
    )
    other = tmp_path / "other.jsonl"
    other.write_text(
        "\n" + json.dumps({"id": "arith/s0/00000", "messages": [{"role": "user", "content": "x"}]})
    )
    with pytest.raises(ConfigError) as info:
        load_suites(f"arith,{other}", n=3)
    assert str(info.value) == (
        f"{other}:2: id 'arith/s0/00000' is already used by the built-in arith suite; "
        "give the rows distinct ids"
    )


def test_jsonl_suite_skips_a_byte_order_mark(tmp_path: Path) -> None:
    """A suite saved by an editor that writes a UTF-8 BOM reads as the same items (issue 18)."""
    row = '{"id": "q1", "messages": [{"role": "user", "content": "2+2?"}], "answer": "4"}\n'
    (tmp_path / "plain").mkdir()
    (tmp_path / "marked").mkdir()
    plain, marked = tmp_path / "plain" / "s.jsonl", tmp_path / "marked" / "s.jsonl"
    plain.write_text(row, encoding="utf-8")
    marked.write_bytes(b"\xef\xbb\xbf" + row.encode())
    assert load_suites([str(marked)], n=0) == load_suites([str(plain)], n=0)
    assert [(item.id, item.answer) for item in load_suites([str(marked)], n=0)] == [("q1", "4")]

"""Prompts JSONL (every bad line named with file:line), stable ids, shards, and the output file."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pytest

from openrouter_probe.errors import ConfigError
from openrouter_probe.generation.prompts import parse_shard, read_prompts, row_id, shard_of
from openrouter_probe.generation.shapes import FieldMap
from openrouter_probe.run.books.output import OutputLog, iter_records, load_resume_state
from openrouter_probe.run.money.spend import Prices, SpendCap


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "p.jsonl"
    path.write_text(text, encoding="utf-8")
    return path


def test_rows_messages_prompt_ids_datasets_params(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        '{"id": "a", "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]}\n'
        "\n"
        '{"prompt": "What is 37 * 41?", "dataset": "math", "temperature": 0, "max_tokens": 50}\n'
        '{"id": 7, "prompt": "x"}\n',
    )
    rows = read_prompts(path, fields=FieldMap(params=("temperature", "max_tokens")))
    a, b, c = rows.rows
    assert a.id == "a" and a.dataset == "default" and len(a.messages) == 2 and a.line == 1
    assert b.messages == [{"role": "user", "content": "What is 37 * 41?"}]
    assert b.dataset == "math" and b.params == {"temperature": 0, "max_tokens": 50} and b.line == 3
    assert b.id == row_id(b.messages, "math", {"temperature": 0, "max_tokens": 50})
    unnamed = read_prompts(path).rows[1]  # the columns not sent: the same id (resume finds it)
    assert unnamed.params == {} and unnamed.id == b.id
    assert unnamed.extra == {"meta": {"temperature": 0, "max_tokens": 50}}
    assert b.id.startswith("h-") and len(b.id) == 26
    assert c.id == "7"
    assert rows.datasets == ["default", "math"]


def test_content_ids_are_stable_and_content_sensitive() -> None:
    m = [{"role": "user", "content": "hi"}]
    assert row_id(m, "d", {}) == row_id([{"content": "hi", "role": "user"}], "d", {})
    assert (
        row_id(m, "d", {}) == "h-5c2c365f3ed891eb6658c16d"
    )  # the same id in every version: resume depends on it
    assert row_id(m, "d", {}) != row_id(m, "e", {})
    assert row_id(m, "d", {}) != row_id(m, "d", {"temperature": 1})


def test_every_bad_line_is_named(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        '{"prompt": "ok"}\n'
        "{not json\n"
        "[1, 2]\n"
        '{"messages": []}\n'
        '{"messages": [{"role": "robot", "content": "x"}]}\n'
        '{"prompt": "x", "messages": [{"role": "user", "content": "y"}]}\n'
        '{"prompt": "x", "model": "openai/gpt-4o"}\n'
        '{"prompt": "z", "max_tokens": 0}\n'
        '{"id": true, "prompt": "x"}\n'
        '{"dataset": ""}\n',
    )
    with pytest.raises(ConfigError) as info:
        read_prompts(path, strict=True)
    text = str(info.value)
    assert f"{path}: 6 bad line(s)" in text  # strict: every row that cannot be sent
    bad = [
        (2, "not JSON"),
        (3, "a row is a JSON object, not a list"),
        (9, "`id` (the id) must be a string or an integer"),
        (10, "has none of `messages`, `conversations`, `conversation`, `items`, `prompt`"),
    ]
    for line, why in bad:
        assert f"{path}:{line}: {why}" in text, (line, text)
    assert f"{path}:4: `messages` is an empty list" in text  # not valid conversations
    assert f"{path}:5: turn 0 has role 'robot'" in text
    for line in (1, 6, 7, 8):  # 6 is UltraChat's, 7's model and 8's max_tokens data
        assert f"{path}:{line}:" not in text
    rows = read_prompts(path)  # not strict: each bad line skipped and named, the rest read
    assert [r.line for r in rows] == [1, 6, 7, 8]
    assert [r.extra and r.extra.get("meta") for r in rows][2:] == [
        {"model": "openai/gpt-4o"},
        {"max_tokens": 0},
    ]
    for line, why in bad:
        assert any(s.startswith(f"{path}:{line}: {why}") for s in rows.skipped), (line, why)
    assert len(rows.skipped) == 6
    named = read_prompts(path, fields=FieldMap(params=("max_tokens",)))
    assert f"{path}:8: max_tokens=0: give a whole number >= 1" in named.skipped


def test_rows_that_are_not_valid_conversations_are_skipped_with_line_and_reason(
    tmp_path: Path,
) -> None:
    """Issue 24: SpecForge's conversation_validation.py, row by row; the rest are sent."""
    turns = [
        [],
        [{"role": "robot", "content": "x"}],
        [{"role": "assistant", "content": "hi"}, {"role": "user", "content": "q"}],
        [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}],
        [{"role": "user", "content": "  "}],
        [{"role": "user", "content": "a"}, {"role": "system", "content": "late"}],
        [{"role": "system", "content": "s"}],
        [{"role": "user", "content": "q"}, {"role": "tool", "content": "42"}],
    ]
    lines = [json.dumps({"id": f"bad{i}", "messages": t}) for i, t in enumerate(turns)]
    lines.append(json.dumps({"id": "good", "messages": [{"role": "user", "content": "q"}]}))
    rows = read_prompts(_write(tmp_path, "\n".join(lines) + "\n"))
    assert [r.id for r in rows] == ["good"]
    where = str(tmp_path / "p.jsonl")
    assert rows.skipped == [
        f"{where}:1: `messages` is an empty list",
        f"{where}:2: turn 0 has role 'robot'; the roles read are assistant, bard, bing, chatgpt, "
        "developer, function_call, gpt, human, model, observation, system, tool, user",
        f"{where}:3: turn 0 is assistant where user comes (user and assistant take turns)",
        f"{where}:4: turn 1 is user where assistant comes (user and assistant take turns)",
        f"{where}:5: turn 0 (user) has empty content",
        f"{where}:6: turn 1 is system after the first user turn (system turns come first)",
        f"{where}:7: has no user turn",
        f"{where}:8: turn 1 is a tool result that answers no tool call",
    ]


def test_many_bad_lines_are_summarized(tmp_path: Path) -> None:
    path = _write(tmp_path, "nope\n" * 25)
    with pytest.raises(ConfigError, match=r"25 bad line\(s\)[\s\S]*\.\.\. and 15 more bad lines"):
        read_prompts(path)


def test_not_utf8_and_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "bin.jsonl"
    path.write_bytes(b'{"prompt": "ok"}\n\xff\xfe\n')
    with pytest.raises(ConfigError, match=r"bin.jsonl:2: not UTF-8"):
        read_prompts(path, strict=True)
    assert read_prompts(path).skipped == [f"{path}:2: not UTF-8 text (invalid start byte)"]
    with pytest.raises(ConfigError, match="cannot read the prompts file"):
        read_prompts(tmp_path / "missing.jsonl")


def test_duplicates_are_listed_with_both_lines(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        '{"id": "x", "prompt": "a"}\n{"prompt": "b"}\n{"id": "x", "prompt": "c"}\n{"prompt": "b"}\n',
    )
    rows = read_prompts(path)
    assert [r.line for r in rows] == [1, 2]
    assert rows.duplicates == [("x", 1, 3), (rows.rows[1].id, 2, 4)]


def test_shards_split_rows_by_a_stable_hash(tmp_path: Path) -> None:
    path = _write(
        tmp_path, "".join(json.dumps({"id": f"r{i}", "prompt": "p"}) + "\n" for i in range(200))
    )
    parts = [read_prompts(path, shard=(i, 3)) for i in range(3)]
    ids = [r.id for part in parts for r in part]
    assert sorted(ids) == sorted(f"r{i}" for i in range(200))  # a partition: each row in one shard
    assert all(40 < len(part) < 95 for part in parts)
    assert shard_of("r0", 3) == shard_of("r0", 3)
    assert parse_shard("1/3") == (1, 3)
    for bad in ("3/3", "x", "1/0", "-1/2"):
        with pytest.raises(ConfigError, match="shard="):
            parse_shard(bad)


def test_spend_cap_arithmetic() -> None:
    prices = Prices(Decimal("0.000001"), Decimal("0.000003"), Decimal("0.0001"))
    worst = prices.worst_case_usd(prompt_tokens=1000, max_tokens=1000)
    assert worst == Decimal("0.0041")
    cap = SpendCap(Decimal("0.01"), spent_usd=Decimal("0.001"))
    assert cap.try_reserve(worst) and cap.try_reserve(worst)
    assert not cap.try_reserve(worst)  # 0.001 + 0.0082 + 0.0041 > 0.01
    cap.settle(worst, Decimal("0.002"))
    assert cap.spent_usd == Decimal("0.003") and cap.reserved_usd == worst
    assert cap.try_reserve(worst) is False  # 0.003 + 0.0041 + 0.0041 > 0.01
    cap.settle(worst, None)
    assert cap.try_reserve(worst) and cap.in_flight == 1
    assert cap.peak_committed_usd <= Decimal("0.01") and cap.overruns == 0
    assert SpendCap(None).try_reserve(Decimal(10**9))


def test_output_resume_state_and_torn_tail(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    with OutputLog(out) as log:
        log.write(
            {
                "id": "a",
                "dataset": "d",
                "status": "ok",
                "cost_usd": 0.25,
                "usage": {"completion_tokens": 10},
            }
        )
        log.write(
            {
                "id": "b",
                "dataset": "d",
                "status": "failed",
                "cost_usd": None,
                "failed_attempts_cost_usd": 0.125,
            }
        )
        log.write({"id": "c", "dataset": "d", "status": "cancelled", "possibly_billed_usd": 0.5})
        log.write(
            {
                "id": "e",
                "dataset": "x",
                "status": "truncated",
                "cost_usd": 0.0625,
                "usage": {"completion_tokens": 7},
            }
        )
    with out.open("a") as handle:
        handle.write('{"id": "f", "status": "ok", "cost')  # a crash mid-write
    state = load_resume_state(out)
    assert state.torn == b'{"id": "f", "status": "ok", "cost'
    assert out.read_bytes().endswith(b"}\n")
    assert state.finished == {"a", "b", "e"} and state.failed == {"b"}
    # no journal: every record's money is unknown, what each states only its floor
    stated = {(u.row_id, u.key.rsplit("|", 1)[1]): u.recorded_usd for u in state.unjournaled}
    assert stated == {
        ("a", "answer"): Decimal("0.25"),
        ("b", "rest"): Decimal("0.125"),
        ("c", "rest"): Decimal("0.5"),
        ("e", "answer"): Decimal("0.0625"),
    }
    assert state.output_tokens == {"d": 10, "x": 7}
    redo = load_resume_state(out, redo_failed=True)
    assert redo.finished == {"a", "e"}


def test_a_bad_output_line_is_named(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    out.write_text('{"id": "a", "status": "ok"}\nnot json\n{"id": "b", "status": "ok"}\n')
    with pytest.raises(ConfigError, match=r"out.jsonl:2: not a generator output line"):
        list(iter_records(out))
    out.write_text('{"id": "a"}\n')
    with pytest.raises(ConfigError, match=r"out.jsonl:1: not a generator output record"):
        list(iter_records(out))


def test_a_byte_order_mark_is_skipped_on_the_first_line_only(tmp_path: Path) -> None:
    """Issue 18: a file saved with a UTF-8 BOM was rejected at line 1. The row ids are the same
    as without the mark (a content id never sees it); a mark inside the file is still an error."""
    text = '{"prompt": "a"}\n{"id": 7, "prompt": "b"}\n'
    plain = read_prompts(_write(tmp_path, text))
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + text.encode())
    marked = read_prompts(path)
    assert [r.id for r in marked] == [r.id for r in plain] == [plain.rows[0].id, "7"]
    assert marked.rows[0].messages == [{"role": "user", "content": "a"}]
    path.write_bytes(text.encode() + b"\xef\xbb\xbf" + b'{"prompt": "c"}\n')
    with pytest.raises(ConfigError, match=r"bom.jsonl:3: not JSON"):
        read_prompts(path, strict=True)

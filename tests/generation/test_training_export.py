"""The export as SpecForge and speculators read it and its edges.

Hand-written output records of both shapes (the answer appended, and every assistant turn
regenerated, ``turns``) go through ``export``; each format is checked against the consumers'
contract (``tests/_specforge.py``, read from their code at a named commit) and with exact values.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from openrouter_probe.cli import cli
from openrouter_probe.errors import ConfigError
from openrouter_probe.fake import serve
from openrouter_probe.generation import generate
from openrouter_probe.generation.conversation import split_think
from openrouter_probe.generation.export import EXPORT_FORMATS, export
from tests._generate import POLICY, no_sleep, records
from tests._specforge import (
    assert_specforge_row,
    expand_events,
    speculators_turns,
)
from tests.conftest import ROOT

USAGE = {"prompt_tokens": 20, "completion_tokens": 100, "completion_tokens_details": {
    "reasoning_tokens": 80}}  # fmt: skip


def _record(ident: str, messages: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    base = {
        "id": ident,
        "dataset": "d",
        "status": "ok",
        "provider": "Chutes",
        "model": "moonshotai/kimi-k2.5-0127",
        "finish_reason": "stop",
        "content": "the answer",
        "reasoning": "the reasoning",
        "usage": USAGE,
        "cost_usd": 0.0002,
        "generation_id": f"gen-{ident}",
        "messages": messages,
    }
    return {**base, **fields}


def _write(path: Path, *rows: dict[str, Any]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


USER = {"role": "user", "content": "first question"}
COPIED = {"role": "assistant", "content": "an answer from the prompts file"}
USER2 = {"role": "user", "content": "second question"}
#: A row whose every assistant turn the model wrote (proposed ``generate --turns all`` record).
REGENERATED = _record(
    "multi",
    [{"role": "system", "content": "Be brief."}, USER, COPIED, USER2],
    content="second answer",
    reasoning="second reasoning",
    turns=[
        {"index": 2, "content": "first answer", "reasoning": "first reasoning",
         "finish_reason": "stop", "usage": USAGE, "cost_usd": 0.0001, "provider": "Chutes",
         "model": "moonshotai/kimi-k2.5-0127", "generation_id": "gen-1", "attempts": 1},
        {"index": 4, "content": "second answer", "reasoning": "second reasoning",
         "finish_reason": "stop", "usage": USAGE, "cost_usd": 0.0001, "provider": "DeepInfra",
         "model": "moonshotai/kimi-k2.5-0127", "generation_id": "gen-2", "attempts": 2},
    ],
)  # fmt: skip


# -- the SpecForge shape --------------------------------------------------------------------------


def test_a_single_turn_row_is_specforges_regenerated_shape(tmp_path: Path) -> None:
    out = _write(tmp_path / "out.jsonl", _record(7, [{"role": "user", "content": "q"}]))
    summary = export([out], fmt="specforge", output=tmp_path / "sf.jsonl")
    (row,) = _lines(tmp_path / "sf.jsonl")
    assert row == {
        "id": "7",
        "status": "success",
        "conversations": [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": "the answer", "reasoning_content": "the reasoning",
             "generated": True},
        ],
        "preserve_thinking": True,
    }  # fmt: skip
    assert assert_specforge_row(row, expect_reasoning=True) == 1
    assert [e["id"] for e in expand_events(row)] == ["7#turn0"]
    assert (summary.read, summary.written, summary.left_out) == (1, 1, {})


def test_every_regenerated_turn_is_model_written_with_its_reasoning(tmp_path: Path) -> None:
    out = _write(tmp_path / "out.jsonl", REGENERATED)
    export([out], fmt="specforge", output=tmp_path / "sf.jsonl", only_generated=True)
    (row,) = _lines(tmp_path / "sf.jsonl")
    assert row["conversations"] == [
        {"role": "system", "content": "Be brief."},
        USER,
        {"role": "assistant", "content": "first answer", "reasoning_content": "first reasoning",
         "generated": True},
        USER2,
        {"role": "assistant", "content": "second answer", "reasoning_content": "second reasoning",
         "generated": True},
    ]  # fmt: skip
    assert assert_specforge_row(row, expect_reasoning=True) == 2
    events = expand_events(row)
    assert [e["id"] for e in events] == ["multi#turn0", "multi#turn1"]
    # The second event's history carries the first answer without its reasoning, as SpecForge's
    # regeneration sent it.
    assert events[1]["conversations"][2] == {
        "role": "assistant", "content": "first answer", "generated": True}  # fmt: skip


def test_jsonl_keeps_the_per_turn_usage_cost_provider_and_generation(tmp_path: Path) -> None:
    out = _write(tmp_path / "out.jsonl", REGENERATED)
    export([out], fmt="jsonl", output=tmp_path / "t.jsonl")
    (row,) = _lines(tmp_path / "t.jsonl")
    assert "messages" not in row  # SpecForge would pass it to the chat template as a 2nd `messages`
    assert [m["role"] for m in row["conversations"]] == [
        "system", "user", "assistant", "user", "assistant"]  # fmt: skip
    assert [(t["index"], t["provider"], t["generation_id"], t["cost_usd"], t["attempts"])
            for t in row["turns"]] == [(2, "Chutes", "gen-1", 0.0001, 1),
                                       (4, "DeepInfra", "gen-2", 0.0001, 2)]  # fmt: skip
    assert row["turns"][0]["usage"] == USAGE and "content" not in row["turns"][0]


def test_a_turn_that_points_nowhere_is_named(tmp_path: Path) -> None:
    bad = {**REGENERATED, "turns": [{**REGENERATED["turns"][0], "index": 1}]}
    out = _write(tmp_path / "out.jsonl", bad)
    with pytest.raises(ConfigError, match=r"row 'multi': `turns`\[0\].index 1 is not an assistant"):
        export([out], fmt="sharegpt", output=tmp_path / "t.jsonl")


def test_prompt_file_turns_are_marked_and_only_generated_drops_them(tmp_path: Path) -> None:
    out = _write(tmp_path / "out.jsonl", _record("m", [USER, COPIED, USER2]),
                 _record("s", [USER]))  # fmt: skip
    summary = export([out], fmt="specforge", output=tmp_path / "sf.jsonl")
    rows = {r["id"]: r for r in _lines(tmp_path / "sf.jsonl")}
    assert rows["m"]["conversations"][1] == {
        "role": "assistant", "content": COPIED["content"], "reasoning_content": None,
        "generated": False}  # fmt: skip
    assert rows["m"]["conversations"][3]["generated"] is True
    assert summary.copied == 1 and summary.written == 2
    assert '1 rows hold assistant turns from the prompts file, marked "generated"' in (
        summary.render())  # fmt: skip
    only = export([out], fmt="specforge", output=tmp_path / "sf.jsonl", only_generated=True)
    assert [r["id"] for r in _lines(tmp_path / "sf.jsonl")] == ["s"]
    assert only.left_out == {"copied_turns": 1} and only.left_out_ids == {"copied_turns": ("m",)}
    assert "left out 1: holds assistant turns from the prompts file (only_generated=True): m" in (
        only.render())  # fmt: skip


def test_require_reasoning_leaves_out_rows_with_a_turn_without_it(tmp_path: Path) -> None:
    out = _write(
        tmp_path / "out.jsonl",
        _record("r", [USER]),
        _record("n", [USER], reasoning=None),
        _record("m", [USER, COPIED, USER2]),
    )
    summary = export([out], fmt="specforge", output=tmp_path / "sf.jsonl")
    assert summary.written == 3 and summary.unreasoned == 1
    assert "1 rows have a model-written turn without reasoning (require_reasoning=True" in (
        summary.render())  # fmt: skip
    rows = {r["id"]: r for r in _lines(tmp_path / "sf.jsonl")}
    assert "preserve_thinking" not in rows["n"] and rows["r"]["preserve_thinking"] is True
    strict = export([out], fmt="specforge", output=tmp_path / "sf.jsonl", require_reasoning=True)
    assert strict.left_out == {"no_reasoning": 2}
    (kept,) = _lines(tmp_path / "sf.jsonl")
    assert kept["id"] == "r" and assert_specforge_row(kept, expect_reasoning=True) == 1


def test_preserve_thinking_can_be_turned_off(tmp_path: Path) -> None:
    out = _write(tmp_path / "out.jsonl", _record("r", [USER]))
    export([out], fmt="specforge", output=tmp_path / "sf.jsonl", preserve_thinking=False)
    (row,) = _lines(tmp_path / "sf.jsonl")
    assert "preserve_thinking" not in row and row["conversations"][1]["reasoning_content"]


@pytest.mark.parametrize(
    ("messages", "extra", "reason"),
    [
        ([USER, {"role": "assistant", "content": "", "tool_calls": [{"id": "c1"}]},
          {"role": "tool", "tool_call_id": "c1", "content": "42"}], {}, "tool"),
        ([USER], {"tool_calls": [{"id": "c2", "type": "function",
                                  "function": {"name": "f", "arguments": "{}"}}]}, "tool"),
        ([{"role": "developer", "content": "dev"}, USER], {}, "role"),
        ([USER, {"role": "system", "content": "late system"}], {}, "order"),
        ([COPIED, USER], {}, "order"),
        ([USER, USER2], {}, "order"),
        ([{"role": "user", "content": "  "}], {}, "empty"),
        ([{"role": "user", "content": [{"type": "text", "text": "see"},
          {"type": "image_url", "image_url": {"url": "https://x/cat.png"}}]}], {}, "parts"),
        ([USER], {"content": "it is </think> here", "reasoning": "r"}, "think"),
    ],
)  # fmt: skip
def test_rows_the_specforge_shape_cannot_hold_are_counted_by_reason(
    tmp_path: Path, messages: list[dict[str, Any]], extra: dict[str, Any], reason: str
) -> None:
    out = _write(tmp_path / "out.jsonl", _record("x", messages, **extra), _record("ok", [USER]))
    summary = export([out], fmt="specforge", output=tmp_path / "sf.jsonl")
    assert summary.left_out == {reason: 1} and summary.left_out_ids == {reason: ("x",)}
    assert [r["id"] for r in _lines(tmp_path / "sf.jsonl")] == ["ok"]
    # ShareGPT keeps the row whole.
    kept = export([out], fmt="sharegpt", output=tmp_path / "sg.jsonl")
    assert kept.written == 2 and kept.left_out == {}


def test_a_prompt_that_mentions_think_tags_is_kept(tmp_path: Path) -> None:
    asks = {"role": "user", "content": "What does </think> do in Kimi's template?"}
    out = _write(tmp_path / "out.jsonl", _record("q", [asks]))
    summary = export([out], fmt="specforge", output=tmp_path / "sf.jsonl")
    (row,) = _lines(tmp_path / "sf.jsonl")
    assert summary.left_out == {} and row["conversations"][0] == asks
    assert assert_specforge_row(row, expect_reasoning=True) == 1


def test_text_only_parts_become_one_string_for_specforge(tmp_path: Path) -> None:
    parts = [{"type": "text", "text": "one "}, {"type": "text", "text": "two"}]
    out = _write(tmp_path / "out.jsonl", _record("p", [{"role": "user", "content": parts}]))
    export([out], fmt="specforge", output=tmp_path / "sf.jsonl")
    assert _lines(tmp_path / "sf.jsonl")[0]["conversations"][0] == {
        "role": "user", "content": "one two"}  # fmt: skip


# -- <think> inline, empty answers -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "reasoning", "expected"),
    [
        ("<think>\nR\n</think>\n\nA", None, ("A", "R", True)),
        ("<THINK>R</THINK>A", "apart", ("A", "apart\n\nR", True)),
        ("<think>cut inside the reason", None, ("", "cut inside the reason", True)),
        ("R</think>A", None, ("A", "R", True)),
        ("R</think>A", "apart", ("R</think>A", "apart", False)),
        ("plain answer", "r", ("plain answer", "r", False)),
    ],
)
def test_inline_think_is_split_out_of_the_content(
    content: str, reasoning: str | None, expected: tuple[str, str | None, bool]
) -> None:
    assert split_think(content, reasoning) == expected


def test_inline_think_is_split_and_counted(tmp_path: Path) -> None:
    out = _write(
        tmp_path / "out.jsonl",
        _record(
            "t", [USER], content="<think>inline reasoning</think>\n\nthe answer", reasoning=None
        ),
    )
    summary = export([out], fmt="specforge", output=tmp_path / "sf.jsonl")
    (row,) = _lines(tmp_path / "sf.jsonl")
    assert row["conversations"][1]["content"] == "the answer"
    assert row["conversations"][1]["reasoning_content"] == "inline reasoning"
    assert assert_specforge_row(row, expect_reasoning=True) == 1
    assert summary.think_split == 1
    assert "split <think>...</think> out of the content in 1 rows" in summary.render()


def test_an_empty_answer_is_never_exported_and_the_advice_is_measured(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    cut = {"prompt_tokens": 9, "completion_tokens": 64,
           "completion_tokens_details": {"reasoning_tokens": 64}}  # fmt: skip
    out = _write(
        tmp_path / "out.jsonl",
        _record("ok", [USER]),  # 100 output tokens, 80 reasoning
        _record("e1", [USER], status="truncated", content="", usage=cut),
        _record("e2", [USER], status="truncated", content="<think>all reasoning", reasoning=None,
                usage=cut),
        _record("f", [USER], status="failed", content=None, usage=None),
    )  # fmt: skip
    for fmt in ("specforge", "sharegpt", "jsonl"):
        summary = export([out], fmt=fmt, output="t.jsonl", include_truncated=True)
        assert [r["id"] for r in _lines(tmp_path / "t.jsonl")] == ["ok"]
        assert summary.left_out == {"empty_answer": 2}
        assert summary.not_answered == {"failed": 1}
    # 80 + 64 + 64 reasoning of 100 + 64 + 64 output tokens: 91%.
    assert summary.reasoning_share == pytest.approx(208 / 228)
    assert summary.render().splitlines() == [
        "wrote 1 of 4 rows to t.jsonl (jsonl)",
        "not answered: 1 failed",
        "left out 2: the answer is empty: e1, e2",
        "  the reasoning used up max_tokens before the answer: reasoning is 91% of the",
        "  output tokens read; raise max_tokens= for the next run (the longest finished",
        "  row used 100)",
    ]
    # Without include_truncated they are not answered rows, and said so.
    plain = export([out], fmt="jsonl", output=tmp_path / "t.jsonl")
    assert plain.not_answered == {"failed": 1, "truncated": 2} and plain.left_out == {}


# -- ShareGPT and JSONL keep everything ------------------------------------------------------------


TOOLS = [{"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}]
CALL = {"id": "call_1", "type": "function", "function": {"name": "add", "arguments": '{"a":1}'}}
TOOL_ROW = _record(
    "tool",
    [
        USER,
        {"role": "assistant", "content": "", "reasoning_content": "call add", "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "call_1", "content": "2"},
    ],
)
IMAGE = [{"type": "text", "text": "what is this?"},
         {"type": "image_url", "image_url": {"url": "https://example.org/cat.png"}}]  # fmt: skip


def test_sharegpt_keeps_tool_calls_ids_tools_and_every_reasoning(tmp_path: Path) -> None:
    out = _write(tmp_path / "out.jsonl", TOOL_ROW)
    prompts = _write(tmp_path / "prompts.jsonl", {"id": "tool", "messages": [USER], "tools": TOOLS})
    summary = export([out], fmt="sharegpt", output=tmp_path / "sg.jsonl", prompts=prompts)
    (row,) = _lines(tmp_path / "sg.jsonl")
    assert row == {
        "id": "tool",
        "conversations": [
            {"from": "human", "value": "first question"},
            {"from": "gpt", "value": "", "reasoning_content": "call add", "generated": False,
             "tool_calls": [CALL]},
            {"from": "tool", "value": "2", "tool_call_id": "call_1"},
            {"from": "gpt", "value": "the answer", "reasoning_content": "the reasoning",
             "generated": True},
        ],
        "tools": TOOLS,
    }  # fmt: skip
    assert summary.tools_unknown == 0
    # What speculators' normaliser keeps of it: the tool call, its id, both reasonings.
    assert speculators_turns(row["conversations"])[1:3] == [
        {"role": "assistant", "content": "", "tool_calls": [CALL], "thinking": "call add",
         "reasoning_content": "call add"},
        {"role": "tool", "content": "2", "tool_call_id": "call_1"},
    ]  # fmt: skip
    without = export([out], fmt="sharegpt", output=tmp_path / "sg.jsonl")
    assert without.tools_unknown == 1 and "pass prompts=PROMPTS" in without.render()


def test_jsonl_has_a_conversations_column_with_tools_and_image_parts(tmp_path: Path) -> None:
    image_row = _record("img", [{"role": "user", "content": IMAGE}])
    out = _write(tmp_path / "out.jsonl", {**TOOL_ROW, "tools": TOOLS}, image_row)
    export([out], fmt="jsonl", output=tmp_path / "t.jsonl")
    rows = {r["id"]: r for r in _lines(tmp_path / "t.jsonl")}
    assert rows["tool"]["tools"] == TOOLS and rows["img"]["tools"] is None
    assert rows["tool"]["conversations"][2] == {"role": "tool", "tool_call_id": "call_1",
                                                "content": "2"}  # fmt: skip
    assert rows["img"]["conversations"][0] == {"role": "user", "content": IMAGE}
    assert set(rows["img"]) == {"id", "dataset", "conversations", "tools", "provider", "model",
                                "finish_reason", "usage", "meta", "sampling_params"}  # fmt: skip
    export([out], fmt="sharegpt", output=tmp_path / "sg.jsonl")
    shared = {r["id"]: r for r in _lines(tmp_path / "sg.jsonl")}
    assert shared["img"]["conversations"][0] == {"from": "human", "value": IMAGE}


def test_parquet_has_the_jsonl_columns(tmp_path: Path) -> None:
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    out = _write(tmp_path / "out.jsonl", REGENERATED, {**TOOL_ROW, "tools": TOOLS})
    assert export([out], fmt="parquet", output=tmp_path / "t.parquet").written == 2
    frame = pd.read_parquet(tmp_path / "t.parquet").set_index("id")
    assert json.loads(frame.loc["tool", "tools"]) == TOOLS
    assert pd.isna(frame.loc["tool", "turns"])
    assert [t["generation_id"] for t in json.loads(frame.loc["multi", "turns"])] == [
        "gen-1", "gen-2"]  # fmt: skip
    assert json.loads(frame.loc["multi", "conversations"])[2]["content"] == "first answer"


# -- the output file (issue 18) --------------------------------------------------------------------


def _cli(*args: str) -> Any:
    return CliRunner().invoke(cli, ["export", *args])


def test_a_missing_folder_is_made_and_a_file_in_the_path_is_one_line_naming_it(
    tmp_path: Path,
) -> None:
    out = _write(tmp_path / "out.jsonl", _record("a", [USER]))
    made = tmp_path / "new" / "deep" / "x.jsonl"
    result = _cli(str(out), "-o", str(made))  # issue 32: README's -o hub/... on a fresh tree
    assert result.exit_code == 0, result.output
    assert [json.loads(line)["id"] for line in made.read_text().splitlines()] == ["a"]
    result = _cli(str(out), "-o", f"{out}/x.jsonl")
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert result.stderr.strip().splitlines() == [
        f"Error: --out {out}/x.jsonl: {out} is a file, not a folder; name a file in a folder"
    ]


def test_an_unwritable_folder_is_one_line_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tempfile

    out = _write(tmp_path / "out.jsonl", _record("a", [USER]))
    target = tmp_path / "locked" / "x.jsonl"
    target.parent.mkdir()

    def denied(*args: Any, **kwargs: Any) -> Any:
        raise PermissionError(13, "Permission denied", str(target.parent))

    # What mkstemp raises in a folder without write permission (root may write anywhere, so the
    # refusal is injected where the OS would give it).
    monkeypatch.setattr(tempfile, "mkstemp", denied)
    result = _cli(str(out), "-o", str(target))
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert result.stderr.strip() == (
        f"Error: --out {target}: permission denied writing in {target.parent}; name a file in a "
        "folder you can write to"
    )
    assert not target.exists()


def test_a_json_name_gets_a_json_array(tmp_path: Path) -> None:
    out = _write(tmp_path / "out.jsonl", _record("a", [USER]), _record("b", [USER]))
    summary = export([out], fmt="sharegpt", output=tmp_path / "train.json")
    doc = json.loads((tmp_path / "train.json").read_text(encoding="utf-8"))
    assert [r["id"] for r in doc] == ["a", "b"] and summary.json_array
    assert "(a JSON array)" in " ".join(summary.render().split())
    with pytest.raises(ConfigError, match=r"SpecForge's scripts read JSON Lines .*: name it "):
        export([out], fmt="specforge", output=tmp_path / "train.json")
    with pytest.raises(ConfigError, match=r"fmt=.parquet. writes parquet: name it .*parquet"):
        export([out], fmt="parquet", output=tmp_path / "train.jsonl")


def test_parquet_without_pyarrow_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = _write(tmp_path / "out.jsonl", _record("a", [USER]))
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow raises ImportError
    result = _cli(str(out), "--format", "parquet", "-o", str(tmp_path / "t.parquet"))
    assert result.exit_code == 1
    assert result.stderr.strip() == (
        "Error: --format parquet needs pyarrow: pip install 'openrouter-probe[parquet]' "
        "(or use --format jsonl)"
    )


def test_parquet_with_a_pyarrow_too_old_for_pandas_says_so_before_reading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    out = _write(tmp_path / "out.jsonl", _record("a", [USER]))
    old = "Pandas requires version '16.0.0' or newer of 'pyarrow' (version '15.0.0' currently installed)."

    def too_old(*args: object, **kwargs: object) -> None:
        raise ImportError(old)  # what pandas 3 raises over a pyarrow 15 already installed

    monkeypatch.setattr(pd.DataFrame, "to_parquet", too_old)
    result = _cli(str(out), "--format", "parquet", "-o", str(tmp_path / "t.parquet"))
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert result.stderr.strip() == (
        f"Error: --format parquet needs a newer pyarrow ({old}): pip install -U pyarrow "
        "(or use --format jsonl)"
    )
    assert not (tmp_path / "t.parquet").exists()


def test_a_non_utf8_byte_in_the_output_is_one_line(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    out.write_bytes(json.dumps(_record("a", [USER])).encode() + b'\n{"id": "b\xff"}\n')
    result = _cli(str(out), "-o", str(tmp_path / "t.jsonl"))
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert result.stderr.startswith(f"Error: {out}:2: not UTF-8 text; ")
    assert len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "t.jsonl").exists()


def test_the_cli_offers_every_format() -> None:
    command = cli.commands["export"]
    (fmt,) = [p for p in command.params if p.name == "fmt"]
    assert tuple(fmt.type.choices) == EXPORT_FORMATS  # type: ignore[attr-defined]


# -- end to end on the fake ------------------------------------------------------------------------


def test_the_examples_on_the_fake_export_as_specforge_reads_them(tmp_path: Path) -> None:
    prompts = ROOT / "examples" / "prompts.jsonl"
    out = tmp_path / "out.jsonl"
    with serve(speed=0, seed=3) as fake:
        summary = asyncio.run(
            generate(prompts, policy=POLICY, out=out, base_url=fake.base_url, sleep=no_sleep,
                     max_tokens=400, budget_usd=1)
        )  # fmt: skip
    assert summary.stop_reason == "done"
    by_id = {r["id"]: r for r in records(out)}
    target = tmp_path / "sf.jsonl"
    result = _cli(str(out), "--format", "specforge", "-o", str(target), "--only-generated",
                  "--require-reasoning")  # fmt: skip
    assert result.exit_code == 0, result.output
    rows = _lines(target)
    ok = {i for i, r in by_id.items() if r["status"] == "ok"}
    multi = {"b6-0001", "b6-0003"}  # the examples' rows with a prompt-file assistant turn
    assert {r["id"] for r in rows} == ok - multi and len(rows) >= 10
    for row in rows:
        assert assert_specforge_row(row, expect_reasoning=True) == 1
        assert len(expand_events(row)) == 1
        source = by_id[row["id"]]
        assert row["conversations"][-1] == {
            "role": "assistant", "content": source["content"],
            "reasoning_content": source["reasoning"], "generated": True}  # fmt: skip
        assert row["conversations"][:-1] == source["messages"]
        assert row["preserve_thinking"] is True
    left = len(ok & multi)
    assert f"left out {left}: holds assistant turns from the prompts file" in result.stderr

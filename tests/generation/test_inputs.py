"""The prompt sets users already have, read as each family writes them.

Each family's rows are written here in its real shape (the columns each dataset card lists, and
what SpecForge a6b6b02 ``scripts/prepare_data.py`` and speculators c05b95b
``src/speculators/data_generation/configs.py`` read); a dry run on the bundled snapshot counts the
rows and ids; ``--turns last`` on a ShareGPT row ending on ``gpt`` sends it without that turn.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from openrouter_probe.cli import cli
from openrouter_probe.errors import ConfigError
from openrouter_probe.generation import generate
from openrouter_probe.generation.conversation import validate_conversation
from openrouter_probe.generation.manifest import SourceOptions, read_inputs
from openrouter_probe.generation.prompts import Selection, read_prompts, row_id
from openrouter_probe.generation.shapes import FieldMap
from openrouter_probe.run.report import render_result
from tests._generate import POLICY, LedgerSender, no_sleep, records
from tests._specforge import assert_specforge_conversation
from tests.conftest import ROOT

MANIFEST = ROOT / "examples" / "datasets.yaml"

SYSTEM = {"from": "system", "value": "You are a helpful assistant."}

#: Aeala/ShareGPT_Vicuna_unfiltered: `id`, `conversations` of from/value (human, gpt, system);
#: some rows hold other speakers or no turn at all (skipped).
SHAREGPT = [
    {"id": "QWJhYvA_0", "conversations": [
        {"from": "human", "value": "Summarize the plot of Hamlet in two sentences."},
        {"from": "gpt", "value": "Prince Hamlet seeks revenge ..."},
    ]},
    {"id": "QWJhYvA_1", "conversations": [
        SYSTEM,
        {"from": "human", "value": "What is a monad?"},
        {"from": "gpt", "value": "A monad is ..."},
        {"from": "human", "value": "Give an example in Python."},
    ]},
    {"id": "i6IyJda_0", "conversations": []},
    {"id": "i6IyJda_1", "conversations": [
        {"from": "human", "value": "hi"}, {"from": "human", "value": "hello?"},
    ]},
]  # fmt: skip

#: HuggingFaceH4/ultrachat_200k (train_sft): `prompt`, `prompt_id`, `messages` (role/content).
ULTRACHAT = [
    {"prompt": "How does photosynthesis work?", "prompt_id": "f1e2d3" * 10 + "abcd",
     "messages": [{"role": "user", "content": "How does photosynthesis work?"},
                  {"role": "assistant", "content": "Plants turn light into sugar ..."},
                  {"role": "user", "content": "And at night?"},
                  {"role": "assistant", "content": "At night, respiration ..."}]},
    {"prompt": "Name three rivers.", "prompt_id": "0a1b2c" * 10 + "ef01",
     "messages": [{"role": "user", "content": "Name three rivers."},
                  {"role": "assistant", "content": "The Nile, the Amazon, the Danube."}]},
]  # fmt: skip

#: Magpie-Align/Magpie-Qwen2.5-Pro-1M-v0.1: `uuid`, `model`, `instruction`, `response`,
#: `conversations` (from/value), and many more columns that are data, not request parameters.
MAGPIE = [
    {"uuid": "6b3c7e2a-0f4d-4b9e-9a51-3f1d2c4b5a60", "model": "Qwen/Qwen2.5-72B-Instruct",
     "gen_input_configs": {"temperature": 1.0, "top_p": 1.0}, "instruction": "Write a haiku.",
     "response": "Autumn moonlight ...", "conversations": [
         {"from": "human", "value": "Write a haiku."}, {"from": "gpt", "value": "Autumn ..."}],
     "task_category": "Creative writing", "difficulty": "easy", "input_quality": "good"},
    {"uuid": "9d8e7f6a-1b2c-4d3e-8f9a-0b1c2d3e4f5a", "model": "Qwen/Qwen2.5-72B-Instruct",
     "gen_input_configs": {}, "instruction": "Explain TCP slow start.", "response": "...",
     "conversations": [{"from": "human", "value": "Explain TCP slow start."},
                       {"from": "gpt", "value": "TCP slow start ..."}],
     "task_category": "Information seeking", "difficulty": "medium", "input_quality": "good"},
]  # fmt: skip

#: openai/gsm8k (main): `question`, `answer` only; no id (a content hash).
GSM8K = [
    {"question": "Natalia sold clips to 48 of her friends in April, and then she sold half as "
     "many clips in May. How many clips did Natalia sell altogether in April and May?",
     "answer": "Natalia sold 48/2 = <<48/2=24>>24 clips in May.\n#### 72"},
    {"question": "Weng earns $12 an hour for babysitting. Yesterday, she just did 50 minutes of "
     "babysitting. How much did she earn?", "answer": "#### 10"},
]  # fmt: skip

#: nvidia Nemotron post-training style: `input` (a list of messages), `output`, `reasoning`
#: ("on"/"off": data, not the request's reasoning), `category`, `generator`, `license`.
NEMOTRON = [
    {"input": [{"role": "user", "content": "Prove that sqrt(2) is irrational."}],
     "output": "<think>...</think> Suppose sqrt(2) = p/q ...", "reasoning": "on",
     "category": "math", "generator": "DeepSeek-R1", "license": "cc-by-4.0",
     "system_prompt": "detailed thinking on", "used_in_training": "yes", "version": "v1"},
    {"input": "Write a SQL query that counts orders per day.", "output": "SELECT ...",
     "reasoning": "off", "category": "code", "generator": "Qwen", "license": "cc-by-4.0"},
]  # fmt: skip

TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]  # fmt: skip

#: NousResearch/hermes-function-calling-v1 (func_calling): `id`, `conversations` (from/value,
#: tool calls as text), `tools` as a JSON string, `category`, `subcategory`, `task`. A ShareGPT
#: `tool` turn carries no tool_call_id: the chat API cannot take it (skipped, with its reason).
HERMES = [
    {"id": "85f6c398-69c7-4df2-aed1-29d614a93a26", "conversations": [
        {"from": "system", "value": "You are a function calling AI model. <tools>...</tools>"},
        {"from": "human", "value": "What's the weather in Paris?"},
        {"from": "gpt", "value": "<tool_call>\n{\"name\": \"get_weather\", ...}\n</tool_call>"},
    ], "tools": json.dumps(TOOLS), "category": "Weather", "subcategory": "Forecast",
     "task": "Get the weather"},
    {"id": "0a1b2c3d-69c7-4df2-aed1-29d614a93a27", "conversations": [
        {"from": "system", "value": "You are a function calling AI model."},
        {"from": "human", "value": "Weather in Oslo?"},
        {"from": "gpt", "value": "<tool_call>...</tool_call>"},
        {"from": "tool", "value": "<tool_response>{\"temp\": 3}</tool_response>"},
        {"from": "gpt", "value": "It is 3 degrees in Oslo."},
    ], "tools": json.dumps(TOOLS), "category": "Weather", "subcategory": "Now", "task": "t"},
]  # fmt: skip

#: SpecForge scripts/prepare_data.py output (a6b6b02): `id`, `conversations` of role/content.
SPECFORGE_PREPARED = [
    {"id": "ultrachat_0", "conversations": [
        {"role": "user", "content": "How does photosynthesis work?"},
        {"role": "assistant", "content": "Plants turn light into sugar ..."}]},
    {"id": "ultrachat_1", "conversations": [
        {"role": "system", "content": "Be brief."}, {"role": "user", "content": "Why?"}]},
]  # fmt: skip

#: Our own `export --format specforge`, fed back in for a second pass.
OUR_SPECFORGE = [
    {"id": "b3-0001", "status": "success", "preserve_thinking": True, "conversations": [
        {"role": "user", "content": "Explain threads."},
        {"role": "assistant", "content": "A thread ...", "reasoning_content": "think",
         "generated": True}]},
]  # fmt: skip


def _jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


_READING = ("prompt_field", "id_field", "limit", "sample", "seed", "config", "split")


def _source(options: dict[str, Any]) -> dict[str, Any]:
    """``generate``'s options with the reading ones gathered into ``source``."""
    reading = {k: options.pop(k) for k in _READING if k in options}
    return {**options, **({"source": SourceOptions.of(**reading)} if reading else {})}


def _dry(prompts: Any, tmp_path: Path, **options: Any) -> Any:
    return asyncio.run(
        generate(prompts, policy=POLICY, out=tmp_path / "out.jsonl", dry_run=True,
                 snapshot="bundled", max_tokens=1000, **_source(options))
    )  # fmt: skip


FAMILIES = {
    # family: (rows, FieldMap, ids sent, rows skipped, rows ending on an assistant turn)
    "sharegpt": (SHAREGPT, None, ["QWJhYvA_0", "QWJhYvA_1"], 2, 1),
    "ultrachat": (ULTRACHAT, None, ["f1e2d3" * 10 + "abcd", "0a1b2c" * 10 + "ef01"], 0, 2),
    "magpie": (MAGPIE, None, [r["uuid"] for r in MAGPIE], 0, 2),
    "gsm8k": (GSM8K, None, None, 0, 0),
    "nemotron": (NEMOTRON, None, None, 0, 0),
    "hermes-fc": (HERMES, None, [HERMES[0]["id"]], 1, 1),
    "specforge-prepared": (SPECFORGE_PREPARED, None, ["ultrachat_0", "ultrachat_1"], 0, 1),
    "our-specforge-export": (OUR_SPECFORGE, None, ["b3-0001"], 0, 1),
}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_a_dry_run_counts_each_familys_rows_and_ids(tmp_path: Path, family: str) -> None:
    rows, fields, ids, skipped, ending = FAMILIES[family]
    path = _jsonl(tmp_path / f"{family}.jsonl", rows)
    summary = _dry(path, tmp_path)
    sent = read_prompts(path, turns="last", fields=fields)
    expected = len(rows) - skipped
    assert summary.rows_total == summary.rows_to_send == expected == len(sent)
    assert summary.rows_skipped == skipped and summary.rows_ending_on_assistant == ending
    if ids is not None:
        assert [r.id for r in sent] == ids
    else:  # no id column: the content hash, stable across versions
        assert all(r.id == row_id(r.messages, "default", r.params) for r in sent)
    for row in sent:  # what is sent ends on a user turn, and carries no column of the family
        assert row.messages[-1]["role"] in ("user", "tool")
        assert set(row.params) <= {"tools"}
    if ending:
        assert f"{ending} rows end on an assistant turn" in render_result(summary)


def test_each_family_is_read_as_the_conversation_it_holds(tmp_path: Path) -> None:
    def first(rows: list[dict[str, Any]], **kw: Any) -> Any:
        return read_prompts(_jsonl(tmp_path / "x.jsonl", rows), turns="last", **kw).rows

    share = first(SHAREGPT)
    assert share[0].messages == [
        {"role": "user", "content": "Summarize the plot of Hamlet in two sentences."}
    ]
    assert share[0].extra == {"original": {"role": "assistant",
                                           "content": "Prince Hamlet seeks revenge ..."}}  # fmt: skip
    assert [m["role"] for m in share[1].messages] == ["system", "user", "assistant", "user"]
    assert share[1].extra is None  # every column read: nothing left for `meta`
    ultra = first(ULTRACHAT)  # the conversation wins over the `prompt` string
    assert [m["content"] for m in ultra[0].messages] == [
        "How does photosynthesis work?", "Plants turn light into sugar ...", "And at night?"
    ]  # fmt: skip
    assert ultra[0].params == {}
    gsm = first(GSM8K)
    assert gsm[0].messages == [{"role": "user", "content": GSM8K[0]["question"]}]
    nemo = first(NEMOTRON)  # Llama-Nemotron: `system_prompt` is the system turn (issue 32)
    system = {"role": "system", "content": "detailed thinking on"}
    assert nemo[0].messages == [system, *NEMOTRON[0]["input"]] and nemo[0].params == {}
    assert nemo[0].extra["meta"]["reasoning"] == "on"  # data, kept, never sent
    assert nemo[1].messages == [{"role": "user", "content": NEMOTRON[1]["input"]}]
    hermes = first(HERMES)
    assert hermes[0].params == {"tools": TOOLS}  # the JSON string, sent as the request's tools
    ours = first(OUR_SPECFORGE)  # the trainer's keys are not sent
    assert ours[0].messages == [{"role": "user", "content": "Explain threads."}]
    magpie = first(MAGPIE, fields=FieldMap(prompt="instruction", id="uuid"))
    assert magpie[0].messages == [{"role": "user", "content": "Write a haiku."}]
    assert magpie[0].id == MAGPIE[0]["uuid"]


def test_skipped_rows_are_named_in_the_warnings_and_never_sent(tmp_path: Path) -> None:
    path = _jsonl(tmp_path / "share.jsonl", SHAREGPT)
    summary = _dry(path, tmp_path)
    assert f"skipped, never sent: {path}:3: `conversations` is an empty list" in summary.warnings
    assert (
        f"skipped, never sent: {path}:4: turn 1 is user where assistant comes (user and "
        "assistant take turns)" in summary.warnings
    )
    assert "skipped 2 rows of the prompts" in render_result(summary)


def test_turns_last_sends_a_sharegpt_row_without_its_last_gpt_turn(tmp_path: Path) -> None:
    """The answer the row ends on is the one regenerated: not sent, kept as `original`."""
    path = _jsonl(tmp_path / "share.jsonl", SHAREGPT[:2])
    sender = LedgerSender(seed=1)
    sender.row_id = lambda request: request["messages"][-1]["content"]  # type: ignore[method-assign]
    out = tmp_path / "out.jsonl"
    summary = asyncio.run(
        generate(path, policy=POLICY, out=out, snapshot="bundled", send=sender, sleep=no_sleep,
                 api_key="sk-test", budget_usd=1, max_tokens=100, turns="last")
    )  # fmt: skip
    assert summary.ok == 2
    sent = [json.loads(b)["messages"] for b in sender.bodies]
    assert [{"role": "user", "content": "Summarize the plot of Hamlet in two sentences."}] in sent
    assert [m["role"] for m in sent[0] + sent[1]].count("assistant") == 1  # only QWJhYvA_1's
    by_id = {r["id"]: r for r in records(out)}
    assert by_id["QWJhYvA_0"]["original"] == {
        "role": "assistant", "content": "Prince Hamlet seeks revenge ..."
    }  # fmt: skip
    assert by_id["QWJhYvA_0"]["messages"] == sent[0] or by_id["QWJhYvA_0"]["messages"] == sent[1]
    assert "original" not in by_id["QWJhYvA_1"]


def test_turns_all_keeps_the_trailing_answer_to_regenerate_it(tmp_path: Path) -> None:
    path = _jsonl(tmp_path / "share.jsonl", SHAREGPT[:1])
    every = read_prompts(path, turns="all")
    assert [m["role"] for m in every.rows[0].messages] == ["user", "assistant"]
    assert every.rows[0].id == read_prompts(path, turns="last").rows[0].id  # ids never move
    summary = _dry(path, tmp_path, turns="all")
    assert summary.rows_ending_on_assistant == 1 and summary.turns_to_send == 1


# -- sources: JSON arrays, Parquet, datasets folders, hf: (item 3) ---------------------------------


def test_a_json_array_and_parquet_are_read_like_jsonl(tmp_path: Path) -> None:
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    array = tmp_path / "share.json"
    array.write_text(json.dumps(SHAREGPT, indent=1))
    parquet = tmp_path / "ultra.parquet"
    pd.DataFrame(ULTRACHAT).to_parquet(parquet)
    share = _dry(array, tmp_path)
    assert (share.rows_to_send, share.rows_skipped) == (2, 2)
    assert f"skipped, never sent: {array}: row 3: `conversations` is an empty list" in (
        share.warnings
    )
    rows = read_prompts(parquet, turns="last")
    assert [r.id for r in rows] == [r["prompt_id"] for r in ULTRACHAT]
    assert rows.rows[1].messages == [{"role": "user", "content": "Name three rivers."}]
    (tmp_path / "p").mkdir()
    assert _dry(parquet, tmp_path / "p").rows_to_send == 2


def test_a_jsonl_file_is_lines_unless_the_whole_of_it_is_one_array(tmp_path: Path) -> None:
    """Review of 0.3: a ``.jsonl`` file whose first line was an array was read as a ``.json``
    file and refused as one ("a .json prompts file is one array of rows"). Its lines are rows,
    each error naming its line; a whole file that is one array (mis-named) is still read."""
    lines = tmp_path / "lines.jsonl"
    lines.write_text('[1, 2]\n{"prompt": "x"}\n')
    with pytest.raises(ConfigError) as refused:
        read_prompts(lines, strict=True)
    assert f"{lines}:1: a row is a JSON object, not a list" in str(refused.value)
    assert ".json prompts file" not in str(refused.value)
    misnamed = tmp_path / "array.jsonl"
    misnamed.write_text(json.dumps([{"prompt": "a"}, {"prompt": "b"}], indent=1))
    assert [r.messages[0]["content"] for r in read_prompts(misnamed).rows] == ["a", "b"]


def test_a_folder_of_parquet_files_says_which_it_read(tmp_path: Path) -> None:
    """Review of 0.3: ``generate /tmp`` read every ``*.parquet`` under it (leftovers of other
    jobs among them) and said nothing of which; the summary names them."""
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    folder = tmp_path / "set"
    (folder / "data").mkdir(parents=True)
    pd.DataFrame(ULTRACHAT[:1]).to_parquet(folder / "data" / "train-0.parquet")
    pd.DataFrame(ULTRACHAT[1:]).to_parquet(folder / "stray.parquet")
    summary = _dry(folder, tmp_path)
    assert summary.rows_to_send == len(ULTRACHAT)
    assert (
        f"{folder}: read 2 Parquet file(s) under it: data/train-0.parquet, stray.parquet"
        in summary.notes
    )


def test_a_save_to_disk_folder_is_read_split_by_split(tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    folder = tmp_path / "ultra"
    datasets.DatasetDict(
        {"train_sft": datasets.Dataset.from_list(ULTRACHAT),
         "test_sft": datasets.Dataset.from_list(ULTRACHAT[:1])}
    ).save_to_disk(str(folder))  # fmt: skip
    summary = _dry(folder, tmp_path, split="train_sft")
    assert summary.rows_to_send == 2 and summary.rows_ending_on_assistant == 2
    assert [r.id for r in read_prompts(folder, split="test_sft")] == [ULTRACHAT[0]["prompt_id"]]
    with pytest.raises(ConfigError, match=r"no split 'train'; it has test_sft, train_sft: give"):
        read_prompts(folder)


def _offline_hub_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rows: list[Any]) -> Any:
    """``acme/gsm8k-mini`` in a temp datasets cache, as a download leaves it, then offline: the
    cache's own layout (``acme___gsm8k-mini/main/0.0.0/<hash>``), built by datasets' parquet
    builder."""
    datasets = pytest.importorskip("datasets")
    from datasets.packaged_modules.parquet.parquet import Parquet

    cache = tmp_path / "hf-cache"
    monkeypatch.setenv("HF_DATASETS_CACHE", str(cache))
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", cache)
    source = tmp_path / "train.parquet"
    datasets.Dataset.from_list(rows).to_parquet(str(source))
    builder = Parquet(cache_dir=str(cache), dataset_name="acme___gsm8k-mini", config_name="main",
                      config_id="main", data_files={"train": str(source)}, hash="0" * 16)  # fmt: skip
    builder.download_and_prepare()
    for arrow in Path(builder.cache_dir).glob("acme___gsm8k-mini-*"):  # the name a download gives
        arrow.rename(arrow.with_name(arrow.name.replace("acme___", "")))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    return datasets


def test_an_hf_id_streams_from_the_datasets_cache_offline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = [{"question": f"What is {i} + {i}?", "answer": f"#### {2 * i}"} for i in range(40)]
    datasets = _offline_hub_cache(tmp_path, monkeypatch, rows)
    calls: list[tuple[Any, ...]] = []
    real = datasets.load_dataset

    def spy(*args: Any, **kwargs: Any) -> Any:
        calls.append((*args, kwargs))
        return real(*args, **kwargs)

    monkeypatch.setattr(datasets, "load_dataset", spy)
    summary = _dry("hf:acme/gsm8k-mini", tmp_path, config="main", split="train", limit=5)
    assert summary.rows_to_send == 5
    assert calls == [("acme/gsm8k-mini", "main", {"split": "train", "streaming": True})]
    result = CliRunner().invoke(
        cli, ["generate", "hf:acme/gsm8k-mini", "--config", "main", "--split", "train",
              "--sample", "7", "--seed", "3", "--policy", str(POLICY), "-o",
              str(tmp_path / "cli.jsonl"), "--dry-run", "--snapshot", "bundled", "--format", "json"]
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["rows_to_send"] == 7
    got = read_prompts("hf:acme/gsm8k-mini", config="main", split="train",
                       selection=Selection(sample=4, seed=7))  # fmt: skip
    again = read_prompts("hf:acme/gsm8k-mini", config="main", split="train",
                         selection=Selection(sample=4, seed=7))  # fmt: skip
    assert [r.id for r in got] == [r.id for r in again] and len(got) == 4
    assert [r.line for r in got] == sorted(r.line for r in got)  # in the source's order
    assert all(r.messages[0]["content"] == rows[r.line - 1]["question"] for r in got)
    with pytest.raises(ConfigError, match=r"hf:acme/nope: cannot load it with datasets \(offline"):
        read_prompts("hf:acme/nope")


def test_without_datasets_an_hf_source_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "datasets", None)  # import datasets raises ImportError
    with pytest.raises(ConfigError) as info:
        read_prompts("hf:openai/gsm8k", config="main")
    assert str(info.value) == (
        "hf:openai/gsm8k needs the `datasets` library: pip install 'openrouter-probe[hf]'"
    )


def test_limit_and_sample_pick_the_same_rows_on_every_rerun(tmp_path: Path) -> None:
    path = _jsonl(tmp_path / "q.jsonl", [{"id": f"q{i}", "question": f"q {i}"} for i in range(100)])
    assert [r.id for r in read_prompts(path, selection=Selection(limit=3))] == ["q0", "q1", "q2"]
    one = [r.id for r in read_prompts(path, selection=Selection(sample=10, seed=1))]
    assert one == [r.id for r in read_prompts(path, selection=Selection(sample=10, seed=1))]
    assert one != [r.id for r in read_prompts(path, selection=Selection(sample=10, seed=2))]
    assert len(set(one)) == 10 and one == sorted(one, key=lambda i: int(i[1:]))
    with pytest.raises(ConfigError, match="give limit= or sample=, not both"):
        Selection(limit=1, sample=1)
    sampled = _dry(path, tmp_path, sample=10, seed=1)
    assert sampled.rows_total == 10


# -- a manifest of many datasets (item 4) ----------------------------------------------------------


def test_the_bundled_manifest_reads_six_datasets_of_six_families(tmp_path: Path) -> None:
    summary = _dry(MANIFEST, tmp_path)
    assert sorted(summary.datasets) == ["B3", "B4", "B5", "B6", "B7", "B8"]
    assert {k: t.rows for k, t in summary.datasets.items()} == dict.fromkeys(summary.datasets, 3)
    assert summary.rows_skipped == 0 and summary.rows_ending_on_assistant == 6  # B3 and B4
    assert summary.turns_to_send == 20  # B6 goes turn by turn: two rows of two turns
    inputs = read_inputs(MANIFEST)
    assert inputs.weights == {"B3": 1, "B4": 1, "B5": 1, "B6": 2, "B7": 1, "B8": 1}
    assert inputs.turns["B6"] == "all" and inputs.turns["B3"] == "last"
    b4 = [r for r in inputs.prompts if r.dataset == "B4"]
    assert all(len(r.messages) == 1 and r.extra for r in b4)  # Magpie's answer is `original`


def test_a_manifest_is_checked_key_by_key(tmp_path: Path) -> None:
    bad = tmp_path / "m.yaml"
    bad.write_text("datasets:\n  - name: B3\n    source: x.jsonl\n    limt: 3\n")
    with pytest.raises(ConfigError, match=r"m.yaml: invalid manifest \(datasets\[0\].limt: not an"):
        read_inputs(bad)
    bad.write_text("datasets:\n  - {name: B3, source: a.jsonl}\n  - {name: B3, source: b.jsonl}\n")
    with pytest.raises(ConfigError, match="datasets named twice: B3"):
        read_inputs(bad)
    with pytest.raises(ConfigError, match="a manifest sets each dataset's own; drop limit=2 "):
        read_inputs(MANIFEST, options=SourceOptions.of(limit=2))


def test_the_cli_dry_runs_a_manifest_and_an_hf_option_needs_an_hf_source(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli, ["generate", str(MANIFEST), "--policy", str(POLICY), "-o", str(tmp_path / "o.jsonl"),
              "--dry-run", "--snapshot", "bundled", "--budget-usd", "5"]
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "  B6: 0/3 rows" in result.stdout
    assert "6 rows end on an assistant turn" in result.stdout
    result = CliRunner().invoke(
        cli, ["generate", str(tmp_path / "missing.jsonl"), "--policy", str(POLICY), "-o",
              str(tmp_path / "o.jsonl"), "--dry-run", "--snapshot", "bundled"]
    )  # fmt: skip
    assert result.exit_code == 1
    assert "missing.jsonl: cannot read the prompts file: No such file or directory" in (
        result.stderr
    )


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["system", "user", "assistant"]), st.sampled_from(["", " ", "x"])
        ),
        max_size=6,
    )
)
def test_the_conversation_check_is_specforges_on_its_own_roles(
    turns: list[tuple[str, str]],
) -> None:
    """On system/user/assistant text turns, a row is sent exactly when SpecForge's
    ``validate_conversation`` (the project's copy, ``tests/_specforge.py``) accepts it."""
    messages = [{"role": role, "content": content} for role, content in turns]
    try:
        assert_specforge_conversation(messages)
        accepted = True
    except AssertionError:
        accepted = False
    assert (validate_conversation(messages) is None) == accepted


def test_a_manifests_weights_share_the_cap_as_weights_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run's own sharing (``Learned.weights``) gets the manifest's; --weights replaces them."""
    from openrouter_probe.generation import job
    from openrouter_probe.run.paid import PaidRun

    seen: list[dict[str, float]] = []
    real = job.run_job

    async def spy(paid: PaidRun, rows: Any, **kwargs: Any) -> Any:
        seen.append(dict(kwargs["learned"].weights))
        return await real(paid, rows, **kwargs)

    monkeypatch.setattr(job, "run_job", spy)
    for weights in (None, "B3=3"):
        sender = LedgerSender()
        sender.row_id = lambda request: request["messages"][-1]["content"]  # type: ignore[method-assign]
        asyncio.run(
            generate(MANIFEST, policy=POLICY, out=tmp_path / f"o{len(seen)}.jsonl",
                     snapshot="bundled", send=sender, sleep=no_sleep, api_key="sk-test",
                     budget_usd=1, max_tokens=50, weights=weights)
        )  # fmt: skip
    assert seen[-2] == {"B3": 1, "B4": 1, "B5": 1, "B6": 2, "B7": 1, "B8": 1}
    assert seen[-1] == {"B3": 3}

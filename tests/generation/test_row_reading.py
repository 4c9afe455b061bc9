"""Every row read right: a line that cannot become a request is its own problem (skipped and
named; ``strict`` refuses the file), a system column goes first beside a string prompt, an empty
field is never replaced by its neighbour, and an output holds one source. Rows are written in the
columns of each set's dataset card (the Hub id in the comment)."""

from __future__ import annotations

import asyncio
import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from openrouter_probe.cli import cli
from openrouter_probe.errors import ConfigError
from openrouter_probe.fake import serve
from openrouter_probe.generation import generate
from openrouter_probe.generation.export import export
from openrouter_probe.generation.prompts import read_prompts
from openrouter_probe.run.money.journal import journal_path
from openrouter_probe.run.money.replay import replay_journal
from tests._generate import POLICY, no_sleep, records

PYTEST_KEY = "sk-or-v1-rows"


def U(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def S(text: str) -> dict[str, str]:
    return {"role": "system", "content": text}


def _write(path: Path, rows: list[Any]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _run(prompts: Path, out: Path, base_url: str, **options: Any) -> Any:
    return asyncio.run(
        generate(
            prompts,
            policy=POLICY,
            out=out,
            base_url=base_url,
            api_key=PYTEST_KEY,
            sleep=no_sleep,
            max_tokens=100,
            budget_usd=1,
            **options,
        )
    )


#: meta-math/MetaMathQA: query, response, type, original_question; line 2 lacks `query`, line 4
#: is cut; databricks/databricks-dolly-15k: line 5's instruction is a number
BAD_AMONG_GOOD = [
    {"query": "What is 2 + 3?", "response": "5", "type": "GSM_Rephrased",
     "original_question": "2 + 3?"},
    {"response": "7", "type": "MATH_AnsAug", "original_question": "3 + 4?"},
    {"query": "What is 6 * 7?", "response": "42", "type": "GSM_SV", "original_question": "6*7"},
]  # fmt: skip


def _bad_file(tmp_path: Path) -> Path:
    path = _write(tmp_path / "metamath.jsonl", BAD_AMONG_GOOD)
    with path.open("a", encoding="utf-8") as handle:
        handle.write('{"query": "cut\n')
        handle.write(json.dumps({"instruction": 7, "context": "", "response": "x",
                                 "category": "open_qa"}) + "\n")  # fmt: skip
    return path


def test_a_bad_line_among_good_ones_is_skipped_named_and_counted(tmp_path: Path) -> None:
    path = _bad_file(tmp_path)
    named = [
        f"{path}:2: has none of `messages`, `conversations`, `conversation`, `items`, `prompt`, "
        "`question`, `instruction`, `query`, `input`; name the prompt field (prompt_field, or "
        "`fields:` in a manifest)",
        f"{path}:4: not JSON (Invalid control character at column 15)",
        f"{path}:5: `instruction` is a number, not text",
    ]
    with serve(speed=0, seed=1, record_requests=True) as fake:
        dry = _run(path, tmp_path / "out.jsonl", fake.base_url, dry_run=True, snapshot="bundled")
        summary = _run(path, tmp_path / "out.jsonl", fake.base_url)
        sent = [b["messages"] for b in fake.fake.requests]
    assert dry.rows_to_send == 2 and dry.rows_skipped == 3 and dry.skipped_rows == tuple(named)
    assert sorted(map(json.dumps, sent)) == sorted(
        map(json.dumps, [[U("What is 2 + 3?")], [U("What is 6 * 7?")]])
    )
    assert summary.exit_code == 0 and summary.stop_reason == "done"
    assert summary.rows_skipped == 3 and summary.skipped_rows == tuple(named)
    assert [f"skipped, never sent: {why}" for why in named] == [
        w for w in summary.warnings if w.startswith("skipped, never sent")
    ]
    # the output's provenance: the run's header in the journal counts them, the card says so
    (header,) = replay_journal(journal_path(tmp_path / "out.jsonl"), repair=False).headers
    assert header["rows_skipped"] == 3 and header["prompts"] == str(path)
    if importlib.util.find_spec("pyarrow") is not None:
        export([tmp_path / "out.jsonl"], fmt="hf", output=tmp_path / "hub", include_truncated=True)
        card = (tmp_path / "hub" / "README.md").read_text(encoding="utf-8")
        assert "prompts_skipped: 3" in card
    with pytest.raises(ConfigError, match=r"3 bad line\(s\)"):
        read_prompts(path, strict=True)


def test_the_cli_runs_the_good_lines_exit_0_and_strict_refuses(tmp_path: Path) -> None:
    path = _bad_file(tmp_path)
    with serve(speed=0, seed=1) as fake:
        env = {"OPENROUTER_API_KEY": PYTEST_KEY, "OPENROUTER_BASE_URL": fake.base_url}
        args = ["generate", str(path), "--policy", str(POLICY), "--budget-usd", "1", "--quiet"]
        strict = CliRunner().invoke(cli, [*args, "-o", str(tmp_path / "s.jsonl"), "--strict"],
                                    env=env)  # fmt: skip
        assert strict.exit_code == 1 and "3 bad line(s)" in strict.output
        assert len(fake.ledger) == 0
        result = CliRunner().invoke(cli, [*args, "-o", str(tmp_path / "o.jsonl")], env=env)
        assert result.exit_code == 0, result.output
        assert len(fake.ledger) == 2
    said = " ".join(result.output.split())
    assert "skipped 3 rows of the prompts" in said and f"{path}:2: has none of" in said


#: jondurbin/truthy-dpo-v0.1: id, source, system, prompt, chosen, rejected;
#: Intel/orca_dpo_pairs: system, question, chosen, rejected
SYSTEM_BESIDE = [
    {"id": "t1", "source": "truthy_dpo", "system": "You are an unbiased, honest assistant.",
     "prompt": "Can you feel the wind?", "chosen": "No, I am an AI.", "rejected": "Yes."},
    {"id": "t2", "source": "truthy_dpo", "system": "", "prompt": "Is the moon made of cheese?",
     "chosen": "No.", "rejected": "Yes."},
    {"system": "You are an AI assistant. You will be given a task.",
     "question": "Summarize: The cat sat on the mat.", "chosen": "A cat sat.",
     "rejected": "Mats."},
    {"id": "m1", "system_message": "Answer in French.",
     "messages": [S("Answer in German."), U("Hello?")]},
]  # fmt: skip


def test_a_system_column_goes_first_beside_a_string_prompt(tmp_path: Path) -> None:
    path = _write(tmp_path / "dpo.jsonl", SYSTEM_BESIDE)
    with serve(speed=0, seed=1, record_requests=True) as fake:
        summary = _run(path, tmp_path / "out.jsonl", fake.base_url)
        sent = sorted(json.dumps(b["messages"]) for b in fake.fake.requests)
    assert sent == sorted(
        json.dumps(m)
        for m in [
            [S("You are an unbiased, honest assistant."), U("Can you feel the wind?")],
            [U("Is the moon made of cheese?")],
            [S("You are an AI assistant. You will be given a task."),
             U("Summarize: The cat sat on the mat.")],
            [S("Answer in German."), U("Hello?")],
        ]
    )  # fmt: skip
    meta = {r["id"]: r.get("meta") for r in records(tmp_path / "out.jsonl")}
    assert meta["t1"] == {"source": "truthy_dpo", "chosen": "No, I am an AI.", "rejected": "Yes."}
    assert meta["m1"] == {"system_message": "Answer in French."}  # the conversation's own wins
    assert (
        f"{path}: 1 row(s) open with their own system turn: their `system_message` column is "
        "kept in `meta`, not sent"
    ) in summary.notes


def test_an_empty_field_is_never_replaced_by_its_neighbour(tmp_path: Path) -> None:
    # garage-bAInd/Open-Platypus: input, output, instruction, data_source
    path = _write(tmp_path / "platypus.jsonl", [
        {"input": "x = 3", "output": "9", "instruction": "", "data_source": "scibench"},
        {"input": "", "output": "4", "instruction": None, "data_source": "MATH/PRM-800K"},
        {"input": "", "output": "2", "instruction": "What is 1 + 1?", "data_source": "MATH"},
    ])  # fmt: skip
    rows = read_prompts(path)
    assert [r.messages for r in rows] == [[U("What is 1 + 1?")]]
    assert rows.skipped == [
        f"{path}:1: `instruction` is an empty string beside `input` (not sent as `input` alone)",
        f"{path}:2: `instruction` is null",
    ]


def test_an_output_holds_one_source_and_redo_truncated_on_a_fresh_one_says_so(
    tmp_path: Path,
) -> None:
    first = _write(tmp_path / "a.jsonl", [{"id": "a1", "prompt": "Name a prime."}])
    second = _write(tmp_path / "b.jsonl", [{"id": "b1", "prompt": "Name a river."}])
    out = tmp_path / "out.jsonl"
    with serve(speed=0, seed=1) as fake:
        fresh = _run(first, tmp_path / "fresh.jsonl", fake.base_url, redo_truncated=True)
        assert (
            fresh.requests == 0
            and (
                f"redo_truncated=True: {tmp_path / 'fresh.jsonl'} holds no answer yet, so none was "
                "cut: nothing to redo"
            )
            in fresh.warnings
        )
        done = _run(first, out, fake.base_url)
        assert done.ok + done.truncated == 1
        with pytest.raises(ConfigError) as refused:
            _run(second, out, fake.base_url)
        assert _run(first, out, fake.base_url).rows_already_done == 1  # the same one resumes
    assert str(refused.value) == (
        f"{out} holds the rows of {first}; {second} is another source: give out= another file "
        "(or merge the sources into one file or manifest)"
    )
    assert [r["id"] for r in records(out)] == ["a1"]
    afile = tmp_path / "afile"
    afile.write_text("x")
    with pytest.raises(ConfigError, match=r"afile is a file, not a folder; give out= a path"):
        _run(first, afile / "x.jsonl", "http://127.0.0.1:9")

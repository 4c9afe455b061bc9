"""Useful rows: an answer cut at ``max_tokens`` is money spent on a row the export leaves out. The
run's summary says how many answers were cut and what ``max_tokens`` would have kept 95% whole
(advice: it never changes ``max_tokens``); the dry run says rows per dollar at the expected cost,
and how many of them come whole as the output's earlier answers did."""

from __future__ import annotations

import asyncio
import json
import math
from decimal import Decimal
from pathlib import Path
from typing import Any

from openrouter_probe.errors import Message
from openrouter_probe.fake import serve
from openrouter_probe.generation import generate
from openrouter_probe.run.counts import AnswerLengths
from openrouter_probe.run.report import render_result
from tests._generate import POLICY, no_sleep, prompt_rows, records, write_prompts


def _flags(name: str, value: Any, given: bool) -> str:
    flag = "--" + name.replace("_", "-")
    return f"{flag} {value}" if given else flag


def test_the_length_that_keeps_95_percent_whole() -> None:
    lengths = AnswerLengths()
    for tokens in range(1, 101):  # 100 whole answers of 10 to 1,000 tokens, one cut
        lengths.add(tokens * 10, False)
    lengths.add(4096, True)
    assert lengths.answers == 101 and lengths.cut == 1
    assert lengths.keeps() == 960  # 96 of 101 (ceil 95.95) end at or under 960 tokens
    (note,) = lengths.note()
    assert isinstance(note, Message) and note.code == "answers-cut-keep"
    assert str(note) == (
        "1 of 101 answers cut at max_tokens (1.0%); max_tokens=960 would have kept 95% whole "
        "(not changed: give it to use it)"
    )
    assert note.render(_flags).startswith("1 of 101 answers cut at --max-tokens (1.0%); ")
    assert "--max-tokens 960 would have kept 95% whole" in note.render(_flags)


def test_more_than_five_percent_cut_cannot_say_how_far() -> None:
    lengths = AnswerLengths()
    for _ in range(90):
        lengths.add(50, False)
    for _ in range(10):
        lengths.add(64, True)
    assert lengths.keeps() is None  # 95 needed, 90 whole: the cut ones' lengths are unknown
    (note,) = lengths.note()
    assert isinstance(note, Message) and note.code == "answers-cut-unknown"
    assert str(note).startswith("10 of 100 answers cut at max_tokens (10.0%): keeping 95% whole")
    assert AnswerLengths().note() == []  # no answer, nothing said


def _gen(tmp: Path, base_url: str, **options: Any) -> Any:
    return asyncio.run(
        generate(
            tmp / "prompts.jsonl",
            policy=POLICY,
            out=tmp / "out.jsonl",
            base_url=base_url,
            sleep=no_sleep,
            concurrency=8,
            budget_usd=5,
            **options,
        )
    )


def _note(summary: Any, prefix: str) -> Message:
    found = [n for n in summary.notes if isinstance(n, Message) and n.code.startswith(prefix)]
    assert len(found) == 1, summary.notes
    return found[0]


def test_the_summary_and_the_dry_run_say_what_is_cut_and_what_a_dollar_buys(
    tmp_path: Path,
) -> None:
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(40))
    with serve(speed=0, seed=5, median_tokens=120) as fake:
        before = _gen(tmp_path, fake.base_url, max_tokens=600, dry_run=True)
        write_prompts(tmp_path / "prompts.jsonl", prompt_rows(30))
        summary = _gen(tmp_path, fake.base_url, max_tokens=600)
        write_prompts(tmp_path / "prompts.jsonl", prompt_rows(40))  # 10 more
        after = _gen(tmp_path, fake.base_url, max_tokens=600, dry_run=True)
    # before any answer: rows per dollar, and how many come whole is unknown
    unknown = _note(before, "useful-rows")
    assert unknown.code == "useful-rows-unknown"
    assert unknown.values["per"] == Decimal(40) / before.expected_usd
    # the run: every answer counted, the cut ones named, the advice from the whole ones' lengths
    out = records(tmp_path / "out.jsonl")
    cut = sum(r["status"] == "truncated" for r in out)
    whole = sorted(r["usage"]["completion_tokens"] for r in out if r["status"] == "ok")
    assert summary.truncated == cut and 0 < cut < len(out) == 30
    note = _note(summary, "answers-cut")
    assert note.values["said"].values == {"cut": cut, "answers": 30, "share": cut / 30}
    # (seed 5: one of 30 cut) 29 whole answers needed, the 29th shortest is the advice
    assert note.code == "answers-cut-keep" and cut == 1
    assert note.values["max_tokens"] == whole[math.ceil(0.95 * 30) - 1] < 600
    assert str(note) in " ".join(render_result(summary).split())
    # the dry run of the rest: rows per dollar, the share whole as the 30 earlier answers were
    useful = _note(after, "useful-rows")
    assert useful.code == "useful-rows"
    share = Decimal(30 - cut) / 30
    assert useful.values["whole"] == share and useful.values["answers"] == 30
    assert useful.values["per"] == Decimal(10) / after.expected_usd
    assert useful.values["useful"] == useful.values["per"] * share
    assert _note(after, "answers-cut").code == note.code


def test_budget_says_useful_rows_per_dollar_as_a_pilots_answers_were(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from openrouter_probe.cli import cli

    pilot = tmp_path / "pilot.jsonl"
    lines = [
        {"id": f"r{i}", "status": "ok", "usage": {"completion_tokens": 10 * (i + 1)}}
        for i in range(19)
    ]
    lines.append({"id": "r19", "status": "truncated", "usage": {"completion_tokens": 400}})
    write_prompts(pilot, lines)
    base = ["budget", "moonshotai/kimi-k2.5", "--offline", "--budget-usd", "10"]
    sizes = ["--output-tokens", "1M", "--prompt-tokens", "100", "--output-tokens-per-request"]
    runner = CliRunner()
    text = runner.invoke(cli, [*base, *sizes, "400", "--answers", str(pilot)])
    assert text.exit_code == 0, text.output
    said = " ".join(text.stdout.split())
    assert "useful rows per dollar: " in said and "(95.0% whole, as the 20 answers of" in said
    # 19 of 20 needed whole: the 19th shortest whole answer, 190 tokens
    assert "1 of 20 answers cut at max_tokens (5.0%); max_tokens=190 would have kept" in said
    data = runner.invoke(cli, [*base, *sizes, "400", "--answers", str(pilot), "--format", "json"])
    useful = json.loads(data.stdout)["useful_rows"]
    plan = json.loads(data.stdout)
    per = Decimal(plan["requests"]) / Decimal(str(plan["blended"]["all_in"]["cost_usd"]))
    assert useful[0].startswith(
        f"useful rows per dollar: {per * Decimal('0.95'):,.1f} of {per:,.1f}"
    )
    refused = runner.invoke(cli, [*base, "--output-tokens", "1M", "--answers", str(pilot)])
    assert refused.exit_code == 2
    assert "--answers needs --output-tokens-per-request" in refused.output

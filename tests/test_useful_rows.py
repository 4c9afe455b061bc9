"""Useful rows: an answer cut at ``max_tokens`` is money spent on a row the export leaves out. The
run's summary says how many answers were cut and what ``max_tokens`` would have kept 95% whole
(advice: it never changes ``max_tokens``); the dry run says rows per dollar at the expected cost,
and how many of them come whole as the output's earlier answers did."""

from __future__ import annotations

import asyncio
import math
from decimal import Decimal
from pathlib import Path
from typing import Any

from openrouter_probe.errors import Message
from openrouter_probe.fake import serve
from openrouter_probe.generation import generate
from openrouter_probe.run.counts import AnswerLengths
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
    note = lengths.note()
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
    note = lengths.note()
    assert isinstance(note, Message) and note.code == "answers-cut-unknown"
    assert str(note).startswith("10 of 100 answers cut at max_tokens (10.0%): keeping 95% whole")
    assert AnswerLengths().note() is None  # no answer, nothing said


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
    assert str(note) in " ".join(summary.render().split())
    # the dry run of the rest: rows per dollar, the share whole as the 30 earlier answers were
    useful = _note(after, "useful-rows")
    assert useful.code == "useful-rows"
    share = Decimal(30 - cut) / 30
    assert useful.values["whole"] == share and useful.values["answers"] == 30
    assert useful.values["per"] == Decimal(10) / after.expected_usd
    assert useful.values["useful"] == useful.values["per"] * share
    assert _note(after, "answers-cut").code == note.code

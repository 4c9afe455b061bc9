"""``--redo-truncated --max-tokens N`` sends again only the rows cut at
``max_tokens``, with the new limit, under the same cap and journal; the new record supersedes the
cut one for ``audit`` and ``export``, which say how many were superseded."""

from __future__ import annotations

import asyncio
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

from openrouter_probe.generation import generate
from openrouter_probe.generation.audit import audit
from openrouter_probe.generation.export import export
from openrouter_probe.generation.records import merged_records
from openrouter_probe.rules.snapshot import bundled_snapshot
from tests._generate import POLICY, LedgerSender, no_sleep, prompt_rows, records, write_prompts


def _run(prompts: Path, out: Path, sender: LedgerSender, **options: Any) -> Any:
    return asyncio.run(
        generate(prompts, policy=POLICY, out=out, snapshot="bundled", send=sender,
                 sleep=no_sleep, api_key="sk-test", budget_usd=1, **options)
    )  # fmt: skip


def test_only_the_cut_rows_are_sent_again_and_their_new_answers_supersede(tmp_path: Path) -> None:
    prompts = write_prompts(tmp_path / "p.jsonl", prompt_rows(30))
    out = tmp_path / "out.jsonl"
    first = _run(prompts, out, LedgerSender(seed=2), max_tokens=2)  # half the draws hit 2: cut
    cut = {r["id"] for r in records(out) if r["status"] == "truncated"}
    assert first.truncated == len(cut) and 5 < len(cut) < 25
    # rows added since are not sent by a redo: it sends only what was cut
    write_prompts(prompts, [*prompt_rows(30), {"id": "new", "prompt": "question new x"}])
    sender = LedgerSender(seed=3)
    again = _run(prompts, out, sender, max_tokens=1000, redo_truncated=True)
    sent = [json.loads(b) for b in sender.bodies]
    assert sorted(sender.row_id(b) for b in sent) == sorted(i[1:] for i in cut)
    assert all(b["max_tokens"] == 1000 for b in sent)
    assert again.rows_to_send == len(cut) and again.rows_already_done == 31 - len(cut)
    assert again.spent_before_usd == first.spent_usd  # the same journal and cap
    assert again.spent_total_usd == first.spent_usd + sender.billed_usd
    merged = {r["id"]: r for r in merged_records([out])}
    assert "new" not in merged and len(merged) == 30
    assert {i for i, r in merged.items() if r["status"] == "truncated"} == {
        i for i in cut if merged[i]["usage"]["completion_tokens"] == 1000
    }  # a redone row is its new answer (cut again only if it drew 1000)
    assert all(merged[i]["attempts"] == 1 and merged[i]["run_id"] != first_run(out) for i in cut)
    report = audit([out], policy=POLICY, snapshot=bundled_snapshot())
    assert report.superseded == len(cut) and report.rows == 30
    assert f"{len(cut)} truncated answer(s) superseded by redo_truncated=True" in (
        report.render_notes()
    )
    assert report.spent_usd == again.spent_total_usd
    assert report.realised_usd == sum(
        (Decimal(str(r["cost_usd"])) for r in merged.values()), Decimal(0)
    )
    summary = export([out], fmt="jsonl", output=tmp_path / "train.jsonl", include_truncated=True)
    assert summary.superseded == len(cut) and summary.written == 30
    assert "superseded by a redo_truncated=True answer" in summary.render()


def first_run(out: Path) -> str:
    return str(records(out)[0]["run_id"])


def test_a_redo_no_longer_than_the_cut_is_warned(tmp_path: Path) -> None:
    prompts = write_prompts(tmp_path / "p.jsonl", prompt_rows(10))
    out = tmp_path / "out.jsonl"
    _run(prompts, out, LedgerSender(seed=2), max_tokens=2)
    dry = _run(prompts, out, LedgerSender(), max_tokens=2, redo_truncated=True, dry_run=True)
    assert (
        "redo_truncated=True: max_tokens=2 is no more than the 2 output tokens some were cut at: "
        "they may be cut again; raise it above max_tokens=2" in dry.warnings
    )
    assert dry.rows_to_send == sum(r["status"] == "truncated" for r in records(out))


def test_a_redone_row_counts_once_and_both_its_answers_tokens_count(tmp_path: Path) -> None:
    """Review of 0.3: after a redo the tally said "6/3 rows" (a cut row done twice), and the next
    resume counted only the cut answers' tokens (384 of 1,495): ``--target-tokens`` is of billed
    output tokens, and both answers were billed."""
    rows = [{**r, "dataset": "A" if i % 2 else "B"} for i, r in enumerate(prompt_rows(24))]
    prompts = write_prompts(tmp_path / "p.jsonl", rows)
    out = tmp_path / "out.jsonl"
    _run(prompts, out, LedgerSender(seed=2), max_tokens=2)
    assert any(r["status"] == "truncated" for r in records(out))
    again = _run(prompts, out, LedgerSender(seed=3), max_tokens=1000, redo_truncated=True)
    resumed = _run(prompts, out, LedgerSender(), max_tokens=1000)
    billed: dict[str, int] = {}
    for r in records(out):  # every answer the output holds, the cut ones and their redos
        billed[r["dataset"]] = billed.get(r["dataset"], 0) + r["usage"]["completion_tokens"]
    for summary in (again, resumed):
        assert {n: (t.done, t.rows) for n, t in summary.datasets.items()} == {
            "A": (12, 12),
            "B": (12, 12),
        }
        assert {n: t.output_tokens for n, t in summary.datasets.items()} == billed
    assert resumed.requests == 0


def test_a_redo_after_a_dataset_is_renamed_counts_where_the_record_was(tmp_path: Path) -> None:
    """Review of 0.3: the redo reopened each cut row under the prompts' dataset, while the
    resume had counted it under the one its record names: a renamed dataset went below 0."""
    prompts = write_prompts(
        tmp_path / "p.jsonl", [{**r, "dataset": "old"} for r in prompt_rows(12)]
    )
    out = tmp_path / "out.jsonl"
    _run(prompts, out, LedgerSender(seed=2), max_tokens=2)
    cut = sum(r["status"] == "truncated" for r in records(out))
    assert cut
    write_prompts(prompts, [{**r, "dataset": "new"} for r in prompt_rows(12)])
    again = _run(prompts, out, LedgerSender(seed=3), max_tokens=1000, redo_truncated=True)
    assert again.rows_to_send == cut
    assert {n: (t.done, t.rows) for n, t in again.datasets.items()} == {"new": (cut, 12)}

"""``StopReason``: the strings a run has always written, each with its exit code."""

from __future__ import annotations

import dataclasses
import json

from openrouter_probe.run.report import render_result
from openrouter_probe.run.result import RunResult as RunSummary
from openrouter_probe.run.stop import StopReason

#: Every value journals and summaries written before the enum hold, with the exit code the CLI
#: gave each (``generate`` and ``verify``: 130 for a signal, the summary's 0 or 1 otherwise).
WRITTEN = {
    "done": 0,
    "budget": 0,
    "target": 0,
    "dry-run": 0,
    "pilot": 0,
    "interrupted": 130,
    "cancelled": 130,
    "unreachable": 1,
    "rate-limited": 1,
    "credits": 1,
    "key-limit": 1,
    "in-flight": 1,
    "key": 1,
    "no-route": 1,
    "budget-spent": 1,
    "failing": 1,
    "all-failed": 1,
    "write-failed": 1,
    "batch-refused": 1,
    "batch-unread": 1,
    "batch-failed": 1,
    "batch-running": 1,
}


def test_every_reason_keeps_its_string_and_exit_code() -> None:
    assert {r.value: r.exit_code for r in StopReason} == WRITTEN
    assert [r for r in StopReason if r.as_asked] == [
        StopReason.DONE,
        StopReason.BUDGET,
        StopReason.TARGET,
        StopReason.DRY_RUN,
        StopReason.PILOT,
    ]


def test_a_summary_writes_and_reads_the_old_strings() -> None:
    summary = RunSummary(
        out="o.jsonl", policy="p.yaml", model="m/x", stop_reason=StopReason.KEY_LIMIT
    )
    written = json.loads(json.dumps(summary.to_dict()))
    assert written["stop_reason"] == "key-limit"
    assert StopReason(written["stop_reason"]) is StopReason.KEY_LIMIT
    assert summary.stop_reason == "key-limit"  # a caller comparing strings reads as before
    assert render_result(summary).splitlines()[-1] == "stopped: key-limit"
    assert summary.exit_code == 1
    summary = dataclasses.replace(summary, stop_reason=StopReason.INTERRUPTED)
    assert summary.exit_code == 130


def test_a_run_that_did_not_end_as_asked_says_why_in_words_first() -> None:
    for reason in StopReason:
        said = reason.why()
        if reason.as_asked:
            assert said == []
            continue
        assert len(said) == 1 and said[0].startswith(f"not finished (exit {reason.exit_code}): ")
        assert said[0] != f"not finished (exit {reason.exit_code}): {reason.value}"  # words
        assert len(said[0]) <= 80
    summary = RunSummary(out="o.jsonl", policy="p.yaml", model="m/x", stop_reason=StopReason.KEY)
    assert (
        render_result(summary).splitlines()[0]
        == "not finished (exit 1): OpenRouter refused the key"
    )
    done = RunSummary(out="o.jsonl", policy="p.yaml", model="m/x")
    assert render_result(done).splitlines()[0] == "m/x via p.yaml -> o.jsonl"

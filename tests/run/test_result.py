"""The run's result is a value. ``RunResult`` is deep-frozen (tuples, read-only mappings, frozen
tallies); it is made once from what the job learned before sending (``RunStart``, the steps'
``Said``) and what the books counted; two shards' results add."""

from __future__ import annotations

import ast
import asyncio
import dataclasses
import json
import pickle
from collections.abc import Mapping
from decimal import Decimal
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest

from openrouter_probe.fake import serve
from openrouter_probe.generation import generate
from openrouter_probe.generation.audit import audit
from openrouter_probe.generation.export import export
from openrouter_probe.rules.snapshot import bundled_snapshot
from openrouter_probe.run.money.replay import replay_journal
from openrouter_probe.run.result import RunResult, RunSummary
from openrouter_probe.run.start import RunStart, Said
from openrouter_probe.run.stop import StopReason
from openrouter_probe.run.tallies import DatasetTally, ProviderTally
from tests._generate import POLICY, no_sleep, prompt_rows, records, write_prompts

PACKAGE = Path(__file__).resolve().parents[2] / "openrouter_probe"

#: Where a result is made: the books at the end of a run; a run that sends nothing (the output
#: already spent, the key blocks one request, nothing to send), a dry run, a verify run with
#: every request recorded already; and the value's own module (adding two, unpickling).
MAKERS = {
    "run/books/books.py",
    "run/paid.py",
    "generation/dry_run.py",
    "verify/run.py",
    "run/result.py",
}


def test_a_result_is_frozen() -> None:
    result = RunResult(out="o.jsonl", policy="p.yaml", model="m/x")
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.ok = 3  # type: ignore[misc]
    later = dataclasses.replace(result, stop_reason=StopReason.KEY_LIMIT, message="limit")
    assert (later.stop_reason, later.exit_code, result.exit_code) == (StopReason.KEY_LIMIT, 1, 0)
    assert RunSummary is RunResult  # the documented name, until 0.4.0


def test_a_result_is_its_start_and_what_the_run_counted() -> None:
    start = RunStart(out="o.jsonl", policy="p.yaml", model="m/x", rows_total=4)
    start = start.saying(Said(notes=("n1",), warnings=("w1",))).saying(Said(warnings=("w2",)))
    start = dataclasses.replace(start, datasets={"B3": DatasetTally(rows=4)})
    result = RunResult.of(start, ok=3, spent_before_usd=Decimal("0.25"))
    assert (result.rows_total, result.ok, result.spent_before_usd) == (4, 3, Decimal("0.25"))
    assert (result.notes, result.warnings) == (("n1",), ("w1", "w2"))
    assert result.datasets["B3"].rows == 4
    # every field of the start is the result's, declared once
    starts = {f.name for f in dataclasses.fields(RunStart)}
    results = [f.name for f in dataclasses.fields(RunResult)]
    assert starts < set(results) and len(results) == len(set(results))
    with pytest.raises(TypeError):
        RunResult.of(start, rows=1)
    # a list or a dict given is kept as a tuple or a read-only mapping
    made = RunResult(out="o", policy="p", model="m", warnings=["w"], output_tokens={"a": 1})
    assert made.warnings == ("w",) and isinstance(made.output_tokens, MappingProxyType)
    with pytest.raises(TypeError):
        made.output_tokens["a"] = 2  # type: ignore[index]


def _calls(name: str, attribute: str | None = None) -> dict[str, int]:
    """Where the package calls ``name`` (``name.attribute()`` when ``attribute``), by module."""
    found: dict[str, int] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if name not in text:
            continue  # no call to it here: parsing the other ~200 modules took 3.6 s a call
        for node in ast.walk(ast.parse(text)):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            hit = (
                isinstance(func, ast.Attribute)
                and func.attr == attribute
                and isinstance(func.value, ast.Name)
                and func.value.id == name
                if attribute
                else isinstance(func, ast.Name) and func.id == name
            )
            if hit:
                where = str(path.relative_to(PACKAGE))
                found[where] = found.get(where, 0) + 1
    return found


def test_only_the_books_and_the_runs_that_send_nothing_make_a_result() -> None:
    made = set(_calls("RunResult")) | set(_calls("RunResult", "of"))
    assert made <= MAKERS and "run/books/books.py" in made
    source = "\n".join(p.read_text(encoding="utf-8") for p in PACKAGE.rglob("*.py"))
    assert "SummaryDraft" not in source


def test_the_books_give_the_scheduler_its_result_at_the_end() -> None:
    runner = (PACKAGE / "run" / "schedule" / "runner.py").read_text(encoding="utf-8")
    assert "self.books.summarize(" in runner
    tree = ast.parse(runner)
    sets = [
        ast.unparse(t)
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign | ast.AugAssign)
        for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(t, ast.Attribute) and ast.unparse(t).startswith("self.before.")
    ]
    assert sets == []


def _mutable(value: Any, where: str) -> list[str]:
    """Where in ``value`` a list, dict, set or mutable dataclass is (``where``: its path)."""
    if isinstance(value, list | dict | set | bytearray):
        return [f"{where}: {type(value).__name__}"]
    found: list[str] = []
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        if not type(value).__dataclass_params__.frozen:  # type: ignore[attr-defined]
            found.append(f"{where}: mutable {type(value).__name__}")
        for f in dataclasses.fields(value):
            found += _mutable(getattr(value, f.name), f"{where}.{f.name}")
    elif isinstance(value, Mapping):
        if not isinstance(value, MappingProxyType):
            found.append(f"{where}: {type(value).__name__}")
        for key, item in value.items():
            found += _mutable(item, f"{where}[{key!r}]")
    elif isinstance(value, tuple | frozenset):
        for i, item in enumerate(value):
            found += _mutable(item, f"{where}[{i}]")
    return found


def _run(tmp: Path, base_url: str, out: str, **options: Any) -> RunResult:
    return asyncio.run(
        generate(
            tmp / "prompts.jsonl",
            policy=POLICY,
            out=tmp / out,
            base_url=base_url,
            sleep=no_sleep,
            max_tokens=200,
            concurrency=20,
            **options,
        )
    )


def test_a_real_result_holds_no_list_dict_set_or_mutable_dataclass(tmp_path: Path) -> None:
    rows = prompt_rows(30, datasets=3)
    rows[0] = {**rows[0], "id": rows[1]["id"]}  # a duplicate id: a warning
    write_prompts(tmp_path / "prompts.jsonl", rows)
    with serve(speed=0, seed=3) as fake:
        result = _run(tmp_path, fake.base_url, "out.jsonl", budget_usd=5)
        dry = _run(tmp_path, fake.base_url, "dry.jsonl", dry_run=True, shard=(0, 2))
    assert result.ok + result.truncated == 29 and result.warnings and result.notes
    assert result.providers and result.datasets and result.output_tokens
    assert dry.shard_shares and dry.stop_reason == StopReason.DRY_RUN
    assert _mutable(result, "result") == [] and _mutable(dry, "dry") == []
    # a pickle (a rank's result sent back) gives the same value
    assert pickle.loads(pickle.dumps(result)) == result


def test_an_audit_and_an_export_are_values_too(tmp_path: Path) -> None:
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(12, datasets=2))
    with serve(speed=0, seed=4) as fake:
        _run(tmp_path, fake.base_url, "out.jsonl", budget_usd=5)
    report = audit([tmp_path / "out.jsonl"], policy=POLICY, snapshot=bundled_snapshot())
    done = export([tmp_path / "out.jsonl"], fmt="sharegpt", output=tmp_path / "sft.jsonl")
    assert report.rows == done.read == 12 and done.not_answered  # (truncated: not written)
    assert done.written + sum(done.not_answered.values()) == 12
    with pytest.raises(dataclasses.FrozenInstanceError):
        report.failed = 1  # type: ignore[misc]
    assert report.sampling.counts and _mutable(report, "report") == []
    assert _mutable(done, "export") == []


def test_two_shards_results_add_to_the_whole_runs_facts(tmp_path: Path) -> None:
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(40, datasets=2))
    with serve(speed=0, seed=5) as fake:
        first = _run(tmp_path, fake.base_url, "s0.jsonl", shard=(0, 2), budget_usd=5)
        second = _run(tmp_path, fake.base_url, "s1.jsonl", shard=(1, 2), budget_usd=5)
        shards_billed = fake.ledger.total_usd
        whole = _run(tmp_path, fake.base_url, "all.jsonl", budget_usd=10)
        whole_billed = fake.ledger.total_usd - shards_billed
    both = first + second
    assert 0 < first.rows_total < 40 and both.rows_total == whole.rows_total == 40
    done = both.ok + both.truncated
    assert done == whole.ok + whole.truncated == 40
    assert both.requests == first.requests + second.requests
    assert both.spent_usd == shards_billed and whole.spent_usd == whole_billed
    journals = sum(replay_journal(tmp_path / f"s{i}.jsonl.ledger").spent_usd for i in (0, 1))
    assert both.spent_usd == journals
    recorded = sum(
        Decimal(str(r["cost_usd"])) for i in (0, 1) for r in records(tmp_path / f"s{i}.jsonl")
    )
    assert both.spent_usd == recorded
    assert both.budget_usd == whole.budget_usd == Decimal(10)
    assert {k: v.rows for k, v in both.datasets.items()} == {
        k: v.rows for k, v in whole.datasets.items()
    }
    assert sum(t.done for t in both.datasets.values()) == 40
    assert sum(t.rows for t in both.providers.values()) == 40
    assert both.out == f"{tmp_path / 's0.jsonl'}, {tmp_path / 's1.jsonl'}"
    assert both.stop_reason == StopReason.DONE


def test_the_worse_stop_reason_wins_and_unknown_stays_unknown() -> None:
    done = RunResult(out="a", policy="p", model="m", ok=2, spent_usd=Decimal(1))
    budget = dataclasses.replace(done, stop_reason=StopReason.BUDGET, message="cap")
    failed = dataclasses.replace(done, stop_reason=StopReason.ALL_FAILED, message="all failed")
    stopped = dataclasses.replace(done, stop_reason=StopReason.INTERRUPTED, message="signal")
    assert (done + budget).stop_reason == (budget + done).stop_reason == StopReason.BUDGET
    assert (budget + failed).message == (failed + budget).message == "all failed"
    assert (failed + stopped).stop_reason == StopReason.INTERRUPTED  # exit 130 over 1
    assert (done + budget).ok == 4 and (done + budget).spent_usd == Decimal(2)
    capped = dataclasses.replace(done, budget_usd=Decimal(3))
    assert (capped + capped).budget_usd == Decimal(6) and (capped + done).budget_usd is None
    tallies = RunResult(
        out="a", policy="p", model="m",
        providers={"X": ProviderTally(rows=1, cost_usd=Decimal("0.5"))},
        overshoot={"X": (1, 1.5, Decimal("0.1"))},
    )  # fmt: skip
    two = tallies + tallies
    assert two.providers["X"] == ProviderTally(rows=2, cost_usd=Decimal(1))
    assert two.overshoot["X"] == (2, 1.5, Decimal("0.2"))
    with pytest.raises(ValueError, match="different jobs"):
        done + dataclasses.replace(done, model="other")


def test_the_journal_is_named_journal_and_ledger_still_reads_for_one_release() -> None:
    """The client's record is the journal (issue 33 item 5: ``ledger`` is the fake's billing);
    the old attribute and JSON key still answer, the attribute with a warning, until 0.4.0."""
    summary = RunResult(out="o.jsonl", policy="p.yaml", model="m/x", journal="o.jsonl.ledger")
    record = summary.to_dict()
    assert (record["journal"], record["ledger"]) == ("o.jsonl.ledger", "o.jsonl.ledger")
    with pytest.warns(DeprecationWarning, match=r"RunResult\.journal.*0\.4\.0"):
        assert summary.ledger == "o.jsonl.ledger"
    assert "ledger" not in {f.name for f in dataclasses.fields(RunResult)}


def test_the_json_holds_every_field_in_a_stable_order_and_dumps() -> None:
    """``generate --json``: every field of the result (and the three derived figures), the run's
    end first, tallies by name whatever order the answers came in, all of it JSON."""
    result = RunResult(
        out="o.jsonl", policy="p.yaml", model="m/x", ok=3, spent_usd=Decimal("0.25"),
        budget_usd=Decimal(1), stop_reason=StopReason.BUDGET, message="cap reached",
        providers={"Zeta": ProviderTally(rows=1), "Alpha": ProviderTally(rows=2)},
        datasets={"tail": DatasetTally(rows=1), "head": DatasetTally(rows=2)},
        overshoot={"Zeta": (1, 1.5, Decimal("0.1"))}, output_tokens={"head": 10},
    )  # fmt: skip
    said = result.to_dict()
    fields = {f.name for f in dataclasses.fields(RunResult)}
    assert set(said) == fields | {"spent_total_usd", "remaining_usd", "ledger"}
    assert list(said)[:5] == ["out", "policy", "model", "stop_reason", "message"]
    assert (said["stop_reason"], said["message"]) == ("budget", "cap reached")
    assert list(said["providers"]) == ["Alpha", "Zeta"] and list(said["datasets"]) == [
        "head",
        "tail",
    ]
    assert said["providers"]["Alpha"]["rows"] == 2 and said["remaining_usd"] == 0.75
    assert json.loads(json.dumps(said)) == said

"""Audit (who served each row, outside the policy?) and export (ShareGPT, JSONL, parquet)."""

from __future__ import annotations

import asyncio
import json
from decimal import Decimal
from pathlib import Path

import pytest
from click.testing import CliRunner

from openrouter_probe.cli import cli
from openrouter_probe.errors import ConfigError
from openrouter_probe.generation import generate
from openrouter_probe.generation.audit import audit
from openrouter_probe.generation.export import export
from openrouter_probe.rules.snapshot import bundled_snapshot
from tests._generate import (
    POLICY,
    LedgerSender,
    http_failure,
    no_sleep,
    prompt_rows,
    records,
    write_prompts,
)


def _make_output(tmp_path: Path, n: int = 10, *, name: str = "out.jsonl", seed: int = 0) -> Path:
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(n, datasets=2))
    out = tmp_path / name
    asyncio.run(
        generate(
            tmp_path / "prompts.jsonl",
            policy=POLICY,
            out=out,
            send=LedgerSender(seed=seed),
            snapshot="bundled",
            sleep=no_sleep,
            max_tokens=64,
        )
    )
    return out


def _append(out: Path, record: dict[str, object]) -> None:
    with out.open("a") as handle:
        handle.write(json.dumps(record) + "\n")


def test_audit_per_provider_and_within_policy(tmp_path: Path) -> None:
    out = _make_output(tmp_path)
    rows = records(out)
    report = audit([out], policy=POLICY, snapshot=bundled_snapshot())
    (chutes,) = report.providers
    assert chutes.provider == "Chutes" and chutes.tags == ("chutes/int4",) and chutes.admitted
    assert chutes.rows == 10
    assert chutes.completion_tokens == sum(r["usage"]["completion_tokens"] for r in rows)
    assert chutes.cost_usd == sum(Decimal(str(r["cost_usd"])) for r in rows)
    assert chutes.truncated == sum(r["status"] == "truncated" for r in rows)
    assert report.exit_code == 0 and report.outside == ()
    assert report.predicted_usd is not None and report.predicted_usd > 0
    assert "every row was served by an endpoint" in report.render_notes()


def test_audit_bills_as_the_run_does_byok_cache_hits_and_reasoning_past_the_limit(
    tmp_path: Path,
) -> None:
    """The audit counts an answer as the run's books do: a cache hit adds no BYOK part (it cost
    nothing), billed output is completion plus reasoning when reasoning is reported above it."""
    out = tmp_path / "out.jsonl"
    byok = {"is_byok": True, "cost_details": {"upstream_inference_cost": 0.002}}
    rows = [
        ("past", "Chutes", "0.001", None, {"cost": 0.001, "completion_tokens": 16,
         "completion_tokens_details": {"reasoning_tokens": 19}}),
        ("hit", "Chutes", "0", "hit", {"cost": 0, "completion_tokens": 5, **byok}),
        ("own", "Chutes", "0.0021", None, {"cost": 0.0001, "completion_tokens": 5, **byok}),
        ("other", "DeepInfra", "0.001", None, {"cost": 0.001, "completion_tokens": 5}),
    ]  # fmt: skip
    for row_id, provider, cost, cache, usage in rows:
        _append(out, {"id": row_id, "dataset": "d0", "status": "ok", "provider": provider,
                      "usage": {"prompt_tokens": 10, **usage}, "cost_usd": float(cost),
                      "max_tokens": 20, "response_cache": cache})  # fmt: skip
    report = audit([out], policy=POLICY, snapshot=bundled_snapshot())
    chutes, other = report.providers
    assert (chutes.provider, chutes.rows, other.provider) == ("Chutes", 3, "DeepInfra")
    assert chutes.byok_usd == Decimal("0.002")  # the hit's upstream cost is not billed again
    assert chutes.cost_usd == Decimal("0.0031")
    assert (chutes.past_limit, chutes.worst_ratio) == (1, 35 / 20)  # 16 + 19 tokens of 20
    assert (other.past_limit, other.worst_ratio) == (0, 0.0)
    with pytest.raises(TypeError, match="does not add"):
        chutes + other


def test_an_answer_whose_cost_is_unknown_is_counted_apart_never_as_zero(tmp_path: Path) -> None:
    """A record's ``cost_usd`` is null when a turn's cost was unknown (``run.books.turns``): the
    audit counts that answer apart and says the provider's cost is a lower bound."""
    out = tmp_path / "out.jsonl"
    for row_id, cost in (("known", 0.002), ("unknown", None), ("later", None)):
        _append(out, {"id": row_id, "dataset": "d0", "status": "ok", "provider": "Chutes",
                      "usage": {"prompt_tokens": 10, "completion_tokens": 5},
                      "cost_usd": cost})  # fmt: skip
    report = audit([out], policy=POLICY, snapshot=bundled_snapshot())
    (chutes,) = report.providers
    assert (chutes.rows, chutes.cost_unknown, chutes.cost_usd) == (3, 2, Decimal("0.002"))
    assert report.provider_rows()[0]["cost_unknown"] == 2
    notes = report.render_notes()
    assert "3 rows served, 0 failed, 0 cancelled; realised at least $0.002000" in notes
    assert "Chutes: 2 answer(s) with no known cost in the output" in notes
    known = tmp_path / "known.jsonl"
    _append(known, {"id": "k", "dataset": "d0", "status": "ok", "provider": "Chutes",
                    "usage": {"completion_tokens": 5}, "cost_usd": 0.002})  # fmt: skip
    plain = audit([known], policy=POLICY, snapshot=bundled_snapshot())
    assert "cost_unknown" not in plain.provider_rows()[0]
    assert "realised $0.002000" in plain.render_notes()


def test_audit_of_only_failed_rows_does_not_claim_they_were_served(tmp_path: Path) -> None:
    out = tmp_path / "failed.jsonl"
    for i in range(3):
        _append(out, {"id": f"r{i}", "dataset": "d0", "status": "failed", "provider": None,
                      "error": {"kind": "transient", "message": "connection failed"}})  # fmt: skip
    notes = audit([out], policy=POLICY, snapshot=bundled_snapshot()).render_notes()
    assert "0 rows served, 3 failed" in notes
    assert "no row was served: nothing to check against the policy" in notes
    assert "every row was served" not in notes


def test_audit_flags_rows_outside_the_policy(tmp_path: Path) -> None:
    out = _make_output(tmp_path, 3)
    _append(
        out,
        {
            "id": "x1",
            "dataset": "d0",
            "status": "ok",
            "provider": "Fireworks",
            "usage": {"prompt_tokens": 10, "completion_tokens": 100},
            "cost_usd": 0.0003,
            "messages": [],
        },
    )
    _append(
        out,
        {
            "id": "x2",
            "dataset": "d0",
            "status": "failed",
            "error": {"status": 400, "message": "context"},
        },
    )
    report = audit([out], policy=POLICY, snapshot=bundled_snapshot())
    fireworks = next(p for p in report.providers if p.provider == "Fireworks")
    assert not fireworks.admitted and fireworks.tags == ("fireworks",)
    assert report.outside == (("x1", "Fireworks"),) and report.exit_code == 1
    assert report.failed == 1 and report.failed_by_kind == {"400": 1}
    assert fireworks.effective_usd_per_m == Decimal("3")
    assert "OUTSIDE THE POLICY: 1 row(s)" in report.render_notes()


def test_audit_cli_merges_shards_and_exits_1_outside(tmp_path: Path) -> None:
    a = _make_output(tmp_path, 4, name="a.jsonl")
    b = tmp_path / "b.jsonl"
    _append(
        b,
        {
            "id": "y",
            "dataset": "d0",
            "status": "ok",
            "provider": "BaseTen",
            "usage": {"completion_tokens": 5},
            "cost_usd": 0.00001,
        },
    )
    result = CliRunner().invoke(
        cli, ["audit", str(a), str(b), "--policy", str(POLICY), "--offline", "--format", "json"]
    )
    assert result.exit_code == 1, result.output
    doc = json.loads(result.stdout)
    assert {p["provider"] for p in doc["providers"]} == {"Chutes", "BaseTen"}
    assert doc["outside_policy"] == [{"id": "y", "provider": "BaseTen"}]
    ok = CliRunner().invoke(cli, ["audit", str(a), "--policy", str(POLICY), "--offline"])
    assert ok.exit_code == 0, ok.output
    assert "Chutes" in ok.stdout and "chutes/int4" in ok.stdout


def test_export_sharegpt_keeps_reasoning(tmp_path: Path) -> None:
    out = _make_output(tmp_path, 5)
    rows = {r["id"]: r for r in records(out)}
    target = tmp_path / "train.jsonl"
    summary = export([out], fmt="sharegpt", output=target, include_truncated=True)
    exported = records(target)
    assert summary.written == len(exported) == summary.read == 5
    first = exported[0]
    source = rows[first["id"]]
    assert first["conversations"] == [
        {"from": "human", "value": source["messages"][0]["content"]},
        {
            "from": "gpt",
            "value": source["content"],
            "reasoning_content": "thinking",
            "generated": True,
        },
    ]


def test_export_skips_failed_and_truncated_by_default(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    base = {
        "dataset": "d",
        "messages": [{"role": "user", "content": "q"}],
        "content": "a",
        "reasoning": None,
    }
    _append(out, {**base, "id": "ok", "status": "ok"})
    _append(out, {**base, "id": "cut", "status": "truncated"})
    _append(out, {**base, "id": "bad", "status": "failed"})
    _append(out, {**base, "id": "gone", "status": "cancelled"})
    target = tmp_path / "t.jsonl"
    summary = export([out], fmt="jsonl", output=target)
    assert summary.written == 1 and summary.not_answered == {"truncated": 1, "failed": 1}
    (row,) = records(target)
    assert row["id"] == "ok"
    assert row["conversations"] == [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "a", "reasoning_content": None, "generated": True},
    ]
    assert export([out], fmt="jsonl", output=target, include_truncated=True).written == 2


def test_export_parquet_roundtrip(tmp_path: Path) -> None:
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    out = _make_output(tmp_path, 4)
    target = tmp_path / "t.parquet"
    assert export([out], fmt="parquet", output=target, include_truncated=True).written == 4
    frame = pd.read_parquet(target)
    assert sorted(frame["id"]) == sorted(r["id"] for r in records(out))
    messages = json.loads(frame["conversations"][0])
    assert messages[-1]["role"] == "assistant" and messages[-1]["reasoning_content"] == "thinking"


def test_export_never_writes_over_its_input(tmp_path: Path) -> None:
    out = _make_output(tmp_path, 1)
    with pytest.raises(ConfigError, match="output=: the output"):
        export([out], fmt="jsonl", output=out)


def test_export_cli(tmp_path: Path) -> None:
    out = _make_output(tmp_path, 3)
    target = tmp_path / "sg.jsonl"
    result = CliRunner().invoke(
        cli, ["export", str(out), "--format", "sharegpt", "-o", str(target), "--include-truncated"]
    )
    assert result.exit_code == 0, result.output
    assert f"wrote 3 of 3 rows to {target} (sharegpt)" in result.stderr
    assert len(records(target)) == 3


def test_shards_cover_every_row_once_and_merge_in_audit(tmp_path: Path) -> None:
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(60))
    outs = []
    for i in range(3):
        out = tmp_path / f"shard{i}.jsonl"
        asyncio.run(
            generate(
                tmp_path / "prompts.jsonl",
                policy=POLICY,
                out=out,
                send=LedgerSender(seed=i),
                snapshot="bundled",
                sleep=no_sleep,
                max_tokens=16,
                shard=f"{i}/3",
            )
        )
        outs.append(out)
    ids = [r["id"] for out in outs for r in records(out)]
    assert sorted(ids) == sorted(f"r{i}" for i in range(60)) and len(set(ids)) == 60
    assert all(records(out) for out in outs)
    report = audit(outs, policy=POLICY, snapshot=bundled_snapshot())
    assert report.rows == 60 and report.exit_code == 0


def _cancel_in_flight(tmp_path: Path, rows: int = 20, in_flight: int = 5) -> LedgerSender:
    """A run of ``rows`` cancelled (the second Ctrl-C) with ``in_flight`` requests hanging."""
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(rows))
    gate = asyncio.Event()

    async def scenario() -> LedgerSender:
        sender = LedgerSender(seed=19)
        task = asyncio.ensure_future(
            generate(tmp_path / "prompts.jsonl", policy=POLICY, out=tmp_path / "out.jsonl",
                     send=sender, snapshot="bundled", sleep=no_sleep, concurrency=in_flight,
                     max_tokens=16)
        )  # fmt: skip
        while len(sender.ledger) < 8:
            await asyncio.sleep(0)
        sender.gate = gate  # the next requests hang in flight
        while sender.in_flight < in_flight:
            await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return sender

    return asyncio.run(scenario())


def test_audit_counts_cancelled_requests_as_generate_counts_them(tmp_path: Path) -> None:
    """Issue 18: after a double Ctrl-C, audit said $0.655 realised while generate counted $13.06
    against the cap: the `cancelled` lines and their possibly billed money were left out."""
    first = _cancel_in_flight(tmp_path)
    out = tmp_path / "out.jsonl"
    cancelled = [r for r in records(out) if r["status"] == "cancelled"]
    possibly = sum(Decimal(str(r["possibly_billed_usd"])) for r in cancelled)
    assert len(cancelled) == 5 and possibly > 0
    report = audit([out], policy=POLICY, snapshot=bundled_snapshot())
    assert report.rows == len(first.ledger) and report.realised_usd == first.billed_usd
    assert (report.cancelled, report.cancelled_requests) == (5, 5)
    assert report.possibly_billed_usd == possibly
    assert report.spent_usd == first.billed_usd + possibly
    # what generate counts against the cap when it resumes, to the last digit
    resumed = asyncio.run(
        generate(tmp_path / "prompts.jsonl", policy=POLICY, out=out, send=LedgerSender(seed=20),
                 snapshot="bundled", sleep=no_sleep, max_tokens=16)
    )  # fmt: skip
    assert resumed.spent_before_usd == report.spent_usd
    after = audit([out], policy=POLICY, snapshot=bundled_snapshot())
    assert (after.rows, after.cancelled, after.cancelled_requests) == (20, 0, 5)
    assert after.spent_usd == resumed.spent_total_usd == after.realised_usd + possibly
    assert after.render_notes().splitlines()[:2] == [
        f"20 rows served, 0 failed, 0 cancelled; realised ${after.realised_usd:,.6f}",
        f"spent, as generate counts it against budget_usd: ${after.spent_usd:,.6f} = "
        f"${after.realised_usd:,.6f} realised + ${possibly:,.6f} possibly billed (5 cancelled in "
        "flight; each at its worst case: the provider may have billed it)",
    ]
    doc = json.loads(
        CliRunner()
        .invoke(cli, ["audit", str(out), "--policy", str(POLICY), "--offline", "--format", "json"])
        .stdout
    )
    assert doc["spent_usd"] == float(after.spent_usd)
    assert doc["possibly_billed_usd"] == float(possibly) and doc["cancelled_requests"] == 5


def test_audit_counts_requests_in_flight_at_a_kill_from_the_journal(tmp_path: Path) -> None:
    out = _make_output(tmp_path, 3)
    journal = out.with_name(out.name + ".ledger")
    before = journal.read_bytes()
    with journal.open("a") as handle:  # a later run, killed with one request in flight
        handle.write('{"run":"deadbeef0001","started_utc":"2026-12-01T00:00:00Z"}\n')
        handle.write('{"sent":1,"run":"deadbeef0001","id":"r9","reserved_usd":"0.0125"}\n')
        handle.write('{"sent":2,"run":"deadbeef0001","id":"r8","reserv')  # torn by the kill
    report = audit([out], policy=POLICY, snapshot=bundled_snapshot())
    assert report.killed_in_flight == 1 and report.cancelled_requests == 0
    assert report.possibly_billed_usd == Decimal("0.0125")
    assert report.spent_usd == report.realised_usd + Decimal("0.0125")
    assert "(1 in flight when a run was killed; each at its worst case" in report.render_notes()
    # audit reads, never repairs: the torn tail is still there for generate to cut
    assert journal.read_bytes().startswith(before) and journal.read_bytes().endswith(b"reserv")


def test_audit_beside_a_running_generate_says_it_is_running_not_killed(tmp_path: Path) -> None:
    """Review of 0.3: ``audit`` on an output a generate was still writing said its requests in
    flight were "in flight when a run was killed". A lock held on the output's lock file is a
    run still going, and the notes say whose; a lock file left by a kill is not, even when the
    PID it names is alive again (reused); one of another machine is said as such."""
    import os
    import socket

    from openrouter_probe.run.lock import OutputLock, lock_path

    out = _make_output(tmp_path, 3)
    journal = out.with_name(out.name + ".ledger")
    with journal.open("a") as handle:  # a run killed with one out, then a run with one out
        handle.write('{"run":"dead00000001","started_utc":"2026-11-30T00:00:00Z"}\n')
        handle.write('{"sent":1,"run":"dead00000001","id":"r8","reserved_usd":"0.0100"}\n')
        handle.write('{"run":"feedbeef0001","started_utc":"2026-12-01T00:00:00Z"}\n')
        handle.write('{"sent":1,"run":"feedbeef0001","id":"r9","reserved_usd":"0.0125"}\n')
    with OutputLock(out, command="generate"):
        report = audit([out], policy=POLICY, snapshot=bundled_snapshot())
    assert (report.running_in_flight, report.killed_in_flight) == (1, 1)
    assert report.possibly_billed_usd == Decimal("0.0225")
    notes = report.render_notes()
    assert f"{out} is being written by `generate` (pid {os.getpid()} on" in notes
    assert "(1 in flight when a run was killed, 1 in flight in a run still going; each" in notes
    # a kill -9 leaves the file behind, unlocked; its PID may name a live process since
    holder = {"pid": os.getpid(), "host": socket.gethostname(), "command": "generate",
              "since": "2026-12-01T00:00:00Z"}  # fmt: skip
    lock_path(out.resolve()).write_text(json.dumps(holder) + "\n")
    report = audit([out], policy=POLICY, snapshot=bundled_snapshot())
    assert (report.running_in_flight, report.killed_in_flight, report.running) == (0, 2, ())
    for pid in (True, 10**30, "7"):  # a damaged file names no process
        lock_path(out.resolve()).write_text(json.dumps({**holder, "pid": pid}) + "\n")
        assert audit([out], policy=POLICY, snapshot=bundled_snapshot()).killed_in_flight == 2
    lock_path(out.resolve()).write_text(json.dumps({**holder, "host": "node-7"}) + "\n")
    report = audit([out], policy=POLICY, snapshot=bundled_snapshot())
    assert (report.running_in_flight, report.killed_in_flight) == (1, 1)
    assert "on another machine (whether it still runs cannot be seen here)" in (
        report.render_notes()
    )


def test_a_row_sent_again_with_redo_failed_is_served_in_audit_and_export(tmp_path: Path) -> None:
    """Noticed while accounting for cancelled lines: a row that failed and then succeeded with
    --redo-failed is recorded twice, failed first; audit counted it failed and export left it out."""
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(4))
    out = tmp_path / "out.jsonl"

    def fail_r1(request: dict[str, object], attempt: int) -> object:
        content = request["messages"][-1]["content"]  # type: ignore[index]
        return http_failure(400, "context too long") if content.startswith("question 1 ") else None

    for sender, redo in ((LedgerSender(seed=1, fail=fail_r1), False), (LedgerSender(seed=2), True)):
        asyncio.run(
            generate(tmp_path / "prompts.jsonl", policy=POLICY, out=out, send=sender,
                     snapshot="bundled", sleep=no_sleep, max_tokens=16, redo_failed=redo)
        )  # fmt: skip
    assert [(r["id"], r["status"]) for r in records(out) if r["id"] == "r1"] == [
        ("r1", "failed"),
        ("r1", "ok" if records(out)[-1]["finish_reason"] == "stop" else "truncated"),
    ]
    report = audit([out], policy=POLICY, snapshot=bundled_snapshot())
    assert (report.rows, report.failed) == (4, 0)
    train = tmp_path / "train.jsonl"
    assert export([out], fmt="jsonl", output=train, include_truncated=True).written == 4
    assert sorted(r["id"] for r in records(train)) == ["r0", "r1", "r2", "r3"]

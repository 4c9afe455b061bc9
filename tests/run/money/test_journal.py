"""The spend journal (``OUT.jsonl.ledger``): written before each request, replayed on every start.

Replay is tested on hand-written journals (torn lines, unsettled and settled attempts, attempts an
output record accounts for); the runner's use of it with the in-process sender (no sockets): a
journal line for every request before it is sent, and a resume after a simulated SIGKILL counting
what was in flight. The real SIGKILL of the CLI is tested on the fake server in
``tests/generation/test_generate_fake.py``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import socket
import tracemalloc
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from openrouter_probe.errors import ConfigError
from openrouter_probe.generation import generate
from openrouter_probe.run.books.output import load_resume_state
from openrouter_probe.run.money.journal import Journal, journal_path
from openrouter_probe.run.money.replay import replay_journal
from openrouter_probe.run.report import render_result
from openrouter_probe.run.send.transport import Failure
from tests._generate import POLICY, LedgerSender, no_sleep, prompt_rows, records, write_prompts


def _journal(path: Path, lines: list[dict[str, Any]], tail: str = "") -> Path:
    path.write_text("".join(json.dumps(x) + "\n" for x in lines) + tail, encoding="utf-8")
    return path


def _sent(n: int, ident: str, usd: str, run: str = "A") -> dict[str, Any]:
    return {"sent": n, "run": run, "id": ident, "reserved_usd": usd}


def _settled(n: int, usd: str | None, run: str = "A", **more: Any) -> dict[str, Any]:
    return {"settled": n, "run": run, "cost_usd": usd, **more}


def test_ledger_path_is_beside_the_output_and_not_a_jsonl() -> None:
    assert journal_path("runs/out.jsonl") == Path("runs/out.jsonl.ledger")
    assert not journal_path("out.jsonl").name.endswith(".jsonl")  # `*.jsonl` never matches it


def _gen_line(n: int, gen: str, run: str = "A") -> dict[str, Any]:
    return {"gen": n, "run": run, "id": gen}


def test_replay_totals_the_money_of_every_attempt(tmp_path: Path) -> None:
    path = _journal(
        tmp_path / "out.jsonl.ledger",
        [
            {"run": "A", "started_utc": "2026-11-30T10:00:00Z", "command": "generate"},
            {**_sent(1, "r1", "0.004"), "ds": "d0"},  # answered: its cost
            _settled(1, "0.0021"),
            {**_sent(2, "r2", "0.004"), "ds": "d1"},  # in flight at the kill, no id: worst case
            _sent(3, "r3", "0.004"),  # a billed 502, retried...
            _settled(3, "0.0005"),
            _sent(4, "r3", "0.004"),  # ...in flight at the kill, its id known: to settle
            _gen_line(4, "gen-4"),
            _sent(5, "r4", "0.004"),  # an unbilled 429
            _settled(5, None),
            {**_sent(6, "r5", "0.003"), "ds": "d0"},  # cancelled in flight: unknown, to settle
            _gen_line(6, "gen-6"),
            _settled(6, None, unknown=True, cancelled=True),
            {"run": "B", "started_utc": "2026-11-30T11:00:00Z", "command": "generate"},
            _sent(1, "r2", "0.004", run="B"),  # the same row resent by run B, answered
            _settled(1, "0.0019", run="B"),
            _settled(99, "1", run="B"),  # a settle of an unknown attempt: ignored
            {"future": "a line kind this version does not know"},
            _sent(2, "r6", "0.007", run="B"),  # timed out, then /generation said what it cost
            _gen_line(2, "gen-B2", run="B"),
            _settled(2, None, run="B", unknown=True),
            {"reconciled": 2, "run": "B", "cost_usd": "0.001"},
            _settled(2, None, run="B", unknown=True),  # a late settle never undoes it
            _sent(3, "r7", "0.002", run="B"),
        ],
        tail='{"settled":3,"run":"B","cost_us',  # the settle of r7 torn by a crash
    )
    replay = replay_journal(path)
    assert replay.torn == b'{"settled":3,"run":"B","cost_us'
    assert path.read_text().endswith('"reserved_usd": "0.002"}\n')  # cut back to whole lines
    assert replay.attempts == 9 and replay.runs == {"A", "B"}
    assert [h["run"] for h in replay.headers] == ["A", "B"]
    assert replay.settled_usd == Decimal("0.0021") + Decimal("0.0005") + Decimal(
        "0.0019"
    ) + Decimal("0.001")
    # never settled: r2, r3's second attempt, r7; unknown: r5's cancellation
    assert replay.in_flight == 3 and replay.unknown == 1
    assert replay.possibly_billed_usd == Decimal("0.004") * 2 + Decimal("0.003") + Decimal("0.002")
    assert replay.spent_usd == Decimal("0.0185")
    assert replay.reconciled == 1 and replay.reconciled_back_usd == Decimal("0.006")
    assert [
        (p.run, p.attempt, p.generation_id, p.reserved_usd, p.dataset) for p in replay.pending
    ] == [
        ("A", 4, "gen-4", Decimal("0.004"), None),
        ("A", 6, "gen-6", Decimal("0.003"), "d0"),
    ]
    assert replay.by_dataset == {"d0": Decimal("0.0051"), "d1": Decimal("0.004")}
    assert replay.path == path
    # Replaying again gives the same answer (the repair is idempotent).
    again = replay_journal(path)
    assert again.torn is None and again.spent_usd == Decimal("0.0185")


def test_replay_knows_every_run_and_reads_past_lines_it_does_not_know(tmp_path: Path) -> None:
    path = _journal(
        tmp_path / "out.jsonl.ledger",
        [
            {"run": "H", "started_utc": "2026-11-30T10:00:00Z"},  # a run that sent nothing
            ["not", "an", "object"],
            "a string",
            {**_sent(1, "r1", "0.5", run="S"), "ds": 5},  # a run whose header was lost
            _gen_line(1, "gen-1", run="S"),
            _settled(1, None, run="S", unknown=True),
            {"reconciled": 1, "run": "S", "cost_usd": "0.1"},
            {**_sent(2, "r2", "0.5", run="S"), "ds": "d"},
            _gen_line(2, "gen-2", run="S"),
            {"reconciled": 2, "run": "S", "cost_usd": "0.2"},
            {"gen": 2, "run": "S", "id": 7},  # not an id: ignored
        ],
    )
    replay = replay_journal(path)
    assert replay.runs == {"H", "S"} and [h["run"] for h in replay.headers] == ["H"]
    assert replay.reconciled == 2 and replay.reconciled_back_usd == Decimal("0.7")
    assert replay.spent_usd == replay.settled_usd == Decimal("0.3")
    assert replay.by_dataset == {"d": Decimal("0.2")}  # a dataset that is not a name: none
    assert replay.pending == []


def test_replay_holds_the_attempts_still_open_not_every_attempt(tmp_path: Path) -> None:
    """A settled attempt is added to the totals as its line comes and dropped: a journal of
    20,000 answers replays in little memory. One a later line still names is kept: a
    ``reconciled`` line's (its cost wins) and a batch plan's (the plan's settled line)."""
    lines: list[dict[str, Any]] = [{"run": "A", "started_utc": "2026-11-30T10:00:00Z"}]
    for n in range(1, 20_001):
        lines += [{**_sent(n, f"r{n}", "0.004"), "ds": f"d{n % 3}"}, _settled(n, "0.001")]
    lines += [
        _sent(20_001, "x1", "0.004"),
        _settled(20_001, "0.002"),
        _gen_line(20_001, "gen-late"),  # its id after its settle: still the journal's
        {"reconciled": 20_001, "run": "A", "cost_usd": "0.003"},
        {
            "batch_plan": "p1",
            "run": "A",
            "model": "m",
            "after": 1,
            "worst_usd": "0.004",
            "lines": [["c1", 20_002]],
        },
        _sent(20_002, "x2", "0.004"),
        _settled(20_002, "0.0015"),
    ]
    path = _journal(tmp_path / "out.jsonl.ledger", lines)
    tracemalloc.start()
    try:
        replay = replay_journal(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1_000_000  # every attempt held: ~8 MB
    assert replay.attempts == 20_002 and replay.runs == {"A"}
    assert replay.settled_usd == Decimal("20") + Decimal("0.003") + Decimal("0.0015")
    assert replay.reconciled == 1 and replay.reconciled_back_usd == Decimal("0.001")
    assert list(replay.by_dataset) == ["d1", "d2", "d0"]  # as their first attempts came
    assert replay.by_dataset["d1"] == Decimal("6.667")
    assert replay.generation_ids == {"gen-late"}
    [batch] = replay.batches
    assert batch.settled == {"c1"} and batch.lines["c1"][:2] == (20_002, Decimal("0.0015"))


def test_a_torn_sent_line_was_never_sent(tmp_path: Path) -> None:
    path = _journal(tmp_path / "j.ledger", [_sent(1, "r1", "0.5")], tail='{"sent":2,"run":"A","i')
    replay = replay_journal(path)
    assert replay.attempts == 1 and replay.possibly_billed_usd == Decimal("0.5")


def test_a_damaged_journal_is_named_by_line(tmp_path: Path) -> None:
    path = _journal(tmp_path / "out.jsonl.ledger", [_sent(1, "r1", "0.5")], tail="garbage\n")
    with pytest.raises(ConfigError, match=r"out\.jsonl\.ledger:2: not a spend journal line"):
        replay_journal(path)
    _journal(path, [_sent(1, "r1", "-3")])
    with pytest.raises(ConfigError, match=r"ledger:1: '-3' is not an amount of USD"):
        replay_journal(path)
    _journal(path, [{"sent": "one", "run": "A", "id": "r1"}])
    with pytest.raises(ConfigError, match=r"ledger:1: attempt 'one' is not a number"):
        replay_journal(path)
    damaged = "; the file is damaged. Restore it, or delete it: the output's records then count"
    for line, what in (
        ({"reconciled": 1, "run": "A", "cost_usd": "n/a"}, "'n/a' is not an amount of USD"),
        ({"settled": 1, "run": "A", "cost_usd": "-1"}, "'-1' is not an amount of USD"),
        ({"settled": "x", "run": "A", "cost_usd": "1"}, "attempt 'x' is not a number"),
    ):
        _journal(path, [_sent(1, "r1", "0.5"), line])
        with pytest.raises(ConfigError) as info:
            replay_journal(path)
        assert str(info.value).startswith(f"{path}:2: {what}{damaged}")
    _journal(path, [_sent(1, "r1", "x")])
    with pytest.raises(ConfigError, match=rf"^{path}:1: 'x' is not an amount of USD{damaged}"):
        replay_journal(path)
    _journal(path, [_sent(1, "r1", "1")], tail="garbage\n")
    with pytest.raises(ConfigError, match=rf"^{path}:2: not a spend journal line .*{damaged}"):
        replay_journal(path)


def test_a_journal_without_its_output_is_refused(tmp_path: Path) -> None:
    path = _journal(tmp_path / "out.jsonl.ledger", [_sent(1, "r1", "0.5")])
    with pytest.raises(ConfigError) as info:
        replay_journal(path, output_exists=False)
    assert "without its output file out.jsonl" in str(info.value)
    assert "delete the journal to start afresh" in str(info.value)
    assert replay_journal(tmp_path / "absent.ledger").spent_usd == 0
    # a journal with no attempt (a run that sent nothing) records no money: no refusal
    _journal(path, [{"run": "A", "started_utc": "2026-11-30T10:00:00Z"}])
    assert replay_journal(path, output_exists=False).spent_usd == 0


def test_ledger_lines_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "out.jsonl.ledger"
    with Journal(path, run_id="R", header={"out": "out.jsonl", "budget_usd": Decimal(5)}) as j:
        first = j.sent(json.dumps('r"1'), Decimal("0.00038018"), json.dumps("B3"))
        second = j.sent(json.dumps("r2"), Decimal("0.001"))
        # The sent lines are in the file (the OS) before the requests leave; settles may wait.
        assert path.read_text().count('"sent"') == 2
        third = j.sent(json.dumps("r3"), Decimal("0.002"))
        j.generation(first, "gen-1")  # outside an event loop: flushed at once
        assert '"gen":1' in path.read_text()
        j.settle(first, Decimal("0.00021"))
        j.settle(second, None)
        j.settle_unknown(third)
        j.reconciled("R", third, Decimal("0.0004"))
    text = path.read_text()
    assert re.match(r'\{"run":"R","started_utc":"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ","out":', text)
    lines = [json.loads(x) for x in text.splitlines()]
    assert lines[0]["run"] == "R" and lines[0]["budget_usd"] == "5"
    assert lines[0]["pid"] == os.getpid() and lines[0]["host"] == socket.gethostname()
    assert lines[1] == {
        "sent": 1,
        "run": "R",
        "id": 'r"1',
        "ds": "B3",
        "reserved_usd": "0.00038018",
    }
    assert lines[2] == {"sent": 2, "run": "R", "id": "r2", "ds": None, "reserved_usd": "0.001"}
    assert lines[4] == {"gen": 1, "run": "R", "id": "gen-1"}
    assert lines[5] == {"settled": 1, "run": "R", "cost_usd": "0.00021"}
    assert lines[6] == {"settled": 2, "run": "R", "cost_usd": None}
    assert lines[7] == {"settled": 3, "run": "R", "unknown": True}
    assert lines[8] == {"reconciled": 3, "run": "R", "cost_usd": "0.0004"}
    replay = replay_journal(path)
    assert replay.spent_usd == Decimal("0.00061") and replay.by_dataset == {
        "B3": Decimal("0.00021")
    }


async def _gen(tmp: Path, sender: LedgerSender, **options: Any) -> Any:
    options.setdefault("snapshot", "bundled")
    options.setdefault("sleep", no_sleep)
    return await generate(
        tmp / "prompts.jsonl", policy=POLICY, out=tmp / "out.jsonl", send=sender, **options
    )


def test_every_request_is_journaled_before_it_is_sent(tmp_path: Path) -> None:
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(30))
    journal = tmp_path / "out.jsonl.ledger"
    seen_before_send: list[int] = []
    sender = LedgerSender(seed=1)
    original = sender.__call__

    async def send(body: bytes, *, stream: bool, **_: Any) -> Any:
        seen_before_send.append(journal.read_text().count('"sent"'))
        return await original(body, stream=stream)

    summary = asyncio.run(_gen(tmp_path, send, concurrency=7, max_tokens=50))  # type: ignore[arg-type]
    assert seen_before_send == sorted(seen_before_send)
    # When the k-th request left, k sent lines were already in the file.
    assert all(n >= i + 1 for i, n in enumerate(seen_before_send))
    lines = [json.loads(x) for x in journal.read_text().splitlines()]
    sent = [x for x in lines if "sent" in x]
    settled = [x for x in lines if "settled" in x]
    assert len(sent) == len(settled) == summary.requests == 30
    costs = {x["settled"]: Decimal(x["cost_usd"]) for x in settled}
    assert sum(costs.values()) == sender.billed_usd
    run_id = lines[0]["run"]
    out = records(tmp_path / "out.jsonl")
    assert {r["run_id"] for r in out} == {run_id}
    replay = replay_journal(journal)
    assert replay.spent_usd == sender.billed_usd and replay.possibly_billed_usd == 0
    # the journal knows the run: the records count no money of their own
    assert load_resume_state(tmp_path / "out.jsonl", journal_runs=replay.runs).unjournaled == []
    # without it, each record's money is unknown (what the record states is only its floor)
    alone = load_resume_state(tmp_path / "out.jsonl").unjournaled
    assert len(alone) == 30 and all(u.generation_id for u in alone)
    assert sum(u.recorded_usd for u in alone) == sender.billed_usd


def test_resume_after_a_kill_counts_what_was_in_flight(tmp_path: Path) -> None:
    """A SIGKILL as the journal sees it: sent lines without settles, records never written."""
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(40))
    out, journal = tmp_path / "out.jsonl", tmp_path / "out.jsonl.ledger"
    first = LedgerSender(seed=3)
    asyncio.run(_gen(tmp_path, first, concurrency=8, max_tokens=400))
    # Tear a record in half and forget the 6 after it, with their settles: 7 requests
    # that the provider billed and that no record holds, as a kill -9 would leave them.
    lines = out.read_text().splitlines(keepends=True)
    lost = [json.loads(x) for x in lines[-7:]]
    out.write_text("".join(lines[:-7]) + lines[-7][:40])
    lost_ids = {r["id"] for r in lost}
    kept = []
    reserved = Decimal(0)
    sent_of: dict[int, str] = {}
    for text in journal.read_text().splitlines(keepends=True):
        line = json.loads(text)
        if "sent" in line:
            sent_of[line["sent"]] = line["id"]
            if line["id"] in lost_ids:
                reserved += Decimal(line["reserved_usd"])
        if "settled" in line and sent_of[line["settled"]] in lost_ids:
            continue
        kept.append(text)
    journal.write_text("".join(kept))
    recorded = sum(Decimal(str(json.loads(x)["cost_usd"])) for x in lines[:-7])
    assert recorded + sum(Decimal(str(r["cost_usd"])) for r in lost) == first.billed_usd

    second = LedgerSender(seed=4)
    summary = asyncio.run(_gen(tmp_path, second, concurrency=8, max_tokens=400))
    assert summary.killed_in_flight_before == 7
    assert summary.possibly_billed_before_usd == reserved >= first.billed_usd - recorded
    assert summary.spent_before_usd == recorded + reserved
    assert "7 in flight when a run was killed" in render_result(summary)
    # Only the rows in flight were sent again; every finished one was not.
    assert sorted("r" + second.row_id(json.loads(b)) for b in second.bodies) == sorted(lost_ids)
    # A third start still counts them (they may have been billed), and sends nothing.
    third = LedgerSender(seed=5)
    again = asyncio.run(_gen(tmp_path, third, concurrency=8, max_tokens=400))
    assert third.bodies == [] and again.possibly_billed_before_usd == reserved
    assert again.spent_before_usd == recorded + reserved + second.billed_usd


def test_a_billed_retry_of_a_row_that_never_finished_counts(tmp_path: Path) -> None:
    """A billed 502 then the run stopped (402) before the row finished: only the journal has it."""
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(1))
    billed_502 = Failure(kind="transient", message="502", status=502, cost_usd=Decimal("0.0007"))
    no_credit = Failure(kind="run", message="Insufficient credits", status=402)

    def fail(request: dict[str, Any], attempt: int) -> Failure | None:
        return billed_502 if attempt == 1 else no_credit

    summary = asyncio.run(_gen(tmp_path, LedgerSender(seed=6, fail=fail), max_tokens=20))
    assert summary.stop_reason == "credits" and records(tmp_path / "out.jsonl") == []
    assert summary.spent_usd == Decimal("0.0007")
    again = asyncio.run(_gen(tmp_path, LedgerSender(seed=7), max_tokens=20))
    assert again.spent_before_usd == Decimal("0.0007") and again.possibly_billed_before_usd == 0
    assert again.spent_total_usd == Decimal("0.0007") + again.spent_usd
    assert f"${again.spent_total_usd:.6f} in all" in render_result(again)


def test_a_journal_whose_output_was_deleted_stops_the_run(tmp_path: Path) -> None:
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(3))
    asyncio.run(_gen(tmp_path, LedgerSender(seed=8), max_tokens=20))
    (tmp_path / "out.jsonl").unlink()
    sender = LedgerSender(seed=9)
    with pytest.raises(ConfigError, match=r"a spend journal without its output file out\.jsonl"):
        asyncio.run(_gen(tmp_path, sender, max_tokens=20))
    assert sender.bodies == []


def test_audit_skips_the_journal(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from openrouter_probe.generation.records import merged_records

    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(4))
    asyncio.run(_gen(tmp_path, LedgerSender(seed=10), max_tokens=20))
    everything = sorted(p for p in tmp_path.iterdir() if p.name.startswith("out"))
    assert [p.name for p in everything] == ["out.jsonl", "out.jsonl.ledger"]
    with caplog.at_level(logging.WARNING):
        rows = list(merged_records(everything))  # `audit out*` in a shell
    assert sorted(r["id"] for r in rows) == ["r0", "r1", "r2", "r3"]
    assert "out.jsonl.ledger: skipped: the spend journal" in caplog.text


def test_a_journal_is_written_only_while_open_and_never_fsynced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[int] = []
    monkeypatch.setattr(os, "fsync", lambda fd: synced.append(fd))
    ledger = Journal(tmp_path / "j.ledger")
    assert len(ledger.run_id) == 12
    for call in (lambda: ledger.sent('"r1"', Decimal(1)), lambda: ledger.settle(1, None)):
        with pytest.raises(RuntimeError, match="the spend journal is not open"):
            call()
    with ledger:
        ledger.sent('"r1"', Decimal(1))
        ledger.settle_unknown(1, cancelled=True)
    assert synced == []  # flushed to the OS, not to the disk: a kill cannot lose it
    with pytest.raises(RuntimeError, match="the spend journal is not open"):
        ledger.sent('"r2"', Decimal(1))
    last = json.loads((tmp_path / "j.ledger").read_text().splitlines()[-1])
    assert last == {"settled": 1, "run": ledger.run_id, "unknown": True, "cancelled": True}


def test_lines_of_one_turn_of_the_event_loop_share_one_flush(tmp_path: Path) -> None:
    path = tmp_path / "j.ledger"

    async def scenario() -> list[int]:
        counts = []
        with Journal(path, run_id="R") as ledger:
            assert ledger._handle is not None
            flushes = [0]
            original = ledger._handle.flush

            def flush() -> None:
                flushes[0] += 1
                original()

            ledger._handle.flush = flush  # type: ignore[method-assign]
            for turn in range(2):
                n = ledger.sent(json.dumps(f"r{turn}"), Decimal(1))
                ledger.generation(n, f"gen-{turn}")
                ledger.settle_unknown(n)
                ledger.reconciled("R", n, Decimal("0.5"))
                assert path.read_text().count('"gen"') == turn  # buffered for now
                await asyncio.sleep(0)  # the turn ends: one flush
                counts.append(path.read_text().count('"gen"'))
            assert flushes[0] == 4  # the two sent lines, one flush per turn
        return counts

    assert asyncio.run(scenario()) == [1, 2]
    assert replay_journal(path).reconciled == 2

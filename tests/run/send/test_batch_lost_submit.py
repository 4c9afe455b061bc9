"""A batch submit whose answer was lost: its batch hidden from the list past the search, or the
client's clock minutes ahead of the server's.

A child runs ten rows in batches of five, one at a time, and dies (``os._exit``, as a SIGKILL)
right after the second ``POST /batches`` made its batch, before the answer is read. The fake lives
in this process on a ``ManualClock``: set once so that the first batch finishes while the child
polls, then moved only by the resumes' injected sleeps. Then resumes at the same cap. What the
fake's ledger billed, what its batches hold and what the journal counts are checked: no row billed
in two completed batches unless the cap paid for both, billed <= cap, counted >= billed, every
billed answer recorded (a row's second answer, when the cap paid for both, settled in the journal).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

import openrouter_probe as orp
from openrouter_probe.fake import ManualClock
from openrouter_probe.run.money.replay import replay_journal
from openrouter_probe.run.send.batch_plan import BatchOptions
from tests.conftest import ROOT

HERE = ROOT / "examples" / "batch"
KEY = "sk-fake-batch-lost-submit"
#: the issue's cap: the second batch's worst case fits once beside the first batch, not twice
TIGHT = Decimal("0.0196")


@pytest.fixture(scope="module")
def snap() -> Any:
    return orp.load_snapshot(HERE / "kimi-k3.snapshot.json")


@pytest.fixture
def policy(tmp_path: Path, snap: Any) -> Path:
    compiled = orp.compile_policy(orp.load_spec(HERE / "kimi-k3.spec.yaml"), snap)
    return compiled.save(tmp_path / "kimi-k3.yaml")


def _prompts(path: Path) -> Path:
    rows = [{"id": f"r{i}", "prompt": f"question {i}: " + "why " * (i % 7 + 1)} for i in range(10)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _killed_at_the_second_submit(
    options: dict[str, Any], clock: ManualClock, journal: Path, finished_at: float
) -> None:
    """The child dies right after its second POST made a batch; the fake's clock is set to
    ``finished_at`` (the first batch done) once its id is journaled, and moves no more."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests._child", json.dumps(options)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT), "CHILD_KILL": "create:2"},
    )
    stop = threading.Event()

    def moving() -> None:
        while not stop.is_set():
            text = journal.read_text(encoding="utf-8") if journal.exists() else ""
            if '"batch_id"' in text and clock.now() < finished_at:
                clock.set(finished_at)
            stop.wait(0.005)  # watching the child's journal (the fake's clock is virtual)

    mover = threading.Thread(target=moving, daemon=True)
    mover.start()
    try:
        _, err = proc.communicate(timeout=120)
    finally:
        stop.set()
        mover.join()
    assert proc.returncode == 9, err.decode()[-3000:]


def _resume(clock: ManualClock, options: dict[str, Any]) -> Any:
    async def sleep(seconds: float) -> None:
        clock.advance(seconds)
        await asyncio.sleep(0)

    args = dict(options)
    prompts = args.pop("prompts")
    args["batch"] = BatchOptions(**args["batch"])
    return asyncio.run(orp.generate(prompts, sleep=sleep, clock=clock.now, **args))


def _scenario(
    tmp_path: Path,
    snap: Any,
    policy: Path,
    *,
    cap: Decimal,
    faults: str | None,
    ahead_s: float,
    seed: int = 51,
    attempts: int | None = None,
) -> dict[str, Any]:
    """Kill at the second submit, then resume three times; what the fake and the files say."""
    real = time.time()
    # the server's clock at the second submit is ``ahead_s`` behind the client's
    start = real - ahead_s - 600
    clock = ManualClock(start)
    out = tmp_path / "out.jsonl"
    journal = tmp_path / "out.jsonl.ledger"
    with orp.fake.serve(snap, speed=0, seed=seed, clock=clock, faults=faults) as fake:
        options = {
            "prompts": str(_prompts(tmp_path / "prompts.jsonl")),
            "policy": str(policy),
            "out": str(out),
            "budget_usd": str(cap),
            "max_tokens": 256,
            "batch": {"poll_s": 1, "size": 5, "live": 1},
            "api_key": KEY,
            "base_url": fake.base_url,
        }
        if attempts is not None:
            options["attempts"] = attempts
        _killed_at_the_second_submit(options, clock, journal, finished_at=start + 600)
        made = list(fake.fake.batches.batches.values())
        assert len(made) == 2  # the second POST made its batch; its answer was never read
        lost = {line.custom_id for line in made[1].lines}
        summaries = [_resume(clock, options) for _ in range(3)]
        clock.advance(10**5)  # every batch made ends (and bills) now, read or not
        for batch in fake.fake.batches.batches.values():
            batch.tick(fake.fake, fake.fake.batches.batch_seconds)
        billed_in: dict[str, int] = {}
        for batch in fake.fake.batches.batches.values():
            if batch.status == "completed" and batch.billed:
                for line in batch.lines:
                    if not line.failed:
                        billed_in[line.custom_id] = billed_in.get(line.custom_id, 0) + 1
        served = {e.generation_id: e.cost_usd for e in fake.ledger.entries}
        batches = [
            {line.custom_id: not line.failed for line in b.lines}
            for b in fake.fake.batches.batches.values()
        ]
        billed = fake.ledger.total_usd
    records = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
    return {
        "lost": lost,
        "batches": batches,
        "summaries": summaries,
        "twice": sorted(c for c, n in billed_in.items() if n > 1),
        "billed": billed,
        "served": served,
        "records": records,
        "counted": replay_journal(journal, repair=False).spent_usd,
        "open": [b.plan for b in replay_journal(journal, repair=False).batches],
    }


def _money_holds(found: dict[str, Any], cap: Decimal) -> None:
    records = found["records"]
    ids = [r["id"] for r in records]
    assert len(ids) == len(set(ids))  # no row recorded twice
    # the first batch's rows and the lost batch's are recorded (the rest: as far as the cap goes)
    assert {f"r{i}" for i in range(5)} | found["lost"] <= set(ids)
    assert all(r["status"] in ("ok", "truncated") for r in records)
    assert found["billed"] <= cap
    assert found["counted"] >= found["billed"]
    recorded = {r["generation_id"] for r in records}
    unrecorded = set(found["served"]) - recorded
    # an answer no record holds is a row's second one, bought only while the cap paid for both
    assert len(unrecorded) == len(found["twice"])


@pytest.mark.parametrize("faults", ["batch_404=@2/90", "batch_404=@2/150"])
def test_a_lost_submit_hidden_past_the_search_is_not_bought_twice_past_the_cap(
    tmp_path: Path, snap: Any, policy: Path, faults: str
) -> None:
    """The second batch is out of the list for 90 s (150 s), past the resume's 60 s search: its
    rows stay counted at their worst case, and the cap cannot pay for them twice, so they wait
    for a rerun that finds the batch, adopts it and records its answers."""
    found = _scenario(tmp_path, snap, policy, cap=TIGHT, faults=faults, ahead_s=0)
    first = found["summaries"][0]
    assert any("no proof that it was never made" in w for w in first.warnings)
    assert first.stop_reason == "budget"
    assert found["twice"] == []
    _money_holds(found, TIGHT)
    assert found["open"] == []  # the lost batch was found, its plan closed
    assert found["summaries"][-1].stop_reason in ("done", "budget")


def test_a_lost_submit_is_bought_again_only_while_the_cap_pays_for_both(
    tmp_path: Path, snap: Any, policy: Path
) -> None:
    """With a cap that pays for the lost batch at its worst case and its rows again, the resume
    sends them again; the lost batch, found by a later run, is settled at its cost (its answers
    are those rows' second ones): counted >= billed at every step, and equal in the end."""
    cap = Decimal(1)
    found = _scenario(tmp_path, snap, policy, cap=cap, faults="batch_404=@2/90", ahead_s=0)
    assert found["summaries"][0].stop_reason == "done"
    assert found["twice"] == sorted(found["lost"])
    _money_holds(found, cap)
    assert len(found["records"]) == 10
    assert found["open"] == []


@pytest.mark.parametrize("ahead_s", [310, 420])
def test_a_lost_submit_is_found_with_the_client_clock_minutes_ahead(
    tmp_path: Path, snap: Any, policy: Path, ahead_s: float
) -> None:
    """The client's clock 5 (7) minutes ahead of the server's: the search window is the server's
    time (its ``Date``), so the resume adopts the batch the lost submit made and nothing is
    bought twice."""
    found = _scenario(tmp_path, snap, policy, cap=TIGHT, faults=None, ahead_s=ahead_s)
    assert not any("no proof" in w for s in found["summaries"] for w in s.warnings)
    assert found["twice"] == []
    _money_holds(found, TIGHT)
    assert found["open"] == []


def test_a_submitted_batch_404_past_a_minute_is_polled_on_not_bought_again(
    tmp_path: Path, snap: Any, policy: Path
) -> None:
    """Every batch answers 404 (and is out of the list) for 150 s after its 202: it was stored,
    so the sender polls on; one batch, each row billed once and recorded (was: its lines
    counted unknown after a minute and sent again, every batch bought twice, rows failed)."""
    clock = ManualClock(time.time())
    out = tmp_path / "out.jsonl"
    with orp.fake.serve(snap, speed=0, seed=52, clock=clock, faults="batch_404=1/150") as fake:
        options = {
            "prompts": str(_prompts(tmp_path / "prompts.jsonl")),
            "policy": str(policy),
            "out": str(out),
            "budget_usd": "1",
            "max_tokens": 256,
            "batch": {"poll_s": 1},
            "api_key": KEY,
            "base_url": fake.base_url,
        }
        summary = _resume(clock, options)
        made = list(fake.fake.batches.batches.values())
        served = {e.generation_id for e in fake.ledger.entries}
    assert summary.stop_reason == "done"
    assert len(made) == 1 and made[0].status == "completed"
    records = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
    assert sorted(r["id"] for r in records) == [f"r{i}" for i in range(10)]
    assert {r["generation_id"] for r in records} == served and len(served) == 10


def test_a_submit_that_reached_no_server_closes_its_plan_and_counts_nothing(
    tmp_path: Path, snap: Any, policy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first POST's connection is refused: that proves no batch was made (the body never
    left), so the plan closes ``not sent``, its rows go into the next batch billed once, and
    nothing stays counted for it (no search, no open plan)."""
    import requests

    from openrouter_probe.api.batches import BatchClient
    from openrouter_probe.api.translate import translate_exception

    real = BatchClient.create
    tries: list[int] = []

    def create(self: BatchClient, **kw: Any) -> Any:
        tries.append(1)
        if len(tries) == 1:
            cause = requests.ConnectionError(ConnectionRefusedError(111, "Connection refused"))
            raise translate_exception(cause, url=self.path, method="POST") from cause
        return real(self, **kw)

    monkeypatch.setattr(BatchClient, "create", create)
    clock = ManualClock(time.time())
    out = tmp_path / "out.jsonl"
    with orp.fake.serve(snap, speed=0, seed=53, clock=clock) as fake:
        options = {
            "prompts": str(_prompts(tmp_path / "prompts.jsonl")),
            "policy": str(policy),
            "out": str(out),
            "budget_usd": "1",
            "max_tokens": 256,
            "batch": {"poll_s": 1},
            "api_key": KEY,
            "base_url": fake.base_url,
        }
        summary = _resume(clock, options)
        made = len(fake.fake.batches.batches)
        billed = fake.ledger.total_usd
    journal = tmp_path / "out.jsonl.ledger"
    lines = [json.loads(x) for x in journal.read_text(encoding="utf-8").splitlines()]
    first = next(x["batch_plan"] for x in lines if "batch_plan" in x)
    assert [x["status"] for x in lines if x.get("batch_done") == first] == ["not sent"]
    assert summary.stop_reason == "done" and made == 1 and len(tries) == 2
    assert not any("no proof" in w for w in summary.warnings)
    assert replay_journal(journal, repair=False).spent_usd == billed


def test_two_lost_submits_of_one_size_never_take_each_others_batch(
    tmp_path: Path, snap: Any, policy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two batches of four go up at once and both answers are lost (a 502 after the batch was
    made). While they run, their custom ids are not shown, so neither plan may take a running
    batch of that size (it may be the other's): each is adopted only once its results show its
    own rows. No plan names a batch holding other rows, and no paid answer is left unrecorded
    (a row's second answer, bought while the cap paid for both, settled in the journal)."""
    from openrouter_probe.api.batches import BatchClient
    from openrouter_probe.errors import APIStatusError

    real = BatchClient.create
    tries: list[int] = []

    def create(self: BatchClient, **kw: Any) -> Any:
        made = real(self, **kw)
        tries.append(1)
        if len(tries) <= 2:
            raise APIStatusError("Bad Gateway", status_code=502, url=self.path)
        return made

    monkeypatch.setattr(BatchClient, "create", create)
    clock = ManualClock(time.time())
    out = tmp_path / "out.jsonl"
    journal = tmp_path / "out.jsonl.ledger"
    prompts = _prompts(tmp_path / "prompts.jsonl")
    rows = [json.loads(x) for x in prompts.read_text(encoding="utf-8").splitlines()][:8]
    prompts.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    with orp.fake.serve(snap, speed=0, seed=54, clock=clock) as fake:
        options = {
            "prompts": str(prompts),
            "policy": str(policy),
            "out": str(out),
            "budget_usd": "1",
            "max_tokens": 256,
            "batch": {"poll_s": 1, "size": 4, "live": 2},
            "api_key": KEY,
            "base_url": fake.base_url,
        }
        summaries = [_resume(clock, options) for _ in range(2)]
        clock.advance(10**5)
        for batch in fake.fake.batches.batches.values():
            batch.tick(fake.fake, fake.fake.batches.batch_seconds)
        summaries.append(_resume(clock, options))
        lines_of = {
            b.id: {line.custom_id for line in b.lines} for b in fake.fake.batches.batches.values()
        }
        served = {e.generation_id for e in fake.ledger.entries}
        billed = fake.ledger.total_usd
    entries = [json.loads(x) for x in journal.read_text(encoding="utf-8").splitlines()]
    plans = {
        (x["run"], x["batch_plan"]): {c for c, _ in x["lines"]}
        for x in entries
        if "batch_plan" in x
    }
    for x in entries:
        if "batch_id" in x:  # a plan names only a batch that holds its own rows
            assert plans[(x["run"], x["batch_id"])] <= lines_of[x["id"]], x
    records = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
    assert sorted(r["id"] for r in records) == sorted(r["id"] for r in rows)
    recorded = {r["generation_id"] for r in records}
    twice = [c for c in {r["id"] for r in rows} if sum(c in v for v in lines_of.values()) > 1]
    assert len(served - recorded) == len(twice)  # each unrecorded answer is a row's second
    assert replay_journal(journal, repair=False).spent_usd >= billed
    assert replay_journal(journal, repair=False).batches == []


def test_a_paid_answer_of_a_lost_submit_is_recorded_after_its_row_failed(
    tmp_path: Path, snap: Any, policy: Path
) -> None:
    """The lost batch (out of the list for 90 s) answered r8; the resume, with the cap paying for
    both, sends r8 again, where its line fails (``line_fail``, seeded: the fake's seed 52) until
    its two attempts run out: r8 is recorded ``failed``. A later resume finds the lost batch:
    its paid answer for r8 is recorded after the ``failed`` line and wins for resume, audit and
    export; every billed answer is recorded, no row has two answers (was: only settled)."""
    from openrouter_probe.generation.records import merged_records
    from openrouter_probe.run.books.output import load_resume_state

    cap = Decimal(1)
    faults = "batch_404=@2/90,line_fail=0.25"
    found = _scenario(
        tmp_path, snap, policy, cap=cap, faults=faults, ahead_s=0, seed=52, attempts=2
    )
    first, lost, again = found["batches"][:3]
    # the premise, from the fake: the lost batch answered r8, its second batch failed its line
    assert set(first) == {f"r{i}" for i in range(5)} and all(first.values())
    assert lost["r8"] is True and again["r8"] is False
    assert not any(b.get("r8") for b in found["batches"][2:])
    records = found["records"]
    r8 = [r for r in records if r["id"] == "r8"]
    assert r8[0]["status"] == "failed" and r8[1]["status"] in ("ok", "truncated")
    assert len(r8) == 2
    assert r8[1]["generation_id"] in found["served"]
    served = [r["id"] for r in records if r["status"] in ("ok", "truncated")]
    assert len(served) == len(set(served))  # no row has two answers
    recorded = {r["generation_id"] for r in records}
    assert len(set(found["served"]) - recorded) == len(found["twice"])
    assert found["billed"] <= cap and found["counted"] >= found["billed"]
    assert found["open"] == []
    out = tmp_path / "out.jsonl"
    state = load_resume_state(out, repair=False)
    assert "r8" in state.finished and "r8" not in state.failed
    merged = {r["id"]: r for r in merged_records([out])}
    assert merged["r8"]["status"] == r8[1]["status"]
    assert merged["r8"]["generation_id"] == r8[1]["generation_id"]

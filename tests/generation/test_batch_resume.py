"""``generate --batch`` resumed after kills that land where paid answers are at stake.

A child process runs the job on the library's own path (``tests._child``) and dies at a named
point (``CHILD_KILL``: ``os._exit(9)``, as a SIGKILL): while a finished batch's results are being
written, right after a resume writes its first ``batch_plan`` line, right after a POST that made
the batch. The fake lives in this process on a ``ManualClock`` that this test moves while the
child polls, so its ledger is what was billed and no test waits for a batch.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
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
KEY = "sk-fake-batch-resume"


@pytest.fixture(scope="module")
def snap() -> Any:
    return orp.load_snapshot(HERE / "kimi-k3.snapshot.json")


@pytest.fixture
def policy(tmp_path: Path, snap: Any) -> Path:
    compiled = orp.compile_policy(orp.load_spec(HERE / "kimi-k3.spec.yaml"), snap)
    return compiled.save(tmp_path / "kimi-k3.yaml")


def _prompts(path: Path, rows: int) -> Path:
    lines = [
        json.dumps({"id": f"r{i}", "prompt": f"question {i}: " + "why " * (i % 7 + 1)})
        for i in range(rows)
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _child(options: dict[str, Any], kill: str, clock: ManualClock, journal: Path) -> int:
    """Run the job in a child that dies at ``kill``; while it runs, move the fake's clock on once
    a batch id is journaled (so the child's polls see its batch finish)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests._child", json.dumps(options)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT), "CHILD_KILL": kill},
    )
    stop = threading.Event()

    def moving() -> None:
        while not stop.is_set():
            if journal.exists() and '"batch_id"' in journal.read_text(encoding="utf-8"):
                clock.advance(60)
            stop.wait(0.005)  # watching the child's journal (the fake's clock is virtual)

    mover = threading.Thread(target=moving, daemon=True)
    mover.start()
    try:
        _, err = proc.communicate(timeout=120)
    finally:
        stop.set()
        mover.join()
    assert proc.returncode == 9, err.decode()[-3000:]
    return proc.returncode


def _resume(fake: Any, clock: ManualClock, options: dict[str, Any]) -> Any:
    async def sleep(seconds: float) -> None:
        clock.advance(seconds)
        await asyncio.sleep(0)

    args = dict(options)
    prompts = args.pop("prompts")
    args["batch"] = BatchOptions(**args["batch"])
    return asyncio.run(orp.generate(prompts, sleep=sleep, clock=clock.now, **args))


def _records(out: Path) -> list[dict[str, Any]]:
    if not out.exists():
        return []
    return [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]


def _counted(out: Path) -> Decimal:
    return replay_journal(out.with_name(out.name + ".ledger"), repair=False).spent_usd


def test_a_resume_killed_twice_records_every_billed_answer_within_the_cap(
    tmp_path: Path, snap: Any, policy: Path
) -> None:
    """32 rows, a $0.10 cap, max_tokens=400, poll_s=1: killed while the finished batch's results
    are written (7 recorded), then killed right after the resume's first ``batch_plan`` line.
    The count never goes above the cap, and a rerun at the same cap records every answer the
    fake billed (the finished batch is fetched, never re-run)."""
    clock = ManualClock(time.time())
    out = tmp_path / "out.jsonl"
    journal = tmp_path / "out.jsonl.ledger"
    budget = Decimal("0.1")
    with orp.fake.serve(snap, speed=0, seed=30, clock=clock) as fake:
        options = {
            "prompts": str(_prompts(tmp_path / "prompts.jsonl", 32)),
            "policy": str(policy),
            "out": str(out),
            "budget_usd": str(budget),
            "max_tokens": 400,
            "batch": {"poll_s": 1},
            "api_key": KEY,
            "base_url": fake.base_url,
        }
        _child(options, "write:7", clock, journal)
        assert len(_records(out)) == 7
        billed_first = fake.ledger.total_usd
        assert len(fake.ledger) > 7 and billed_first <= budget
        assert _counted(out) <= budget
        _child(options, "plan:1", clock, journal)
        assert _counted(out) <= budget  # a line carried into the resume is counted once
        assert len(fake.fake.batches.batches) == 1  # nothing new was planned and sent
        summaries = [_resume(fake, clock, options) for _ in range(2)]
        billed = fake.ledger.total_usd
        served = {e.generation_id for e in fake.ledger.entries}
        made = len(fake.fake.batches.batches)
    records = _records(out)
    recorded = {r.get("generation_id") for r in records}
    assert served <= recorded, f"{len(served - recorded)} billed answer(s) never recorded"
    ids = [r["id"] for r in records if r["status"] in ("ok", "truncated")]
    assert len(ids) == len(set(ids))  # no row twice
    assert billed <= budget
    counted = _counted(out)
    assert billed <= counted <= budget
    # the first batch's answers are fetched, not bought again; what the cap left is sent later
    assert billed_first <= billed and made >= 1
    assert summaries[-1].stop_reason in ("done", "budget")
    assert summaries[0].stop_reason != "budget" or len(ids) >= len(served)


def test_a_lost_post_never_adopts_the_runs_own_finished_batch(
    tmp_path: Path, snap: Any, policy: Path
) -> None:
    """Batches of four, one at a time: the first completes; the second's POST makes the batch
    and the child dies before the answer is read. The resume adopts the second batch (the
    lines of its plan), never the first (recorded, and its custom ids are other rows'): no row
    is billed in two completed batches, and every row is billed once."""
    clock = ManualClock(time.time())
    out = tmp_path / "out.jsonl"
    with orp.fake.serve(snap, speed=0, seed=31, clock=clock) as fake:
        options = {
            "prompts": str(_prompts(tmp_path / "prompts.jsonl", 8)),
            "policy": str(policy),
            "out": str(out),
            "budget_usd": "5",
            "max_tokens": 256,
            "batch": {"poll_s": 1, "size": 4, "live": 1},
            "api_key": KEY,
            "base_url": fake.base_url,
        }
        _child(options, "create:2", clock, tmp_path / "out.jsonl.ledger")
        assert len(fake.fake.batches.batches) == 2
        summary = _resume(fake, clock, options)
        batches = list(fake.fake.batches.batches.values())
        billed = [b for b in batches if b.status == "completed" and b.billed]
        cids = [line.custom_id for b in billed for line in b.lines if not line.failed]
        served = {e.generation_id for e in fake.ledger.entries}
    assert summary.stop_reason == "done"
    assert len(batches) == 2  # the orphan was adopted, not submitted again
    assert sorted(cids) == sorted(set(cids)) and len(cids) == 8
    records = _records(out)
    assert sorted(r["id"] for r in records) == sorted(f"r{i}" for i in range(8))
    assert {r["generation_id"] for r in records} == served


def test_still_running_names_each_batch_once_with_its_status(
    tmp_path: Path, snap: Any, policy: Path
) -> None:
    """A batch whose lines two resumes moved (one plan per line) is one batch: stopped with
    Ctrl-C, the run says its id once, and never calls it ``planned``."""
    clock = ManualClock(time.time())
    out = tmp_path / "out.jsonl"
    journal = tmp_path / "out.jsonl.ledger"
    said: list[str] = []
    with orp.fake.serve(snap, speed=0, seed=32, batch_seconds=10**6, clock=clock) as fake:
        options = {
            "prompts": str(_prompts(tmp_path / "prompts.jsonl", 8)),
            "policy": str(policy),
            "out": str(out),
            "budget_usd": "5",
            "max_tokens": 256,
            "batch": {"poll_s": 1},
            "api_key": KEY,
            "base_url": fake.base_url,
        }
        _child(options, "poll:1", clock, journal)
        for _ in range(2):
            plans = journal.read_text(encoding="utf-8").count('"batch_plan"')

            async def interrupting(seconds: float, plans: int = plans) -> None:
                # Ctrl-C once this run has journaled its moves (each row's line)
                if journal.read_text(encoding="utf-8").count('"batch_plan"') >= plans + 8:
                    os.kill(os.getpid(), signal.SIGINT)
                clock.advance(seconds)
                await asyncio.sleep(0)

            args = dict(options, batch=BatchOptions(poll_s=1))
            summary = asyncio.run(
                orp.generate(
                    args.pop("prompts"),
                    sleep=interrupting,
                    clock=clock.now,
                    handle_signals=True,
                    drain_timeout_s=0.01,
                    **args,
                )
            )
            assert summary.stop_reason in ("interrupted", "cancelled")
            said = [w for w in summary.warnings if "still running" in w]
        made = list(fake.fake.batches.batches)
    assert len(made) == 1
    (text,) = said
    assert text.startswith(f"1 batch(es) still running: {made[0]} (")
    assert text.count(made[0]) == 1 and "planned" not in text


def test_a_rerun_fetches_every_open_batch_before_it_reserves_anything(
    tmp_path: Path, snap: Any, policy: Path
) -> None:
    """Killed while polling (its batch running), then rerun at a cap the killed batch's worst
    case fills: the rerun polls that batch at once, before any reservation, and records every
    answer it served; nothing new is bought, and no batch is left open or "not polled"."""
    clock = ManualClock(time.time())
    out = tmp_path / "out.jsonl"
    journal = tmp_path / "out.jsonl.ledger"
    with orp.fake.serve(snap, speed=0, seed=33, clock=clock) as fake:
        options = {
            "prompts": str(_prompts(tmp_path / "prompts.jsonl", 12)),
            "policy": str(policy),
            "out": str(out),
            "budget_usd": "0.02",
            "max_tokens": 256,
            "batch": {"poll_s": 1, "size": 8, "live": 1},
            "api_key": KEY,
            "base_url": fake.base_url,
        }
        _child(options, "poll:1", clock, journal)
        (made,) = fake.fake.batches.batches.values()
        assert not out.exists() or _records(out) == []
        sent_at_get: list[int] = []  # the journal's ``sent`` lines at each poll
        real_get = orp.api.batches.BatchClient.get

        def get(self: Any, batch_id: str) -> Any:
            sent_at_get.append(journal.read_text(encoding="utf-8").count('"sent"'))
            return real_get(self, batch_id)

        before = journal.read_text(encoding="utf-8").count('"sent"')
        orp.api.batches.BatchClient.get = get  # type: ignore[method-assign]
        try:
            summary = _resume(fake, clock, options)
        finally:
            orp.api.batches.BatchClient.get = real_get  # type: ignore[method-assign]
        lines = journal.read_text(encoding="utf-8").splitlines()[before:]
        served = {e.generation_id for e in fake.ledger.entries}
        billed = fake.ledger.total_usd
        made_in_all = len(fake.fake.batches.batches)
    assert sent_at_get[0] == before  # polled before any reservation of the rerun
    records = _records(out)
    assert {line.custom_id for line in made.lines} <= {r["id"] for r in records}
    assert served <= {r["generation_id"] for r in records}
    assert billed <= Decimal("0.02") and _counted(out) >= billed
    assert not any("still running" in w for w in summary.warnings)
    assert replay_journal(journal, repair=False).batches == [] or made_in_all > 1
    assert any('"batch_done"' in line for line in lines)

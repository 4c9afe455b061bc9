"""End to end on the project's fake OpenRouter (real loopback HTTP, ``speed=0``: no waits).

The fake keeps its own ledger of every generation it billed: the generator's records are compared
with it, generation by generation, to the cent (and finer: both are exact decimals).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from openrouter_probe.api.backoff import Backoff
from openrouter_probe.fake import serve
from openrouter_probe.generation import generate
from openrouter_probe.run.money.replay import replay_journal
from tests._gated_clock import GatedClock
from tests._generate import (
    POLICY,
    journal_reconciled,
    no_sleep,
    prompt_rows,
    records,
    write_prompts,
)
from tests.conftest import PYTEST_OPENROUTER_KEY

FAST = Backoff(wait_initial_s=0.5, wait_max_s=30, wait_jitter_s=0, attempts=6, timeout_s=None)


def _gen(tmp: Path, base_url: str, **options: Any) -> Any:
    options.setdefault("sleep", no_sleep)
    options.setdefault("backoff", FAST)
    options.setdefault("max_tokens", 200)
    return asyncio.run(
        generate(
            tmp / "prompts.jsonl",
            policy=POLICY,
            out=tmp / "out.jsonl",
            base_url=base_url,
            **options,
        )
    )


def _agree_with_ledger(out: list[dict[str, Any]], ledger: Any) -> None:
    entries = {e.generation_id: e for e in ledger.entries}
    for r in out:
        if r["status"] not in ("ok", "truncated"):
            continue
        if r.get("response_cache") == "hit":  # a row resent after a kill, answered free
            assert r["generation_id"] not in entries and r["cost_usd"] == 0
            continue
        entry = entries[r["generation_id"]]
        assert Decimal(str(r["cost_usd"])) == entry.cost_usd
        assert r["provider"] == entry.provider
        assert r["usage"]["completion_tokens"] == entry.completion_tokens
        assert r["usage"]["completion_tokens_details"]["reasoning_tokens"] == entry.reasoning_tokens


@pytest.mark.parametrize("stream", [False, True])
def test_spend_equals_the_fake_ledger(tmp_path: Path, stream: bool) -> None:
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(300, datasets=3))
    with serve(speed=0, seed=1) as fake:
        summary = _gen(tmp_path, fake.base_url, concurrency=100, stream=stream, budget_usd=50)
        ledger = fake.ledger
        out = records(tmp_path / "out.jsonl")
        assert len(out) == 300 and summary.stop_reason == "done"
        recorded = sum(Decimal(str(r["cost_usd"])) for r in out)
        assert recorded == ledger.total_usd == summary.spent_usd
        assert len(ledger) == 300
        _agree_with_ledger(out, ledger)
        # Every row was served by an endpoint the policy admits (the fake routes by the block).
        assert {r["provider"] for r in out} <= {
            "Chutes",
            "DeepInfra",
            "SiliconFlow",
            "AtlasCloud",
            "Parasail",
            "Moonshot AI",
        }
        assert all(r["model"] for r in out)
        before = fake.ledger.total_usd
        again = _gen(tmp_path, fake.base_url, concurrency=100, stream=stream, budget_usd=50)
        assert again.requests == 0 and fake.ledger.total_usd == before  # a rerun sends nothing


def test_the_cap_holds_on_the_fake(tmp_path: Path) -> None:
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(2000))
    budget = Decimal("0.25")
    with serve(speed=0, seed=2, median_tokens=600) as fake:
        summary = _gen(tmp_path, fake.base_url, concurrency=500, max_tokens=2000, budget_usd=budget)
        assert summary.stop_reason == "budget"
        assert fake.ledger.total_usd <= budget
        assert summary.spent_usd == fake.ledger.total_usd
        assert summary.peak_committed_usd <= budget


def test_402_on_the_fake_stops_cleanly(tmp_path: Path) -> None:
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(200))
    with serve(speed=0, seed=3, credit_usd=0.02) as fake:
        summary = _gen(tmp_path, fake.base_url, concurrency=4, max_tokens=500)
        assert summary.stop_reason == "credits"
        assert "credits" in summary.message.lower()
        # The credits page is named once, whether or not OpenRouter's own text names it.
        assert summary.message.count("openrouter.ai/settings/credits") == 1
        assert summary.message.endswith("the same command to resume")
        out = records(tmp_path / "out.jsonl")
        assert sum(Decimal(str(r["cost_usd"])) for r in out) == fake.ledger.total_usd
        assert summary.not_sent == 200 - len(out)


def test_faults_survived_on_the_fake(tmp_path: Path) -> None:
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(300))
    faults = "upstream_429=0.1,platform_429=0.05,upstream_502=0.05,wrapped_400=0.05,drop=0.03,stream_error=0.05"
    # About a third of the attempts meet a fault, in an order the concurrency shuffles: with six
    # attempts a row gives up with probability 0.33**6, and one of 300 rows did in about a third
    # of the runs. Twelve attempts make that 300 * 0.33**12, about 1 in 2,000.
    patient = Backoff(
        wait_initial_s=0.5, wait_max_s=30, wait_jitter_s=0, attempts=12, timeout_s=None
    )
    with serve(speed=0, seed=4, faults=faults) as fake:
        summary = _gen(
            tmp_path, fake.base_url, concurrency=50, stream=True, max_tokens=100, backoff=patient
        )
        out = records(tmp_path / "out.jsonl")
        assert len(out) == 300
        assert all(r["status"] in ("ok", "truncated") for r in out), [
            r["error"] for r in out if r["error"]
        ][:3]
        assert summary.retries > 0
        assert sum(Decimal(str(r["cost_usd"])) for r in out) == fake.ledger.total_usd
        _agree_with_ledger(out, fake.ledger)


def _cli(tmp: Path, base_url: str, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "openrouter_probe",
        "generate",
        str(tmp / "prompts.jsonl"),
        "--policy",
        str(POLICY),
        "--out",
        str(tmp / "out.jsonl"),
        "--max-tokens",
        "100",
        "--concurrency",
        "16",
        "--quiet",
        *extra,
    ]


def _env(base_url: str) -> dict[str, str]:
    return {
        **os.environ,
        "OPENROUTER_BASE_URL": base_url,
        "OPENROUTER_API_KEY": PYTEST_OPENROUTER_KEY,
    }


@pytest.mark.parametrize("seed", [5, 6])
def test_kill_9_then_resume_loses_nothing_and_pays_once(tmp_path: Path, seed: int) -> None:
    rows = 1500
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(rows))
    kill_at = random.Random(seed).randint(20, 600)
    with serve(speed=0, seed=seed) as fake:
        proc = subprocess.Popen(
            _cli(tmp_path, fake.base_url, "--no-budget"),
            env=_env(fake.base_url),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + 120
        # Poll the fake's ledger (not a sleep for time to pass: the child runs at full speed).
        while len(fake.ledger) < kill_at and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.005)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        at_kill = len(fake.ledger)
        first = records(tmp_path / "out.jsonl") if (tmp_path / "out.jsonl").exists() else []
        assert len(first) < rows, "the run ended before the kill: raise rows"
        done = subprocess.run(
            _cli(tmp_path, fake.base_url, "--no-budget", "--format", "json"),
            env=_env(fake.base_url),
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, done.stderr
        summary = json.loads(done.stdout)
        out = records(tmp_path / "out.jsonl")
        finished = [r for r in out if r["status"] in ("ok", "truncated")]
        ids = [r["id"] for r in finished]
        assert sorted(ids) == sorted(f"r{i}" for i in range(rows))  # no row lost
        assert len(ids) == len(set(ids))  # none recorded twice
        gens = [r["generation_id"] for r in finished]
        assert len(gens) == len(set(gens))
        _agree_with_ledger(out, fake.ledger)
        # Paid more than once only for what was in flight at the kill (billed, never recorded):
        # at most the concurrency. Everything recorded before the kill was never sent again.
        extra = len(fake.ledger) - rows
        assert 0 <= extra <= 16
        assert at_kill - len(first) <= 16
        recorded = sum(Decimal(str(r["cost_usd"])) for r in finished)
        lost = fake.ledger.total_usd - recorded
        assert lost >= 0 and len(fake.ledger) - len(finished) == extra
        # The journal knew: every billed but unrecorded generation was in flight at the kill, and
        # the resumed run counted each at its worst case, or settled it at what it cost (from
        # its generation id, or the response cache hit of its resend: the hit's source): what
        # the journal settled never passes the ledger, what it counts never falls under it.
        assert summary["killed_in_flight_before"] >= extra
        assert Decimal(str(summary["spent_total_usd"])) >= fake.ledger.total_usd
        replay = replay_journal(tmp_path / "out.jsonl.ledger", repair=False)
        assert replay.settled_usd <= fake.ledger.total_usd <= replay.spent_usd
        assert lost >= 0


@pytest.mark.parametrize("seed", [13, 14])
def test_kill_9_then_resume_with_the_same_budget_the_cap_holds(tmp_path: Path, seed: int) -> None:
    # Answers mostly cut at max_tokens cost close to their worst case, so the resumed run ends
    # within one request of the cap: any money billed before the kill and not counted on resume
    # (requests in flight at the kill) would push the fake's ledger over the budget.
    rows, budget = 1500, Decimal("0.16")  # ~700 rows fit
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(rows))
    kill_at = random.Random(seed).randint(20, 500)
    cli = _cli(tmp_path, "", "--budget-usd", str(budget), "--format", "json")
    with serve(speed=0, seed=seed, median_tokens=600) as fake:
        proc = subprocess.Popen(
            cli, env=_env(fake.base_url), stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        deadline = time.monotonic() + 120
        while len(fake.ledger) < kill_at and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.005)  # polling the fake's ledger, not waiting for time to pass
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert proc.returncode == -signal.SIGKILL
        text = (tmp_path / "out.jsonl").read_text()
        first_ids = {json.loads(x)["id"] for x in text.splitlines(keepends=True) if x[-1] == "\n"}
        done = subprocess.run(cli, env=_env(fake.base_url), capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        summary = json.loads(done.stdout)
        billed = fake.ledger.total_usd
        assert summary["stop_reason"] == "budget"
        assert billed <= budget  # the cap held across the kill and the restart
        out = records(tmp_path / "out.jsonl")
        ids = [r["id"] for r in out if r["status"] in ("ok", "truncated")]
        assert len(ids) == len(set(ids))  # no finished row sent (and recorded) again
        assert set(ids) >= first_ids and len(ids) < rows
        unrecorded = len(fake.ledger) - len(ids)  # billed, never answered: in flight at the kill
        assert 0 <= unrecorded <= summary["killed_in_flight_before"] <= 16
        # The client never under-counts, and stays within the cap.
        assert billed <= Decimal(str(summary["spent_total_usd"])) <= budget
        # Every attempt in flight at the kill whose generation id the journal holds was settled
        # from /generation at exactly what the fake billed for it; the rest stay at worst case.
        settled = journal_reconciled(tmp_path / "out.jsonl.ledger")
        assert summary["reconciled_before"] == len(settled)
        for generation_id, cost in settled.items():
            entry = fake.ledger.get(generation_id)
            assert cost == (entry.cost_usd if entry is not None else 0)
        # A third run with the same budget sends nothing: the journal still counts the kill.
        again = subprocess.run(cli, env=_env(fake.base_url), capture_output=True, text=True)
        assert again.returncode == 0 and json.loads(again.stdout)["requests"] == 0
        assert fake.ledger.total_usd == billed


def test_cli_end_to_end_with_audit_and_export(tmp_path: Path) -> None:
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(40, datasets=2))
    with serve(speed=0, seed=7) as fake:
        env = _env(fake.base_url)
        run = subprocess.run(
            _cli(tmp_path, fake.base_url, "--budget-usd", "5", "--format", "json"),
            env=env,
            capture_output=True,
            text=True,
        )
        assert run.returncode == 0, run.stderr
        summary = json.loads(run.stdout)
        assert summary["ok"] + summary["truncated"] == 40
        assert Decimal(str(summary["spent_usd"])) == fake.ledger.total_usd
        assert PYTEST_OPENROUTER_KEY not in run.stdout + run.stderr
        assert PYTEST_OPENROUTER_KEY not in (tmp_path / "out.jsonl").read_text()
        audit = subprocess.run(
            [
                sys.executable,
                "-m",
                "openrouter_probe",
                "audit",
                str(tmp_path / "out.jsonl"),
                "--policy",
                str(POLICY),
                "--format",
                "json",
            ],
            env=env,
            capture_output=True,
            text=True,
        )
        assert audit.returncode == 0, audit.stderr
        report = json.loads(audit.stdout)
        assert report["outside_policy"] == [] and sum(p["rows"] for p in report["providers"]) == 40
        dry = subprocess.run(
            _cli(tmp_path, fake.base_url, "--dry-run"), env=env, capture_output=True, text=True
        )
        assert dry.returncode == 0 and "already done" in dry.stdout


def test_cli_402_is_one_clear_message_without_traceback(tmp_path: Path) -> None:
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(100))
    with serve(speed=0, seed=8, credit_usd=0.005) as fake:
        run = subprocess.run(
            _cli(tmp_path, fake.base_url, "--no-budget"),
            env=_env(fake.base_url),
            capture_output=True,
            text=True,
        )
        assert run.returncode == 1
        assert "Traceback" not in run.stderr + run.stdout
        assert "stopped: credits: OpenRouter says the credits are insufficient (402)" in run.stdout
        assert "rerun the same command to resume" in run.stdout


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_cli_sigint_drains_then_resume_completes(tmp_path: Path, sig: signal.Signals) -> None:
    """Ctrl-C, or SIGTERM (Slurm's time limit, a preemption): the same graceful stop."""
    rows = 300
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(rows))
    # once 100 answers are billed, every answer is held at the fake until the signal is sent:
    # the run is stopped with 16 requests in flight whatever the load (it was a race against
    # 1,500 rows at full speed, most of the test's time)
    clock = GatedClock(closes_when=lambda: len(fake.ledger) >= 100)
    with serve(speed=1, seed=9, clock=clock) as fake:
        proc = subprocess.Popen(
            _cli(tmp_path, fake.base_url, "--no-budget"),
            env=_env(fake.base_url),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 120
        while len(fake.ledger) < 100 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.005)
        proc.send_signal(sig)
        clock.release()
        stdout, stderr = proc.communicate(timeout=120)
        assert proc.returncode == 130, stderr
        assert f"{sig.name}: no new requests" in stderr and "Traceback" not in stderr
        assert f"stopped: interrupted: stopped by {sig.name}" in stdout
        out = records(tmp_path / "out.jsonl")
        assert 0 < len(out) < rows and all(r["status"] in ("ok", "truncated") for r in out)
        # Drained: every request in flight finished and was recorded; nothing billed is missing.
        assert sum(Decimal(str(r["cost_usd"])) for r in out) == fake.ledger.total_usd
        assert len(fake.ledger) == len(out)
        done = subprocess.run(
            _cli(tmp_path, fake.base_url, "--no-budget"),
            env=_env(fake.base_url),
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, done.stderr
        assert len(fake.ledger) == rows == len(records(tmp_path / "out.jsonl"))  # none paid twice


@pytest.mark.slow
def test_2000_concurrent_with_faults_the_cap_holds_and_the_ledgers_agree(tmp_path: Path) -> None:
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(4000, datasets=6))
    budget = Decimal("0.60")
    faults = "upstream_429=0.05,platform_429=0.02,upstream_502=0.03,drop=0.02,stream_error=0.03"
    with serve(speed=0, seed=10, faults=faults, median_tokens=100) as fake:
        summary = _gen(
            tmp_path,
            fake.base_url,
            concurrency=2000,
            stream=True,
            max_tokens=400,
            budget_usd=budget,
        )
        out = records(tmp_path / "out.jsonl")
        assert summary.stop_reason == "budget" and summary.retries > 0
        assert fake.ledger.total_usd <= budget and summary.peak_committed_usd <= budget
        assert (
            sum(Decimal(str(r["cost_usd"] or 0)) for r in out)
            == fake.ledger.total_usd
            == summary.spent_usd
        )
        _agree_with_ledger(out, fake.ledger)


def test_second_sigint_cancels_in_flight_and_records_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from openrouter_probe.run.schedule import runner

    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(20))
    seen: list[runner.Run] = []
    original = runner.Run.run

    async def capture(self: runner.Run) -> Any:
        seen.append(self)
        return await original(self)

    monkeypatch.setattr(runner.Run, "run", capture)

    async def scenario(base_url: str) -> Any:
        task = asyncio.ensure_future(
            generate(
                tmp_path / "prompts.jsonl",
                policy=POLICY,
                out=tmp_path / "out.jsonl",
                base_url=base_url,
                concurrency=5,
                max_tokens=100,
                budget_usd=1,
                handle_signals=True,
            )
        )
        while not seen or seen[0].in_flight < 5:
            await asyncio.sleep(0)
        os.kill(os.getpid(), signal.SIGINT)  # the real handler: stop taking rows, drain
        while not seen[0].stopping:
            await asyncio.sleep(0)
        os.kill(os.getpid(), signal.SIGINT)  # again: cancel what is in flight
        return await task

    # Every answer's first byte waits 30 s on the server: the requests stay in flight.
    with serve(speed=0, seed=11, faults="slow_first_byte=1/30") as fake:
        summary = asyncio.run(scenario(fake.base_url))
        billed_before = fake.ledger.total_usd
    assert summary.stop_reason == "cancelled" and summary.cancelled == 5
    out = records(tmp_path / "out.jsonl")
    assert [r["status"] for r in out] == ["cancelled"] * 5
    possibly = sum(Decimal(str(r["possibly_billed_usd"])) for r in out)
    assert possibly == summary.possibly_billed_usd > 0 and billed_before == 0
    monkeypatch.setattr(runner.Run, "run", original)
    with serve(speed=0, seed=12) as fake:
        again = _gen(tmp_path, fake.base_url, concurrency=5, max_tokens=100, budget_usd=1)
        assert again.spent_before_usd == possibly  # counted as spent: the cap stays safe
        done = [
            r
            for r in records(tmp_path / "out.jsonl")
            if r["status"] == "ok" or r["status"] == "truncated"
        ]
        assert sorted(r["id"] for r in done) == sorted(f"r{i}" for i in range(20))
        assert len(fake.ledger) == 20


def test_an_unreachable_server_stops_the_run_instead_of_failing_every_row(tmp_path: Path) -> None:
    """Connection refused on every attempt: the run stops as `unreachable` (exit 1) after
    UNREACHABLE_AFTER_ROWS rows, instead of ending `done` with every row failed."""
    from openrouter_probe.run.schedule.attempts import UNREACHABLE_AFTER_ROWS

    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(20))
    summary = _gen(
        tmp_path,
        "http://127.0.0.1:9/api/v1",  # the discard port: nothing listens, connect is refused
        api_key="sk-fake",
        snapshot="bundled",
        concurrency=1,
        budget_usd=1,
        backoff=Backoff(
            wait_initial_s=0, wait_max_s=1, wait_jitter_s=0, attempts=2, timeout_s=None
        ),
    )
    assert summary.stop_reason == "unreachable"
    assert summary.exit_code == 1
    assert summary.failed == UNREACHABLE_AFTER_ROWS == 8
    assert summary.not_sent == 20 - 8
    assert "rows in a row got no answer from the server" in summary.message
    assert "OPENROUTER_BASE_URL" in summary.message
    assert summary.spent_usd == 0

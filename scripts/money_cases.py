"""Re-run issue 15's money cases at their own sizes and print what was billed against the cap.

Each case is the issue's reproduction against the project's loopback fake OpenRouter (its ledger is
what was billed), or an in-process sender where the fake cannot say it (an answer without a cost).
One line per case: the cap, what the fake billed, what the client counted, and the case's own
figure (rows per dataset, rows bought twice, what a resume gave back...).
``tests/run/money/test_unaccounted_requests.py`` holds the same cases small, as assertions; this
script is for the figures (about two minutes).

    python scripts/money_cases.py            # every case
    python scripts/money_cases.py kill datasets
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from collections import Counter
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

from openrouter_probe.api.backoff import Backoff
from openrouter_probe.fake import ManualClock, serve
from openrouter_probe.generation import generate
from openrouter_probe.run.send.transport import Answer

ROOT = Path(__file__).resolve().parents[1]
POLICY = ROOT / "policies" / "kimi-k2.5.yaml"
D = Decimal
FAST = Backoff(wait_initial_s=1, wait_max_s=30, wait_jitter_s=0, attempts=6, timeout_s=600)


async def _no_sleep(_: float) -> None:
    await asyncio.sleep(0)


def _prompts(folder: Path, rows: list[dict[str, Any]]) -> Path:
    path = folder / "prompts.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _rows(n: int, **more: Any) -> list[dict[str, Any]]:
    return [{"id": f"r{i}", "prompt": f"question {i} " + "x" * 40, **more} for i in range(n)]


def _run(folder: Path, base_url: str | None = None, **options: Any) -> Any:
    options.setdefault("sleep", _no_sleep)
    options.setdefault("backoff", FAST)
    options.setdefault("max_tokens", 100)
    return asyncio.run(
        generate(
            folder / "prompts.jsonl",
            policy=POLICY,
            out=folder / "out.jsonl",
            base_url=base_url,
            api_key="sk-fake",
            **options,
        )
    )


def _line(case: str, cap: Decimal, billed: Decimal, counted: Decimal, note: str) -> str:
    """The case's figures on one line, its note wrapped below (80 columns)."""
    held = "held" if billed <= cap and counted >= billed else "BROKEN"
    head = f"{case:<12} {held:<6} cap ${cap:<7} billed ${billed:.6f}  counted ${counted:.6f}"
    return "\n".join([head, *textwrap.wrap(note, 78, initial_indent="  ", subsequent_indent="  ")])


def case_timeout(folder: Path) -> str:
    """Five slow first bytes, a read timeout below them, a $0.0030 cap (was: $0.0045 billed)."""
    _prompts(folder, _rows(40))
    cap = D("0.0030")
    with serve(speed=0, seed=1, faults="slow_first_byte=@1+2+3+4+5/0.5") as fake:
        summary = _run(folder, fake.base_url, read_timeout_s=0.05, budget_usd=cap)
        time.sleep(0.6)  # the fake finishes (and bills) the answers the client gave up on
        billed = fake.ledger.total_usd
    return _line(
        "timeout",
        cap,
        billed,
        summary.spent_total_usd,
        f"{summary.ok + summary.truncated} rows; unknown costs: {summary.reconciled} settled "
        f"from /generation, {summary.unsettleable} without a generation id at worst case",
    )


def case_race(folder: Path) -> str:
    """Two runs on one --out, 300 rows, $0.03 cap, concurrency 50 each (was: $0.059 billed,
    55 rows bought twice)."""
    _prompts(folder, _rows(300))
    cap = D("0.03")
    with serve(speed=20, seed=2) as fake:
        env = {**os.environ, "OPENROUTER_BASE_URL": fake.base_url, "OPENROUTER_API_KEY": "sk-x"}
        command = [
            sys.executable, "-m", "openrouter_probe", "generate", str(folder / "prompts.jsonl"),
            "--policy", str(POLICY), "--out", str(folder / "out.jsonl"), "--budget-usd", "0.03",
            "--concurrency", "50", "--max-tokens", "300", "--quiet",
        ]  # fmt: skip
        runs = [
            subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            for _ in range(2)
        ]
        results = [run.communicate() for run in runs]
        billed = fake.ledger.total_usd
    ids = [json.loads(line)["id"] for line in (folder / "out.jsonl").read_text().splitlines()]
    twice = sum(1 for n in Counter(ids).values() if n > 1)
    refused = sum(b"is in use by" in err for _, err in results)
    summary = json.loads(
        subprocess.run(
            [sys.executable, "-m", "openrouter_probe", "audit", str(folder / "out.jsonl"),
             "--policy", str(POLICY), "--offline", "--format", "json"],
            capture_output=True, check=False,
        ).stdout
    )  # fmt: skip
    return _line(
        "two runs",
        cap,
        billed,
        D(str(summary["spent_usd"])),
        f"{refused} of 2 refused by the lock; {len(ids)} rows, {twice} bought twice",
    )


def case_tools(folder: Path) -> str:
    """Rows with 26 KB of tools, a $0.05 cap (was: overrun 6.6 times)."""
    tools = [
        {"type": "function", "function": {"name": f"t{i}", "description": "d" * 400}}
        for i in range(60)
    ]
    _prompts(folder, [{**row, "tools": tools} for row in _rows(60)])
    cap = D("0.05")
    with serve(speed=0, seed=3, median_tokens=50) as fake:
        summary = _run(folder, fake.base_url, budget_usd=cap, concurrency=20)
        billed = fake.ledger.total_usd
        prompt = fake.ledger.entries[0].prompt_tokens
    return _line(
        "tools 26 KB",
        cap,
        billed,
        summary.spent_total_usd,
        f"{summary.ok + summary.truncated} rows of 60 at {prompt} prompt tokens each; stop: {summary.stop_reason}",
    )


def _sender(cost: Any, billed: list[Decimal]) -> Callable[..., Any]:
    async def send(body: bytes, *, stream: bool, **_: Any) -> Answer:
        await asyncio.sleep(0)
        billed.append(D("0.00003"))  # what the provider billed, whatever the body says
        usage = {"prompt_tokens": 20, "completion_tokens": 10}
        if cost is not None:
            usage["cost"] = cost
        return Answer("Chutes", "m", "stop", "a", None, usage, f"gen-{len(billed)}")

    return send


def case_no_cost(folder: Path) -> str:
    """Answers without usage.cost, a $0.001 cap (was: 50 requests let through at $0), and a cost
    of "n/a" (was: the workers died)."""
    notes = []
    billed_all = counted_all = D(0)
    for label, cost in (("no cost", None), ('"n/a"', "n/a")):
        sub = folder / label.strip('"').replace(" ", "-").replace("/", "")
        sub.mkdir()
        _prompts(sub, _rows(50))
        billed: list[Decimal] = []
        summary = _run(
            sub, send=_sender(cost, billed), snapshot="bundled", budget_usd="0.001", max_tokens=8
        )
        billed_all += sum(billed, D(0))
        counted_all += summary.spent_total_usd
        notes.append(f"{label}: {len(billed)} sent, stop {summary.stop_reason}")
    return _line("no cost", D("0.002"), billed_all, counted_all, "; ".join(notes))


def case_keepalive(folder: Path) -> str:
    """A stream of keep-alive comments and no token for an hour (was: never ended). The run's
    waits move the fake's clock: an hour of keep-alives takes no real time."""
    _prompts(folder, _rows(5))
    clock = ManualClock()
    patient = Backoff(wait_initial_s=1, wait_max_s=30, wait_jitter_s=0, attempts=6, timeout_s=None)
    with serve(speed=0, seed=4, clock=clock, faults="keepalive=@1/3600") as fake:

        async def sleep(seconds: float) -> None:
            clock.advance(seconds)
            await asyncio.sleep(0)

        summary = _run(
            folder,
            fake.base_url,
            stream=True,
            read_timeout_s=60,
            budget_usd="0.01",
            sleep=sleep,
            clock=clock.now,
            backoff=patient,
        )
        billed = fake.ledger.total_usd
    return _line(
        "keep-alives",
        D("0.01"),
        billed,
        summary.spent_total_usd,
        f"ended {summary.stop_reason}: {summary.ok + summary.truncated} rows, "
        f"{summary.retries} retried after --read-timeout 60 s without a token",
    )


def case_platform_429(folder: Path) -> str:
    """A key-wide 429 with Retry-After: 61 on every request (was: 200 rows failed in 0.7 s, exit 0)."""
    _prompts(folder, _rows(200))
    clock = ManualClock()
    with serve(speed=0, seed=5, clock=clock, faults="platform_429=1/61") as fake:

        async def sleep(seconds: float) -> None:
            clock.advance(seconds)
            await asyncio.sleep(0)

        summary = _run(folder, fake.base_url, concurrency=20, sleep=sleep, budget_usd="1")
        billed = fake.ledger.total_usd
    return _line(
        "key 429",
        D("1"),
        billed,
        summary.spent_total_usd,
        f"stop {summary.stop_reason} (exit {summary.exit_code}), {summary.failed} failed, "
        f"{summary.not_sent} unsent",
    )


def case_datasets(folder: Path) -> str:
    """B3-B8 interleaved, 500 rows each, $1 (was: B3 500, B8 478, B7 473, B4 49, B5 0, B6 0)."""
    names = [f"B{i}" for i in range(3, 9)]
    rows = [
        {"id": f"{n}-{i}", "dataset": n, "prompt": f"question {i} " + "x" * 40}
        for i in range(500)
        for n in names
    ]
    _prompts(folder, rows)
    cap = D("1")
    with serve(speed=0, seed=6) as fake:
        summary = _run(folder, fake.base_url, budget_usd=cap, max_tokens=4096, concurrency=200)
        billed = fake.ledger.total_usd
    done = ", ".join(f"{n} {summary.datasets[n].done}" for n in names)
    return _line("datasets", cap, billed, summary.spent_total_usd, f"rows: {done}")


def case_kill(folder: Path) -> str:
    """kill -9 with 1,000 rows in flight at --max-tokens 4096, a $15 cap (was: $12.47 booked as
    possibly billed for good while the fake had billed $0.02-0.21 for them)."""
    _prompts(folder, _rows(3000))
    out = folder / "out.jsonl"
    journal = folder / "out.jsonl.ledger"
    with serve(speed=1, seed=7) as fake:
        env = {**os.environ, "OPENROUTER_BASE_URL": fake.base_url, "OPENROUTER_API_KEY": "sk-x"}
        command = [
            sys.executable, "-m", "openrouter_probe", "generate", str(folder / "prompts.jsonl"),
            "--policy", str(POLICY), "--out", str(out), "--budget-usd", "15",
            "--concurrency", "1000", "--max-tokens", "4096", "--quiet",
        ]  # fmt: skip
        first = subprocess.Popen(
            command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        in_flight = answered = 0
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # 1,000 in flight that the server has taken
            time.sleep(0.05)
            lines = journal.read_text().splitlines() if journal.exists() else []
            sent = sum('"sent"' in line for line in lines)
            settled = sum('"settled"' in line for line in lines)
            answered = sum('"gen"' in line for line in lines) - settled
            in_flight = sent - settled
            if answered >= 1000:
                break
        first.send_signal(signal.SIGKILL)
        first.wait()
        time.sleep(2)  # the fake finishes (and bills) what the killed run left in flight
        billed_at_kill = fake.ledger.total_usd
        from openrouter_probe.run.money.replay import replay_journal

        booked = replay_journal(journal).possibly_billed_usd
        resume = subprocess.run(
            [*command[:-1], "--format", "json"], env=env, capture_output=True, check=False
        )
        billed = fake.ledger.total_usd
    summary = json.loads(resume.stdout)
    return _line(
        "kill -9",
        D("15"),
        billed,
        D(str(summary["spent_total_usd"])),
        f"{in_flight} in flight at the kill ({answered} with a generation id) booked ${booked:.2f} (the fake had billed "
        f"${billed_at_kill:.2f} in all); the resume settled {summary['reconciled_before']} "
        f"and gave back ${D(str(summary['reconciled_before_back_usd'])):.2f}",
    )


CASES = {
    "timeout": case_timeout,
    "race": case_race,
    "tools": case_tools,
    "no-cost": case_no_cost,
    "keepalive": case_keepalive,
    "platform-429": case_platform_429,
    "datasets": case_datasets,
    "kill": case_kill,
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", nargs="*", choices=[*CASES, []], help="default: every case")
    args = parser.parse_args()
    logging.getLogger("openrouter_probe").addHandler(logging.NullHandler())
    logging.getLogger("openrouter_probe").propagate = False
    broken = 0
    for name in args.cases or CASES:
        with tempfile.TemporaryDirectory() as folder:
            line = CASES[name](Path(folder))
        print(line, flush=True)
        broken += "BROKEN" in line
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())

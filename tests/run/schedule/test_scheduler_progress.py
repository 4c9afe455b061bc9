"""The scheduler proves progress or stops, and shares are fair at any budget.

The deadlocks it had: every worker waited in ``Run._reserve_again`` for money that only another
dataset's close could free, with nothing in flight and no worker free to close it; the run never
ended. Each case is here with a guard (``asyncio.wait_for``: a hang fails the test instead of
blocking the suite; no test sleeps). The seed job's six datasets under a cap that buys about two rows
each: two of them got 0 rows while money stayed unspent.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from openrouter_probe.fake import serve
from openrouter_probe.generation import generate
from openrouter_probe.run.send.failure import Failure
from tests._generate import POLICY, LedgerSender, no_sleep, records, write_prompts
from tests._invariant import run_scenario
from tests.conftest import ROOT

#: Seconds a run may take before the guard calls it hung (each finishes in well under one).
GUARD_S = 60


def _guarded(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, GUARD_S))


def _two_turn_rows(path: Path, n: int = 6) -> Path:
    rows = [
        {
            "id": f"r{i}",
            "dataset": f"d{i % 2}",
            "messages": [
                {"role": "user", "content": f"question r{i} one"},
                {"role": "assistant", "content": "copied"},
                {"role": "user", "content": f"question r{i} two"},
            ],
        }
        for i in range(n)
    ]
    return write_prompts(path, rows)


@pytest.mark.parametrize("concurrency", [1, 2])
def test_multi_turn_rows_under_a_tiny_cap_end_with_a_reason(
    tmp_path: Path, concurrency: int
) -> None:
    """Issue 30's first case: 6 rows of user/assistant/user over 2 datasets, ``turns="all"``,
    $0.006, max_tokens 900: a row's second turn did not fit its dataset's share, and the only
    workers waited for the other dataset to close. Now the waiting turn borrows what the cap
    leaves, or its dataset closes naming the cap, its share and the max_tokens that fits."""
    prompts = _two_turn_rows(tmp_path / "prompts.jsonl")
    out = tmp_path / "out.jsonl"
    with serve(speed=0, seed=3) as fake:
        summary = _guarded(
            generate(prompts, policy=POLICY, out=out, base_url=fake.base_url, api_key="sk-fake",
                     sleep=no_sleep, max_tokens=900, budget_usd="0.006", turns="all",
                     concurrency=concurrency)
        )  # fmt: skip
        billed = fake.ledger.total_usd
    assert summary.stop_reason == "budget"
    assert billed <= Decimal("0.006") and summary.spent_total_usd >= billed > 0
    # a row was bought whole (both turns), and the reason says what to change
    assert any(r["status"] == "ok" for r in records(out))
    assert "of the $0.006 cap remains" in summary.message
    assert re.search(r"max_tokens=\d+ fits what remains", summary.message), summary.message


class _TimesOut:
    """A sender whose first attempt of every fifth row times out after it left (cost unknown, no
    generation id: it stays at its worst case), the rest billed as ``LedgerSender`` bills."""

    def __init__(self) -> None:
        self.inner = LedgerSender(seed=5)
        self.timeouts = 0

    async def __call__(self, body: bytes, **kwargs: Any) -> Any:
        request = json.loads(body)
        key = self.inner.row_id(request)
        first = key not in self.inner.attempts
        if first and int(key[1:]) % 5 == 0:
            self.inner.attempts[key] = 1
            self.timeouts += 1
            await asyncio.sleep(0)
            return Failure("transient", "read timed out after 1 s", cost_unknown=True)
        return await self.inner(body, **kwargs)


@pytest.mark.parametrize("concurrency", [1, 2])
def test_a_retry_whose_first_attempt_stays_at_its_worst_case_ends(
    tmp_path: Path, concurrency: int
) -> None:
    """Issue 30's second case: single-turn rows, a read timeout on 1 in 5 requests; the
    timed-out attempt stays counted at its worst case, its retry no longer fits the share, and
    no worker was free to close the other dataset. Now the run ends, under the cap."""
    rows = [
        {"id": f"r{i}", "dataset": f"d{i % 2}", "prompt": f"question r{i} " + "x" * 40}
        for i in range(20)
    ]
    prompts = write_prompts(tmp_path / "prompts.jsonl", rows)
    sender = _TimesOut()
    summary = _guarded(
        generate(prompts, policy=POLICY, out=tmp_path / "out.jsonl", api_key="sk-test",
                 send=sender, snapshot="bundled", sleep=no_sleep, max_tokens=900,
                 budget_usd="0.008", concurrency=concurrency)
    )  # fmt: skip
    billed = sum((cost for _, _, cost in sender.inner.ledger), Decimal(0))
    assert sender.timeouts >= 1
    assert summary.stop_reason == "budget", summary.message
    assert billed <= Decimal("0.008") and summary.spent_total_usd >= billed > 0
    assert summary.possibly_billed_usd > 0  # the timed-out attempts, at their worst case


def test_soak_seed_9113_ends_with_the_invariant_held(tmp_path: Path) -> None:
    """Issue 30: ``scripts/soak_invariant.py --seeds 9113:9114`` hung, twice of two."""
    outcome = run_scenario(9113, tmp_path)
    assert outcome.problems == [], outcome.line()
    assert outcome.billed_usd <= outcome.budget_usd <= outcome.counted_usd + outcome.budget_usd
    assert outcome.counted_usd >= outcome.billed_usd


def test_the_soak_names_a_seed_that_does_not_end_in_its_timeout(tmp_path: Path) -> None:
    """A hung seed is killed at ``--timeout`` (its process group), named, and counted."""
    script = ROOT / "scripts" / "soak_invariant.py"
    result = subprocess.run(
        [sys.executable, str(script), "--seeds", "9113:9114", "--timeout", "0.01"],
        capture_output=True,
        text=True,
        timeout=GUARD_S,
        cwd=tmp_path,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "seed 9113: HUNG (no end within 0 s; killed)" in result.stdout
    assert "1 hung (seeds 9113)" in result.stdout


def test_six_datasets_under_a_cap_for_two_rows_each_all_get_rows(tmp_path: Path) -> None:
    """Issue 32 item 4: six datasets at $0.03 with max_tokens 2048 (a request's worst case is
    about a fifth of the cap): two datasets got 0 rows while another spent 1.73x an equal share.
    Now a dataset whose request does not fit its share borrows when it has spent the least:
    every dataset gets rows, spend per dataset within 2x of the smallest, and what is left
    cannot buy one more request."""
    names = [f"D{i}" for i in range(6)]
    rows = [
        {"id": f"{n}-{i}", "dataset": n, "prompt": f"question {n}-{i} " + "x" * 40}
        for i in range(10)
        for n in names
    ]
    prompts = write_prompts(tmp_path / "prompts.jsonl", rows)
    for seed, concurrency in ((0, 8), (1, 1), (2, 32)):
        out = tmp_path / f"out-{seed}.jsonl"
        with serve(speed=0, seed=seed) as fake:
            summary = _guarded(
                generate(prompts, policy=POLICY, out=out, base_url=fake.base_url,
                         api_key="sk-fake", sleep=no_sleep, budget_usd="0.03", max_tokens=2048,
                         concurrency=concurrency)
            )  # fmt: skip
            billed = fake.ledger.total_usd
        assert summary.stop_reason == "budget"
        assert billed <= Decimal("0.03") and summary.spent_total_usd >= billed
        done = {name: summary.datasets[name].done for name in names}
        assert all(count >= 1 for count in done.values()), done
        spent = [summary.datasets[name].spent_usd for name in names]
        assert max(spent) <= 2 * min(spent), spent
        worst = Decimal(re.findall(r"may cost up to \$([0-9.]+)", summary.message)[0])
        assert Decimal("0.03") - summary.spent_total_usd < worst, summary.message


def test_the_dry_run_names_the_datasets_whose_share_cannot_buy_one_request(tmp_path: Path) -> None:
    """Issue 32 item 4: the dry run says which datasets cannot afford one request at the job's
    max_tokens, and the value that fits their share; a real run at that value gives each rows."""
    names = ["B3", "B4", "B5"]
    rows = [
        {"id": f"{n}-{i}", "dataset": n, "prompt": f"question {n}-{i} " + "x" * 40}
        for i in range(3)
        for n in names
    ]
    prompts = write_prompts(tmp_path / "prompts.jsonl", rows)

    def gen(max_tokens: int, **options: Any) -> Any:
        return _guarded(
            generate(prompts, policy=POLICY, out=tmp_path / "out.jsonl", api_key="sk-test",
                     send=LedgerSender(), snapshot="bundled", sleep=no_sleep,
                     budget_usd="0.009", max_tokens=max_tokens, **options)
        )  # fmt: skip

    dry = gen(4096, dry_run=True)
    said = [w for w in dry.warnings if "cannot buy one request at max_tokens=4096" in w]
    assert [w.split(":")[0] for w in said] == names, dry.warnings
    assert all("its share of the cap, $0.003000," in w for w in said)
    fits = {int(n) for w in said for n in re.findall(r"max_tokens=(\d+) fits its share", w)}
    assert len(fits) == 1 and 0 < min(fits) < 4096  # the same rows' shape: one figure
    at_fits = gen(fits.pop(), dry_run=True)
    assert not [w for w in at_fits.warnings if "cannot buy one request" in w]
    # enough for one request each: no warning
    assert not [w for w in gen(200, dry_run=True).warnings if "cannot buy" in w]


def test_a_row_dearer_than_the_whole_cap_is_skipped_and_named_not_a_stop(tmp_path: Path) -> None:
    """Issue 32 item 3 (the scheduler's side): a row whose worst case is more than the whole
    cap can never be bought; it was at the head of its dataset's queue and closed it (a budget
    stop, the good rows never sent). Now it is skipped and named, and the others go."""
    rows = [
        {"id": "r0", "dataset": "d0", "prompt": "question r0 short"},
        {"id": "r1", "dataset": "d0", "prompt": "question r1 " + "y" * 20_000},
        {"id": "r2", "dataset": "d0", "prompt": "question r2 short"},
        {"id": "r3", "dataset": "d1", "prompt": "question r3 short"},
    ]
    prompts = write_prompts(tmp_path / "prompts.jsonl", rows)
    sender = LedgerSender()
    summary = _guarded(
        generate(prompts, policy=POLICY, out=tmp_path / "out.jsonl", api_key="sk-test",
                 send=sender, snapshot="bundled", sleep=no_sleep, budget_usd="0.01",
                 max_tokens=200, concurrency=1)
    )  # fmt: skip
    sent = sorted(json.loads(b)["messages"][-1]["content"].split(" ")[1] for b in sender.bodies)
    assert sent == ["r0", "r2", "r3"]
    assert summary.stop_reason == "budget" and summary.not_sent == 1
    said = [w for w in summary.warnings if w.startswith("r1: skipped, not sent")]
    assert len(said) == 1 and "more than the whole $0.01 cap" in said[0], said
    assert "r1: skipped, not sent" in summary.message
    assert re.search(r"max_tokens=\d+ would fit it|its prompt alone does not fit", said[0])
    assert sorted(r["id"] for r in records(tmp_path / "out.jsonl")) == ["r0", "r2", "r3"]

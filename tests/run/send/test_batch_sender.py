"""``generate --batch`` on the fake OpenRouter: the Batch API sender on the run path.

The fake runs on a ``ManualClock`` that the run's injected sleep moves, so no test waits for a
batch: a poll interval of 15 s passes at once. Kills are real (``os._exit`` in a child process at
the named point); the fake lives in this process, so its ledger is what was billed.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

import openrouter_probe as orp
from openrouter_probe.errors import ConfigError
from openrouter_probe.fake import ManualClock
from openrouter_probe.run.lock import OutputLock
from openrouter_probe.run.money.replay import replay_journal
from openrouter_probe.run.money.spend import allocate
from openrouter_probe.run.send.batch_plan import BatchOptions
from tests.conftest import ROOT

HERE = ROOT / "examples" / "batch"
PROMPTS = HERE / "prompts.jsonl"
KEY = "sk-fake-batch-sender"
ROWS = 8


@pytest.fixture(scope="module")
def snap() -> Any:
    return orp.load_snapshot(HERE / "kimi-k3.snapshot.json")


@pytest.fixture
def policy(tmp_path: Path, snap: Any) -> Path:
    compiled = orp.compile_policy(orp.load_spec(HERE / "kimi-k3.spec.yaml"), snap)
    return compiled.save(tmp_path / "kimi-k3.yaml")


def _mover(clock: ManualClock) -> Any:
    async def sleep(seconds: float) -> None:
        clock.advance(seconds)
        await asyncio.sleep(0)

    return sleep


async def _batch(fake: Any, clock: ManualClock, policy: Path, out: Path, **kw: Any) -> Any:
    options: dict[str, Any] = {"max_tokens": 256, "budget_usd": "5", "sleep": _mover(clock)}
    return await orp.generate(
        PROMPTS,
        policy=policy,
        out=out,
        api_key=KEY,
        base_url=fake.base_url,
        clock=clock.now,
        **({"batch": True} | options | kw),
    )


def _records(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]


def _finished_once(out: Path) -> None:
    ids = [r["id"] for r in _records(out) if r["status"] in ("ok", "truncated")]
    assert sorted(ids) == sorted(set(ids))
    assert len(ids) == ROWS


def _counted_covers_billed(out: Path, billed: Decimal, budget: Decimal) -> None:
    counted = replay_journal(out.with_name(out.name + ".ledger"), repair=False).spent_usd
    assert billed <= budget
    assert counted >= billed


def test_allocate_sums_exactly_and_follows_the_weights() -> None:
    shares = allocate(Decimal("0.0133140"), [Decimal(1), Decimal(2), Decimal(3)])
    assert sum(shares) == Decimal("0.0133140")
    assert shares[0] < shares[1] < shares[2]
    assert allocate(Decimal("0.01"), [Decimal(0), Decimal(0)]) == [Decimal("0.005")] * 2
    third = allocate(Decimal(1), [Decimal(1)] * 3)
    assert sum(third) == 1 and third[1] == Decimal("0.333333333333")


def test_sync_and_batch_on_the_same_prompts(tmp_path: Path, snap: Any, policy: Path) -> None:
    clock = ManualClock(time.time())

    async def go() -> tuple[Any, Any, Decimal, Decimal]:
        with orp.fake.serve(snap, speed=0, seed=7, clock=clock) as fake:
            sync = await orp.generate(
                PROMPTS,
                policy=policy,
                out=tmp_path / "sync.jsonl",
                max_tokens=256,
                budget_usd="5",
                api_key=KEY,
                base_url=fake.base_url,
            )
            sync_usd = fake.ledger.total_usd
            batch = await _batch(fake, clock, policy, tmp_path / "batch.jsonl", budget_usd="0.05")
            return sync, batch, sync_usd, fake.ledger.total_usd - sync_usd

    sync, batch, sync_usd, batch_usd = asyncio.run(go())
    assert sync.ok + sync.truncated == batch.ok + batch.truncated == ROWS
    # Kimi K3's Together :batch row is listed at exactly half its sync price
    assert batch_usd == sync_usd / 2
    assert batch.spent_usd == batch_usd  # the rows' shares sum to the batch's usage.cost
    assert batch.peak_committed_usd <= Decimal("0.05")
    out = tmp_path / "batch.jsonl"
    _finished_once(out)
    records = _records(out)
    assert {r["provider"] for r in records} == {"Together"}
    synced = {r["id"]: r for r in _records(tmp_path / "sync.jsonl")}
    for r in records:  # same prompts, same seed: the same tokens, at half the price
        assert r["usage"]["completion_tokens"] == synced[r["id"]]["usage"]["completion_tokens"]
    ledger = (tmp_path / "batch.jsonl.ledger").read_text(encoding="utf-8")
    plan = ledger.index('"batch_plan"')
    assert plan < ledger.index('"batch_id"') < ledger.index('"settled"')
    assert '"status":"completed"' in ledger


def _child(
    fake: Any, policy: Path, out: Path, kill: str, budget: str = "5"
) -> subprocess.CompletedProcess[str]:
    """A batch run in a child that dies (os._exit, as a SIGKILL) at ``kill``: before the POST,
    after the POST (before the id is journaled) or at the first poll."""
    script = textwrap.dedent(
        f"""
        import asyncio, os
        import openrouter_probe as orp
        from openrouter_probe.api.batches import BatchClient
        create, get = BatchClient.create, BatchClient.get
        def dying_create(self, **kw):
            if {kill!r} == "before-post":
                os._exit(9)
            made = create(self, **kw)
            if {kill!r} == "after-post":
                os._exit(9)
            return made
        def dying_get(self, batch_id):
            os._exit(9)
        BatchClient.create = dying_create
        BatchClient.get = dying_get
        async def nap(s):
            await asyncio.sleep(0)
        asyncio.run(orp.generate({str(PROMPTS)!r}, policy={str(policy)!r}, out={str(out)!r},
            max_tokens=256, budget_usd={budget!r}, api_key={KEY!r}, base_url={fake.base_url!r},
            batch=True, sleep=nap))
        """
    )
    return subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=ROOT
    )


@pytest.mark.parametrize("kill", ["before-post", "after-post", "polling"])
def test_resume_after_a_kill(tmp_path: Path, snap: Any, policy: Path, kill: str) -> None:
    clock = ManualClock(time.time())
    out = tmp_path / "out.jsonl"

    async def go() -> tuple[Any, Decimal, int, int]:
        with orp.fake.serve(snap, speed=0, seed=7, clock=clock) as fake:
            done = await asyncio.to_thread(_child, fake, policy, out, kill)
            assert done.returncode == 9, done.stderr
            made = len(fake.fake.batches.batches)
            summary = await _batch(fake, clock, policy, out)
            return summary, fake.ledger.total_usd, made, len(fake.fake.batches.batches)

    summary, billed, made, made_in_all = asyncio.run(go())
    assert made == (0 if kill == "before-post" else 1)
    assert made_in_all == 1  # an orphan is adopted, never submitted again
    assert summary.stop_reason == "done"
    _finished_once(out)
    # every row billed once: at the batch price, as one uninterrupted batch run bills them
    assert billed == Decimal("0.013314")
    _counted_covers_billed(out, billed, Decimal(5))
    lines = [json.loads(x) for x in out.with_name(out.name + ".ledger").read_text().splitlines()]
    first = next(x for x in lines if "batch_plan" in x)
    closed = [x["status"] for x in lines if x.get("batch_done") == first["batch_plan"]]
    # killed before the POST: the resume cannot tell that from a lost answer whose batch the list
    # does not show yet, so the plan stays open (its worst case counted) and the rows, which the
    # cap pays for twice, are sent again; said in the summary
    assert closed == ([] if kill == "before-post" else ["completed"])
    lost = [w for w in summary.warnings if "no proof that it was never made" in w]
    assert len(lost) == (kill == "before-post")
    if kill != "before-post":  # each row's line moved to the resuming run's attempt
        moved = [x for x in lines if "batch_plan" in x and x is not first]
        assert len(moved) == ROWS and all(x["count"] == ROWS for x in moved)


def test_a_second_run_on_one_output_is_refused(tmp_path: Path, snap: Any, policy: Path) -> None:
    clock = ManualClock(time.time())
    out = tmp_path / "out.jsonl"

    async def go() -> None:
        with orp.fake.serve(snap, speed=0, seed=7, clock=clock) as fake:
            with (
                OutputLock(out, command="generate"),
                pytest.raises(ConfigError, match="one run per output"),
            ):
                await _batch(fake, clock, policy, out)
            assert len(fake.fake.batches.batches) == 0

    asyncio.run(go())


def test_402_on_results_then_a_rerun_after_credit(tmp_path: Path, snap: Any, policy: Path) -> None:
    clock = ManualClock(time.time())
    out = tmp_path / "out.jsonl"

    async def go() -> tuple[Any, Any, Decimal, int]:
        # two batches of 4 pass the submit's preflight; the credit covers one charge only
        with orp.fake.serve(snap, speed=0, seed=7, clock=clock, credit_usd=0.0095) as fake:
            first = await _batch(fake, clock, policy, out, batch=BatchOptions(size=4))
            billed_first = fake.ledger.total_usd
            fake.fake.credit.limit_usd = Decimal(5)
            second = await _batch(fake, clock, policy, out, batch=BatchOptions(size=4))
            return first, second, billed_first, len(fake.fake.batches.batches)

    first, second, billed_first, made = asyncio.run(go())
    assert first.stop_reason == "credits"
    assert "results withheld until the charge is covered" in first.message
    assert billed_first < Decimal("0.013314")
    assert made == 2  # the rerun fetched the withheld results; nothing was submitted again
    assert second.stop_reason == "done"
    _finished_once(out)
    _counted_covers_billed(out, Decimal("0.013314"), Decimal(5))


@pytest.mark.parametrize("fault", ["batch_expire=@1", "line_fail=@2+5"])
def test_unfinished_lines_go_into_a_later_batch(
    tmp_path: Path, snap: Any, policy: Path, fault: str
) -> None:
    clock = ManualClock(time.time())
    out = tmp_path / "out.jsonl"

    async def go() -> tuple[Any, Decimal, int]:
        with orp.fake.serve(snap, speed=0, seed=7, clock=clock, faults=fault) as fake:
            summary = await _batch(fake, clock, policy, out)
            return summary, fake.ledger.total_usd, len(fake.fake.batches.batches)

    summary, billed, made = asyncio.run(go())
    assert summary.stop_reason == "done"
    # line_fail=@2+5 fails lines 2 and 5 of every batch: 8 lines, then 2 (line 2 fails), then 1
    assert made == (2 if fault.startswith("batch_expire") else 3)
    _finished_once(out)
    _counted_covers_billed(out, billed, Decimal(5))
    if fault.startswith("line_fail"):
        assert billed == Decimal("0.013314")  # failed lines are billed nothing


def test_a_failed_batch_names_itself_and_bills_nothing(
    tmp_path: Path, snap: Any, policy: Path
) -> None:
    clock = ManualClock(time.time())
    out = tmp_path / "out.jsonl"

    async def go() -> tuple[Any, Decimal]:
        with orp.fake.serve(snap, speed=0, seed=7, clock=clock, faults="batch_failed=@1") as fake:
            summary = await _batch(fake, clock, policy, out)
            return summary, fake.ledger.total_usd

    summary, billed = asyncio.run(go())
    assert summary.stop_reason == "batch-failed"
    assert summary.message.startswith("batch batch-")
    assert "failed" in summary.message
    assert billed == 0
    assert summary.spent_usd == 0  # the reservation is freed: nothing was billed
    assert summary.not_sent == ROWS


def test_batch_options_without_batch_are_refused(tmp_path: Path, policy: Path) -> None:
    from click.testing import CliRunner

    from openrouter_probe.cli import cli

    for extra in (["--abandon"], ["--batch-size", "4"]):
        args = ["generate", str(PROMPTS), "--policy", str(policy), "-o", str(tmp_path / "o.jsonl")]
        result = CliRunner().invoke(cli, [*args, *extra])
        assert result.exit_code == 2, result.output
        assert (
            "--batch-size, --batch-live, --batch-poll and --abandon go with --batch"
            in result.stderr
        )
        assert not (tmp_path / "o.jsonl").exists()


def test_turns_all_goes_round_by_round(tmp_path: Path, snap: Any, policy: Path) -> None:
    prompts = tmp_path / "turns.jsonl"
    rows = [
        {
            "id": f"t{i}",
            "messages": [
                {"role": "user", "content": f"question {i}"},
                {"role": "assistant", "content": "an earlier answer"},
                {"role": "user", "content": "and then?"},
            ],
        }
        for i in range(3)
    ]
    prompts.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    clock = ManualClock(time.time())
    out = tmp_path / "out.jsonl"

    async def go() -> tuple[Any, list[int]]:
        with orp.fake.serve(snap, speed=0, seed=7, clock=clock) as fake:
            summary = await orp.generate(
                prompts,
                policy=policy,
                out=out,
                max_tokens=512,
                budget_usd="5",
                api_key=KEY,
                base_url=fake.base_url,
                batch=True,
                turns="all",
                sleep=_mover(clock),
                clock=clock.now,
            )
            sizes = [len(b.lines) for b in fake.fake.batches.batches.values()]
            return summary, sizes

    summary, sizes = asyncio.run(go())
    assert summary.stop_reason == "done"
    records = _records(out)
    assert len(records) == 3
    # every row's turn 1 in one batch, then the turns 2 (of rows whose turn 1 was not cut at
    # max_tokens, which ends a row) in the next
    assert sizes[0] == 3 and len(sizes) == 2
    assert sizes[1] == sum(len(r["turns"]) == 2 for r in records) >= 1


def test_ctrl_c_leaves_the_batch_running_and_a_rerun_writes_it(
    tmp_path: Path, snap: Any, policy: Path
) -> None:
    clock = ManualClock(time.time())
    out = tmp_path / "out.jsonl"
    moving = _mover(clock)

    async def interrupting(seconds: float) -> None:  # Ctrl-C at the first poll
        os.kill(os.getpid(), signal.SIGINT)
        await moving(seconds)

    async def go() -> tuple[Any, Any, Decimal, int]:
        with orp.fake.serve(snap, speed=0, seed=7, clock=clock) as fake:
            first = await _batch(
                fake,
                clock,
                policy,
                out,
                sleep=interrupting,
                handle_signals=True,
                drain_timeout_s=0.01,
            )
            second = await _batch(fake, clock, policy, out)
            return first, second, fake.ledger.total_usd, len(fake.fake.batches.batches)

    first, second, billed, made = asyncio.run(go())
    assert first.stop_reason in ("interrupted", "cancelled")
    (said,) = [w for w in first.warnings if "still running" in w]
    assert said.startswith("1 batch(es) still running: batch-") and "There is no cancel" in said
    assert second.stop_reason == "done" and made == 1
    _finished_once(out)
    assert billed == Decimal("0.013314")
    _counted_covers_billed(out, billed, Decimal(5))


def test_a_killed_batch_that_filled_the_cap_still_gets_its_results(
    tmp_path: Path, snap: Any, policy: Path
) -> None:
    clock = ManualClock(time.time())
    out = tmp_path / "out.jsonl"
    cap = "0.0183735"  # the eight rows' worst case at the :batch price, exactly

    async def go() -> tuple[Any, Decimal, list[list[str]]]:
        with orp.fake.serve(snap, speed=0, seed=7, clock=clock) as fake:
            done = await asyncio.to_thread(_child, fake, policy, out, "polling", cap)
            assert done.returncode == 9, done.stderr
            summary = await _batch(fake, clock, policy, out, budget_usd=cap)
            batches = fake.fake.batches.batches.values()
            return summary, fake.ledger.total_usd, [[x.custom_id for x in b.lines] for b in batches]

    summary, billed, batches = asyncio.run(go())
    assert summary.stop_reason == "done"
    # the killed run's batch held what the datasets' shares (a third of the cap each) allowed;
    # the resume claimed those six rows within that same money and sent the other two
    assert [len(b) for b in batches] == [6, 2]
    assert len({cid for b in batches for cid in b}) == ROWS
    _finished_once(out)
    assert billed == Decimal("0.013314")
    _counted_covers_billed(out, billed, Decimal(cap))


def test_live_batches_never_exceed_the_cap_and_the_run_finishes(
    tmp_path: Path, snap: Any, policy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Eight one-line batches, two at most running at once (seen from the client: a batch runs
    from its 202 until a GET shows it ended); without the cap all eight run at once."""
    from openrouter_probe.api.batches import BatchClient

    create, get = BatchClient.create, BatchClient.get
    running: set[str] = set()
    peaks: list[int] = []

    def counting_create(self: Any, **kw: Any) -> Any:
        made = create(self, **kw)
        running.add(made.id)
        peaks.append(len(running))
        return made

    def counting_get(self: Any, batch_id: str) -> Any:
        now = get(self, batch_id)
        if now.terminal:
            running.discard(batch_id)
        return now

    monkeypatch.setattr(BatchClient, "create", counting_create)
    monkeypatch.setattr(BatchClient, "get", counting_get)

    def run(live: int, out: Path) -> tuple[Any, Decimal, int]:
        clock = ManualClock(time.time())

        async def go() -> tuple[Any, Decimal, int]:
            with orp.fake.serve(snap, speed=0, seed=7, clock=clock) as fake:
                summary = await _batch(
                    fake, clock, policy, out, batch=BatchOptions(size=1, live=live)
                )
                return summary, fake.ledger.total_usd, len(fake.fake.batches.batches)

        return asyncio.run(go())

    summary, billed, made = run(2, tmp_path / "capped.jsonl")
    assert summary.stop_reason == "done" and made == ROWS
    assert max(peaks) == 2
    _finished_once(tmp_path / "capped.jsonl")
    assert billed == Decimal("0.013314")  # every row billed once, as one batch of eight bills
    _counted_covers_billed(tmp_path / "capped.jsonl", billed, Decimal(5))
    peaks.clear()
    summary, _, made = run(100, tmp_path / "free.jsonl")
    assert summary.stop_reason == "done" and made == ROWS and max(peaks) == ROWS


def test_requests_waiting_for_a_batch_stop_unsent_and_unbilled(
    tmp_path: Path, snap: Any, policy: Path
) -> None:
    """A Ctrl-C while one batch runs and seven rows wait for a slot: the seven are never
    submitted, billed nothing and counted nothing; a rerun gets the one and sends the seven."""
    clock = ManualClock(time.time())
    out = tmp_path / "out.jsonl"
    moving = _mover(clock)

    async def interrupting(seconds: float) -> None:  # Ctrl-C at the first poll
        os.kill(os.getpid(), signal.SIGINT)
        await moving(seconds)

    async def go() -> tuple[Any, Any, Decimal]:
        with orp.fake.serve(snap, speed=0, seed=7, clock=clock) as fake:
            one = BatchOptions(size=1, live=1)
            first = await _batch(
                fake, clock, policy, out, batch=one, sleep=interrupting, handle_signals=True
            )
            assert len(fake.fake.batches.batches) == 1
            second = await _batch(fake, clock, policy, out, batch=one)
            return first, second, fake.ledger.total_usd

    first, second, billed = asyncio.run(go())
    assert first.stop_reason in ("interrupted", "cancelled")  # the drain is 1 s in batch mode
    # the row in the running batch counts at its worst case until a rerun gets its result;
    # the seven that waited were never sent: unsent, and nothing counted for them
    assert (first.cancelled, first.not_sent) == (1, ROWS - 1)
    assert 0 < first.spent_usd < Decimal("0.0183735") / 4  # eight rows' worst case: 0.0183735
    assert second.stop_reason == "done"
    _finished_once(out)
    assert billed == Decimal("0.013314")
    _counted_covers_billed(out, billed, Decimal(5))


def test_the_first_poll_waits_poll_s(tmp_path: Path, snap: Any, policy: Path) -> None:
    clock = ManualClock(time.time())
    waits: list[float] = []
    moving = _mover(clock)

    async def sleep(seconds: float) -> None:
        waits.append(seconds)
        await moving(seconds)

    async def go() -> Any:
        with orp.fake.serve(snap, speed=0, seed=7, clock=clock) as fake:
            return await _batch(
                fake,
                clock,
                policy,
                tmp_path / "out.jsonl",
                batch=BatchOptions(poll_s=40),
                sleep=sleep,
            )

    assert asyncio.run(go()).stop_reason == "done"
    assert 32 <= waits[0] <= 48  # 40 s with its jitter of 20%, not the default 15
    with pytest.raises(ConfigError, match=r"poll_s=0: seconds from 1 to 3600"):
        BatchOptions(poll_s=0)
    with pytest.raises(ConfigError, match=r"live=0: a whole number from 1 to 100"):
        BatchOptions(live=0)
    for size in (0, "10", None, True, 10.0):
        with pytest.raises(ConfigError, match=r"size=.*: a whole number from 1 to 5000"):
            BatchOptions(size=size)  # type: ignore[arg-type]


def test_batch_live_and_batch_poll_from_the_cli(
    tmp_path: Path, policy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from click.testing import CliRunner

    import openrouter_probe.generation as generation
    from openrouter_probe.cli import cli
    from openrouter_probe.cli import generate as cli_generate
    from openrouter_probe.run.send import batch_plan

    asked: list[Any] = []

    async def capture(*args: Any, **kw: Any) -> Any:
        asked.append(kw["batch"])
        raise ConfigError("captured")

    monkeypatch.setattr(generation, "generate", capture)
    args = ["generate", str(PROMPTS), "--policy", str(policy), "-o", str(tmp_path / "o.jsonl")]
    result = CliRunner().invoke(cli, [*args, "--batch", "--batch-live", "2", "--batch-poll", "30"])
    assert result.exit_code == 1 and "captured" in result.stderr
    assert asked == [BatchOptions(live=2, poll_s=30.0)]
    for bad, said in (
        (["--batch-poll", "0.5"], "0.5 is not in the range 1.0<=x<=3600.0"),
        (["--batch-poll", "7200"], "7200.0 is not in the range 1.0<=x<=3600.0"),
        (["--batch-live", "0"], "0 is not in the range 1<=x<=100"),
    ):
        result = CliRunner().invoke(cli, [*args, "--batch", *bad])
        assert result.exit_code == 2 and said in result.stderr, result.stderr
    # the CLI's ranges (kept out of its imports: --help stays fast) are the library's
    assert (
        cli_generate._MAX_LINES,
        cli_generate._LIVE,
        cli_generate._MAX_LIVE,
        cli_generate._MIN_POLL_S,
        cli_generate._MAX_POLL_S,
    ) == (
        batch_plan.MAX_BATCH_LINES,
        batch_plan.DEFAULT_LIVE_BATCHES,
        batch_plan.MAX_LIVE_BATCHES,
        batch_plan.MIN_POLL_S,
        batch_plan.MAX_POLL_S,
    )

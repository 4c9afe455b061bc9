"""Case by case: every way a paid request could go unaccounted, on the fake server.

Each test reproduces one case of the issue against the project's loopback fake OpenRouter (its
ledger is the truth of what was billed) and asserts the money invariant for it: what the fake billed
<= the cap, and what the client counts >= what the fake billed. The waits run on the fake's
``ManualClock`` moved by the run's injected sleep; the one exception says why.
"""

from __future__ import annotations

import asyncio
import copy
import json
import logging
import re
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from openrouter_probe.api.backoff import Backoff
from openrouter_probe.errors import ConfigError
from openrouter_probe.fake import ManualClock, serve
from openrouter_probe.generation import generate
from openrouter_probe.generation.manifest import SourceOptions
from openrouter_probe.rules.snapshot import Snapshot, bundled_snapshot
from openrouter_probe.run.report import render_result
from openrouter_probe.run.send.transport import Answer, Failure
from tests._generate import (
    POLICY,
    LedgerSender,
    no_sleep,
    prompt_rows,
    records,
    write_prompts,
)

D = Decimal
FAST = Backoff(wait_initial_s=1, wait_max_s=30, wait_jitter_s=0, attempts=6, timeout_s=600)


def _gen(tmp: Path, base_url: str, **options: Any) -> Any:
    options.setdefault("sleep", no_sleep)
    options.setdefault("backoff", FAST)
    options.setdefault("max_tokens", 100)
    return asyncio.run(
        generate(
            tmp / "prompts.jsonl",
            policy=options.pop("policy", POLICY),
            out=tmp / "out.jsonl",
            base_url=base_url,
            **options,
        )
    )


def _on(clock: ManualClock) -> dict[str, Any]:
    """The options that put a run on the fake's manual clock: its waits move the fake's time,
    and it reads the time from it."""
    return {"sleep": _advancing(clock), "clock": clock.now}


def _advancing(clock: ManualClock) -> Any:
    """A sleep that moves the fake's manual clock instead of waiting."""

    async def sleep(seconds: float) -> None:
        clock.advance(seconds)
        await asyncio.sleep(0)

    return sleep


def test_a_request_that_timed_out_after_it_left_counts_until_settled(tmp_path: Path) -> None:
    """Issue 15: five slow first bytes with --read-timeout 0.5 and a $0.0030 cap: the timed-out
    attempts were settled at $0 and retried, the fake billed them all the same ($0.0045).

    The one test on real time: the client's read timeout (aiohttp's, 0.05 s) must fire while the
    fake still holds the answer (0.5 s on its real clock), as on the real API."""
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(40))
    budget = D("0.0030")
    with serve(speed=0, seed=1, faults="slow_first_byte=@1+2+3+4+5/0.5") as fake:
        summary = _gen(tmp_path, fake.base_url, read_timeout_s=0.05, budget_usd=budget)

        def slow() -> list[Any]:
            return [e for e in fake.ledger.entries if e.generation_id not in _recorded(tmp_path)]

        # billed in full though the client had left, once the fake finishes them
        assert asyncio.run(_until(lambda: len(slow()) == 5)), "the fake never billed them"
        assert fake.ledger.total_usd <= budget
        assert summary.spent_total_usd >= fake.ledger.total_usd
        assert summary.possibly_billed_usd + summary.reconciled_back_usd > 0


async def _until(condition: Any) -> bool:
    """Poll the fake (not a wait for time to pass: it finishes the slow answers on its own)."""
    for _ in range(1000):
        if condition():
            return True
        await asyncio.sleep(0.005)
    return False


def _recorded(tmp: Path) -> set[str]:
    return {r["generation_id"] for r in records(tmp / "out.jsonl") if r["generation_id"]}


@pytest.mark.parametrize("stream", [False, True])
def test_keep_alives_are_not_progress(
    tmp_path: Path, stream: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 15: a stream of ': OPENROUTER PROCESSING' comments and no token never ended (every byte
    reset the read timeout), holding its reservation. Now a stream with no token for
    --read-timeout fails, a body fails at its ceiling (--read-timeout + max_tokens / 4 tokens/s),
    and what the fake billed for the abandoned attempt is settled from /generation."""
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(3))
    clock = ManualClock()
    # the fake's stalled handler moves the shared clock too: no retry deadline in this test
    patient = Backoff(wait_initial_s=1, wait_max_s=30, wait_jitter_s=0, attempts=6, timeout_s=None)
    # Keep-alives for three years (500 MB of them, more than the sockets between the two can
    # hold): the client always leaves first, however far the fake's thread runs ahead of it. An
    # hour's worth could all be written, answer included, before the client read a byte: then
    # the stream would be billed in full, and the outcome would be scheduling's.
    with (
        serve(speed=0, seed=2, clock=clock, faults="keepalive=@1/100000000") as fake,
        caplog.at_level(logging.WARNING),
    ):
        summary = _gen(
            tmp_path,
            fake.base_url,
            stream=stream,
            read_timeout_s=60,
            budget_usd=1,
            backoff=patient,
            # one request at a time: the fake's keep-alive handler moves the shared clock by
            # hours, and another stream in flight then would see the same silence and fail too
            concurrency=1,
            **_on(clock),
        )
        out = {r["id"]: r for r in records(tmp_path / "out.jsonl")}
        assert all(r["status"] in ("ok", "truncated") for r in out.values())
        assert sorted(r["attempts"] for r in out.values()) == [1, 1, 2]
        assert summary.retries == 1 and summary.reconciled == 1
        assert summary.spent_usd == fake.ledger.total_usd  # the abandoned attempt, at its price
        assert summary.possibly_billed_usd == 0
        abandoned = [e for e in fake.ledger.entries if e.generation_id not in _recorded(tmp_path)]
        # a body is billed in full though the client left; a stream for what it had sent
        assert len(abandoned) == 1 and abandoned[0].completion_tokens == (0 if stream else 100)
    why = "only keep-alive comments (read_timeout_s)" if stream else "(the attempt's ceiling)"
    assert f"attempt 1 failed (no {'token' if stream else 'answer'} " in caplog.text
    assert why in caplog.text


def test_two_runs_on_one_output_the_second_stops_and_touches_nothing(tmp_path: Path) -> None:
    """Issue 15: two runs on the same --out each kept their own cap (55 rows bought twice), and each
    start repaired the last line the other may be writing. Now the second, dry runs included,
    stops with one line naming the holder; the output is untouched."""
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(30))
    out = tmp_path / "out.jsonl"
    gate = asyncio.Event()
    first = LedgerSender(seed=1, gate=gate)
    second = LedgerSender(seed=2)

    def run(sender: LedgerSender, **more: Any) -> Any:
        return generate(
            tmp_path / "prompts.jsonl",
            policy=POLICY,
            out=out,
            send=sender,
            snapshot="bundled",
            sleep=no_sleep,
            max_tokens=50,
            budget_usd="0.03",
            concurrency=10,
            **more,
        )

    async def scenario() -> tuple[list[str], Any]:
        task = asyncio.ensure_future(run(first))
        while first.in_flight < 10:
            await asyncio.sleep(0)
        out.open("a").write('{"id":"r99","stat')  # the first run is writing a line
        refused = []
        for more in ({}, {"dry_run": True}):
            with pytest.raises(ConfigError) as info:
                await run(second, **more)
            refused.append(str(info.value))
        torn = out.read_bytes()
        gate.set()
        out.write_bytes(torn[: torn.rindex(b"\n") + 1] if b"\n" in torn else b"")
        return refused, await task

    refused, summary = asyncio.run(scenario())
    assert second.bodies == [] and summary.stop_reason == "done"
    pid = __import__("os").getpid()
    host = __import__("socket").gethostname()
    for message in refused:
        assert "\n" not in message
        assert message.startswith(f"{out} is in use by `generate` (pid {pid} on {host}, since ")
        assert "one run per output" in message


def test_tool_heavy_rows_are_bounded_by_every_byte_they_send(tmp_path: Path) -> None:
    """Issue 15: the worst case counted only `messages`: rows with 26 KB of `tools` overran a
    $0.05 cap 6.6 times. The fake bills tools as prompt tokens, as providers do."""
    tools = [
        {
            "type": "function",
            "function": {"name": f"tool_{i}", "description": "d" * 400, "parameters": {}},
        }
        for i in range(60)
    ]
    rows = [{**row, "tools": tools} for row in prompt_rows(60)]
    write_prompts(tmp_path / "prompts.jsonl", rows)
    budget = D("0.05")
    with serve(speed=0, seed=3, median_tokens=50) as fake:
        summary = _gen(tmp_path, fake.base_url, budget_usd=budget, concurrency=20)
        assert fake.ledger.entries[0].prompt_tokens > 6000  # the tools are most of the prompt
        assert fake.ledger.total_usd <= budget
        assert summary.spent_total_usd == fake.ledger.total_usd
        assert summary.stop_reason == "budget" and 0 < summary.ok < 60


def test_tool_heavy_rows_within_the_cap_when_every_byte_is_billed(tmp_path: Path) -> None:
    """The same case in process: a sender that bills every byte of the body as a prompt token at
    the highest admitted input price ($0.60/M) and 100 output tokens at $3/M."""
    tools = [
        {"type": "function", "function": {"name": f"t{i}", "description": "d" * 400}}
        for i in range(60)
    ]
    rows = [{**row, "tools": tools} for row in prompt_rows(60)]
    write_prompts(tmp_path / "prompts.jsonl", rows)
    billed: list[Decimal] = []

    async def send(body: bytes, *, stream: bool, **_: Any) -> Answer:
        await asyncio.sleep(0)
        cost = len(body) * D("0.0000006") + 100 * D("0.000003")
        billed.append(cost)
        usage = {"prompt_tokens": len(body), "completion_tokens": 100, "cost": float(cost)}
        return Answer("Moonshot AI", "m", "length", "a", None, usage, f"gen-{len(billed)}")

    budget = D("0.05")
    summary = asyncio.run(
        generate(
            tmp_path / "prompts.jsonl",
            policy=POLICY,
            out=tmp_path / "out.jsonl",
            send=send,
            snapshot="bundled",
            budget_usd=budget,
            max_tokens=100,
            concurrency=20,
        )
    )
    assert sum(billed) <= budget and summary.stop_reason == "budget"
    assert 0 < len(billed) < 60


def _dear_snapshot() -> Snapshot:
    """The bundled K2.5 snapshot with Moonshot AI ten times dearer but capped at 1,024 output
    tokens: a run at max_tokens 4096 excludes it, a row at 1,000 may be routed to it."""
    snap = bundled_snapshot()
    data = copy.deepcopy(snap.data)
    for endpoint in data["endpoints"]:
        if endpoint["tag"] == "moonshotai/int4":
            endpoint["pricing"]["completion"] = "0.00003"
            endpoint["max_completion_tokens"] = 1024
    return Snapshot(
        model=snap.model, data=data, taken_at=snap.taken_at, source="file", origin="dear.json"
    )


def test_a_row_with_its_own_max_tokens_is_priced_where_it_may_be_routed(tmp_path: Path) -> None:
    """Issue 15: prices came from the endpoints admitted at the run's max_tokens, while a row with
    a smaller max_tokens could be routed to a dearer endpoint the run's routing excluded."""
    rows = [{**row, "max_tokens": 1000} for row in prompt_rows(40)]
    write_prompts(tmp_path / "prompts.jsonl", rows)
    others = ["chutes/int4", "deepinfra/int4", "siliconflow/int4", "atlas-cloud/int4"]
    faults = ",".join(f"upstream_503:{tag}=1" for tag in [*others, "parasail/int4"])
    budget = D("0.10")
    with serve(_dear_snapshot(), speed=0, seed=4, median_tokens=4000, faults=faults) as fake:
        summary = _gen(tmp_path, fake.base_url, budget_usd=budget, max_tokens=4096,
                       source=SourceOptions.of(row_params="max_tokens"))  # fmt: skip
        assert {e.tag for e in fake.ledger.entries} == {"moonshotai/int4"}
        assert fake.ledger.total_usd <= budget
        assert summary.spent_total_usd == fake.ledger.total_usd
        assert summary.stop_reason == "budget"


def test_a_key_wide_429_past_max_wait_stops_the_run_and_leaves_rows_unsent(
    tmp_path: Path,
) -> None:
    """Issue 15: a key-wide 429 with Retry-After: 61 failed 200 rows one by one in 0.7 s and ended
    `done`, exit 0. Now the run stops at once, says when to resume, and no row is failed."""
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(200))
    clock = ManualClock()
    with serve(speed=0, seed=5, clock=clock, faults="platform_429=1/61") as fake:
        summary = _gen(tmp_path, fake.base_url, concurrency=20, sleep=_advancing(clock))
        assert summary.stop_reason == "rate-limited" and summary.exit_code == 1
        assert summary.failed == 0 and summary.not_sent == 200 and summary.ok == 0
        assert re.search(r"rate limited by the key: resume after \d\d:\d\d UTC", summary.message)
        assert "max_wait_s=60 s" in summary.message
        assert fake.ledger.total_usd == 0 and not (tmp_path / "out.jsonl").read_text()


def test_a_key_wide_429_within_max_wait_pauses_the_whole_pool(tmp_path: Path) -> None:
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(50))
    clock = ManualClock()
    with serve(speed=0, seed=6, clock=clock, faults="platform_429=@3+4+5/20") as fake:
        start = clock.now()
        summary = _gen(tmp_path, fake.base_url, concurrency=10, sleep=_advancing(clock))
        assert summary.stop_reason == "done" and summary.ok + summary.truncated == 50
        # the pool waited the 20 s once, not each of the three rows on its own
        assert 20 <= clock.now() - start < 40
        assert summary.pauses == 1 and summary.failed == 0
        assert summary.spent_usd == fake.ledger.total_usd


def test_the_retry_deadline_runs_from_a_rows_first_send(tmp_path: Path) -> None:
    """Issue 15: the retry deadline counted the time a row waited for the cap."""
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(2))
    now = [0.0]

    async def send(body: bytes, *, stream: bool, **_: Any) -> Answer | Failure:
        key = json.loads(body)["messages"][0]["content"].split(" ")[1]
        calls.append(key)
        if key == "0":
            now[0] += 700  # the first row takes 700 s; the second waits for the cap meanwhile
        elif calls.count(key) == 1:
            return Failure("transient", "502", status=502)
        usage = {"prompt_tokens": 10, "completion_tokens": 5, "cost": 0.00001}
        return Answer("Chutes", "m", "stop", "a", None, usage, f"gen-{len(calls)}")

    calls: list[str] = []
    summary = asyncio.run(
        generate(
            tmp_path / "prompts.jsonl",
            policy=POLICY,
            out=tmp_path / "out.jsonl",
            send=send,
            snapshot="bundled",
            sleep=no_sleep,
            clock=lambda: now[0],
            backoff=Backoff(wait_initial_s=1, wait_max_s=30, attempts=6, timeout_s=600),
            budget_usd="0.0012",  # one request in flight at a time
            max_tokens=200,
            concurrency=2,
        )
    )
    assert calls == ["0", "1", "1"] and summary.ok == 2 and summary.failed == 0


def test_the_first_stop_cancels_backoff_waits(tmp_path: Path) -> None:
    """Issue 15: the first Ctrl-C waited out backoff sleeps (24.7 s)."""
    from openrouter_probe.run.schedule import runner

    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(4))
    forever = asyncio.Event()
    seen: list[runner.Run] = []
    original = runner.Run.run

    async def capture(self: runner.Run) -> Any:
        seen.append(self)
        return await original(self)

    async def sleep(seconds: float) -> None:
        seen[0].request_stop("interrupted", "stopped by SIGINT")  # Ctrl-C during the wait
        await forever.wait()

    def fail(request: dict[str, Any], attempt: int) -> Failure:
        return Failure("transient", "503 overloaded", status=503)

    async def scenario() -> Any:
        runner.Run.run = capture  # type: ignore[method-assign]
        try:
            return await asyncio.wait_for(
                generate(
                    tmp_path / "prompts.jsonl",
                    policy=POLICY,
                    out=tmp_path / "out.jsonl",
                    send=LedgerSender(fail=fail),
                    snapshot="bundled",
                    sleep=sleep,
                    max_tokens=20,
                ),
                10,
            )
        finally:
            runner.Run.run = original  # type: ignore[method-assign]

    summary = asyncio.run(scenario())
    assert summary.stop_reason == "interrupted" and summary.failed == 0
    assert summary.not_sent == 4 and summary.requests == 4


def test_datasets_are_served_in_turn_and_share_the_money(tmp_path: Path) -> None:
    """Issue 15: B3-B8 interleaved, $1: B3 500 rows, B8 478, B7 473, B4 49, B5 0, B6 0, and the
    summary left B6 out. Now each dataset gets an equal share and every one is listed."""
    names = [f"B{i}" for i in range(3, 9)]
    rows = [
        {"id": f"{name}-{i}", "dataset": name, "prompt": f"question {i} " + "x" * 40}
        for i in range(60)
        for name in names
    ]
    write_prompts(tmp_path / "prompts.jsonl", rows)
    budget = D("0.10")
    with serve(speed=0, seed=7, median_tokens=600) as fake:
        summary = _gen(tmp_path, fake.base_url, budget_usd=budget, max_tokens=300, concurrency=50)
        assert fake.ledger.total_usd <= budget and summary.stop_reason == "budget"
        done: dict[str, int] = {}
        for r in records(tmp_path / "out.jsonl"):
            done[r["dataset"]] = done.get(r["dataset"], 0) + 1
        assert set(done) == set(names)
        assert max(done.values()) - min(done.values()) <= 3, done
        for name in names:  # each kept to its sixth of the cap (within one request)
            assert summary.datasets[name].spent_usd <= budget / 6 + D("0.001")
        text = render_result(summary)
        for name in names:
            assert f"  {name}: {done[name]}/60 rows" in text


def test_weights_give_a_dataset_more_of_the_money(tmp_path: Path) -> None:
    rows = [
        {"id": f"{name}-{i}", "dataset": name, "prompt": f"question {i} " + "x" * 40}
        for i in range(80)
        for name in ("B3", "B4")
    ]
    write_prompts(tmp_path / "prompts.jsonl", rows)
    with serve(speed=0, seed=8, median_tokens=600) as fake:
        summary = _gen(tmp_path, fake.base_url, budget_usd="0.05", max_tokens=300, weights="B3=2")
        assert fake.ledger.total_usd <= D("0.05") and summary.stop_reason == "budget"
        b3, b4 = summary.datasets["B3"], summary.datasets["B4"]
        assert 1.6 < b3.done / b4.done < 2.5 and 1.6 < b3.spent_usd / b4.spent_usd < 2.5
    with pytest.raises(ConfigError, match=r"weights='B9': no such dataset in the prompts"):
        _gen(tmp_path, "http://127.0.0.1:9/api/v1", weights="B9=2", dry_run=True)
    with pytest.raises(ConfigError, match=r"weights=B3=0: a weight is a number above 0"):
        _gen(tmp_path, "http://127.0.0.1:9/api/v1", weights="B3=0", dry_run=True)


def test_a_finished_dataset_lends_what_it_leaves(tmp_path: Path) -> None:
    rows = [{"id": f"S-{i}", "dataset": "S", "prompt": f"question {i}"} for i in range(3)]
    rows += [{"id": f"L-{i}", "dataset": "L", "prompt": f"question {i}"} for i in range(200)]
    write_prompts(tmp_path / "prompts.jsonl", rows)
    with serve(speed=0, seed=9, median_tokens=600) as fake:
        summary = _gen(tmp_path, fake.base_url, budget_usd="0.08", max_tokens=300)
        small, large = summary.datasets["S"], summary.datasets["L"]
        assert small.done == 3 and small.spent_usd < D("0.003")
        # L spent far more than its half: S's unused half was lent to it
        assert large.spent_usd > D("0.075") and large.done < 200
        assert fake.ledger.total_usd <= D("0.08")


def test_per_dataset_estimates_keep_each_target(tmp_path: Path) -> None:
    """Issue 15: the target estimator used one mean over all datasets."""
    rows = [{"id": f"S-{i}", "dataset": "S", "prompt": "q", "max_tokens": 5} for i in range(400)]
    rows += [{"id": f"L-{i}", "dataset": "L", "prompt": "q", "max_tokens": 400} for i in range(400)]
    write_prompts(tmp_path / "prompts.jsonl", rows)
    with serve(speed=0, seed=10, median_tokens=4000) as fake:
        summary = _gen(tmp_path, fake.base_url, target_tokens=2000, concurrency=100,
                       source=SourceOptions.of(row_params="max_tokens"))  # fmt: skip
        assert fake.ledger.total_usd > 0
        tokens = summary.output_tokens
        assert 2000 <= tokens["S"] <= 2000 + 5 * 2 and 2000 <= tokens["L"] <= 2000 + 400 * 2


def test_money_is_never_shown_negative(tmp_path: Path) -> None:
    """Issue 15: the summary printed "$-0.029018 remains" after an answer dearer than its worst
    case took the spend over the cap."""
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(1))

    async def send(body: bytes, *, stream: bool, **_: Any) -> Answer:
        usage = {"prompt_tokens": 10, "completion_tokens": 5, "cost": 0.03}
        return Answer("Chutes", "m", "stop", "a", None, usage, "gen-1")

    summary = asyncio.run(
        generate(
            tmp_path / "prompts.jsonl",
            policy=POLICY,
            out=tmp_path / "out.jsonl",
            send=send,
            snapshot="bundled",
            budget_usd="0.001",
            max_tokens=8,
        )
    )
    text = render_result(summary)
    assert "$0.00 remains" in text and "$-" not in text and "-$" not in text
    assert summary.remaining_usd == 0 and summary.to_dict()["remaining_usd"] == 0
    assert "over the cap by $0.029000" in text


def test_a_shards_dry_run_shows_the_total_and_the_keys_limit(tmp_path: Path) -> None:
    """Issue 15: --budget-usd with --shard is per shard; the dry run says what all the shards may
    spend on one key, and warns when the key's limit is below it."""
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(100))
    with serve(speed=0, seed=11, credit_usd=25) as fake:
        summary = _gen(tmp_path, fake.base_url, budget_usd=10, shard="1/4", dry_run=True)
        assert summary.stop_reason == "dry-run" and summary.shards == 4
        assert any(
            "budget_usd=10 is per shard: the 4 shards may spend $40.00 on the key in all" in w
            for w in summary.warnings
        )
        assert any(
            "the key's remaining limit is $25.00, below the $40.00 that 4 shards of $10.00 may" in w
            for w in summary.warnings
        )
        assert "$10.00 x 4 shards = $40.00 on the key in all" in render_result(summary)
        assert fake.ledger.total_usd == 0

"""The run, with the HTTP transport replaced by an in-process sender that keeps a ledger.

Resume, the cap, retries, final errors, targets and cancellation are decided by the runner, not by
the transport; these tests drive it directly (no sockets, no waits). The same properties are tested
again over real loopback HTTP against the fake server in ``tests/generation/test_generate_http.py``.
"""

from __future__ import annotations

import asyncio
import json
import logging
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from openrouter_probe.api.backoff import Backoff
from openrouter_probe.errors import ConfigError, PolicyError
from openrouter_probe.generation import generate
from openrouter_probe.run.books.output import FINISHED
from openrouter_probe.run.money.limit import AdaptiveLimit
from openrouter_probe.run.report import render_result
from openrouter_probe.run.send.transport import Answer, Failure
from tests._generate import (
    POLICY,
    LedgerSender,
    http_failure,
    no_sleep,
    prompt_rows,
    records,
    write_prompts,
)

FAST = Backoff(wait_initial_s=0.5, wait_max_s=30, wait_jitter_s=0, attempts=4, timeout_s=None)


def run(coro: Any) -> Any:
    return asyncio.run(coro)


async def _gen(tmp: Path, sender: LedgerSender, **options: Any) -> Any:
    options.setdefault("snapshot", "bundled")
    options.setdefault("sleep", no_sleep)
    options.setdefault("backoff", FAST)
    return await generate(
        tmp / "prompts.jsonl", policy=POLICY, out=tmp / "out.jsonl", send=sender, **options
    )


def test_every_row_once_with_the_policy_block_byte_for_byte(tmp_path: Path) -> None:
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(30, datasets=2))
    sender = LedgerSender(seed=1)
    summary = run(_gen(tmp_path, sender, concurrency=8, max_tokens=64, temperature=0.0))
    out = records(tmp_path / "out.jsonl")
    assert sorted(r["id"] for r in out) == sorted(f"r{i}" for i in range(30))
    assert summary.ok + summary.truncated == 30 and summary.stop_reason == "done"
    provider = yaml.safe_load(POLICY.read_text())["provider"]
    block = json.dumps(provider, separators=(",", ":")).encode()
    for body in sender.bodies:
        assert b'"provider":' + block + b"," in body
        request = json.loads(body)
        assert request["model"] == "moonshotai/kimi-k2.5"
        assert request["provider"] == provider
        assert request["max_tokens"] == 64 and request["temperature"] == 0.0
        assert request["stream"] is False
    first = out[0]
    for key in (
        "id",
        "dataset",
        "status",
        "provider",
        "model",
        "finish_reason",
        "content",
        "reasoning",
        "usage",
        "cost_usd",
        "generation_id",
        "attempts",
        "error",
    ):
        assert key in first
    # cost_usd is usage.cost, and the client's sum equals the sender's ledger to the cent (and finer)
    assert all(r["cost_usd"] == r["usage"]["cost"] for r in out)
    recorded = sum(Decimal(str(r["cost_usd"])) for r in out)
    assert recorded == sender.billed_usd == summary.spent_usd
    assert {r["generation_id"] for r in out} == {g for _, g, _ in sender.ledger}
    truncated = [r for r in out if r["finish_reason"] == "length"]
    assert all(r["status"] == "truncated" for r in truncated)
    assert summary.truncated == len(truncated)


def test_rerun_sends_nothing(tmp_path: Path) -> None:
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(12))
    run(_gen(tmp_path, LedgerSender(seed=2), max_tokens=32))
    again = LedgerSender(seed=3)
    summary = run(_gen(tmp_path, again, max_tokens=999, temperature=0.7))  # other sampling: kept
    assert again.bodies == []
    assert summary.rows_already_done == 12 and summary.rows_to_send == 0
    assert len(records(tmp_path / "out.jsonl")) == 12


def test_torn_tail_is_cut_and_that_row_sent_again(tmp_path: Path) -> None:
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(5))
    sender = LedgerSender(seed=4)
    run(_gen(tmp_path, sender, max_tokens=16))
    out = tmp_path / "out.jsonl"
    lines = out.read_text().splitlines(keepends=True)
    torn_id = json.loads(lines[-1])["id"]
    out.write_text("".join(lines[:-1]) + lines[-1][: len(lines[-1]) // 2])  # a crash mid-write
    again = LedgerSender(seed=5)
    run(_gen(tmp_path, again, max_tokens=16))
    assert [again.row_id(json.loads(b)) for b in again.bodies] == [torn_id[1:]]
    final = records(out)
    assert sorted(r["id"] for r in final) == [f"r{i}" for i in range(5)]


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    concurrency=st.integers(1, 400),
    rows=st.integers(1, 120),
    budget_cents=st.integers(1, 200),
    max_tokens=st.integers(1, 3000),
    seed=st.integers(0, 10_000),
)
def test_the_cap_is_never_crossed(
    tmp_path_factory: pytest.TempPathFactory,
    concurrency: int,
    rows: int,
    budget_cents: int,
    max_tokens: int,
    seed: int,
) -> None:
    tmp = tmp_path_factory.mktemp("cap")
    write_prompts(tmp / "prompts.jsonl", prompt_rows(rows, datasets=3))
    sender = LedgerSender(seed=seed, yields=5)
    budget = Decimal(budget_cents) / 1000  # $0.001 .. $0.20
    summary = run(
        _gen(tmp, sender, concurrency=concurrency, max_tokens=max_tokens, budget_usd=budget)
    )
    assert sender.billed_usd <= budget
    assert summary.peak_committed_usd <= budget
    out = records(tmp / "out.jsonl")
    assert sum((Decimal(str(r["cost_usd"])) for r in out), Decimal(0)) == sender.billed_usd
    assert len(out) == len(sender.ledger)  # one record per billed answer, none twice
    assert summary.stop_reason in ("done", "budget")
    if summary.stop_reason == "done":
        assert len(out) == rows


def test_budget_stops_and_resume_keeps_the_cap_across_runs(tmp_path: Path) -> None:
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(200))
    first = LedgerSender(seed=6)
    budget = Decimal("0.05")
    s1 = run(_gen(tmp_path, first, concurrency=50, max_tokens=2000, budget_usd=budget))
    assert s1.stop_reason == "budget" and "remains" in s1.message
    done_first = {r["id"] for r in records(tmp_path / "out.jsonl")}
    same = LedgerSender(seed=7)
    s2 = run(_gen(tmp_path, same, concurrency=50, max_tokens=2000, budget_usd=budget))
    assert same.bodies == [] and s2.stop_reason == "budget"  # the same cap: nothing more fits
    assert s2.spent_before_usd == first.billed_usd
    second = LedgerSender(seed=8)
    raised = Decimal("0.08")
    run(_gen(tmp_path, second, concurrency=50, max_tokens=2000, budget_usd=raised))
    assert first.billed_usd + second.billed_usd <= raised
    sent_again = {"r" + second.row_id(json.loads(b)) for b in second.bodies}
    assert second.bodies and not done_first & sent_again  # resumed, and no finished row resent
    ids = [r["id"] for r in records(tmp_path / "out.jsonl")]
    assert len(ids) == len(set(ids))  # no row recorded (or paid) twice


def test_transient_failures_are_retried_with_bounded_waits(tmp_path: Path) -> None:
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(6))
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    def fail(request: dict[str, Any], attempt: int) -> Failure | None:
        if attempt == 1:
            return http_failure(
                429, raw="rate-limited upstream", provider_name="Groq", retry_after_s=2.0
            )
        if attempt == 2:
            return http_failure(502)
        return None

    sender = LedgerSender(seed=8, fail=fail)
    summary = run(_gen(tmp_path, sender, sleep=sleep, max_tokens=16))
    out = records(tmp_path / "out.jsonl")
    assert {r["status"] for r in out} <= {"ok", "truncated"} and len(out) == 6
    assert all(r["attempts"] == 3 for r in out)
    assert summary.retries == 12 and summary.requests == 18
    assert waits.count(2.0) == 6  # Retry-After honoured
    assert sorted(w for w in waits if w != 2.0) == [1.0] * 6  # exponential: 0.5 * 2 ** (2 - 1)


def test_retries_are_bounded_then_the_row_fails(tmp_path: Path) -> None:
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(2))
    sender = LedgerSender(seed=9, fail=lambda r, a: http_failure(503))
    summary = run(_gen(tmp_path, sender, max_tokens=16))
    out = records(tmp_path / "out.jsonl")
    assert [r["status"] for r in out] == ["failed", "failed"]
    assert all(
        r["attempts"] == 4 and "gave up after 4 attempts" in r["error"]["message"] for r in out
    )
    assert summary.failed == 2 and sender.ledger == []


def test_retry_after_beyond_the_cap_is_not_final_before_the_attempts_are_spent(
    tmp_path: Path,
) -> None:
    """Issue 23: a Retry-After beyond the cap failed the row at its first attempt. Now a
    provider's 429 is waited up to ``max_wait_s`` and retried until its attempts are spent, and a 429 that
    names no provider is the key's own: the run stops (rate-limited), the row unsent."""
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(1))

    def fail(request: dict[str, Any], attempt: int) -> Failure:
        return http_failure(
            429, provider_name="Groq", raw="rate-limited upstream", retry_after_s=3600
        )

    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    run(_gen(tmp_path, LedgerSender(seed=10, fail=fail), max_tokens=16, sleep=sleep))
    (record,) = records(tmp_path / "out.jsonl")
    assert record["status"] == "failed" and record["attempts"] == 4
    # a rate limit's wait is bounded by max_wait_s (60 s by default), between the four attempts
    assert waits == [60.0, 60.0, 60.0]

    def key_wide(request: dict[str, Any], attempt: int) -> Failure:
        return http_failure(429, "Rate limit exceeded", retry_after_s=3600)

    other = tmp_path / "key-wide"
    write_prompts(other.mkdir() or other / "prompts.jsonl", prompt_rows(1))
    summary = run(_gen(other, LedgerSender(seed=11, fail=key_wide), max_tokens=16))
    assert summary.stop_reason == "rate-limited" and summary.not_sent == 1
    assert summary.failed == 0 and not records(other / "out.jsonl")


def test_final_row_errors_fail_the_row_and_redo_failed_resends(tmp_path: Path) -> None:
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(4))

    def fail(request: dict[str, Any], attempt: int) -> Failure | None:
        if request["messages"][0]["content"].startswith("question 2 "):
            return http_failure(
                400, "context length exceeded", provider_error_code="context_length_exceeded"
            )
        return None

    sender = LedgerSender(seed=11, fail=fail)
    s1 = run(_gen(tmp_path, sender, max_tokens=16))
    failed = [r for r in records(tmp_path / "out.jsonl") if r["status"] == "failed"]
    assert [r["id"] for r in failed] == ["r2"] and failed[0]["attempts"] == 1
    assert failed[0]["error"]["status"] == 400 and s1.failed == 1
    again = LedgerSender(seed=12)
    run(_gen(tmp_path, again, max_tokens=16))
    assert again.bodies == []  # failed rows are finished...
    redo = LedgerSender(seed=13)
    run(_gen(tmp_path, redo, max_tokens=16, redo_failed=True))
    assert [redo.row_id(json.loads(b)) for b in redo.bodies] == ["2"]  # ...until --redo-failed


def test_402_stops_the_run_cleanly(tmp_path: Path) -> None:
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(40))

    def fail(request: dict[str, Any], attempt: int) -> Failure | None:
        n = int(request["messages"][0]["content"].split(" ")[1])
        return (
            http_failure(
                402, "Insufficient credits. Add more using https://openrouter.ai/settings/credits"
            )
            if n >= 5
            else None
        )

    sender = LedgerSender(seed=14, fail=fail)
    summary = run(_gen(tmp_path, sender, concurrency=4, max_tokens=16))
    assert summary.stop_reason == "credits" and summary.exit_code == 1
    assert (
        "insufficient" in summary.message and "rerun the same command to resume" in summary.message
    )
    assert len(sender.bodies) < 12  # a handful of requests, not the 40
    out = records(tmp_path / "out.jsonl")
    assert all(r["status"] in FINISHED - {"failed"} for r in out)  # no 402 row recorded as done
    assert summary.not_sent == 40 - len(out)


def _afford(tokens: int) -> Any:
    msg = (
        "This request requires more credits, or fewer max_tokens. You requested up to 4096 "
        f"tokens, but can only afford {tokens}."
    )

    def fail(request: dict[str, Any], attempt: int) -> Failure | None:
        return http_failure(402, msg) if request["max_tokens"] > tokens else None

    return fail


def test_402_can_only_afford_lowers_max_tokens_when_allowed(tmp_path: Path) -> None:
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(1))
    blocked = LedgerSender(seed=15, fail=_afford(1500))
    s1 = run(_gen(tmp_path, blocked, max_tokens=4096))
    assert s1.stop_reason == "credits" and "lower_max_tokens=True" in s1.message
    allowed = LedgerSender(seed=16, fail=_afford(1500))
    s2 = run(_gen(tmp_path, allowed, max_tokens=4096, lower_max_tokens=True))
    assert s2.ok + s2.truncated == 1
    assert [json.loads(b)["max_tokens"] for b in allowed.bodies] == [4096, 1500]


def test_402_never_lowers_max_tokens_below_a_quarter(tmp_path: Path) -> None:
    """A near-empty answer would be kept as truncated and never bought again: stop instead."""
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(1))
    sender = LedgerSender(seed=17, fail=_afford(1023))  # 4096 // 4 = 1024
    summary = run(_gen(tmp_path, sender, max_tokens=4096, lower_max_tokens=True))
    assert summary.stop_reason == "credits" and summary.ok + summary.truncated == 0
    assert [json.loads(b)["max_tokens"] for b in sender.bodies] == [4096]


def test_401_and_404_stop_the_run(tmp_path: Path) -> None:
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(3))
    s = run(
        _gen(
            tmp_path,
            LedgerSender(fail=lambda r, a: http_failure(401, "User not found.")),
            concurrency=1,
            max_tokens=8,
        )
    )
    assert s.stop_reason == "key" and "OPENROUTER_API_KEY" in s.message
    s = run(
        _gen(
            tmp_path,
            LedgerSender(fail=lambda r, a: http_failure(404, "No allowed providers are available")),
            concurrency=1,
            max_tokens=8,
        )
    )
    assert (
        s.stop_reason == "no-route" and "kimi-k2.5.yaml" in s.message and "re-compile" in s.message
    )


def test_targets_stop_each_dataset(tmp_path: Path) -> None:
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(300, datasets=2))
    sender = LedgerSender(seed=17)
    summary = run(_gen(tmp_path, sender, concurrency=10, max_tokens=100, target_tokens=1000))
    out = records(tmp_path / "out.jsonl")
    for ds in ("d0", "d1"):
        tokens = sum(r["usage"]["completion_tokens"] for r in out if r["dataset"] == ds)
        assert 1000 <= tokens < 1000 + 10 * 100  # reached, overshoot at most what was in flight
    assert summary.stop_reason == "target" and summary.not_sent > 0
    again = LedgerSender(seed=18)
    run(_gen(tmp_path, again, concurrency=10, max_tokens=100, target_tokens=1000))
    assert again.bodies == []  # the targets are already met by what the file records


def test_cancelled_in_flight_is_recorded_and_resume_pays_once(tmp_path: Path) -> None:
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(20))
    gate = asyncio.Event()

    async def scenario() -> LedgerSender:
        sender = LedgerSender(seed=19)
        task = asyncio.ensure_future(_gen(tmp_path, sender, concurrency=5, max_tokens=16))
        while len(sender.ledger) < 8:
            await asyncio.sleep(0)
        sender.gate = gate  # the next requests hang in flight
        while sender.in_flight < 5:
            await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return sender

    first = run(scenario())
    out = records(tmp_path / "out.jsonl")
    cancelled = [r for r in out if r["status"] == "cancelled"]
    assert len(cancelled) == 5 and all(r["possibly_billed_usd"] > 0 for r in cancelled)
    second = LedgerSender(seed=20)
    summary = run(_gen(tmp_path, second, concurrency=5, max_tokens=16))
    possibly = sum(Decimal(str(r["possibly_billed_usd"])) for r in cancelled)
    assert summary.spent_before_usd == first.billed_usd + possibly
    done = [r["id"] for r in records(tmp_path / "out.jsonl") if r["status"] in FINISHED]
    assert sorted(done) == sorted(f"r{i}" for i in range(20))  # no row lost
    assert len(done) == len(set(done))  # none recorded twice
    paid = [k for k, _, _ in first.ledger] + [k for k, _, _ in second.ledger]
    assert len(paid) == len(set(paid)) == 20  # none paid twice


def test_first_stop_drains_in_flight(tmp_path: Path) -> None:
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(50))

    async def scenario() -> Any:
        from openrouter_probe.run.schedule import runner

        sender = LedgerSender(seed=21)
        seen: list[runner.Run] = []
        original = runner.Run.run

        async def capture(self: runner.Run) -> Any:
            seen.append(self)
            return await original(self)

        runner.Run.run = capture  # type: ignore[method-assign]
        try:
            task = asyncio.ensure_future(_gen(tmp_path, sender, concurrency=5, max_tokens=16))
            while len(sender.ledger) < 10:
                await asyncio.sleep(0)
            seen[0].request_stop("interrupted", "stopped by SIGINT")
            summary = await task
        finally:
            runner.Run.run = original  # type: ignore[method-assign]
        return sender, summary

    sender, summary = run(scenario())
    out = records(tmp_path / "out.jsonl")
    assert summary.stop_reason == "interrupted" and summary.cancelled == 0
    assert len(out) == len(sender.ledger) < 50  # everything in flight finished and was recorded
    assert summary.not_sent == 50 - len(out)


def test_rate_limit_storm_lowers_concurrency_then_recovers(tmp_path: Path) -> None:
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(400))
    storm = {"on": True}

    def fail(request: dict[str, Any], attempt: int) -> Failure | None:
        return http_failure(429, provider_name="Chutes") if storm["on"] and attempt == 1 else None

    sender = LedgerSender(seed=22, fail=fail)
    summary = run(_gen(tmp_path, sender, concurrency=100, max_tokens=8))
    assert summary.ok + summary.truncated == 400 and summary.retries == 400


def test_adaptive_limit_backs_off_on_429_and_recovers() -> None:
    limit = AdaptiveLimit(100)
    limit.on_rate_limited(10.0)
    limit.on_rate_limited(10.5)  # within the cooldown: one storm, one decrease
    assert limit.allowed == 70
    limit.on_rate_limited(11.0)
    assert limit.allowed == 49
    for _ in range(49 * 3):
        limit.on_success()
    assert 51 <= limit.allowed <= 53  # about +1 per round of successes
    for _ in range(100_000):
        limit.on_success()
    assert limit.allowed == 100
    for t in range(100):
        limit.on_rate_limited(float(t * 2))
    assert limit.allowed == 1


def test_duplicates_are_reported_and_sent_once(tmp_path: Path) -> None:
    rows = [*prompt_rows(3), {"id": "r1", "prompt": "question 1 again"}]
    write_prompts(tmp_path / "prompts.jsonl", rows)
    sender = LedgerSender(seed=23)
    summary = run(_gen(tmp_path, sender, max_tokens=8))
    assert summary.duplicates == 1 and len(sender.bodies) == 3
    assert any("prompts.jsonl:4: id 'r1' already on line 2" in w for w in summary.warnings)


def test_dry_run_sends_nothing_and_prices_the_plan(tmp_path: Path) -> None:
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(100))
    sender = LedgerSender()
    summary = run(_gen(tmp_path, sender, max_tokens=1000, budget_usd=1, dry_run=True))
    assert sender.bodies == [] and not (tmp_path / "out.jsonl").exists()
    # worst case: Moonshot AI's $3/M output is the highest admitted output price
    assert summary.worst_case_usd is not None and summary.worst_case_usd > Decimal("0.3")
    assert summary.expected_usd is not None and summary.expected_usd < summary.worst_case_usd
    assert summary.stop_reason == "dry-run" and summary.not_sent == 100


def test_without_a_budget_nothing_is_invented_and_the_missing_cap_is_said(tmp_path: Path) -> None:
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(10))
    dry = run(_gen(tmp_path, LedgerSender(), max_tokens=100, dry_run=True))
    [spent] = [line for line in render_result(dry).splitlines() if line.startswith("spent:")]
    assert "$1.00" not in dry.message and " of $" not in spent
    assert dry.message.startswith("no budget_usd: nothing would cap the real run's spend")
    real = run(_gen(tmp_path, LedgerSender(), max_tokens=100))
    assert "no budget_usd: nothing caps this run's spend (dry_run=True shows the worst case)" in (
        real.warnings
    )
    capped = run(_gen(tmp_path, LedgerSender(), max_tokens=100, budget_usd="0.005"))
    assert "of $0.005;" in render_result(capped)  # not "$0.00"


def test_a_policy_that_admits_nothing_stops_before_sending(tmp_path: Path) -> None:
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(2))
    doc = yaml.safe_load(POLICY.read_text())
    doc["provider"] = {"only": ["fireworks"], "quantizations": ["int4"]}
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(doc))
    sender = LedgerSender()
    with pytest.raises(PolicyError, match=r"bad.yaml: admits none of the 11 endpoints"):
        run(
            generate(
                tmp_path / "prompts.jsonl",
                policy=bad,
                out=tmp_path / "o.jsonl",
                send=sender,
                snapshot="bundled",
            )
        )
    assert sender.bodies == []


def test_order_naming_a_gone_endpoint_warns(tmp_path: Path) -> None:
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(1))
    doc = yaml.safe_load(POLICY.read_text())
    doc["provider"]["order"] = ["gone-provider/int4", *doc["provider"]["order"]]
    policy = tmp_path / "p.yaml"
    policy.write_text(yaml.safe_dump(doc, sort_keys=False))
    summary = run(
        generate(
            tmp_path / "prompts.jsonl",
            policy=policy,
            out=tmp_path / "o.jsonl",
            send=LedgerSender(),
            snapshot="bundled",
            max_tokens=8,
        )
    )
    assert any("provider.order[0]" in w and "gone-provider/int4" in w for w in summary.warnings)


def test_the_output_is_never_an_input(tmp_path: Path) -> None:
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(1))
    with pytest.raises(ConfigError, match=r"out=: .* name another file"):
        run(
            generate(
                tmp_path / "prompts.jsonl",
                policy=POLICY,
                out=tmp_path / "prompts.jsonl",
                send=LedgerSender(),
                snapshot="bundled",
            )
        )


@pytest.mark.parametrize("cost", [None, "n/a", -0.5, float("nan"), True])
def test_answers_without_a_valid_usage_cost_count_at_their_worst_case(
    tmp_path: Path, cost: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """No ``usage.cost``, or one that is not a cost: the worst case, a warning naming the provider,
    no crash, never a lower spend (issue 15: "n/a" killed the workers, a negative cost lowered the
    spend, $0 let 50 requests through a $0.001 cap)."""
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(50))
    own_parts: list[int] = []

    async def send(body: bytes, *, stream: bool, **_: Any) -> Answer:
        await asyncio.sleep(0)
        own_parts.append(len(body) - body.index(b',"messages"'))
        usage = {"prompt_tokens": 10, "completion_tokens": 100}
        if cost is not None:
            usage["cost"] = cost
        return Answer("Other", "m", "stop", "a", None, usage, "gen-1")

    budget = Decimal("0.003")
    with caplog.at_level(logging.WARNING):
        summary = run(_gen(tmp_path, send, max_tokens=100, budget_usd=budget))  # type: ignore[arg-type]
    out = records(tmp_path / "out.jsonl")
    # Its own bytes (+16 for its one message, +32) at $0.60/M, 100 tokens at $3/M: Moonshot AI's,
    # the highest admitted prices; and the room for output past max_tokens (run.books.overshoot: 5% +
    # 16 tokens until an overshoot is seen).
    worst = [(n + 48) * Decimal("0.0000006") + 121 * Decimal("0.000003") for n in own_parts]
    assert len(out) == len(own_parts) == 5 and all(r["cost_usd"] is None for r in out)
    assert [Decimal(str(r["possibly_billed_usd"])) for r in out] == worst
    assert summary.spent_usd == summary.possibly_billed_usd == sum(worst) <= budget
    assert summary.stop_reason == "budget" and summary.ok == 5
    assert caplog.text.count("Other: ") == 1 and "count at their worst case" in caplog.text
    # a restart counts them too (the journal), never less
    again = run(_gen(tmp_path, send, max_tokens=100, budget_usd=budget))  # type: ignore[arg-type]
    assert again.spent_before_usd == sum(worst) and again.requests == 0


def test_an_answer_dearer_than_its_worst_case_is_reported(tmp_path: Path) -> None:
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(2))

    async def send(body: bytes, *, stream: bool, **_: Any) -> Answer:
        usage = {"prompt_tokens": 10, "completion_tokens": 5, "cost": 1.0}  # far above $3/M x 8
        return Answer("Chutes", "m", "stop", "a", None, usage, "gen-1")

    summary = run(_gen(tmp_path, send, max_tokens=8))  # type: ignore[arg-type]
    assert any(
        "2 answer(s) cost more than their reserved worst case" in w for w in summary.warnings
    )

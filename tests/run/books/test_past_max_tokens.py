"""Answers past ``max_tokens``: on bodies of the real 2026 shapes
(``OPENROUTER.md`` §18) and on the fake's ``finish_null`` and ``overbill`` faults."""

from __future__ import annotations

import asyncio
from decimal import Decimal
from pathlib import Path
from typing import Any
from unittest.mock import ANY

import pytest

from openrouter_probe.fake import serve
from openrouter_probe.generation import generate
from openrouter_probe.generation.audit import audit
from openrouter_probe.rules.snapshot import bundled_snapshot
from openrouter_probe.run.books.books import Books
from openrouter_probe.run.books.overshoot import FIRST_ANSWERS, MARGIN_TOKENS, Overshoot
from openrouter_probe.run.money.journal import Journal
from openrouter_probe.run.money.limit import DollarWindow
from openrouter_probe.run.money.replay import replay_journal
from openrouter_probe.run.money.spend import Prices, SpendCap
from openrouter_probe.run.rows import PromptRow
from openrouter_probe.run.schedule.source import RowSource
from openrouter_probe.run.send.attempt import Attempt
from openrouter_probe.run.send.request import RequestBuilder
from openrouter_probe.run.send.transport import Answer, parse_body, parse_stream
from tests._generate import POLICY, no_sleep, prompt_rows, records, write_prompts

#: xAI (grok-4, 2025-10): cut at max_tokens, finish_reason and native_finish_reason null.
XAI_CUT = (
    '\n   {"id":"gen-1761000000-xai","provider":"xAI","model":"x-ai/grok-4","object":'
    '"chat.completion","created":1761000000,"choices":[{"logprobs":null,"finish_reason":null,'
    '"native_finish_reason":null,"index":0,"message":{"role":"assistant","content":"The answer '
    'is","refusal":null,"reasoning":null}}],"usage":{"prompt_tokens":12,"completion_tokens":64,'
    '"total_tokens":76,"cost":0.000996}}'
)
#: A reasoning model, 2026-06: 262 completion tokens (252 reasoning) for max_tokens 10, no cost.
NO_COST_PAST = (
    '{"id":"gen-1780000000-r","provider":"DeepInfra","model":"m","choices":[{"finish_reason":'
    '"length","native_finish_reason":"length","index":0,"message":{"role":"assistant","content":'
    '"ok"}}],"usage":{"prompt_tokens":9,"completion_tokens":262,"total_tokens":271,'
    '"completion_tokens_details":{"reasoning_tokens":252}}}'
)
PRICES = Prices(Decimal("0.0000006"), Decimal("0.000003"))


def _attempt(max_tokens: int) -> tuple[PromptRow, Attempt]:
    row = PromptRow("r1", "d", [{"role": "user", "content": "q"}], {"max_tokens": max_tokens}, 1)
    request = RequestBuilder(model="m", provider_json="{}").build(row, PRICES)
    return row, Attempt(request, PRICES, '"r1"', 60.0)


def _settle(
    body: str, max_tokens: int, tmp: Path, *, first_wave: bool = False
) -> tuple[Books, Attempt, Any]:
    row, attempt = _attempt(max_tokens)
    # a run's books have a dollar window (a batch's have none, and no first wave)
    window = DollarWindow() if first_wave else None
    with Journal(tmp / "j.ledger", header={"command": "generate"}) as ledger:
        books = Books(SpendCap(Decimal(1)), datasets=["d"], journal=ledger, window=window)
        if not first_wave:  # past the first wave: the reservation keeps the margin alone
            books.overshoot.answers = FIRST_ANSWERS
        assert books.reserve("d", attempt)
        number = books.sent(row, attempt)
        outcome = parse_body(body)
        assert isinstance(outcome, Answer)
        books.settle(row, attempt, number, outcome, outcome.generation_id, journaled=True)
        books.answered(row, outcome, attempt.cost, last=True, turn=False)
    return books, attempt, outcome


def test_xai_null_finish_at_the_limit_is_truncated(tmp_path: Path) -> None:
    books, attempt, answer = _settle(XAI_CUT, 64, tmp_path)
    assert answer.finish_reason is None and answer.cut and answer.truncated
    assert books.counts.truncated == 1 and books.counts.ok == 0
    row, _ = _attempt(64)
    _, record = RowSource([row], job_sha256="", run_id=None).answered(row, answer, attempt)
    assert record is not None
    assert record["status"] == "truncated" and record["finish_reason"] is None
    assert record["max_tokens"] == 64
    # under the limit a null finish is no cut
    _, _, short = _settle(XAI_CUT, 65, tmp_path)
    assert not short.truncated


def test_a_null_finish_stream_with_its_usage_is_whole() -> None:
    stream = (
        ': OPENROUTER PROCESSING\n\ndata: {"id":"gen-1","provider":"xAI","model":"x-ai/grok-4",'
        '"choices":[{"index":0,"delta":{"content":"The"},"finish_reason":null,'
        '"native_finish_reason":null}]}\n\ndata: {"id":"gen-1","provider":"xAI","model":'
        '"x-ai/grok-4","choices":[{"index":0,"delta":{"content":""},"finish_reason":null,'
        '"native_finish_reason":null}],"usage":{"prompt_tokens":5,"completion_tokens":32,'
        '"total_tokens":37,"cost":0.0001}}\n\ndata: [DONE]\n\n'
    )
    answer = parse_stream(stream)
    assert isinstance(answer, Answer) and answer.finish_reason is None
    answer.mark_cut(32)
    assert answer.truncated
    cut_off = stream.replace("data: [DONE]\n\n", "")
    assert not isinstance(parse_stream(cut_off), Answer)  # no [DONE]: a dropped connection


def test_a_missing_cost_counts_at_least_its_own_tokens_at_the_dearest_price(
    tmp_path: Path,
) -> None:
    books, attempt, _ = _settle(NO_COST_PAST, 10, tmp_path)
    own = 9 * PRICES.input_usd_per_token + 262 * PRICES.output_usd_per_token
    assert attempt.worst < own  # the reservation alone would under-count it
    assert books.cap.spent_usd >= own and books.counts.possibly_billed_usd >= own
    # the journal says so: a restart counts it at that, not at its reservation
    replay = replay_journal(tmp_path / "j.ledger")
    assert replay.possibly_billed_usd == books.cap.spent_usd
    # and the run learned the overshoot: later reservations keep room for 26.2x
    assert books.overshoot.ratio == Decimal(262) / 10
    _, later = _attempt(10)
    assert books.reserve("d", later)
    assert later.worst >= 9 * PRICES.input_usd_per_token + 262 * PRICES.output_usd_per_token
    # in the first wave (no answer yet) the reservation already had room for it (8x + 256)
    first, attempt, _ = _settle(NO_COST_PAST, 10, tmp_path, first_wave=True)
    assert attempt.overshoot_usd == (70 + 256) * PRICES.output_usd_per_token
    assert attempt.worst >= own and first.cap.spent_usd == attempt.worst


def test_the_margin_before_any_overshoot_is_seen() -> None:
    seen = Overshoot()
    assert seen.extra_tokens(64) == 20 and seen.extra_tokens(1000) == 50 + MARGIN_TOKENS
    assert seen.see("SiliconFlow", billed_tokens=65, max_tokens=64, cost_usd=Decimal("0.01"))
    assert seen.extra_tokens(64) == 20  # 65 for 64 is within the margin
    assert seen.see("AtlasCloud", billed_tokens=398, max_tokens=64, cost_usd=Decimal("0.01"))
    assert seen.extra_tokens(64) == 398 - 64
    assert seen.by_provider["AtlasCloud"].worst_ratio == pytest.approx(398 / 64)


def _gen(tmp: Path, base_url: str, **options: Any) -> Any:
    return asyncio.run(
        generate(
            tmp / "prompts.jsonl",
            policy=POLICY,
            out=tmp / "out.jsonl",
            base_url=base_url,
            api_key="sk-past",
            sleep=no_sleep,
            **options,
        )
    )


@pytest.mark.parametrize("stream", [False, True])
def test_finish_null_on_the_fake_is_truncated_and_not_exported(
    tmp_path: Path, stream: bool
) -> None:
    from openrouter_probe.generation.export import export

    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(5))
    with serve(speed=0, seed=2, faults="finish_null=1") as fake:
        summary = _gen(tmp_path, fake.base_url, max_tokens=40, stream=stream, budget_usd=1)
        assert summary.truncated == 5 and summary.ok == 0
        out = records(tmp_path / "out.jsonl")
        assert all(r["status"] == "truncated" and r["finish_reason"] is None for r in out)
        assert all(r["usage"]["completion_tokens"] == 40 for r in out)
        assert len(fake.ledger) == 5
    result = export([tmp_path / "out.jsonl"], fmt="jsonl", output=tmp_path / "train.jsonl")
    assert result.written == 0  # a cut answer is not exported as finished


def test_a_provider_billing_6x_does_not_take_the_billed_total_past_the_cap(
    tmp_path: Path,
) -> None:
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(60))
    budget = Decimal("0.01")
    with serve(speed=0, seed=4, faults="overbill=1/6") as fake:
        summary = _gen(tmp_path, fake.base_url, max_tokens=50, concurrency=2, budget_usd=budget)
        billed = fake.ledger.total_usd
        assert summary.stop_reason == "budget"
        assert billed <= budget  # the cap held
        assert billed > budget / 2  # and it was what bound the run
        assert Decimal(str(summary.spent_total_usd)) >= billed
        out = records(tmp_path / "out.jsonl")
        assert all(r["usage"]["completion_tokens"] == 300 for r in out)
        assert summary.overshoot and all(r == 6.0 for _, r, _ in summary.overshoot.values())
        report = audit([tmp_path / "out.jsonl"], policy=POLICY, snapshot=bundled_snapshot())
        past = {p.provider: p for p in report.providers if p.past_limit}
        assert sum(p.past_limit for p in past.values()) == len(out)
        assert all(p.worst_ratio == 6.0 and p.past_limit_usd > 0 for p in past.values())
        assert "billed past max_tokens" in report.render_notes()


@pytest.mark.parametrize("concurrency", [200, 400])
def test_a_wide_first_wave_does_not_pass_the_cap_before_the_overshoot_is_learned(
    tmp_path: Path, concurrency: int
) -> None:
    """Chutes (the first of the order) bills 6x max_tokens on every answer; the first wave of a
    run at --concurrency 200+ leaves before any answer is back. On the margin alone it took the
    fake's ledger to $0.01203 on a $0.01 cap; the first wave's unseen room (8x) keeps it under."""
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(600))
    budget = Decimal("0.01")
    with serve(speed=0, seed=4, faults="overbill:chutes/int4=1/6") as fake:
        summary = _gen(
            tmp_path, fake.base_url, max_tokens=50, concurrency=concurrency, budget_usd=budget
        )
        billed = fake.ledger.total_usd
        served = {entry.provider for entry in fake.ledger.entries}
    assert served == {"Chutes"}
    assert summary.stop_reason == "budget" and summary.failed == 0
    assert billed <= budget  # the cap held
    assert billed > budget * Decimal("0.8")  # and bound the run: the room is handed back
    assert Decimal(str(summary.spent_total_usd)) >= billed
    assert summary.overshoot == {"Chutes": (summary.ok + summary.truncated, 6.0, ANY)}
    out = records(tmp_path / "out.jsonl")
    assert all(r["usage"]["completion_tokens"] == 300 for r in out)

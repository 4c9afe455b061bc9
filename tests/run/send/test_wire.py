"""One wire, and what OpenRouter really sends to a paid run.

The bodies are of the real shapes: the 429 recorded with ``Retry-After: 61`` and no provider,
the docs' workspace-budget 403 and the recorded key-limit 403 (``OPENROUTER.md`` 15),
the mid-stream ``Token limit reached`` after a length finish, gpt-5.2's answer with
``reasoning: null`` and three ``reasoning.summary`` entries, each built from the shapes
quoted there; the runs go against the project's fake OpenRouter on its manual clock.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from email.utils import format_datetime
from pathlib import Path
from typing import Any

import pytest

from openrouter_probe.api.backoff import (
    MAX_RETRY_AFTER_S,
    TRANSIENT_STATUSES,
    Backoff,
    retry_after_s,
)
from openrouter_probe.api.chat import KeyInfo
from openrouter_probe.api.completion import read_completion, read_stream
from openrouter_probe.api.translate import retryable
from openrouter_probe.errors import APIStatusError
from openrouter_probe.fake import ManualClock, serve
from openrouter_probe.generation import generate
from openrouter_probe.run.schedule.streak import FailureStreak
from openrouter_probe.run.send.failure import Failure, classify_error
from openrouter_probe.run.send.transport import Answer, parse_body, parse_stream
from tests._generate import POLICY, no_sleep, prompt_rows, records, write_prompts

FAST = Backoff(wait_initial_s=1, wait_max_s=30, wait_jitter_s=0, attempts=6, timeout_s=600)
NOW = datetime(2026, 12, 1, 18, 30, tzinfo=UTC)


def _advancing(clock: ManualClock) -> Any:
    async def sleep(seconds: float) -> None:
        clock.advance(seconds)
        await asyncio.sleep(0)

    return sleep


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


# -- one retryable-status set, one Retry-After parser ---------------------------------------------


def test_the_client_and_the_failure_table_retry_the_same_statuses() -> None:
    """api/client.py retried 524 but not 520/522; run/send/failure.py retried all three."""
    for status in sorted(TRANSIENT_STATUSES):
        assert retryable(APIStatusError("x", status_code=status)), status
        assert classify_error(status, {"code": status, "message": "x"}).kind in (
            "transient",
            "pause",
        ), status
    assert {520, 522} <= TRANSIENT_STATUSES
    assert not retryable(APIStatusError("x", status_code=400))


def test_retry_after_reads_seconds_and_http_dates_capped() -> None:
    now = NOW.timestamp()
    assert retry_after_s("61") == 61.0
    assert retry_after_s(" 2.5 ") == 2.5
    date = format_datetime(NOW + timedelta(seconds=90), usegmt=True)  # IMF-fixdate
    assert retry_after_s(date, now_s=lambda: now) == 90.0
    # measured from the answer's own Date header when it has one, not from this machine's clock
    server_now = format_datetime(NOW - timedelta(seconds=30), usegmt=True)
    assert retry_after_s(date, date=server_now, now_s=lambda: 0.0) == 120.0
    assert retry_after_s("Tuesday, 01-Dec-26 18:31:00 GMT", now_s=lambda: now) == 60.0  # RFC 850
    assert retry_after_s(format_datetime(NOW - timedelta(hours=1), usegmt=True)) == 0.0
    assert retry_after_s("Fri, 01 Dec 2100 00:00:00 GMT", now_s=lambda: now) == MAX_RETRY_AFTER_S
    assert retry_after_s("99999999") == MAX_RETRY_AFTER_S
    for junk in (None, "", "soon", "nan", "-5"):
        assert retry_after_s(junk) in (None, 0.0), junk


def test_a_retry_after_http_date_is_honoured_by_generate(tmp_path: Path) -> None:
    """Issue 22: only the sync client read an HTTP date; the run's transport took it for no
    Retry-After at all. Now a key-wide 429 saying "retry at <date 20 s ahead>" pauses the whole
    pool those 20 s once (measured on the fake's clock), and every row is answered."""
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(30))
    clock = ManualClock()
    with serve(speed=0, seed=6, clock=clock, faults="key_429=@3+4+5/20") as fake:
        start = clock.now()
        summary = _gen(tmp_path, fake.base_url, concurrency=10, sleep=_advancing(clock))
        assert summary.stop_reason == "done" and summary.ok + summary.truncated == 30
        assert 20 <= clock.now() - start < 30
        assert summary.pauses == 1 and summary.failed == 0
        assert fake.ledger.errors["key_429"] == 3
        assert summary.spent_usd == fake.ledger.total_usd


# -- a 429 whose source cannot be told ----------------------------------------------------------


def test_a_429_naming_no_provider_is_the_keys_own(tmp_path: Path) -> None:
    """Issue 23: Retry-After: 61, {"error": {"code": 429, "message": "Rate limit exceeded"}}, no
    provider_name, no X-RateLimit-*: generate failed all 20 rows in 0 s and ended `done`, exit 0.
    Now the pool pauses, and past --max-wait (60 s) the run stops `rate-limited`, rows unsent."""
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(20))
    clock = ManualClock()
    with serve(speed=0, seed=5, clock=clock, faults="key_429=1/61") as fake:
        summary = _gen(tmp_path, fake.base_url, concurrency=20, sleep=_advancing(clock))
        assert summary.stop_reason == "rate-limited" and summary.exit_code == 1
        assert summary.failed == 0 and summary.not_sent == 20 and summary.ok == 0
        assert "max_wait_s=60 s" in summary.message and "Rate limit exceeded" in summary.message
        assert fake.ledger.total_usd == 0 and not (tmp_path / "out.jsonl").read_text()


def test_a_transient_failure_is_final_only_when_its_attempts_are_spent(tmp_path: Path) -> None:
    """A provider's 429 asking for an hour failed its row at the first attempt ("longer than the
    30 s this call may wait"). Now it waits what ``--max-wait`` allows (60 s, the one setting
    for rate-limit waits) and tries again, all 6 attempts."""
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(1))
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    async def send(body: bytes, *, stream: bool, **_: Any) -> Answer | Failure:
        error = {"code": 429, "message": "Provider returned error", "metadata": {"raw": "slow"}}
        error["metadata"]["provider_name"] = "Groq"
        return classify_error(429, error, retry_after_s=3600.0)

    summary = _gen(tmp_path, "http://127.0.0.1:9", send=send, sleep=sleep, snapshot="bundled")
    (record,) = records(tmp_path / "out.jsonl")
    assert record["status"] == "failed" and record["attempts"] == 6
    assert waits == [60.0] * 5  # --max-wait, five times between six attempts
    assert summary.failed == 1 and summary.retries == 5


def test_the_streak_says_when_nearly_every_attempt_fails_one_way() -> None:
    streak = FailureStreak(window=10, share=0.9, least=5)
    ok = Answer("Chutes", "m", "stop", "a", None, {"cost": 0.0}, "gen-1")

    def bad(n: int) -> Failure:
        return classify_error(502, {"code": 502, "message": f"Provider returned error {n}"})

    assert all(streak.see(bad(n), attempt=1) is None for n in range(50))  # first tries only
    assert [streak.see(bad(n)) for n in range(4)] == [None] * 4
    assert streak.see(ok) is None  # 4 of 5: below 90 %
    said = [streak.see(bad(n)) for n in range(4, 13)]
    assert said[:4] == [None] * 4  # 8 of 9 ... until 9 of 10 in the window
    message = next(m for m in said if m)
    assert message.startswith("9 of the last 10 attempts failed the same way: HTTP 502 Provider")
    # a final failure, or another reason, is not the same wall
    other = FailureStreak(window=10, share=0.9, least=5)
    row = classify_error(400, {"code": 400, "message": "Invalid request"})
    assert all(other.see(row) is None for _ in range(20))


def test_a_run_whose_attempts_all_fail_one_way_stops_with_that_reason(tmp_path: Path) -> None:
    """Issue 23: when nearly every recent attempt fails for one transient reason the run stops
    with that reason (exit 1, rows unsent) instead of failing the rest one by one."""
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(200))
    clock = ManualClock()
    with serve(speed=0, seed=3, clock=clock, faults="upstream_502=1") as fake:
        summary = _gen(tmp_path, fake.base_url, concurrency=8, sleep=_advancing(clock))
        assert summary.stop_reason == "failing" and summary.exit_code == 1
        assert "HTTP 502 Provider returned error" in summary.message
        assert summary.failed <= 8  # at most the rows in flight when it stopped
        assert summary.not_sent >= 190 and summary.ok == 0
        assert fake.ledger.total_usd == 0


# -- 403: a budget spent stops the run; a flag fails the row ---------------------------------------


def test_a_workspace_budget_403_stops_the_run_and_a_rerun_resumes(tmp_path: Path) -> None:
    """Issue 23: every 403 failed its row, so an exhausted workspace budget marked every remaining
    row failed. Now it stops the run at once (exit 1, no row failed, one line naming the budget),
    and once the budget is raised the same command resumes and finishes."""
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(40))
    clock = ManualClock()
    with serve(speed=0, seed=4, clock=clock, workspace_budget_usd=0.002) as fake:
        first = _gen(tmp_path, fake.base_url, concurrency=4, sleep=_advancing(clock))
        assert first.stop_reason == "budget-spent" and first.exit_code == 1
        assert "Workspace monthly budget of $0.00 exceeded" in first.message
        assert first.message.startswith("an OpenRouter budget is spent (403)")
        done = records(tmp_path / "out.jsonl")
        assert done and all(r["status"] in ("ok", "truncated") for r in done)
        assert first.failed == 0 and first.not_sent + len(done) == 40
        assert fake.ledger.errors["workspace_budget"] >= 1
        billed = fake.ledger.total_usd
        assert first.spent_usd == billed

        fake.fake.workspace_budget_usd = 500.0  # raised
        second = _gen(tmp_path, fake.base_url, concurrency=4, sleep=_advancing(clock))
        assert second.stop_reason == "done" and second.exit_code == 0
        out = records(tmp_path / "out.jsonl")
        assert sorted(r["id"] for r in out) == sorted(r["id"] for r in prompt_rows(40))
        assert all(r["status"] in ("ok", "truncated") for r in out)
        assert second.ok + second.truncated == 40 - len(done)


def test_a_moderation_403_still_fails_only_its_row() -> None:
    flagged = classify_error(
        403,
        {
            "code": 403,
            "message": "openai/gpt-4o requires moderation on OpenAI. Your input was flagged for "
            '"violence".',
            "metadata": {
                "reasons": ["violence"],
                "flagged_input": "...",
                "provider_name": "OpenAI",
            },
        },
    )
    assert flagged.kind == "row" and not flagged.budget
    spent = classify_error(403, {"code": 403, "message": "Key limit exceeded (weekly limit)."})
    assert spent.kind == "run" and spent.budget


def test_key_budgets_and_the_one_that_blocks_first() -> None:
    """``/key``'s 2026 ``budgets[]`` and ``effective_budget`` (SDK 1.3.84 KeyBudget)."""
    workspace = {
        "scope": "workspace",
        "limit_usd": 500.0,
        "spend_usd": 499.9,
        "remaining_usd": 0.1,
        "reset_interval": "monthly",
        "resets_at": "2027-01-01T00:00:00Z",
        "include_byok": False,
        "budget_id": "bud_1",
        "guardrail_id": None,
    }
    key = {**workspace, "scope": "key_limit", "limit_usd": 50.0, "remaining_usd": 20.0}
    info = KeyInfo.model_validate(
        {"limit": 50.0, "limit_remaining": 20.0, "budgets": [workspace, key]}
    )
    blocking = info.blocking_budget
    assert blocking is not None and blocking.scope == "workspace"
    assert blocking.remaining == Decimal("0.1")
    assert blocking.describe() == "the workspace budget ($0.10 of $500.00 left, resets monthly)"
    with_effective = KeyInfo.model_validate({"budgets": [workspace, key], "effective_budget": key})
    assert with_effective.blocking_budget is not None
    assert with_effective.blocking_budget.scope == "key_limit"
    old = KeyInfo.model_validate({"limit": 10, "limit_remaining": 2.5})  # before budgets[]
    assert old.blocking_budget is not None and old.blocking_budget.remaining == Decimal("2.5")
    assert KeyInfo.model_validate({"limit": None}).blocking_budget is None


def test_a_budget_below_one_request_stops_before_sending(tmp_path: Path) -> None:
    """Issue 23: the start of a run reads the budget that blocks first (here the workspace's,
    spent down to below one request's worst case) and sends nothing; the dry run names it."""
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(5))
    with serve(speed=0, seed=8, workspace_budget_usd=0.0) as fake:
        dry = _gen(tmp_path, fake.base_url, budget_usd=1, dry_run=True)
        assert any(
            w.startswith("the workspace budget ($0.00 of $0.00 left, resets monthly) is below")
            for w in dry.warnings
        )
        summary = _gen(tmp_path, fake.base_url, budget_usd=1)
        assert summary.stop_reason == "budget-spent" and summary.exit_code == 1
        assert "is below the worst case of one request" in summary.message
        assert summary.not_sent == 5 and summary.requests == 0
        assert fake.ledger.total_usd == 0 and fake.ledger.errors.get("workspace_budget", 0) == 0


# -- the mid-stream error rule ------------------------------------------------------------------

_HEAD = '{"id":"gen-1","object":"chat.completion.chunk","created":1,"model":"m","provider":"P",'


def _sse(*events: str, done: bool = True) -> str:
    return "".join(f"data: {_HEAD}{e}\n\n" for e in events) + ("data: [DONE]\n\n" if done else "")


def test_a_token_limit_after_content_fails_the_row_and_keeps_the_text() -> None:
    """Issue 23: content, finish_reason "length", then {"error": {"code": 400, "message":
    "Token limit reached"}}: the partial answer was dropped. The row fails (a retry pays for
    the same cut) and the failure record keeps what came."""
    body = _sse(
        '"choices":[{"index":0,"delta":{"content":"The answer is"},"finish_reason":null}]}',
        '"choices":[{"index":0,"delta":{"content":" 42"},"finish_reason":"length"}]}',
        '"error":{"code":400,"message":"Token limit reached"},'
        '"choices":[{"index":0,"delta":{"content":""},"finish_reason":"error"}]}',
        done=False,
    )
    failure = parse_stream(body)
    assert isinstance(failure, Failure) and failure.kind == "row"
    assert failure.to_record() == {
        "kind": "row",
        "status": 200,
        "code": 400,
        "message": "Token limit reached",
        "partial": {"finish_reason": "length", "content": "The answer is 42", "reasoning": None},
    }
    assert failure.cost_unknown and failure.generation_id == "gen-1"
    with pytest.raises(dataclasses.FrozenInstanceError):  # made whole once, never patched
        failure.partial = None  # type: ignore[misc]


def test_an_error_in_a_billed_body_is_one_whole_failure() -> None:
    """An error inside a 200 that still says ``usage.cost``: the failure the table classifies
    carries that cost and the body's id, as made (nothing sets them afterwards)."""
    body = {
        "id": "gen-9",
        "choices": [{"index": 0, "message": {"content": ""}, "finish_reason": "error"}],
        "error": {"code": 502, "message": "Provider returned error"},
        "usage": {"prompt_tokens": 10, "completion_tokens": 0, "cost": 0.0012},
    }
    failure = parse_body(json.dumps(body))
    assert isinstance(failure, Failure) and failure.kind == "transient"
    assert (failure.cost_usd, failure.cost_unknown) == (Decimal("0.0012"), False)
    assert failure.generation_id == "gen-9" and failure.partial is None


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (
            '{"code":429,"message":"Rate limit exceeded","metadata":{"error_type":'
            '"rate_limit_exceeded"}}',
            "transient",
        ),
        ('{"code":502,"message":"Provider returned error"}', "transient"),
        ('{"message":"stream interrupted"}', "transient"),
        ('{"code":400,"message":"Provider returned error"}', "row"),
    ],
)
def test_mid_stream_errors_are_classified_by_their_own_code(error: str, kind: str) -> None:
    body = _sse(
        '"choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}',
        f'"error":{error},"choices":[{{"index":0,"delta":{{"content":""}},'
        '"finish_reason":"error"}]}',
        done=False,
    )
    failure = parse_stream(body)
    assert isinstance(failure, Failure) and failure.kind == kind
    assert failure.partial == {"finish_reason": None, "content": "Hi", "reasoning": None}


def test_the_token_limit_stream_on_the_fake_fails_its_row_with_the_text(tmp_path: Path) -> None:
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(3))
    with serve(speed=0, seed=9, faults="length_error=@2") as fake:
        summary = _gen(tmp_path, fake.base_url, stream=True)
        failed = [r for r in records(tmp_path / "out.jsonl") if r["status"] == "failed"]
        (row,) = failed
        assert row["attempts"] == 1 and summary.failed == 1 and summary.retries == 0
        assert row["error"]["message"] == "Token limit reached" and row["error"]["kind"] == "row"
        partial = row["error"]["partial"]
        assert partial["finish_reason"] == "length"
        assert partial["content"] or partial["reasoning"]  # what was streamed before the error
        assert fake.ledger.errors["length_error"] == 1


# -- reasoning_details ------------------------------------------------------------------------

GPT_52 = {  # the shape of issue 23's gpt-5.2 answer: reasoning null, three summaries
    "id": "gen-1767225600-abc",
    "object": "chat.completion",
    "created": 1767225600,
    "model": "openai/gpt-5.2-20251211",
    "provider": "OpenAI",
    "choices": [
        {
            "index": 0,
            "finish_reason": "stop",
            "native_finish_reason": "completed",
            "message": {
                "role": "assistant",
                "content": "391",
                "refusal": None,
                "reasoning": None,
                "reasoning_details": [
                    {
                        "type": "reasoning.summary",
                        "summary": "**Multiplying** 17 by 23.",
                        "format": "openai-responses-v1",
                        "index": 0,
                    },
                    {
                        "type": "reasoning.summary",
                        "summary": "**Checking** 17*20 + 17*3.",
                        "format": "openai-responses-v1",
                        "index": 1,
                    },
                    {
                        "type": "reasoning.summary",
                        "summary": "**Answering** 391.",
                        "format": "openai-responses-v1",
                        "index": 2,
                    },
                    {
                        "type": "reasoning.encrypted",
                        "data": "gAAAAABpWx...",
                        "id": "rs_0a1b",
                        "format": "openai-responses-v1",
                        "index": 3,
                    },
                ],
            },
        }
    ],
    "usage": {
        "prompt_tokens": 14,
        "completion_tokens": 457,
        "total_tokens": 471,
        "cost": 0.00642,
        "completion_tokens_details": {"reasoning_tokens": 449},
    },
}


def test_reasoning_is_read_from_reasoning_details_when_null() -> None:
    chat = read_completion(json.dumps(GPT_52))
    assert chat.reasoning == (
        "**Multiplying** 17 by 23.\n\n**Checking** 17*20 + 17*3.\n\n**Answering** 391."
    )
    assert chat.reasoning_details == GPT_52["choices"][0]["message"]["reasoning_details"]
    assert chat.typed_usage is not None and chat.typed_usage.reasoning_tokens == 449


def test_the_output_line_keeps_reasoning_details_verbatim(tmp_path: Path) -> None:
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(1))

    async def send(body: bytes, *, stream: bool, **_: Any) -> Answer | Failure:
        return parse_body(json.dumps(GPT_52))

    _gen(tmp_path, "http://127.0.0.1:9", send=send, snapshot="bundled")
    (record,) = records(tmp_path / "out.jsonl")
    assert record["status"] == "ok" and record["content"] == "391"
    assert record["reasoning"].startswith("**Multiplying** 17 by 23.")
    assert record["reasoning_details"] == GPT_52["choices"][0]["message"]["reasoning_details"]


def test_a_streams_reasoning_details_merge_by_index_and_keep_the_signature() -> None:
    body = _sse(
        '"choices":[{"index":0,"delta":{"reasoning":null,"reasoning_details":[{"type":'
        '"reasoning.text","text":"Let me","format":"anthropic-claude-v1","index":0}]},'
        '"finish_reason":null}]}',
        '"choices":[{"index":0,"delta":{"reasoning_details":[{"type":"reasoning.text","text":'
        '" think.","format":"anthropic-claude-v1","index":0}]},"finish_reason":null}]}',
        '"choices":[{"index":0,"delta":{"reasoning_details":[{"type":"reasoning.text",'
        '"signature":"EqQBCkYIBx","format":"anthropic-claude-v1","index":0}]},'
        '"finish_reason":null}]}',
        '"choices":[{"index":0,"delta":{"content":"Yes."},"finish_reason":"stop"}],'
        '"usage":{"prompt_tokens":5,"completion_tokens":9,"cost":0.0001}}',
    )
    chat = read_stream(body)
    assert chat.reasoning == "Let me think."
    assert chat.reasoning_details == [
        {
            "type": "reasoning.text",
            "text": "Let me think.",
            "format": "anthropic-claude-v1",
            "index": 0,
            "signature": "EqQBCkYIBx",
        }
    ]
    assert chat.content == "Yes." and not chat.failed


def test_a_key_limit_below_one_request_still_sends_when_max_tokens_may_be_lowered(
    tmp_path: Path,
) -> None:
    """The key's own limit answers 402 "can only afford N", which --lower-max-tokens follows:
    it stops a run before sending only without that option (or when nothing is left)."""
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(1))
    with serve(speed=0, seed=10, credit_usd=0.006) as fake:
        blocked = _gen(tmp_path, fake.base_url, budget_usd=1, max_tokens=4000)
        assert blocked.stop_reason == "budget-spent" and blocked.requests == 0
        assert blocked.message.startswith("the key's own limit ($0.006 of $0.006 left")
        assert "(402)" in blocked.message
        lowered = _gen(
            tmp_path, fake.base_url, budget_usd=1, max_tokens=4000, lower_max_tokens=True
        )
        assert lowered.requests >= 1 and lowered.stop_reason != "budget-spent"
        (record,) = records(tmp_path / "out.jsonl")
        assert record["status"] in ("ok", "truncated")
        assert record["attempts"] == 2  # the 402, then max_tokens lowered to what is affordable
        assert fake.ledger.total_usd <= Decimal("0.006")

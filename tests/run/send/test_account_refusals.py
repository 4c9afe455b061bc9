"""The answers that mean "wait" or "stop" for the whole account, and exit codes that say what
happened: the in-flight 402 with its wait in the body, the attestation 403, the guardrail 404 and
the organisation budget 403, on bodies of the shapes recorded in 2026 (OPENROUTER.md 19), end to
end on the fake (loopback, ``speed=0``, the waits recorded, never slept)."""

from __future__ import annotations

import asyncio
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from openrouter_probe.api.backoff import Backoff, said_wait_s
from openrouter_probe.fake import serve
from openrouter_probe.fake.refusals import PRIVACY_URL, refusal_body
from openrouter_probe.generation import generate
from openrouter_probe.run.config import RunPlan
from openrouter_probe.run.money.spend import Prices
from openrouter_probe.run.report import render_result
from openrouter_probe.run.rows import PromptRow
from openrouter_probe.run.schedule.attempts import AttemptPolicy, Hold, Retry
from openrouter_probe.run.send.attempt import Attempt
from openrouter_probe.run.send.request import RequestBuilder
from openrouter_probe.run.send.transport import _error_failure
from tests._generate import POLICY, prompt_rows, records, write_prompts

#: An in-flight 402 as logged in 2026-10: the wait only in the body, ``reason`` and no
#: ``limit_source``, ``provider_name: null`` in the error, a remedy hint in its own words.
IN_FLIGHT_BODY_WAIT = {
    "error": {
        "message": "This request would exceed your available credits given your current "
        "in-flight requests. Retry after in-flight requests settle, or add credits.",
        "code": 402,
        "provider_name": None,
        "metadata": {
            "reason": "in_flight_budget_exhausted",
            "headers": {"Retry-After": "120"},
            "remedy_hint": "Try again in a couple of minutes.",
        },
    }
}
FAST = Backoff(wait_initial_s=0.5, wait_max_s=30, wait_jitter_s=0, attempts=4, timeout_s=None)


def test_the_wait_is_read_from_the_header_or_else_from_the_body() -> None:
    assert said_wait_s({}, {"headers": {"Retry-After": "120"}}) == 120.0
    assert said_wait_s({}, {"headers": {"retry-after": "75"}}) == 75.0
    assert said_wait_s({"Retry-After": "5"}, {"headers": {"Retry-After": "120"}}) == 5.0
    assert said_wait_s({}, {"headers": {"X-RateLimit-Reset": "1790000000000"}}) is None
    assert said_wait_s({}, {}) is None and said_wait_s({}, None) is None


def test_an_in_flight_402_with_its_wait_in_the_body_waits_all_of_it(tmp_path: Path) -> None:
    failure = _error_failure(402, json.dumps(IN_FLIGHT_BODY_WAIT).encode(), {})
    assert (failure.kind, failure.refusal, failure.retry_after_s) == ("held", "in_flight", 120.0)
    # not cut at the backoff's longest wait (30 s here), nor at max_wait_s (the key's 429s)
    options = RunPlan.resolve(
        command="generate", out=tmp_path / "o.jsonl", api_key="sk-test", backoff=FAST, max_wait_s=10
    )
    policy = AttemptPolicy(options, model="m", policy="p", max_tokens_of=lambda row: 64)
    row = PromptRow("r1", "d", [{"role": "user", "content": "q"}], {}, 1)
    prices = Prices(Decimal("0.0000006"), Decimal("0.000003"))
    request = RequestBuilder(model="m", provider_json="{}").build(row, prices)
    attempt = Attempt(request, prices, '"r1"', 60.0)
    # another request in flight: the refusal is not the row's alone
    policy.held = lambda: (Decimal("0.01"), 1)
    assert policy.decide(row, failure, attempt, 0) == Hold(120.0)


def _gen(tmp: Path, base_url: str, waits: list[float] | None = None, **options: Any) -> Any:
    async def sleep(seconds: float) -> None:
        if waits is not None:
            waits.append(seconds)

    options.setdefault("concurrency", 1)
    return asyncio.run(
        generate(
            tmp / "prompts.jsonl",
            policy=POLICY,
            out=tmp / "out.jsonl",
            base_url=base_url,
            budget_usd=1,
            max_tokens=64,
            sleep=sleep,
            backoff=FAST,
            **options,
        )
    )


def test_a_run_whose_requests_meet_the_in_flight_402_for_a_while_finishes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(3))
    waits: list[float] = []
    with serve(speed=0, seed=2, faults="in_flight_402_body=@1+2") as fake:
        summary = _gen(tmp_path, fake.base_url, waits)
        billed = len(fake.ledger)
    said = [r.getMessage() for r in caplog.records if "in-flight budget is full" in r.getMessage()]
    # one line for the longer wait, not one per refusal
    assert said == [
        "OpenRouter's in-flight budget is full: r0 waits 120 s as it asked, then goes again"
    ]
    assert summary.stop_reason == "done" and summary.exit_code == 0
    assert summary.ok + summary.truncated == 3 and summary.failed == 0 and billed == 3
    assert waits.count(120.0) == 2  # each refusal waited what its body said
    assert summary.in_flight_refusals == 2 and summary.retries == 0


def test_a_run_that_only_meets_the_in_flight_402_never_ends_at_the_budget(tmp_path: Path) -> None:
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(3))
    waits: list[float] = []
    with serve(speed=0, seed=2, faults="in_flight_402_body=1") as fake:
        summary = _gen(tmp_path, fake.base_url, waits, concurrency=3)
        billed = len(fake.ledger)
    assert summary.stop_reason == "in-flight" and summary.exit_code == 1, summary.message
    assert billed == 0 and summary.not_sent == 3 and summary.failed == 0
    assert waits and all(w == 120.0 for w in waits)


def _stopped_after_one(tmp_path: Path, fault: str) -> tuple[Any, int]:
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(6))
    with serve(speed=0, seed=2, faults=f"{fault}=1", record_requests=True) as fake:
        summary = _gen(tmp_path, fake.base_url)
        sent = len(fake.fake.requests or [])
    return summary, sent


def test_an_attestation_gate_stops_the_run_at_the_first_refusal(tmp_path: Path) -> None:
    summary, sent = _stopped_after_one(tmp_path, "attestation_403")
    assert sent == 1 and summary.exit_code == 1 and summary.stop_reason == "no-route"
    assert summary.failed == 0 and summary.not_sent == 6  # unsent, never one failed row each
    message = " ".join(str(summary.message).split())
    assert "18+ age confirmation" in message
    assert "Confirm it in the account's settings, then rerun the same command" in message
    assert render_result(summary).splitlines()[0] == (
        "not finished (exit 1): OpenRouter admits no endpoint: policy or account settings"
    )
    # the gate passed, the same command sends every row
    with serve(speed=0, seed=2) as fake:
        again = _gen(tmp_path, fake.base_url)
    assert again.stop_reason == "done" and again.ok + again.truncated == 6
    assert len(records(tmp_path / "out.jsonl")) == 6


def test_a_guardrail_404_names_the_settings_not_the_policy(tmp_path: Path) -> None:
    summary, sent = _stopped_after_one(tmp_path, "guardrail_404")
    assert sent == 1 and summary.exit_code == 1 and summary.stop_reason == "no-route"
    assert summary.failed == 0 and summary.not_sent == 6
    message = " ".join(str(summary.message).split())
    assert f"Change them at {PRIVACY_URL} (the policy is not the cause)" in message
    assert "re-compile" not in message


def test_an_organisation_budget_403_stops_the_run(tmp_path: Path) -> None:
    summary, sent = _stopped_after_one(tmp_path, "org_budget_403")
    assert sent == 1 and summary.stop_reason == "budget-spent" and summary.exit_code == 1
    assert "Budget limit exceeded (monthly limit). Contact your org admin." in summary.message
    assert summary.failed == 0 and summary.not_sent == 6


def test_a_key_limit_403_says_when_it_resets() -> None:
    body = {
        "error": {
            "message": "Key limit exceeded (weekly limit). Manage it using "
            "https://openrouter.ai/workspaces/default/keys/abc. $20.05 of $20.00 used; resets "
            "2026-10-12T00:00:00.000Z.",
            "code": 403,
            "metadata": {"limit_source": "openrouter_key_limit"},
        }
    }
    failure = _error_failure(403, json.dumps(body).encode(), {})
    assert failure.kind == "run" and failure.refusal == "key_limit"
    options = RunPlan.resolve(command="generate", out=Path("o.jsonl"), api_key="sk-test")
    stop = AttemptPolicy(options, model="m", policy="p", max_tokens_of=lambda r: 64).stop_for(
        failure
    )
    assert stop.reason == "key-limit" and "resets 2026-10-12T00:00:00.000Z" in stop.message


def test_the_fakes_refusals_are_the_recorded_shapes() -> None:
    status, raw = refusal_body("attestation_403", wait_s=0, model="m/x")
    body = json.loads(raw)
    assert status == 403 and body["error"]["metadata"]["missing_attestation_types"] == [
        "age_18plus"
    ]
    status, raw = refusal_body("in_flight_402_body", wait_s=120, model="m/x")
    error = json.loads(raw)["error"]
    assert status == 402 and error["metadata"]["headers"] == {"Retry-After": "120"}
    assert "limit_source" not in error["metadata"] and error["provider_name"] is None


def test_a_run_where_every_row_failed_exits_non_zero(tmp_path: Path) -> None:
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(3))
    with serve(speed=0, seed=2, faults="length_error=1") as fake:
        summary = _gen(tmp_path, fake.base_url, stream=True)
    assert summary.failed == 3 and summary.ok + summary.truncated == 0
    assert summary.stop_reason == "all-failed" and summary.exit_code == 1
    assert "every row sent failed (3" in summary.message
    # the summary's first line says why, in words
    assert render_result(summary).splitlines()[0] == "not finished (exit 1): every row sent failed"


def test_a_providers_429_waits_its_retry_after_up_to_max_wait(tmp_path: Path) -> None:
    """``max_wait_s`` is the one setting for rate limits: a provider's 429 asking 120 s waits 120 s
    under ``max_wait_s=300`` (the backoff's cap, 30 s here, is for other failures)."""
    upstream = {
        "error": {
            "message": "Provider returned error",
            "code": 429,
            "metadata": {"raw": "Rate limit exceeded", "provider_name": "DeepInfra"},
        }
    }
    failure = _error_failure(429, json.dumps(upstream).encode(), {"Retry-After": "120"})
    assert (failure.kind, failure.rate_limited, failure.retry_after_s) == ("transient", True, 120.0)
    row = PromptRow("r1", "d", [{"role": "user", "content": "q"}], {}, 1)
    prices = Prices(Decimal("0.0000006"), Decimal("0.000003"))
    request = RequestBuilder(model="m", provider_json="{}").build(row, prices)
    waits = []
    for max_wait_s in (300, 60, 10):
        options = RunPlan.resolve(
            command="generate", out=tmp_path / "o.jsonl", api_key="k", backoff=FAST,
            max_wait_s=max_wait_s,
        )  # fmt: skip
        policy = AttemptPolicy(options, model="m", policy="p", max_tokens_of=lambda r: 64)
        attempt = Attempt(request, prices, '"r1"', 60.0)
        waits.append(policy.decide(row, failure, attempt, 0))
    assert waits == [Retry(120.0), Retry(60.0), Retry(30.0)]  # never below the backoff's own

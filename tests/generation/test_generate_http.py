"""The generator over real loopback HTTP, against a scripted aiohttp.web stub (tests/_stub.py).

The stub answers with the real captured bodies: the Inceptron non-stream answer (with its keep-alive
padding), the ModelRun stream, Groq's real upstream 429. Faults: error statuses with real bodies,
``Retry-After``, a connection dropped mid-body, a stalled answer, a mid-stream error on HTTP 200.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from openrouter_probe.api.backoff import Backoff
from openrouter_probe.generation import generate
from tests import _stub
from tests._generate import POLICY, no_sleep, prompt_rows, records, write_prompts
from tests.conftest import PYTEST_OPENROUTER_KEY

FAST = Backoff(wait_initial_s=0.5, wait_max_s=30, wait_jitter_s=0, attempts=4, timeout_s=None)


async def _run(tmp: Path, stub: _stub.Stub, **options: Any) -> Any:
    options.setdefault("sleep", no_sleep)
    options.setdefault("backoff", FAST)
    options.setdefault("max_tokens", 64)
    return await generate(
        tmp / "prompts.jsonl",
        policy=POLICY,
        out=tmp / "out.jsonl",
        base_url=stub.base_url,
        **options,
    )


@pytest.mark.parametrize("stream", [False, True])
def test_real_bodies_recorded_exactly(tmp_path: Path, stream: bool) -> None:
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(3))

    async def go() -> tuple[Any, _stub.Stub]:
        async with _stub.serve(lambda body, n: ("ok",)) as stub:
            return await _run(tmp_path, stub, stream=stream), stub

    summary, stub = asyncio.run(go())
    out = records(tmp_path / "out.jsonl")
    assert len(out) == 3 and summary.stop_reason == "done"
    for r in out:
        if stream:
            assert r["provider"] == "ModelRun" and r["cost_usd"] == 0.0005738
            assert r["usage"]["completion_tokens_details"]["reasoning_tokens"] == 165
        else:
            assert r["provider"] == "Inceptron" and r["cost_usd"] == 0.00045364
            assert r["usage"]["completion_tokens_details"]["reasoning_tokens"] == 166
            assert r["generation_id"] == "gen-1777319885-pLuUvaQdB3l6lRlhlKuv"
        assert r["model"] == "moonshotai/kimi-k2.5-0127" and r["finish_reason"] == "stop"
    provider = yaml.safe_load(POLICY.read_text())["provider"]
    for body, headers in zip(stub.requests, stub.headers, strict=True):
        assert body["provider"] == provider and body["stream"] is stream
        assert headers["Authorization"] == f"Bearer {PYTEST_OPENROUTER_KEY}"
    text = (tmp_path / "out.jsonl").read_text()
    assert PYTEST_OPENROUTER_KEY not in text and PYTEST_OPENROUTER_KEY not in json.dumps(
        summary.to_dict()
    )


def test_faults_are_survived(tmp_path: Path) -> None:
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(6))
    faults = {
        "0": [("status", 429, _stub.GROQ_429)],
        "1": [
            (
                "status",
                429,
                '{"error":{"message":"Rate limit exceeded","code":429}}',
                {"Retry-After": "1"},
            ),
            ("status", 503, '{"error":{"message":"overloaded","code":503}}'),
        ],
        "2": [("drop",)],
        "3": [
            ("error200",),
            (
                "status",
                400,
                '{"error":{"message":"Provider returned error","code":400,"metadata":{"raw":"{\\"error\\":{\\"code\\":429}}","provider_name":"Groq","provider_code":429}}}',
            ),
        ],
        "4": [("midstream",)],
        "5": [("status", 502, "<html>bad gateway</html>")],
    }
    seen: dict[str, int] = {}

    def script(body: dict[str, Any], n: int) -> tuple[Any, ...]:
        key = body["messages"][0]["content"].split(" ")[1]
        seen[key] = seen.get(key, 0) + 1
        plan = faults.get(key, [])
        return plan[seen[key] - 1] if seen[key] <= len(plan) else ("ok",)

    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    async def go() -> Any:
        async with _stub.serve(script) as stub:
            return await _run(tmp_path, stub, stream=True, sleep=sleep)

    summary = asyncio.run(go())
    out = {r["id"]: r for r in records(tmp_path / "out.jsonl")}
    assert all(r["status"] == "ok" for r in out.values()), out
    assert {k: out[f"r{k}"]["attempts"] for k in faults} == {
        "0": 2,
        "1": 3,
        "2": 2,
        "3": 3,
        "4": 2,
        "5": 2,
    }
    # r1's 429 names no provider: the key's own (issue 23), so the pool paused for its
    # Retry-After: 1 rather than that row retrying alone
    assert summary.retries == 7 and summary.pauses == 1 and 1.0 in waits


def test_a_stall_is_cut_by_the_read_timeout(tmp_path: Path) -> None:
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(1))

    async def go() -> Any:
        async with _stub.serve(lambda body, n: ("stall",) if n == 1 else ("ok",)) as stub:
            return await _run(tmp_path, stub, read_timeout_s=0.05)

    asyncio.run(go())
    (record,) = records(tmp_path / "out.jsonl")
    assert record["status"] == "ok" and record["attempts"] == 2


def test_402_stops_cleanly_with_the_message(tmp_path: Path) -> None:
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(30))
    body = '{"error":{"message":"Insufficient credits. Add more using https://openrouter.ai/settings/credits","code":402}}'

    async def go() -> Any:
        async with _stub.serve(lambda b, n: ("ok",) if n <= 3 else ("status", 402, body)) as stub:
            return await _run(tmp_path, stub, concurrency=2), stub

    summary, stub = asyncio.run(go())
    assert summary.stop_reason == "credits"
    assert "Insufficient credits" in summary.message
    assert len(stub.requests) <= 5 and len(records(tmp_path / "out.jsonl")) == 3


def test_key_limit_below_budget_warns(tmp_path: Path) -> None:
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(1))

    async def go() -> Any:
        async with _stub.serve(lambda b, n: ("ok",), key_remaining=5.0) as stub:
            return await _run(tmp_path, stub, budget_usd=100)

    summary = asyncio.run(go())
    assert any("remaining limit is $5.00, below the $100.00 budget" in w for w in summary.warnings)


def test_live_endpoints_are_read_from_the_server(tmp_path: Path) -> None:
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(4))

    async def go() -> Any:
        async with _stub.serve(lambda b, n: ("ok",)) as stub:
            return await _run(tmp_path, stub, dry_run=True, budget_usd=1)

    summary = asyncio.run(go())
    assert summary.stop_reason == "dry-run" and summary.expected_usd is not None


def test_unreachable_server_names_the_option_to_use(tmp_path: Path) -> None:
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(1))
    from openrouter_probe.errors import APIError

    with pytest.raises(APIError, match=r"pass snapshot='bundled' or snapshot=PATH") as info:
        asyncio.run(
            generate(
                tmp_path / "prompts.jsonl",
                policy=POLICY,
                out=tmp_path / "o.jsonl",
                base_url="http://127.0.0.1:9/api/v1",
            )
        )
    assert "--" not in str(info.value) and "offline" not in str(info.value)
    assert not (tmp_path / "o.jsonl").exists()


def test_a_key_limit_under_a_dollar_is_shown_as_it_is(tmp_path: Path) -> None:
    """Review of 0.2.0: a key with $0.006 left was said to have "$0.01" left (two decimals)."""
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(1))

    async def go() -> Any:
        async with _stub.serve(lambda b, n: ("ok",), key_remaining=0.006) as stub:
            return await _run(tmp_path, stub, budget_usd="0.01")

    summary = asyncio.run(go())
    assert any("remaining limit is $0.006, below the $0.01 budget" in w for w in summary.warnings)

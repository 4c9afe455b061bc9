"""Server tools (``tools`` entries of type ``openrouter:*``) in the worst case, or refused before
they are sent; the fake bills them in ``usage.cost`` as OpenRouter does (OPENROUTER.md 19)."""

from __future__ import annotations

import asyncio
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from openrouter_probe.fake import serve
from openrouter_probe.generation import generate
from openrouter_probe.generation.shapes import ShapeProblem, read_row
from openrouter_probe.rules.server_tools import RESULT_USD, ServerTools, server_tools, unbounded
from openrouter_probe.run.money.spend import Prices, request_shape
from tests._generate import POLICY, no_sleep, records, write_prompts

#: The recorded tools (2026-08 and 2026-07, OPENROUTER.md 19).
WEB_SEARCH = {"type": "openrouter:web_search", "parameters": {"max_uses": 1}}
ADVISOR = {
    "type": "openrouter:advisor",
    "parameters": {"model": "~anthropic/claude-opus-latest", "max_completion_tokens": 1024},
}
D = Decimal


def test_a_web_search_is_bounded_by_its_uses_and_results() -> None:
    assert server_tools([WEB_SEARCH]) == ServerTools(searches=1, results=5)
    three = {"type": "openrouter:web_search", "parameters": {"max_uses": 3, "max_results": 2}}
    assert server_tools([three, {"type": "function", "function": {"name": "f"}}]) == ServerTools(
        searches=3, results=6
    )
    assert server_tools([{"type": "openrouter:datetime"}]) == ServerTools(prompt_tokens=64)
    assert not server_tools(None) and not server_tools([])


def test_a_server_tool_that_cannot_be_bounded_says_how_to_bound_it() -> None:
    bare = unbounded([{"type": "openrouter:web_search"}])
    assert bare is not None and "set parameters.max_uses" in bare
    zero = unbounded([{"type": "openrouter:web_search", "parameters": {"max_uses": 0}}])
    assert zero is not None and "tools[0]" in zero
    advisor = unbounded([{"type": "function", "function": {"name": "f"}}, ADVISOR])
    assert advisor is not None
    assert advisor.startswith("tools[1] is openrouter:advisor: each consultation bills its own")
    assert "nothing in the request bounds how many" in advisor
    assert "remove it from the row" in advisor
    fetch = unbounded([{"type": "openrouter:web_fetch"}])
    assert fetch is not None
    assert fetch.startswith("tools[0] is the server tool openrouter:web_fetch, whose cost")
    assert "or use openrouter:web_search with parameters.max_uses" in fetch
    assert unbounded([WEB_SEARCH, {"type": "openrouter:datetime"}]) is None
    with pytest.raises(ValueError, match="openrouter:advisor"):
        server_tools([ADVISOR])


def test_a_row_with_an_unbounded_server_tool_is_refused_before_it_is_sent() -> None:
    row = {"id": "r1", "messages": [{"role": "user", "content": "q"}], "tools": [ADVISOR]}
    with pytest.raises(ShapeProblem, match=r"tools\[0\] is openrouter:advisor: each consultation"):
        read_row(row)
    searched = read_row({**row, "tools": [WEB_SEARCH]})
    assert searched.params["tools"] == [WEB_SEARCH]


def test_the_recorded_web_search_bill_is_within_its_worst_case() -> None:
    """The 2026-08 recording: 8,174 prompt tokens of results and the search fee, $0.0133 in all,
    where the run had reserved $0.0025 (its tokens alone)."""
    shape = request_shape(200, [{"role": "user", "content": "q"}], {"tools": [WEB_SEARCH]})
    assert shape.web_searches == 5  # five results of one search
    # K2.5's dearest admitted prices (2026-08) and its context
    prices = Prices(D("0.0000006"), D("0.000003"), context_tokens=262_144)
    worst = prices.worst_case_usd(prompt_tokens=shape.prompt_tokens, max_tokens=256, shape=shape)
    assert worst == 262_144 * D("0.0000006") + 256 * D("0.000003") + 5 * RESULT_USD
    assert worst >= D("0.0133")
    bare = request_shape(200, [{"role": "user", "content": "q"}], {"tools": []})
    no_search = prices.worst_case_usd(prompt_tokens=bare.prompt_tokens, max_tokens=256, shape=bare)
    assert no_search < D("0.0133")  # what was reserved before: the tokens alone


def _rows(n: int, tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {"id": f"r{i}", "messages": [{"role": "user", "content": f"question {i}"}], "tools": tools}
        for i in range(n)
    ]


def _gen(tmp: Path, base_url: str, budget_usd: float) -> Any:
    return asyncio.run(
        generate(
            tmp / "prompts.jsonl",
            policy=POLICY,
            out=tmp / "out.jsonl",
            base_url=base_url,
            budget_usd=budget_usd,
            max_tokens=100,
            sleep=no_sleep,
        )
    )


def test_a_web_search_row_under_a_one_cent_cap_is_refused_before_it_is_sent(
    tmp_path: Path,
) -> None:
    write_prompts(tmp_path / "prompts.jsonl", _rows(3, [WEB_SEARCH]))
    with serve(speed=0, seed=1) as fake:
        summary = _gen(tmp_path, fake.base_url, 0.01)
        billed = fake.ledger.total_usd
        sent = len(fake.ledger)
    assert sent == 0 and billed == 0  # nothing sent: the cap holds no such request
    assert summary.not_sent == 3 and summary.spent_usd == 0
    assert summary.stop_reason == "budget"
    said = " ".join(str(summary.message).split())
    assert "more than the whole $0.01 cap; its web search's results may fill the whole" in said


def test_web_search_rows_are_billed_their_fee_and_never_past_their_reservation(
    tmp_path: Path,
) -> None:
    write_prompts(tmp_path / "prompts.jsonl", _rows(4, [WEB_SEARCH]))
    with serve(speed=0, seed=1, record_requests=True) as fake:
        summary = _gen(tmp_path, fake.base_url, 2.0)
        ledger = fake.ledger
        entries = len(ledger)
        sent = fake.fake.requests
    out = records(tmp_path / "out.jsonl")
    assert summary.stop_reason == "done" and summary.ok + summary.truncated == 4
    assert all(body["tools"] == [WEB_SEARCH] for body in sent)  # sent as the row gave it
    for record in out:
        usage = record["usage"]
        assert usage["server_tool_use_details"] == {"web_search_requests": 1}
        # five results of 1,600 tokens each in the prompt, and $0.004 a result in the cost
        assert usage["prompt_tokens"] > 8_000
        tokens = Decimal(str(usage["cost_details"]["upstream_inference_prompt_cost"])) + Decimal(
            str(usage["cost_details"]["upstream_inference_completions_cost"])
        )
        fee = Decimal(str(usage["cost"])) - tokens
        assert abs(fee - 5 * RESULT_USD) < D("1e-9")
    assert sum(Decimal(str(r["cost_usd"])) for r in out) == ledger.total_usd == summary.spent_usd
    assert entries == 4
    assert not any("more than their reserved" in w for w in summary.warnings)
    assert summary.peak_committed_usd <= D("2.0")
    assert json.loads(json.dumps(summary.to_dict()))["stop_reason"] == "done"


def test_the_fake_bills_an_advisor_in_cost_beside_the_providers_tokens() -> None:
    """A client that does not bound its spend may send one: the fake bills it as the 2026-07
    recording shows (``cost`` 0.0160614 against ``upstream_inference_cost`` 0.0001764): the
    advisor's tokens in ``cost``, the executor's alone upstream."""
    import requests

    from openrouter_probe.rules.snapshot import bundled_snapshot

    body = {
        "model": "moonshotai/kimi-k2.5",
        "messages": [{"role": "user", "content": "Plan a worker pool."}],
        "max_tokens": 64,
        "provider": {"order": ["chutes/int4"], "allow_fallbacks": False},
        "tools": [ADVISOR],
    }
    with serve(speed=0, seed=1) as fake:
        answer = requests.post(
            f"{fake.base_url}/chat/completions",
            json=body,
            headers={"Authorization": "Bearer sk-test"},
            timeout=30,
        ).json()
        entry = fake.ledger.get(answer["id"])
    usage = answer["usage"]
    assert entry is not None and entry.tag == "chutes/int4"
    (chutes,) = [e for e in bundled_snapshot().endpoints if e.tag == "chutes/int4"]
    price_in = chutes.pricing.usd_per_unit("prompt")
    price_out = chutes.pricing.usd_per_unit("completion")
    assert price_in and price_out
    advisor = price_in * usage["prompt_tokens"] + price_out * 1024  # one consultation
    cost = Decimal(str(usage["cost"]))
    upstream = Decimal(str(usage["cost_details"]["upstream_inference_cost"]))
    assert abs(cost - upstream - advisor) < D("1e-12") and upstream > 0
    assert entry.cost_usd == cost  # the ledger bills what cost says


def test_a_prompt_set_whose_rows_all_carry_an_advisor_is_refused_before_the_run(
    tmp_path: Path,
) -> None:
    from openrouter_probe.errors import ConfigError

    write_prompts(tmp_path / "prompts.jsonl", _rows(2, [ADVISOR]))
    with serve(speed=0, seed=1, record_requests=True) as fake:
        with pytest.raises(ConfigError) as refused:
            _gen(tmp_path, fake.base_url, 0.01)
        sent = fake.fake.requests
    assert sent == [] and not (tmp_path / "out.jsonl").exists()
    said = str(refused.value)
    assert "no rows to send: all 2 are skipped" in said
    assert "prompts.jsonl:1: tools[0] is openrouter:advisor: each consultation" in said

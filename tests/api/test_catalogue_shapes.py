"""The catalogue side: bodies of the shapes OpenRouter sent in 2025 and 2026.

Fixtures are written from the shapes ``../shared/OPENROUTER.md`` and other projects' recordings
describe (the recordings themselves are held out): a 2025 endpoint with ``internal_reasoning: "0"`` and no
uptime or speed fields at all, billed 362 completion tokens (356 of them reasoning) at
362 x $2.50/M; a 2026 endpoint with ``perf_last_30m_by_workload``; a 2026 models-list entry with
``benchmarks``, ``reasoning``, ``links.details`` and ``pricing.overrides`` (§2, §14, §16).
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest

from openrouter_probe.analysis.budget import plan_budget
from openrouter_probe.analysis.matrix import build_matrix
from openrouter_probe.api.completion import read_completion
from openrouter_probe.api.listings import ModelsList
from openrouter_probe.api.schema import Endpoint, ModelEndpoints
from openrouter_probe.rules.snapshot import Snapshot

#: A 2025 endpoint as the endpoints list of that time gave it (issue 23: 319 of 321 models listed
#: internal_reasoning "0"): zero prices listed, no uptime, latency or throughput keys at all.
ENDPOINT_2025: dict[str, Any] = {
    "name": "DeepInfra | moonshotai/kimi-k2-0905",
    "context_length": 131072,
    "pricing": {
        "prompt": "0.0000005",
        "completion": "0.0000025",
        "request": "0",
        "image": "0",
        "web_search": "0",
        "internal_reasoning": "0",
    },
    "provider_name": "DeepInfra",
    "tag": "deepinfra/fp4",
    "quantization": "fp4",
    "max_completion_tokens": 16384,
    "max_prompt_tokens": None,
    "supported_parameters": ["max_tokens", "temperature", "reasoning", "tools"],
    "status": 0,
}

#: Its bill, of the shape issue 23 quotes: 362 completion tokens, 356 of them reasoning.
BILL_2025 = {
    "id": "gen-1758703127-x",
    "provider": "DeepInfra",
    "model": "moonshotai/kimi-k2-0905",
    "choices": [{"index": 0, "finish_reason": "stop", "message": {"content": "Olá!"}}],
    "usage": {
        "prompt_tokens": 20,
        "completion_tokens": 362,
        "total_tokens": 382,
        "cost": 0.000915,  # 20 x $0.50/M + 362 x $2.50/M
        "completion_tokens_details": {"reasoning_tokens": 356},
    },
}


def test_a_listed_zero_reasoning_price_is_the_completion_rate() -> None:
    endpoint = Endpoint.model_validate(ENDPOINT_2025)
    pricing = endpoint.pricing
    assert pricing.usd_per_m("internal_reasoning") == 0  # what was listed, kept
    assert pricing.listed_reasoning_usd_per_m is None
    assert pricing.reasoning_usd_per_m == Decimal("2.5")
    assert pricing.reasoning_price_rule == "listed 0: completion rate"
    # the bill agrees: every completion token, reasoning or not, at $2.50/M
    bill = read_completion(json.dumps(BILL_2025))
    usage = bill.typed_usage
    assert usage is not None and usage.reasoning_tokens == 356
    visible = usage.completion_tokens - usage.reasoning_tokens
    priced = (
        usage.prompt_tokens * pricing.prompt_usd_per_m
        + visible * pricing.completion_usd_per_m
        + usage.reasoning_tokens * pricing.reasoning_usd_per_m
    ) / 1_000_000
    assert priced == bill.cost_usd == Decimal("0.000915")


def test_the_matrix_and_the_budget_say_which_reasoning_rule_they_used() -> None:
    zero = ENDPOINT_2025
    listed = {**zero, "tag": "google-vertex", "provider_name": "Google"}
    listed["pricing"] = {**zero["pricing"], "internal_reasoning": "0.000004"}
    absent = {**zero, "tag": "chutes/int4", "provider_name": "Chutes"}
    absent["pricing"] = {"prompt": "0.0000004", "completion": "0.000002"}
    data = {"id": "moonshotai/kimi-k2-0905", "endpoints": [zero, listed, absent]}
    snap = Snapshot.from_endpoints(
        ModelEndpoints.model_validate(data),
        model="moonshotai/kimi-k2-0905",
        source="api",
        origin="test",
    )
    frame = build_matrix(snap).set_index("tag")
    assert frame.loc["deepinfra/fp4", "reasoning_usd_per_m"] == 2.5  # not 0.0
    assert not frame.loc["deepinfra/fp4", "reasoning_price_listed"]
    assert frame.loc["deepinfra/fp4", "reasoning_price_rule"] == "listed 0: completion rate"
    assert frame.loc["google-vertex", "reasoning_usd_per_m"] == 4.0
    assert frame.loc["google-vertex", "reasoning_price_rule"] == "listed"
    assert frame.loc["chutes/int4", "reasoning_price_rule"] == "not listed: completion rate"

    plan = plan_budget(
        list(snap.endpoints), budget_usd=100, output_tokens="10M", reasoning_share="0.5:0.8"
    )
    by_tag = {e.tag: e for e in plan.endpoints}
    # thinking at $0 would have made 10M tokens cost $5 (20% visible x 2.50); it is $25
    assert by_tag["deepinfra/fp4"].price_out_usd_per_m == Decimal("2.5")
    assert by_tag["deepinfra/fp4"].price_reasoning_usd_per_m is None
    assert by_tag["deepinfra/fp4"].output_only.cost_usd == Decimal(25)
    assert any(
        n.startswith("deepinfra/fp4 list internal_reasoning 0: reasoning is priced at the ")
        for n in plan.notes
    )


def test_stats_are_said_withheld_only_when_sent_as_null() -> None:
    old = ModelEndpoints.model_validate({"id": "m/x", "endpoints": [ENDPOINT_2025]})
    assert not old.endpoints[0].stats_withheld and not old.stats_missing
    keyless = {**ENDPOINT_2025, "latency_last_30m": None, "throughput_last_30m": None}
    new = ModelEndpoints.model_validate({"id": "m/x", "endpoints": [keyless]})
    assert new.endpoints[0].stats_withheld and new.stats_missing


def test_the_probe_says_stats_are_null_only_when_they_are(
    replay_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from click.testing import CliRunner

    from openrouter_probe.cli import cli

    base, routes, _ = replay_server
    path = "/api/v1/models/moonshotai/kimi-k2-0905/endpoints"
    monkeypatch.setenv("OPENROUTER_BASE_URL", f"{base}/api/v1")
    monkeypatch.delenv("OPENROUTER_API_KEY", raising=False)
    for endpoint, said in (
        (ENDPOINT_2025, False),
        ({**ENDPOINT_2025, "latency_last_30m": None, "throughput_last_30m": None}, True),
    ):
        body = {"data": {"id": "moonshotai/kimi-k2-0905", "endpoints": [endpoint]}}
        routes[path] = (200, json.dumps(body), "application/json")
        result = CliRunner().invoke(cli, ["matrix", "moonshotai/kimi-k2-0905", "--format", "json"])
        assert result.exit_code == 0, result.output
        assert ("latency/throughput are null" in result.stderr) is said


#: A 2026 endpoint with the per-workload performance (only with a key; SDK 1.3.84, §16).
ENDPOINT_2026: dict[str, Any] = {
    **ENDPOINT_2025,
    "pricing": {"prompt": "0.00000045", "completion": "0.00000225"},
    "uptime_last_5m": 100,
    "uptime_last_30m": 99.8,
    "uptime_last_1d": 99.5,
    "latency_last_30m": {"p50": 2687, "p75": 3100, "p90": 4200, "p99": 9000},
    "throughput_last_30m": {"p50": 35, "p75": 31, "p90": 25, "p99": 12},
    "service_tier": None,
    "native_tools": {},
    "perf_last_30m_by_workload": {
        "text_generation": {
            "latency": {"p50": 2687, "p75": 3100, "p90": 4200, "p99": 9000},
            "throughput": {"p50": 35, "p75": 31, "p90": 25, "p99": 12},
            "request_count": 1840,
        },
        "tool_calling": {"latency": None, "throughput": None, "request_count": 112},
    },
}


def test_the_matrix_shows_the_requests_behind_a_figure() -> None:
    bare = {**ENDPOINT_2025, "tag": "chutes/int4", "provider_name": "Chutes"}
    data = {"id": "moonshotai/kimi-k2-0905", "endpoints": [ENDPOINT_2026, bare]}
    parsed = ModelEndpoints.model_validate(data)
    assert parsed.endpoints[0].request_count_30m == 1952
    assert parsed.to_json_dict()["endpoints"][0] == ENDPOINT_2026  # kept as sent
    snap = Snapshot.from_endpoints(
        parsed, model="moonshotai/kimi-k2-0905", source="api", origin="test"
    )
    frame = build_matrix(snap).set_index("tag")
    assert frame.loc["deepinfra/fp4", "requests_30m"] == 1952
    assert frame.loc["deepinfra/fp4", "uptime_30m_pct"] == 99.8
    assert frame["requests_30m"].isna().tolist() == [False, True]


#: A 2026 models-list entry with the fields the list gained (§2, §14).
MODEL_2026: dict[str, Any] = {
    "id": "moonshotai/kimi-k2.5",
    "canonical_slug": "moonshotai/kimi-k2.5-0127",
    "name": "MoonshotAI: Kimi K2.5",
    "created": 1769487076,
    "context_length": 262144,
    "pricing": {
        "prompt": "0.00000045",
        "completion": "0.00000225",
        "input_cache_read": "0.00000007",
        "overrides": [{"min_prompt_tokens": 128000, "prompt": "0.0000009"}],
    },
    "links": {"details": "/api/v1/models/moonshotai/kimi-k2.5-0127/endpoints"},
    "reasoning": {"mandatory": False, "default_enabled": True},
    "benchmarks": {
        "artificial_analysis": {"intelligence_index": 47, "coding_index": 39, "agentic_index": 52},
        "design_arena": [{"category": "website", "elo": 1311}],
    },
    "alias_target": None,
    "supported_parameters": ["reasoning", "tools", "max_tokens"],
}


def test_a_2026_models_list_keeps_its_new_fields() -> None:
    body = {"data": [MODEL_2026], "total_count": 1, "links": {"next": None}}
    listing = ModelsList.model_validate(body)
    (model,) = listing.data
    assert model.reasoning == {"mandatory": False, "default_enabled": True}
    assert model.benchmarks is not None
    assert model.benchmarks["artificial_analysis"]["intelligence_index"] == 47
    assert model.links == {"details": "/api/v1/models/moonshotai/kimi-k2.5-0127/endpoints"}
    assert model.pricing.overrides is not None
    assert model.pricing.overrides[0].min_prompt_tokens == 128000
    assert listing.to_json_dict() == body  # every field kept, as sent

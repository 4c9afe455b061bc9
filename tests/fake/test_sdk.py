"""The fake's bodies as the official SDK types them.

The official ``openrouter`` SDK (1.3.84, a dev dependency) is pointed at the fake over loopback and
reads every catalogue and account path with its own models: ``/models``, ``/models/{id}/endpoints``,
``/providers``, ``/key``, ``/credits`` and ``/generation``. Before, it rejected four of them for
missing required fields and ``/credits`` was not served. Each test also asserts what the bodies say
(prices, limits, what was billed), not only that they parse.
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest
import requests

from openrouter_probe.fake import serve
from openrouter_probe.rules.snapshot import bundled_snapshot, load_snapshot
from tests.conftest import PYTEST_OPENROUTER_KEY, ROOT

openrouter = pytest.importorskip("openrouter", reason="the openrouter SDK is a dev extra")
# /key's rate_limit and is_provisioning_key are deprecated in the SDK, yet the API still sends them.
pytestmark = pytest.mark.filterwarnings("ignore:.*DEPRECATED:DeprecationWarning")

MODEL = "moonshotai/kimi-k2.5"


def _sdk(base_url: str) -> Any:
    return openrouter.OpenRouter(api_key=PYTEST_OPENROUTER_KEY, server_url=base_url)


def _chat(base_url: str, **body: Any) -> dict[str, Any]:
    reply = requests.post(
        f"{base_url}/chat/completions",
        json={"model": MODEL, "messages": [{"role": "user", "content": "2+2?"}], **body},
        headers={"Authorization": f"Bearer {PYTEST_OPENROUTER_KEY}"},
        timeout=10,
    )
    assert reply.status_code == 200, reply.text
    return dict(reply.json())


def test_models_and_endpoints_parse_in_the_sdk_with_their_facts() -> None:
    with serve(speed=0) as fake:
        sdk = _sdk(fake.base_url)
        (model,) = sdk.models.list().result.data
        endpoints = sdk.endpoints.list(author="moonshotai", slug="kimi-k2.5").data
        providers = sdk.providers.list().data
    assert (model.id, model.canonical_slug) == (MODEL, "moonshotai/kimi-k2.5-0127")
    assert model.pricing.completion == "0.0000022" and model.supported_voices is None
    assert model.links.details == "/api/v1/models/moonshotai/kimi-k2.5-0127/endpoints"
    by_tag = {e.tag: e for e in endpoints.endpoints}
    assert len(by_tag) == 11 and endpoints.id == MODEL
    chutes = by_tag["chutes/int4"]
    assert (chutes.provider_name, chutes.quantization) == ("Chutes", "int4")
    assert chutes.pricing.completion == "0.0000022"
    assert chutes.service_tier is None and chutes.native_tools == {}
    assert chutes.supports_diarization is False
    snap = {e.tag: e for e in bundled_snapshot().endpoints}
    for tag, endpoint in by_tag.items():  # tool_choice support follows each one's parameters
        params = snap[tag].supported_parameters
        assert endpoint.supports_tool_choice.required == ("tool_choice" in params), tag
        assert endpoint.supports_tool_choice.auto == bool({"tools", "tool_choice"} & set(params))
    assert {p.slug for p in providers} == {t.split("/")[0] for t in by_tag}


def test_a_tier_endpoint_reads_as_a_tier_and_a_snapshots_own_fields_win(tmp_path: Any) -> None:
    doc = bundled_snapshot().to_json()
    tier = dict(doc["data"]["endpoints"][0], tag="chutes/priority", name="Chutes | priority")
    native = dict(doc["data"]["endpoints"][1], native_tools={"web_search": {"type": "x_search"}})
    doc["data"]["endpoints"] = [tier, native]
    path = tmp_path / "tiers.json"
    path.write_text(json.dumps(doc))
    with serve(load_snapshot(path), speed=0) as fake:
        body = requests.get(f"{fake.base_url}/models/{MODEL}/endpoints", timeout=5).json()
        typed = _sdk(fake.base_url).endpoints.list(author="moonshotai", slug="kimi-k2.5").data
    first, second = body["data"]["endpoints"]
    assert first["service_tier"] == "priority"  # as the routing model reads a /priority tag
    assert second["native_tools"] == {"web_search": {"type": "x_search"}}
    assert first["latency_last_30m"] is None  # no key: no stats, as OpenRouter sends them
    assert [e.service_tier for e in typed.endpoints] == ["priority", None]


def test_key_and_credits_parse_in_the_sdk_and_follow_what_was_billed() -> None:
    with serve(speed=0, credit_usd=5) as fake:
        sdk = _sdk(fake.base_url)
        before = sdk.api_keys.get_current_key_metadata().data
        reply = _chat(fake.base_url, max_tokens=50)
        after = sdk.api_keys.get_current_key_metadata().data
        credits = sdk.credits.get_credits().data
        billed = fake.ledger.total_usd
    cost = reply["usage"]["cost"]
    assert Decimal(str(cost)) == billed > 0
    assert (before.limit, before.limit_remaining, before.usage) == (5.0, 5.0, 0.0)
    assert after.limit_remaining == pytest.approx(5 - cost) and after.usage == pytest.approx(cost)
    (budget,) = after.budgets
    assert (budget.scope, budget.limit_usd) == ("key_limit", 5.0)
    assert budget.remaining_usd == pytest.approx(5 - cost) == after.effective_budget.remaining_usd
    assert after.rate_limit.requests == -1 and after.allowed_data_regions == ["global"]
    assert after.free_model_daily_requests.limit == 1000 and after.organization_id is None
    assert (credits.total_credits, credits.total_usage) == (5.0, pytest.approx(cost))


def test_an_unlimited_key_has_no_budget() -> None:
    with serve(speed=0) as fake:
        data = _sdk(fake.base_url).api_keys.get_current_key_metadata().data
        credits = _sdk(fake.base_url).credits.get_credits().data
    assert data.limit is None and data.budgets == [] and data.effective_budget is None
    assert credits.total_usage == 0.0 and credits.total_credits == 1_000_000.0


@pytest.mark.parametrize("stream", [False, True])
def test_generation_parses_in_the_sdk_and_equals_the_answer(stream: bool) -> None:
    with serve(speed=0) as fake:
        if stream:
            reply = requests.post(
                f"{fake.base_url}/chat/completions",
                json={"model": MODEL, "messages": [{"role": "user", "content": "hi"}],
                      "max_tokens": 40, "stream": True},
                headers={"Authorization": f"Bearer {PYTEST_OPENROUTER_KEY}"},
                timeout=10,
            )  # fmt: skip
            generation_id = reply.headers["X-Generation-Id"]
        else:
            generation_id = _chat(fake.base_url, max_tokens=40)["id"]
        data = _sdk(fake.base_url).generations.get_generation(id=generation_id).data
        (entry,) = fake.ledger.entries
    assert data.id == generation_id and data.streamed is stream
    assert Decimal(str(data.total_cost)) == entry.cost_usd
    assert (data.provider_name, data.tokens_completion) == (entry.provider, entry.completion_tokens)
    assert data.native_tokens_reasoning == entry.reasoning_tokens
    assert (data.data_region, data.router, data.num_search_results) == ("global", None, 0)
    assert [r.provider_name for r in data.provider_responses] == [entry.provider]


def test_a_second_model_is_served_in_the_sdk_shape_too() -> None:
    other = load_snapshot(ROOT / "examples" / "policies" / "deepseek-v3.2.snapshot.json")
    with serve([bundled_snapshot(), other], speed=0) as fake:
        sdk = _sdk(fake.base_url)
        ids = sorted(m.id for m in sdk.models.list().result.data)
        deepseek = sdk.endpoints.list(author="deepseek", slug="deepseek-v3.2").data
    assert ids == ["deepseek/deepseek-v3.2", MODEL]
    assert len(deepseek.endpoints) == len(other.endpoints) == 8

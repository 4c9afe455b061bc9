"""Pure parsing of the real bodies in tests/data/captures (a copy of ../shared/captures)."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
import yaml

from openrouter_probe.api.completion import read_completion, read_stream
from openrouter_probe.api.listings import ModelsList
from openrouter_probe.api.schema import Endpoint, EndpointsResponse, Pricing
from openrouter_probe.api.sse import iter_sse_events
from tests.conftest import CAPTURES, DATA


def _go_vcr(name: str) -> list[dict]:
    return yaml.safe_load((CAPTURES / name).read_text())["interactions"]


def test_k3_endpoints_capture_parses_with_its_facts() -> None:
    body = json.loads((CAPTURES / "kimi-k3-endpoints-2026-08-25-reduced.json").read_text())
    data = EndpointsResponse.model_validate(body).data
    assert data.id == "moonshotai/kimi-k3"
    assert [e.tag for e in data.endpoints] == [
        "fireworks",
        "alibaba",
        "fireworks/fast",
        "morph/fast",
    ]
    fireworks, alibaba, fast, morph = data.endpoints
    assert fireworks.quantization == "unknown"
    assert morph.quantization == "fp4"
    assert [e.status for e in data.endpoints] == [0, -2, 0, -2]
    assert fireworks.uptime_last_30m == pytest.approx(99.82397465234993)
    assert morph.uptime_last_5m is None
    assert fireworks.latency_last_30m is not None and fireworks.latency_last_30m.p50 == 2687
    assert fireworks.throughput_last_30m is not None and fireworks.throughput_last_30m.p50 == 35
    assert fireworks.max_completion_tokens is None
    assert fireworks.pricing.prompt_usd_per_m == Decimal("3")
    assert fireworks.pricing.completion_usd_per_m == Decimal("15")
    assert alibaba.pricing.cache_read_usd_per_m == Decimal("0.345")
    assert fast.slug == "fireworks" and fast.variant == "fast"
    assert fireworks.supports_voice_cloning is False


def test_endpoints_round_trip_exactly() -> None:
    for name in ("captures/kimi-k3-endpoints-2026-08-25-reduced.json", "kimi-k2.5-endpoints.json"):
        body = json.loads((DATA / name).read_text())
        assert EndpointsResponse.model_validate(body).to_json_dict() == body


def test_scenario_k25_facts() -> None:
    body = json.loads((DATA / "kimi-k2.5-endpoints.json").read_text())
    data = EndpointsResponse.model_validate(body).data
    assert len(data.endpoints) == 11
    by_tag = {e.tag: e for e in data.endpoints}
    assert by_tag["chutes/int4"].pricing.completion_usd_per_m == Decimal("2.2")
    assert by_tag["baseten/fp4"].quantization == "fp4"
    assert by_tag["fireworks"].quantization == "unknown"
    assert by_tag["venice"].status == -2
    assert by_tag["siliconflow/int4"].max_completion_tokens == 235929


def test_models_list_capture_parses() -> None:
    listing = ModelsList.model_validate_json(
        (CAPTURES / "models-list-2026-01-28.json").read_bytes()
    )
    assert len(listing.data) == 347
    assert listing.total_count is None  # the Jan-2026 list predates total_count/links
    k25 = next(m for m in listing.data if m.id == "moonshotai/kimi-k2.5")
    assert k25.canonical_slug == "moonshotai/kimi-k2.5-0127"
    assert k25.hugging_face_id == "moonshotai/Kimi-K2.5"
    assert k25.context_length == 262144
    assert k25.pricing.prompt_usd_per_m == Decimal("0.6")
    assert k25.pricing.completion_usd_per_m == Decimal("3")
    assert k25.top_provider is not None and k25.top_provider.max_completion_tokens == 262144


def test_models_list_newer_fields_are_kept() -> None:
    newer = {
        "data": [
            {
                "id": "moonshotai/kimi-k2.5",
                "canonical_slug": "moonshotai/kimi-k2.5-0127",
                "pricing": {
                    "prompt": "0.00000045",
                    "completion": "0.00000225",
                    "input_cache_read": "0.00000007",
                },
                "reasoning": {"mandatory": False, "default_enabled": True},
                "benchmarks": {"artificial_analysis": {"intelligence_index": 47}},
                "knowledge_cutoff": "2025-04",
                "brand_new_field": [1, 2],
            }
        ],
        "total_count": 1,
        "links": {"next": None},
    }
    listing = ModelsList.model_validate(newer)
    assert listing.total_count == 1
    model = listing.data[0]
    assert model.reasoning == {"mandatory": False, "default_enabled": True}
    assert model.model_extra == {"brand_new_field": [1, 2]}
    assert listing.to_json_dict() == newer


def test_pricing_units_discount_and_sparse_keys() -> None:
    pricing = Pricing.model_validate(
        {
            "prompt": "0.0000006",
            "completion": "0.000003",
            "discount": 0.1,
            "internal_reasoning": "0.000004",
            "request": "-1",
            "new_price_key": "0.000001",
        }
    )
    assert pricing.prompt_usd_per_m == Decimal("0.54")
    assert pricing.completion_usd_per_m == Decimal("2.7")
    assert pricing.reasoning_usd_per_m == Decimal("3.6")
    assert pricing.cache_read_usd_per_m is None
    assert pricing.usd_per_unit("request") is None  # "-1" means variable, not a price
    assert pricing.usd_per_m("new_price_key") == Decimal("0.9")
    assert Pricing.model_validate({"prompt": 0.000001}).prompt_usd_per_m == Decimal("1")


def test_endpoint_tolerates_null_unknown_and_new_values() -> None:
    base = {
        "provider_name": "Chutes",
        "tag": "chutes",
        "pricing": {"prompt": "0", "completion": "0"},
    }
    assert Endpoint.model_validate({**base, "quantization": None}).quantization is None
    assert Endpoint.model_validate({**base, "quantization": "fp3"}).quantization == "fp3"
    odd = Endpoint.model_validate(
        {**base, "status": -7, "supports_tool_choice": {"auto": True}, "future": {"x": 1}}
    )
    assert odd.status == -7
    assert odd.model_extra == {"future": {"x": 1}}
    assert odd.latency_last_30m is None and not odd.has_stats


def test_inceptron_chat_capture() -> None:
    (interaction,) = _go_vcr("kimi-k2.5-chat-inceptron.yaml")
    body = interaction["response"]["body"]
    assert body.startswith("\n         \n")  # keep-alive padding before the JSON
    chat = read_completion(body)
    assert chat.provider == "Inceptron"
    assert chat.model == "moonshotai/kimi-k2.5-0127"
    usage = chat.typed_usage
    assert usage is not None
    assert (usage.prompt_tokens, usage.completion_tokens) == (21, 202)
    assert usage.reasoning_tokens == 166
    assert usage.cost == pytest.approx(0.00045364)
    # reasoning is billed as output: 202 completion tokens (166 of them reasoning) at $2.20/M
    assert usage.cost_details is not None
    assert usage.cost_details["upstream_inference_completions_cost"] == pytest.approx(202 * 2.2e-6)
    assert chat.content is not None and chat.content.strip().startswith("Oi!")
    assert chat.reasoning is not None and chat.reasoning.startswith(" The user wants me")
    assert chat.reasoning_details == [
        {"type": "reasoning.text", "text": chat.reasoning, "format": "unknown", "index": 0}
    ]
    assert not chat.failed


def test_modelrun_stream_capture() -> None:
    (interaction,) = _go_vcr("kimi-k2.5-stream-modelrun.yaml")
    body = interaction["response"]["body"]
    events = list(iter_sse_events(body.splitlines()))
    assert {e["provider"] for e in events} == {"ModelRun"}
    finishes = [e["choices"][0]["finish_reason"] for e in events if e.get("choices")]
    assert (
        finishes.count("stop") == 2
    )  # the real 2026 stream repeats finish_reason in the usage chunk
    chat = read_stream(body)
    assert chat.provider == "ModelRun" and chat.model == "moonshotai/kimi-k2.5-0127"
    assert chat.finish_reason == "stop" and not chat.failed
    usage = chat.typed_usage
    assert usage is not None and usage.cost == pytest.approx(0.0005738)
    assert chat.reasoning is not None and chat.reasoning.startswith(" The user wants me to say")
    # the details of every chunk merged into one entry, its text the reasoning's
    assert chat.reasoning_details is not None and len(chat.reasoning_details) == 1
    assert chat.reasoning_details[0]["text"] == chat.reasoning
    assert usage.reasoning_tokens > 0 and usage.completion_tokens > usage.reasoning_tokens


def test_2025_stream_has_usage_with_null_finish() -> None:
    (interaction,) = _go_vcr("kimi-k2-0905/simple_streaming_kimi-k2_moonshotai.yaml")
    body = interaction["response"]["body"]
    events = list(iter_sse_events(body.splitlines()))
    finishes = [e["choices"][0]["finish_reason"] if e.get("choices") else None for e in events]
    assert finishes[-2:] == [
        "stop",
        None,
    ]  # 2025: the usage chunk came after the finish, unrepeated
    assert {e["provider"] for e in events} == {"Moonshot AI"}
    chat = read_stream(body)
    assert chat.finish_reason == "stop" and chat.provider == "Moonshot AI"
    usage = chat.typed_usage
    assert usage is not None
    assert usage.cost == pytest.approx(0.000039)
    assert usage.completion_tokens == 3


K2_0905 = {
    # slug sent in provider.only -> provider display name in the response (OPENROUTER.md §6.2)
    "baseten": "BaseTen",
    "chutes": "Chutes",
    "deepinfra": "DeepInfra",
    "fireworks": "Fireworks",
    "groq": "Groq",
    "moonshotai": "Moonshot AI",
    "moonshotai_turbo": "Moonshot AI",
    "novita": "Novita",
    "siliconflow": "SiliconFlow",
    "together": "Together",
    "wandb": "WandB",
}


@pytest.mark.parametrize(("suffix", "provider"), sorted(K2_0905.items()))
def test_k2_0905_pinned_chats(suffix: str, provider: str) -> None:
    interactions = _go_vcr(f"kimi-k2-0905/simple_kimi-k2_{suffix}.yaml")
    request = json.loads(interactions[-1]["request"]["body"])
    assert request["provider"]["only"] == [suffix.replace("_", "/")]
    chat = read_completion(interactions[-1]["response"]["body"])
    assert chat.provider == provider
    assert chat.cost_usd is not None and chat.cost_usd > 0
    assert chat.completion_tokens > 0
    assert not chat.failed


def test_k2_0905_unpinned_chat() -> None:
    (interaction,) = _go_vcr("kimi-k2-0905/simple_kimi-k2.yaml")
    assert "provider" not in json.loads(interaction["request"]["body"])
    chat = read_completion(interaction["response"]["body"])
    assert chat.provider and chat.cost_usd


def test_groq_429_body_is_an_error_envelope() -> None:
    first, second = _go_vcr("kimi-k2-0905/simple_kimi-k2_groq.yaml")
    assert first["response"]["code"] == 429
    err = read_completion(first["response"]["body"])
    assert err.failed and err.error is not None
    assert err.error["code"] == 429
    assert err.error["metadata"]["provider_name"] == "Groq"
    assert "rate-limited upstream" in err.error["metadata"]["raw"]
    assert read_completion(second["response"]["body"]).provider == "Groq"


def test_every_capture_file_is_covered() -> None:
    """A new capture must get a test here: list them all."""
    files = sorted(str(p.relative_to(CAPTURES)) for p in CAPTURES.rglob("*") if p.is_file())
    covered = {
        "README.md",
        "kimi-k2.5-chat-inceptron.yaml",
        "kimi-k2.5-stream-modelrun.yaml",
        "kimi-k3-endpoints-2026-08-25-reduced.json",
        "models-list-2026-01-28.json",
        "kimi-k2-0905/simple_kimi-k2.yaml",
        "kimi-k2-0905/simple_streaming_kimi-k2_moonshotai.yaml",
        *(f"kimi-k2-0905/simple_kimi-k2_{s}.yaml" for s in K2_0905),
    }
    assert set(files) == covered

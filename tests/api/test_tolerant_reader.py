"""The tolerant reader: core fields validated, odd-shaped others kept raw, unreadable entries skipped.

Bodies are the real captures (tests/data/captures) with non-core fields given other shapes, as
OpenRouter does when it reshapes a field (``alias_target`` became an object in 2026, OPENROUTER.md
§14), plus one record whose core field cannot be read.
"""

from __future__ import annotations

import copy
import json
import logging
from decimal import Decimal
from pathlib import Path

import pytest
from pydantic import ValidationError

from openrouter_probe.api.batches import Batch
from openrouter_probe.api.listings import AliasTarget, ModelsList
from openrouter_probe.api.schema import Endpoint, EndpointsResponse, ModelEndpoints, Percentiles
from openrouter_probe.rules.snapshot import load_snapshot
from tests.conftest import CAPTURES

MODELS = json.loads((CAPTURES / "models-list-2026-01-28.json").read_text())
K3 = json.loads((CAPTURES / "kimi-k3-endpoints-2026-08-25-reduced.json").read_text())


def _schema_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "openrouter_probe.api.schema"]


def _reshaped_models() -> dict:
    body = copy.deepcopy(MODELS)
    data = body["data"]
    assert data[1]["id"] == "moonshotai/kimi-k2.5"
    # Non-core fields with other shapes than the schema declares:
    data[0]["alias_target"] = {"name": "Z.AI: GLM 4.7", "slug": "z-ai/glm-4.7"}  # the 2026 object
    data[1]["alias_target"] = "z-ai/glm-4.7"  # the old string form: kept raw
    data[1]["architecture"] = "text->text"
    data[1]["reasoning"] = ["low", "high"]
    data[1]["top_provider"]["is_moderated"] = "sometimes"
    data[1]["supported_parameters"] = {"tools": True}
    data[1]["created"] = "2026-01-27"
    data[3]["links"] = ["/api/v1/models/x/endpoints"]
    data[3]["default_parameters"] = "none"
    # One model whose price (core) cannot be read:
    data[5]["pricing"]["prompt"] = {"usd": "0.000001"}
    body["links"] = "not an object"
    return body


def test_models_list_keeps_odd_fields_raw_and_skips_one_broken_model(
    caplog: pytest.LogCaptureFixture,
) -> None:
    body = _reshaped_models()
    broken_id = body["data"][5]["id"]
    listing = ModelsList.model_validate(body)
    assert len(listing.data) == 346
    (skipped,) = listing.skipped
    assert (skipped.index, skipped.key) == (5, broken_id)
    assert skipped.reason == "pricing.prompt: Input should be a valid string"
    assert skipped.raw == body["data"][5]
    assert _schema_warnings(caplog) == [
        f"skipped 1 of 347 models that could not be read; first: data[5] ({broken_id}): "
        "pricing.prompt: Input should be a valid string"
    ]
    first, k25 = listing.data[0], listing.data[1]
    assert first.alias_target == AliasTarget(name="Z.AI: GLM 4.7", slug="z-ai/glm-4.7")
    # The odd ones: the attribute keeps its default, the value is kept as it came.
    assert k25.alias_target is None and k25.architecture is None and k25.reasoning is None
    assert k25.raw_fields == {
        "alias_target": "z-ai/glm-4.7",
        "architecture": "text->text",
        "reasoning": ["low", "high"],
        "supported_parameters": {"tools": True},
        "created": "2026-01-27",
    }
    assert k25.top_provider is not None and k25.top_provider.raw_fields == {
        "is_moderated": "sometimes"
    }
    # What the library computes from is read as before.
    assert k25.pricing.completion_usd_per_m == Decimal("3")
    assert k25.top_provider.max_completion_tokens == 262144
    assert listing.raw_fields == {"links": "not an object"} and listing.links is None
    # Nothing is lost: the dump is the body, the skipped model and the odd fields included.
    assert listing.to_json_dict() == body


def test_endpoints_keep_odd_fields_raw_and_skip_one_broken_endpoint(
    caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    body = copy.deepcopy(K3)
    fireworks, alibaba, fast, morph = body["data"]["endpoints"]
    fireworks["service_tier"] = {"tier": "priority"}
    fireworks["native_tools"] = ["web_search"]
    fireworks["perf_last_30m_by_workload"] = "n/a"
    fireworks["supports_tool_choice"] = ["auto"]
    fireworks["name"] = 42
    alibaba["supports_implicit_caching"] = "maybe"
    fast["service_tier"] = "priority"
    fast["perf_last_30m_by_workload"] = {
        "text_generation": {"latency": {"p50": 900}, "throughput": {"p50": 120}, "request_count": 7}
    }
    del morph["tag"]  # core: this endpoint cannot be routed to, so it cannot be read
    body["data"]["architecture"] = ["text"]
    data = EndpointsResponse.model_validate(body).data
    assert [e.tag for e in data.endpoints] == ["fireworks", "alibaba", "fireworks/fast"]
    assert [(s.index, s.key, s.reason) for s in data.skipped] == [
        (3, "Morph", "tag: Field required")
    ]
    assert _schema_warnings(caplog) == [
        "skipped 1 of 4 endpoints of moonshotai/kimi-k3 that could not be read; "
        "first: endpoints[3] (Morph): tag: Field required"
    ]
    fw = data.endpoints[0]
    assert fw.service_tier is None and fw.native_tools is None and fw.name is None
    assert fw.raw_fields == {
        "service_tier": {"tier": "priority"},
        "native_tools": ["web_search"],
        "perf_last_30m_by_workload": "n/a",
        "supports_tool_choice": ["auto"],
        "name": 42,
    }
    assert fw.pricing.completion_usd_per_m == Decimal("15") and fw.quantization == "unknown"
    assert data.endpoints[1].supports_implicit_caching is None
    perf = data.endpoints[2].perf_last_30m_by_workload
    assert perf is not None and perf["text_generation"].latency == Percentiles(p50=900)
    assert perf["text_generation"].request_count == 7
    assert data.endpoints[2].service_tier == "priority"
    assert data.architecture is None and data.raw_fields == {"architecture": ["text"]}
    assert EndpointsResponse.model_validate(body).to_json_dict() == body
    # A saved body loads as a snapshot: the readable endpoints, the rest kept in its data.
    path = tmp_path / "k3.json"
    path.write_text(json.dumps(body))
    snap = load_snapshot(path)
    assert [e.tag for e in snap.endpoints] == ["fireworks", "alibaba", "fireworks/fast"]
    assert len(snap.data["endpoints"]) == 4


def test_core_fields_are_validated() -> None:
    base = {"provider_name": "Chutes", "tag": "chutes", "pricing": {"prompt": "0"}}
    for field, value in [
        ("uptime_last_30m", "high"),
        ("latency_last_30m", {"p50": "fast"}),
        ("context_length", "long"),
        ("status", "degraded"),
        ("supported_parameters", "tools"),
        ("pricing", {"completion": ["0.1"]}),
    ]:
        with pytest.raises(ValidationError):
            Endpoint.model_validate({**base, field: value})


def test_a_list_of_which_nothing_is_readable_is_an_error() -> None:
    with pytest.raises(ValidationError, match=r"endpoints\.0\.provider_name"):
        ModelEndpoints.model_validate({"id": "a/b", "endpoints": [{"tag": "x"}]})
    with pytest.raises(ValidationError, match="data"):
        ModelsList.model_validate({"data": "everything"})
    assert ModelsList.model_validate({"data": []}).data == []


def test_a_batch_is_read_by_the_same_reader_and_gives_back_what_it_did_not_know() -> None:
    body = {
        "id": "batch-1",
        "status": "in_progress",
        "request_counts": {"total": 2, "completed": 1, "failed": 0, "expired": 0},
        "priority": {"tier": "flex"},  # a field this library does not know yet
    }
    batch = Batch.model_validate(body)
    assert batch.request_counts.completed == 1 and batch.model_extra == {
        "priority": {"tier": "flex"}
    }
    assert batch.to_json_dict() == body
    with pytest.raises(ValidationError, match="status"):  # every declared field of a batch is core
        Batch.model_validate({"id": "batch-1", "status": ["done"]})


def test_skipped_is_silent_with_the_context_flag(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    body = {"data": [{"id": "a/b"}, {"name": "no id"}]}
    listing = ModelsList.model_validate(body, context={"report_skipped": False})
    assert [s.reason for s in listing.skipped] == ["id: Field required"]
    assert _schema_warnings(caplog) == []


def test_service_tier_values() -> None:
    base = {"provider_name": "Fireworks", "tag": "fireworks/fast", "pricing": {}}
    assert Endpoint.model_validate(base).service_tier is None  # older data: no field
    for tier in ("flex", "priority", "ultrafast", "turbo-2027"):
        endpoint = Endpoint.model_validate({**base, "service_tier": tier})
        assert endpoint.service_tier == tier and endpoint.raw_fields == {}
    flags = Endpoint.model_validate(
        {
            **base,
            "supports_diarization": False,
            "supports_image_reference": True,
            "supports_multiple_audio_references": False,
            "native_tools": {"web_search": {"type": "openrouter:web_search"}},
        }
    )
    assert flags.supports_image_reference is True and flags.supports_diarization is False
    assert flags.native_tools == {"web_search": {"type": "openrouter:web_search"}}

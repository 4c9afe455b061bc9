"""Every field of the official SDK's models is known to our schema, or kept raw on purpose.

The SDK (``openrouter``, a dev dependency only) is generated from OpenRouter's spec, so it is the
newest machine-readable statement of the API's shapes. Its models reject older data (``PublicEndpoint``
requires ``service_tier`` and ``native_tools``), so it is a reference to test against, not our parser.
An SDK upgrade that adds a field fails here: declare the field in
``openrouter_probe/api/schema.py`` or ``listings.py`` (in ``core_fields`` if the library computes
from it), or list it below with the reason it stays raw.
"""

from __future__ import annotations

import json

import pytest
from pydantic import BaseModel, ValidationError

from openrouter_probe.api import listings, schema
from openrouter_probe.api.payload import Payload
from tests.conftest import CAPTURES

# A dev dependency, absent only from CI's lowest-versions run (the SDK needs pydantic>=2.11.2,
# which would hide the runtime minimum pydantic>=2.7 that run is there to test).
sdk = pytest.importorskip("openrouter.components", reason="the openrouter SDK is a dev extra")

PAIRS: list[tuple[type[BaseModel], type[Payload]]] = [
    (sdk.PublicEndpoint, schema.Endpoint),
    (sdk.PublicPricing, schema.Pricing),
    (sdk.Model, listings.Model),
    (sdk.PercentileStats, schema.Percentiles),
    (sdk.PricingOverride, schema.PricingOverride),
    (sdk.TopProviderInfo, listings.TopProvider),
    (sdk.ModelArchitecture, schema.Architecture),
    (sdk.ModelAliasTarget, listings.AliasTarget),
]

#: Fields the schema does not declare on purpose: they stay in ``model_extra`` as they came.
KEPT_RAW: dict[str, dict[str, str]] = {
    "PricingOverride": {
        key: "an overridden price: extras, like any price key an override carries"
        for key in (
            "prompt",
            "completion",
            "audio",
            "input_audio_cache",
            "input_cache_read",
            "input_cache_write",
            "input_cache_write_1h",
        )
    },
}


def _sdk_fields(model: type[BaseModel]) -> set[str]:
    return {field.alias or name for name, field in model.model_fields.items()}


def test_the_sdk_is_the_version_these_lists_were_checked_against() -> None:
    from importlib.metadata import version

    assert version("openrouter") == "1.3.84"


@pytest.mark.parametrize(("sdk_model", "ours"), PAIRS, ids=[p[0].__name__ for p in PAIRS])
def test_every_sdk_field_is_known_or_kept_raw_on_purpose(
    sdk_model: type[BaseModel], ours: type[Payload]
) -> None:
    kept = set(KEPT_RAW.get(sdk_model.__name__, {}))
    unknown = _sdk_fields(sdk_model) - set(ours.model_fields) - kept
    assert not unknown, (
        f"the SDK's {sdk_model.__name__} has fields {sorted(unknown)} that "
        f"schema.{ours.__name__} neither declares nor lists in KEPT_RAW"
    )
    stale = kept & set(ours.model_fields)
    assert not stale, f"{sorted(stale)} are declared now: remove them from KEPT_RAW"


def test_service_tier_values_match_the_sdk() -> None:
    from typing import Literal, get_args, get_origin

    annotation = sdk.PublicEndpoint.model_fields["service_tier"].annotation
    literals: set[str] = set()
    todo = [annotation]
    while todo:
        cur = todo.pop()
        if get_origin(cur) is Literal:
            literals |= set(get_args(cur))
        else:
            todo += list(get_args(cur))
    assert literals == set(schema.KNOWN_SERVICE_TIERS)


def test_an_endpoint_in_the_sdk_shape_reads_with_every_new_field() -> None:
    """A 2026-10 endpoint (SDK shape, every field set) validates in the SDK and reads here."""
    body = json.loads((CAPTURES / "kimi-k3-endpoints-2026-08-25-reduced.json").read_text())
    endpoint = body["data"]["endpoints"][2]  # fireworks/fast
    endpoint |= {
        "service_tier": "priority",
        "native_tools": {"web_search": {"type": "openrouter:web_search"}},
        "perf_last_30m_by_workload": {
            "text_generation": {
                "latency": {"p50": 700, "p75": 900, "p90": 1200, "p99": 2500},
                "throughput": {"p50": 150, "p75": 130, "p90": 110, "p99": 80},
                "request_count": 1234,
            }
        },
        "supports_diarization": False,
        "supports_image_reference": False,
        "supports_multiple_audio_references": False,
        "supports_tool_choice": {"none": True, "auto": True, "required": True, "function": True},
    }
    sdk.PublicEndpoint.model_validate(endpoint)  # the SDK accepts it: our test body is real-shaped
    ours = schema.Endpoint.model_validate(endpoint)
    assert ours.raw_fields == {} and ours.model_extra == {}
    assert ours.service_tier == "priority"
    perf = ours.perf_last_30m_by_workload
    assert perf is not None and perf["text_generation"].request_count == 1234
    assert ours.to_json_dict() == endpoint


def test_the_sdk_rejects_older_data_that_we_read() -> None:
    body = json.loads((CAPTURES / "kimi-k3-endpoints-2026-08-25-reduced.json").read_text())
    endpoint = body["data"]["endpoints"][0]
    with pytest.raises(ValidationError, match=r"service_tier|native_tools"):
        sdk.PublicEndpoint.model_validate(endpoint)
    assert schema.Endpoint.model_validate(endpoint).tag == "fireworks"

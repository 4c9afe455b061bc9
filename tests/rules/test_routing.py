"""The routing model (``openrouter_probe.rules.routing``) against OPENROUTER.md §6, fact by fact.

Expected orders and weights are computed by hand in each test (from literal prices and uptimes),
never by calling the helpers under test.
"""

from __future__ import annotations

import json
import math
from decimal import Decimal
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from openrouter_probe.api.schema import Endpoint
from openrouter_probe.errors import PolicyError
from openrouter_probe.rules.provider_block import (
    MAX_PRICE_UNITS,
    NON_PARAMETER_KEYS,
    REQUEST_PARAMETERS,
    MaxPrice,
    ProviderBlock,
    SortSpec,
)
from openrouter_probe.rules.ranking import blended_price_usd_per_m, tool_routing
from openrouter_probe.rules.routing import (
    ASSUMPTIONS,
    Candidate,
    Exclusion,
    RequestParams,
    RouteDecision,
    matches,
    route,
    service_tier,
)
from openrouter_probe.rules.snapshot import bundled_snapshot
from tests.conftest import CAPTURES, ROOT

# ---------------------------------------------------------------------------------------------
# Data
# ---------------------------------------------------------------------------------------------

K25 = bundled_snapshot().endpoints
K25_TAGS = [e.tag for e in K25]
K3 = [
    Endpoint.model_validate(e)
    for e in json.loads(
        (CAPTURES / "kimi-k3-endpoints-2026-08-25-reduced.json").read_text(encoding="utf-8")
    )["data"]["endpoints"]
]

#: K2.5 snapshot, USD per million tokens (input, output), copied from the data file by hand.
K25_PRICES: dict[str, tuple[str, str]] = {
    "chutes/int4": ("0.45", "2.2"),
    "deepinfra/int4": ("0.45", "2.25"),
    "siliconflow/int4": ("0.45", "2.25"),
    "atlas-cloud/int4": ("0.5", "2.6"),
    "together": ("0.5", "2.8"),
    "novita": ("0.6", "3"),
    "parasail/int4": ("0.55", "2.8"),
    "moonshotai/int4": ("0.6", "3"),
    "fireworks": ("0.6", "3"),
    "baseten/fp4": ("0.6", "3"),
    "venice": ("0.75", "3.75"),
}
K25_THROUGHPUT = {
    "chutes/int4": 31,
    "deepinfra/int4": 42,
    "siliconflow/int4": 27,
    "atlas-cloud/int4": 36,
    "together": 58,
    "novita": 29,
    "parasail/int4": 39,
    "moonshotai/int4": 47,
    "fireworks": 88,
    "baseten/fp4": 95,
    "venice": 18,
}
K25_LATENCY_MS = {
    "chutes/int4": 1850,
    "deepinfra/int4": 1320,
    "siliconflow/int4": 2410,
    "atlas-cloud/int4": 1990,
    "together": 880,
    "novita": 2150,
    "parasail/int4": 1540,
    "moonshotai/int4": 1100,
    "fireworks": 640,
    "baseten/fp4": 720,
    "venice": 3900,
}
K25_UPTIME = {
    "chutes/int4": 98.4,
    "deepinfra/int4": 99.7,
    "siliconflow/int4": 99.1,
    "atlas-cloud/int4": 98.9,
    "together": 99.8,
    "novita": 97.5,
    "parasail/int4": 99.4,
    "moonshotai/int4": 99.9,
    "fireworks": 99.8,
    "baseten/fp4": 99.6,
    "venice": 88.7,
}


def ep(tag: str, inp: str = "0.000001", out: str = "0.000002", **extra: Any) -> Endpoint:
    """A minimal endpoint; prices are USD per token strings, as OpenRouter sends them."""
    body: dict[str, Any] = {
        "name": f"{tag} | test/model",
        "provider_name": tag.split("/")[0].title(),
        "tag": tag,
        "context_length": 131072,
        "max_completion_tokens": 32768,
        "pricing": {"prompt": inp, "completion": out},
        "quantization": extra.pop("quantization", "fp8"),
        "supported_parameters": ["tools", "max_tokens"],
        "status": 0,
        "uptime_last_30m": 99.0,
    }
    body.update(extra)
    return Endpoint.model_validate(body)


def blend(tag: str, n_in: int = 1, n_out: int = 1) -> Fraction:
    p_in, p_out = (Fraction(Decimal(x)) for x in K25_PRICES[tag])
    return (p_in * n_in + p_out * n_out) / (n_in + n_out)


def fallback_shares(uptimes_pct: list[float]) -> list[float]:
    """uptime_i × Π(1 − uptime_j) over earlier j, normalised to sum to 1 (by hand)."""
    raw, miss = [], 1.0
    for u in uptimes_pct:
        raw.append(miss * u / 100)
        miss *= 1 - u / 100
    return [r / sum(raw) for r in raw]


def cand(d: RouteDecision, tag: str) -> Candidate:
    c = d.candidate(tag)
    assert c is not None, f"{tag} is not a candidate"
    return c


def excl(d: RouteDecision, tag: str) -> Exclusion:
    x = d.exclusion(tag)
    assert x is not None, f"{tag} is not excluded"
    return x


def assert_partition(decision: RouteDecision, endpoints: list[Endpoint]) -> None:
    seen = [c.endpoint.tag for c in decision.candidates] + [
        x.endpoint.tag for x in decision.excluded
    ]
    assert sorted(seen) == sorted(e.tag for e in endpoints)


# ---------------------------------------------------------------------------------------------
# Data sanity: the hand-copied tables are the snapshot
# ---------------------------------------------------------------------------------------------


def test_hand_tables_match_bundled_snapshot() -> None:
    assert len(K25) == 11
    for e in K25:
        assert (e.pricing.prompt_usd_per_m, e.pricing.completion_usd_per_m) == tuple(
            Decimal(x) for x in K25_PRICES[e.tag]
        )
        assert e.throughput_last_30m is not None and e.latency_last_30m is not None
        assert e.throughput_last_30m.p50 == K25_THROUGHPUT[e.tag]
        assert e.latency_last_30m.p50 == K25_LATENCY_MS[e.tag]
        assert e.uptime_last_30m == K25_UPTIME[e.tag]
    assert [e.tag for e in K25 if (e.status or 0) < 0] == ["venice"]
    assert [e.tag for e in K3] == ["fireworks", "alibaba", "fireworks/fast", "morph/fast"]
    assert [e.status for e in K3] == [0, -2, 0, -2]


# ---------------------------------------------------------------------------------------------
# Slug / tag matching (§6.2)
# ---------------------------------------------------------------------------------------------

MATCH_ENDPOINTS = [
    ep("deepinfra"),
    ep("deepinfra/turbo"),
    ep("deepinfra/fp4"),
    ep("openai"),
    ep("openai/priority"),
    ep("google-vertex/us-east5"),
    ep("google-vertex/flex"),
]


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        ("deepinfra", ["deepinfra", "deepinfra/turbo", "deepinfra/fp4"]),
        ("deepinfra/turbo", ["deepinfra/turbo"]),
        ("deepinfra/fp4", ["deepinfra/fp4"]),
        ("deep", []),
        ("deepinfra/", []),
        ("infra", []),
        ("openai", ["openai"]),
        ("openai/priority", ["openai/priority"]),
        ("google-vertex", ["google-vertex/us-east5"]),
        ("google-vertex/flex", ["google-vertex/flex"]),
        ("google-vertex/us-east5", ["google-vertex/us-east5"]),
        # documented assumption "case": display names / mixed case match nothing
        ("DeepInfra", []),
        ("Deepinfra/fp4", []),
        ("OpenAI", []),
        ("Google Vertex", []),
    ],
)
def test_matches(entry: str, expected: list[str]) -> None:
    assert [e.tag for e in MATCH_ENDPOINTS if matches(entry, e)] == expected


def test_case_assumption_is_documented() -> None:
    assert "case" in ASSUMPTIONS and "matches nothing" in ASSUMPTIONS["case"]


def test_display_name_in_ignore_is_silently_dropped_on_k25() -> None:
    d = route({"ignore": ["Fireworks", "BaseTen"]}, K25)
    assert d.excluded == ()
    assert sorted(d.admitted_tags) == sorted(K25_TAGS)


def test_display_name_in_only_admits_nothing() -> None:
    d = route({"only": ["Chutes"]}, K25)
    assert d.candidates == ()
    assert {x.reason for x in d.excluded} == {"only"}
    assert "not matched by only ['Chutes']" in excl(d, "chutes/int4").detail


def test_base_slug_matches_fast_variant_in_k3_capture() -> None:
    d = route({"only": ["fireworks"]}, K3)
    assert sorted(d.admitted_tags) == ["fireworks", "fireworks/fast"]
    assert excl(d, "alibaba").reason == "only"
    assert excl(d, "morph/fast").reason == "only"
    d = route({"only": ["fireworks/fast"]}, K3)
    assert d.admitted_tags == ["fireworks/fast"]


def test_service_tier_needs_to_be_named_in_only() -> None:
    d = route({"only": ["openai", "google-vertex"]}, MATCH_ENDPOINTS)
    assert sorted(d.admitted_tags) == ["google-vertex/us-east5", "openai"]
    assert excl(d, "openai/priority").reason == "only"
    assert excl(d, "google-vertex/flex").reason == "only"
    d = route({"ignore": ["openai"]}, MATCH_ENDPOINTS)
    assert d.candidate("openai/priority") is not None
    assert excl(d, "openai").detail == "ignored by 'openai'"


# ---------------------------------------------------------------------------------------------
# Hard filters
# ---------------------------------------------------------------------------------------------


def test_only_intersected_with_not_ignore() -> None:
    eps = [*MATCH_ENDPOINTS, ep("chutes/int4"), ep("novita")]
    d = route({"only": ["deepinfra", "chutes/int4"], "ignore": ["deepinfra/fp4"]}, eps)
    assert sorted(d.admitted_tags) == ["chutes/int4", "deepinfra", "deepinfra/turbo"]
    assert excl(d, "deepinfra/fp4").reason == "ignore"
    assert excl(d, "deepinfra/fp4").detail == "ignored by 'deepinfra/fp4'"
    assert excl(d, "novita").reason == "only"
    assert_partition(d, eps)


def test_ignore_wins_over_order() -> None:
    d = route({"order": ["fireworks", "chutes/int4"], "ignore": ["fireworks"]}, K25)
    assert d.candidate("fireworks") is None
    assert excl(d, "fireworks").reason == "ignore"
    assert d.mode == "ordered"
    assert d.candidates[0].endpoint.tag == "chutes/int4"
    assert d.candidates[0].role == "ordered"
    assert d.candidates[0].matched_by == "chutes/int4"


QUANT_ENDPOINTS = [
    ep("a/fp4", quantization="fp4"),
    ep("b/nvfp4", quantization="nvfp4"),
    ep("c/mxfp4", quantization="mxfp4"),
    ep("d", quantization=None),
    ep("e", quantization="unknown"),
    ep("f/int4", quantization="int4"),
]


@pytest.mark.parametrize(
    ("quants", "expected"),
    [
        (["fp4"], ["a/fp4"]),
        (["nvfp4"], ["b/nvfp4"]),
        (["fp4", "mxfp4"], ["a/fp4", "c/mxfp4"]),
        (["unknown"], ["e"]),
        (
            ["int4", "fp4", "nvfp4", "mxfp4", "unknown", "fp8", "bf16"],
            ["a/fp4", "b/nvfp4", "c/mxfp4", "e", "f/int4"],
        ),
        (["INT4"], []),
    ],
)
def test_quantizations_exact(quants: list[str], expected: list[str]) -> None:
    d = route({"quantizations": quants}, QUANT_ENDPOINTS)
    assert d.admitted_tags == expected
    assert excl(d, "d").reason == "quantization"
    assert excl(d, "d").detail == f"quantization None not in {quants}"
    assert ASSUMPTIONS["quantization_exact"] in d.notes


def test_quantizations_on_k25() -> None:
    d = route({"quantizations": ["int4"]}, K25)
    assert d.admitted_tags[0] == "chutes/int4"
    assert sorted(d.admitted_tags) == sorted(t for t in K25_TAGS if t.endswith("/int4"))
    assert excl(d, "baseten/fp4").detail == "quantization 'fp4' not in ['int4']"
    assert excl(d, "fireworks").detail == "quantization 'unknown' not in ['int4']"


@pytest.mark.parametrize("limit", [2.2, "2.2", "2.20"])
def test_max_price_is_per_million(limit: float | str) -> None:
    d = route({"max_price": {"completion": limit}}, K25)
    # Chutes at 0.0000022/token = $2.2/M is admitted (equality); DeepInfra at $2.25/M is not.
    assert d.admitted_tags == ["chutes/int4"]
    x = excl(d, "deepinfra/int4")
    assert x.reason == "max_price"
    # the limit is kept as a normalized decimal string: 2.20 reads $2.2
    assert x.detail == "completion $2.25/M tokens > max_price.completion $2.2/M tokens"
    assert {x.reason for x in d.excluded} == {"max_price"}


def test_max_price_just_below_excludes_chutes() -> None:
    d = route({"max_price": {"completion": 2.19}}, K25)
    assert d.candidates == ()
    assert excl(d, "chutes/int4").detail == (
        "completion $2.2/M tokens > max_price.completion $2.19/M tokens"
    )


def test_max_price_prompt_boundary_and_combined() -> None:
    d = route({"max_price": {"prompt": 0.45}}, K25)
    assert sorted(d.admitted_tags) == ["chutes/int4", "deepinfra/int4", "siliconflow/int4"]
    assert excl(d, "atlas-cloud/int4").detail == (
        "prompt $0.5/M tokens > max_price.prompt $0.45/M tokens"
    )
    d = route({"max_price": {"prompt": 0.5, "completion": 2.6}}, K25)
    assert sorted(d.admitted_tags) == [
        "atlas-cloud/int4",
        "chutes/int4",
        "deepinfra/int4",
        "siliconflow/int4",
    ]
    assert excl(d, "together").detail.startswith("completion $2.8/M")


def test_max_price_per_token_value_admits_nothing() -> None:
    d = route({"max_price": {"completion": 0.0000022}}, K25)
    assert d.candidates == ()
    assert len(d.excluded) == 11


def test_max_price_request_and_image_units() -> None:
    def priced(tag: str, **units: str) -> Endpoint:
        return ep(tag, pricing={"prompt": "0.000001", "completion": "0.000002", **units})

    eps = [priced("a", request="0.001", image="0.002"), priced("b", request="0.01"), priced("c")]
    d = route({"max_price": {"request": 0.005}}, eps)
    assert sorted(d.admitted_tags) == ["a", "c"]
    assert excl(d, "b").detail == "request $0.01 per request > max_price.request $0.005 per request"
    d = route({"max_price": {"image": 0.001}}, eps)
    assert excl(d, "a").reason == "max_price"


def test_max_price_audio_is_applied_per_audio_token() -> None:
    # gpt-audio lists $32/M audio input tokens: "0.000032" per token.
    eps = [ep("a", pricing={"prompt": "0.0000025", "completion": "0.00001", "audio": "0.000032"})]
    d = route({"max_price": {"audio": "0.00003"}}, eps)
    assert excl(d, "a").detail == (
        "audio $0.000032 per audio token > max_price.audio $0.00003 per audio token"
    )
    assert ASSUMPTIONS["max_price_audio"] in d.notes
    assert route({"max_price": {"audio": "0.000032"}}, eps).admitted_tags == ["a"]  # equality
    assert ASSUMPTIONS["max_price_audio"] not in route({"max_price": {"prompt": 9}}, eps).notes


@pytest.mark.parametrize(
    ("key", "listed", "limit", "detail"),
    [
        ("prompt", "0.000003", "2.99", "prompt $3/M tokens > max_price.prompt $2.99/M tokens"),
        (
            "completion",
            "0.00002",
            "19",
            "completion $20/M tokens > max_price.completion $19/M tokens",
        ),
        (
            "request",
            "0.02",
            "0.01",
            "request $0.02 per request > max_price.request $0.01 per request",
        ),
        ("image", "0.004", "0.003", "image $0.004 per image > max_price.image $0.003 per image"),
        (
            "audio",
            "0.00004",
            "0",
            "audio $0.00004 per audio token > max_price.audio $0 per audio token",
        ),
    ],
)
def test_every_max_price_key_is_applied(key: str, listed: str, limit: str, detail: str) -> None:
    pricing = {"prompt": "0.000001", "completion": "0.000002", key: listed}
    d = route({"max_price": {key: limit}}, [ep("a", pricing=pricing), ep("unpriced")])
    assert excl(d, "a").detail == detail
    assert d.admitted_tags == ["unpriced"]  # no price listed for the key: nothing to compare


def test_every_max_price_key_is_checked() -> None:
    keys = ["prompt", "completion", "request", "image", "audio"]
    assert list(MaxPrice.model_fields) == keys
    assert list(MAX_PRICE_UNITS) == keys


def test_unknown_max_price_key_is_rejected_with_the_known_ones() -> None:
    with pytest.raises(PolicyError) as info:
        ProviderBlock.parse({"max_price": {"tokens": 1}})
    assert info.value.errors == [
        (
            "provider.max_price.tokens",
            "not a max_price key (use prompt, completion, request, image, audio)",
        )
    ]


@pytest.mark.parametrize(
    ("given", "kept"),
    [(2.2, "2.2"), ("2.20", "2.2"), (2.0, "2"), (100, "100"), (1e-7, "0.0000001"), (" 3 ", "3")],
)
def test_max_price_is_kept_as_a_decimal_string(given: Any, kept: str) -> None:
    blk = ProviderBlock.parse({"max_price": {"completion": given}})
    assert blk.to_request() == {"max_price": {"completion": kept}}
    assert blk.max_price is not None and blk.max_price.limit("completion") == Decimal(kept)


@pytest.mark.parametrize("value", [True, [1], {"a": 1}])
def test_max_price_rejects_non_numbers(value: Any) -> None:
    with pytest.raises(PolicyError) as info:
        ProviderBlock.parse({"max_price": {"image": value}})
    assert info.value.errors == [
        ("provider.max_price.image", f"{value!r} is not a number (USD per million tokens)")
    ]


def test_require_parameters_with_tools() -> None:
    params = RequestParams(parameters=frozenset({"tools", "tool_choice"}))
    d = route({"require_parameters": True}, K25, params)
    assert excl(d, "venice").reason == "require_parameters"
    assert excl(d, "venice").detail == "does not support tool_choice, tools"
    assert len(d.candidates) == 10
    # without require_parameters nothing is excluded for it
    d = route({}, K25, params)
    assert d.excluded == ()


def test_require_parameters_counts_request_parameters_only() -> None:
    # A request body's keys as a client sends them: only temperature and tools are parameters.
    body_keys = {"model", "messages", "stream", "provider", "temperature", "tools"}
    params = RequestParams(parameters=frozenset(body_keys))
    assert params.parameters == {"temperature", "tools"}
    eps = [
        ep("a", supported_parameters=["temperature", "tools"]),
        ep("b", supported_parameters=["tools"]),
    ]
    d = route({"require_parameters": True}, eps, params)
    assert d.admitted_tags == ["a"]
    assert excl(d, "b").detail == "does not support temperature"
    assert ASSUMPTIONS["unknown_parameter"] not in d.notes


def test_require_parameters_counts_an_unknown_key_and_says_so() -> None:
    params = RequestParams(parameters=frozenset({"model", "frobnicate"}))
    d = route({"require_parameters": True}, [ep("a")], params)
    assert excl(d, "a").detail == "does not support frobnicate"
    assert ASSUMPTIONS["unknown_parameter"] in d.notes
    # without require_parameters no note: nothing relied on it
    assert ASSUMPTIONS["unknown_parameter"] not in route({}, [ep("a")], params).notes


def test_request_params_accepts_any_iterable_of_keys() -> None:
    params = RequestParams(parameters=["stream", "tools", "tools"])  # type: ignore[arg-type]
    assert params.parameters == frozenset({"tools"})
    assert params == RequestParams(parameters=frozenset({"tools"}))


def test_max_tokens_above_max_completion_tokens() -> None:
    d = route({}, K25, RequestParams(max_tokens=65536))
    assert sorted(d.admitted_tags) == ["siliconflow/int4", "venice"]
    assert excl(d, "chutes/int4").reason == "max_tokens"
    assert excl(d, "chutes/int4").detail == "max_tokens 65536 > its max 65535"
    d = route({}, K25, RequestParams(max_tokens=65535))
    assert d.excluded == ()


def test_context_length() -> None:
    over = RequestParams(prompt_tokens=200_000, max_tokens=62_145)  # 262145 > 262144
    d = route({}, K25, over)
    assert d.candidates == ()
    assert {x.reason for x in d.excluded} == {"context_length"}
    assert excl(d, "fireworks").detail == "request exceeds its context 262144"
    d = route({}, K25, RequestParams(prompt_tokens=200_000, max_tokens=62_144))
    assert d.excluded == ()
    d = route({}, K3, RequestParams(prompt_tokens=300_000))
    assert d.excluded == ()  # K3 has 1M context


# ---------------------------------------------------------------------------------------------
# order / allow_fallbacks
# ---------------------------------------------------------------------------------------------

ORDER_ENDPOINTS = [
    ep("deepinfra", "0.0000005", "0.000002", uptime_last_30m=99.0),  # blended 1.25
    ep("deepinfra/turbo", "0.000001", "0.000004", uptime_last_30m=95.0),  # 2.5
    ep("deepinfra/fp4", "0.0000003", "0.0000013", uptime_last_30m=90.0),  # 0.8
    ep("chutes/int4", "0.0000004", "0.0000016", uptime_last_30m=97.0),  # 1.0
    ep("novita", "0.0000006", "0.0000024", uptime_last_30m=98.0),  # 1.5
    ep("together", "0.0000002", "0.0000008", uptime_last_30m=80.0),  # 0.5
    ep("moonshotai/int4", "0.000002", "0.000008", uptime_last_30m=99.9),  # 5.0
]


def test_order_entries_then_base_slug_expansion_then_fallbacks_by_price() -> None:
    d = route({"order": ["moonshotai/int4", "deepinfra", "chutes/int4"]}, ORDER_ENDPOINTS)
    assert d.mode == "ordered"
    assert d.admitted_tags == [
        "moonshotai/int4",
        "deepinfra/fp4",  # base slug expands cheapest first: 0.8, 1.25, 2.5
        "deepinfra",
        "deepinfra/turbo",
        "chutes/int4",
        "together",  # fallbacks by blended price: 0.5, 1.5
        "novita",
    ]
    assert [c.role for c in d.candidates] == ["ordered"] * 5 + ["fallback"] * 2
    assert [c.matched_by for c in d.candidates] == [
        "moonshotai/int4",
        "deepinfra",
        "deepinfra",
        "deepinfra",
        "chutes/int4",
        None,
        None,
    ]
    assert [c.position for c in d.candidates] == [1, 2, 3, 4, 5, 6, 7]
    expected = fallback_shares([99.9, 90.0, 99.0, 95.0, 97.0, 80.0, 98.0])
    assert [c.weight for c in d.candidates] == pytest.approx(expected, rel=1e-12)
    assert math.fsum(c.weight for c in d.candidates) == pytest.approx(1.0)
    # by hand: first takes 0.999 of 1 − Π(1 − u); second 0.001·0.9
    total = 1 - 0.001 * 0.1 * 0.01 * 0.05 * 0.03 * 0.2 * 0.02
    assert d.candidates[0].weight == pytest.approx(0.999 / total)
    assert d.candidates[1].weight == pytest.approx(0.001 * 0.9 / total)
    assert ASSUMPTIONS["fallback_share"] in d.notes
    assert d.excluded == ()


def test_order_duplicate_and_overlapping_entries_place_each_endpoint_once() -> None:
    d = route({"order": ["deepinfra/turbo", "deepinfra", "deepinfra/turbo"]}, ORDER_ENDPOINTS)
    assert d.admitted_tags[:3] == ["deepinfra/turbo", "deepinfra/fp4", "deepinfra"]
    assert [c.matched_by for c in d.candidates[:3]] == ["deepinfra/turbo", "deepinfra", "deepinfra"]
    assert_partition(d, ORDER_ENDPOINTS)


def test_allow_fallbacks_false_excludes_the_rest() -> None:
    d = route(
        {"order": ["chutes/int4", "deepinfra/fp4"], "allow_fallbacks": False}, ORDER_ENDPOINTS
    )
    assert d.admitted_tags == ["chutes/int4", "deepinfra/fp4"]
    assert sorted(x.endpoint.tag for x in d.excluded) == [
        "deepinfra",
        "deepinfra/turbo",
        "moonshotai/int4",
        "novita",
        "together",
    ]
    assert {x.reason for x in d.excluded} == {"not_in_order"}
    assert excl(d, "novita").detail == "not in order and allow_fallbacks is false"
    assert [c.weight for c in d.candidates] == pytest.approx(fallback_shares([97.0, 90.0]))


def test_order_on_k25_matches_checked_in_policy_shares() -> None:
    order = ["chutes/int4", "deepinfra/int4", "siliconflow/int4"]
    d = route({"order": order, "quantizations": ["int4"]}, K25)
    assert d.admitted_tags == [
        *order,
        "atlas-cloud/int4",  # fallbacks by blended price: 1.55, 1.675, 1.8
        "parasail/int4",
        "moonshotai/int4",
    ]
    ups = [K25_UPTIME[t] for t in d.admitted_tags]
    assert [c.weight for c in d.candidates] == pytest.approx(fallback_shares(ups))
    assert round(d.candidates[0].weight, 3) == 0.984
    assert round(d.candidates[1].weight, 3) == 0.016


def test_order_with_sort_ranks_fallbacks_by_sort_key() -> None:
    d = route({"order": ["chutes/int4"], "sort": "throughput"}, K25)
    assert d.mode == "ordered"
    rest = sorted((t for t in K25_TAGS if t != "chutes/int4"), key=lambda t: -K25_THROUGHPUT[t])
    assert d.admitted_tags == ["chutes/int4", *rest]


# ---------------------------------------------------------------------------------------------
# sort
# ---------------------------------------------------------------------------------------------


def _by_hand(key: str) -> list[str]:
    if key == "price":
        return sorted(K25_TAGS, key=lambda t: (blend(t), t))
    if key == "throughput":
        return sorted(K25_TAGS, key=lambda t: (-K25_THROUGHPUT[t], t))
    return sorted(K25_TAGS, key=lambda t: (K25_LATENCY_MS[t], t))


@pytest.mark.parametrize(
    ("sort", "key", "literal"),
    [
        (
            "price",
            "price",
            [
                "chutes/int4",
                "deepinfra/int4",
                "siliconflow/int4",
                "atlas-cloud/int4",
                "together",
                "parasail/int4",
                "baseten/fp4",
                "fireworks",
                "moonshotai/int4",
                "novita",
                "venice",
            ],
        ),
        (
            "throughput",
            "throughput",
            [
                "baseten/fp4",
                "fireworks",
                "together",
                "moonshotai/int4",
                "deepinfra/int4",
                "parasail/int4",
                "atlas-cloud/int4",
                "chutes/int4",
                "novita",
                "siliconflow/int4",
                "venice",
            ],
        ),
        (
            {"by": "throughput", "partition": "none"},
            "throughput",
            [
                "baseten/fp4",
                "fireworks",
                "together",
                "moonshotai/int4",
                "deepinfra/int4",
                "parasail/int4",
                "atlas-cloud/int4",
                "chutes/int4",
                "novita",
                "siliconflow/int4",
                "venice",
            ],
        ),
        (
            "latency",
            "latency",
            [
                "fireworks",
                "baseten/fp4",
                "together",
                "moonshotai/int4",
                "deepinfra/int4",
                "parasail/int4",
                "chutes/int4",
                "atlas-cloud/int4",
                "novita",
                "siliconflow/int4",
                "venice",
            ],
        ),
    ],
)
def test_sort_orders_like_by_hand(sort: Any, key: str, literal: list[str]) -> None:
    d = route({"sort": sort}, K25)
    assert d.mode == "sorted"
    assert d.admitted_tags == _by_hand(key) == literal
    assert {c.role for c in d.candidates} == {"sorted"}
    ups = [K25_UPTIME[t] for t in literal]
    assert [c.weight for c in d.candidates] == pytest.approx(fallback_shares(ups))
    assert math.fsum(d.weights.values()) == pytest.approx(1.0)


def test_sort_object_form_parses_to_sortspec() -> None:
    blk = ProviderBlock.parse({"sort": {"by": "latency", "partition": "none"}})
    assert blk.sort == SortSpec(by="latency", partition="none")
    assert blk.sort_key == "latency"
    assert route(blk, K25).admitted_tags == route({"sort": "latency"}, K25).admitted_tags


def test_sort_price_uses_request_token_mix() -> None:
    eps = [
        ep("cheap-in", "0.0000001", "0.000005"),  # 1:1 → 2.55; 9:1 → 0.59
        ep("cheap-out", "0.000001", "0.000002"),  # 1:1 → 1.5; 9:1 → 1.1
    ]
    assert route({"sort": "price"}, eps).admitted_tags == ["cheap-out", "cheap-in"]
    mix = RequestParams(prompt_tokens=9000, output_tokens=1000)
    assert route({"sort": "price"}, eps, mix).admitted_tags == ["cheap-in", "cheap-out"]


@pytest.mark.parametrize("key", ["throughput", "latency"])
def test_sort_endpoints_without_stats_last(key: str) -> None:
    eps = [
        ep("nostats-a", latency_last_30m=None, throughput_last_30m=None),
        ep("slow", latency_last_30m={"p50": 3000}, throughput_last_30m={"p50": 10}),
        ep("nostats-b", latency_last_30m={"p50": None}, throughput_last_30m={"p50": None}),
        ep("fast", latency_last_30m={"p50": 500}, throughput_last_30m={"p50": 100}),
    ]
    d = route({"sort": key}, eps)
    assert d.admitted_tags == ["fast", "slow", "nostats-a", "nostats-b"]
    assert ASSUMPTIONS["missing_stats"] in d.notes


def test_sort_on_k3_capture() -> None:
    assert route({"sort": "latency"}, K3).admitted_tags == [
        "fireworks/fast",  # 814.5 ms
        "fireworks",  # 2687
        "alibaba",  # 9250
        "morph/fast",  # 9612
    ]
    assert route({"sort": "throughput"}, K3).admitted_tags == [
        "fireworks/fast",  # 86
        "fireworks",  # 35
        "morph/fast",  # 19
        "alibaba",  # 11
    ]


# ---------------------------------------------------------------------------------------------
# Default load balancing (§6.3)
# ---------------------------------------------------------------------------------------------


def _inverse_square_weights(tags: list[str], n_in: int = 1, n_out: int = 1) -> dict[str, float]:
    inv = {t: 1 / blend(t, n_in, n_out) ** 2 for t in tags}
    total = sum(inv.values())
    return {t: float(v / total) for t, v in inv.items()}


def test_load_balancing_weights_inverse_price_squared_k25() -> None:
    d = route(None, K25)
    assert d.mode == "load_balanced"
    stable = [t for t in K25_TAGS if t != "venice"]
    expected = _inverse_square_weights(stable)
    for t in stable:
        assert d.weights[t] == pytest.approx(expected[t], rel=1e-9)
        assert cand(d, t).role == "balanced"
    assert d.weights["venice"] == 0.0
    assert d.candidates[-1].endpoint.tag == "venice"
    assert d.candidates[-1].role == "fallback"
    assert math.fsum(d.weights.values()) == pytest.approx(1.0)
    # ratios exactly (1.35/1.325)² between deepinfra and chutes
    ratio = d.weights["chutes/int4"] / d.weights["deepinfra/int4"]
    assert ratio == pytest.approx((1.35 / 1.325) ** 2)
    # highest weight first; ties by tag
    assert d.admitted_tags[:3] == ["chutes/int4", "deepinfra/int4", "siliconflow/int4"]
    assert ASSUMPTIONS["balance_price"] in d.notes
    assert ASSUMPTIONS["stable"] in d.notes


def test_load_balancing_with_token_mix() -> None:
    params = RequestParams(prompt_tokens=3000, output_tokens=1000)
    d = route({}, K25, params)
    stable = [t for t in K25_TAGS if t != "venice"]
    expected = _inverse_square_weights(stable, 3, 1)
    assert d.weights == pytest.approx({**expected, "venice": 0.0}, rel=1e-9)
    # chutes: (3·0.45 + 2.2)/4 = 0.8875 $/M
    assert blended_price_usd_per_m(K25[0], params) == Decimal("0.8875")
    assert blended_price_usd_per_m(K25[0]) == Decimal("1.325")


def test_load_balancing_k3_capture() -> None:
    d = route({}, K3)
    # fireworks (3+15)/2 = 9, fireworks/fast (4.5+22.5)/2 = 13.5 → 1/81 : 1/182.25
    w_fw = (1 / 81) / (1 / 81 + 1 / 182.25)
    assert d.admitted_tags == ["fireworks", "fireworks/fast", "alibaba", "morph/fast"]
    assert d.weights["fireworks"] == pytest.approx(w_fw)
    assert d.weights["fireworks"] == pytest.approx(9 / 13)
    assert d.weights["fireworks/fast"] == pytest.approx(4 / 13)
    assert d.weights["alibaba"] == d.weights["morph/fast"] == 0.0
    assert [c.role for c in d.candidates] == ["balanced", "balanced", "fallback", "fallback"]


def test_load_balancing_everything_degraded_still_routes() -> None:
    eps = [
        ep("a", "0.000002", "0.000002", status=-2, uptime_last_30m=80.0),
        ep("b", "0.000001", "0.000001", status=-5, uptime_last_30m=50.0),
    ]
    d = route({}, eps)
    assert d.admitted_tags == ["b", "a"]  # by price
    assert [c.role for c in d.candidates] == ["fallback", "fallback"]
    assert [c.weight for c in d.candidates] == pytest.approx(fallback_shares([50.0, 80.0]))
    assert d.candidates[0].weight > 0
    assert math.fsum(d.weights.values()) == pytest.approx(1.0)


def test_load_balancing_all_free_spreads_evenly() -> None:
    d = route({}, [ep("a", "0", "0"), ep("b", "0", "0"), ep("c", "0", "0")])
    assert d.weights == pytest.approx({"a": 1 / 3, "b": 1 / 3, "c": 1 / 3})


def test_load_balancing_free_endpoint_is_not_starved() -> None:
    d = route({}, [ep("free", "0", "0"), ep("paid", "0.000001", "0.000001")])
    assert d.weights["free"] > d.weights["paid"]


# ---------------------------------------------------------------------------------------------
# preferred_max_latency / preferred_min_throughput: deprioritize, never exclude
# ---------------------------------------------------------------------------------------------


def test_preferred_max_latency_is_seconds_and_deprioritizes() -> None:
    d = route({"preferred_max_latency": 2}, K25)  # 2 s = 2000 ms
    assert d.excluded == ()
    slow = {"siliconflow/int4", "novita"}  # 2410, 2150 ms; atlas at 1990 ms is under
    for t in slow:
        assert cand(d, t).role == "fallback"
        assert d.weights[t] == 0.0
    fast = [t for t in K25_TAGS if t not in slow | {"venice"}]
    assert d.weights == pytest.approx(
        {**_inverse_square_weights(fast), **dict.fromkeys(slow | {"venice"}, 0.0)}
    )
    # the deprioritized come after all preferred ones, ranked by price
    assert d.admitted_tags[-3:] == ["siliconflow/int4", "novita", "venice"]


def test_preferred_max_latency_in_sorted_mode() -> None:
    d = route({"sort": "price", "preferred_max_latency": 2}, K25)
    assert d.excluded == ()
    assert d.admitted_tags == [
        "chutes/int4",
        "deepinfra/int4",
        "atlas-cloud/int4",
        "together",
        "parasail/int4",
        "baseten/fp4",
        "fireworks",
        "moonshotai/int4",
        "siliconflow/int4",  # deprioritized (2410 ms, 2150 ms, 3900 ms), then by price
        "novita",
        "venice",
    ]


def test_preferred_max_latency_k3_seconds_not_ms() -> None:
    # 1 s: fireworks (2687 ms) deprioritized, fireworks/fast (814.5 ms) preferred
    d = route({"preferred_max_latency": 1}, K3)
    assert d.excluded == ()
    assert d.weights["fireworks/fast"] == 1.0
    assert d.weights["fireworks"] == 0.0
    assert d.admitted_tags[0] == "fireworks/fast"
    # 3 s admits both as preferred
    d = route({"preferred_max_latency": 3}, K3)
    assert d.weights["fireworks"] == pytest.approx(9 / 13)


def test_preferred_min_throughput_deprioritizes() -> None:
    d = route({"preferred_min_throughput": 30}, K25)
    assert d.excluded == ()
    low = {"siliconflow/int4", "novita", "venice"}  # 27, 29, 18 tok/s
    assert {t for t, w in d.weights.items() if w == 0.0} == low
    assert set(d.admitted_tags[-3:]) == low
    d = route({"preferred_min_throughput": {"p50": 30}}, K25)
    assert {t for t, w in d.weights.items() if w == 0.0} == low


@pytest.mark.parametrize(
    "block",
    [
        {"preferred_max_latency": {"p90": 5}},  # fireworks p90 5954 ms > 5 s
        {"preferred_min_throughput": {"p90": 100}},  # fireworks p90 47 tok/s < 100
    ],
)
def test_preferred_object_form_checks_every_percentile(block: dict[str, Any]) -> None:
    d = route(block, K3)
    assert d.weights["fireworks"] == 0.0
    assert d.weights["fireworks/fast"] == 1.0


# ---------------------------------------------------------------------------------------------
# tools soft preference
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("block", [{}, {"sort": "price"}])
def test_tools_request_prefers_tool_capable_endpoints(block: dict[str, Any]) -> None:
    eps = [
        ep("notools", "0.0000005", "0.0000005", supported_parameters=["max_tokens"]),
        ep("tools", "0.000001", "0.000001", supported_parameters=["tools", "max_tokens"]),
    ]
    d = route(block, eps, RequestParams(parameters=frozenset({"tools"})))
    assert d.admitted_tags[0] == "tools"


def test_tools_soft_preference_in_order_fallbacks_ties_only() -> None:
    eps = [
        ep("notools", supported_parameters=["max_tokens"]),
        ep("tools", supported_parameters=["tools"]),
    ]
    d = route({}, eps, RequestParams(parameters=frozenset({"tools"})))
    assert d.excluded == ()
    assert sorted(d.admitted_tags) == ["notools", "tools"]


# ---------------------------------------------------------------------------------------------
# ProviderBlock.parse / to_request
# ---------------------------------------------------------------------------------------------


PARSE_ERRORS = [
    ({"bogus": 1}, "provider.bogus"),
    ({"order": ["chutes", 1]}, "provider.order[1]"),
    ({"only": "chutes"}, "provider.only"),
    ({"ignore": [None]}, "provider.ignore[0]"),
    ({"allow_fallbacks": "maybe"}, "provider.allow_fallbacks"),
    ({"data_collection": "never"}, "provider.data_collection"),
    ({"max_price": {"completion": 2, "tokens": 1}}, "provider.max_price.tokens"),
    ({"max_price": {"prompt": [1]}}, "provider.max_price.prompt"),
    ({"sort": "cheapest"}, "provider.sort"),
    ({"quantizations": [""]}, "provider.quantizations"),
    ({"preferred_max_latency": "2s"}, "provider.preferred_max_latency"),
]


@pytest.mark.parametrize(("data", "loc"), PARSE_ERRORS)
def test_parse_rejects_and_names_the_key(data: dict[str, Any], loc: str) -> None:
    with pytest.raises(PolicyError) as info:
        ProviderBlock.parse(data, source="spec.yaml")
    key = loc.removeprefix("provider.")
    locs = [lo for lo, _ in info.value.errors]
    assert all(lo.startswith("provider.") for lo in locs), locs
    assert any(key in lo for lo in locs), locs
    assert str(info.value).startswith("spec.yaml: invalid provider block")


@pytest.mark.parametrize(
    ("data", "loc"), [c for c in PARSE_ERRORS if c[1] != "provider.max_price.prompt"]
)
def test_parse_error_loc_is_exact(data: dict[str, Any], loc: str) -> None:
    with pytest.raises(PolicyError) as info:
        ProviderBlock.parse(data)
    assert loc in [lo for lo, _ in info.value.errors]


@pytest.mark.parametrize(
    ("data", "locs"),
    [
        ({"max_price": {"prompt": [1]}}, {"provider.max_price.prompt"}),
        ({"preferred_max_latency": "2s"}, {"provider.preferred_max_latency"}),
        ({"sort": {"by": "speed"}}, {"provider.sort", "provider.sort.by"}),
    ],
)
def test_parse_error_loc_has_no_union_member_tags(data: dict[str, Any], locs: set[str]) -> None:
    with pytest.raises(PolicyError) as info:
        ProviderBlock.parse(data)
    assert {lo for lo, _ in info.value.errors} <= locs


def test_parse_unknown_key_message() -> None:
    with pytest.raises(PolicyError) as info:
        ProviderBlock.parse({"order": ["chutes"], "bogus": 1})
    [(loc, msg)] = info.value.errors
    assert loc.endswith(".bogus")
    assert (
        msg
        == "not a key OpenRouter accepts in provider (see https://openrouter.ai/docs/features/provider-routing)"
    )


@pytest.mark.parametrize("data", [["order"], "order: [x]", None, 3])
def test_parse_rejects_non_mapping(data: Any) -> None:
    with pytest.raises(PolicyError, match="must be a mapping"):
        ProviderBlock.parse(data)


def test_route_rejects_bad_block() -> None:
    with pytest.raises(PolicyError):
        route({"sort": "cheapest"}, K25)


@pytest.mark.parametrize("value", ["abc", "$2.2", float("nan")])
def test_parse_rejects_non_numeric_max_price(value: Any) -> None:
    with pytest.raises(PolicyError) as info:
        ProviderBlock.parse({"max_price": {"completion": value}})
    assert info.value.errors[0][0] == "provider.max_price.completion"


@pytest.mark.parametrize(
    "data",
    [
        {},
        {"order": ["chutes/int4", "deepinfra"], "allow_fallbacks": False},
        {"only": ["fireworks"], "ignore": ["fireworks/fast"], "quantizations": ["int4", "fp4"]},
        {"sort": "throughput", "require_parameters": True, "data_collection": "deny", "zdr": True},
        {"sort": {"by": "price", "partition": "none"}},
        {"sort": {"by": "latency"}},
        {"max_price": {"prompt": "0.5", "completion": "2.2", "request": "0.01", "audio": "0"}},
        {"options": {"deepinfra": {"x": None, "y": [1, {"z": None}]}, "anthropic/2": {}}},
        {"preferred_max_latency": 2.5, "preferred_min_throughput": {"p50": 30.0, "p90": 10.0}},
        {"enforce_distillable_text": False},
    ],
)
def test_to_request_round_trips(data: dict[str, Any]) -> None:
    blk = ProviderBlock.parse(data)
    out = blk.to_request()
    assert out == data
    assert ProviderBlock.parse(out) == blk
    assert json.loads(json.dumps(out)) == out


def test_data_policy_fields_are_noted_not_evaluated() -> None:
    d = route({"data_collection": "deny", "zdr": True}, K25)
    assert d.excluded == ()
    assert ASSUMPTIONS["data_policy"] in d.notes


def test_sort_exacto_orders_by_quality_not_price() -> None:
    """OPENROUTER.md 16: sort "exacto" asks for Auto Exacto's order on every request."""
    d = route({"sort": "exacto"}, K25)
    assert d.mode == "exacto"
    assert ASSUMPTIONS["auto_exacto"] in d.notes
    assert d.admitted_tags == route({"sort": "throughput"}, K25).admitted_tags
    assert d.admitted_tags != route({"sort": "price"}, K25).admitted_tags


def test_rows_with_tools_are_ordered_by_auto_exacto_unless_sort_price() -> None:
    tools = RequestParams(parameters=frozenset({"tools", "messages"}))
    plain = route({}, K25)
    d = route({}, K25, tools)
    assert plain.mode == "load_balanced" and d.mode == "exacto"
    # tool-capable endpoints first, then by throughput: not the 1/price² weights
    capable = [e.tag for e in K25 if "tools" in e.supported_parameters]
    assert d.admitted_tags[: len(capable)] == sorted(
        capable,
        key=lambda t: (-(next(e for e in K25 if e.tag == t).throughput_last_30m.p50 or 0), t),  # type: ignore[union-attr]
    )
    assert d.weights != plain.weights
    assert route({"sort": "price"}, K25, tools).mode == "sorted"
    assert (
        route({"sort": "price"}, K25, tools).admitted_tags
        == route({"sort": "price"}, K25).admitted_tags
    )
    ordered = route({"order": ["chutes/int4"]}, K25, tools)
    assert ordered.mode == "ordered" and ordered.admitted_tags[0] == "chutes/int4"
    assert tool_routing({}).startswith("requests with tools are ordered by Auto Exacto")
    assert tool_routing({"sort": "price"}).startswith("requests with tools keep price order")
    assert tool_routing({"sort": "exacto"}).startswith("every request, with tools or not")


# ---------------------------------------------------------------------------------------------
# Property: every endpoint exactly once; filters hold; deterministic
# ---------------------------------------------------------------------------------------------

_ENTRIES = sorted({*K25_TAGS, *(e.slug for e in K25), "groq", "deepinfra/fp4", "Fireworks"})
_QUANTS = ["int4", "fp4", "unknown", "fp8", "nvfp4", "bf16"]
_PRICES = [0.4, 0.45, 0.5, 0.55, 0.6, 0.75, 2.0, 2.2, 2.25, 2.6, 2.8, 3.0, 3.75, 10.0]

_blocks = st.fixed_dictionaries(
    {},
    optional={
        "order": st.lists(st.sampled_from(_ENTRIES), max_size=5),
        "only": st.lists(st.sampled_from(_ENTRIES), min_size=1, max_size=6),
        "ignore": st.lists(st.sampled_from(_ENTRIES), max_size=4),
        "quantizations": st.lists(st.sampled_from(_QUANTS), min_size=1, max_size=3, unique=True),
        "max_price": st.fixed_dictionaries(
            {},
            optional={"prompt": st.sampled_from(_PRICES), "completion": st.sampled_from(_PRICES)},
        ),
        "allow_fallbacks": st.booleans(),
        "require_parameters": st.booleans(),
        "sort": st.sampled_from(
            ["price", "throughput", "latency", "exacto", {"by": "throughput", "partition": "none"}]
        ),
        "preferred_max_latency": st.sampled_from([1, 2, 2.5, 5]),
        "preferred_min_throughput": st.sampled_from([10, 30, 50]),
    },
)
_params = st.builds(
    RequestParams,
    max_tokens=st.sampled_from([None, 1000, 65535, 65536]),
    parameters=st.sampled_from(
        [frozenset(), frozenset({"tools"}), frozenset({"model", "messages", "stream", "tools"})]
    ),
    prompt_tokens=st.sampled_from([None, 1000, 200_000]),
    output_tokens=st.sampled_from([None, 500]),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(block=_blocks, params=_params)
def test_property_route_partitions_and_respects_filters(
    block: dict[str, Any], params: RequestParams
) -> None:
    d = route(block, K25, params)
    assert_partition(d, K25)
    assert len(d.candidates) + len(d.excluded) == len(K25)
    assert [c.position for c in d.candidates] == list(range(1, len(d.candidates) + 1))
    if d.candidates:
        assert math.fsum(c.weight for c in d.candidates) == pytest.approx(1.0)
        assert all(0.0 <= c.weight <= 1.0 for c in d.candidates)
    for e in d.admitted:
        assert not any(matches(i, e) for i in block.get("ignore", []))
        if "only" in block:
            assert any(matches(o, e) for o in block["only"])
        if "quantizations" in block:
            assert e.quantization in block["quantizations"]
        for key in ("prompt", "completion"):
            limit = block.get("max_price", {}).get(key)
            if limit is not None:
                price = getattr(e.pricing, f"{key}_usd_per_m")
                assert price <= Decimal(str(limit))
        if block.get("require_parameters"):
            assert params.parameters <= set(e.supported_parameters)
    if block.get("order") and block.get("allow_fallbacks") is False:
        assert all(c.role == "ordered" for c in d.candidates)
    assert route(block, K25, params) == d
    assert route(ProviderBlock.parse(block), list(K25), params) == d


# ---------------------------------------------------------------------------------------------
# Service tiers: the endpoint's service_tier field decides, the tag suffix only without it
# ---------------------------------------------------------------------------------------------


def test_declared_tier_is_not_matched_by_base_slug() -> None:
    # fireworks/fast sold as the priority tier: the base slug no longer reaches it.
    eps = [ep("fireworks", service_tier=None), ep("fireworks/fast", service_tier="priority")]
    assert route({"only": ["fireworks"]}, eps).admitted_tags == ["fireworks"]
    assert route({"only": ["fireworks/fast"]}, eps).admitted_tags == ["fireworks/fast"]
    d = route({"ignore": ["fireworks"]}, eps)
    assert d.admitted_tags == ["fireworks/fast"]
    assert excl(d, "fireworks").detail == "ignored by 'fireworks'"


def test_declared_null_tier_overrides_the_suffix() -> None:
    # a /priority tag that declares itself standard is matched by its base slug
    eps = [ep("openai", service_tier=None), ep("openai/priority", service_tier=None)]
    assert sorted(route({"only": ["openai"]}, eps).admitted_tags) == ["openai", "openai/priority"]


@pytest.mark.parametrize(
    ("tag", "fields", "tier"),
    [
        ("fireworks/fast", {"service_tier": "priority"}, "priority"),
        ("google-vertex/flex", {"service_tier": "flex"}, "flex"),
        ("groq/turbo", {"service_tier": "ultrafast"}, "ultrafast"),
        ("openai/priority", {"service_tier": None}, None),
        ("openai/priority", {}, "priority"),  # older data: the suffix decides
        ("google-vertex/flex", {}, "flex"),
        ("fireworks/fast", {}, None),
        ("deepinfra", {}, None),
        ("openai/priority", {"service_tier": {"odd": "shape"}}, "priority"),  # unreadable: suffix
        ("openai", {"service_tier": ""}, None),
    ],
)
def test_service_tier(tag: str, fields: dict[str, Any], tier: str | None) -> None:
    assert service_tier(ep(tag, **fields)) == tier


def test_base_slug_skips_declared_tiers_in_order_and_lint_counts() -> None:
    eps = [ep("groq"), ep("groq/turbo", service_tier="ultrafast")]
    d = route({"order": ["groq"], "allow_fallbacks": False}, eps)
    assert d.admitted_tags == ["groq"]
    assert excl(d, "groq/turbo").reason == "not_in_order"


# ---------------------------------------------------------------------------------------------
# provider.options: accepted, passed through untouched, never routed on
# ---------------------------------------------------------------------------------------------

OPTIONS = {"deepinfra": {"cache": None, "nested": {"a": [1, None]}}, "google-vertex": {}}


def test_options_are_accepted_and_passed_through_untouched() -> None:
    blk = ProviderBlock.parse({"options": OPTIONS, "sort": "price"})
    assert blk.to_request() == {"options": OPTIONS, "sort": "price"}
    assert route(blk, K25) == route({"sort": "price"}, K25)


@pytest.mark.parametrize(
    ("options", "loc"),
    [({"deepinfra": "fast"}, "provider.options.deepinfra"), (["deepinfra"], "provider.options")],
)
def test_options_must_map_slugs_to_mappings(options: Any, loc: str) -> None:
    with pytest.raises(PolicyError) as info:
        ProviderBlock.parse({"options": options})
    assert [lo for lo, _ in info.value.errors] == [loc]


def test_compiler_passes_options_through() -> None:
    from openrouter_probe.policy.compiler import compile_policy
    from openrouter_probe.policy.spec import parse_spec

    spec = {"model": "moonshotai/kimi-k2.5", "options": OPTIONS}
    compiled = compile_policy(parse_spec(spec), bundled_snapshot())
    assert compiled.provider.to_request()["options"] == OPTIONS
    assert compiled.to_dict()["provider"]["options"] == OPTIONS
    # options count in the spec's hash; a spec without them keeps the hash it had before the key
    # existed (the golden files' provenance.spec.sha256 pin that)
    assert parse_spec(spec).sha256() != parse_spec({"model": "moonshotai/kimi-k2.5"}).sha256()


# ---------------------------------------------------------------------------------------------
# OpenRouter's official SDK (dev dependency) as the reference for field lists
# ---------------------------------------------------------------------------------------------


def _sdk_keys(model: Any) -> set[str]:
    return {f.alias or name for name, f in model.model_fields.items()}


def test_every_sdk_provider_preferences_field_is_known() -> None:
    pytest.importorskip("openrouter.components", reason="the openrouter SDK is a dev extra")
    from openrouter.components import ProviderPreferences
    from openrouter.components.providerpreferences import MaxPrice as SDKMaxPrice

    assert _sdk_keys(ProviderPreferences) == set(ProviderBlock.model_fields)
    assert _sdk_keys(SDKMaxPrice) == set(MaxPrice.model_fields) == set(MAX_PRICE_UNITS)


def test_request_parameters_and_routing_keys_cover_the_sdk_chat_request() -> None:
    import typing

    pytest.importorskip("openrouter.components", reason="the openrouter SDK is a dev extra")
    from openrouter.components import ChatRequest
    from openrouter.components.parameter import Parameter

    literal = next(a for a in typing.get_args(Parameter) if typing.get_origin(a) is typing.Literal)
    assert set(typing.get_args(literal)) == REQUEST_PARAMETERS
    body = _sdk_keys(ChatRequest)
    assert body <= REQUEST_PARAMETERS | NON_PARAMETER_KEYS, (
        body - REQUEST_PARAMETERS - NON_PARAMETER_KEYS
    )
    assert not REQUEST_PARAMETERS & NON_PARAMETER_KEYS
    for key in ("stream", "model", "messages", "provider"):
        assert key in NON_PARAMETER_KEYS


COMPILED = sorted(
    [
        *(ROOT / "policies").glob("*.yaml"),
        *(ROOT / "tests" / "data" / "policies" / "valid").glob("*.expected.yaml"),
    ]
)


@pytest.mark.parametrize(
    "path", [p for p in COMPILED if not p.name.endswith(".spec.yaml")], ids=lambda p: p.name
)
def test_compiled_policies_validate_against_sdk_provider_preferences(path: Any) -> None:
    import yaml

    pytest.importorskip("openrouter.components", reason="the openrouter SDK is a dev extra")
    from openrouter.components import ProviderPreferences

    provider = yaml.safe_load(path.read_text(encoding="utf-8"))["provider"]
    # the SDK ignores unknown keys, so check them first, then every value's type
    assert set(provider) <= _sdk_keys(ProviderPreferences)
    sdk = ProviderPreferences.model_validate(provider)
    assert sdk.model_dump(mode="json", by_alias=True, exclude_none=True) == provider


# ---------------------------------------------------------------------------------------------
# Branches a wrong decision would slip through (found by mutation testing)
# ---------------------------------------------------------------------------------------------


def test_sort_price_puts_an_unpriced_endpoint_last() -> None:
    eps = [
        ep("unpriced", pricing={}),
        ep("dear", "0.000003", "0.000003"),
        ep("cheap", "0.000001", "0.000001"),
    ]
    d = route({"sort": "price"}, eps)
    assert d.admitted_tags == ["cheap", "dear", "unpriced"]
    assert [c.role for c in d.candidates] == ["sorted", "sorted", "sorted"]
    assert [c.weight for c in d.candidates] == pytest.approx(fallback_shares([99.0] * 3))
    assert ASSUMPTIONS["missing_stats"] not in d.notes  # price sorts need no stats
    assert blended_price_usd_per_m(eps[0]) is None
    # ordered routes rank unpriced fallbacks last too
    d = route({"order": ["dear"]}, eps)
    assert d.admitted_tags == ["dear", "cheap", "unpriced"]
    assert [c.matched_by for c in d.candidates] == ["dear", None, None]


def test_ordered_route_counts_missing_uptime_as_up_and_zero_uptime_as_down() -> None:
    eps = [
        ep("a", uptime_last_30m=None),  # no stats: counts as 100% up
        ep("b", uptime_last_30m=50.0),
    ]
    d = route({"order": ["b", "a"]}, eps)
    assert d.admitted_tags == ["b", "a"]
    assert [c.weight for c in d.candidates] == pytest.approx([0.5, 0.5])
    d = route({"order": ["a", "b"]}, eps)
    assert [c.weight for c in d.candidates] == [1.0, 0.0]
    down = [ep("z", uptime_last_30m=0.0), ep("y", uptime_last_30m=80.0)]
    d = route({"order": ["z", "y"]}, down)
    assert [c.weight for c in d.candidates] == [0.0, 1.0]  # a dead first choice gets nothing
    assert [c.position for c in d.candidates] == [1, 2]


def test_every_candidate_down_sends_everything_to_the_first() -> None:
    eps = [ep("z", uptime_last_30m=0.0), ep("y", uptime_last_30m=0.0), ep("x", uptime_last_30m=-5)]
    d = route({"order": ["y", "z", "x"]}, eps)
    assert [(c.endpoint.tag, c.weight) for c in d.candidates] == [
        ("y", 1.0),
        ("z", 0.0),
        ("x", 0.0),
    ]
    d = route(
        {"order": ["z", "y"]}, [ep("z", uptime_last_30m=150.0), ep("y", uptime_last_30m=50.0)]
    )
    assert d.weights == {"y": 0.0, "z": 1.0}  # uptime above 100% is clipped, not a bonus
    d = route(
        {"order": ["z", "y"]}, [ep("z", uptime_last_30m=-20.0), ep("y", uptime_last_30m=50.0)]
    )
    assert d.weights == {"z": 0.0, "y": 1.0}  # and below 0% too


def test_load_balancing_with_nothing_priced_spreads_evenly() -> None:
    eps = [ep("a", pricing={}), ep("b", pricing={"prompt": "0.000001"}), ep("c", pricing={})]
    d = route({}, eps)
    assert d.mode == "load_balanced"
    assert d.weights == pytest.approx({"a": 1 / 3, "b": 1 / 3, "c": 1 / 3})
    assert d.admitted_tags == ["a", "b", "c"]  # equal weights: by tag


def test_load_balancing_gives_an_unpriced_endpoint_nothing_beside_priced_ones() -> None:
    d = route(
        {},
        [
            ep("unpriced", pricing={}),
            ep("a", "0.000001", "0.000001"),
            ep("b", "0.000002", "0.000002"),
        ],
    )
    assert d.weights == pytest.approx({"a": 0.8, "b": 0.2, "unpriced": 0.0})
    assert d.admitted_tags == ["a", "b", "unpriced"]
    assert cand(d, "unpriced").role == "balanced"


def test_load_balancing_stable_reads_status_and_deranked() -> None:
    eps = [
        ep("ok", status=None),
        ep("deranked", is_deranked=True),
        ep("degraded", status=-1),
        ep("zero", status=0),
    ]
    d = route({}, eps)
    assert {c.endpoint.tag: c.role for c in d.candidates} == {
        "ok": "balanced",
        "zero": "balanced",
        "deranked": "fallback",
        "degraded": "fallback",
    }
    assert d.weights["ok"] == d.weights["zero"] == 0.5


@pytest.mark.parametrize(
    ("cutoff", "preferred"),
    [(42, True), (42.0, True), (42.5, False), (41.9, True)],
)
def test_preferred_min_throughput_boundary(cutoff: float, preferred: bool) -> None:
    # deepinfra/int4 runs at exactly 42 tok/s p50: at the cutoff it is still preferred
    d = route({"preferred_min_throughput": cutoff, "only": ["deepinfra", "chutes"]}, K25)
    assert (cand(d, "deepinfra/int4").role == "balanced") is preferred
    assert cand(d, "chutes/int4").role == "fallback"  # 31 tok/s


@pytest.mark.parametrize(
    ("seconds", "preferred"),
    [(1.32, True), (1.3201, True), (1.319, False)],
)
def test_preferred_max_latency_boundary(seconds: float, preferred: bool) -> None:
    # deepinfra/int4: 1320 ms p50; a cutoff of exactly 1.32 s keeps it preferred
    d = route({"preferred_max_latency": seconds, "only": ["deepinfra", "fireworks"]}, K25)
    assert (cand(d, "deepinfra/int4").role == "balanced") is preferred


def test_preferred_percentile_without_stats_is_not_held_against_the_endpoint() -> None:
    eps = [ep("nostats"), ep("slow", throughput_last_30m={"p50": 5, "p90": 50})]
    d = route({"preferred_min_throughput": {"p50": 10, "p90": 10}}, eps)
    assert cand(d, "nostats").role == "balanced"
    assert cand(d, "slow").role == "fallback"
    d = route({"preferred_min_throughput": {"p90": 10}}, eps)
    assert {c.role for c in d.candidates} == {"balanced"}
    d = route({"preferred_max_latency": {"p99": 1}}, [ep("nolat", latency_last_30m={"p50": 5000})])
    assert cand(d, "nolat").role == "balanced"  # p99 not reported: nothing to miss


def test_context_length_counts_max_tokens_only_when_given() -> None:
    e = ep("a", context_length=1000, max_completion_tokens=None)
    assert route({}, [e], RequestParams(prompt_tokens=1000)).admitted_tags == ["a"]
    d = route({}, [e], RequestParams(prompt_tokens=1000, max_tokens=1))
    assert excl(d, "a").detail == "request exceeds its context 1000"
    assert route({}, [e], RequestParams(max_tokens=10**9)).admitted_tags == ["a"]  # no prompt size
    unknown = ep("b", context_length=None)
    assert route({}, [unknown], RequestParams(prompt_tokens=10**9)).admitted_tags == ["b"]


def test_filters_apply_in_routing_funnel_order() -> None:
    e = ep("a", quantization="fp8", pricing={"prompt": "0.00001", "completion": "0.00001"})
    block = {"only": ["b"], "ignore": ["a"], "quantizations": ["int4"], "max_price": {"prompt": 1}}
    assert excl(route(block, [e]), "a").reason == "only"
    block.pop("only")
    assert excl(route(block, [e]), "a").reason == "ignore"
    block.pop("ignore")
    assert excl(route(block, [e]), "a").reason == "quantization"
    block.pop("quantizations")
    assert excl(route(block, [e]), "a").reason == "max_price"
    block = {"require_parameters": True}
    params = RequestParams(parameters=frozenset({"seed"}), max_tokens=10**6, prompt_tokens=10**6)
    assert excl(route(block, [e], params), "a").reason == "require_parameters"
    assert excl(route({}, [e], params), "a").reason == "max_tokens"
    byok = ep("k", is_byok_only=True)
    x = excl(route({"only": ["z"]}, [byok]), "k")
    assert (x.reason, x.detail) == (
        "byok_only",
        "serves only requests that bring their own provider key",
    )


def test_blended_price_with_zero_tokens_is_the_plain_mean() -> None:
    e = ep("a", "0.000001", "0.000003")
    assert blended_price_usd_per_m(e, RequestParams(prompt_tokens=0, output_tokens=0)) == 2
    assert blended_price_usd_per_m(e, RequestParams(prompt_tokens=3, output_tokens=None)) == 2
    assert blended_price_usd_per_m(e, RequestParams(prompt_tokens=0, output_tokens=5)) == 3
    assert blended_price_usd_per_m(e, RequestParams(prompt_tokens=5, output_tokens=0)) == 1
    assert blended_price_usd_per_m(ep("b", pricing={"prompt": "0.000001"})) is None
    assert blended_price_usd_per_m(ep("c", pricing={"completion": "0.000001"})) is None


def test_to_request_is_json_ready_whatever_python_values_options_hold() -> None:
    blk = ProviderBlock.parse(
        {"options": {"deepinfra": {"budget": Decimal("1.5"), "pair": (1, 2)}}}
    )
    out = blk.to_request()
    assert out == {"options": {"deepinfra": {"budget": "1.5", "pair": [1, 2]}}}
    assert json.loads(json.dumps(out)) == out


def test_parse_error_for_a_non_mapping_names_the_file() -> None:
    with pytest.raises(PolicyError) as info:
        ProviderBlock.parse(["chutes"], source="block.yaml")
    assert str(info.value) == "block.yaml: a provider block must be a mapping"


def test_base_slug_is_the_part_before_the_first_slash() -> None:
    deep = ep("amazon-bedrock/claude-on-aws/eu")
    assert matches("amazon-bedrock", deep)
    assert not matches("amazon-bedrock/claude-on-aws", deep)  # a tag matches itself only
    assert matches("amazon-bedrock/claude-on-aws/eu", deep)


def test_an_order_entry_ranks_its_variants_by_the_requests_token_mix() -> None:
    # 1:1 deepinfra/b is cheaper ($2/M vs $2.5/M); at 9 input tokens per output token, a is.
    eps = [ep("deepinfra/b", "0.000003", "0.000001"), ep("deepinfra/a", "0.000001", "0.000004")]
    assert route({"order": ["deepinfra"]}, eps).admitted_tags == ["deepinfra/b", "deepinfra/a"]
    mix = RequestParams(prompt_tokens=9000, output_tokens=1000)
    assert route({"order": ["deepinfra"]}, eps, mix).admitted_tags == ["deepinfra/a", "deepinfra/b"]


def test_preferred_cutoffs_leave_endpoints_without_stats_alone() -> None:
    d = route({"preferred_max_latency": 1, "preferred_min_throughput": 100}, [ep("nostats")])
    assert cand(d, "nostats").role == "balanced"

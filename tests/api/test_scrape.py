"""Tests for the provider-page parser.

The fixtures in ``tests/data/pages/`` are built by ``make_fixtures.py`` from the Kimi K2.5 scenario
to the page structure public scrapers describe (OPENROUTER.md section 11); no live page was captured.
The figures asserted below are the scenario's (``shared/scenarios/kimi-k2.5-endpoints.json``).
"""

from __future__ import annotations

import json
import re
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from openrouter_probe.api.scrape import _join_chunks, _resolve, _split_records, parse_provider_page
from openrouter_probe.errors import SnapshotError
from tests.conftest import DATA

PAGES = DATA / "pages"
SCENARIO = DATA / "kimi-k2.5-endpoints.json"  # copy of the shared one
MODEL = "moonshotai/kimi-k2.5"
KIMI_TAGS = [
    "chutes/int4",
    "deepinfra/int4",
    "siliconflow/int4",
    "atlas-cloud/int4",
    "together",
    "novita",
    "parasail/int4",
    "moonshotai/int4",
    "fireworks",
    "baseten/fp4",
    "venice",
]


def read(name: str) -> str:
    return (PAGES / name).read_text(encoding="utf-8")


def by_tag(name: str = "kimi-k2.5-providers.html") -> dict[str, object]:
    result = parse_provider_page(read(name), model=MODEL, source=name)
    return {e.tag: e for e in result.endpoints}


def page_with_chunks(*chunks: str) -> str:
    return "".join(f"<script>self.__next_f.push([1,{json.dumps(c)}])</script>" for c in chunks)


def test_kimi_page_lists_the_eleven_standard_endpoints():
    result = parse_provider_page(read("kimi-k2.5-providers.html"), model=MODEL)
    assert result.id == MODEL
    assert result.name == "MoonshotAI: Kimi K2.5"
    assert [e.tag for e in result.endpoints] == KIMI_TAGS
    assert not result.stats_missing


def test_chutes_endpoint_fields():
    chutes = by_tag()["chutes/int4"]
    assert chutes.provider_name == "Chutes"
    assert chutes.name == "Chutes | moonshotai/kimi-k2.5-0127"
    assert chutes.model_id == MODEL
    assert chutes.quantization == "int4"
    assert chutes.pricing.prompt == "0.00000045"
    assert chutes.pricing.completion_usd_per_m == Decimal("2.2")
    assert chutes.context_length == 262144
    assert chutes.max_completion_tokens == 65535
    assert "tools" in chutes.supported_parameters
    assert chutes.latency_last_30m.p50 == 1850  # ms, from stats.p50_latency
    assert chutes.throughput_last_30m.p50 == 31
    # Page-only flags survive as extra keys.
    assert chutes.model_extra["is_free"] is False
    assert chutes.model_extra["variant"] == "standard"
    assert chutes.model_extra["endpoint_id"] == "ba282329-5096-541f-b910-734b9834e0c9"


def test_quantization_tags_kept_as_given():
    endpoints = by_tag()
    assert endpoints["fireworks"].quantization == "unknown"
    assert endpoints["baseten/fp4"].quantization == "fp4"
    assert endpoints["baseten/fp4"].provider_name == "BaseTen"
    assert endpoints["venice"].latency_last_30m.p50 == 3900
    assert endpoints["venice"].throughput_last_30m.p50 == 18


def test_every_endpoint_matches_the_scenario():
    scenario = json.loads(SCENARIO.read_text(encoding="utf-8"))["data"]["endpoints"]
    parsed = by_tag()
    assert sorted(parsed) == sorted(e["tag"] for e in scenario)
    for want in scenario:
        got = parsed[want["tag"]]
        assert got.provider_name == want["provider_name"]
        assert got.quantization == want["quantization"]
        assert got.pricing.prompt == want["pricing"]["prompt"]
        assert got.pricing.completion == want["pricing"]["completion"]
        assert got.pricing.input_cache_read == want["pricing"].get("input_cache_read")
        assert got.latency_last_30m.p50 == want["latency_last_30m"]["p50"]
        assert got.throughput_last_30m.p50 == want["throughput_last_30m"]["p50"]


def test_record_split_across_two_chunks_parses_intact():
    html = read("kimi-k2.5-providers.html")
    chunks = [json.loads(m)[1] for m in re.findall(r"push\((\[1,.*?\])\)</script>", html)]
    # The generator cuts SiliconFlow's record inside its provider_name string value.
    assert any(c.endswith('"provider_name":"Silic') for c in chunks)
    assert not any('"provider_name":"SiliconFlow"' in c for c in chunks)
    silicon = by_tag()["siliconflow/int4"]
    assert silicon.provider_name == "SiliconFlow"
    assert silicon.max_completion_tokens == 235929
    assert silicon.pricing.cache_read_usd_per_m == Decimal("0.07")
    assert silicon.latency_last_30m.p50 == 2410


def test_other_model_and_disabled_entries_are_skipped():
    records = _split_records(_join_chunks(read("kimi-k2.5-providers.html")))
    raw = records["1f"]
    assert len(raw) == 13
    assert {e["provider_slug"] for e in raw if e["is_disabled"]} == {"groq"}
    assert any(e["model_variant_slug"] == "moonshotai/kimi-k2-thinking" for e in raw)
    endpoints = by_tag()
    assert "groq" not in endpoints
    assert not any("kimi-k2-thinking" in (e.name or "") for e in endpoints.values())
    assert len({e.model_extra["endpoint_id"] for e in endpoints.values()}) == 11


def test_references_and_text_records_are_resolved():
    records = _split_records(_join_chunks(read("kimi-k2.5-providers.html")))
    # The page tree points at the cache ("$L1e") and the cache at the table ("$1f").
    assert records["5"][3]["children"][2][3]["state"] == "$L1e"
    table = next(
        q for q in records["1e"]["queries"] if "providerTableEndpointStats" in q["queryKey"]
    )
    assert table["state"]["data"] == "$1f"
    # A T record is length-prefixed in UTF-8 bytes and holds newlines and non-ASCII text.
    text = records["4"]
    assert "\n\n" in text
    assert "—" in text
    assert len(text.encode()) != len(text)
    assert "1:" not in records  # '1:"$Sreact.fragment"' is not JSON data
    assert by_tag()["chutes/int4"].max_prompt_tokens is None  # "$undefined"


def test_resolve_rules():
    records = {"2": {"x": "$1"}, "1": [1, "$1"], "3": {"self": "$L3"}}
    value = {"a": "$L2", "b": "$$x", "c": "$undefined", "d": "$Sreact.suspense", "e": "$@2"}
    assert _resolve(value, records) == {
        "a": {"x": [1, "$1"]},  # the inner "$1" is a cycle and stays a reference
        "b": "$x",
        "c": None,
        "d": "$Sreact.suspense",
        "e": "$@2",
    }
    assert _resolve("$3", records) == {"self": "$L3"}
    assert _resolve("$2:x", records) == [1, "$1"]


def test_join_mends_a_surrogate_pair_cut_between_chunks():
    html = page_with_chunks('0:["a\ud83d', '\ude00b"]\n')
    assert _split_records(_join_chunks(html)) == {"0": ["a\U0001f600b"]}


def test_page_without_the_query_names_its_source():
    source = "tests/data/pages/no-data.html"
    with pytest.raises(SnapshotError, match="providerTableEndpointStats") as info:
        parse_provider_page(read("no-data.html"), model=MODEL, source=source)
    message = str(info.value)
    assert f"({source})" in message
    assert "openrouter-probe endpoints moonshotai/kimi-k2.5" in message
    assert "\n" not in message


def test_query_without_usable_endpoints_is_an_error():
    with pytest.raises(SnapshotError, match="none is a usable standard endpoint"):
        parse_provider_page(read("kimi-k2.5-providers.html"), model="openai/gpt-5")


def test_a_rendered_table_without_the_query_is_refused():
    # No raw page was ever seen with the rows in the HTML (OPENROUTER.md 11): only the Flight data
    # is read, and a page without it fails as such, whatever table it renders.
    html = read("no-data.html").replace(
        "</body>",
        "<table><tr><th>Provider</th><th>Input</th><th>Output</th></tr>"
        '<tr data-provider-slug="chutes/int4"><td>Chutes</td><td>$0.45/M</td><td>$2.20</td></tr>'
        "</table></body>",
    )
    with pytest.raises(SnapshotError, match="holds no providerTableEndpointStats data"):
        parse_provider_page(html, model=MODEL, source="table.html")


_STREAM = _join_chunks(read("kimi-k2.5-providers.html"))
_EXPECTED = parse_provider_page(page_with_chunks(_STREAM), model=MODEL).to_json_dict()


@settings(max_examples=60, deadline=None)
@given(st.integers(min_value=0, max_value=len(_STREAM)))
def test_any_two_chunk_split_gives_the_same_result(cut):
    html = page_with_chunks(_STREAM[:cut], _STREAM[cut:])
    assert _join_chunks(html) == _STREAM
    assert parse_provider_page(html, model=MODEL).to_json_dict() == _EXPECTED


def test_endpoint_stats_fallback_behind_a_reference():
    entry = {
        "provider_slug": "novita/fp8",
        "provider_name": "NovitaAI",
        "provider_display_name": "Novita",
        "model_variant_slug": "a/b",
        "is_byok_only": True,
        "pricing": {"prompt": "0.000001", "completion": "0.000002"},
        "stats": None,
    }
    query = {
        "queryKey": ["endpointStats", {"permaslug": "a/b-0101"}],
        "state": {"status": "success", "data": [entry]},
    }
    stream = (
        '0:{"state":{"mutations":[],"queries":"$L2"}}\n'
        "1:{broken json\n"
        f"2:{json.dumps([query])}\n"
    )
    result = parse_provider_page(page_with_chunks(stream), model="a/b")
    (endpoint,) = result.endpoints
    assert endpoint.tag == "novita/fp8"
    assert endpoint.provider_name == "Novita"
    assert endpoint.name == "Novita | a/b-0101"
    assert endpoint.latency_last_30m is None
    assert endpoint.model_extra["is_byok_only"] is True  # kept, but flagged

"""The policy compiler: golden files, properties, and the block reaching a server untouched.

Golden files live in tests/data/policies/{valid,invalid}/. Regenerate the expected YAML of the valid
specs after an intended change with ``UPDATE_GOLDEN=1 pytest tests/policy/test_compiler.py`` and
review the diff.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from openrouter_probe.errors import PolicyError
from openrouter_probe.policy.compiled import load_compiled_policy, load_provider_block
from openrouter_probe.policy.compiler import compile_policy
from openrouter_probe.policy.spec import load_spec, parse_spec
from openrouter_probe.rules.provider_block import ProviderBlock
from openrouter_probe.rules.routing import matches, route
from openrouter_probe.rules.snapshot import bundled_snapshot
from tests.conftest import DATA, ROOT

GOLDEN = DATA / "policies"
VALID = sorted((GOLDEN / "valid").glob("*.spec.yaml"))
INVALID = sorted((GOLDEN / "invalid").glob("*.spec.yaml"))
SNAP = bundled_snapshot()


def _compile(path: Path) -> str:
    return compile_policy(load_spec(path), SNAP, spec_file=str(path)).to_yaml()


@pytest.mark.parametrize("spec", VALID, ids=lambda p: p.name.removesuffix(".spec.yaml"))
def test_valid_golden(spec: Path) -> None:
    expected = spec.with_name(spec.name.replace(".spec.yaml", ".expected.yaml"))
    got = _compile(spec)
    if os.environ.get("UPDATE_GOLDEN") == "1":
        expected.write_text(got)
    assert got == expected.read_text()


@pytest.mark.parametrize("spec", INVALID, ids=lambda p: p.name.removesuffix(".spec.yaml"))
def test_invalid_golden(spec: Path) -> None:
    message = spec.with_name(spec.name.replace(".spec.yaml", ".error")).read_text().strip()
    with pytest.raises(PolicyError) as info:
        compile_policy(load_spec(spec), SNAP, spec_file=str(spec))
    assert message in str(info.value)
    assert str(info.value).startswith(f"{spec}: ")  # every error names the spec file


def test_k25_policy_checked_in_is_reproduced_byte_for_byte() -> None:
    spec = ROOT / "policies" / "kimi-k2.5.spec.yaml"
    checked_in = (ROOT / "policies" / "kimi-k2.5.yaml").read_text()
    assert (
        compile_policy(load_spec(spec), SNAP, spec_file="policies/kimi-k2.5.spec.yaml").to_yaml()
        == checked_in
    )


def test_k25_policy_facts() -> None:
    doc = yaml.safe_load((ROOT / "policies" / "kimi-k2.5.yaml").read_text())
    provider = doc["provider"]
    assert provider == {
        "order": [
            "chutes/int4",
            "deepinfra/int4",
            "siliconflow/int4",
            "atlas-cloud/int4",
            "parasail/int4",
            "moonshotai/int4",
        ],
        "ignore": ["baseten", "fireworks"],
        "quantizations": ["int4"],
    }
    assert doc["batch"] == {"provider": {"only": provider["order"]}}
    assert doc["provenance"]["model"] == "moonshotai/kimi-k2.5"
    assert doc["provenance"]["snapshot"]["sha256"] == SNAP.sha256
    assert doc["provenance"]["snapshot"]["source"] == "bundled"
    assert "Reconstructed" in doc["provenance"]["snapshot"]["note"]
    decisions = {d["tag"]: d for d in doc["decisions"]}
    assert len(decisions) == 11
    assert decisions["fireworks"]["verdict"] == "requantized"
    assert decisions["fireworks"]["effective"] == "nvfp4"
    assert decisions["baseten/fp4"]["verdict"] == "requantized"
    assert decisions["chutes/int4"]["position"] == 1
    for tag in ("together", "novita", "venice"):
        assert decisions[tag]["kept"] is False
        assert "an ignore-list alone would admit it" in decisions[tag]["reason"]
    trade = doc["tradeoff"]
    assert trade["strict_precision_drops"] == ["together", "novita", "venice"]
    assert trade["strict"]["endpoints"] == 6
    assert trade["ignore_list_alone"]["endpoints"] == 9
    assert trade["strict"]["cheapest_output_usd_per_m"] == 2.2
    assert trade["strict"]["throughput_p50_sum_tps"] == 222.0
    assert trade["ignore_list_alone"]["throughput_p50_sum_tps"] == 327.0


def test_fact_drops_fireworks_even_when_unknown_is_allowed() -> None:
    compiled = compile_policy(load_spec(GOLDEN / "valid" / "fact-beats-tag.spec.yaml"), SNAP)
    assert compiled.provider.ignore == ["fireworks"]
    reason = next(d.reason for d in compiled.decisions if d.tag == "fireworks")
    assert "serves nvfp4" in reason
    assert "together" in compiled.admitted


def test_compiled_policy_load_round_trip(tmp_path: Path) -> None:
    compiled = compile_policy(load_spec(ROOT / "policies" / "kimi-k2.5.spec.yaml"), SNAP)
    path = compiled.save(tmp_path / "p.yaml")
    again = load_compiled_policy(path)
    assert again.provider == compiled.provider
    assert again.decisions == compiled.decisions
    assert again.to_yaml() == compiled.to_yaml()
    assert load_provider_block(path) == compiled.provider


def test_load_compiled_policy_rejects_a_spec() -> None:
    with pytest.raises(PolicyError, match="not a compiled policy"):
        load_compiled_policy(ROOT / "policies" / "kimi-k2.5.spec.yaml")


# -- the provider block is exactly OpenRouter's ProviderPreferences --------------------------------

# ProviderPreferences in OpenRouter's OpenAPI file (OPENROUTER.md §6.1): additionalProperties false.
PROVIDER_PREFERENCES = {
    "order": list,
    "allow_fallbacks": bool,
    "require_parameters": bool,
    "data_collection": str,
    "zdr": bool,
    "enforce_distillable_text": bool,
    "only": list,
    "ignore": list,
    "quantizations": list,
    "sort": (str, dict),
    "preferred_min_throughput": (int, float, dict),
    "preferred_max_latency": (int, float, dict),
    "max_price": dict,
    "options": dict,
}
# Written out from the spec on purpose: importing schema.KNOWN_QUANTIZATIONS would check the
# compiler's output against the library's own constant, so a wrong constant could not fail here.
QUANTIZATIONS = {
    "int4",
    "int8",
    "fp4",
    "mxfp4",
    "nvfp4",
    "fp6",
    "fp8",
    "mxfp8",
    "fp16",
    "bf16",
    "fp32",
    "unknown",
}


def _assert_provider_preferences(block: dict) -> None:
    assert set(block) <= set(PROVIDER_PREFERENCES), set(block) - set(PROVIDER_PREFERENCES)
    for key, value in block.items():
        assert isinstance(value, PROVIDER_PREFERENCES[key]), key
    for key in ("order", "only", "ignore"):
        for entry in block.get(key, []):
            assert isinstance(entry, str) and entry == entry.lower()
    assert set(block.get("quantizations", [])) <= QUANTIZATIONS
    if "data_collection" in block:
        assert block["data_collection"] in ("allow", "deny")
    if "max_price" in block:
        assert set(block["max_price"]) <= {"prompt", "completion", "request", "image", "audio"}
        # decimal strings: the spec's and the official SDK's type (numbers are not accepted there)
        assert all(isinstance(v, str) and float(v) >= 0 for v in block["max_price"].values())


@pytest.mark.parametrize("spec", VALID, ids=lambda p: p.name.removesuffix(".spec.yaml"))
def test_compiled_blocks_have_openrouters_shape(spec: Path) -> None:
    block = yaml.safe_load(_compile(spec))["provider"]
    _assert_provider_preferences(block)


# -- properties -------------------------------------------------------------------------------------

TAGS = [e.tag for e in SNAP.endpoints]
SLUGS = sorted({e.slug for e in SNAP.endpoints})
specs = st.fixed_dictionaries(
    {"model": st.just("moonshotai/kimi-k2.5")},
    optional={
        "precision": st.one_of(
            st.sampled_from(["native", "native-or-upcast", "any"]),
            st.lists(
                st.sampled_from(["int4", "fp4", "fp8", "unknown", "bf16"]), min_size=1, unique=True
            ),
        ),
        "undeclared": st.sampled_from(["exclude", "admit"]),
        "ignore": st.lists(st.sampled_from(SLUGS + TAGS), unique=True, max_size=4),
        "min_uptime_30m_pct": st.sampled_from([90, 98.5, 99.5]),
        "max_price": st.fixed_dictionaries(
            {},
            optional={
                "input_usd_per_m": st.sampled_from([0.45, 0.5, 0.6]),
                "output_usd_per_m": st.sampled_from([2.2, 2.6, 3.0, 3.75]),
            },
        ),
        "strategy": st.sampled_from(["order", "sort", "balance"]),
        "order_by": st.sampled_from(["price", "throughput", "latency"]),
        "fallbacks": st.booleans(),
    },
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw=specs)
def test_properties_of_compiled_policies(raw: dict) -> None:
    spec = parse_spec(raw)
    try:
        first = compile_policy(spec, SNAP)
    except PolicyError as exc:
        assert "admits none" in str(exc)  # noqa: PT017
        return
    # deterministic
    text = first.to_yaml()
    assert compile_policy(parse_spec(raw), SNAP).to_yaml() == text
    # dump then load round-trips (read by libyaml's parser when there is one: the same safe
    # constructor and resolver, a tenth of the pure-Python parser's time)
    doc = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    assert ProviderBlock.parse(doc["provider"]) == first.provider
    _assert_provider_preferences(doc["provider"])
    decision = route(first.provider, SNAP.endpoints)
    assert decision.admitted_tags == first.admitted
    for e in decision.admitted:
        # nothing admitted is ignored, by the spec or by the compiler
        assert not any(matches(entry, e) for entry in first.provider.ignore or [])
        assert not any(matches(entry, e) for entry in spec.ignore)
        # everything admitted satisfies quantizations and max_price
        if first.provider.quantizations is not None:
            assert e.quantization in first.provider.quantizations
        if spec.max_price and spec.max_price.output_usd_per_m is not None:
            assert float(e.pricing.completion_usd_per_m) <= spec.max_price.output_usd_per_m
        if spec.max_price and spec.max_price.input_usd_per_m is not None:
            assert float(e.pricing.prompt_usd_per_m) <= spec.max_price.input_usd_per_m
        # a requantized endpoint never passes a native-precision policy
        if spec.precision == "native":
            verdict = next(d.verdict for d in first.decisions if d.tag == e.tag)
            assert verdict != "requantized"


# -- the block reaches a server unchanged through the openai client -----------------------------------


def test_block_passes_through_openai_extra_body() -> None:
    """The compiled block, sent with the openai client's extra_body, reaches a loopback server as is."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    import openai

    captured: list[dict] = []
    cassette = yaml.safe_load((DATA / "captures" / "kimi-k2.5-chat-inceptron.yaml").read_text())
    chat = cassette["interactions"][0]["response"]["body"].encode()  # a real K2.5 response body

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            captured.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(chat)))
            self.end_headers()
            self.wfile.write(chat)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        provider = yaml.safe_load((ROOT / "policies" / "kimi-k2.5.yaml").read_text())["provider"]
        client = openai.OpenAI(
            base_url=f"http://127.0.0.1:{server.server_address[1]}/api/v1",
            api_key="test-key-not-real",
            max_retries=0,
        )
        reply = client.chat.completions.create(
            model="moonshotai/kimi-k2.5",
            messages=[{"role": "user", "content": "Say hi in Portuguese"}],
            extra_body={"provider": provider},
        )
    finally:
        server.shutdown()
        server.server_close()
    assert captured[0]["provider"] == provider
    assert captured[0]["model"] == "moonshotai/kimi-k2.5"
    assert reply.model_extra is not None
    assert reply.model_extra["provider"] == "Inceptron"

from __future__ import annotations

from pathlib import Path

import pytest

from openrouter_probe.api.schema import Endpoint
from openrouter_probe.errors import ConfigError
from openrouter_probe.rules.precision import FormatInfo, PrecisionRegistry, default_registry
from openrouter_probe.rules.snapshot import bundled_snapshot


def _ep(tag: str, quantization: str | None) -> Endpoint:
    return Endpoint.model_validate(
        {
            "provider_name": tag.split("/")[0].title(),
            "tag": tag,
            "quantization": quantization,
            "pricing": {"prompt": "0.000001", "completion": "0.000002"},
        }
    )


def test_k25_scenario_verdicts() -> None:
    snap = bundled_snapshot()
    reg = default_registry()
    verdicts = {e.tag: reg.verdict(snap.model, e) for e in snap.endpoints}
    assert {t for t, v in verdicts.items() if v.verdict == "native"} == {
        "chutes/int4",
        "deepinfra/int4",
        "siliconflow/int4",
        "atlas-cloud/int4",
        "parasail/int4",
        "moonshotai/int4",
    }
    assert verdicts["baseten/fp4"].verdict == "requantized"
    assert verdicts["baseten/fp4"].effective_from == "tag"
    fw = verdicts["fireworks"]
    assert (fw.declared, fw.effective, fw.verdict) == ("unknown", "nvfp4", "requantized")
    assert fw.effective_from.startswith("provider fact (2026-02-01)")
    assert {t for t, v in verdicts.items() if v.verdict == "undeclared"} == {
        "together",
        "novita",
        "venice",
    }
    assert verdicts["chutes/int4"].native == "int4"
    assert "Kimi-K2-Thinking" in (verdicts["chutes/int4"].native_source or "")


@pytest.mark.parametrize(
    ("model", "native"),
    [
        ("moonshotai/kimi-k2.5", "int4"),
        ("moonshotai/kimi-k2.5-0127", "int4"),
        ("moonshotai/kimi-k2-thinking", "int4"),
        ("moonshotai/kimi-k2-0905", "fp8"),
        ("moonshotai/kimi-k2", "fp8"),
        ("deepseek/deepseek-chat-v3.1", "fp8"),
        ("deepseek/deepseek-r1-0528", "fp8"),
        ("openai/gpt-oss-120b", "mxfp4"),
        ("qwen/qwen3-235b-a22b", "bf16"),
        ("meta-llama/llama-3.3-70b-instruct", "bf16"),
    ],
)
def test_native_precisions(model: str, native: str) -> None:
    entry = default_registry().native_for(model)
    assert entry is not None and entry.native == native
    assert entry.source


@pytest.mark.parametrize(
    ("model", "tag", "quant", "verdict"),
    [
        ("moonshotai/kimi-k2-0905", "novita/fp8", "fp8", "native"),
        (
            "moonshotai/kimi-k2-0905",
            "groq",
            "int4",
            "requantized",
        ),  # FP8-native served 4-bit: lossy
        ("moonshotai/kimi-k2-0905", "x/bf16", "bf16", "upcast"),
        ("moonshotai/kimi-k2.5", "y", "bf16", "upcast"),
        ("moonshotai/kimi-k2.5", "z", "int8", "upcast"),
        ("moonshotai/kimi-k2.5", "deepinfra/fp4", "fp4", "requantized"),
        ("moonshotai/kimi-k2.5", "w", None, "undeclared"),
        (
            "moonshotai/kimi-k2.5",
            "v/int4",
            None,
            "native",
        ),  # undeclared field, tag suffix says int4
        (
            "openai/gpt-oss-120b",
            "a",
            "fp4",
            "native",
        ),  # fp4 covers mxfp4 in OpenRouter's vocabulary
        ("openai/gpt-oss-120b", "b", "nvfp4", "requantized"),
        ("openai/gpt-oss-120b", "c", "bf16", "upcast"),
        ("nobody/new-model", "d", "fp8", "unassessed"),
        ("moonshotai/kimi-k2.5", "e", "fp3", "undeclared"),  # a value OpenRouter may add later
    ],
)
def test_verdict_table(model: str, tag: str, quant: str | None, verdict: str) -> None:
    assert default_registry().verdict(model, _ep(tag, quant)).verdict == verdict


def test_fact_applies_to_the_model_only() -> None:
    reg = default_registry()
    assert reg.verdict("moonshotai/kimi-k3", _ep("fireworks", "unknown")).verdict == "undeclared"


def test_user_file_extends_and_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    user = tmp_path / "mine.yaml"
    user.write_text(
        "models:\n  - match: nobody/new-model\n    native: bf16\n    source: our eval\n"
        "provider_facts:\n  - model: moonshotai/kimi-k2.5*\n    provider: together\n"
        "    effective: fp8\n    source: asked their support\n    date: '2026-11-01'\n"
    )
    reg = PrecisionRegistry.load(user)
    assert reg.verdict("nobody/new-model", _ep("d", "fp8")).verdict == "requantized"
    together = reg.verdict("moonshotai/kimi-k2.5", _ep("together", "unknown"))
    assert (together.effective, together.verdict) == ("fp8", "upcast")
    monkeypatch.setenv("OPENROUTER_PROBE_PRECISION", str(user))
    assert default_registry().native_for("nobody/new-model") is not None


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("models: [{match: a/b}]", r"models\[0\]: needs match and native"),
        ("models: [{match: a/b, native: fp3}]", "'fp3' is not a known format"),
        ("provider_facts: [{model: a/b}]", r"provider_facts\[0\]: needs model"),
        ("colours: {}", r"unknown key\(s\) \['colours'\]"),
        ("[1, 2", "not valid YAML"),
    ],
)
def test_bad_user_file_names_file_and_key(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(content)
    with pytest.raises(ConfigError, match=message) as info:
        PrecisionRegistry.load(path)
    assert str(path) in str(info.value)


def test_user_file_overrides_bundled_entries(tmp_path: Path) -> None:
    # The bundled registry says K2.5 is INT4-native and Fireworks serves it as NVFP4; a user who
    # knows better overrides both, and a format's width, without touching the bundled file.
    user = tmp_path / "override.yaml"
    user.write_text(
        "formats:\n  nvfp4: {bits: 8, family: float}\n"
        "models:\n  - match: moonshotai/kimi-k2.5*\n    native: fp8\n    source: our own eval\n"
        "provider_facts:\n  - model: moonshotai/kimi-k2.5*\n    provider: fireworks\n"
        "    effective: int4\n    source: asked their support\n    date: '2026-11-02'\n"
    )
    bundled = default_registry()
    assert bundled.native_for("moonshotai/kimi-k2.5").native == "int4"  # type: ignore[union-attr]
    reg = PrecisionRegistry.load(user)
    native = reg.native_for("moonshotai/kimi-k2.5")
    assert native is not None and (native.native, native.source) == ("fp8", "our own eval")
    fw = reg.verdict("moonshotai/kimi-k2.5", _ep("fireworks", "unknown"))
    assert (fw.effective, fw.effective_from) == (
        "int4",
        "provider fact (2026-11-02): asked their support",
    )
    assert (fw.native, fw.verdict) == ("fp8", "requantized")
    assert reg.formats["nvfp4"].bits == 8
    assert reg.verdict("openai/gpt-oss-120b", _ep("b", "nvfp4")).verdict == "upcast"
    # the bundled entries stay behind the user's: other K2 models are untouched
    assert reg.native_for("moonshotai/kimi-k2-thinking").native == "int4"  # type: ignore[union-attr]
    assert [m.native for m in reg.models[:2]] == ["fp8", "int4"]
    assert [f.effective for f in reg.facts] == ["int4", "nvfp4"]


def test_later_user_files_win_over_earlier_ones(tmp_path: Path) -> None:
    first, second = tmp_path / "a.yaml", tmp_path / "b.yaml"
    first.write_text("models:\n  - match: x/*\n    native: fp8\n")
    second.write_text("models:\n  - match: x/m\n    native: bf16\n")
    assert PrecisionRegistry.load(first, second).native_for("x/m").native == "bf16"  # type: ignore[union-attr]
    assert PrecisionRegistry.load(second, first).native_for("x/m").native == "fp8"  # type: ignore[union-attr]


def test_default_registry_is_a_new_object_each_time() -> None:
    # A caller that changes its registry cannot change what the next caller (or test) gets.
    reg = default_registry()
    reg.models.clear()
    reg.facts.clear()
    reg.formats.pop("int4")
    fresh = default_registry()
    assert fresh is not reg
    assert fresh.native_for("moonshotai/kimi-k2.5").native == "int4"  # type: ignore[union-attr]
    assert fresh.facts and "int4" in fresh.formats


def test_env_file_is_read_on_every_call(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    user = tmp_path / "env.yaml"
    user.write_text("models:\n  - match: moonshotai/kimi-k2.5\n    native: bf16\n")
    monkeypatch.setenv("OPENROUTER_PROBE_PRECISION", str(user))
    assert default_registry().native_for("moonshotai/kimi-k2.5").native == "bf16"  # type: ignore[union-attr]
    monkeypatch.delenv("OPENROUTER_PROBE_PRECISION")
    assert default_registry().native_for("moonshotai/kimi-k2.5").native == "int4"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("model", "tag", "quant", "effective", "source", "verdict", "reason"),
    [
        (
            "moonshotai/kimi-k2.5",
            "w",
            None,
            None,
            "nothing",
            "undeclared",
            "no quantization tag and no known fact",
        ),
        (
            "moonshotai/kimi-k2.5",
            "w",
            "unknown",
            None,
            "nothing",
            "undeclared",
            "tag 'unknown' and no known fact",
        ),
        (
            "moonshotai/kimi-k2.5",
            "v/int4",
            None,
            "int4",
            "tag suffix",
            "native",
            "int4 (from tag suffix) is the native release precision",
        ),
        (
            "moonshotai/kimi-k2.5",
            "v/INT4",
            None,
            "int4",
            "tag suffix",
            "native",
            "int4 (from tag suffix) is the native release precision",
        ),
        (
            "moonshotai/kimi-k2.5",
            "c",
            "INT4",
            "int4",
            "tag",
            "native",
            "int4 is the native release precision",
        ),
        (
            "nobody/x",
            "d",
            "fp8",
            "fp8",
            "tag",
            "unassessed",
            "serves fp8; nobody/x's native precision is not in the registry",
        ),
        (
            "moonshotai/kimi-k2.5",
            "z",
            "int8",
            "int8",
            "tag",
            "upcast",
            "int8 is wider than native int4",
        ),
        (
            "moonshotai/kimi-k2.5",
            "b",
            "fp4",
            "fp4",
            "tag",
            "requantized",
            "fp4 is another 4-bit format than native int4",
        ),
        (
            "moonshotai/kimi-k2-0905",
            "g",
            "int4",
            "int4",
            "tag",
            "requantized",
            "int4 has fewer bits than native fp8",
        ),
        ("openai/gpt-oss-120b", "a", "fp4", "fp4", "tag", "native", "fp4 covers native mxfp4"),
    ],
)
def test_verdict_records_where_the_precision_came_from(
    model: str,
    tag: str,
    quant: str | None,
    effective: str | None,
    source: str,
    verdict: str,
    reason: str,
) -> None:
    v = default_registry().verdict(model, _ep(tag, quant))
    assert (v.tag, v.declared, v.effective, v.effective_from) == (tag, quant, effective, source)
    assert (v.verdict, v.reason) == (verdict, reason)


def test_verdict_from_a_provider_fact_names_it() -> None:
    v = default_registry().verdict("moonshotai/kimi-k2.5", _ep("fireworks", "unknown"))
    assert v.effective_from.startswith("provider fact (2026-02-01): Fireworks serves Kimi K2.5")
    assert (
        v.reason
        == "nvfp4 (from provider fact (2026-02-01)) is another 4-bit format than native int4"
    )
    assert (v.native, v.native_source) == ("int4", default_registry().models[0].source)


def test_fact_matches_a_full_tag_whatever_its_case(tmp_path: Path) -> None:
    user = tmp_path / "facts.yaml"
    user.write_text(
        "provider_facts:\n  - model: m/x\n    provider: DeepInfra/FP4\n    effective: nvfp4\n"
        "    source: s\n    date: '2026-01-01'\n"
    )
    reg = PrecisionRegistry.load(user)
    assert reg.facts[0].provider == "deepinfra/fp4"
    assert reg.effective_for("m/x", _ep("DeepInfra/FP4", "fp4"))[0] == "nvfp4"
    assert reg.effective_for("m/x", _ep("deepinfra/fp4", "fp4"))[0] == "nvfp4"
    assert reg.effective_for("m/x", _ep("deepinfra", "fp4")) == ("fp4", "tag")  # another endpoint
    assert reg.effective_for("m/y", _ep("deepinfra/fp4", "fp4")) == ("fp4", "tag")  # another model


@pytest.mark.parametrize(
    ("native", "served"), [("mxfp8", "fp8"), ("nvfp4", "fp4"), ("mxfp4", "fp4")]
)
def test_openrouters_wide_names_cover_their_mx_and_nv_variants(
    tmp_path: Path, native: str, served: str
) -> None:
    user = tmp_path / "native.yaml"
    user.write_text(f"models:\n  - match: m/x\n    native: {native}\n")
    v = PrecisionRegistry.load(user).verdict("m/x", _ep("p", served))
    assert (v.verdict, v.reason) == ("native", f"{served} covers native {native}")
    # the other direction is a different format at the same width
    back = PrecisionRegistry.load(user).verdict("m/x", _ep("p", native))
    assert back.verdict == "native"


def test_formats_keep_name_bits_and_family(tmp_path: Path) -> None:
    reg = default_registry()
    assert reg.formats["int4"] == FormatInfo("int4", 4, "int")
    assert reg.formats["bf16"] == FormatInfo("bf16", 16, "float")
    user = tmp_path / "formats.yaml"
    user.write_text("formats:\n  int3: {bits: 3}\n  7: {bits: 7, family: int}\n")
    reg = PrecisionRegistry.load(user)
    assert reg.formats["int3"] == FormatInfo("int3", 3, "float")  # family defaults to float
    assert reg.formats["7"] == FormatInfo("7", 7, "int")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("just text", "expected a mapping with formats/models/provider_facts"),
        ("formats: {int3: {family: int}}", r"formats\.int3: needs bits: <int>"),
        ("formats: {int3: {bits: many}}", r"formats\.int3: needs bits: <int>"),
        (
            "provider_facts: [{model: a/b, provider: x, effective: fp3, source: s, date: d}]",
            r"provider_facts\[0\]\.effective: 'fp3' is not a known format",
        ),
    ],
)
def test_more_bad_user_files(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(content)
    with pytest.raises(ConfigError, match=message) as info:
        PrecisionRegistry.load(path)
    assert str(info.value).startswith(f"{path}: ")


def test_unreadable_user_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read precision file: No such file"):
        PrecisionRegistry.load(tmp_path / "missing.yaml")
    binary = tmp_path / "bin.yaml"
    binary.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(ConfigError, match=r"not a text file \("):
        PrecisionRegistry.load(binary)


def test_native_precision_keeps_method_and_source(tmp_path: Path) -> None:
    k25 = default_registry().native_for("moonshotai/kimi-k2.5")
    assert k25 is not None and k25.patterns[0] == "moonshotai/kimi-k2.5*"
    assert k25.method.startswith("quantization-aware training (weight-only INT4")
    assert k25.source.startswith("Kimi K2.5 README")
    user = tmp_path / "bare.yaml"
    user.write_text("models:\n  - match: [a/b, a/c]\n    native: FP8\n")
    bare = PrecisionRegistry.load(user).native_for("a/c")
    assert bare is not None
    assert (bare.patterns, bare.native, bare.method, bare.source) == (("a/b", "a/c"), "fp8", "", "")

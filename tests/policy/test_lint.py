"""``lint_block``: every code fires on its trap (bundled K2.5 snapshot) and the shipped policy is clean."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from openrouter_probe.api.schema import Endpoint
from openrouter_probe.policy.lint import LintFinding, lint_block
from openrouter_probe.rules.precision import PrecisionRegistry
from openrouter_probe.rules.provider_block import ProviderBlock
from openrouter_probe.rules.snapshot import bundled_snapshot
from tests.conftest import ROOT

K25 = bundled_snapshot().endpoints
K25_TAGS = ", ".join(sorted(e.tag for e in K25))


def codes(findings: list[LintFinding]) -> list[str]:
    return [f.code for f in findings]


def only(findings: list[LintFinding], code: str) -> LintFinding:
    [finding] = [f for f in findings if f.code == code]
    return finding


def with_deepinfra_fp4() -> list[Endpoint]:
    """K2.5 plus a second DeepInfra variant (``deepinfra/fp4``)."""
    deepinfra = next(e for e in K25 if e.tag == "deepinfra/int4")
    return [*K25, deepinfra.model_copy(update={"tag": "deepinfra/fp4", "quantization": "fp4"})]


def test_display_name_in_ignore() -> None:
    found = lint_block({"ignore": ["Fireworks"]}, K25)
    assert codes(found) == ["display-name"]
    f = found[0]
    assert (f.severity, f.loc) == ("error", "provider.ignore[0]")
    assert "'Fireworks' is a display name" in f.message
    assert f.message.endswith("use 'fireworks'")
    assert str(f).endswith("[display-name]")


@pytest.mark.parametrize(
    ("block", "loc", "kind", "fix"),
    [
        ({"order": ["Moonshot AI"]}, "provider.order[0]", "a display name", "moonshotai"),
        ({"only": ["Chutes/INT4"]}, "provider.only[0]", "not lowercase", "chutes/int4"),
        ({"ignore": ["chutes", "BaseTen"]}, "provider.ignore[1]", "a display name", "baseten"),
    ],
)
def test_display_name_fixes(block: dict[str, Any], loc: str, kind: str, fix: str) -> None:
    f = only(lint_block(block, K25), "display-name")
    assert f.loc == loc
    assert f"is {kind}" in f.message
    assert f.message.endswith(f"use {fix!r}")


def test_no_match() -> None:
    found = lint_block({"only": ["groq"]}, K25)
    f = only(found, "no-match")
    assert (f.severity, f.loc) == ("error", "provider.only[0]")
    assert f.message == f"'groq' matches no endpoint of this model (tags: {K25_TAGS})"
    assert "admits-nothing" in codes(found)


def test_no_match_in_ignore_is_a_warning() -> None:
    found = lint_block({"ignore": ["groq"]}, K25)
    assert codes(found) == ["no-match"]
    assert found[0].severity == "warning"


def test_base_slug_variants() -> None:
    found = lint_block({"order": ["deepinfra"]}, with_deepinfra_fp4())
    assert codes(found) == ["base-slug-variants"]
    f = found[0]
    assert (f.severity, f.loc) == ("warning", "provider.order[0]")
    assert "base slug 'deepinfra' admits 2 endpoints (deepinfra/int4, deepinfra/fp4)" in f.message
    # one variant only: no finding; a full tag: no finding; ignore: never
    assert lint_block({"order": ["deepinfra"]}, K25) == []
    assert lint_block({"order": ["deepinfra/fp4"]}, with_deepinfra_fp4()) == []
    assert lint_block({"ignore": ["deepinfra"]}, with_deepinfra_fp4()) == []


@pytest.mark.parametrize(
    ("block", "reasons"),
    [
        ({"quantizations": ["fp8"]}, "quantization"),
        ({"max_price": {"completion": 1.0}}, "max_price"),
        ({"only": ["chutes/int4"], "ignore": ["chutes"]}, "ignore, only"),
    ],
)
def test_admits_nothing(block: dict[str, Any], reasons: str) -> None:
    f = only(lint_block(block, K25), "admits-nothing")
    assert (f.severity, f.loc) == ("error", "provider")
    assert f.message == (
        f"admits none of the 11 endpoints (excluded by: {reasons}): every request would fail "
        "with 404"
    )


def test_admits_nothing_alone_for_fp8() -> None:
    assert codes(lint_block({"quantizations": ["fp8"]}, K25)) == ["admits-nothing"]


@pytest.mark.parametrize(
    ("max_price", "key", "fix"),
    [
        ({"completion": 0.0000022}, "completion", "use 2.2"),
        ({"prompt": "0.00000045"}, "prompt", "use 0.45"),
        ({"completion": 0.000003}, "completion", "use 3"),
    ],
)
def test_max_price_per_token(max_price: dict[str, Any], key: str, fix: str) -> None:
    found = lint_block({"max_price": max_price}, K25)
    f = only(found, "max-price-per-token")
    assert (f.severity, f.loc) == ("error", f"provider.max_price.{key}")
    assert "looks like USD per token; max_price is USD per million tokens" in f.message
    assert f.message.endswith(fix)
    assert "admits-nothing" in codes(found)


def test_max_price_per_million_is_clean() -> None:
    assert lint_block({"max_price": {"prompt": 0.45, "completion": 2.2}}, K25) == []


def test_order_ignored() -> None:
    found = lint_block({"order": ["chutes/int4"], "ignore": ["chutes"]}, K25)
    assert codes(found) == ["order-ignored"]  # and not also order-excluded
    f = found[0]
    assert (f.severity, f.loc) == ("error", "provider.order[0]")
    assert f.message == "'chutes/int4' is also ignored by 'chutes': remove one of them"


def test_order_excluded() -> None:
    found = lint_block({"order": ["venice", "chutes/int4"], "quantizations": ["int4"]}, K25)
    assert codes(found) == ["order-excluded"]
    f = found[0]
    assert (f.severity, f.loc) == ("warning", "provider.order[0]")
    assert "venice: quantization 'unknown' not in ['int4']" in f.message


def test_unknown_quantization() -> None:
    found = lint_block({"quantizations": ["int4", "int3"]}, K25)
    assert codes(found) == ["unknown-quantization"]
    f = found[0]
    assert (f.severity, f.loc) == ("error", "provider.quantizations[1]")
    assert f.message.startswith("'int3' is not a quantization OpenRouter knows (int4, int8, fp4")


def test_latency_in_ms() -> None:
    found = lint_block({"preferred_max_latency": 2000}, K25)
    assert codes(found) == ["latency-in-ms"]
    f = found[0]
    assert (f.severity, f.loc) == ("warning", "provider.preferred_max_latency")
    assert "looks like milliseconds; preferred_max_latency is in seconds (use 2)" in f.message
    assert lint_block({"preferred_max_latency": 2}, K25) == []
    assert codes(lint_block({"preferred_max_latency": {"p50": 1500}}, K25)) == ["latency-in-ms"]


def test_latency_in_ms_object_form_other_percentile() -> None:
    assert codes(lint_block({"preferred_max_latency": {"p90": 2000}}, K25)) == ["latency-in-ms"]


@pytest.mark.parametrize(
    ("block", "key"),
    [
        ({"bogus": 1}, "bogus"),
        ({"order": "chutes"}, "order"),
        ({"sort": "cheapest"}, "sort"),
    ],
)
def test_schema(block: dict[str, Any], key: str) -> None:
    found = lint_block(block, K25)
    assert set(codes(found)) == {"schema"}
    assert all(f.severity == "error" for f in found)
    assert any(f.loc.startswith("provider.") and f.loc.endswith(f".{key}") for f in found)


def test_schema_errors_do_not_hide_other_findings() -> None:
    # One schema error used to stop the lint: the six other findings were never shown.
    block = {
        "order": ["Fireworks", "chutes/int4"],
        "ignore": ["chutes"],
        "quantizations": ["int4", "int3"],
        "max_price": {"completion": 0.0000022},
        "preferred_max_latency": 2000,
        "bogus": 1,
    }
    found = lint_block(block, K25)
    assert [(f.code, f.loc) for f in found] == [
        ("schema", "provider.bogus"),
        ("display-name", "provider.order[0]"),
        ("unknown-quantization", "provider.quantizations[1]"),
        ("max-price-per-token", "provider.max_price.completion"),
        ("latency-in-ms", "provider.preferred_max_latency"),
        ("admits-nothing", "provider"),
        ("order-ignored", "provider.order[1]"),
    ]


def test_a_bad_entry_or_sub_key_leaves_its_siblings_linted() -> None:
    block = {
        "order": ["Fireworks", 3, "chutes/int4"],
        "ignore": ["chutes"],
        "max_price": {"prompt": "abc", "completion": 0.0000022},
        "sort": {"by": "price", "partition": "sideways"},
    }
    found = lint_block(block, K25)
    assert [(f.code, f.loc) for f in found] == [
        ("schema", "provider.order[1]"),
        ("schema", "provider.sort"),  # the string form of sort does not fit either
        ("schema", "provider.sort.partition"),
        ("schema", "provider.max_price.prompt"),
        ("display-name", "provider.order[0]"),
        ("max-price-per-token", "provider.max_price.completion"),
        ("admits-nothing", "provider"),
        ("order-ignored", "provider.order[2]"),
    ]


def test_schema_error_alone_and_a_non_mapping() -> None:
    assert [(f.code, f.loc) for f in lint_block({"sort": "cheapest"}, K25)] == [
        ("schema", "provider.sort")
    ]
    [f] = lint_block(["chutes"], K25)  # type: ignore[arg-type]
    assert (f.code, f.loc, f.message) == (
        "schema",
        "provider",
        "a provider block must be a mapping (or a file with provider: at top level)",
    )


def test_a_parsed_block_is_linted_the_same() -> None:
    block = {"order": ["chutes/int4"], "ignore": ["chutes"], "preferred_max_latency": 2000}
    assert lint_block(ProviderBlock.parse(block), K25) == lint_block(block, K25)


def test_schema_unknown_key_message() -> None:
    [f] = lint_block({"bogus": 1}, K25)
    assert (
        f.message
        == "not a key OpenRouter accepts in provider (see https://openrouter.ai/docs/features/provider-routing)"
    )


def test_schema_non_numeric_max_price() -> None:
    found = lint_block({"max_price": {"completion": "abc"}}, K25)
    assert codes(found) == ["schema"]


def test_checked_in_policy_lints_clean() -> None:
    doc = yaml.safe_load((ROOT / "policies" / "kimi-k2.5.yaml").read_text(encoding="utf-8"))
    assert lint_block(doc["provider"], K25) == []
    assert lint_block(doc["batch"]["provider"], K25) == []


def test_empty_block_is_clean() -> None:
    assert lint_block({}, K25) == []


# -- provider.options -----------------------------------------------------------------------------


def test_options_for_a_provider_of_the_model_are_clean() -> None:
    assert lint_block({"options": {"deepinfra": {"a": 1}, "chutes/int4": {}}}, K25) == []


@pytest.mark.parametrize(
    ("key", "severity", "end"),
    [
        ("DeepInfra", "error", "silently drops these options; use 'deepinfra'"),
        ("Moonshot AI", "error", "silently drops these options; use 'moonshotai'"),
        ("deepinfr", "warning", "these options are never sent; use 'deepinfra'"),
        ("siliconflw", "warning", "these options are never sent; use 'siliconflow'"),
    ],
)
def test_options_slug_with_a_suggestion(key: str, severity: str, end: str) -> None:
    [f] = lint_block({"options": {key: {}}}, K25)
    assert (f.code, f.severity, f.loc) == ("options-slug", severity, f"provider.options.{key}")
    assert f.message.endswith(end), f.message


def test_options_slug_without_a_suggestion_lists_the_slugs() -> None:
    [f] = lint_block({"options": {"groq": {"x": 1}}}, K25)
    assert f.severity == "warning"
    slugs = ", ".join(sorted({e.slug for e in K25}))
    assert (
        f.message
        == f"'groq' is no provider of this model: these options are never sent (slugs: {slugs})"
    )


def test_options_value_not_a_mapping_is_a_schema_error() -> None:
    found = lint_block({"options": {"deepinfra": "fast", "groq": {}}}, K25)
    assert [(f.code, f.loc) for f in found] == [
        ("schema", "provider.options.deepinfra"),
        ("options-slug", "provider.options.groq"),
    ]


# -- service tiers --------------------------------------------------------------------------------


def test_base_slug_variants_skips_declared_tier_endpoints() -> None:
    deepinfra = next(e for e in K25 if e.tag == "deepinfra/int4")
    tier = deepinfra.model_copy(update={"tag": "deepinfra/fast"})
    tier = Endpoint.model_validate({**tier.to_json_dict(), "service_tier": "priority"})
    assert lint_block({"order": ["deepinfra"]}, [*K25, tier]) == []
    untiered = Endpoint.model_validate({**tier.to_json_dict(), "service_tier": None})
    assert codes(lint_block({"order": ["deepinfra"]}, [*K25, untiered])) == ["base-slug-variants"]


# -- the CLI ----------------------------------------------------------------------------------------


def test_cli_lint_reports_every_finding(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from openrouter_probe.cli import cli

    path = tmp_path / "block.yaml"
    path.write_text(
        "provider:\n  order: [Fireworks]\n  bogus: 1\n  preferred_max_latency: 2000\n"
        "  options: {groq: {}}\n"
    )
    result = CliRunner().invoke(cli, ["policy", "lint", str(path), "--offline"])
    assert result.exit_code == 1
    assert [line.rsplit("[", 1)[-1] for line in result.stdout.splitlines()] == [
        "schema]",
        "display-name]",
        "latency-in-ms]",
        "options-slug]",
        # the block filters nothing: it admits 5 endpoints that are not native INT4
        *["not-native]"] * 5,
    ]
    assert "2 error(s), 7 warning(s)" in result.stderr


def test_cli_lint_given_a_spec_says_so_in_one_line() -> None:
    from click.testing import CliRunner

    from openrouter_probe.cli import cli

    spec = ROOT / "policies" / "kimi-k2.5.spec.yaml"
    result = CliRunner().invoke(cli, ["policy", "lint", str(spec), "--offline"])
    assert result.exit_code == 1
    [line] = [x for x in result.stderr.splitlines() if x.startswith("Error:")]
    assert line.startswith(f"Error: {spec}: this is a policy spec")
    assert line.endswith(
        "compile it first with `openrouter-probe policy compile "
        f"{spec} --offline -o {spec.parent / 'kimi-k2.5.yaml'}`"
    )


def _hand_edited_to_admit_fireworks(tmp_path: Path) -> Path:
    """The checked-in K2.5 policy with Fireworks put first and the precision filter removed."""
    doc = yaml.safe_load((ROOT / "policies" / "kimi-k2.5.yaml").read_text())
    doc["provider"]["order"].insert(0, "fireworks")
    doc["provider"]["ignore"] = ["baseten"]
    del doc["provider"]["quantizations"]
    path = tmp_path / "kimi-k2.5.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


FIREWORKS = (
    "warning: provider: admits fireworks (Fireworks), requantized: nvfp4 (from provider fact "
    "(2026-02-01)) is another 4-bit format than native int4; moonshotai/kimi-k2.5 is released in "
    "int4. Exclude it (ignore: [fireworks] or quantizations: [int4]) unless you mean it "
    "[not-native]"
)


def test_lint_warns_when_a_hand_edited_policy_admits_an_endpoint_that_is_not_native(
    tmp_path: Path,
) -> None:
    """Issue 18: a compiled policy edited to admit Fireworks (NVFP4 under an `unknown` tag) linted
    clean. Every admitted endpoint whose verdict is not native is named, with why."""
    from click.testing import CliRunner

    from openrouter_probe.cli import cli

    path = _hand_edited_to_admit_fireworks(tmp_path)
    result = CliRunner().invoke(cli, ["policy", "lint", str(path), "--offline"])
    assert result.exit_code == 0  # warnings
    assert result.stdout.splitlines() == [
        f"{path}: {FIREWORKS}",
        *(
            f"{path}: warning: provider: admits {tag} ({name}), undeclared: tag 'unknown' and "
            "no known fact; moonshotai/kimi-k2.5 is released in int4. Exclude it (ignore: "
            f"[{tag}] or quantizations: [int4]) unless you mean it [not-native]"
            for tag, name in (("together", "Together"), ("novita", "Novita"), ("venice", "Venice"))
        ),
    ]
    strict = CliRunner().invoke(cli, ["policy", "lint", str(path), "--offline", "--strict"])
    assert strict.exit_code == 1
    clean = CliRunner().invoke(cli, ["policy", "lint", str(ROOT / "policies" / "kimi-k2.5.yaml"),
                                     "--offline"])  # fmt: skip
    assert (clean.exit_code, clean.stdout) == (0, "")
    from openrouter_probe.cli.hooks import hooks

    hook = CliRunner().invoke(hooks, ["lint", str(path)])  # pre-commit: a warning, not a failure
    assert (hook.exit_code, hook.output.splitlines()[0]) == (0, f"{path}: {FIREWORKS}")


def test_not_native_needs_a_known_native_precision_and_heeds_the_tag(tmp_path: Path) -> None:
    snap = bundled_snapshot()
    everything = {"sort": "price"}
    assert not [
        f
        for f in lint_block(everything, snap.endpoints, model="x/unknown")
        if f.code == "not-native"
    ]  # the registry does not know the model's native precision: nothing to judge against
    facts = tmp_path / "facts.yaml"
    facts.write_text(
        "provider_facts:\n  - model: moonshotai/kimi-k2.5\n    provider: chutes\n"
        "    effective: fp8\n    date: '2026-11-01'\n    source: a test\n"
    )
    found = lint_block(
        {"only": ["chutes/int4"]},
        snap.endpoints,
        model=snap.model,
        registry=PrecisionRegistry.load(facts),
    )
    # tagged int4 (native) but known to serve fp8: quantizations cannot exclude it, ignore can
    assert [str(f) for f in found] == [
        "warning: provider: admits chutes/int4 (Chutes), upcast: fp8 (from provider fact "
        "(2026-11-01)) is wider than native int4; moonshotai/kimi-k2.5 is released in int4. "
        "Exclude it (ignore: [chutes]) unless you mean it [not-native]"
    ]


def test_a_provider_that_is_not_a_mapping_is_a_finding_of_the_command_and_the_hook(
    tmp_path: Path,
) -> None:
    """``policy lint`` and the pre-commit hook report it as ``lint_block``'s schema finding."""
    from click.testing import CliRunner

    from openrouter_probe.cli import cli
    from openrouter_probe.cli.hooks import hooks

    path = tmp_path / "block.yaml"
    path.write_text("provider: [chutes]\n", encoding="utf-8")
    said = (
        f"{path}: error: provider: a provider block must be a mapping (or a file with "
        "provider: at top level) [schema]"
    )
    command = CliRunner().invoke(
        cli, ["policy", "lint", str(path), "--offline", "--model", "moonshotai/kimi-k2.5"]
    )
    hook = CliRunner().invoke(hooks, ["lint", "--snapshot", "bundled", str(path)])
    assert (command.exit_code, hook.exit_code) == (1, 1)
    assert said in command.output.splitlines() and said in hook.output.splitlines()

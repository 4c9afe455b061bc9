"""Bad inputs (odd page entries, discounts, snapshots, files, budgets): each asserts the exact
behaviour, one line and never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from pydantic import ValidationError

from openrouter_probe.analysis.matrix import matrix_history
from openrouter_probe.api.client import Client
from openrouter_probe.api.schema import Endpoint, Pricing
from openrouter_probe.cli import cli
from openrouter_probe.errors import PolicyError, SnapshotError
from openrouter_probe.policy.compiler import compile_policy
from openrouter_probe.policy.spec import parse_spec
from openrouter_probe.rules.routing import route
from openrouter_probe.rules.snapshot import Snapshot, bundled_snapshot, load_snapshot
from tests.conftest import DATA, ROOT

POLICY = ROOT / "policies" / "kimi-k2.5.yaml"


def _ep(tag: str, out: str, **extra: object) -> Endpoint:
    return Endpoint.model_validate(
        {
            "provider_name": tag.split("/")[0].title(),
            "tag": tag,
            "quantization": "int4",
            "pricing": {"prompt": "0.0000004", "completion": out},
            "status": 0,
            "uptime_last_30m": 99.0,
            **extra,
        }
    )


def test_byok_only_page_entry_is_never_admitted() -> None:
    cheap_byok = _ep("byokco", "0.0000001", is_byok_only=True)
    chutes = _ep("chutes/int4", "0.0000022")
    decision = route(None, [cheap_byok, chutes])
    assert decision.admitted_tags == ["chutes/int4"]
    assert decision.exclusion("byokco").reason == "byok_only"


def test_deranked_page_entry_is_a_fallback() -> None:
    deranked = _ep("cheap", "0.000001", is_deranked=True)
    normal = _ep("chutes/int4", "0.0000022")
    decision = route(None, [deranked, normal])
    assert decision.weights == {"chutes/int4": 1.0, "cheap": 0.0}


@pytest.mark.parametrize("discount", [1.5, -0.1, float("nan")])
def test_discount_outside_0_1_is_an_error_not_unpriced(discount: float) -> None:
    with pytest.raises(ValidationError, match=r"discount .* is outside 0\.\.1"):
        Pricing.model_validate({"completion": "0.0000022", "discount": discount})
    assert (
        Pricing.model_validate({"completion": "0.0000022", "discount": 1}).completion_usd_per_m == 0
    )


def test_compiler_refuses_an_auto_ignore_that_hits_other_variants() -> None:
    snap = bundled_snapshot()
    doc = snap.to_json()
    eps = doc["data"]["endpoints"]
    together = next(e for e in eps if e["tag"] == "together")
    together["uptime_last_30m"] = 80.0
    eps.append(dict(together, tag="together/turbo", uptime_last_30m=99.9))
    fresh = Snapshot(
        model=snap.model, data=doc["data"], taken_at=snap.taken_at, source="file", origin="edited"
    )
    spec = parse_spec({"model": snap.model, "precision": "any", "min_uptime_30m_pct": 95})
    with pytest.raises(PolicyError, match=r"also ignores together/turbo"):
        compile_policy(spec, fresh)


def test_history_dedupes_and_rejects_undated_differences(tmp_path: Path) -> None:
    snap = bundled_snapshot()
    assert len(matrix_history([snap, snap])) == 11
    doc = snap.to_json()
    doc["data"]["endpoints"][0]["pricing"]["completion"] = "0.0000025"
    other = Snapshot(
        model=snap.model,
        data=doc["data"],
        taken_at=snap.taken_at,
        source="file",
        origin="raw2.json",
    )
    with pytest.raises(SnapshotError, match="differ but carry the same time"):
        matrix_history([snap, other])


def test_naive_taken_at_is_read_as_utc(tmp_path: Path) -> None:
    doc = bundled_snapshot().to_json()
    doc["taken_at"] = "2026-03-01T12:00:00"
    doc["data"]["endpoints"][0]["pricing"]["completion"] = "0.0000025"
    path = tmp_path / "naive.json"
    path.write_text(json.dumps(doc))
    later = load_snapshot(path)
    assert later.taken_at.utcoffset() is not None
    history = matrix_history([bundled_snapshot(), later])
    changed = history[history["change"] == "changed"]
    assert list(changed["tag"]) == ["chutes/int4"]
    assert "output_usd_per_m $2.20 -> $2.50" in changed["changes"].iloc[0]


def test_snapshot_error_names_the_file_given(tmp_path: Path) -> None:
    doc = bundled_snapshot().to_json()
    doc["data"]["endpoints"] = "oops"
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(SnapshotError) as info:
        load_snapshot(path)
    assert str(info.value).startswith(f"{path}: data.endpoints")


def test_unknown_capitalised_key_is_named() -> None:
    with pytest.raises(PolicyError) as info:
        parse_spec({"model": "moonshotai/kimi-k2.5", "Ignore": ["fireworks"]})
    assert info.value.errors[0][0] == "Ignore"


def test_provider_page_request_carries_no_key(replay_server) -> None:
    base, routes, seen = replay_server
    routes["/moonshotai/kimi-k2.5/providers"] = (200, "<html></html>", "text/html")
    Client(base_url=f"{base}/api/v1", api_key="secret-key-value").page("moonshotai/kimi-k2.5")
    assert "authorization" not in seen[0]


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def _one_line_error(result: object, exit_code: int = 1) -> str:
    assert result.exit_code == exit_code, result.output  # type: ignore[attr-defined]
    assert "Traceback" not in result.output  # type: ignore[attr-defined]
    lines = result.stderr.strip().splitlines()  # type: ignore[attr-defined]
    return lines[-1]


def test_binary_files_are_one_line_errors(runner: CliRunner, tmp_path: Path) -> None:
    binary = tmp_path / "bin.json"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\x00\xff\xfe")
    line = _one_line_error(
        runner.invoke(cli, ["endpoints", "moonshotai/kimi-k2.5", "--snapshot", str(binary)])
    )
    assert f"{binary}: not a text file" in line
    line = _one_line_error(runner.invoke(cli, ["policy", "explain", str(binary)]))
    assert "not a text file" in line
    line = _one_line_error(runner.invoke(cli, ["models", "--input", str(binary)]))
    assert "not a GET /models body" in line


def test_unwritable_output_is_one_line(runner: CliRunner, tmp_path: Path) -> None:
    # a missing folder is made now: under a file, none can be (as root too)
    (tmp_path / "a-file").write_text("")
    result = runner.invoke(
        cli,
        [
            "policy",
            "compile",
            str(ROOT / "policies" / "kimi-k2.5.spec.yaml"),
            "--offline",
            "-o",
            str(tmp_path / "a-file" / "x.yaml"),
        ],
    )
    assert "cannot write the compiled policy" in _one_line_error(result)


def test_huge_budget_is_one_line(runner: CliRunner) -> None:
    result = runner.invoke(
        cli,
        [
            "budget",
            "moonshotai/kimi-k2.5",
            "--offline",
            "--budget-usd",
            "1e999999999",
            "--output-tokens",
            "60M",
        ],
    )
    assert "too large" in _one_line_error(result, exit_code=2)  # a usage error (issue 26)


def test_policy_check_on_a_malformed_policy_exits_2(runner: CliRunner, tmp_path: Path) -> None:
    text = POLICY.read_text().replace("routing:\n", "routing: [1, 2]\nold_routing:\n", 1)
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    result = runner.invoke(cli, ["policy", "check", str(bad), "--offline"])
    assert "routing must be a mapping" in _one_line_error(result, exit_code=2)


def test_page_fixture_flags_survive_into_endpoints() -> None:
    from openrouter_probe.api.scrape import parse_provider_page

    html = (DATA / "pages" / "kimi-k2.5-providers.html").read_text()
    parsed = parse_provider_page(html, model="moonshotai/kimi-k2.5")
    assert all((e.model_extra or {}).get("is_byok_only") is False for e in parsed.endpoints)
    assert route(None, parsed.endpoints).admitted_tags

"""``check_policy`` and ``openrouter-probe policy check|compile|explain|lint`` on the K2.5 policy."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from openrouter_probe.cli import cli
from openrouter_probe.drift import check_policy
from openrouter_probe.errors import PolicyError
from openrouter_probe.policy import load_compiled_policy
from openrouter_probe.snapshot import bundled_snapshot, load_snapshot
from tests.conftest import ROOT

POLICY = ROOT / "policies" / "kimi-k2.5.yaml"
SPEC = ROOT / "policies" / "kimi-k2.5.spec.yaml"


def _edited(tmp_path: Path, edit) -> Path:
    doc = bundled_snapshot().to_json()
    edit({e["tag"]: e for e in doc["data"]["endpoints"]}, doc["data"]["endpoints"])
    path = tmp_path / "fresh.json"
    path.write_text(json.dumps(doc))
    return path


def test_no_drift_against_its_own_snapshot() -> None:
    report = check_policy(load_compiled_policy(POLICY), bundled_snapshot())
    assert report.changes == []
    assert report.exit_code == 0


def test_quantization_change_is_drift(tmp_path: Path) -> None:
    path = _edited(tmp_path, lambda by_tag, _: by_tag["chutes/int4"].update(quantization="fp8"))
    report = check_policy(load_compiled_policy(POLICY), load_snapshot(path))
    assert report.exit_code == 1
    kinds = {(c.kind, c.tag) for c in report.changes}
    assert ("quantization", "chutes/int4") in kinds
    assert ("admitted", None) in kinds
    text = report.render()
    assert "chutes/int4 quantization tag changed 'int4' -> 'fp8'" in text
    assert "no longer admitted: chutes/int4" in text


def test_price_move_beyond_threshold(tmp_path: Path) -> None:
    def raise_price(by_tag, _):
        by_tag["deepinfra/int4"]["pricing"]["completion"] = "0.0000025"  # 2.25 -> 2.50: +11.1%
        by_tag["siliconflow/int4"]["pricing"]["completion"] = "0.0000023"  # 2.25 -> 2.30: +2.2%

    report = check_policy(
        load_compiled_policy(POLICY), load_snapshot(_edited(tmp_path, raise_price))
    )
    prices = [c for c in report.changes if c.kind == "price"]
    assert [c.tag for c in prices] == ["deepinfra/int4"]
    assert "$2.25/M -> $2.5/M" in prices[0].message
    assert report.drifted
    loose = check_policy(
        load_compiled_policy(POLICY),
        load_snapshot(_edited(tmp_path, raise_price)),
        price_threshold_pct=20,
    )
    assert not [c for c in loose.changes if c.kind == "price"]


def test_added_and_ordered_gone(tmp_path: Path) -> None:
    def edit(by_tag, endpoints):
        endpoints.remove(by_tag["parasail/int4"])
        new = dict(by_tag["chutes/int4"], tag="nebius/int4", provider_name="Nebius")
        endpoints.append(new)

    report = check_policy(load_compiled_policy(POLICY), load_snapshot(_edited(tmp_path, edit)))
    by_kind = {c.kind: c for c in report.changes}
    assert (
        "parasail/int4 is in provider.order but no longer serves" in by_kind["ordered-gone"].message
    )
    assert (
        "new endpoint nebius/int4 (Nebius, quantization int4); the block ADMITS it"
        in by_kind["added"].message
    )
    assert report.exit_code == 1


def test_status_change_alone_is_not_drift(tmp_path: Path) -> None:
    path = _edited(tmp_path, lambda by_tag, _: by_tag["deepinfra/int4"].update(status=-2))
    report = check_policy(load_compiled_policy(POLICY), load_snapshot(path))
    assert [c.kind for c in report.changes] == ["status"]
    assert report.exit_code == 0


def test_policy_for_another_model(tmp_path: Path) -> None:
    doc = bundled_snapshot().to_json()
    doc["model"] = doc["data"]["id"] = "moonshotai/kimi-k3"
    path = tmp_path / "k3.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(PolicyError, match=r"policy is for moonshotai/kimi-k2\.5"):
        check_policy(load_compiled_policy(POLICY), load_snapshot(path))


# -- CLI ----------------------------------------------------------------------------------------------


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def test_cli_compile_reproduces_checked_in_policy(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    result = runner.invoke(cli, ["policy", "compile", "policies/kimi-k2.5.spec.yaml", "--offline"])
    assert result.exit_code == 0, result.output
    assert result.stdout == POLICY.read_text()
    out = tmp_path / "p.yaml"
    result = runner.invoke(cli, ["policy", "compile", str(SPEC), "--offline", "-o", str(out)])
    assert result.exit_code == 0
    assert out.read_text() == POLICY.read_text()
    assert "admits chutes/int4, deepinfra/int4" in result.stderr


def test_cli_check_exit_codes(runner: CliRunner, tmp_path: Path) -> None:
    ok = runner.invoke(cli, ["policy", "check", str(POLICY), "--offline"])
    assert ok.exit_code == 0, ok.output
    assert "no drift" in ok.stdout
    path = _edited(tmp_path, lambda by_tag, _: by_tag["chutes/int4"].update(quantization="fp8"))
    drift = runner.invoke(cli, ["policy", "check", str(POLICY), "--snapshot", str(path)])
    assert drift.exit_code == 1
    assert (
        "DRIFT quantization: chutes/int4 quantization tag changed 'int4' -> 'fp8'" in drift.stdout
    )
    as_json = runner.invoke(
        cli, ["policy", "check", str(POLICY), "--snapshot", str(path), "--format", "json"]
    )
    assert json.loads(as_json.stdout)["drift"] is True
    broken = tmp_path / "broken.yaml"
    broken.write_text("provider: {order: [a]}\n")
    error = runner.invoke(cli, ["policy", "check", str(broken), "--offline"])
    assert error.exit_code == 2
    assert "not a compiled policy" in error.stderr


def test_cli_explain_spec_and_policy(runner: CliRunner) -> None:
    from_policy = runner.invoke(cli, ["policy", "explain", str(POLICY), "--format", "csv"])
    from_spec = runner.invoke(cli, ["policy", "explain", str(SPEC), "--offline", "--format", "csv"])
    assert from_policy.exit_code == 0 and from_spec.exit_code == 0
    assert from_policy.stdout == from_spec.stdout
    assert "fireworks,Fireworks,unknown,nvfp4,requantized" in from_policy.stdout
    table = runner.invoke(cli, ["policy", "explain", str(POLICY)])
    assert "trade-off: strict precision also drops together, novita, venice" in table.stdout
    assert "6 endpoints (222 tok/s p50 summed) instead of 9 (327 tok/s)" in table.stdout


def test_cli_lint(runner: CliRunner, tmp_path: Path) -> None:
    clean = runner.invoke(cli, ["policy", "lint", str(POLICY), "--offline"])
    assert clean.exit_code == 0
    assert "clean" in clean.stderr
    block = tmp_path / "hand.yaml"
    block.write_text("ignore: [Fireworks, BaseTen]\nmax_price: {completion: 0.0000022}\n")
    bad = runner.invoke(cli, ["policy", "lint", str(block), "--offline"])
    assert bad.exit_code == 1
    assert "provider.ignore[0]: 'Fireworks' is a display name" in bad.stdout
    assert "use 'fireworks'" in bad.stdout and "use 'baseten'" in bad.stdout
    assert "provider.max_price.completion" in bad.stdout and "use 2.2" in bad.stdout
    no_model = runner.invoke(cli, ["policy", "lint", str(block)])
    assert no_model.exit_code == 2


def test_cli_compile_bad_spec_is_one_line(runner: CliRunner, tmp_path: Path) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text("model: moonshotai/kimi-k2.5\nprecision: natve\n")
    result = runner.invoke(cli, ["policy", "compile", str(spec), "--offline"])
    assert result.exit_code == 1
    assert f"Error: {spec}: invalid policy spec (precision:" in result.stderr
    assert "Traceback" not in result.output

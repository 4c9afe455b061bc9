"""``check_policy`` and ``openrouter-probe policy check|compile|explain|lint`` on the K2.5 policy."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from openrouter_probe.cli import cli
from openrouter_probe.cli._common import term_of
from openrouter_probe.errors import PolicyError, rendered
from openrouter_probe.policy.compiled import load_compiled_policy
from openrouter_probe.policy.compiler import compile_policy
from openrouter_probe.policy.drift import check_policy, find_spec
from openrouter_probe.policy.spec import load_spec, parse_spec
from openrouter_probe.rules.snapshot import bundled_snapshot, load_snapshot
from tests.conftest import ROOT

POLICY = ROOT / "policies" / "kimi-k2.5.yaml"
SPEC = ROOT / "policies" / "kimi-k2.5.spec.yaml"
#: ``policy check``: says a report's fix as its command line
CHECK = cli.commands["policy"].commands["check"]  # type: ignore[attr-defined]


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
    assert "$2.25/M -> $2.50/M" in prices[0].message
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
    text = table.stdout.replace("\n  ", " ")  # the prose wraps to the table's width
    assert "trade-off: strict precision also drops together, novita, venice" in text
    assert "6 endpoints (222 tok/s p50 summed) instead of 9 (327 tok/s)" in text


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


# -- what the changes do, and the fix -----------------------------------------------------------------


def _check(tmp_path: Path, edit, **kwargs):
    return check_policy(
        load_compiled_policy(POLICY), load_snapshot(_edited(tmp_path, edit)), **kwargs
    )


def test_a_retagged_provider_is_one_quantization_change(tmp_path: Path) -> None:
    report = _check(
        tmp_path,
        lambda by_tag, _: by_tag["chutes/int4"].update(tag="chutes/fp4", quantization="fp4"),
    )
    per_endpoint = [c for c in report.changes if c.tag is not None]
    assert [(c.kind, c.tag, c.matters) for c in per_endpoint] == [
        ("quantization", "chutes/int4", True)
    ]
    assert per_endpoint[0].message == (
        "Chutes: chutes/int4 is now chutes/fp4 (quantization 'int4' -> 'fp4'); "
        "the block excludes it"
    )
    assert "order now starts with deepinfra/int4 (the first entry, chutes/int4, is gone)" in (
        report.effects
    )
    assert "blended output price $2.20/M -> $2.25/M" in report.effects
    assert report.blended_compiled_usd_per_m == pytest.approx(2.2008)
    assert report.blended_now_usd_per_m == pytest.approx(2.25)
    assert report.exit_code == 1


def test_an_excluded_provider_gone_is_info_only(tmp_path: Path) -> None:
    report = _check(tmp_path, lambda by_tag, eps: eps.remove(by_tag["fireworks"]))
    assert [str(c) for c in report.changes] == [
        "info  gone: fireworks (Fireworks, already excluded) no longer serves the model"
    ]
    assert report.exit_code == 0
    assert report.effects == []
    assert report.render().splitlines()[-2:] == [
        "no drift that matters",
        "nothing to do: no change touches what the policy admits, orders or pays",
    ]


def test_changes_to_excluded_endpoints_are_info(tmp_path: Path) -> None:
    def edit(by_tag, endpoints):
        by_tag["fireworks"]["pricing"]["completion"] = "0.000009"
        by_tag["together"].update(quantization="fp8")
        endpoints.append(dict(by_tag["baseten/fp4"], tag="baseten/fp8", quantization="fp8"))

    report = _check(tmp_path, edit)
    assert {(c.kind, c.tag): c.matters for c in report.changes} == {
        ("added", "baseten/fp8"): False,
        ("price", "fireworks"): False,
        ("quantization", "together"): False,
    }
    assert report.exit_code == 0


def test_a_new_cheaper_endpoint_ranks_behind_dearer_ones(tmp_path: Path) -> None:
    def edit(by_tag, endpoints):
        new = dict(by_tag["chutes/int4"], tag="nebius/int4", provider_name="Nebius")
        new["pricing"] = dict(new["pricing"], completion="0.0000019")
        endpoints.append(new)

    report = _check(tmp_path, edit, spec=load_spec(SPEC), spec_file=str(SPEC))
    assert (
        "new endpoint nebius/int4 is admitted at $1.90/M but ranks 7th behind 6 dearer ones"
        in report.effects
    )
    assert report.recompiled is not None
    assert report.recompiled.provider.order == [
        "nebius/int4",
        "chutes/int4",
        "deepinfra/int4",
        "siliconflow/int4",
        "atlas-cloud/int4",
        "parasail/int4",
        "moonshotai/int4",
    ]
    assert (
        "a re-compile sets provider.order to nebius/int4, chutes/int4, deepinfra/int4, "
        "siliconflow/int4, atlas-cloud/int4, parasail/int4, moonshotai/int4 (now chutes/int4, "
        "deepinfra/int4, siliconflow/int4, atlas-cloud/int4, parasail/int4, moonshotai/int4)"
        in report.effects
    )
    assert "blended output price after a re-compile $2.20/M -> $1.90/M" in report.effects
    # Nebius first (uptime 98.4% copied from Chutes), Chutes takes 1.6% × 98.4% at $2.20/M, ...
    assert report.blended_recompiled_usd_per_m == pytest.approx(
        0.984 * 1.9 + 0.016 * 0.984 * 2.2 + 0.016 * 0.016 * 0.997 * 2.25, abs=1e-4
    )
    d = report.to_dict()
    assert d["recompiled"] == {"provider": report.recompiled.provider.to_request()}
    assert d["blended_output_usd_per_m"]["compiled"] == pytest.approx(2.2008)
    assert (report.fix.code, report.fix.values) == (
        "drift",
        {"spec_file": str(SPEC), "policy": "POLICY"},
    )
    assert d["fix"] == (
        f'fix: re-compile it in place: `report.recompiled.save("POLICY")` (from {SPEC})'
    )
    assert report.to_dict(term_of(CHECK))["fix"] == (
        f"fix: re-compile it in place: openrouter-probe policy check POLICY --write (from {SPEC})"
    )


def test_an_order_only_change(tmp_path: Path) -> None:
    spec = parse_spec({"model": "moonshotai/kimi-k2.5", "precision": "native", "strategy": "sort"})
    compiled = compile_policy(spec, bundled_snapshot())
    assert compiled.admitted[:2] == ["chutes/int4", "deepinfra/int4"]
    # Chutes 2.20 -> 2.30 (+4.5%, under the threshold) sorts it behind DeepInfra and SiliconFlow (2.25).
    path = _edited(
        tmp_path,
        lambda by_tag, _: by_tag["chutes/int4"]["pricing"].update(completion="0.0000023"),
    )
    report = check_policy(compiled, load_snapshot(path))
    assert [(c.kind, c.matters) for c in report.changes] == [("order", True)]
    assert report.changes[0].message.startswith(
        "routing order changed: ['chutes/int4', 'deepinfra/int4', "
    )
    assert report.effects == [
        "order now starts with deepinfra/int4 (the first entry, chutes/int4, is now 3rd)",
        "blended output price $2.20/M -> $2.25/M",
    ]
    assert report.exit_code == 1


def test_a_non_ordered_admitted_endpoint_disappears(tmp_path: Path) -> None:
    spec = parse_spec({"model": "moonshotai/kimi-k2.5", "precision": "native", "strategy": "sort"})
    compiled = compile_policy(spec, bundled_snapshot())
    assert compiled.provider.order is None
    path = _edited(tmp_path, lambda by_tag, eps: eps.remove(by_tag["parasail/int4"]))
    report = check_policy(compiled, load_snapshot(path))
    assert [(c.kind, c.tag, c.matters) for c in report.changes] == [
        ("gone", "parasail/int4", True),
        ("admitted", None, True),
    ]
    assert (
        report.changes[0].message == "parasail/int4 (Parasail, admitted) no longer serves the model"
    )
    assert report.fix.code == "drift-no-spec"
    assert report.fix.render(term_of(CHECK)) == (
        "fix: re-compile from the spec it came from (provenance names no spec): "
        "openrouter-probe policy check POLICY --spec SPEC --write"
    )
    assert str(report.fix).endswith(
        "`orp.check_policy(policy, snapshot, spec=orp.load_spec(SPEC))`, then "
        '`report.recompiled.save("POLICY")`'
    )


def test_a_price_that_disappears_or_appears_is_drift(tmp_path: Path) -> None:
    gone = _check(tmp_path, lambda by_tag, _: by_tag["deepinfra/int4"]["pricing"].pop("prompt"))
    assert [str(c) for c in gone.changes] == [
        "DRIFT price: deepinfra/int4 input price ($0.45/M) is gone"
    ]
    assert gone.exit_code == 1
    # Compiled where the input price was missing, checked where it is listed again.
    compiled = compile_policy(load_spec(SPEC), load_snapshot(tmp_path / "fresh.json"))
    appears = check_policy(compiled, bundled_snapshot())
    assert [str(c) for c in appears.changes] == [
        "DRIFT price: deepinfra/int4 input price appears: $0.45/M"
    ]


def test_find_spec_beside_the_policy(tmp_path: Path) -> None:
    compiled = load_compiled_policy(POLICY)
    spec, path, note = find_spec(compiled, POLICY)
    assert path == SPEC and note is None and spec == load_spec(SPEC)
    alone = tmp_path / "p.yaml"
    alone.write_text(POLICY.read_text())
    assert find_spec(compiled, alone) == (
        None,
        None,
        f"provenance.spec.file names kimi-k2.5.spec.yaml, which is not beside {alone}",
    )
    (tmp_path / "kimi-k2.5.spec.yaml").write_text(SPEC.read_text() + "zdr: true\n")
    spec, path, note = find_spec(compiled, alone)
    assert spec is not None and spec.zdr is True
    assert note == f"{tmp_path / 'kimi-k2.5.spec.yaml'} was edited since the compile"


def test_cli_check_says_what_to_do_and_json_carries_the_recompile(
    runner: CliRunner, tmp_path: Path
) -> None:
    path = _edited(
        tmp_path,
        lambda by_tag, _: by_tag["chutes/int4"].update(tag="chutes/fp4", quantization="fp4"),
    )
    text = runner.invoke(cli, ["policy", "check", str(POLICY), "--snapshot", str(path)])
    assert text.exit_code == 1
    assert text.stdout.splitlines()[-1] == (
        f"fix: re-compile it in place: openrouter-probe policy check {POLICY} --snapshot {path} "
        f"--write (from {SPEC})"
    )
    as_json = runner.invoke(
        cli, ["policy", "check", str(POLICY), "--snapshot", str(path), "--format", "json"]
    )
    doc = json.loads(as_json.stdout)
    assert doc["recompiled"] == {
        "provider": {
            "order": [
                "deepinfra/int4",
                "siliconflow/int4",
                "atlas-cloud/int4",
                "parasail/int4",
                "moonshotai/int4",
            ],
            "ignore": ["baseten", "fireworks"],
            "quantizations": ["int4"],
        }
    }
    assert doc["blended_output_usd_per_m"] == {"compiled": 2.2008, "now": 2.25, "recompiled": 2.25}


def test_cli_check_write_recompiles_in_place(runner: CliRunner, tmp_path: Path) -> None:
    policy, spec = tmp_path / "kimi-k2.5.yaml", tmp_path / "kimi-k2.5.spec.yaml"
    policy.write_text(POLICY.read_text())
    spec.write_text(SPEC.read_text())
    path = _edited(
        tmp_path,
        lambda by_tag, _: by_tag["chutes/int4"].update(tag="chutes/fp4", quantization="fp4"),
    )
    result = runner.invoke(
        cli, ["policy", "check", str(policy), "--snapshot", str(path), "--write"]
    )
    assert result.exit_code == 0, result.output
    assert f"wrote {policy}: admits deepinfra/int4, siliconflow/int4" in result.stderr
    expected = compile_policy(load_spec(spec), load_snapshot(path), spec_file=str(spec))
    assert policy.read_text() == expected.to_yaml()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temp left
    again = runner.invoke(cli, ["policy", "check", str(policy), "--snapshot", str(path)])
    assert again.exit_code == 0 and "no drift" in again.stdout


def test_cli_check_write_needs_the_spec(runner: CliRunner, tmp_path: Path) -> None:
    policy = tmp_path / "p.yaml"
    policy.write_text(POLICY.read_text())
    path = _edited(tmp_path, lambda by_tag, eps: eps.remove(by_tag["chutes/int4"]))
    result = runner.invoke(
        cli, ["policy", "check", str(policy), "--snapshot", str(path), "--write"]
    )
    assert result.exit_code == 2
    assert (
        f"Error: {policy}: --write re-compiles from the spec the policy was compiled from, and "
        f"provenance.spec.file names kimi-k2.5.spec.yaml, which is not beside {policy}; "
        "give it with --spec SPEC"
    ) in result.stderr
    assert policy.read_text() == POLICY.read_text()
    given = runner.invoke(
        cli,
        ["policy", "check", str(policy), "--snapshot", str(path), "--spec", str(SPEC), "--write"],
    )
    assert given.exit_code == 0, given.output
    assert "chutes/int4" not in yaml.safe_load(policy.read_text())["provider"]["order"]


@pytest.mark.parametrize(
    ("n", "text"),
    [
        (1, "1st"),
        (2, "2nd"),
        (3, "3rd"),
        (4, "4th"),
        (11, "11th"),
        (12, "12th"),
        (13, "13th"),
        (21, "21st"),
        (22, "22nd"),
        (23, "23rd"),
        (111, "111th"),
    ],
)
def test_ordinals(n: int, text: str) -> None:
    from openrouter_probe.policy.changes import _ordinal

    assert _ordinal(n) == text


def test_two_endpoints_of_one_provider_retagged_are_not_paired(tmp_path: Path) -> None:
    def two(by_tag, endpoints):
        endpoints.append(dict(by_tag["chutes/int4"], tag="chutes/turbo"))

    before = load_snapshot(_edited(tmp_path, two))
    compiled = compile_policy(load_spec(SPEC), before)

    def retag(by_tag, endpoints):
        two(by_tag, endpoints)
        by_tag["chutes/int4"].update(tag="chutes/fp4", quantization="fp4")
        endpoints[-1].update(tag="chutes/fp8", quantization="fp8")

    report = check_policy(compiled, load_snapshot(_edited(tmp_path, retag)))
    kinds = sorted((c.kind, c.tag) for c in report.changes if c.tag)
    assert kinds == [
        ("added", "chutes/fp4"),
        ("added", "chutes/fp8"),
        ("ordered-gone", "chutes/int4"),
        ("ordered-gone", "chutes/turbo"),
    ]


def test_a_free_price_that_rises(tmp_path: Path) -> None:
    def free(by_tag, _):
        by_tag["deepinfra/int4"]["pricing"]["prompt"] = "0"

    compiled = compile_policy(load_spec(SPEC), load_snapshot(_edited(tmp_path, free)))
    report = check_policy(compiled, bundled_snapshot())
    assert [c.message for c in report.changes] == [
        "deepinfra/int4 input price $0.00/M -> $0.45/M (+100.0%, threshold ±5%)"
    ]


def test_endpoints_admitted_now_are_ranked(tmp_path: Path) -> None:
    def edit(by_tag, _):
        by_tag["together"].update(quantization="int4")  # $2.80/M
        by_tag["novita"].update(quantization="int4")
        by_tag["novita"]["pricing"]["completion"] = "0.000001"

    report = _check(tmp_path, edit)
    assert report.effects == [
        "novita, excluded before, is admitted at $1.00/M but ranks 7th behind 6 dearer ones",
        "together, excluded before, is admitted at $2.80/M but ranks 8th behind 1 dearer one",
    ]
    assert str(report.changes[-1]) == (
        "DRIFT admitted: admitted set changed: newly admitted: novita, together"
    )


def test_a_new_endpoint_that_ranks_first_under_sort(tmp_path: Path) -> None:
    spec = parse_spec({"model": "moonshotai/kimi-k2.5", "precision": "native", "strategy": "sort"})
    compiled = compile_policy(spec, bundled_snapshot())

    def edit(by_tag, endpoints):
        new = dict(by_tag["chutes/int4"], tag="nebius/int4", provider_name="Nebius")
        new["pricing"] = dict(new["pricing"], completion="0.000001")
        endpoints.append(new)

    report = check_policy(compiled, load_snapshot(_edited(tmp_path, edit)))
    assert report.effects == [
        "order now starts with nebius/int4 (the first entry, chutes/int4, is now 2nd)",
        "new endpoint nebius/int4 is admitted at $1.00/M and ranks 1st",
        "blended output price $2.20/M -> $1.02/M",
    ]


# -- the rest of what a wrong drift decision would change ---------------------------------------------


def test_json_document_by_key(runner: CliRunner, tmp_path: Path) -> None:
    path = _edited(tmp_path, lambda by_tag, _: by_tag["deepinfra/int4"].update(status=-2))
    result = runner.invoke(
        cli, ["policy", "check", str(POLICY), "--snapshot", str(path), "--format", "json"]
    )
    assert result.exit_code == 0
    doc = json.loads(result.stdout)
    new_sha = load_snapshot(path).sha256
    assert doc == {
        "model": "moonshotai/kimi-k2.5",
        "drift": False,
        "compiled_snapshot": load_compiled_policy(POLICY).provenance["snapshot"]["sha256"],
        "new_snapshot": new_sha,
        "changes": [
            {
                "kind": "status",
                "tag": "deepinfra/int4",
                "message": "deepinfra/int4 status 0 -> -2",
                "matters": False,
            }
        ],
        "effects": [
            "a re-compile gives the same provider block (its recorded decisions are refreshed)"
        ],
        "blended_output_usd_per_m": {"compiled": 2.2008, "now": 2.2008, "recompiled": 2.2008},
        "recompiled": {"provider": load_compiled_policy(POLICY).provider.to_request()},
        "fix": "nothing to do: no change touches what the policy admits, orders or pays",
    }


def test_render_head_and_verdict_lines(tmp_path: Path) -> None:
    report = _check(tmp_path, lambda by_tag, eps: eps.remove(by_tag["chutes/int4"]))
    lines = report.render().splitlines()
    assert lines[0] == (
        "moonshotai/kimi-k2.5: policy compiled on snapshot sha256:a647eec58c5b, checked against "
        f"{report.new_snapshot[:19]}"
    )
    assert lines[-2] == "drift"
    assert report.to_dict()["recompiled"] is None  # no spec given
    assert report.to_dict()["blended_output_usd_per_m"]["recompiled"] is None


def test_find_spec_without_a_spec_in_provenance() -> None:
    compiled = load_compiled_policy(POLICY)
    for spec in ("kimi-k2.5.spec.yaml", {"sha256": "sha256:x"}, None):
        compiled.provenance["spec"] = spec
        assert find_spec(compiled, POLICY) == (
            None,
            None,
            "the policy's provenance names no spec file",
        )


def test_unchanged_prices_at_a_zero_threshold() -> None:
    report = check_policy(load_compiled_policy(POLICY), bundled_snapshot(), price_threshold_pct=0)
    assert report.changes == []


def test_a_move_exactly_at_the_threshold_is_not_reported(tmp_path: Path) -> None:
    def raise_price(by_tag, _):
        by_tag["deepinfra/int4"]["pricing"]["completion"] = "0.0000025"  # 2.25 -> 2.50

    exactly = (2.5 - 2.25) / 2.25 * 100
    report = _check(tmp_path, raise_price, price_threshold_pct=exactly)
    assert report.changes == []


def test_one_price_gone_or_appearing_does_not_hide_the_other(tmp_path: Path) -> None:
    def edit(by_tag, _):
        by_tag["deepinfra/int4"]["pricing"].pop("prompt")
        by_tag["deepinfra/int4"]["pricing"]["completion"] = "0.000003"
        by_tag["fireworks"]["pricing"].pop("prompt")  # excluded: info

    report = _check(tmp_path, edit)
    assert [(c.kind, c.tag, c.matters, c.message) for c in report.changes] == [
        ("price", "deepinfra/int4", True, "deepinfra/int4 input price ($0.45/M) is gone"),
        (
            "price",
            "deepinfra/int4",
            True,
            "deepinfra/int4 output price $2.25/M -> $3.00/M (+33.3%, threshold ±5%)",
        ),
        ("price", "fireworks", False, "fireworks input price ($0.60/M) is gone"),
    ]
    # Compiled without the input prices, checked where they are back and one output moved.
    compiled = compile_policy(load_spec(SPEC), load_snapshot(tmp_path / "fresh.json"))
    back = check_policy(compiled, bundled_snapshot())
    assert [(c.tag, c.matters, c.message) for c in back.changes] == [
        ("deepinfra/int4", True, "deepinfra/int4 input price appears: $0.45/M"),
        (
            "deepinfra/int4",
            True,
            "deepinfra/int4 output price $3.00/M -> $2.25/M (-25.0%, threshold ±5%)",
        ),
        ("fireworks", False, "fireworks input price appears: $0.60/M"),
    ]


def test_no_input_price_either_side_still_checks_the_output(tmp_path: Path) -> None:
    def no_input(by_tag, _):
        by_tag["deepinfra/int4"]["pricing"].pop("prompt")

    compiled = compile_policy(load_spec(SPEC), load_snapshot(_edited(tmp_path, no_input)))

    def also_dearer(by_tag, endpoints):
        no_input(by_tag, endpoints)
        by_tag["deepinfra/int4"]["pricing"]["completion"] = "0.000003"

    report = check_policy(compiled, load_snapshot(_edited(tmp_path, also_dearer)))
    assert [c.message for c in report.changes] == [
        "deepinfra/int4 output price $2.25/M -> $3.00/M (+33.3%, threshold ±5%)"
    ]


def test_retag_details(tmp_path: Path) -> None:
    # Same quantization under a new tag: still admitted.
    same = _check(tmp_path, lambda by_tag, _: by_tag["chutes/int4"].update(tag="chutes/int4-v2"))
    assert str(same.changes[0]) == (
        "DRIFT quantization: Chutes: chutes/int4 is now chutes/int4-v2 (quantization 'int4' -> "
        "'int4'); the block ADMITS it"
    )
    # An excluded provider retagged stays excluded: info.
    fw = _check(
        tmp_path,
        lambda by_tag, _: by_tag["fireworks"].update(tag="fireworks/nvfp4", quantization="nvfp4"),
    )
    assert [(c.kind, c.matters) for c in fw.changes] == [("quantization", False)]
    # Another provider's name under the same slug is not the same provider.
    other = _check(
        tmp_path,
        lambda by_tag, _: by_tag["chutes/int4"].update(tag="chutes/fp4", provider_name="Chutes 2"),
    )
    assert sorted((c.kind, c.tag) for c in other.changes if c.tag) == [
        ("added", "chutes/fp4"),
        ("ordered-gone", "chutes/int4"),
    ]


def test_quantization_change_that_admits_an_endpoint_matters(tmp_path: Path) -> None:
    report = _check(tmp_path, lambda by_tag, _: by_tag["together"].update(quantization="int4"))
    assert [(c.kind, c.tag, c.matters) for c in report.changes] == [
        ("quantization", "together", True),
        ("admitted", None, True),
    ]


def test_recompile_effects_name_added_keys(tmp_path: Path) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text(SPEC.read_text() + "zdr: true\nmax_price: {output_usd_per_m: 2.5}\n")
    report = check_policy(
        load_compiled_policy(POLICY),
        load_snapshot(_edited(tmp_path, lambda by_tag, eps: eps.remove(by_tag["parasail/int4"]))),
        spec=load_spec(spec),
        spec_file=str(spec),
    )
    assert report.effects == [
        'a re-compile sets provider.max_price to {"completion": "2.5"} (now unset)',
        # atlas-cloud ($2.60/M) and moonshotai ($3/M) are over max_price
        "a re-compile sets provider.order to chutes/int4, deepinfra/int4, siliconflow/int4 "
        "(now chutes/int4, deepinfra/int4, siliconflow/int4, atlas-cloud/int4, "
        "parasail/int4, moonshotai/int4)",
        "a re-compile sets provider.zdr to True (now unset)",
        # each endpoint it drops, with its precision and prices (issue 18)
        "a re-compile drops atlas-cloud/int4 (AtlasCloud, int4 native, $0.50/M in, $2.60/M out)",
        "a re-compile drops parasail/int4 (Parasail, int4 native, $0.55/M in, $2.80/M out; "
        "gone from the snapshot)",
        "a re-compile drops moonshotai/int4 (Moonshot AI, int4 native, $0.60/M in, $3.00/M out)",
    ]


def test_retag_into_the_admitted_set_matters(tmp_path: Path) -> None:
    report = _check(
        tmp_path,
        lambda by_tag, _: by_tag["together"].update(tag="together/int4", quantization="int4"),
    )
    assert [(c.kind, c.tag, c.matters) for c in report.changes] == [
        ("quantization", "together", True),
        ("admitted", None, True),
    ]
    assert report.changes[1].message == "admitted set changed: newly admitted: together/int4"


def test_only_lost_endpoints_in_the_admitted_message(tmp_path: Path) -> None:
    report = _check(tmp_path, lambda by_tag, _: by_tag["chutes/int4"].update(quantization="fp8"))
    assert report.changes[-1].message == "admitted set changed: no longer admitted: chutes/int4"


def test_ordinal_of_121() -> None:
    from openrouter_probe.policy.changes import _ordinal

    assert _ordinal(121) == "121st"


def test_provenance_without_a_snapshot_hash(tmp_path: Path) -> None:
    compiled = load_compiled_policy(POLICY)
    del compiled.provenance["snapshot"]
    assert check_policy(compiled, bundled_snapshot()).compiled_snapshot == "?"


def test_the_fix_names_the_spec_provenance_names(runner: CliRunner, tmp_path: Path) -> None:
    policy = tmp_path / "p.yaml"
    policy.write_text(POLICY.read_text())
    path = _edited(tmp_path, lambda by_tag, eps: eps.remove(by_tag["chutes/int4"]))
    result = runner.invoke(cli, ["policy", "check", str(policy), "--snapshot", str(path)])
    assert result.exit_code == 1
    assert result.stdout.splitlines()[-1] == (
        "fix: re-compile from the spec it came from (provenance names kimi-k2.5.spec.yaml): "
        f"openrouter-probe policy check {policy} --snapshot {path} --spec SPEC --write"
    )


def test_a_recompile_that_fails_says_to_edit_the_spec(runner: CliRunner, tmp_path: Path) -> None:
    policy, spec = tmp_path / "kimi-k2.5.yaml", tmp_path / "kimi-k2.5.spec.yaml"
    spec.write_text(SPEC.read_text() + "allow: [chutes/int4]\n")
    compiled = compile_policy(load_spec(spec), bundled_snapshot(), spec_file=str(spec))
    policy.write_text(compiled.to_yaml())
    path = _edited(tmp_path, lambda by_tag, eps: eps.remove(by_tag["chutes/int4"]))
    report = check_policy(
        compiled, load_snapshot(path), spec=load_spec(spec), spec_file=str(spec), policy_file="P"
    )
    with pytest.raises(PolicyError, match="admits none") as info:
        compile_policy(load_spec(spec), load_snapshot(path), spec_file=str(spec))
    failure = info.value.reason  # the compiler's own words (policy.py owns them)
    assert f"a re-compile fails: {failure}" in report.effects
    assert report.recompiled is None
    assert (report.fix.code, report.fix.values["policy"]) == ("drift-recompile-fails", "P")
    assert (
        report.fix.render(term_of(CHECK))
        == f"fix: edit {spec} ({rendered(failure, term_of(CHECK))}), then run openrouter-probe "
        "policy check P --write"
    )
    result = runner.invoke(
        cli, ["policy", "check", str(policy), "--snapshot", str(path), "--write"]
    )
    assert result.exit_code == 2
    assert f"Error: {policy}: not re-written: the re-compile failed (see above)" in result.stderr
    assert policy.read_text() == compiled.to_yaml()

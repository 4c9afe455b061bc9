"""The sampled arm wired end to end: the fake's sampling model and its
``--degrade-sampling`` fault, the plan's N, cost and power, the Holm join, the report, the CLI."""

from __future__ import annotations

import asyncio
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import openrouter_probe as orp
from openrouter_probe.cli import cli
from openrouter_probe.errors import ConfigError, OptionError
from openrouter_probe.fake.degrade import parse_sampling
from openrouter_probe.rules.sampling_model import VOCABULARY
from openrouter_probe.rules.snapshot import bundled_snapshot
from openrouter_probe.verify.plan import plan_verify
from openrouter_probe.verify.sampled_arm import parse_sample_id, sample_id
from openrouter_probe.verify.suites import arith_suite
from openrouter_probe.verify.verdict import PairedCounts, compare_to_reference
from tests.conftest import ROOT

MODEL = "moonshotai/kimi-k2.5"
SNAP = bundled_snapshot(MODEL)
POLICY = ROOT / "policies" / "kimi-k2.5.yaml"
ADMITTED = [
    "chutes/int4", "deepinfra/int4", "siliconflow/int4", "atlas-cloud/int4", "parasail/int4",
    "moonshotai/int4",
]  # fmt: skip
HOT, TEMPLATE = "chutes/int4", "deepinfra/int4"


def _post(base_url: str, body: dict[str, Any]) -> dict[str, Any]:
    import requests

    response = requests.post(
        f"{base_url}/chat/completions", json=body, headers={"Authorization": "Bearer sk-fake"}
    )
    response.raise_for_status()
    return response.json()


def _words(answer: dict[str, Any]) -> list[str]:
    return answer["choices"][0]["message"]["content"].split()


def _body(tag: str, temperature: float) -> dict[str, Any]:
    return {
        "model": MODEL,
        "messages": [{"role": "user", "content": "Write a few sentences about the tide."}],
        "provider": {"only": [tag], "allow_fallbacks": False},
        "max_tokens": 48,
        "reasoning": {"enabled": False},
        "temperature": temperature,
        "top_p": 0.95,
    }


def test_a_hotter_endpoint_keeps_its_greedy_answers_and_spreads_its_samples() -> None:
    with orp.fake.serve(SNAP, speed=0, seed=3, degrade_sampling={HOT: 2.0}) as fake:
        greedy = {tag: _words(_post(fake.base_url, _body(tag, 0))) for tag in (HOT, TEMPLATE)}
        hot = [_words(_post(fake.base_url, _body(HOT, 0.6)))[:32] for _ in range(40)]
        cool = [_words(_post(fake.base_url, _body(TEMPLATE, 0.6)))[:32] for _ in range(40)]
        arith = {
            tag: _post(fake.base_url, {**_body(tag, 0.6), "messages": [
                {"role": "user", "content": "What is 37 * 41?"}]})["choices"][0]["message"]
            for tag in (HOT, TEMPLATE)
        }  # fmt: skip
    assert greedy[HOT] == greedy[TEMPLATE]  # temperature 0: no draw, the same everywhere
    assert arith[HOT]["content"] == arith[TEMPLATE]["content"]  # a known answer stays right
    assert all(w in VOCABULARY for sample in hot + cool for w in sample)

    def distinct(samples: list[list[str]]) -> float:
        return sum(len({s[i] for s in samples}) for i in range(32)) / 32

    # at twice the temperature more words are tried at each position
    assert distinct(hot) > distinct(cool) + 1


def test_degrade_sampling_is_checked_like_the_other_faults() -> None:
    assert parse_sampling(["chutes/int4=1.3"]) == {"chutes/int4": 1.3}
    with pytest.raises(ConfigError, match=r"expected TAG=FACTOR \(e\.g\. chutes/int4=1\.3\)"):
        parse_sampling(["chutes/int4"])
    with pytest.raises(ConfigError, match="FACTOR must be a number above 0"):
        parse_sampling(["chutes/int4=0"])
    with pytest.raises(ConfigError, match="no endpoint matches 'nowhere'"):
        parse_sampling({"nowhere": 1.3}, endpoints=SNAP.endpoints)
    result = CliRunner().invoke(
        cli, ["fake-server", MODEL, "--offline", "--degrade-sampling", "chutes/int4=-1"]
    )
    assert result.exit_code == 2 and "FACTOR must be a number above 0" in result.stderr


def test_sample_ids_round_trip_and_never_match_a_suite_item() -> None:
    assert parse_sample_id(sample_id("sampled-03", 7)) == ("sampled-03", 7)
    assert all(parse_sample_id(item.id) is None for item in arith_suite(50))
    assert parse_sample_id("x~0") is None and parse_sample_id("~3") is None


def test_the_plan_chooses_n_for_the_power_and_prices_the_arm_for_kimis_six() -> None:
    plan = plan_verify(
        SNAP.endpoints, model=MODEL, tags=ADMITTED, items=arith_suite(200), sampling="job",
        budget_usd=5,
    )  # fmt: skip
    arm = plan.sampled
    assert arm is not None and arm.settings == {"temperature": 0.6, "top_p": 0.95}
    assert arm.n == 15 and arm.power >= 0.9 and len(arm.prompts) == 10
    assert sorted(arm.worst_case_usd) == sorted(ADMITTED)  # the reference's samples too
    greedy = sum((e.worst_case_usd for e in plan.endpoints), Decimal(0))
    assert plan.worst_case_usd == greedy + arm.total("worst") <= 5
    assert plan.requests == 1400 + 6 * 150 and plan.family == 5 * 3
    text = plan.render()
    assert "sampled arm      all         900" in text
    assert "sampled arm power: 98% against an endpoint sampling at 1.3x" in text
    bodies = plan.sampled_bodies(HOT)
    assert len(bodies) == 150 and all("seed" not in body for _, body in bodies)
    assert bodies[0][1]["provider"] == {"only": [HOT], "allow_fallbacks": False}


def test_a_tight_budget_buys_fewer_samples_and_says_the_power_is_short() -> None:
    greedy = plan_verify(SNAP.endpoints, model=MODEL, tags=ADMITTED, items=arith_suite(50))
    left = Decimal("0.05")
    plan = plan_verify(
        SNAP.endpoints, model=MODEL, tags=ADMITTED, items=arith_suite(50), sampling="job",
        budget_usd=greedy.worst_case_usd + left,
    )  # fmt: skip
    arm = plan.sampled
    assert arm is not None and arm.total("worst") <= left and arm.n < 15
    assert any("short of 80% power; raise the budget" in w for w in arm.warnings)
    with pytest.raises(ConfigError, match="does not pay 4 samples"):
        plan_verify(
            SNAP.endpoints, model=MODEL, tags=ADMITTED, items=arith_suite(50), sampling="job",
            budget_usd=greedy.worst_case_usd,
        )  # fmt: skip
    with pytest.raises(OptionError):
        plan_verify(
            SNAP.endpoints, model=MODEL, tags=ADMITTED, items=arith_suite(5), sampling="hot"
        )


def test_a_rejecting_sampled_test_joins_holm_and_decides_differs() -> None:
    counts = {"a/int4": PairedCounts(both=190, ref_only=2, endpoint_only=2, neither=6)}
    plain = compare_to_reference(counts)
    joined = compare_to_reference(counts, extra={"a/int4": {"sampled_mmd": 0.001}})
    quiet = compare_to_reference(counts, extra={"a/int4": {"sampled_mmd": 0.5}})
    assert plain["a/int4"].verdict == "consistent" == quiet["a/int4"].verdict
    assert joined["a/int4"].verdict == "differs"
    assert dict(joined["a/int4"].extra)["sampled_mmd"] == pytest.approx(0.002)  # Holm over 2
    assert joined["a/int4"].reason.startswith("sampled_mmd rejects equality (Holm p=0.002)")


def _check(tmp_path: Path, seed: int, **faults: Any) -> tuple[orp.VerifyReport, Any, Any]:
    with orp.fake.serve(SNAP, speed=0, seed=seed, noise=0.02, **faults) as fake:
        report = asyncio.run(
            orp.verify_precision(
                MODEL, out=tmp_path / f"v{seed}.jsonl", policy=POLICY, n=60, budget_usd=5,
                snapshot=SNAP, api_key="sk-fake", base_url=fake.base_url, sampling="job",
                seed=seed, thinking="off",
            )
        )  # fmt: skip
        return report, fake.ledger.total_usd, len(fake.ledger)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_hot_endpoint_differs_the_template_is_named_no_native_one_differs(
    tmp_path: Path, seed: int
) -> None:
    faults = {"degrade_sampling": {HOT: 1.3}, "degrade_template": {TEMPLATE: 12}}
    report, billed, generations = _check(tmp_path, seed, **faults)
    assert report.verdicts[HOT] == "differs"
    hot = report.result(HOT)
    assert hot.decided_by == "sampled_mmd"
    assert {t.name: t.verdict for t in hot.tests}["accuracy"] != "differs"  # same greedy answers
    assert any(
        "renders a different template: +12 tokens" in f for f in report.result(TEMPLATE).findings
    )
    assert all(v != "differs" for tag, v in report.verdicts.items() if tag != HOT), report.verdicts
    rows = {r["tag"]: r for r in report.rows()}
    for tag in ADMITTED[:-1]:
        mmd = next(t for t in rows[tag]["tests"] if t["name"] == "sampled_mmd")
        assert mmd["p_value"] is not None and mmd["p_adjusted"] is not None
    assert generations == 60 * 7 + 150 * 6
    assert report.run.spent_usd == billed  # the arm's spend is in the books
    # a rerun sends nothing: every sample is already recorded
    with orp.fake.serve(SNAP, speed=0, seed=seed, noise=0.02, **faults) as fake:
        again = asyncio.run(
            orp.verify_precision(
                MODEL, out=tmp_path / f"v{seed}.jsonl", policy=POLICY, n=60, budget_usd=5,
                snapshot=SNAP, api_key="sk-fake", base_url=fake.base_url, sampling="job",
                seed=seed, thinking="off",
            )
        )  # fmt: skip
        assert len(fake.ledger) == 0
    assert again.verdicts == report.verdicts


def test_the_cli_dry_run_prints_the_arm_and_warns_of_an_unused_n() -> None:
    base = ["verify", MODEL, "--offline", "--dry-run", "--policy", str(POLICY), "--thinking", "off"]
    result = CliRunner().invoke(cli, [*base, "--sampling", "job", "--budget-usd", "5"])
    assert result.exit_code == 0, result.output
    assert "sampled arm: 10 prompts x 15 samples per endpoint (900 requests" in result.stdout
    assert max(len(line) for line in result.stdout.splitlines()) <= 80
    greedy = CliRunner().invoke(cli, [*base, "--sampled-n", "9"])
    assert greedy.exit_code == 0
    assert "warning: --sampled-n 9 sizes the sampled arm, and --sampling is greedy" in (
        greedy.stderr
    )
    assert "sampled arm" not in greedy.stdout


def test_report_json_keeps_the_arms_p_values(tmp_path: Path) -> None:
    report, _, _ = _check(tmp_path, 5, degrade_sampling={HOT: 2.0})
    payload = json.loads(json.dumps(report.rows(), default=str))
    hot = next(r for r in payload if r["tag"] == HOT)
    mmd = next(t for t in hot["tests"] if t["name"] == "sampled_mmd")
    assert mmd["verdict"] == "differs" and mmd["deciding"] is True and mmd["p_value"] <= 0.002

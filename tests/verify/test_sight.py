"""What each arm of a check could see: samples with no answer are not samples, and no endpoint is
``consistent`` on an arm that could not see (too little realised power, answers cut at
``max_tokens``). On the fake, one request at a time (its noise falls on the same requests)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import openrouter_probe as orp
from openrouter_probe.cli import cli
from openrouter_probe.rules.snapshot import bundled_snapshot
from openrouter_probe.verify.observation import Observation
from openrouter_probe.verify.plan import VerifyPlan, plan_verify
from openrouter_probe.verify.report import VerifyReport, build_report
from openrouter_probe.verify.sight import at_best_inconclusive, blind_arms
from openrouter_probe.verify.suites import arith_suite
from openrouter_probe.verify.thinking import Thinking, thinking_for
from openrouter_probe.verify.verdict import PairedCounts, compare_to_reference
from tests._in_process import posting

MODEL = "moonshotai/kimi-k2.5"
SNAP = bundled_snapshot(MODEL)
TAGS = ["chutes/int4", "deepinfra/int4"]


def _observe(plan: VerifyPlan, **fake: Any) -> list[Observation]:
    out = []
    with posting(SNAP, speed=0, seed=5, **fake) as post:
        for tag in plan.pinned:
            runs = plan.repeats if tag == plan.reference else 1
            sent = [(r, i, b) for i, b in plan.bodies(tag) for r in range(1, runs + 1)]
            sent += [(1, i, b) for i, b in plan.sampled_bodies(tag)]
            for run, item_id, body in sent:
                obs = Observation.from_completion(tag, item_id, post(body))
                out.append(dataclasses.replace(obs, repeat=run))
    return out


def _no_room() -> Thinking:
    """Thinking on with no reasoning room, standing for a measured one (no pilot)."""
    return dataclasses.replace(thinking_for(MODEL, "on"), room=0, provisional=False)


def test_samples_that_reasoning_emptied_are_counted_and_the_arm_says_it_cannot_see() -> None:
    # thinking on with no reasoning room: the sampled arm's 48 tokens go to reasoning (as 1,195
    # of 1,200 did before the room), and half the greedy answers are cut at 256 tokens
    plan = plan_verify(
        SNAP.endpoints, model=MODEL, tags=TAGS, items=arith_suite(40), sampling="job",
        sampled_n=4, thinking=_no_room(),
    )  # fmt: skip
    report = build_report(plan, _observe(plan))
    rows = {r["tag"]: r for r in report.rows()}
    for tag in TAGS:
        row = rows[tag]
        assert row["sampled_answers"] + row["sampled_empty"] == 40  # 10 prompts x 4
        assert row["sampled_empty_share"] > 0.9 and row["sampled_power"] is None
        mmd = next(t for t in row["tests"] if t["name"] == "sampled_mmd")
        # no statistic of 0 from empty samples: no statistic, no p, and the reason
        assert mmd["statistic"] is None and mmd["p_value"] is None
        assert mmd["verdict"] == "inconclusive"
        assert "samples (" in mmd["detail"] and "held no answer" in mmd["detail"]
        assert mmd["detail"].endswith("; realised power 0%")
        assert row["verdict"] == "inconclusive"
        assert "the sampled arm could not test it" in row["reason"]
        assert "realised power 0%" in row["reason"]
        assert row["cut_at_max_tokens"] > 4  # over 5% of 40
        assert "temperature-0 answers were cut at max_tokens" in row["reason"]
    assert any("held no answer" in note for note in report.notes)
    json.dumps(report.rows(), default=str)  # the JSON the command prints


@pytest.fixture(scope="module")
def two_samples() -> tuple[VerifyPlan, VerifyReport, VerifyReport]:
    items = arith_suite(200, seed=1)
    plan = plan_verify(
        SNAP.endpoints, model=MODEL, tags=TAGS, items=items, sampling="job", sampled_n=2,
        thinking="off",
    )  # fmt: skip
    observations = _observe(plan, noise=0.02)
    greedy = plan_verify(SNAP.endpoints, model=MODEL, tags=TAGS, items=items, thinking="off")
    return plan, build_report(plan, observations), build_report(greedy, observations)


def test_two_samples_a_prompt_leave_no_endpoint_consistent(
    two_samples: tuple[VerifyPlan, VerifyReport, VerifyReport],
) -> None:
    plan, report, greedy = two_samples
    assert plan.sampled is not None and plan.sampled.power < 0.8
    # the temperature-0 arm alone calls both consistent ...
    assert greedy.verdicts == {"chutes/int4": "consistent", "deepinfra/int4": "consistent"}
    # ... but the sampled arm the check was asked for could not see
    assert report.verdicts == {"chutes/int4": "inconclusive", "deepinfra/int4": "inconclusive"}
    for tag in TAGS:
        reason = report.result(tag).comparison.reason  # type: ignore[union-attr]
        assert reason.startswith(
            f"the sampled arm could not see: its realised power is {plan.sampled.power:.0%} "
            "(20 samples held an answer, 0 none), under the plan's 80%: at best inconclusive, "
            "not consistent (on its own: no test rejects"
        ), reason
        assert report.result(tag).sampled_power == plan.sampled.power


def test_a_rejecting_test_stands_and_cut_answers_under_the_limit_do_not_count() -> None:
    plan = plan_verify(
        SNAP.endpoints, model=MODEL, tags=TAGS, items=arith_suite(20), thinking="off"
    )
    judged = compare_to_reference({"a/int4": PairedCounts(both=180, ref_only=14, neither=6)})[
        "a/int4"
    ]
    assert judged.verdict == "differs"
    reasons = blind_arms(plan, None, answered=0, empty=0, cut=(30, 100), reference_cut=(5, 100))
    assert reasons == [
        "30 of 100 of its temperature-0 answers were cut at max_tokens: an accuracy from cut "
        "answers is not evidence of equality"
    ]  # the reference's 5% is at the limit, not over it
    assert at_best_inconclusive(judged, reasons) is judged  # a difference seen stands


def test_the_command_with_two_samples_a_prompt_calls_nothing_consistent(tmp_path: Path) -> None:
    args = ["verify", MODEL, "--endpoints", ",".join(TAGS), "--sampling", "job"]
    args += ["--sampled-n", "2", "--thinking", "off", "--budget-usd", "2", "--quiet"]
    args += ["--format", "json", "--out", str(tmp_path / "v.jsonl")]
    with orp.fake.serve(SNAP, speed=0, seed=5, noise=0.02) as fake:
        env = {"OPENROUTER_API_KEY": "sk-fake", "OPENROUTER_BASE_URL": fake.base_url}
        shown = CliRunner().invoke(cli, args, env=env)
    assert shown.exit_code == 0, shown.output
    rows = {r["tag"]: r for r in json.loads(shown.stdout) if r["role"] == "compared"}
    for row in rows.values():
        assert row["verdict"] == "inconclusive"
        # first in the reason: the temperature-0 arm alone would have said consistent
        assert row["reason"].startswith("the sampled arm could not see: its realised power is ")
        assert "at best inconclusive, not consistent (on its own: no test rejects" in row["reason"]
        assert row["sampled_answers"] == 20 and row["sampled_empty"] == 0
        assert row["sampled_power"] is not None and row["sampled_power"] < 0.8

"""The report seam: collected responses in, verdicts, frames and dated evidence out.

The end-to-end test (the fake server with two endpoints degraded by 10% and 20%) needs
the generator and the fake server; here the same scenario is simulated at the level of responses:
every endpoint answers the reference's answers, a native one (and the reference's second run, the
floor) flips 1% of its outcomes both ways (the batch nondeterminism of real deployments), a degraded
one corrupts the given fraction of answers.
"""

from __future__ import annotations

import dataclasses
import random
from datetime import UTC, datetime
from typing import Any

import pandas as pd
import pytest
import yaml

from openrouter_probe.rules.snapshot import bundled_snapshot
from openrouter_probe.verify.observation import Observation
from openrouter_probe.verify.plan import VerifyPlan, plan_verify
from openrouter_probe.verify.report import EVIDENCE_HEADER, build_report
from openrouter_probe.verify.suites import arith_suite

SNAP = bundled_snapshot("moonshotai/kimi-k2.5")
INT4 = [e.tag for e in SNAP.endpoints if e.quantization == "int4"]
NAMES = {e.tag: e.provider_name for e in SNAP.endpoints}
DEGRADED = {"deepinfra/int4": 0.10, "parasail/int4": 0.20}
WHEN = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def _body(content: str, provider: str, cost: float = 0.00001) -> dict[str, Any]:
    return {
        "provider": provider,
        "model": "moonshotai/kimi-k2.5-0127",
        "choices": [{"finish_reason": "stop", "message": {"content": content}}],
        "usage": {"prompt_tokens": 56, "completion_tokens": 8, "cost": cost},
    }


def _simulate(n: int, seed: int, *, native_noise: float = 0.01) -> tuple[VerifyPlan, list[Any]]:
    plan = plan_verify(SNAP.endpoints, model=SNAP.model, tags=INT4, items=arith_suite(n, seed=seed))
    rng = random.Random(seed)
    # the reference gets 95% right; a wrong answer is off by one
    truth = {
        item.id: (item.answer or "") if rng.random() < 0.95 else str(int(item.answer or 0) + 1)
        for item in plan.items
    }
    observations = []
    runs = [(tag, 1) for tag in plan.pinned] + [(plan.reference, 2)]
    for tag, run in runs:
        for item in plan.items:
            answer = truth[item.id]
            if tag in DEGRADED and rng.random() < DEGRADED[tag]:
                answer = str(int(answer) + 7)  # a corrupted answer token
            elif (tag, run) != (plan.reference, 1) and rng.random() < native_noise:
                right = item.answer or ""
                answer = right if answer != right else str(int(right) - 1)  # flips either way
            body = _body(answer, NAMES[tag])
            observations.append(
                dataclasses.replace(Observation.from_completion(tag, item.id, body), repeat=run)
            )
    return plan, observations


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4])
def test_n200_flags_both_degraded_endpoints_and_no_native_one(seed: int) -> None:
    plan, observations = _simulate(200, seed)
    report = build_report(plan, observations, taken_at=WHEN)
    verdicts = report.verdicts
    assert {t for t, v in verdicts.items() if v == "differs"} == set(DEGRADED)
    natives = [t for t in plan.compared if t not in DEGRADED]
    assert all(verdicts[t] == "consistent" for t in natives), verdicts
    for tag in DEGRADED:
        assert report.result(tag).comparison is not None
        assert report.result(tag).comparison.reason.startswith("less accurate than the reference")


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_n10_is_inconclusive_not_consistent(seed: int) -> None:
    plan, observations = _simulate(10, seed, native_noise=0.0)
    report = build_report(plan, observations, taken_at=WHEN)
    natives = [t for t in plan.compared if t not in DEGRADED]
    assert all(report.verdicts[t] == "inconclusive" for t in natives)
    assert "differs" not in {report.verdicts[t] for t in natives}
    comparison = report.result(natives[0]).comparison
    assert comparison is not None
    assert comparison.prompts_needed is not None and comparison.prompts_needed > 10
    assert comparison.reason.startswith("no test rejects, but the 98% interval of accuracy")
    assert comparison.reason.endswith(
        f"about {comparison.prompts_needed} paired prompts would settle it"
    )


def test_a_leaked_pin_is_discarded_and_counted() -> None:
    plan, observations = _simulate(20, 0, native_noise=0.0)
    item = plan.items[0]
    # chutes/int4 answered twice for item 0: first by Moonshot AI (leaked, a wrong answer), then
    # by Chutes; and one response that names no provider at all
    leaked = [
        Observation.from_completion("chutes/int4", item.id, _body("0", "Moonshot AI")),
        Observation("chutes/int4", plan.items[1].id, provider=None, content="0"),
    ]
    report = build_report(plan, leaked + observations, taken_at=WHEN)
    chutes = report.result("chutes/int4")
    assert chutes.leaked == 2
    assert chutes.missing == 0
    baseline = build_report(plan, observations, taken_at=WHEN).result("chutes/int4")
    assert chutes.measures.accuracy == baseline.measures.accuracy
    assert chutes.measures.counts == baseline.measures.counts
    assert "2 response(s) came from another provider than the pinned one" in report.notes[0]


def test_a_success_after_a_failure_replaces_it() -> None:
    plan, observations = _simulate(5, 0, native_noise=0.0)
    item = plan.items[0]
    failed = Observation.from_completion(
        "chutes/int4", item.id, {"provider": "Chutes", "error": {"code": 502, "message": "x"}}
    )
    report = build_report(plan, [failed, *observations], taken_at=WHEN)
    chutes = report.result("chutes/int4")
    assert (chutes.measures.failed, chutes.measures.scored) == (0, 5)
    assert report.notes == ()
    # the other way round, the failure is a repeat and ignored
    report = build_report(plan, [*observations, failed], taken_at=WHEN)
    assert report.result("chutes/int4").measures.failed == 0
    assert report.notes == ("1 repeated response(s) for the same endpoint and item ignored",)


def test_a_failure_counts_as_an_outcome_never_dropped() -> None:
    # an endpoint that fails on the items the reference gets right looks worse, not better
    plan, observations = _simulate(200, 0, native_noise=0.0)
    failing = [
        Observation("chutes/int4", o.item_id, provider="Chutes", error="Provider returned error")
        if o.endpoint == "chutes/int4" and o.item_id in {i.id for i in plan.items[:30]}
        else o
        for o in observations
    ]
    report = build_report(plan, failing, taken_at=WHEN)
    chutes = report.result("chutes/int4")
    assert chutes.measures.failed == 30 and chutes.missing == 0
    assert chutes.comparison is not None and chutes.comparison.counts.n == 200
    assert chutes.comparison.counts.ref_only >= 25  # the reference got ~95% of them right
    assert chutes.verdict == "differs"


def test_duplicates_and_outsiders_are_counted_not_scored() -> None:
    plan, observations = _simulate(5, 0, native_noise=0.0)
    extra = [
        observations[0],
        Observation.from_completion("fireworks", plan.items[0].id, _body("1", "Fireworks")),
        Observation.from_completion("chutes/int4", "arith/s9/00000", _body("1", "Chutes")),
    ]
    report = build_report(plan, observations + extra, taken_at=WHEN)
    assert report.notes == (
        "1 repeated response(s) for the same endpoint and item ignored",
        "2 response(s) for endpoints or items outside the plan ignored",
    )
    missing = build_report(plan, observations[1:], taken_at=WHEN)
    assert missing.result(plan.reference).missing == 1
    # the reference's second run counts toward its missing too
    first_only = [o for o in observations if o.repeat == 1]
    assert build_report(plan, first_only, taken_at=WHEN).result(plan.reference).missing == 5


def _tiny_report() -> Any:
    plan = plan_verify(
        SNAP.endpoints,
        model=SNAP.model,
        tags=["chutes/int4"],
        items=arith_suite(4),
        snapshot_sha256=SNAP.sha256,
    )
    answers = [item.answer or "" for item in plan.items]
    obs = [
        Observation.from_completion("moonshotai/int4", item.id, _body(a, "Moonshot AI", 0.00002))
        for item, a in zip(plan.items, answers, strict=True)
    ] + [
        Observation.from_completion("chutes/int4", item.id, _body(a, "Chutes"))
        for item, a in zip(plan.items, [*answers[:3], "5"], strict=True)
    ]
    return build_report(plan, obs, taken_at=WHEN)


def test_evidence_yaml_is_dated_exact_and_reads_back() -> None:
    report = _tiny_report()
    text = report.to_evidence_yaml()
    assert text.startswith(EVIDENCE_HEADER)
    doc = yaml.safe_load(text)
    assert list(doc) == ["measured"]
    (entry,) = doc["measured"]
    assert entry == {
        "model": "moonshotai/kimi-k2.5",
        "endpoint": "chutes/int4",
        "provider": "Chutes",
        "declared": "int4",
        "reference": "moonshotai/int4",
        "verdict": "inconclusive",
        "date": "2026-11-30",
        "n": 4,
        "accuracy": 0.75,
        "accuracy_ci95": [0.1941, 0.9937],  # Clopper-Pearson 3/4
        "reference_accuracy": 1.0,
        "accuracy_gap": 0.25,
        "discordant": {"reference_only": 1, "endpoint_only": 0},
        "accuracy_gap_ci": [-0.2543, 0.6438],  # Tango, 90% (one endpoint: 1 - 2 x 0.05)
        "interval_level": 0.9,
        "p_value": 0.5,  # mid-p McNemar with b=1, c=0: 2 x (0 + 1/2 x 1/2)
        "p_holm": 0.5,
        "min_detectable_gap": None,  # four pairs cannot reach 80% power at any gap
        "power": 0.8,
        "tolerance": 0.1,
        "alpha": 0.05,
        "test": "mid-p McNemar and the floor test, Tango intervals; Holm over 1 test(s) "
        "(1 endpoint(s))",
        "measures": {
            "accuracy": {"estimate": 0.25, "interval": [-0.2543, 0.6438], "p_holm": 0.5},
        },
        "repeats": 2,
        "suites": ["arith"],
        "exact_match_rate": 0.75,
        "floor_disagreement": None,  # the reference was sent once here: no floor
        "leaked": 0,
        "reason": "no test rejects, but the 90% interval of accuracy [-25.4, +64.4] pp reaches "
        "past +-10.0 pp: about 223 paired prompts would settle it",
        # every response counted 56 prompt tokens: the counts agree, nothing is found
        "prompt_tokens": {
            "pairs": 4,
            "differ_rate": 0.0,
            "diff_median": None,
            "higher": 0,
            "lower": 0,
            "floor_differ_rate": None,
            "unreported": 0,
            "systematic": False,
        },
        "findings": [],
        # every test, deciding or beside the verdict, in one shape (results.TestResult)
        "decided_by": "accuracy",  # the only deciding test; its interval passes the margin
        "tests": [
            {
                "name": "accuracy",
                "statistic": 0.25,
                "p_value": 0.5,
                "p_adjusted": 0.5,
                "interval": [-0.254348, 0.643832],
                "interval_level": 0.9,
                "threshold": None,
                "verdict": "inconclusive",
                "deciding": True,
                "detail": "accuracy gap, reference minus endpoint; mid-p McNemar; 4 paired "
                "items, margin 0.1",
            },
            {
                "name": "prompt_tokens",
                "statistic": 0.0,
                "p_value": None,  # no count differs: no direction to test
                "p_adjusted": None,
                "interval": [0.0, 0.602365],  # Clopper-Pearson 0/4
                "interval_level": 0.95,
                "threshold": None,
                "verdict": "inconclusive",  # 4 pairs, fewer than the rule's 5
                "deciding": False,
                "detail": "usage.prompt_tokens: 0 of 4 identical requests counted "
                "differently (higher 0, lower 0); sign test of the direction",
            },
        ],
        "source": f"openrouter-probe verify; snapshot {SNAP.sha256}",
    }
    assert report.to_evidence_yaml() == text  # deterministic


def test_frame_repr_and_html() -> None:
    report = _tiny_report()
    frame = report.to_frame()
    assert isinstance(frame, pd.DataFrame)
    assert list(frame.index) == ["moonshotai/int4", "chutes/int4"]
    assert frame.loc["chutes/int4", "verdict"] == "inconclusive"
    assert frame.loc["moonshotai/int4", "role"] == "reference"
    assert frame.loc["chutes/int4", "accuracy"] == 0.75
    assert frame.loc["chutes/int4", "models_served"] == "moonshotai/kimi-k2.5-0127 x4"
    assert frame.loc["moonshotai/int4", "cost_usd"] == pytest.approx(0.00008)
    assert repr(report) == (
        "<VerifyReport moonshotai/kimi-k2.5 vs moonshotai/int4, 4 prompts, 2026-11-30: "
        "chutes/int4 inconclusive>"
    )
    html = report._repr_html_()
    assert "<table" in html and "inconclusive" in html and "moonshotai/int4" in html
    with pytest.raises(KeyError, match="'fireworks' is not in this report"):
        report.result("fireworks")


def test_verify_modules_import_pandas_only_when_a_frame_is_asked_for() -> None:
    import subprocess
    import sys

    code = (
        "import sys, openrouter_probe.verify.report, openrouter_probe.verify.plan;"
        "print('pandas' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_the_table_shows_every_test_in_one_shape_and_the_deciding_one() -> None:
    text = _tiny_report().render()
    tail = text.split("chutes/int4 tests ", 1)[1].splitlines()
    assert tail == [
        "(inconclusive, decided by accuracy):",
        "  accuracy      inconclusive stat +0.25 p 0.5 (adjusted 0.5) [-0.254, +0.644]",
        "  prompt_tokens inconclusive stat +0 [+0, +0.602] (beside the verdict)",
    ]


def test_decided_by_names_the_test_that_settled_each_verdict() -> None:
    from openrouter_probe.verify.results import TestResult, decided_by
    from openrouter_probe.verify.stats import Interval

    def t(name: str, verdict: Any, p: float, lo: float, hi: float, deciding: bool = True) -> Any:
        return TestResult(name, 0.0, p, Interval(lo, hi, 0.98), verdict, "", deciding, p)

    acc = t("accuracy", "differs", 0.01, 0.05, 0.2)
    agr = t("agreement", "differs", 0.001, 0.02, 0.3)
    lp = t("logprobs", "differs", 1e-9, 0.0, 0.0, deciding=False)  # never decides
    assert decided_by("differs", [acc, agr, lp]) == "agreement"  # the smallest Holm p
    near = t("accuracy", "consistent", 0.9, -0.02, 0.09)  # 0.09: closest to the 0.1 margin
    far = t("agreement", "consistent", 0.8, -0.03, 0.04)
    assert decided_by("consistent", [near, far]) == "accuracy"
    wide = t("tool_schema", "inconclusive", 0.5, -0.3, 0.3)
    assert decided_by("inconclusive", [near, wide]) == "tool_schema"
    assert decided_by(None, [acc]) is None and decided_by("differs", [lp]) is None

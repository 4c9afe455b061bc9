"""The precision check against the fake with noise: each kind of difference is caught by the measure
meant for it and by no other, and undegraded endpoints stay consistent (on one
seed; ``benchmarks/verify_rates.py`` measures the rates over many).

Requests go one at a time so that the fake's per-request noise falls on the same requests every run
(a concurrent client would draw it in arrival order): the test is deterministic. The fake runs on
the test's own thread (``tests/_in_process.py``): 3,500 sequential posts wait for no thread switch.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from openrouter_probe.rules.snapshot import bundled_snapshot
from openrouter_probe.verify.measures import measure_endpoint
from openrouter_probe.verify.observation import Observation
from openrouter_probe.verify.plan import plan_verify
from openrouter_probe.verify.report import VerifyReport, build_report
from openrouter_probe.verify.suites import TOOLS, arith_suite, tools_suite
from openrouter_probe.verify.thinking import thinking_for
from openrouter_probe.verify.verdict import compare_to_reference
from tests._in_process import posting

SNAP = bundled_snapshot("moonshotai/kimi-k2.5")
INT4 = [e.tag for e in SNAP.endpoints if e.quantization == "int4" and e.slug != "moonshotai"]


def _check(**changes: Any) -> VerifyReport:
    items = arith_suite(300, seed=7) + tools_suite(200, seed=7)
    plan = plan_verify(SNAP.endpoints, model=SNAP.model, tags=INT4, items=items)
    observations = []
    with posting(SNAP, speed=0, seed=7, noise=0.02, **changes) as post:
        for tag in plan.pinned:
            runs = plan.repeats if tag == plan.reference else 1
            for item_id, body in plan.bodies(tag):
                for run in range(1, runs + 1):
                    obs = Observation.from_completion(tag, item_id, post(body))
                    observations.append(dataclasses.replace(obs, repeat=run))
    return build_report(plan, observations)


@pytest.fixture(scope="module")
def report() -> VerifyReport:
    return _check(
        degrade={"deepinfra/int4": 0.10},
        degrade_flip={"siliconflow/int4": 0.10},
        degrade_tools={"atlas-cloud/int4": 0.20},
    )


def _flagged(report: VerifyReport, tag: str) -> set[str]:
    c = report.result(tag).comparison
    assert c is not None
    return {t.measure.name for t in c.tests if t.p_adjusted <= report.alpha}


def test_undegraded_endpoints_are_consistent_under_noise(report: VerifyReport) -> None:
    assert report.verdicts["chutes/int4"] == "consistent"
    assert report.verdicts["parasail/int4"] == "consistent"
    # the floor is the noise: the reference disagrees with itself on about 2 x 2% of the answers
    floor = report.result("moonshotai/int4").measures.floor_disagreement
    assert floor is not None and 0.01 < floor < 0.08


def test_each_difference_is_caught_by_its_measure(report: VerifyReport) -> None:
    # less accurate (10% of its tokens flip; 10% of the items are wrong everywhere, since a flip
    # is also served): at n = 300 the answers' disagreement and the tool arguments catch it
    assert report.verdicts["deepinfra/int4"] == "differs"
    deepinfra = report.result("deepinfra/int4").comparison
    assert deepinfra is not None and deepinfra.counts.ref_only > deepinfra.counts.endpoint_only
    assert {"agreement", "tool_arguments"} <= _flagged(report, "deepinfra/int4")
    # a flip at equal accuracy: agreement catches it, accuracy does not
    assert report.verdicts["siliconflow/int4"] == "differs"
    assert "agreement" in _flagged(report, "siliconflow/int4")
    assert "accuracy" not in _flagged(report, "siliconflow/int4")
    # broken tool calls: the tool arm catches them, the arithmetic measures do not
    assert report.verdicts["atlas-cloud/int4"] == "differs"
    assert {"tool_schema", "tool_arguments"} <= _flagged(report, "atlas-cloud/int4")
    assert not {"accuracy", "agreement"} & _flagged(report, "atlas-cloud/int4")


def test_consistent_never_has_an_interval_past_the_tolerance(report: VerifyReport) -> None:
    for r in report.results:
        if r.verdict == "consistent":
            assert r.comparison is not None
            assert all(
                -report.tolerance < t.interval.low and t.interval.high < report.tolerance
                for t in r.comparison.tests
            )


def test_twenty_percent_invalid_arguments_differ_on_the_tool_arm() -> None:
    # 300 expected calls; the reference's all valid, the endpoint's arguments schema-invalid on 60
    items = {i.id: i for i in tools_suite(400, seed=2) if i.expect_tool}
    calls = list(items.values())[:300]

    def call(item: Any, arguments: dict[str, Any], endpoint: str) -> Observation:
        message = {
            "content": "",
            "tool_calls": [
                {"function": {"name": item.expect_tool, "arguments": json.dumps(arguments)}}
            ],
        }
        body = {"choices": [{"finish_reason": "tool_calls", "message": message}]}
        return Observation.from_completion(endpoint, item.id, body)

    ref = {i.id: call(i, i.expect_arguments, "r") for i in calls}
    floor = {i.id: call(i, i.expect_arguments, "r") for i in calls}
    mine = [
        call(i, {**i.expect_arguments, "unexpected": 1} if k % 5 == 0 else i.expect_arguments, "e")
        for k, i in enumerate(calls)
    ]
    m = measure_endpoint("e", items, mine, ref, floor=[floor])
    assert m.schema_valid_rate == 0.8
    out = compare_to_reference({"e": m.tests})["e"]
    assert out.verdict == "differs"
    schema = out.test("tool_schema")
    assert schema is not None and schema.p_adjusted < 1e-10 and schema.estimate == 0.2
    assert any(t["function"]["name"] == calls[0].expect_tool for t in TOOLS)


def test_the_fake_answers_every_tool_prompt_with_reasoning_on_and_noise() -> None:
    # Reasoning on, max_tokens 512: reasoning cuts some tool calls before they are made; the noise
    # and the degradations that change a call must leave a cut call alone (they answered 500)
    items = tools_suite(200, seed=3)
    # no room: the items' own max_tokens
    thinking = dataclasses.replace(thinking_for(SNAP.model, "on"), room=0, provisional=False)
    plan = plan_verify(
        SNAP.endpoints, model=SNAP.model, tags=INT4[:2], items=items, thinking=thinking
    )
    degraded = {INT4[0]: 0.5}
    finishes: dict[str, int] = {}
    with posting(
        SNAP, speed=0, seed=3, noise=0.5, degrade=degraded, degrade_tools=degraded
    ) as post:
        for tag in plan.pinned:
            for _, body in plan.bodies(tag):
                assert body["reasoning"] == {"enabled": True} and body["max_tokens"] == 512
                choice = post(body)["choices"][0]  # post() fails on an answer other than 200
                finish = choice["finish_reason"]
                finishes[finish] = finishes.get(finish, 0) + 1
                if finish == "length":
                    assert not choice["message"].get("tool_calls")
    assert sum(finishes.values()) == 3 * len(items)
    # the case that failed is here: calls cut by reasoning, and whole calls beside them
    assert finishes["length"] >= 10 and finishes["tool_calls"] >= 100

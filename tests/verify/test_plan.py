"""The plan of a precision check: pins through the routing model, request bodies, cost, leaks."""

from __future__ import annotations

import copy
import dataclasses
import json
import pickle
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from openrouter_probe.api.schema import Endpoint, Pricing
from openrouter_probe.errors import ConfigError, OptionError, reason
from openrouter_probe.rules.prompt_tokens import estimate_prompt_tokens
from openrouter_probe.rules.routing import RequestParams
from openrouter_probe.rules.snapshot import bundled_snapshot
from openrouter_probe.run.config import RunPlan
from openrouter_probe.verify.costs import prompt_tokens
from openrouter_probe.verify.pins import (
    DEFAULT_SEED,
    default_reference,
    pin,
    pin_block,
    pin_leaked,
    request_body,
    resolve_tag,
)
from openrouter_probe.verify.plan import DEFAULT_N, plan_verify
from openrouter_probe.verify.stats import equivalence_power
from openrouter_probe.verify.suites import arith_suite, tools_suite

SNAP = bundled_snapshot("moonshotai/kimi-k2.5")
INT4 = [e.tag for e in SNAP.endpoints if e.quantization == "int4"]


def _endpoint(tag: str, name: str, **extra: object) -> Endpoint:
    return Endpoint.model_validate(
        {
            "tag": tag,
            "provider_name": name,
            "pricing": {"prompt": "0.000001", "completion": "0.000002"},
            "supported_parameters": ["temperature", "max_tokens", "reasoning"],
            **extra,
        }
    )


def test_the_six_int4_endpoints_of_the_bundled_snapshot() -> None:
    assert INT4 == [
        "chutes/int4",
        "deepinfra/int4",
        "siliconflow/int4",
        "atlas-cloud/int4",
        "parasail/int4",
        "moonshotai/int4",
    ]
    assert default_reference(SNAP.model, SNAP.endpoints) == "moonshotai/int4"


@pytest.mark.parametrize("tag", INT4)
def test_each_pin_admits_exactly_its_endpoint(tag: str) -> None:
    assert pin_block(tag) == {"only": [tag], "allow_fallbacks": False}
    assert pin(tag, SNAP.endpoints).tag == tag


def test_a_base_slug_that_admits_two_endpoints_is_refused() -> None:
    endpoints = [_endpoint("together", "Together"), _endpoint("together/turbo", "Together")]
    assert pin("together/turbo", endpoints).tag == "together/turbo"
    with pytest.raises(
        ConfigError,
        match=r"pin 'together' admits 2 endpoints \(together, together/turbo\); name one full tag",
    ):
        pin("together", endpoints)


def test_a_pin_that_admits_nothing_says_why() -> None:
    with pytest.raises(ConfigError, match=r"pin 'nobody/int4' admits no endpoint: no endpoint has"):
        pin("nobody/int4", SNAP.endpoints)
    # the routing model's own reason: 70000 > chutes/int4's max_completion_tokens of 65535
    with pytest.raises(ConfigError, match=r"max_tokens 70000 > its max 65535"):
        pin("chutes/int4", SNAP.endpoints, params=RequestParams(max_tokens=70_000))


def test_request_body_is_pinned_greedy_and_equal_across_endpoints() -> None:
    item = arith_suite(1)[0]
    chutes = pin("chutes/int4", SNAP.endpoints)
    body = request_body(item, chutes, model=SNAP.model)
    assert body == {
        "model": "moonshotai/kimi-k2.5",
        "messages": [dict(item.messages[0])],
        "provider": {"only": ["chutes/int4"], "allow_fallbacks": False},
        "temperature": 0,
        "max_tokens": 256,
        "reasoning": {"effort": "none"},
        "seed": DEFAULT_SEED,
    }
    other = request_body(item, pin("moonshotai/int4", SNAP.endpoints), model=SNAP.model)
    assert {k: v for k, v in other.items() if k != "provider"} == {
        k: v for k, v in body.items() if k != "provider"
    }


def test_request_body_sends_seed_and_logprobs_only_where_listed() -> None:
    plain = _endpoint("a/int4", "A")
    rich = _endpoint(
        "b/int4",
        "B",
        supported_parameters=["temperature", "reasoning", "seed", "logprobs", "top_logprobs"],
    )
    item = tools_suite(1)[0]
    body = request_body(item, plain, model="m/x", reasoning={"enabled": False})
    assert "seed" not in body and "logprobs" not in body
    assert body["reasoning"] == {"enabled": False}
    assert body["tool_choice"] == "auto" and len(body["tools"]) == 6
    body = request_body(item, rich, model="m/x", seed=7, top_logprobs=3)
    assert (body["seed"], body["logprobs"], body["top_logprobs"]) == (7, True, 3)
    assert "logprobs" not in request_body(item, rich, model="m/x", top_logprobs=0)


def test_pin_leaked() -> None:
    chutes = pin("chutes/int4", SNAP.endpoints)
    assert not pin_leaked("Chutes", chutes)
    assert pin_leaked("Moonshot AI", chutes)
    assert pin_leaked(None, chutes)  # unattributable: never scored


def test_prompt_tokens_bound() -> None:
    item = arith_suite(1)[0]
    text = json.dumps([item.messages[0]], ensure_ascii=False)
    expected, worst = prompt_tokens(item)
    assert worst == len(text.encode()) + 32 + 16  # one token per byte, plus the template allowance
    # expected: the one estimate (3 for the priming, 3 a message, 4 characters a token)
    content = item.messages[0]["content"]
    assert expected == estimate_prompt_tokens(item.messages) == 3 + 3 + -(-len(content) // 4)
    assert expected < worst


def test_default_run_on_the_six_int4_endpoints() -> None:
    # the figure the issue asks for: arith, n=200, six INT4 endpoints, bundled prices; the
    # reference is sent twice (its disagreement with itself is the floor)
    plan = plan_verify(SNAP.endpoints, model=SNAP.model, tags=INT4, items=arith_suite(DEFAULT_N))
    assert plan.reference == "moonshotai/int4"
    assert plan.compared == [t for t in INT4 if t != "moonshotai/int4"]
    assert plan.requests == 1400
    chutes = next(e for e in plan.endpoints if e.tag == "chutes/int4")
    # 44,320 prompt tokens at most x $0.45/M + 200 x 256 output tokens x $2.20/M
    assert (chutes.tokens.in_worst, chutes.tokens.out_worst) == (44_320, 51_200)
    assert chutes.worst_case_usd == Decimal("44320") * Decimal("0.00000045") + Decimal(
        "51200"
    ) * Decimal("0.0000022")
    assert chutes.worst_case_usd == Decimal("0.132584")
    # 8,351 expected prompt tokens x $0.45/M + 200 x 8 answer tokens x $2.20/M
    assert chutes.tokens.in_expected == 8_351
    assert chutes.expected_usd == Decimal("0.00727795")
    assert plan.worst_case_usd == Decimal("1.086272")  # 0.90608 + the reference again, 0.180192
    assert plan.expected_usd == Decimal("0.0590236")
    assert all(e.seed_sent and not e.logprobs_sent and not e.warnings for e in plan.endpoints)
    # mid-p McNemar at alpha/10 (five endpoints x accuracy and agreement), at best
    assert plan.measures == ["accuracy", "agreement"] and plan.family == 10
    assert plan.min_detectable_gap_best is not None
    assert round(plan.min_detectable_gap_best, 3) == 0.051
    # equivalence at 98% (Bonferroni over five): 80% power needs 117 prompts at 5% discordance
    assert plan.interval_level == pytest.approx(0.98)
    assert plan.prompts_needed == 117 and plan.equivalence_power > 0.99
    text = plan.render()
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "moonshotai/int4  reference   400   0.60   3.00   $0.0196   $0.3604 seed" in text
    assert "(the reference x2) = 1400 requests" in text
    assert "80%\n  power needs n=117" in text
    assert "first-token logprobs cannot be compared" in text


def test_plan_warns_where_a_setting_may_be_ignored_or_a_leak_is_invisible() -> None:
    endpoints = [
        _endpoint("moonshotai/int4", "Moonshot AI", supported_parameters=["temperature"]),
        _endpoint("deepinfra/int4", "DeepInfra"),
        _endpoint("deepinfra/fp4", "DeepInfra"),
    ]
    plan = plan_verify(
        endpoints,
        model="moonshotai/kimi-k2.5",
        tags=["deepinfra/int4"],
        items=arith_suite(3),
        budget_usd="0.000001",
    )
    ref, other = plan.endpoints
    assert any("does not list reasoning" in w for w in ref.warnings)
    assert any("a leak to it cannot be told" in w for w in other.warnings)
    assert plan.fits_budget is False
    assert "does NOT fit" in plan.render()


def test_the_plan_holds_the_run_that_sends_it_and_is_read_only(tmp_path: Path) -> None:
    """The cap is the run's ``budget_usd``, never a second one beside it; a plan only priced
    holds a run without an output, which no run opens; nothing in the plan can be replaced."""
    priced = plan_verify(SNAP.endpoints, model=SNAP.model, tags=INT4, items=arith_suite(2),
                         budget_usd="0.5")  # fmt: skip
    assert (priced.run.command, priced.run.out, priced.run.budget_usd) == (
        "verify",
        None,
        Decimal("0.5"),
    )
    with pytest.raises(ConfigError) as unrunnable:
        priced.run.output
    assert reason(unrunnable.value).code == "run-without-out"
    run = RunPlan(command="verify", out=tmp_path / "v.jsonl", budget_usd=Decimal("0.000001"))
    sent = plan_verify(SNAP.endpoints, model=SNAP.model, tags=INT4, items=arith_suite(2), run=run)
    assert sent.run is run and sent.fits_budget is False
    assert "budget $0.000001: the worst case does NOT fit" in sent.render()
    with pytest.raises(OptionError) as both:
        plan_verify(SNAP.endpoints, model=SNAP.model, tags=INT4, items=arith_suite(2), run=run,
                    budget_usd=1)  # fmt: skip
    assert both.value.options == ("budget_usd", "run")
    with pytest.raises(ConfigError) as zero:
        plan_verify(SNAP.endpoints, model=SNAP.model, tags=INT4, items=arith_suite(2),
                    budget_usd=0)  # fmt: skip
    assert reason(zero.value).code == "budget-not-positive"
    with pytest.raises(dataclasses.FrozenInstanceError):
        sent.run = priced.run  # type: ignore[misc]
    with pytest.raises(TypeError):
        sent.pinned["chutes/int4"] = sent.pinned["deepinfra/int4"]  # type: ignore[index]
    # read-only, yet a value a worker process or a notebook's copy can take whole
    for copied in (pickle.loads(pickle.dumps(sent)), copy.deepcopy(sent)):
        assert copied == sent and copied.pinned == sent.pinned
        with pytest.raises(TypeError):
            copied.pinned["x"] = sent.pinned["deepinfra/int4"]  # type: ignore[index]


def test_plan_with_reasoning_on_expects_the_worst_output() -> None:
    plan = plan_verify(
        SNAP.endpoints,
        model=SNAP.model,
        tags=["chutes/int4"],
        items=arith_suite(4),
        reasoning={"effort": "low"},
    )
    assert plan.endpoints[0].tokens.out_expected == plan.endpoints[0].tokens.out_worst
    assert any("reasoning is on" in n for n in plan.notes)


def test_a_base_slug_names_its_one_endpoint_or_lists_them() -> None:
    # issue 18: --endpoints chutes is chutes/int4 (the only chutes endpoint)
    plan = plan_verify(SNAP.endpoints, model=SNAP.model, tags=["chutes"], items=arith_suite(2))
    assert plan.compared == ["chutes/int4"]
    assert resolve_tag("chutes", SNAP.endpoints) == "chutes/int4"
    assert resolve_tag("together", SNAP.endpoints) == "together"  # a tag that is a slug
    endpoints = [
        _endpoint("moonshotai/int4", "Moonshot AI"),
        _endpoint("deepinfra/int4", "DeepInfra"),
        _endpoint("deepinfra/fp4", "DeepInfra"),
    ]
    with pytest.raises(
        ConfigError,
        match=r"endpoints='deepinfra': 2 endpoints have that slug \(deepinfra/int4, deepinfra/fp4\)",
    ):
        plan_verify(endpoints, model="moonshotai/k", tags=["deepinfra"], items=arith_suite(1))
    with pytest.raises(OptionError) as refused:  # every tag that pins none, at once
        plan_verify(
            SNAP.endpoints, model=SNAP.model, tags=["nosuch", "chutes/int4", "chutes/fp8"],
            items=arith_suite(1),
        )  # fmt: skip
    assert refused.value.values == {"endpoints": "nosuch,chutes/fp8"}
    assert str(refused.value).startswith(
        "endpoints='nosuch,chutes/fp8': 'nosuch' admits no endpoint: no endpoint has tag "
        "'nosuch'; 'chutes/fp8' admits no endpoint: no endpoint has tag 'chutes/fp8'; the "
        "model's tags: chutes/int4, deepinfra/int4,"
    )
    with pytest.raises(OptionError) as both:  # each under its own option
        plan_verify(
            SNAP.endpoints, model=SNAP.model, tags=["nosuch", "chutes/int4"],
            reference="chutes/fp8x", items=arith_suite(1),
        )  # fmt: skip
    assert both.value.values == {"reference": "chutes/fp8x", "endpoints": "nosuch"}
    assert str(both.value).startswith(
        "reference='chutes/fp8x': 'chutes/fp8x' admits no endpoint: no endpoint has tag "
        "'chutes/fp8x'; endpoints='nosuch': 'nosuch' admits no endpoint"
    )


@pytest.mark.parametrize(
    ("option", "message"),
    [
        ({"alpha": 1.5}, "alpha=1.5: must be a number strictly between 0 and 1"),
        ({"power": 1.0}, "power=1.0: must be"),
        ({"tolerance": 1}, "tolerance=1: must be"),
        ({"repeats": 1}, "repeats=1: must be an integer from 2 to 10"),
    ],
)
def test_plan_checks_its_statistical_arguments(option: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        plan_verify(SNAP.endpoints, model=SNAP.model, tags=INT4, items=arith_suite(1), **option)


def test_plan_errors() -> None:
    with pytest.raises(ConfigError, match="no prompts to send"):
        plan_verify(SNAP.endpoints, model=SNAP.model, tags=INT4, items=[])
    with pytest.raises(ConfigError, match="nothing to compare"):
        plan_verify(
            SNAP.endpoints, model=SNAP.model, tags=["moonshotai/int4"], items=arith_suite(1)
        )
    with pytest.raises(ConfigError, match="no first-party endpoint found for z-ai/glm"):
        plan_verify(SNAP.endpoints, model="z-ai/glm", tags=INT4, items=arith_suite(1))


def test_unpriced_endpoint_has_no_cost() -> None:
    endpoints = [
        _endpoint("moonshotai/int4", "Moonshot AI"),
        Endpoint(tag="free/int4", provider_name="Free", pricing=Pricing()),
    ]
    plan = plan_verify(endpoints, model="moonshotai/k", tags=["free/int4"], items=arith_suite(2))
    assert plan.endpoints[1].worst_case_usd is None
    assert plan.worst_case_usd is None and plan.fits_budget is None
    assert "$?" not in plan.render() and " ? " in plan.render()


def test_plan_bodies_are_the_pinned_requests_for_each_endpoint() -> None:
    items = arith_suite(3) + tools_suite(1)
    plan = plan_verify(SNAP.endpoints, model=SNAP.model, tags=["chutes/int4"], items=items)
    bodies = plan.bodies("chutes/int4")
    assert [item_id for item_id, _ in bodies] == [i.id for i in items]
    assert all(
        b["provider"] == {"only": ["chutes/int4"], "allow_fallbacks": False} for _, b in bodies
    )
    assert bodies[0][1] == request_body(items[0], plan.pinned["chutes/int4"], model=SNAP.model)
    assert "tools" in bodies[3][1] and "tools" not in bodies[0][1]
    ref = dict(plan.bodies("moonshotai/int4"))
    assert ref[items[0].id]["messages"] == bodies[0][1]["messages"]
    with pytest.raises(ConfigError, match="'fireworks' is not in this plan"):
        plan.bodies("fireworks")


def test_the_plan_says_what_gap_the_tolerance_hides_and_what_a_quantization_change_needs() -> None:
    plan = plan_verify(SNAP.endpoints, model=SNAP.model, tags=INT4, items=arith_suite(200))
    text = " ".join(plan.render().split())
    assert (
        "tolerance: at n=200 an endpoint 4 pp less accurate still gets its interval inside "
        "+-10 pp half the time (consistent unless a test rejects); for quantization-sized "
        "changes (1-5 pp) use tolerance 0.03, which needs n=839 for 80% power"
    ) in text
    # the figures are the equivalence test's: 4 pp lands inside half the time, 4.5 pp does not
    alpha = (1 - plan.interval_level) / 2
    inside = [
        equivalence_power(200, discordance=0.05 + g, tolerance=0.1, alpha=alpha, gap=g)
        for g in (0.04, 0.045)
    ]
    assert inside[0] >= 0.5 > inside[1]
    tight = plan_verify(
        SNAP.endpoints, model=SNAP.model, tags=INT4, items=arith_suite(839), tolerance=0.03
    )
    assert tight.equivalence_power >= 0.8 and tight.prompts_needed == 839

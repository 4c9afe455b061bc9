"""Per-endpoint measures from collected responses: scoring, agreement, tools, logprobs, cost."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
import yaml

from openrouter_probe.verify.measures import (
    FAILED,
    first_difference,
    measure_endpoint,
    score,
    top_k_distance,
)
from openrouter_probe.verify.observation import Observation
from openrouter_probe.verify.stats import clopper_pearson
from openrouter_probe.verify.suites import Item, arith_suite, tools_suite
from openrouter_probe.verify.verdict import PairedCounts
from tests.conftest import CAPTURES


def _body(
    content: str | None = None,
    *,
    provider: str = "Chutes",
    finish: str = "stop",
    tool_calls: list[dict[str, Any]] | None = None,
    logprobs: dict[str, Any] | None = None,
    cost: float | None = 0.0001,
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls is not None:
        message["tool_calls"] = tool_calls
    usage: dict[str, Any] = {"prompt_tokens": 40, "completion_tokens": 5}
    if cost is not None:
        usage["cost"] = cost
    return {
        "provider": provider,
        "choices": [
            {"index": 0, "finish_reason": finish, "message": message, "logprobs": logprobs}
        ],
        "usage": usage,
    }


def _lp(tokens: list[str], top: dict[str, float]) -> dict[str, Any]:
    first = [{"token": t, "logprob": v, "bytes": None} for t, v in top.items()]
    return {
        "content": [
            {"token": t, "logprob": -0.01, "top_logprobs": first if i == 0 else []}
            for i, t in enumerate(tokens)
        ]
    }


def test_observation_from_a_real_kimi_k25_body() -> None:
    # captures/kimi-k2.5-chat-inceptron.yaml (charmbracelet/fantasy @ 43a2aa51), byte for byte
    cassette = yaml.safe_load((CAPTURES / "kimi-k2.5-chat-inceptron.yaml").read_text())
    body = json.loads(cassette["interactions"][0]["response"]["body"])
    obs = Observation.from_completion("inceptron/int4", "hi-pt", body)
    assert obs.provider == "Inceptron"
    assert obs.finish_reason == "stop"
    assert obs.content is not None and obs.content.startswith(" Oi!")
    assert (obs.prompt_tokens, obs.completion_tokens, obs.reasoning_tokens) == (21, 202, 166)
    assert obs.cost_usd == 0.00045364
    assert obs.first_top_logprobs is None and obs.tokens is None  # "logprobs": null
    assert not obs.failed


def test_observation_reads_errors_tool_calls_and_logprobs() -> None:
    failed = Observation.from_completion(
        "chutes/int4", "x", {"error": {"code": 502, "message": "Provider returned error"}}
    )
    assert failed.error == "Provider returned error" and failed.failed
    call = {
        "id": "c1",
        "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city": "Paris", "unit": "celsius"}'},
    }
    broken = {"id": "c2", "type": "function", "function": {"name": "get_weather", "arguments": "{"}}
    obs = Observation.from_completion(
        "chutes/int4", "x", _body(None, finish="tool_calls", tool_calls=[call, broken])
    )
    assert [(c.name, c.arguments) for c in obs.tool_calls] == [
        ("get_weather", {"city": "Paris", "unit": "celsius"}),
        ("get_weather", None),
    ]
    lp = Observation.from_completion(
        "chutes/int4", "x", _body("42", logprobs=_lp(["4", "2"], {"4": -0.1, "3": -2.5}))
    )
    assert lp.first_top_logprobs == {"4": -0.1, "3": -2.5}
    assert lp.tokens == ("4", "2")


def test_observation_tolerates_odd_numbers() -> None:
    body = _body("4", logprobs=_lp(["4"], {"4": -0.1}))
    body["usage"] = {"prompt_tokens": "12", "completion_tokens": None, "cost": "0.00002"}
    body["choices"][0]["logprobs"]["content"][0]["top_logprobs"] += [
        {"token": "5"},  # no logprob: skipped
        {"token": "4", "logprob": -3.0},  # a duplicate keeps the larger
    ]
    body["model"] = "moonshotai/kimi-k2.5-0127"
    obs = Observation.from_completion("chutes/int4", "x", body)
    assert (obs.prompt_tokens, obs.completion_tokens, obs.cost_usd) == (12, 0, 0.00002)
    assert obs.first_top_logprobs == {"4": -0.1}
    assert obs.model == "moonshotai/kimi-k2.5-0127"
    empty = Observation.from_completion("chutes/int4", "x", {"choices": []})
    assert (empty.content, empty.finish_reason, empty.cost_usd) == (None, None, None)


def test_observation_from_a_generator_output_line() -> None:
    row = {
        "id": "r1",
        "status": "ok",
        "provider": "Chutes",
        "content": "42",
        "finish_reason": "stop",
        "usage": {
            "prompt_tokens": 30,
            "completion_tokens": 12,
            "completion_tokens_details": {"reasoning_tokens": 10},
        },
        "cost_usd": 0.00002,
        "error": None,
    }
    obs = Observation.from_output_line(row, endpoint="chutes/int4", item_id="arith/s0/00000")
    assert (obs.provider, obs.content, obs.reasoning_tokens, obs.cost_usd) == (
        "Chutes",
        "42",
        10,
        0.00002,
    )
    assert obs.tool_calls == () and obs.first_top_logprobs is None and not obs.failed


def test_score_numbers() -> None:
    item = arith_suite(1)[0]  # answer -24888792
    good = score(item, Observation("e", item.id, content="-24888792"))
    assert (good.correct, good.strict, good.normalised) == (True, True, "-24888792")
    loose = score(item, Observation("e", item.id, content="It is -24,888,792."))
    assert (loose.correct, loose.strict) == (True, False)
    wrong = score(item, Observation("e", item.id, content="-24888793"))
    assert wrong.correct is False


TOOL_ITEMS = {i.id: i for i in tools_suite(40)}
WEATHER = next(i for i in TOOL_ITEMS.values() if i.expect_tool == "get_weather")
NO_TOOL = next(i for i in TOOL_ITEMS.values() if i.expect_tool is None)
CONVERT = next(i for i in TOOL_ITEMS.values() if i.expect_tool == "convert_currency")


def _call(item: Item, name: str, arguments: str, endpoint: str = "e") -> Observation:
    body = _body(
        None,
        finish="tool_calls",
        tool_calls=[{"type": "function", "function": {"name": name, "arguments": arguments}}],
    )
    return Observation.from_completion(endpoint, item.id, body)


def test_score_tool_calls() -> None:
    city, unit = WEATHER.expect_arguments["city"], WEATHER.expect_arguments["unit"]
    other_unit = "celsius" if unit == "fahrenheit" else "fahrenheit"
    right = score(
        WEATHER, _call(WEATHER, "get_weather", json.dumps({"city": city.lower(), "unit": unit}))
    )
    assert (right.correct, right.schema_valid, right.called_tool) == (True, True, "get_weather")
    invalid = score(
        WEATHER, _call(WEATHER, "get_weather", json.dumps({"city": city, "unit": "kelvin"}))
    )
    assert (invalid.correct, invalid.schema_valid) == (False, False)
    wrong = score(
        WEATHER, _call(WEATHER, "get_weather", json.dumps({"city": city, "unit": other_unit}))
    )
    assert (wrong.correct, wrong.schema_valid) == (False, True)
    unknown_tool = score(WEATHER, _call(WEATHER, "get_time", "{}"))
    assert (unknown_tool.correct, unknown_tool.schema_valid) == (False, False)
    no_call = score(WEATHER, Observation("e", WEATHER.id, content="It is sunny."))
    assert (no_call.correct, no_call.called_tool, no_call.schema_valid) == (False, None, None)
    assert score(NO_TOOL, Observation("e", NO_TOOL.id, content="Paris")).correct is True
    arguments = {**CONVERT.expect_arguments, "amount": float(CONVERT.expect_arguments["amount"])}
    assert score(CONVERT, _call(CONVERT, "convert_currency", json.dumps(arguments))).correct is True
    failed = score(WEATHER, Observation("e", WEATHER.id, error="Provider returned error"))
    assert (failed.correct, failed.called_tool, failed.normalised) == (False, None, FAILED)


def test_score_text_and_unknown_answers() -> None:
    item = Item("q", "mine.jsonl", ({"role": "user", "content": "Capital?"},), answer="Paris")
    assert score(item, Observation("e", "q", content=" paris. ")).correct is True
    open_item = Item("o", "mine.jsonl", ({"role": "user", "content": "A haiku."},))
    assert score(open_item, Observation("e", "o", content="...")).correct is None


def test_top_k_distance_by_hand() -> None:
    p = {"A": math.log(0.6), "B": math.log(0.3)}  # rest 0.1
    q = {"A": math.log(0.5), "C": math.log(0.4)}  # rest 0.1
    # 1/2 (|.6-.5| + |.3-0| + |0-.4| + |.1-.1|) = 0.4; unlisted mass .1 + .1
    tv, unlisted = top_k_distance(p, q)
    assert tv == pytest.approx(0.4)
    assert unlisted == pytest.approx(0.2)
    assert top_k_distance(p, p) == (pytest.approx(0.0), pytest.approx(0.2))
    # disjoint top-1 lists carrying all the mass: the distance is 1
    assert top_k_distance({"A": 0.0}, {"B": 0.0})[0] == pytest.approx(1.0)


def test_first_difference() -> None:
    assert first_difference(["4", "2"], ["4", "2"]) is None
    assert first_difference(["4", "2"], ["4", "3"]) == 1
    assert first_difference(["4"], ["4", "2"]) == 1
    assert first_difference([], []) is None


def _arith_observations() -> tuple[dict[str, Item], list[Observation], list[Observation]]:
    items = {i.id: i for i in arith_suite(5)}
    ids = list(items)
    answers = [items[i].answer or "" for i in ids]
    top = {"-": -0.1, "3": -3.0}
    ref = [
        Observation.from_completion(
            "moonshotai/int4",
            ids[k],
            _body(a, provider="Moonshot AI", cost=0.0002, logprobs=_lp(["-", "2"], top)),
        )
        for k, a in enumerate(answers)
    ]
    ref[4] = Observation.from_completion("moonshotai/int4", ids[4], _body("7", cost=0.0002))
    mine_contents = [answers[0], answers[1], "12", answers[3], answers[4]]
    mine = [
        Observation.from_completion(
            "chutes/int4", ids[k], _body(c, logprobs=_lp(["-", "9"], {"-": -0.2, "3": -1.8}))
        )
        for k, c in enumerate(mine_contents)
    ]
    mine[3] = Observation.from_completion(
        "chutes/int4", ids[3], {"error": {"code": 502, "message": "Provider returned error"}}
    )
    return items, mine, ref


def test_measure_endpoint_by_hand() -> None:
    items, mine, ref = _arith_observations()
    reference = {o.item_id: o for o in ref}
    m = measure_endpoint("chutes/int4", items, mine, reference)
    # item 3 failed: an outcome (wrong), never dropped; of the others the endpoint got 0, 1, 4
    # right (2 says "12")
    assert (m.scored, m.failed, m.known, m.correct) == (4, 1, 5, 3)
    assert m.accuracy == 0.6
    assert m.accuracy_ci == clopper_pearson(3, 5)
    # pairs: 0, 1 both right; 2 and 3 (failed) ref only; 4 endpoint only (the reference said "7")
    assert m.counts == PairedCounts(both=2, ref_only=2, endpoint_only=1, neither=0)
    assert m.paired == 5
    assert m.exact_match_rate == 0.4  # 0 and 1; a failure agrees with nothing
    assert m.similarity_mean is not None and 0.3 < m.similarity_mean < 1.0
    assert m.finish_reasons == {"none": 1, "stop": 4}
    assert m.models == {}  # the bodies name no permaslug
    assert m.strict_format_rate == 1.0  # of the four answers
    # logprobs on pairs 0, 1, 2 (the reference's item 4 has none):
    # p = {-: e^-.2, 3: e^-1.8}, q = {-: e^-.1, 3: e^-3}; TV over {-, 3, other}
    p_dash, p_3 = math.exp(-0.2), math.exp(-1.8)
    q_dash, q_3 = math.exp(-0.1), math.exp(-3.0)
    tv = 0.5 * (
        abs(p_dash - q_dash) + abs(p_3 - q_3) + abs((1 - p_dash - p_3) - (1 - q_dash - q_3))
    )
    assert m.logprob_pairs == 3
    assert m.first_token_tv_mean == pytest.approx(tv)
    assert m.first_diff_token_median == 1 and m.identical_token_rate == 0.0
    assert m.cost_usd == pytest.approx(0.0004)  # four bodies at 0.0001, the error had no usage
    assert m.cost_unknown == 1
    assert (m.prompt_tokens, m.completion_tokens) == (160, 20)
    # without a second run of the reference there is no floor: accuracy decides alone
    assert [t.name for t in m.tests] == ["accuracy"]
    assert (m.tests[0].b, m.tests[0].c, m.tests[0].n) == (2, 1, 5)


def test_the_floor_pairs_the_endpoints_disagreement_with_the_references_own() -> None:
    items, mine, ref = _arith_observations()
    reference = {o.item_id: o for o in ref}
    # the reference's second run differs from its first on item 0 only
    second = dict(reference)
    second[ref[0].item_id] = Observation("moonshotai/int4", ref[0].item_id, content="1", repeat=2)
    m = measure_endpoint("chutes/int4", items, mine, reference, floor=[second])
    agreement = next(t for t in m.tests if t.name == "agreement")
    # endpoint differs on 2, 3 (failed), 4; the floor on 0: b = 3 items only the endpoint
    # differs on, c = 1 only the floor does; every item has t = x + a = 1
    assert (agreement.kind, agreement.n, agreement.b, agreement.c) == ("excess", 5, 3, 1)
    assert agreement.groups == ((1, 4, 3),)
    assert m.floor_disagreement == 0.2
    ref_m = measure_endpoint("moonshotai/int4", items, ref, reference, floor=[second])
    assert ref_m.tests == () and ref_m.exact_match_rate == 1.0 and ref_m.floor_disagreement == 0.2


def test_measure_tools_trigger_schema_and_arguments() -> None:
    good = json.dumps(WEATHER.expect_arguments)
    ref = {
        WEATHER.id: _call(WEATHER, "get_weather", good, "r"),
        NO_TOOL.id: Observation("r", NO_TOOL.id, content="Paris"),
    }
    floor = {
        WEATHER.id: _call(WEATHER, "get_weather", good, "r"),
        NO_TOOL.id: Observation("r", NO_TOOL.id, content="Lima"),
    }
    city = WEATHER.expect_arguments["city"]
    mine = [
        _call(WEATHER, "get_weather", json.dumps({"city": city})),  # schema-invalid: no unit
        _call(NO_TOOL, "get_weather", good),  # calls where the reference did not
    ]
    m = measure_endpoint("e", TOOL_ITEMS, mine, ref, floor=[floor])
    assert m.tool_calls == 2
    assert m.schema_valid_rate == 0.0  # of the one item that expects a call
    assert m.arguments_rate == 0.0
    assert m.trigger_agreement == 0.5
    assert m.trigger_f1 == pytest.approx(2 / 3)  # TP 1, FP 1, FN 0 against the reference
    assert m.floor_trigger_f1 == 1.0
    assert m.finish_reasons == {"tool_calls": 2}
    assert m.accuracy is None  # tool prompts are judged by the tool measures, not accuracy
    tests = {t.name: t for t in m.tests}
    assert set(tests) == {"tool_trigger", "tool_schema", "tool_arguments"}
    assert (tests["tool_trigger"].b, tests["tool_trigger"].c) == (1, 0)
    assert (tests["tool_schema"].n, tests["tool_schema"].b, tests["tool_schema"].c) == (1, 1, 0)
    assert (tests["tool_arguments"].b, tests["tool_arguments"].c) == (1, 0)

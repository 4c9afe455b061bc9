"""The fake's answers for the precision check: tool calls in OpenRouter's shape (streaming and not),
noise on every endpoint, flipped and broken-tool endpoints, and tags that match nothing refused."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest
import requests
from click.testing import CliRunner

from openrouter_probe.api.sse import iter_sse_events
from openrouter_probe.cli import cli
from openrouter_probe.errors import ConfigError
from openrouter_probe.fake import FakeOpenRouter, serve
from openrouter_probe.fake.content import answer_for, flip
from openrouter_probe.fake.tool_calls import tool_call_for
from openrouter_probe.rules.snapshot import bundled_snapshot
from openrouter_probe.run.send.transport import parse_body, parse_stream
from openrouter_probe.verify.suites import TOOLS, arith_suite, check_schema, tools_suite

MODEL = "moonshotai/kimi-k2.5"
KEY = {"Authorization": "Bearer sk-fake-test"}
SNAP = bundled_snapshot(MODEL)
WEATHER = next(i for i in tools_suite(40) if i.expect_tool == "get_weather")


def _body(item: Any, tag: str, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": MODEL,
        "messages": list(item.messages),
        "provider": {"only": [tag], "allow_fallbacks": False},
        "temperature": 0,
        "max_tokens": item.max_tokens,
        "reasoning": {"effort": "none"},
        **extra,
    }
    if item.tools:
        body |= {"tools": list(item.tools), "tool_choice": "auto"}
    return body


def _post(fake: Any, body: dict[str, Any], *, stream: bool = False) -> requests.Response:
    return requests.post(
        f"{fake.base_url}/chat/completions",
        json={**body, "stream": stream},
        headers=KEY,
        timeout=30,
    )


def test_every_built_in_tool_prompt_gets_its_expected_call() -> None:
    # the reference (undegraded, no noise) is right on the whole tool arm
    for item in tools_suite(500, seed=4):
        call = tool_call_for(item.messages[0]["content"], list(TOOLS))
        if item.expect_tool is None:
            assert call is None, item.id
        else:
            assert call is not None and (call[0], call[1]) == (
                item.expect_tool,
                item.expect_arguments,
            ), item.id


def test_a_tool_call_in_openrouters_non_streaming_shape() -> None:
    with serve(SNAP, speed=0) as fake:
        raw = _post(fake, _body(WEATHER, "chutes/int4"))
        billed = fake.ledger.total_usd
    assert raw.status_code == 200
    choice = raw.json()["choices"][0]
    assert choice["finish_reason"] == "tool_calls" == choice["native_finish_reason"]
    message = choice["message"]
    assert message["content"] == ""
    (call,) = message["tool_calls"]
    assert call["type"] == "function" and call["index"] == 0 and call["id"].startswith("call_")
    assert call["function"]["name"] == "get_weather"
    assert json.loads(call["function"]["arguments"]) == WEATHER.expect_arguments
    usage = raw.json()["usage"]
    assert usage["completion_tokens"] > 0 and usage["cost"] == float(billed) > 0
    # the generator's own reader keeps it
    answer = parse_body(raw.content)
    assert not hasattr(answer, "kind")
    assert answer.tool_calls == [call]  # type: ignore[union-attr]


def test_a_tool_call_streams_as_openai_deltas_and_merges_to_the_same_call() -> None:
    with serve(SNAP, speed=0) as fake:
        whole = _post(fake, _body(WEATHER, "chutes/int4")).json()
        streamed = _post(fake, _body(WEATHER, "chutes/int4"), stream=True)
        billed = [e.cost_usd for e in fake.ledger.entries]
    events = list(iter_sse_events(streamed.text.split("\n")))
    deltas = [
        e["choices"][0]["delta"]["tool_calls"][0]
        for e in events
        if e.get("choices") and e["choices"][0]["delta"].get("tool_calls")
    ]
    first, *rest = deltas
    assert first["index"] == 0 and first["type"] == "function" and first["id"].startswith("call_")
    assert first["function"] == {"name": "get_weather", "arguments": ""}
    assert rest and all(set(d) == {"index", "function"} for d in rest)
    assert all(set(d["function"]) == {"arguments"} for d in rest)
    assert events[-1]["choices"][0]["finish_reason"] == "tool_calls"
    merged = parse_stream(streamed.text)
    assert not hasattr(merged, "kind")
    expected = whole["choices"][0]["message"]["tool_calls"][0]
    (call,) = merged.tool_calls  # type: ignore[union-attr]
    assert call["id"] == expected["id"] and call["function"] == expected["function"]
    assert billed[0] == billed[1]  # the same tokens, streamed or not


def test_tool_choice_none_and_a_prompt_naming_no_tool_get_text() -> None:
    no_tool = next(i for i in tools_suite(40) if i.expect_tool is None)
    with serve(SNAP, speed=0) as fake:
        plain = _post(fake, _body(no_tool, "chutes/int4")).json()["choices"][0]
        refused = _post(fake, _body(WEATHER, "chutes/int4") | {"tool_choice": "none"}).json()
    # text of the fake's usual length (a long one is cut at max_tokens), never a call
    assert plain["finish_reason"] in ("stop", "length") and "tool_calls" not in plain["message"]
    assert plain["message"]["content"]
    assert refused["choices"][0]["finish_reason"] in ("stop", "length")
    assert "tool_calls" not in refused["choices"][0]["message"]


def test_noise_changes_that_share_of_answers_on_every_endpoint() -> None:
    item = arith_suite(1)[0]
    with serve(SNAP, speed=0, noise=0.2, seed=3) as fake:
        answers = {
            tag: Counter(
                _post(fake, _body(item, tag)).json()["choices"][0]["message"]["content"]
                for _ in range(200)
            )
            for tag in ("moonshotai/int4", "chutes/int4")
        }
    for tag, counts in answers.items():
        right = counts.most_common(1)[0]
        assert right[0].endswith(f"= {item.answer}")  # the answer without noise
        assert 200 - 60 < right[1] < 200 - 20, (tag, counts)  # about 20% changed, both alike


def test_noise_changes_one_tool_argument_and_keeps_the_schema() -> None:
    schema = TOOLS[0]["function"]["parameters"]
    with serve(SNAP, speed=0, noise=1.0) as fake:
        call = _post(fake, _body(WEATHER, "moonshotai/int4")).json()["choices"][0]["message"]
    arguments = json.loads(call["tool_calls"][0]["function"]["arguments"])
    assert arguments != WEATHER.expect_arguments
    assert check_schema(arguments, schema) == []


def test_a_flip_keeps_the_accuracy_and_changes_the_items() -> None:
    # hard = 0.1: the model is wrong on the items whose draw is >= 0.9; a flip of 0.1 makes the
    # endpoint wrong below 0.1 and right at 0.9 and above
    items = arith_suite(400, seed=1)
    base, flipped = [], []
    for item in items:
        answer = answer_for(
            list(item.messages),
            seed=0,
            nonce=None,
            max_tokens=256,
            reasoning=False,
            reasoning_share=0.8,
            median_tokens=300,
            hard=0.1,
        )
        base.append(answer.content[-1].strip() == item.answer)
        flipped.append(flip(answer, rate=0.1).content[-1].strip() == item.answer)
    changed = sum(a != b for a, b in zip(base, flipped, strict=True))
    assert 50 < changed < 110  # ~20% of items change outcome
    assert abs(sum(base) - sum(flipped)) < 20  # the accuracy stays about the same
    assert 330 < sum(base) < 390  # ~90% right (hard = 0.1)


def test_a_flipped_and_a_broken_tools_endpoint_over_http() -> None:
    items = arith_suite(100)
    calls = [i for i in tools_suite(120) if i.expect_tool][:80]
    changes = {"degrade_flip": ["deepinfra/int4=0.2"], "degrade_tools": ["atlas-cloud/int4=0.5"]}
    with serve(SNAP, speed=0, **changes) as fake:

        def content(tag: str, item: Any) -> str:
            return _post(fake, _body(item, tag)).json()["choices"][0]["message"]["content"]

        ref = [content("moonshotai/int4", i) for i in items]
        mine = [content("deepinfra/int4", i) for i in items]
        tool_answers = [
            _post(fake, _body(i, "atlas-cloud/int4")).json()["choices"][0] for i in calls
        ]
    differ = sum(a != b for a, b in zip(ref, mine, strict=True))
    assert 20 < differ < 60  # 20% flipped each way: ~40% of items differ
    missing = sum(1 for c in tool_answers if "tool_calls" not in c["message"])
    invalid = 0
    for c, item in zip(tool_answers, calls, strict=True):
        if "tool_calls" in c["message"]:
            tool = next(t for t in TOOLS if t["function"]["name"] == item.expect_tool)
            arguments = json.loads(c["message"]["tool_calls"][0]["function"]["arguments"])
            invalid += bool(check_schema(arguments, tool["function"]["parameters"]))
    assert missing > 5 and invalid > 5 and 20 < missing + invalid < 60  # ~50% broken


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"faults": "upstream_429:nosuch/tag=0.5"},
            "faults upstream_429:nosuch/tag: no endpoint",
        ),
        ({"degrade": ["nosuch=0.2"]}, "degrade nosuch=0.2: no endpoint matches 'nosuch'"),
        ({"degrade_flip": {"nosuch": 0.2}}, "degrade_flip nosuch=0.2: no endpoint matches"),
        ({"degrade_tools": ["chutes/fp8=0.2"]}, "degrade_tools chutes/fp8=0.2: no endpoint"),
        ({"degrade_flip": ["chutes=0.6"]}, "degrade_flip rate 0.6: must be at most 0.5"),
        ({"noise": 1.5}, "noise: rate 1.5 must be between 0 and 1"),
    ],
)
def test_a_tag_that_matches_no_endpoint_is_refused(options: dict[str, Any], message: str) -> None:
    # issue 18: these used to start normally although the fault could never fire
    with pytest.raises(ConfigError, match=message) as info:
        FakeOpenRouter(SNAP, **options)
    if "no endpoint" in message:
        assert "chutes/int4" in str(info.value) and "(atlas-cloud, baseten, chutes" in str(
            info.value
        )


def test_a_slug_or_a_full_tag_is_accepted() -> None:
    fake = FakeOpenRouter(SNAP, faults="upstream_429:chutes=0.5", degrade=["deepinfra/int4=0.1"])
    assert fake.degradation.rates_for(SNAP.endpoints[1]) == (0.1, 0.0, 0.0)


@pytest.mark.parametrize(
    "args",
    [
        ["--faults", "upstream_429:nosuch/tag=0.5"],
        ["--degrade", "nosuch=0.2"],
        ["--degrade-flip", "nosuch=0.2"],
        ["--degrade-tools", "nosuch=0.2"],
    ],
)
def test_fake_server_command_refuses_an_unknown_tag_in_one_line(args: list[str]) -> None:
    result = CliRunner().invoke(cli, ["fake-server", "--offline", "--port", "0", *args])
    assert result.exit_code == 1
    (line,) = [x for x in result.stderr.splitlines() if x.startswith("Error:")]
    assert "no endpoint matches" in line and "use a tag (atlas-cloud/int4," in line

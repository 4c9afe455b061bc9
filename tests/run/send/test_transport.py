"""Parsing and classification of real OpenRouter answers (tests/data/captures, byte-exact copies).

Each test names the capture it reads; figures asserted are the capture's own.
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest
import yaml

from openrouter_probe.run.send.transport import (
    Answer,
    Failure,
    classify_error,
    parse_body,
    parse_stream,
)
from tests.conftest import CAPTURES


def _responses(name: str) -> list[dict[str, Any]]:
    doc = yaml.safe_load((CAPTURES / name).read_text(encoding="utf-8"))
    return [i["response"] for i in doc["interactions"]]


def test_nonstream_k25_inceptron_with_padding() -> None:
    (response,) = _responses("kimi-k2.5-chat-inceptron.yaml")
    body = response["body"]
    assert body.startswith("\n         \n")  # the keep-alive padding is really there
    answer = parse_body(body.encode())
    assert isinstance(answer, Answer)
    assert answer.provider == "Inceptron"
    assert answer.model == "moonshotai/kimi-k2.5-0127"
    assert answer.generation_id == "gen-1777319885-pLuUvaQdB3l6lRlhlKuv"
    assert answer.finish_reason == "stop"
    assert answer.content is not None and answer.content.startswith(" Oi!")
    assert answer.reasoning is not None and answer.reasoning.startswith(" The user wants")
    assert answer.cost_usd == Decimal("0.00045364")
    assert answer.completion_tokens == 202
    assert answer.usage is not None
    assert answer.usage["completion_tokens_details"]["reasoning_tokens"] == 166


def test_stream_k25_modelrun() -> None:
    (response,) = _responses("kimi-k2.5-stream-modelrun.yaml")
    body = response["body"]
    assert ": OPENROUTER PROCESSING" in body
    answer = parse_stream(body.encode())
    assert isinstance(answer, Answer)
    assert answer.provider == "ModelRun"
    assert answer.model == "moonshotai/kimi-k2.5-0127"
    assert answer.generation_id == "gen-1777319889-qNPs6PR0SRru1d3CzVF1"
    assert answer.finish_reason == "stop"
    assert answer.cost_usd == Decimal("0.0005738")
    assert answer.usage is not None and answer.usage["total_tokens"] == 194
    assert answer.usage["completion_tokens_details"]["reasoning_tokens"] == 165
    # Every delta is joined, in order: the reasoning starts as the first chunks say.
    assert answer.reasoning is not None and answer.reasoning.startswith(
        ' The user wants me to say "hi" in'
    )
    events = [json.loads(line[6:]) for line in body.split("\n") if line.startswith("data: {")]
    expected_content = "".join(
        c["delta"].get("content") or "" for e in events for c in e.get("choices", [])
    )
    assert answer.content == expected_content and answer.content


def test_stream_2025_usage_chunk_with_null_finish() -> None:
    (response,) = _responses("kimi-k2-0905/simple_streaming_kimi-k2_moonshotai.yaml")
    answer = parse_stream(response["body"])
    assert isinstance(answer, Answer)
    assert answer.provider == "Moonshot AI"
    assert answer.finish_reason == "stop"
    assert answer.cost_usd == Decimal("0.000039")
    assert answer.completion_tokens == 3


def test_groq_429_is_transient_and_rate_limited() -> None:
    first, second = _responses("kimi-k2-0905/simple_kimi-k2_groq.yaml")
    error = json.loads(first["body"])["error"]
    failure = classify_error(first["code"], error)
    assert failure.kind == "transient" and failure.rate_limited
    assert "Groq" in failure.message and "rate-limited upstream" in failure.message
    answer = parse_body(second["body"])
    assert isinstance(answer, Answer) and answer.cost_usd == Decimal("0.000032")


@pytest.mark.parametrize(
    ("status", "error", "kind"),
    [
        (401, {"message": "User not found.", "code": 401}, "run"),
        (
            402,
            {
                "message": "Insufficient credits. Add more using https://openrouter.ai/settings/credits",
                "code": 402,
            },
            "run",
        ),
        (
            404,
            {"message": "No allowed providers are available for the selected model.", "code": 404},
            "run",
        ),
        (408, {"message": "Request timed out", "code": 408}, "transient"),
        (502, {"message": "Provider returned error", "code": 502}, "transient"),
        (503, {"message": "overloaded", "code": 503}, "transient"),
        (524, {"message": "edge timeout", "code": 524}, "transient"),
        (529, {"message": "overloaded", "code": 529}, "transient"),
        (403, {"message": "flagged", "code": 403, "metadata": {"reasons": ["x"]}}, "row"),
        (
            400,
            {
                "message": "Provider returned error",
                "code": 400,
                "metadata": {
                    "raw": "maximum context length is 262144 tokens",
                    "provider_name": "OpenAI",
                    "provider_error_code": "context_length_exceeded",
                },
            },
            "row",
        ),
        (
            400,
            {"message": "Provider returned error", "code": 400, "metadata": {"provider_code": 429}},
            "transient",
        ),
        (
            400,
            {
                "message": "Provider returned error",
                "code": 400,
                "metadata": {"error_type": "provider_overloaded"},
            },
            "transient",
        ),
        (
            400,
            {
                "message": "Provider returned error",
                "code": 400,
                "metadata": {"raw": "upstream 503 Service Unavailable"},
            },
            "transient",
        ),
    ],
)
def test_classification(status: int, error: dict[str, Any], kind: str) -> None:
    assert classify_error(status, error).kind == kind


def test_402_can_only_afford() -> None:
    message = (
        "This request requires more credits, or fewer max_tokens. You requested up to 16384 "
        "tokens, but can only afford 1056."
    )
    failure = classify_error(402, {"message": message, "code": 402})
    assert failure.kind == "run" and failure.afford_tokens == 1056


def test_mid_stream_error_on_200_is_transient() -> None:
    # OPENROUTER.md §8: the documented mid-stream error event.
    chunk = {
        "id": "gen-abc123",
        "object": "chat.completion.chunk",
        "model": "openai/gpt-4o",
        "provider": "OpenAI",
        "error": {
            "code": 429,
            "message": "Rate limit exceeded",
            "metadata": {"error_type": "rate_limit_exceeded"},
        },
        "choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": "error"}],
    }
    head = {
        "id": "gen-abc123",
        "provider": "OpenAI",
        "choices": [{"index": 0, "delta": {"content": "Hel"}}],
    }
    body = f"data: {json.dumps(head)}\n\ndata: {json.dumps(chunk)}\n\n"
    failure = parse_stream(body)
    assert isinstance(failure, Failure)
    assert failure.kind == "transient" and failure.rate_limited
    assert failure.message == "Rate limit exceeded"


@pytest.mark.parametrize(
    "body",
    [
        {"error": {"code": 502, "message": "Provider returned error"}},
        {
            "choices": [
                {"index": 0, "finish_reason": "error", "error": {"code": 503, "message": "down"}}
            ]
        },
        {
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "error",
                    "native_finish_reason": "MALFORMED_FUNCTION_CALL",
                    "message": {"content": ""},
                }
            ]
        },
    ],
)
def test_200_bodies_that_report_an_error(body: dict[str, Any]) -> None:
    failure = parse_body("\n   \n" + json.dumps(body))
    assert isinstance(failure, Failure) and failure.kind == "transient"


def test_200_body_error_with_final_code_is_a_row_failure() -> None:
    body = {
        "choices": [
            {
                "index": 0,
                "finish_reason": "error",
                "error": {"code": 400, "message": "context length exceeded"},
            }
        ]
    }
    failure = parse_body(json.dumps(body))
    assert isinstance(failure, Failure) and failure.kind == "row"


def test_truncated_stream_is_transient() -> None:
    (response,) = _responses("kimi-k2.5-stream-modelrun.yaml")
    body: str = response["body"]
    # Cut at an event boundary before the finish: a connection dropped between two events.
    cut = body[: body.rindex("\n\ndata: ", 0, body.index('finish_reason":"stop')) + 2]
    failure = parse_stream(cut)
    assert isinstance(failure, Failure) and failure.kind == "transient"
    assert "ended before its finish" in failure.message


def test_stream_tool_calls_are_merged() -> None:
    chunks = [
        {
            "id": "g",
            "provider": "P",
            "choices": [
                {
                    "index": 0,
                    "delta": {
                        "tool_calls": [
                            {
                                "index": 0,
                                "id": "call_1",
                                "type": "function",
                                "function": {"name": "add", "arguments": '{"a":'},
                            }
                        ]
                    },
                }
            ],
        },
        {
            "id": "g",
            "provider": "P",
            "choices": [
                {
                    "index": 0,
                    "delta": {"tool_calls": [{"index": 0, "function": {"arguments": " 1}"}}]},
                }
            ],
        },
        {
            "id": "g",
            "provider": "P",
            "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 5, "cost": 0.00001},
        },
    ]
    body = (
        ": OPENROUTER PROCESSING\n\n"
        + "".join(f"data: {json.dumps(c)}\n\n" for c in chunks)
        + "data: [DONE]\n\n"
    )
    answer = parse_stream(body)
    assert isinstance(answer, Answer)
    assert answer.tool_calls == [
        {"type": "function", "id": "call_1", "function": {"arguments": '{"a": 1}', "name": "add"}}
    ]
    assert answer.finish_reason == "tool_calls" and answer.cost_usd == Decimal("0.00001")


def test_not_json_body_is_transient() -> None:
    failure = parse_body(b"<html>gateway</html>")
    assert isinstance(failure, Failure) and failure.kind == "transient"


def test_truncated_event_is_transient() -> None:
    (response,) = _responses("kimi-k2.5-stream-modelrun.yaml")
    body: str = response["body"]
    failure = parse_stream(body[: body.index('finish_reason":"stop') - 200])
    assert isinstance(failure, Failure) and failure.kind == "transient"
    assert failure.message.startswith("broken stream: stream event is not JSON")


@pytest.mark.parametrize(
    ("body", "failed"),
    [
        (_responses("kimi-k2.5-chat-inceptron.yaml")[0]["body"], False),
        (_responses("kimi-k2-0905/simple_kimi-k2_groq.yaml")[1]["body"], False),
        (json.dumps({"error": {"code": 502, "message": "Provider returned error"}}), True),
        (
            json.dumps(
                {
                    "choices": [
                        {
                            "index": 0,
                            "finish_reason": "error",
                            "error": {"code": 503, "message": "down"},
                        }
                    ]
                }
            ),
            True,
        ),
        (
            json.dumps(
                {"choices": [{"index": 0, "finish_reason": "error", "message": {"content": ""}}]}
            ),
            True,
        ),
        (
            json.dumps(
                {
                    "choices": [
                        {"index": 0, "finish_reason": "length", "message": {"content": "cut"}}
                    ]
                }
            ),
            False,
        ),
    ],
)
def test_failure_detection_of_the_one_model(body: str, failed: bool) -> None:
    """The transport's outcome and the API's one model of a completion agree: a body is a
    ``Failure`` exactly when ``api.chat.ChatCompletion.failed`` says so, and that is what the
    body's shape says (a top-level error, a choice error, a finish_reason of error)."""
    from openrouter_probe.api.completion import read_completion

    assert read_completion(body).failed is failed
    assert isinstance(parse_body(body), Failure) is failed


@pytest.mark.parametrize(
    "name",
    [
        "kimi-k2.5-stream-modelrun.yaml",
        "kimi-k2-0905/simple_streaming_kimi-k2_moonshotai.yaml",
    ],
)
def test_the_fast_event_reader_reads_what_the_sse_parser_reads(name: str) -> None:
    from openrouter_probe.api.sse import iter_sse_events, parse_sse_events

    (response,) = _responses(name)
    body: str = response["body"]
    slow = list(iter_sse_events(body.split("\n")))
    assert list(parse_sse_events(body)) == slow and len(slow) > 3

    def both(text: str) -> list[Any]:
        fast = list(parse_sse_events(text))
        assert fast == list(iter_sse_events(text.split("\n")))
        return fast

    # the shapes it hands back to the event parser: every one still read the same
    assert both("data: {\n" + 'data: "a": 1}\n\n' + body)[0] == {"a": 1}  # over two lines
    assert both(body.replace("data: {", "data:{", 1)) == slow  # no space after the colon
    assert both(body.replace("\n", "\r\n")) == slow
    long = "".join(f'data: {{"n": {i}}}\n\n' for i in range(123)) + "data: [DONE]\n\n"
    assert both(long) == [{"n": i} for i in range(123)]  # over three batches
    for broken, why in (
        ('data: {"a": 1},{"b": 2}\n\n', "stream event is not JSON"),  # two objects on a line
        ("data: [1, 2]\n\n", "stream event is not a JSON object"),
        ('data: {"n": 1}\n\n' * 60 + 'data: {"n": \n\n', "stream event is not JSON"),
    ):
        with pytest.raises(Exception, match=why):
            list(parse_sse_events(broken))
    assert both("") == [] and both("data: [DONE]\n\n") == []

"""A stream read typed (``api.sse.read_chunks``) says what it says read event by event.

``read_stream`` reads a stream in OpenRouter's form through msgspec structs and any other through
``parse_sse_events``; the two must agree on every body, and the typed way must really be the one
taken for the bodies a run sees (captures, the fake's answers), or its speed is a claim.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import requests
import yaml

from openrouter_probe.api import completion
from openrouter_probe.api.completion import read_stream
from openrouter_probe.api.sse import read_chunks
from openrouter_probe.fake import serve
from tests.conftest import CAPTURES

KIMI = "moonshotai/kimi-k2.5"


def _event(**delta: Any) -> dict[str, Any]:
    return {
        "id": "gen-1",
        "model": "moonshotai/kimi-k2.5-0127",
        "provider": "Chutes",
        "choices": [{"index": 0, "delta": delta, "finish_reason": None}],
    }


def _finish(reason: Any = "stop", **extra: Any) -> dict[str, Any]:
    return {
        "id": "gen-1",
        "choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": reason, **extra}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "cost": 0.0001},
    }


def _sse(*events: Any, head: str = ": OPENROUTER PROCESSING\n\n", done: bool = True) -> bytes:
    text = head + "".join(f"data: {json.dumps(e)}\n\n" for e in events)
    return (text + ("data: [DONE]\n\n" if done else "")).encode()


def _slow(body: bytes | str, monkeypatch: pytest.MonkeyPatch) -> completion.ChatCompletion:
    with monkeypatch.context() as patch:
        patch.setattr(completion, "read_chunks", lambda data: None)
        return read_stream(body)


def _captured() -> list[bytes]:
    bodies = []
    for name in ("kimi-k2.5-stream-modelrun.yaml", "kimi-k2-0905"):
        for path in (
            sorted((CAPTURES / name).glob("*.yaml")) if "." not in name else [CAPTURES / name]
        ):
            for turn in yaml.safe_load(path.read_text(encoding="utf-8"))["interactions"]:
                body = turn["response"]["body"]
                if "data: " in body:
                    bodies.append(body.encode())
    return bodies


def _served(
    faults: str | None = None, ask: str = "what is {i} * 41?", **request: Any
) -> list[bytes]:
    with serve(speed=0, seed=3, faults=faults) as fake:
        return [
            requests.post(
                f"{fake.base_url}/chat/completions",
                headers={"Authorization": "Bearer sk-or-v1-test"},
                json={
                    "model": KIMI,
                    "stream": True,
                    "messages": [{"role": "user", "content": ask.format(i=i)}],
                    "max_tokens": 40 + 20 * i,
                    **request,
                },
                timeout=30,
            ).content
            for i in range(6)
        ]


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "multiply",
            "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}},
        },
    }
]


def test_every_captured_and_served_stream_is_read_typed_and_alike(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with_tools = _served(ask="please multiply {i} by 41", tools=TOOLS, max_tokens=400)
    bodies = _captured() + _served() + with_tools + _served("finish_null=1")
    assert len(bodies) >= 20
    for body in bodies:
        assert read_chunks(body) is not None, body[:300]
        typed = read_stream(body)
        assert typed == _slow(body, monkeypatch)
        assert typed.content or typed.reasoning or typed.tool_calls
    # the tool-call deltas went the typed way too (a reasoning cut at max_tokens calls nothing)
    calls = [a.tool_calls for a in map(read_stream, with_tools) if a.finish_reason != "length"]
    assert len(calls) >= 3 and all(calls)


def test_a_stream_with_an_error_is_read_event_by_event(monkeypatch: pytest.MonkeyPatch) -> None:
    # the error rules live in one place (``_Read.events``): the typed reader gives these up
    bodies = [b for b in _served("stream_error=1") if b"error" in b]
    bodies.append(_sse(_event(content="Hi"), {"error": {"code": 502, "message": "upstream"}}))
    bodies.append(_sse(_event(content="Hi"), _finish("error", native_finish_reason="boom")))
    bodies.append(_sse(_event(content="Hi"), _finish("stop", error={"message": "cut"})))
    gathered = []
    original = completion._Read.events
    monkeypatch.setattr(
        completion._Read, "events", lambda self, e: gathered.append(1) or original(self, e)
    )
    for body in bodies:
        answer = read_stream(body)
        assert answer.error is not None, body[-400:]
        assert answer.content == "Hi" or b"stream_error" not in body
    assert len(gathered) == len(bodies)


@pytest.mark.parametrize(
    ("name", "body"),
    [
        ("plain", _sse(_event(content="Hi"), _finish())),
        ("no comment", _sse(_event(content="Hi"), _finish(), head="")),
        (
            "comment mid-stream",
            _sse(_event(content="Hi"), _finish()).replace(
                b"\n\ndata: {", b"\n\n: keep-alive\n\ndata: {", 1
            ),
        ),
        ("CRLF lines", _sse(_event(content="Hi"), _finish()).replace(b"\n", b"\r\n")),
        (
            "data: without space",
            _sse(_event(content="Hi"), _finish()).replace(b"data: {", b"data:{", 1),
        ),
        (
            "an id field",
            _sse(_event(content="Hi"), _finish()).replace(b"data: {", b"id: 7\ndata: {", 1),
        ),
        ("event after DONE", _sse(_event(content="Hi"), _finish()) + b'data: {"x": 1}\n\n'),
        ("DONE with a tail", _sse(_event(content="Hi"), _finish()).replace(b"[DONE]", b"[DONE]x")),
        ("no DONE", _sse(_event(content="Hi"), _finish(), done=False)),
        ("cut mid-event", _sse(_event(content="Hi"), _finish())[:-40]),
        ("no finish", _sse(_event(content="Hi"))),
        ("empty first event", _sse({}, _event(content="Hi"), _finish())),
        ("choices null", _sse({"id": "g", "choices": None}, _event(content="Hi"), _finish())),
        ("delta null", _sse({"id": "g", "choices": [{"delta": None}]}, _finish())),
        ("delta a string", _sse({"id": "g", "choices": [{"delta": "odd"}]}, _finish())),
        ("choice a string", _sse({"id": "g", "choices": ["odd"]}, _finish())),
        ("usage a number", _sse(_event(content="Hi"), {**_finish(), "usage": 5})),
        ("event an array", _sse(_event(content="Hi"), [1, 2], _finish())),
        ("not JSON", _sse(_event(content="Hi"), _finish()).replace(b"}}]}", b"}}]", 1)),
        ("not UTF-8", _sse(_event(content="H\u00e9"), _finish()).replace(b"\\u00e9", b"\xe9")),
        ("NaN cost", _sse(_event(content="Hi"), _finish()).replace(b"0.0001", b"NaN")),
        (
            "two details",
            _sse(
                _event(
                    reasoning="a",
                    reasoning_details=[
                        {"type": "reasoning.text", "text": "a", "index": 0},
                        {"type": "reasoning.encrypted", "data": "xyz", "index": 1},
                    ],
                ),
                _finish(),
            ),
        ),
        (
            "a signature",
            _sse(
                _event(
                    reasoning="a",
                    reasoning_details=[
                        {
                            "type": "reasoning.text",
                            "text": "a",
                            "format": "anthropic-claude-v1",
                            "index": 0,
                        }
                    ],
                ),
                _event(
                    reasoning_details=[
                        {
                            "type": "reasoning.text",
                            "signature": "sig",
                            "format": "anthropic-claude-v1",
                            "index": 0,
                        }
                    ]
                ),
                _finish(),
            ),
        ),
        ("a str body", _sse(_event(content="Hi"), _finish()).decode()),
        # review of 0.3: commas joined the events into an array that decoded whole
        (
            "two objects in one event",
            _sse(_event(content="Hi"), _finish()).replace(
                b"\n\ndata: {", b"\n\ndata: " + json.dumps(_event(content="x")).encode() + b", {", 1
            ),
        ),
        (
            "one object over two events",
            _sse(_event(content="Hi"), _finish()).replace(
                b'}], "usage"', b'}]\n\ndata: "usage"', 1
            ),
        ),
        (
            "two objects in the first event",
            _sse(_event(content="Hi"), _finish()).replace(b"data: {", b"data: {}, {", 1),
        ),
        ("a lone surrogate", _sse(_event(content="Hi"), _finish()).decode() + "\ud800"),
    ],
)
def test_an_odd_stream_reads_the_same_either_way(
    name: str, body: bytes | str, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert read_stream(body) == _slow(body, monkeypatch), name


def test_the_typed_reader_takes_only_streams_in_openrouter_form() -> None:
    good = _sse(_event(content="Hi"), _finish())
    assert read_chunks(good) is not None
    assert read_chunks(good.replace(b"\n", b"\r\n")) is None
    assert read_chunks(good.replace(b"[DONE]", b"[DONE]x")) is None
    assert read_chunks(_sse(_event(content="Hi"), done=False)) is None
    assert read_chunks(_sse({}, _event(content="Hi"))) is None  # the envelope is the next one's
    assert read_chunks(b"event: x\n" + good) is None
    chunks, envelope = read_chunks(good) or ([], None)
    assert len(chunks) == 2 and envelope is not None
    assert (envelope.id, envelope.provider) == ("gen-1", "Chutes")
    assert chunks[0].choices is not None and chunks[0].choices[0].delta is not None
    assert chunks[0].choices[0].delta.content == "Hi"
    assert chunks[1].usage == {"prompt_tokens": 3, "completion_tokens": 2, "cost": 0.0001}


@pytest.mark.parametrize(
    "delta",
    [
        {"content": 5},
        {"reasoning": ["x"]},
        {"tool_calls": 7},
        {"tool_calls": [{"function": "x"}]},
        {"tool_calls": [{"index": [1]}]},
        {"tool_calls": [{"function": {"arguments": 5}}]},
        {"reasoning_details": 5},
    ],
)
def test_a_delta_of_another_shape_is_a_broken_stream_not_a_crash(delta: dict[str, Any]) -> None:
    """Review of 0.3: a delta whose ``content`` is not text (or whose ``tool_calls`` is not a
    list of objects) raised ``TypeError`` out of the reader, either path: the stream is broken
    (transient, its cost unknown until ``/generation`` says it), and the run goes on."""
    from openrouter_probe.run.send.transport import parse_stream

    body = _sse({"id": "gen-1", "choices": [{"index": 0, "delta": delta}]}, _finish())
    answer = read_stream(body, generation_id="gen-h")
    assert answer.broken is not None
    assert answer.broken.startswith("broken stream: a delta of a shape no reader knows (")
    failure = parse_stream(body, generation_id="gen-h")
    assert (failure.kind, failure.cost_unknown, failure.generation_id) == (  # type: ignore[union-attr]
        "transient",
        True,
        "gen-h",
    )

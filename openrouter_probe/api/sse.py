"""Server-sent events as OpenRouter streams them.

Frames are ``data: <json>`` lines separated by blank lines; lines starting with ``:`` are comments
(``: OPENROUTER PROCESSING`` keep-alives) and are skipped; ``data: [DONE]`` ends the stream. A
mid-stream error arrives as a ``data:`` event with an ``error`` object while HTTP stays 200.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

from openrouter_probe.errors import APIError

__all__ = ["iter_sse_events", "parse_sse_events"]


def iter_sse_events(lines: Iterable[str]) -> Iterator[dict[str, Any]]:
    """Yield the JSON object of every ``data:`` event until ``[DONE]``.

    Multi-line ``data:`` fields are joined with newlines as the SSE format says; comments and
    other fields (``event:``, ``id:``) are ignored. A data field that is not JSON is an
    ``APIError`` naming the event.
    """
    buffer: list[str] = []
    for raw in lines:
        line = raw.rstrip("\r\n")
        if line.startswith(":"):
            continue
        if line:
            if line.startswith("data:"):
                buffer.append(line[5:].removeprefix(" "))
            continue
        if not buffer:
            continue
        data, buffer = "\n".join(buffer), []
        if data == "[DONE]":
            return
        yield _decode(data)
    if buffer:
        data = "\n".join(buffer)
        if data != "[DONE]":
            yield _decode(data)


def _decode(data: str) -> dict[str, Any]:
    try:
        event = json.loads(data)
    except ValueError as exc:
        raise APIError(f"stream event is not JSON ({exc}): {data[:120]!r}") from exc
    if not isinstance(event, dict):
        raise APIError(f"stream event is not a JSON object: {data[:120]!r}")
    return event


def parse_sse_events(text: str) -> list[dict[str, Any]]:
    """Return the JSON object of every ``data:`` event of a whole stream, until ``[DONE]``.

    The same events as ``iter_sse_events``, read faster: when every event is one ``data:`` line
    holding one JSON object (as OpenRouter sends them), the lines are decoded in one
    ``json.loads`` of an array; anything else (a multi-line field, an event that is not an object)
    goes through ``iter_sse_events``, which also names a malformed event.
    """
    payloads = []
    for line in text.split("\n"):
        if line.startswith("data: "):
            data = line[6:].rstrip("\r")
            if data == "[DONE]":
                break
            if not (data.startswith("{") and data.endswith("}")):
                return list(iter_sse_events(text.split("\n")))
            payloads.append(data)
        elif line.startswith("data:"):
            return list(iter_sse_events(text.split("\n")))
    try:
        events: list[dict[str, Any]] = json.loads("[" + ",".join(payloads) + "]")
    except ValueError:
        return list(iter_sse_events(text.split("\n")))
    if len(events) != len(payloads) or not all(type(e) is dict for e in events):
        return list(iter_sse_events(text.split("\n")))
    return events

"""Server-sent events as OpenRouter streams them.

Frames are ``data: <json>`` lines separated by blank lines; lines starting with ``:`` are comments
(``: OPENROUTER PROCESSING`` keep-alives) and are skipped; ``data: [DONE]`` ends the stream. A
mid-stream error arrives as a ``data:`` event with an ``error`` object while HTTP stays 200.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from typing import Any

from openrouter_probe.api.jsontext import loads
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


#: Events decoded by one ``json.loads``: enough to spare the per-call cost, few enough that a long
#: stream's events are not all alive at once (the collector would keep promoting them).
_BATCH = 50

#: A ``data:`` line holding one JSON object, or ``[DONE]`` (its value, without ``data: ``).
_OBJECT_LINE = re.compile(r"^data: (\{.*\}|\[DONE\])\r?$", re.MULTILINE)


def parse_sse_events(text: str) -> Iterator[dict[str, Any]]:
    """Yield the JSON object of every ``data:`` event of a whole stream, until ``[DONE]``.

    The same events as ``iter_sse_events``, read faster: when every event is one ``data:`` line
    holding one JSON object (as OpenRouter sends them), the lines are found by one regular
    expression (in C, not a Python step per line) and decoded ``_BATCH`` at a time by one
    ``loads`` of an array (``api.jsontext``: orjson); anything else (a multi-line field, an event that is not an
    object, ``data:`` without its space) goes through ``iter_sse_events``, which also names a
    malformed event. (A JSON text holds no raw newline, so every line starting ``data:`` is a
    field: counting them finds any line the expression did not take.)
    """
    found = _OBJECT_LINE.findall(text)
    if len(found) != text.count("\ndata:") + text.startswith("data:"):
        yield from iter_sse_events(text.split("\n"))
        return
    try:
        payloads = found[: found.index("[DONE]")]
    except ValueError:
        payloads = found
    for start in range(0, len(payloads), _BATCH):
        batch = payloads[start : start + _BATCH]
        try:
            events: list[dict[str, Any]] = loads("[" + ",".join(batch) + "]")
        except ValueError:
            events = []
        if len(events) == len(batch):
            yield from events
        else:  # one at a time: the bad one is named (a line holding two objects, broken JSON)
            yield from map(_decode, batch)

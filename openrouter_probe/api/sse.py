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

__all__ = ["iter_sse_events"]


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

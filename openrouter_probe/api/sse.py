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

import msgspec

from openrouter_probe.api.jsontext import loads
from openrouter_probe.errors import APIError

__all__ = ["Chunk", "Envelope", "iter_sse_events", "parse_sse_events", "read_chunks"]


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


# -- the common stream, typed ---------------------------------------------------------------------
#
# A stream's events are most of what a run decodes (20 for a short answer, 500 for a long one), and
# most of each event is the same envelope again (id, model, provider, created, a null
# finish_reason). ``read_chunks`` decodes only the fields ``api.completion.read_stream`` reads,
# into structs msgspec fills in C, skipping the rest without making objects of it: about half the
# instructions of decoding every event whole. Every field is ``Any``, decoded as ``loads`` decodes
# it, so the reader sees the same values either way; an event of another shape (``choices`` not a
# list, a choice or a delta not an object) is a ``ValidationError``, and the caller reads that
# stream the general way, which names what is wrong.


class Delta(msgspec.Struct, gc=False):
    """``choices[].delta``: what a chunk adds."""

    content: Any = None
    reasoning: Any = None
    reasoning_details: Any = None
    tool_calls: Any = None


class Choice(msgspec.Struct, gc=False):
    """``choices[]`` of a chunk."""

    delta: Delta | None = None
    finish_reason: Any = None
    native_finish_reason: Any = None
    error: Any = None


class Chunk(msgspec.Struct, gc=False):
    """One ``data:`` event of a stream, the fields a reader of answers needs."""

    choices: list[Choice] | None = None
    usage: Any = None
    error: Any = None


class Envelope(msgspec.Struct, gc=False):
    """What the first event says of the whole answer."""

    id: Any = None
    model: Any = None
    provider: Any = None


_CHUNKS = msgspec.json.Decoder(list[Chunk])
_ENVELOPE = msgspec.json.Decoder(Envelope)
_EVENT_SEP, _EVENT, _DONE = b"\n\ndata: ", b"data: {", b"\n\ndata: [DONE]"


def read_chunks(body: bytes) -> tuple[list[Chunk], Envelope] | None:
    """The events of a whole stream in the form OpenRouter sends it, typed, with the first
    event's envelope (id, model, provider); ``None`` for any other form or an empty first event.

    The form: keep-alive comments, then ``data: {...}`` lines each followed by a blank line, then
    ``data: [DONE]``, in UTF-8. Joining the events with commas makes one JSON array (a JSON text
    holds no raw newline, so the separator cannot occur inside an event); anything else between
    two events (a comment, an ``id:`` field, a second ``data:`` line, ``[DONE]``) leaves text that
    is not JSON, and the array does not decode. What is not this form, or does not decode, is for
    ``parse_sse_events``. The bytes are read as they came: no copy decoded to ``str`` first.
    """
    start = body.find(_EVENT)
    end = body.rfind(_DONE)
    if start < 0 or end < start or (start and body[start - 1] != 10):  # 10: a newline
        return None
    rest = body[end + len(_DONE) :]
    if rest not in (b"", b"\n") and not rest.startswith(b"\n\n"):
        return None  # ``[DONE]`` is not the whole of its event
    if start and any(line and line[0] != 58 for line in body[:start].split(b"\n")):  # 58: ":"
        return None  # something before the first event besides comments
    events = body[start + 6 : end].split(_EVENT_SEP)  # (one search: split, not replace and count)
    try:
        chunks = _CHUNKS.decode(b"".join((b"[", b",".join(events), b"]")))
        envelope = _ENVELOPE.decode(events[0])
        empty = envelope.id is envelope.model is envelope.provider is None and _empty(events[0])
    except (msgspec.DecodeError, UnicodeDecodeError):  # ValidationError: another shape
        return None
    if len(chunks) != len(events):
        # not one object per event: two in one (``{...}, {...}``), or one split over two
        return None
    if empty:
        return None  # an empty first event: the envelope is the next one's
    return chunks, envelope


def _empty(event: bytes) -> bool:
    return not msgspec.json.decode(event)

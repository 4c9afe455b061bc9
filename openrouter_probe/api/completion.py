"""The one model of a chat completion: ``ChatCompletion``, read by ``read_completion`` (a body)
and ``read_stream`` (a whole SSE stream).

The paid run's transport and the tests read answers with it alike. It is the hot path of a run
(one per request, 500 events for a long stream), so it reads plain dicts, once, with no validation
per request; ``ChatCompletion.typed_usage`` gives the pydantic ``Usage`` when a caller wants types.
Every 200 body and every stream chunk is checked for a top-level ``error``, a ``choices[].error``
and a ``finish_reason`` of ``"error"`` (all three occur with HTTP 200); what came before an error
is kept. Which rule reads which field, with its source: ``docs/wire.md``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from decimal import Decimal
from operator import itemgetter
from typing import Any

from openrouter_probe.api.chat import Usage, usage_spend
from openrouter_probe.api.jsontext import loads
from openrouter_probe.api.sse import Chunk, Envelope, parse_sse_events, read_chunks
from openrouter_probe.errors import APIError

__all__ = [
    "CACHE_HEADER",
    "CACHE_STATUS_HEADER",
    "CACHE_TTL_HEADER",
    "RESPONSE_CACHE_TTL_S",
    "ChatCompletion",
    "merge_reasoning_details",
    "read_completion",
    "read_stream",
    "reasoning_text",
    "response_cache_headers",
]


#: OpenRouter's response cache (docs ``guides/features/response-caching``, beta since 2026-04-30):
#: the request header that asks for it, the one that sets its lifetime (1-86400 s, default 300),
#: and the response header that says ``HIT`` or ``MISS``.
CACHE_HEADER = "X-OpenRouter-Cache"
CACHE_TTL_HEADER = "X-OpenRouter-Cache-TTL"
CACHE_STATUS_HEADER = "X-OpenRouter-Cache-Status"
#: The lifetime ``generate`` asks for: the longest the docs allow (24 h), so that a row resent by a
#: resume within a day of its lost answer is answered from the cache, free.
RESPONSE_CACHE_TTL_S = 86400


def response_cache_headers(ttl_s: int = RESPONSE_CACHE_TTL_S) -> dict[str, str]:
    """The request headers that ask OpenRouter's response cache for an answer kept ``ttl_s``."""
    if not 1 <= ttl_s <= 86400:
        raise ValueError(f"a response cache TTL is 1 to 86400 seconds, not {ttl_s}")
    return {CACHE_HEADER: "true", CACHE_TTL_HEADER: str(ttl_s)}


@dataclass(slots=True)
class ChatCompletion:
    """A chat completion as a paid run and its tests read it: one body, or one whole stream.

    ``provider`` is the display name of who served it (not in the spec, present in every real
    capture); ``model`` the permaslug used; ``usage`` the object as returned; ``reasoning_details``
    the list as sent (merged by index for a stream), kept verbatim for whoever sends the turn back
    (signatures, encrypted blocks); ``reasoning`` its text, from ``message.reasoning`` or, when
    that is null, from the details' ``reasoning.text`` and ``reasoning.summary`` entries.

    ``error`` is the error the answer reports (a top-level ``error``, a ``choices[].error`` or a
    ``finish_reason`` of ``"error"``: all three occur with HTTP 200; a stream's mid-stream error
    event), with what came before it kept in ``content`` and ``reasoning``; ``broken`` says why the
    body is not a whole answer (not JSON, no choices, a stream cut before its finish).

    ``cache_hit``: OpenRouter's response cache answered (``X-OpenRouter-Cache-Status: HIT``): a
    replay of an earlier answer, billed nothing. ``cut``: no finish reason (xAI answers
    ``finish_reason: null`` when cut at ``max_tokens``) with the completion tokens at or past the
    request's ``max_tokens``, set by whoever knows that limit (``mark_cut``): truncated.
    """

    provider: str | None
    model: str | None
    finish_reason: str | None
    content: str | None
    reasoning: str | None
    usage: dict[str, Any] | None
    generation_id: str | None
    tool_calls: list[dict[str, Any]] | None = None
    logprobs: dict[str, Any] | None = None  # choices[0].logprobs (non-streaming), when sent
    reasoning_details: list[dict[str, Any]] | None = None
    native_finish_reason: str | None = None
    error: dict[str, Any] | None = None
    broken: str | None = None
    cache_hit: bool = False
    cut: bool = False
    #: ``usage_spend`` of the ``usage`` it was read from (read once per answer, not per property)
    _spend: tuple[Any, tuple[Decimal | None, bool, Decimal | None]] | None = field(
        default=None, repr=False, compare=False
    )

    @property
    def truncated(self) -> bool:
        """Cut at ``max_tokens``: ``finish_reason: "length"``, or none at the limit (``cut``)."""
        return self.finish_reason == "length" or self.cut

    def mark_cut(self, max_tokens: int) -> None:
        """Say whether an answer with no finish reason was cut at ``max_tokens``: its completion
        tokens (or its reasoning tokens, which 2026 bodies report above them) reach it."""
        if self.finish_reason is None and not self.failed:
            details = (self.usage or {}).get("completion_tokens_details")
            reasoning = details.get("reasoning_tokens") if isinstance(details, dict) else None
            reasoning = reasoning if type(reasoning) is int else 0
            self.cut = max(self.completion_tokens, reasoning) >= max_tokens

    @property
    def failed(self) -> bool:
        """True when the answer reports an error (``error``) or is not a whole one (``broken``)."""
        return self.error is not None or self.broken is not None

    def _spent(self) -> tuple[Decimal | None, bool, Decimal | None]:
        """``usage_spend(self.usage)``, read again only when ``usage`` is another object."""
        usage, known = self.usage, self._spend
        if known is not None and known[0] is usage:
            return known[1]
        spend = usage_spend(usage)
        self._spend = (usage, spend)
        return spend

    @property
    def cost_usd(self) -> Decimal | None:
        """What the answer cost the user: ``usage.cost``, what OpenRouter charged, never
        recomputed, plus for a BYOK answer what the provider billed the user's own key
        (``api.chat.usage_spend``; ``None``: absent or invalid)."""
        return self._spent()[0]

    @property
    def cost_invalid(self) -> bool:
        """Whether ``usage.cost`` (or a BYOK answer's upstream cost) is there but not a cost
        (``"n/a"``, negative, NaN)."""
        return self._spent()[1]

    @property
    def byok_usd(self) -> Decimal | None:
        """A BYOK answer's part billed by the provider to the user's own key (in ``cost_usd``);
        ``None`` for any other answer."""
        return self._spent()[2]

    @property
    def completion_tokens(self) -> int:
        value = (self.usage or {}).get("completion_tokens")
        return value if isinstance(value, int) and not isinstance(value, bool) else 0

    @property
    def typed_usage(self) -> Usage | None:
        """``usage`` validated (token details, ``reasoning_tokens``), or ``None``."""
        return None if self.usage is None else Usage.model_validate(self.usage)


def reasoning_text(details: Any) -> str | None:
    """The readable text of ``reasoning_details``: its ``reasoning.text`` entries' ``text`` and
    its ``reasoning.summary`` entries' ``summary``, in order (encrypted entries have none)."""
    if not isinstance(details, list):
        return None
    parts = []
    for entry in details:
        if not isinstance(entry, dict):
            continue
        kind = entry.get("type")
        value = entry.get("summary") if kind == "reasoning.summary" else entry.get("text")
        if kind in ("reasoning.text", "reasoning.summary") and isinstance(value, str):
            parts.append(value)
    return "\n\n".join(p for p in parts if p) or None


def _body_error(obj: dict[str, Any]) -> dict[str, Any] | None:
    """The error a 200 body or chunk reports, if any (top-level error, choice error, finish)."""
    error = obj.get("error")
    if isinstance(error, dict):
        return error
    for choice in obj.get("choices") or ():
        if not isinstance(choice, dict):
            continue
        inner = choice.get("error")
        if isinstance(inner, dict):
            return inner
        if choice.get("finish_reason") == "error":
            native = choice.get("native_finish_reason")
            return {"message": f"the provider ended the answer with an error ({native})"}
    return None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def read_completion(body: bytes | str, *, generation_id: str | None = None) -> ChatCompletion:
    """Read a non-streaming 200 body (whitespace keep-alive padding allowed).

    ``generation_id`` (the ``X-Generation-Id`` header) stands in for a body without an ``id``.
    """
    try:
        obj = loads(body)
    except ValueError:
        text = body.decode(errors="replace") if isinstance(body, bytes) else body
        snippet = " ".join(text.split())[:120]
        return _broken(f"the answer is not JSON: {snippet!r}", generation_id)
    if not isinstance(obj, dict):
        return _broken("the answer is not a JSON object", generation_id)
    ident = obj.get("id") if isinstance(obj.get("id"), str) else generation_id
    usage = obj.get("usage")
    usage = usage if isinstance(usage, dict) else None
    choices = obj.get("choices") or []
    choice = choices[0] if choices and isinstance(choices[0], dict) else {}
    message = choice.get("message") or {}
    if not isinstance(message, dict):
        message = {}
    details = message.get("reasoning_details")
    details = details if isinstance(details, list) and details else None
    reasoning = message.get("reasoning")
    if reasoning is None and details is not None:
        reasoning = reasoning_text(details)
    completion = ChatCompletion(
        provider=obj.get("provider"),
        model=obj.get("model"),
        finish_reason=choice.get("finish_reason"),
        content=message.get("content"),
        reasoning=reasoning,
        usage=usage,
        generation_id=ident,
        tool_calls=message.get("tool_calls") or None,
        logprobs=choice.get("logprobs") if isinstance(choice.get("logprobs"), dict) else None,
        reasoning_details=details,
        native_finish_reason=_text(choice.get("native_finish_reason")),
        error=_body_error(obj),
    )
    if completion.error is None and not choice:
        completion.broken = "the answer has no choices"
    return completion


def _broken(why: str, generation_id: str | None, content: str | None = None) -> ChatCompletion:
    return ChatCompletion(None, None, None, content, None, None, generation_id, broken=why)


def _merge_tool_calls(calls: dict[int, dict[str, Any]], deltas: list[Any]) -> None:
    for delta in deltas:
        if not isinstance(delta, dict):
            continue
        index = delta.get("index", len(calls))
        call = calls.setdefault(index, {"type": "function", "function": {"arguments": ""}})
        if delta.get("id"):
            call["id"] = delta["id"]
        if delta.get("type"):
            call["type"] = delta["type"]
        fn = delta.get("function") or {}
        if fn.get("name"):
            call["function"]["name"] = fn["name"]
        if fn.get("arguments"):
            call["function"]["arguments"] += fn["arguments"]


#: The keys of a plain streamed ``reasoning.text`` piece: only its text needs joining.
_PLAIN_DETAIL = frozenset({"type", "text", "format", "index"})
_JOINED = ("text", "summary", "data")
_FIRST, _TEXT = itemgetter(0), itemgetter("text")
_SHAPE = itemgetter("type", "index", "format")


def merge_reasoning_details(pieces: list[list[Any]]) -> list[dict[str, Any]] | None:
    """A stream's ``delta.reasoning_details`` lists as one: entries of the same ``index`` and
    ``type`` joined (their ``text``, ``summary`` and ``data`` strings concatenated; any other key,
    a ``signature``, an ``id``, ``format``, taken from the last piece that has it)."""
    plain = _plain_text_details(pieces)
    if plain is not None:
        return plain
    merged: dict[tuple[Any, Any], dict[str, Any]] = {}
    joined: dict[tuple[Any, Any], dict[str, list[str]]] = {}
    for piece in pieces:
        for entry in piece:
            if type(entry) is not dict:
                continue
            key = (entry.get("index"), entry.get("type"))
            into = merged.get(key)
            if into is None:
                merged[key] = dict(entry)
                joined[key] = {n: [v] for n in _JOINED if isinstance(v := entry.get(n), str)}
                continue
            parts = joined[key]
            if entry.keys() == _PLAIN_DETAIL and entry["format"] == into["format"]:
                text = entry["text"]
                if type(text) is str:  # the hot case: one more piece of text
                    if "text" in parts:
                        parts["text"].append(text)
                    else:
                        parts["text"] = [text]
                    continue
            for name, value in entry.items():
                if name in _JOINED and isinstance(value, str):
                    parts.setdefault(name, []).append(value)
                elif value is not None:
                    into[name] = value
    for key, parts in joined.items():
        for name, values in parts.items():
            merged[key][name] = "".join(values)
    return list(merged.values()) or None


def _plain_text_details(pieces: list[list[Any]]) -> list[dict[str, Any]] | None:
    """The common stream, merged fast: every piece one ``reasoning.text`` entry of the same index
    and format holding only its text (a 500-chunk answer has 400 of them). ``None`` otherwise.
    The checks run in C (``map`` with ``itemgetter``), not one Python step per piece."""
    try:
        if set(map(len, pieces)) != {1}:
            return None
        firsts = list(map(_FIRST, pieces))
        if set(map(len, firsts)) != {4} or len(set(map(_SHAPE, firsts))) != 1:
            return None
        if firsts[0]["type"] != "reasoning.text":
            return None
        text = "".join(map(_TEXT, firsts))
    except (KeyError, TypeError):  # another shape (a signature piece, not a dict): merge slowly
        return None
    return [{**firsts[0], "text": text}]


def read_stream(body: bytes | str, *, generation_id: str | None = None) -> ChatCompletion:
    """Read a whole SSE body: content and reasoning deltas joined, tool-call deltas merged by
    index, reasoning details merged, the usage chunk taken wherever it comes.

    A mid-stream error event ends it (``error``, with what came before kept); a stream that stops
    before ``[DONE]``, or with no finish reason nor usage (xAI's null finish), is ``broken``, and
    so is one whose deltas are of a shape no reader knows (a ``content`` that is not text, a
    ``tool_calls`` that is not a list of objects): read as it is, it would raise. The events are
    the hot path of long streams (a 500-chunk answer is 500 events): a stream in the form
    OpenRouter sends, with no error anywhere in it, is read typed (``api.sse.read_chunks``); any
    other is read event by event, with the same rules.
    """
    try:
        return _read_stream(body, generation_id)
    except (TypeError, AttributeError) as exc:  # a delta of another shape: joined, it raised
        why = f"broken stream: a delta of a shape no reader knows ({exc})"
        return _broken(why, generation_id, content="")


def _read_stream(body: bytes | str, generation_id: str | None) -> ChatCompletion:
    read = _Read()
    try:
        typed = read_chunks(body.encode() if isinstance(body, str) else body)
    except UnicodeEncodeError:  # a lone surrogate in a str body: the generic reader takes it
        typed = None
    if typed is None or not read.chunks(*typed):
        read = _Read()  # read again, event by event: an error, or another form
        text = body.decode("utf-8", errors="replace") if isinstance(body, bytes) else body
        try:
            read.events(parse_sse_events(text))
        except APIError as exc:
            read.broken = f"broken stream: {exc}"
        if read.error is None and read.broken is None and "data: [DONE]" not in text:
            read.broken = _CUT_SHORT
    ident = read.ident if isinstance(read.ident, str) else generation_id
    merged = merge_reasoning_details(read.details) if read.details else None
    said = "".join(read.reasoning) or None
    if said is None and merged is not None:
        said = reasoning_text(merged)
    error, broken, finish = read.error, read.broken, read.finish
    if (error or broken) is None and (finish or read.usage) is None:
        broken = _CUT_SHORT
    return ChatCompletion(
        provider=read.provider,
        model=read.model,
        finish_reason=finish,
        content="".join(read.content),
        reasoning=said,
        usage=read.usage,
        generation_id=ident,
        tool_calls=[read.calls[i] for i in sorted(read.calls)] or None,
        reasoning_details=merged,
        native_finish_reason=_text(read.native),
        error=error,
        broken=broken,
    )


_CUT_SHORT = "the stream ended before its finish (connection dropped?)"


class _Read:
    """What the events of one stream said, gathered in order (``read_stream``)."""

    __slots__ = (
        "broken",
        "calls",
        "content",
        "details",
        "error",
        "finish",
        "ident",
        "model",
        "native",
        "provider",
        "reasoning",
        "usage",
    )

    def __init__(self) -> None:
        self.content: list[str] = []
        self.reasoning: list[str] = []
        self.details: list[Any] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.finish: Any = None
        self.native: Any = None
        self.usage: dict[str, Any] | None = None
        self.ident: Any = None  # the envelope: the first event's id, model and provider
        self.model: Any = None
        self.provider: Any = None
        self.error: dict[str, Any] | None = None
        self.broken: str | None = None

    def events(self, events: Iterable[dict[str, Any]]) -> None:
        """Gather events read whole (dicts), stopping at one that reports an error."""
        content, reasoning, details = self.content, self.reasoning, self.details
        enveloped = False
        for event in events:
            if not enveloped and event:
                enveloped = True
                self.ident, self.model = event.get("id"), event.get("model")
                self.provider = event.get("provider")
            choices = event.get("choices")
            if "error" in event or (choices and _has_error(choices)):
                self.error = _body_error(event)
                if self.error is not None:
                    found = event.get("usage")
                    if isinstance(found, dict):
                        self.usage = found
                    return
            found = event.get("usage")
            if found is not None and isinstance(found, dict):
                self.usage = found
            for choice in choices or ():
                if not isinstance(choice, dict):
                    continue
                delta = choice.get("delta")
                if delta and isinstance(delta, dict):
                    piece = delta.get("content")
                    if piece:
                        content.append(piece)
                    piece = delta.get("reasoning")
                    if piece:
                        reasoning.append(piece)
                    more = delta.get("reasoning_details")
                    if more:
                        details.append(more)
                    if delta.get("tool_calls"):
                        _merge_tool_calls(self.calls, delta["tool_calls"])
                if choice.get("finish_reason"):
                    self.finish = choice["finish_reason"]
                    self.native = choice.get("native_finish_reason")

    def chunks(self, chunks: list[Chunk], envelope: Envelope) -> bool:
        """Gather typed events (``api.sse.read_chunks``) the same way; ``False`` at one that
        reports an error (``events`` reads those: what it gathered is then not whole)."""
        self.ident, self.model, self.provider = envelope.id, envelope.model, envelope.provider
        content, reasoning, details = self.content, self.reasoning, self.details
        for chunk in chunks:
            if chunk.error is not None:
                return False
            found = chunk.usage
            if found is not None and isinstance(found, dict):
                self.usage = found
            for choice in chunk.choices or ():
                if choice.error is not None or choice.finish_reason == "error":
                    return False
                delta = choice.delta
                if delta is not None:
                    if piece := delta.content:
                        content.append(piece)
                    if piece := delta.reasoning:
                        reasoning.append(piece)
                    if more := delta.reasoning_details:
                        details.append(more)
                    if delta.tool_calls:
                        _merge_tool_calls(self.calls, delta.tool_calls)
                if choice.finish_reason:
                    self.finish = choice.finish_reason
                    self.native = choice.native_finish_reason
        return True


def _has_error(choices: Any) -> bool:
    """Whether a choice carries an error or ends with one (then ``_body_error`` reads it)."""
    return any(
        isinstance(c, dict) and ("error" in c or c.get("finish_reason") == "error") for c in choices
    )

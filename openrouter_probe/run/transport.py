"""One chat completion over aiohttp: send the body, read the answer with bounded waits, parse it.

``HttpTransport.send`` returns an ``Answer`` (the parsed completion) or a ``Failure``, classified by
``run.failure.classify_error`` (its table of OpenRouter's error messages and codes decides final or
transient). aiohttp's exceptions are translated here and nowhere else. The key goes into the
``Authorization`` header and nowhere else: no message built here contains it.

Waits that end: ``aiohttp``'s ``sock_read`` bounds the gap between two reads; keep-alives are not
progress: a stream that sends only ``: OPENROUTER PROCESSING`` comments (or a body only whitespace
padding) for ``read_timeout_s`` fails (streams: no ``data:`` event for that long), and every
attempt has a ceiling (``ceiling_s``, the runner derives it from ``max_tokens`` and a throughput
floor). The clock is injected (tests move it with the fake server's ``ManualClock``).

Money: an HTTP error status is never billed (OpenRouter answers it before any generation); every
other way an attempt can end without a readable ``usage.cost`` (a timeout or a cut connection after
the request left, a stream cut before its usage chunk, a 200 body that is not a completion) is
``cost_unknown``. The generation id (``X-Generation-Id``) is handed to ``on_id`` the moment the
headers arrive, so the journal has it before the answer does.

Non-streaming bodies may start with whitespace keep-alive padding (``json.loads`` skips it); every
200 body and every stream chunk is checked for a top-level ``error``, a ``choices[].error`` and a
``finish_reason`` of ``"error"`` (all three occur with HTTP 200). Streams are parsed by
``openrouter_probe.api.sse``: comments skipped, reasoning and content deltas joined, tool-call deltas
merged by index, the usage chunk taken wherever it comes.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

import aiohttp

from openrouter_probe.api.sse import parse_sse_events
from openrouter_probe.errors import APIError
from openrouter_probe.run.failure import Failure, FailureKind, classify_error

__all__ = [
    "Answer",
    "Failure",
    "FailureKind",
    "HttpTransport",
    "classify_error",
    "parse_body",
    "parse_stream",
    "read_cost",
]


def read_cost(value: Any) -> tuple[Decimal | None, bool]:
    """Read ``usage.cost``: ``(cost, invalid)``. A cost is a finite number >= 0; anything else
    (``"n/a"``, ``NaN``, a negative number, ``true``) is invalid, never zero."""
    kind = type(value)
    if kind is float or kind is int:  # what OpenRouter sends: a plain number (NaN fails >= 0)
        if value >= 0 and value != math.inf:
            return Decimal(str(value)), False
        return None, True
    if value is None:
        return None, False
    if kind is not str:
        return None, True  # true, a list, an object
    try:
        cost = Decimal(value.strip())
    except InvalidOperation:
        return None, True
    if not cost.is_finite() or cost < 0:
        return None, True
    return cost, False


@dataclass
class Answer:
    """A completed chat completion, as the record needs it."""

    provider: str | None
    model: str | None
    finish_reason: str | None
    content: str | None
    reasoning: str | None
    usage: dict[str, Any] | None
    generation_id: str | None
    tool_calls: list[dict[str, Any]] | None = None
    logprobs: dict[str, Any] | None = None  # choices[0].logprobs (non-streaming), when sent

    @property
    def cost_usd(self) -> Decimal | None:
        """``usage.cost``: what OpenRouter charged, never recomputed (``None``: absent or invalid)."""
        return read_cost((self.usage or {}).get("cost"))[0]

    @property
    def cost_invalid(self) -> bool:
        """Whether ``usage.cost`` is there but not a cost (``"n/a"``, negative, NaN)."""
        return read_cost((self.usage or {}).get("cost"))[1]

    @property
    def completion_tokens(self) -> int:
        value = (self.usage or {}).get("completion_tokens")
        return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _body_failure(obj: dict[str, Any]) -> Failure | None:
    """The failure a 200 body or chunk reports, if any (top-level error, choice error, finish)."""
    error = obj.get("error")
    if isinstance(error, dict):
        return classify_error(200, error)
    for choice in obj.get("choices") or ():
        if not isinstance(choice, dict):
            continue
        if isinstance(choice.get("error"), dict):
            return classify_error(200, choice["error"])
        if choice.get("finish_reason") == "error":
            native = choice.get("native_finish_reason")
            return classify_error(
                200, {"message": f"the provider ended the answer with an error ({native})"}
            )
    return None


def _with_cost(failure: Failure, usage: Any, generation_id: str | None) -> Failure:
    """An error inside a 200 body or stream: billed as its ``usage.cost`` says, else unknown."""
    cost = read_cost(usage.get("cost"))[0] if isinstance(usage, dict) else None
    failure.cost_usd = cost
    failure.cost_unknown = cost is None
    failure.generation_id = generation_id
    return failure


def _unknown(message: str, generation_id: str | None = None) -> Failure:
    """A transient failure after the request left: what it cost is unknown."""
    return Failure("transient", message, cost_unknown=True, generation_id=generation_id)


def parse_body(body: bytes | str, *, generation_id: str | None = None) -> Answer | Failure:
    """Parse a non-streaming 200 body (whitespace padding allowed)."""
    try:
        obj = json.loads(body)
    except ValueError:
        text = body.decode(errors="replace") if isinstance(body, bytes) else body
        return _unknown(f"the answer is not JSON: {' '.join(text.split())[:120]!r}", generation_id)
    if not isinstance(obj, dict):
        return _unknown("the answer is not a JSON object", generation_id)
    ident = obj.get("id") if isinstance(obj.get("id"), str) else generation_id
    failure = _body_failure(obj)
    if failure is not None:
        return _with_cost(failure, obj.get("usage"), ident)
    choices = obj.get("choices") or []
    if not choices or not isinstance(choices[0], dict):
        return _unknown("the answer has no choices", ident)
    choice = choices[0]
    message = choice.get("message") or {}
    usage = obj.get("usage")
    return Answer(
        provider=obj.get("provider"),
        model=obj.get("model"),
        finish_reason=choice.get("finish_reason"),
        content=message.get("content"),
        reasoning=message.get("reasoning"),
        usage=usage if isinstance(usage, dict) else None,
        generation_id=ident,
        tool_calls=message.get("tool_calls") or None,
        logprobs=choice.get("logprobs") if isinstance(choice.get("logprobs"), dict) else None,
    )


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


def parse_stream(body: bytes | str, *, generation_id: str | None = None) -> Answer | Failure:
    """Parse a whole SSE body into an ``Answer``, or the ``Failure`` it reports.

    A stream that stops before a finish reason and ``[DONE]`` (a dropped connection) is transient.
    The loop is the hot path of long streams (a 500-chunk answer is 500 events): it reads each
    event's fields once and calls out only for what is rare (errors, tool calls).
    """
    text = body.decode("utf-8", errors="replace") if isinstance(body, bytes) else body
    content: list[str] = []
    reasoning: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    finish: str | None = None
    usage: dict[str, Any] | None = None
    head: dict[str, Any] = {}
    try:
        for event in parse_sse_events(text):
            if not head:
                head = event
            choices = event.get("choices")
            if "error" in event or (choices and _has_error(choices)):
                failure = _body_failure(event)
                if failure is not None:
                    ident = head.get("id") if isinstance(head.get("id"), str) else generation_id
                    return _with_cost(failure, event.get("usage"), ident)
            found = event.get("usage")
            if found is not None and isinstance(found, dict):
                usage = found
            for choice in choices or ():
                if not isinstance(choice, dict):
                    continue
                delta = choice.get("delta")
                if delta:
                    piece = delta.get("content")
                    if piece:
                        content.append(piece)
                    piece = delta.get("reasoning")
                    if piece:
                        reasoning.append(piece)
                    if delta.get("tool_calls"):
                        _merge_tool_calls(calls, delta["tool_calls"])
                if choice.get("finish_reason"):
                    finish = choice["finish_reason"]
    except APIError as exc:
        return _unknown(f"broken stream: {exc}", head.get("id") or generation_id)
    if finish is None or "data: [DONE]" not in text:
        return _unknown(
            "the stream ended before its finish (connection dropped?)",
            head.get("id") or generation_id,
        )
    return Answer(
        provider=head.get("provider"),
        model=head.get("model"),
        finish_reason=finish,
        content="".join(content),
        reasoning="".join(reasoning) or None,
        usage=usage,
        generation_id=head.get("id") or generation_id,
        tool_calls=[calls[i] for i in sorted(calls)] or None,
    )


def _has_error(choices: Any) -> bool:
    """Whether a choice carries an error or ends with one (then ``_body_failure`` reads it)."""
    return any(
        isinstance(c, dict) and ("error" in c or c.get("finish_reason") == "error") for c in choices
    )


def _retry_after(headers: Any) -> float | None:
    value = headers.get("Retry-After")
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        return None
    return max(0.0, seconds) if math.isfinite(seconds) else None


def _reset_epoch_s(headers: Any) -> float | None:
    """``X-RateLimit-Reset`` (epoch milliseconds, as OpenRouter sends it) in epoch seconds."""
    try:
        value = float(headers.get("X-RateLimit-Reset"))
    except (TypeError, ValueError):
        return None
    return value / 1000 if math.isfinite(value) and value > 0 else None


def _error_failure(status: int, data: bytes, headers: Any) -> Failure:
    """An HTTP error status (never billed): classified by its body and headers."""
    try:
        payload = json.loads(data)
    except ValueError:
        payload = None
    error = payload.get("error") if isinstance(payload, dict) else None
    platform = status == 429 and any(h.lower().startswith("x-ratelimit") for h in headers)
    failure = classify_error(
        status,
        error if isinstance(error, dict) else None,
        retry_after_s=_retry_after(headers),
        body=data.decode(errors="replace"),
        platform=platform,
    )
    if status == 429:
        failure.reset_epoch_s = _reset_epoch_s(headers)
    return failure


#: What ``generation_cost`` found: the cost (``Decimal``), ``None`` (not there yet: ``/generation``
#: is eventually consistent), or why it cannot be read (``str``).
Found = Decimal | str | None


class HttpTransport:
    """POST chat completions over one aiohttp session (one per run, ``limit`` connections).

    ``read_timeout_s`` bounds the gap between two reads (aiohttp) and, for streams, the time
    without a ``data:`` event (keep-alive comments are not progress); ``clock`` is what measures
    it (``time.monotonic``; tests inject the fake server's clock).
    """

    def __init__(
        self,
        *,
        base_url: str,
        api_key: str,
        limit: int,
        connect_timeout_s: float = 30.0,
        read_timeout_s: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.url = self.base_url + "/chat/completions"
        self._headers = {
            "Authorization": f"Bearer {api_key}",
            "Content-Type": "application/json",
            "X-Title": "openrouter-probe",
        }
        self._limit = limit
        self._read_timeout_s = read_timeout_s
        self._clock = clock
        # Bound the connection and the gap between reads, never the whole answer: a reasoning
        # answer can take minutes, but a stall between two reads is a stall.
        self._timeout = aiohttp.ClientTimeout(
            total=None, connect=connect_timeout_s, sock_read=read_timeout_s
        )
        self._session: aiohttp.ClientSession | None = None

    def __repr__(self) -> str:
        return f"HttpTransport(url={self.url!r})"  # never the key

    async def __aenter__(self) -> HttpTransport:
        # one more connection than the workers: the reconciler's lookups never wait for a worker
        connector = aiohttp.TCPConnector(limit=self._limit + 1, limit_per_host=self._limit + 1)
        self._session = aiohttp.ClientSession(
            connector=connector, timeout=self._timeout, headers=self._headers
        )
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def _read(
        self, response: aiohttp.ClientResponse, *, stream: bool, ceiling_s: float | None
    ) -> bytes | str:
        """Read the body; return it, or why the wait ended (keep-alives only; the ceiling)."""
        clock, limit = self._clock, self._read_timeout_s
        started = last = clock()
        chunks = []
        content = response.content
        while chunk := await content.readany():
            chunks.append(chunk)
            now = clock()
            if stream:
                if b"data:" in chunk:
                    last = now
                elif now - last > limit:
                    return f"no token for {now - last:.0f} s, only keep-alive comments (--read-timeout)"
            if ceiling_s is not None and now - started > ceiling_s:
                return f"no answer within {ceiling_s:.0f} s (the attempt's ceiling)"
        return b"".join(chunks)

    async def send(
        self,
        body: bytes,
        *,
        stream: bool,
        on_id: Callable[[str], None] | None = None,
        ceiling_s: float | None = None,
        key: object = None,
    ) -> Answer | Failure:
        """Send one request body; return the answer or a classified failure (never raises for
        HTTP or connection trouble; ``CancelledError`` propagates). ``on_id`` gets the generation
        id as soon as the headers bring it; ``ceiling_s`` bounds the whole attempt; ``key``
        (``run.sender.SendKey``) is not needed: one request per call."""
        assert self._session is not None, "use `async with HttpTransport(...)`"
        generation_id = None
        try:
            async with self._session.post(self.url, data=body) as response:
                status = response.status
                generation_id = response.headers.get("X-Generation-Id")
                if generation_id and on_id is not None and status < 400:
                    on_id(generation_id)
                if status >= 400:
                    return _error_failure(status, await response.read(), response.headers)
                data = await self._read(response, stream=stream, ceiling_s=ceiling_s)
        except aiohttp.ClientConnectorError as exc:
            # never connected: the request did not leave, nothing can be billed
            return Failure("transient", f"connection failed: {type(exc).__name__}: {exc}")
        except TimeoutError:
            return _unknown(
                "no data from the server within the read timeout (stall)", generation_id
            )
        except aiohttp.ClientError as exc:
            # ServerDisconnectedError, ClientPayloadError (a body cut off), a reset: it had left
            return _unknown(f"connection failed: {type(exc).__name__}: {exc}", generation_id)
        if isinstance(data, str):
            return _unknown(data, generation_id)
        if stream:
            return parse_stream(data, generation_id=generation_id)
        return parse_body(data, generation_id=generation_id)

    async def generation_cost(self, generation_id: str) -> Found:
        """What ``GET /generation?id=`` says a generation cost (``total_cost``)."""
        assert self._session is not None, "use `async with HttpTransport(...)`"
        try:
            async with self._session.get(
                self.base_url + "/generation", params={"id": generation_id}
            ) as response:
                status = response.status
                data = await response.read()
        except (TimeoutError, aiohttp.ClientError):
            return None  # tried again after the next wait
        return read_generation(status, data)


def read_generation(status: int, data: bytes) -> Found:
    """Read a ``/generation`` answer: a 200 gives ``data.total_cost``; 404 (eventually
    consistent), 429 and 5xx are ``None`` (try again); anything else says why it is unreadable."""
    if status == 404 or status == 429 or status >= 500:
        return None
    if status != 200:
        return f"HTTP {status}"
    try:
        record = json.loads(data)["data"]
        cost, invalid = read_cost(record.get("total_cost"))
    except (ValueError, KeyError, TypeError, AttributeError):
        return "not a /generation body"
    if cost is None:
        return "total_cost is not a cost" if invalid else "no total_cost"
    return cost

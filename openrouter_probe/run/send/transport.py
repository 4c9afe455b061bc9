"""One chat completion over aiohttp: send the body, read the answer with bounded waits, parse it.

``HttpTransport.send`` returns an ``Answer`` (the parsed completion) or a ``Failure``, classified by
``run.send.failure.classify_error`` (its table of OpenRouter's error messages and codes decides final or
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

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import aiohttp

from openrouter_probe.api.backoff import said_wait_s
from openrouter_probe.api.chat import Generation, read_cost, usage_spend
from openrouter_probe.api.chat import read_generation as api_read_generation
from openrouter_probe.api.completion import (
    CACHE_STATUS_HEADER,
    ChatCompletion,
    read_completion,
    read_stream,
)
from openrouter_probe.api.connection import Connection
from openrouter_probe.api.envelope import read_error
from openrouter_probe.errors import Message
from openrouter_probe.run.send.failure import Failure, FailureKind, classify_error

__all__ = [
    "VIA_CACHE",
    "Answer",
    "CacheSource",
    "Failure",
    "FailureKind",
    "HttpTransport",
    "classify_error",
    "parse_body",
    "parse_stream",
    "read_cache_source",
    "read_cost",
    "via_cache",
]


#: The run's answer is the API's one model of a completion (``api.chat.ChatCompletion``).
Answer = ChatCompletion


def _unknown(message: str, generation_id: str | None = None) -> Failure:
    """A transient failure after the request left: what it cost is unknown."""
    return Failure("transient", message, cost_unknown=True, generation_id=generation_id)


def _outcome(completion: ChatCompletion, *, stream: bool) -> Answer | Failure:
    """The completion, or the failure it reports: an error inside a 200 (classified by the
    table; billed as its ``usage.cost`` says, else unknown; what came before it kept as the
    failure's ``partial``), or a body that is not a whole answer (transient, cost unknown)."""
    error = completion.error
    if error is not None:
        cost = usage_spend(completion.usage)[0]
        partial = None
        if completion.content or completion.reasoning:
            partial = {
                "finish_reason": completion.finish_reason,
                "content": completion.content,
                "reasoning": completion.reasoning,
            }
        return classify_error(
            200,
            error,
            cost_usd=cost,
            cost_unknown=cost is None,
            generation_id=completion.generation_id,
            partial=partial,
        )
    if completion.broken is not None:
        return _unknown(completion.broken, completion.generation_id)
    return completion


def parse_body(body: bytes | str, *, generation_id: str | None = None) -> Answer | Failure:
    """Parse a non-streaming 200 body (whitespace padding allowed): ``api.chat.read_completion``."""
    return _outcome(read_completion(body, generation_id=generation_id), stream=False)


def parse_stream(body: bytes | str, *, generation_id: str | None = None) -> Answer | Failure:
    """Parse a whole SSE body into an ``Answer``, or the ``Failure`` it reports
    (``api.chat.read_stream``). A stream that stops before a finish reason and ``[DONE]`` (a
    dropped connection) is transient."""
    return _outcome(read_stream(body, generation_id=generation_id), stream=True)


def _reset_epoch_s(headers: Any) -> float | None:
    """``X-RateLimit-Reset`` (epoch milliseconds, as OpenRouter sends it) in epoch seconds."""
    try:
        value = float(headers.get("X-RateLimit-Reset"))
    except (TypeError, ValueError):
        return None
    return value / 1000 if math.isfinite(value) and value > 0 else None


def _error_failure(status: int, data: bytes, headers: Any) -> Failure:
    """An HTTP error status (never billed): classified by its body (``api.envelope.read_error``:
    a nested ``error.error`` read through) and headers."""
    envelope = read_error(data)
    error = envelope.error
    platform = status == 429 and any(h.lower().startswith("x-ratelimit") for h in headers)
    limits = headers
    inner = envelope.metadata.get("headers")
    if status == 429 and not platform and isinstance(inner, dict):
        # OpenRouter's key-wide 429 can carry its rate-limit headers in the body instead
        # (``error.metadata.headers``, OPENROUTER.md 15)
        named = {str(h).lower(): value for h, value in inner.items()}
        platform = any(h.startswith("x-ratelimit") for h in named)
        if "x-ratelimit-reset" in named:
            limits = {"X-RateLimit-Reset": named["x-ratelimit-reset"]}
    return classify_error(
        status,
        error or None,
        retry_after_s=said_wait_s(headers, envelope.metadata),
        body=data.decode(errors="replace"),
        platform=platform,
        reset_epoch_s=_reset_epoch_s(limits) if status == 429 else None,
    )


#: A generation id that points at a response cache hit: ``generation_cost`` answers with the
#: generation the hit replayed (``via_cache``, ``CacheSource``).
VIA_CACHE = "cache-hit:"


def via_cache(hit_id: str) -> str:
    """The id ``generation_cost`` reads as "the generation this cache hit replayed"."""
    return VIA_CACHE + hit_id


@dataclass(frozen=True, slots=True)
class CacheSource:
    """A cache hit's record names the generation it replayed (``response_cache_source_id``):
    that one was billed; look it up instead."""

    generation_id: str


#: What ``generation_cost`` found: the cost (``Decimal``), ``None`` (not there yet: ``/generation``
#: is eventually consistent), why it cannot be read (``str``), or, for a ``via_cache`` id, the
#: generation to look up instead (``CacheSource``).
Found = Decimal | str | CacheSource | None


class HttpTransport:
    """POST chat completions over one aiohttp session (one per run, ``limit`` connections).

    ``read_timeout_s`` bounds the gap between two reads (aiohttp) and, for streams, the time
    without a ``data:`` event (keep-alive comments are not progress); ``clock`` is what measures
    it (``time.monotonic``; tests inject the fake server's clock).
    """

    def __init__(
        self,
        connection: Connection,
        *,
        limit: int,
        connect_timeout_s: float = 30.0,
        read_timeout_s: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.base_url = connection.base_url
        self.url = self.base_url + "/chat/completions"
        self._headers = {
            **connection.authorization(),
            "Content-Type": "application/json",
            "X-Title": "openrouter-probe",
            **(headers or {}),  # the response cache's (``api.completion.response_cache_headers``)
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
        (``run.send.sender.SendKey``) is not needed: one request per call.

        Reading the body, both waits count from ``started``, the call (before the request left),
        not from the headers. A chunk is judged by the silence before it: one that arrives after
        more than ``read_timeout_s`` without a token fails even if it brings one, as it would have
        had the keep-alives before it come one by one. So the outcome depends on the clock alone,
        never on how the bytes were cut into chunks (a reader that falls behind gets them in one
        piece). (One coroutine, not one per read: a request's chain of awaits is its cost.)
        """
        assert self._session is not None, "use `async with HttpTransport(...)`"
        generation_id = None
        clock, limit = self._clock, self._read_timeout_s
        started = last = clock()
        try:
            async with self._session.post(self.url, data=body) as response:
                status, headers = response.status, response.headers
                generation_id = headers.get("X-Generation-Id")
                hit = headers.get(CACHE_STATUS_HEADER) == "HIT"
                if generation_id and on_id is not None and status < 400:
                    on_id(generation_id)
                if status >= 400:
                    return _error_failure(status, await response.read(), headers)
                chunks = []
                content = response.content
                while chunk := await content.readany():
                    chunks.append(chunk)
                    now = clock()
                    if stream:
                        if now - last > limit:
                            return _unknown(
                                Message(
                                    "keep-alives-only",
                                    "no token for {waited:.0f} s, only keep-alive comments "
                                    "({read_timeout_s:bare})",
                                    waited=now - last,
                                ),
                                generation_id,
                            )
                        if b"data:" in chunk:
                            last = now
                    if ceiling_s is not None and now - started > ceiling_s:
                        why = f"no answer within {ceiling_s:.0f} s (the attempt's ceiling)"
                        return _unknown(why, generation_id)
                data = b"".join(chunks)
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
        if stream:
            outcome = parse_stream(data, generation_id=generation_id)
        else:
            outcome = parse_body(data, generation_id=generation_id)
        if hit and isinstance(outcome, ChatCompletion):
            outcome.cache_hit = True  # the response cache's replay: billed nothing
        return outcome

    async def generation_cost(self, generation_id: str) -> Found:
        """What ``GET /generation?id=`` says a generation cost (``total_cost``); for a
        ``via_cache`` id, the generation the cache hit replayed (``CacheSource``)."""
        assert self._session is not None, "use `async with HttpTransport(...)`"
        hit = generation_id.startswith(VIA_CACHE)
        wanted = generation_id.removeprefix(VIA_CACHE)
        try:
            async with self._session.get(
                self.base_url + "/generation", params={"id": wanted}
            ) as response:
                status = response.status
                data = await response.read()
        except (TimeoutError, aiohttp.ClientError):
            return None  # tried again after the next wait
        return read_cache_source(status, data) if hit else read_generation(status, data)


def read_cache_source(status: int, data: bytes) -> Found:
    """Read a cache hit's ``/generation`` record for the generation it replayed."""
    found = api_read_generation(status, data)
    if not isinstance(found, Generation):
        return found
    source = found.response_cache_source_id
    if not isinstance(source, str) or not source:
        return "the cache hit names no response_cache_source_id"
    return CacheSource(source)


def read_generation(status: int, data: bytes) -> Found:
    """Read a ``/generation`` answer (``api.chat.read_generation``) for its ``total_cost``:
    ``None`` when it is not there yet (404, 429, 5xx), else the cost or why it is unreadable."""
    found = api_read_generation(status, data)
    if not isinstance(found, Generation):
        return found
    cost, invalid = found.cost()
    if cost is None:
        return "total_cost is not a cost" if invalid else "no total_cost"
    return cost

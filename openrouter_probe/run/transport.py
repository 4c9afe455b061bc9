"""One chat completion over aiohttp: send the body, parse the answer, classify what went wrong.

``HttpTransport.send`` returns an ``Answer`` (the parsed completion) or a ``Failure`` with a kind:

- ``transient`` (retry with backoff): 408, 429 (upstream or platform), 5xx, 524/529, a 400 that wraps
  one of those, connection errors, a stall past the read timeout, a stream cut before its end, an
  error inside a 200 body or stream (mid-stream errors);
- ``row`` (the row fails, the run goes on): other 400s (context length, invalid request), 403
  (moderation), 413, 422;
- ``run`` (stop the run): 401 (the key), 402 (credits), 404 (the policy admits nothing).

aiohttp's exceptions are translated here and nowhere else. The key goes into the ``Authorization``
header and nowhere else: no message built here contains it.

Non-streaming bodies may start with whitespace keep-alive padding (``json.loads`` skips it); every
200 body and every stream chunk is checked for a top-level ``error``, a ``choices[].error`` and a
``finish_reason`` of ``"error"`` (all three occur with HTTP 200). Streams are parsed by
``openrouter_probe.api.sse``: comments skipped, reasoning and content deltas joined, tool-call deltas
merged by index, the usage chunk taken wherever it comes.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Literal

import aiohttp

from openrouter_probe.api.sse import iter_sse_events
from openrouter_probe.errors import APIError

__all__ = ["Answer", "Failure", "HttpTransport", "classify_error", "parse_body", "parse_stream"]

FailureKind = Literal["transient", "row", "run"]

_TRANSIENT_STATUSES = frozenset({408, 429, 500, 502, 503, 504, 520, 522, 524, 529})
_TRANSIENT_TYPES = frozenset(
    {"rate_limit_exceeded", "provider_overloaded", "provider_unavailable", "server", "timeout"}
)
_AFFORD_RE = re.compile(r"can only afford (\d+)")
_CODE_RE = re.compile(r"\b(408|429|5\d\d)\b")


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
        """``usage.cost``: what OpenRouter charged, never recomputed."""
        cost = (self.usage or {}).get("cost")
        if cost is None or isinstance(cost, bool):
            return None
        return Decimal(str(cost))

    @property
    def completion_tokens(self) -> int:
        value = (self.usage or {}).get("completion_tokens")
        return value if isinstance(value, int) else 0


@dataclass
class Failure:
    """An attempt that did not produce a completion, and what to do about it."""

    kind: FailureKind
    message: str
    status: int | None = None
    code: int | str | None = None
    retry_after_s: float | None = None
    cost_usd: Decimal | None = None  # when the error body still carried usage.cost
    afford_tokens: int | None = None  # 402 "can only afford N"
    rate_limited: bool = False
    metadata: dict[str, Any] = field(default_factory=dict)

    def to_record(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "status": self.status,
            "code": self.code,
            "message": self.message,
        }


def _int_code(code: Any) -> int | None:
    if isinstance(code, int) and not isinstance(code, bool):
        return code
    if isinstance(code, str) and code.isdigit():
        return int(code)
    return None


def _wraps_transient(metadata: dict[str, Any]) -> bool:
    """Whether a 400's metadata says the upstream failure was transient (429, 5xx, overload)."""
    if metadata.get("error_type") in _TRANSIENT_TYPES:
        return True
    provider_code = _int_code(metadata.get("provider_code"))
    if provider_code is not None and (provider_code in _TRANSIENT_STATUSES or provider_code >= 500):
        return True
    raw = metadata.get("raw")
    if isinstance(raw, str):
        low = raw.lower()
        if "rate limit" in low or "rate-limit" in low or "overloaded" in low:
            return True
        if _CODE_RE.search(raw) and "context" not in low:
            return True
    return False


def classify_error(
    status: int | None,
    error: dict[str, Any] | None,
    *,
    retry_after_s: float | None = None,
    body: str = "",
) -> Failure:
    """Classify an HTTP error status, or an error object inside a 200 body (``status`` 200).

    ``error`` is OpenRouter's ``{"code", "message", "metadata"}``. Inside a 200 body the error's own
    code decides (no code: transient, as a provider failure that another attempt may not repeat).
    """
    err = error or {}
    metadata = err.get("metadata") if isinstance(err.get("metadata"), dict) else {}
    assert isinstance(metadata, dict)
    message = str(err.get("message") or "").strip()
    if not message:
        snippet = " ".join(body.split())[:200]
        message = f"HTTP {status}" + (f": {snippet}" if snippet else "")
    raw = metadata.get("raw")
    if isinstance(raw, str) and raw and raw not in message:
        message = f"{message} ({metadata.get('provider_name', 'provider')}: {raw[:300]})"
    code = err.get("code")
    effective = status
    if status in (None, 200):
        effective = _int_code(code)
    rate_limited = effective == 429 or metadata.get("error_type") == "rate_limit_exceeded"
    kind: FailureKind
    if effective is None:
        kind = "transient"
    elif effective == 401:
        kind = "run"
        message = f"{message}: OpenRouter rejected the API key; check OPENROUTER_API_KEY"
    elif effective == 402 or effective == 404:
        kind = "run"
    elif effective in _TRANSIENT_STATUSES or effective >= 500:
        kind = "transient"
    elif effective == 400 and _wraps_transient(metadata):
        kind = "transient"
        rate_limited = rate_limited or _int_code(metadata.get("provider_code")) == 429
    else:
        kind = "row"
    afford = None
    if effective == 402:
        match = _AFFORD_RE.search(message)
        afford = int(match.group(1)) if match else None
    return Failure(
        kind,
        message,
        status=status,
        code=code,
        retry_after_s=retry_after_s,
        afford_tokens=afford,
        rate_limited=rate_limited,
        metadata=metadata,
    )


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


def _with_cost(failure: Failure, usage: Any) -> Failure:
    if isinstance(usage, dict) and usage.get("cost") is not None:
        failure.cost_usd = Decimal(str(usage["cost"]))
    return failure


def parse_body(body: bytes | str, *, generation_id: str | None = None) -> Answer | Failure:
    """Parse a non-streaming 200 body (whitespace padding allowed)."""
    try:
        obj = json.loads(body)
    except ValueError:
        text = body.decode(errors="replace") if isinstance(body, bytes) else body
        return Failure("transient", f"the answer is not JSON: {' '.join(text.split())[:120]!r}")
    if not isinstance(obj, dict):
        return Failure("transient", "the answer is not a JSON object")
    failure = _body_failure(obj)
    if failure is not None:
        return _with_cost(failure, obj.get("usage"))
    choices = obj.get("choices") or []
    if not choices or not isinstance(choices[0], dict):
        return Failure("transient", "the answer has no choices")
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
        generation_id=obj.get("id") or generation_id,
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
    """
    text = body.decode("utf-8", errors="replace") if isinstance(body, bytes) else body
    content: list[str] = []
    reasoning: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    finish: str | None = None
    usage: dict[str, Any] | None = None
    head: dict[str, Any] = {}
    try:
        for event in iter_sse_events(text.split("\n")):
            if not head:
                head = event
            failure = _body_failure(event)
            if failure is not None:
                return _with_cost(failure, event.get("usage"))
            if isinstance(event.get("usage"), dict):
                usage = event["usage"]
            for choice in event.get("choices") or ():
                if not isinstance(choice, dict):
                    continue
                delta = choice.get("delta") or {}
                if delta.get("content"):
                    content.append(delta["content"])
                if delta.get("reasoning"):
                    reasoning.append(delta["reasoning"])
                if delta.get("tool_calls"):
                    _merge_tool_calls(calls, delta["tool_calls"])
                if choice.get("finish_reason"):
                    finish = choice["finish_reason"]
    except APIError as exc:
        return Failure("transient", f"broken stream: {exc}")
    if finish is None or "data: [DONE]" not in text:
        return Failure("transient", "the stream ended before its finish (connection dropped?)")
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


def _retry_after(headers: Any) -> float | None:
    value = headers.get("Retry-After")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None


class HttpTransport:
    """POST chat completions over one aiohttp session (one per run, ``limit`` connections)."""

    def __init__(
        self,
        *,
        base_url: str,
        api_key: str,
        limit: int,
        connect_timeout_s: float = 30.0,
        read_timeout_s: float = 300.0,
    ) -> None:
        self.url = base_url.rstrip("/") + "/chat/completions"
        self._headers = {
            "Authorization": f"Bearer {api_key}",
            "Content-Type": "application/json",
            "X-Title": "openrouter-probe",
        }
        self._limit = limit
        # Bound the connection and the gap between reads, never the whole answer: a reasoning
        # answer can take minutes, but a stall between two reads is a stall.
        self._timeout = aiohttp.ClientTimeout(
            total=None, connect=connect_timeout_s, sock_read=read_timeout_s
        )
        self._session: aiohttp.ClientSession | None = None

    def __repr__(self) -> str:
        return f"HttpTransport(url={self.url!r})"  # never the key

    async def __aenter__(self) -> HttpTransport:
        connector = aiohttp.TCPConnector(limit=self._limit, limit_per_host=self._limit)
        self._session = aiohttp.ClientSession(
            connector=connector, timeout=self._timeout, headers=self._headers
        )
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def send(self, body: bytes, *, stream: bool) -> Answer | Failure:
        """Send one request body; return the answer or a classified failure (never raises for
        HTTP or connection trouble; ``CancelledError`` propagates)."""
        assert self._session is not None, "use `async with HttpTransport(...)`"
        try:
            async with self._session.post(self.url, data=body) as response:
                data = await response.read()
                status = response.status
                generation_id = response.headers.get("X-Generation-Id")
                retry_after = _retry_after(response.headers)
        except TimeoutError:
            return Failure("transient", "no data from the server within the read timeout (stall)")
        except aiohttp.ClientError as exc:
            # ClientConnectionError, ServerDisconnectedError, ClientPayloadError (a body cut off)
            return Failure("transient", f"connection failed: {type(exc).__name__}: {exc}")
        if status >= 400:
            try:
                payload = json.loads(data)
            except ValueError:
                payload = None
            error = payload.get("error") if isinstance(payload, dict) else None
            failure = classify_error(
                status,
                error if isinstance(error, dict) else None,
                retry_after_s=retry_after,
                body=data.decode(errors="replace"),
            )
            return failure
        if stream:
            return parse_stream(data, generation_id=generation_id)
        return parse_body(data, generation_id=generation_id)

"""``requests``' answers and exceptions into the tree of ``openrouter_probe.errors``, in one place.

``translate_status`` turns an error response into an ``APIStatusError`` (its class by status, its
message by ``api.envelope.error_message``, its ``kind`` by ``api.error_rules.error_kind``: the
table the run's transport reads too); ``translate_exception`` turns a ``requests`` exception into
an ``APIConnectionError`` chained to it. The sync client (``api.client``), the batch client
(``api.batches``) and the key management client (``api.keys``) raise nothing else for a failed
request (httpx's ``map_httpcore_exceptions``; ``tests/api/test_translate.py`` checks that no
``requests`` exception goes unmapped).
"""

from __future__ import annotations

import socket
from urllib.parse import urlsplit

import requests

from openrouter_probe.api.backoff import said_wait_s
from openrouter_probe.api.envelope import error_message, read_error, refusal
from openrouter_probe.errors import (
    APIConnectionError,
    APIError,
    APIStatusError,
    InsufficientCreditsError,
    NoRouteError,
    RateLimitError,
)

__all__ = ["connection_failure", "retryable", "translate_exception", "translate_status"]

#: What each 402 case asks of a person (``api.envelope.refusal``).
_REFUSAL_ADVICE = {
    "in_flight": " The account's in-flight budget is full: retry after the requests in flight"
    " settle (Retry-After), send fewer at once, or add credits.",
    "key_limit": " The key's own limit is spent: raise it at https://openrouter.ai/settings/keys"
    " or use another key.",
    "too_large": " One request is larger than the account can hold: lower max_tokens or add"
    " credits at https://openrouter.ai/settings/credits.",
    "credits": " Add credits at https://openrouter.ai/settings/credits or lower max_tokens.",
}

_CLASSES: dict[int, type[APIStatusError]] = {
    429: RateLimitError,
    402: InsufficientCreditsError,
    404: NoRouteError,
}


def translate_status(response: requests.Response) -> APIStatusError:
    """Map an error response to the exception tree (every client uses this one function)."""
    from openrouter_probe.api.error_rules import error_kind  # the table: for a failure alone

    status = response.status_code
    body = response.text
    envelope = read_error(body)
    message = error_message(status, envelope.error, body, reason=response.reason or "")
    case = refusal(status, envelope.error)
    if status == 402:
        advice = _REFUSAL_ADVICE.get(case or "credits", "")
        if "openrouter.ai/settings/credits" in message:
            advice = advice.replace(" at https://openrouter.ai/settings/credits", "")
        message = f"{message}{advice}"
    platform = any(k.lower().startswith("x-ratelimit") for k in response.headers)
    return _CLASSES.get(status, APIStatusError)(
        message,
        status_code=status,
        url=response.url,
        code=envelope.code,
        metadata=envelope.metadata,
        body=body,
        retry_after=said_wait_s(response.headers, envelope.metadata),
        refusal=case,
        kind=error_kind(status, envelope.error, platform=platform),
    )


def connection_failure(exc: BaseException) -> tuple[str, bool]:
    """Say why a connection failed, in a few words, and whether retrying is pointless (a refused
    connection or an unknown host: the server is not there)."""
    seen: set[int] = set()
    todo: list[BaseException] = [exc]
    while todo:
        cur = todo.pop()
        if id(cur) in seen:
            continue
        seen.add(id(cur))
        if isinstance(cur, ConnectionRefusedError):
            return "connection refused", True
        if isinstance(cur, socket.gaierror):
            return "host name not found", True
        if isinstance(cur, ConnectionResetError):
            return "connection reset", False
        links = [cur.__cause__, cur.__context__, getattr(cur, "reason", None), *cur.args]
        todo += [x for x in links if isinstance(x, BaseException)]
    return type(exc).__name__, False


def translate_exception(
    exc: requests.RequestException, *, url: str, method: str = "GET"
) -> APIConnectionError:
    """The ``APIConnectionError`` for a request to ``url`` that got no answer; raise it ``from
    exc``. A connection that failed names the host (``.url`` keeps the path)."""
    if isinstance(exc, requests.Timeout):
        return APIConnectionError(f"{method} {url}: timed out", url=url)
    reason, _ = connection_failure(exc)
    if isinstance(exc, requests.ConnectionError):
        parts = urlsplit(url)
        return APIConnectionError(
            f"cannot reach {parts.scheme}://{parts.netloc}: {reason}", url=url
        )
    return APIConnectionError(f"{method} {url} failed: {reason}", url=url)


def retryable(exc: APIError) -> bool:
    """Whether ``exc`` is worth another attempt: an error status whose kind the table retries
    (``api.error_rules.RETRIED``), a timeout or a reset; never a refused connection or an
    unknown host."""
    if isinstance(exc, APIStatusError):
        from openrouter_probe.api.error_rules import RETRIED, error_kind

        kind = exc.kind or error_kind(exc.status_code, read_error(exc.body).error)
        return kind in RETRIED
    if isinstance(exc, APIConnectionError) and exc.__cause__ is not None:
        return not connection_failure(exc.__cause__)[1]
    return isinstance(exc, APIConnectionError)

"""One synchronous request loop for every client of OpenRouter's HTTP API, on ``requests``.

A ``Wire`` sends the requests of one ``api.connection.Connection`` (its headers: the key's
``Authorization`` is built by ``Connection.headers`` and nowhere else; its timeouts; one
``requests.Session``) and translates every failure into ``openrouter_probe.errors``
(``api.translate``). ``send`` is one request, never repeated (a create is not idempotent); ``get``
retries what the error table calls transient, boundedly and said, and a ``settling`` schedule asks
again after a 404 (docs/api.md, "Retries, bounded and visible", and "Paging" for ``/generation``).
``read_body`` reads every answer's JSON. The sync client, the batch client and the key management
client each hold one (``Wired``). Tests turn the waits off by replacing the module's ``_sleep``
(and ``_monotonic``), as stamina's testing mode does; a ``Wire(sleep=...)`` takes its own sleep.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Self, TypeVar, overload

import requests
from pydantic import BaseModel, ValidationError

from openrouter_probe.api.backoff import Backoff
from openrouter_probe.api.connection import Connection
from openrouter_probe.api.translate import retryable, translate_exception, translate_status
from openrouter_probe.errors import APIError, APIStatusError, NoRouteError, first_validation_error

__all__ = ["Wire", "Wired", "read_body", "with_message"]

log = logging.getLogger(__name__)

# Module-level so that tests can turn every wait off (and run a virtual clock), as stamina's
# testing mode does: nothing in a test should sleep for real.
_sleep: Callable[[float], None] = time.sleep
_monotonic: Callable[[], float] = time.monotonic

Params = Mapping[str, str] | Sequence[tuple[str, str]] | None
_T = TypeVar("_T", bound=BaseModel)


def with_message(exc: APIError, message: str) -> APIError:
    """A copy of ``exc`` (same class and fields) that says ``message``."""
    if isinstance(exc, APIStatusError):
        return type(exc)(
            message,
            status_code=exc.status_code,
            url=exc.url,
            code=exc.code,
            metadata=exc.metadata,
            body=exc.body,
            retry_after=exc.retry_after,
            refusal=exc.refusal,
            kind=exc.kind,
        )
    return type(exc)(message, url=exc.url)


@overload
def read_body(response: requests.Response, *, quote: bool = True) -> Any: ...
@overload
def read_body(
    response: requests.Response,
    model: type[_T],
    *,
    context: dict[str, Any] | None = None,
    quote: bool = True,
    member: str = "",
) -> _T: ...
def read_body(
    response: requests.Response,
    model: type[BaseModel] | None = None,
    *,
    context: dict[str, Any] | None = None,
    quote: bool = True,
    member: str = "",
) -> Any:
    """The JSON of ``response``, read as ``model`` when one is given (``context``: its
    validation context; ``member``: the body's member that holds the record, as OpenRouter's
    ``{"data": record}``). A body that is not JSON, or JSON that is not a ``model``, is an
    ``APIError`` that says so, with the URL and, unless ``quote`` is false (an answer that may
    hold a key's secret), the body's start."""
    try:
        payload = json.loads(response.text)
    except ValueError as exc:
        snippet = " ".join(response.text.split())[:120]
        shown = repr(snippet) if quote else "not shown (it may hold a key's secret)"
        raise APIError(
            f"{response.url} returned a body that is not JSON ({exc}): {shown}; "
            "is OPENROUTER_BASE_URL an OpenRouter API URL?",
            url=response.url,
        ) from exc
    if model is None:
        return payload
    shape = f"{{{member}: {model.__name__}}}" if member else model.__name__
    if member and not (isinstance(payload, dict) and member in payload):
        what = f"{member}: Field required" if isinstance(payload, dict) else "<root>: not an object"
        raise APIError(
            f"{response.url} returned JSON that is not a {shape}: {what}", url=response.url
        )
    try:
        return model.model_validate(payload[member] if member else payload, context=context)
    except ValidationError as exc:
        raise APIError(
            f"{response.url} returned JSON that is not a {shape}: "
            f"{first_validation_error(exc, prefix=member)}",
            url=response.url,
        ) from exc


def _short(exc: APIError) -> str:
    """What failed, in a few words, for the one-line retry notice."""
    if isinstance(exc, APIStatusError):
        return f"HTTP {exc.status_code}" + (" (rate limited)" if exc.status_code == 429 else "")
    return str(exc).rsplit(": ", 1)[-1]


class Wire:
    """The requests of one connection; a ``get``'s retry options are ``Client``'s (``_s``:
    seconds)."""

    def __init__(
        self,
        connection: Connection,
        *,
        session: requests.Session | None = None,
        attempts: int = 5,
        retry_timeout_s: float = 60.0,
        wait_max_s: float = 20.0,
        sleep: Callable[[float], None] | None = None,
    ) -> None:
        self.connection = connection
        self.attempts = attempts
        self.retry_timeout_s = retry_timeout_s
        self.wait_max_s = wait_max_s
        self._sleep = sleep
        self._session = session or requests.Session()
        self._session.headers.setdefault("User-Agent", "openrouter-probe")

    def __repr__(self) -> str:
        return f"Wire(base_url={self.connection.base_url!r})"  # never the key

    def close(self) -> None:
        self._session.close()

    def url(self, path: str) -> str:
        """``path`` under the connection's API root (a full URL is kept as it is)."""
        return path if path.startswith("http") else f"{self.connection.base_url}{path}"

    def send(
        self,
        method: str,
        path: str,
        *,
        params: Params = None,
        data: bytes | None = None,
        json_body: Any = None,
        accept: str = "application/json",
        stream: bool = False,
    ) -> requests.Response:
        """One request, never repeated; a connection failure or an error status raises."""
        url = self.url(path)
        headers = self.connection.headers(accept=accept)
        if data is not None:
            headers["Content-Type"] = "application/json"
        try:
            response = self._session.request(
                method,
                url,
                params=params,
                data=data,
                json=json_body,
                headers=headers,
                timeout=self.connection.timeout,
                stream=stream,
            )
        except requests.RequestException as exc:
            raise translate_exception(exc, url=url, method=method) from exc
        if response.status_code >= 400:
            raise translate_status(response)
        return response

    def get(
        self,
        path: str,
        *,
        params: Params = None,
        accept: str = "application/json",
        settling: Backoff | None = None,
    ) -> requests.Response:
        """A GET with bounded retries: every wait capped, each retry said, one error at the end.
        ``settling``: a 404 is a record not written yet (``/generation`` is eventually
        consistent), asked again on that schedule, counted from the first try; the transient
        schedule starts afresh after each such 404."""
        url = self.url(path)
        transient = Backoff(
            wait_initial_s=0.5,
            wait_max_s=self.wait_max_s,
            attempts=self.attempts,
            timeout_s=self.retry_timeout_s,
        )
        started = transient_from = _monotonic()
        tries = {True: 0, False: 0}  # the tries of each schedule, by "a 404 while settling"
        while True:
            try:
                return self.send("GET", url, params=params, accept=accept)
            except APIError as exc:
                unsettled = settling is not None and isinstance(exc, NoRouteError)
                if not unsettled and not retryable(exc):
                    raise
                tries[unsettled] += 1
                if unsettled:  # each ask after a 404 has its transient tries afresh
                    tries[False], transient_from = 0, _monotonic()
                policy = settling if unsettled and settling else transient
                retry_after = exc.retry_after if isinstance(exc, APIStatusError) else None
                decision = policy.next_wait(
                    attempt=tries[unsettled],
                    retry_after_s=retry_after,
                    elapsed_s=_monotonic() - (started if unsettled else transient_from),
                )
                if decision.give_up:
                    said = "still not visible, " if unsettled else ""
                    message = f"{exc}; {said}{decision.reason}"
                    if decision.retry_after_s is not None:
                        when = datetime.now(UTC) + timedelta(seconds=decision.retry_after_s)
                        message += f": retry after {when:%Y-%m-%d %H:%M:%S UTC}"
                    raise with_message(exc, message) from exc
                if unsettled:
                    log.debug("%s: not visible yet; asking again in %.1f s", url, decision.wait_s)
                else:
                    log.warning(
                        "%s: %s; retry %d of %d in %.1f s",
                        url,
                        _short(exc),
                        tries[False],
                        self.attempts - 1,
                        decision.wait_s,
                    )
                (self._sleep or _sleep)(decision.wait_s)


class Wired:
    """A client holding one ``Wire`` (``_wire``) and its ``connection``, closed by ``close`` or
    at the end of a ``with`` block."""

    def __init__(self, wire: Wire) -> None:
        self._wire = wire
        #: the key, the API root and the timeouts (``api.connection``), resolved once
        self.connection = wire.connection
        self.base_url = wire.connection.base_url

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the HTTP session."""
        self._wire.close()

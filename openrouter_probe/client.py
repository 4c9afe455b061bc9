"""The synchronous OpenRouter API client, on ``requests``.

One ``Client`` talks to ``OPENROUTER_BASE_URL`` (default ``https://openrouter.ai/api/v1``) with the
key from ``OPENROUTER_API_KEY`` (optional for the public paths). Transient failures (connection
errors, 429, 5xx) are retried with exponential backoff and jitter by stamina, honouring
``Retry-After``; every failure is translated once, in ``_translate_status`` and ``_send``, into the
tree in ``openrouter_probe.errors``.

Example::

    from openrouter_probe import Client

    with Client() as client:
        data = client.endpoints("moonshotai/kimi-k2.5")
        for endpoint in data.endpoints:
            print(endpoint.tag, endpoint.quantization, endpoint.pricing.completion_usd_per_m)
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from typing import Any, TypeVar
from urllib.parse import quote

import requests
import stamina
from pydantic import BaseModel, ValidationError

from openrouter_probe.errors import (
    APIConnectionError,
    APIError,
    APIStatusError,
    ConfigError,
    InsufficientCreditsError,
    NoRouteError,
    RateLimitError,
    first_validation_error,
)
from openrouter_probe.schema import (
    EndpointsResponse,
    Generation,
    KeyInfo,
    ModelEndpoints,
    ModelsList,
    ProvidersList,
)

__all__ = ["DEFAULT_BASE_URL", "Client", "page_url"]

DEFAULT_BASE_URL = "https://openrouter.ai/api/v1"
_MODEL_RE = re.compile(r"^[A-Za-z0-9][\w.\-~]*/[\w.\-:~]+$")
_RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504, 524, 529})
_T = TypeVar("_T", bound=BaseModel)


def _check_model(model: str) -> str:
    if not _MODEL_RE.match(model or ""):
        raise ConfigError(
            f"{model!r} is not a model id: use author/slug as OpenRouter lists it, "
            "e.g. moonshotai/kimi-k2.5 (see `openrouter-probe models`)"
        )
    return model


def page_url(model: str, *, base_url: str | None = None) -> str:
    """Return the provider page URL for ``model`` on the site that serves ``base_url``'s API.

    ``https://openrouter.ai/api/v1`` gives ``https://openrouter.ai/<model>/providers``; a base URL
    pointed at a local fake server gives the same path on that server.
    """
    base = (base_url or os.environ.get("OPENROUTER_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")
    site = re.sub(r"/api/v\d+$", "", base)
    return f"{site}/{_check_model(model)}/providers"


def _retry_after_seconds(response: requests.Response) -> float | None:
    value = response.headers.get("Retry-After")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None  # an HTTP date; the exponential backoff is good enough then


def _translate_status(response: requests.Response) -> APIStatusError:
    """Map an error response to the exception tree (the only place that does)."""
    status = response.status_code
    body = response.text
    code: int | str | None = None
    message = ""
    metadata: dict[str, Any] = {}
    try:
        payload = json.loads(body)
    except ValueError:
        payload = None
    if isinstance(payload, dict) and isinstance(payload.get("error"), dict):
        err = payload["error"]
        code = err.get("code")
        message = str(err.get("message") or "")
        if isinstance(err.get("metadata"), dict):
            metadata = err["metadata"]
    if not message:
        snippet = " ".join(body.split())[:200]
        message = f"HTTP {status} {response.reason or ''}".strip() + (
            f": {snippet}" if snippet else ""
        )
    raw = metadata.get("raw")
    if isinstance(raw, str) and raw and raw not in message:
        message = f"{message} ({metadata.get('provider_name', 'provider')}: {raw})"
    if status == 401:
        message = f"{message} OpenRouter rejected the API key: check OPENROUTER_API_KEY."
    elif status == 402:
        message = (
            f"{message} Add credits at https://openrouter.ai/settings/credits or lower max_tokens."
        )
    cls: type[APIStatusError] = APIStatusError
    if status == 429:
        cls = RateLimitError
    elif status == 402:
        cls = InsufficientCreditsError
    elif status == 404:
        cls = NoRouteError
    return cls(
        message,
        status_code=status,
        url=response.url,
        code=code,
        metadata=metadata,
        body=body,
        retry_after=_retry_after_seconds(response),
    )


def _backoff(exc: Exception) -> bool | float:
    """Tell stamina whether to retry ``exc`` and, with ``Retry-After``, how long to wait."""
    if isinstance(exc, APIConnectionError):
        return True
    if isinstance(exc, APIStatusError) and exc.status_code in _RETRY_STATUSES:
        return exc.retry_after if exc.retry_after is not None else True
    return False


class Client:
    """A client for OpenRouter's read-only API paths.

    Options are keyword-only. ``api_key`` defaults to ``OPENROUTER_API_KEY`` (public paths work
    without it, but then endpoint latency and throughput come back ``null``); ``base_url`` to
    ``OPENROUTER_BASE_URL``. ``timeout`` is ``(connect, read)`` seconds. ``attempts`` bounds the
    retries of transient failures; ``retry_timeout`` bounds their total time.
    """

    def __init__(
        self,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: tuple[float, float] = (10.0, 60.0),
        attempts: int = 5,
        retry_timeout: float = 60.0,
        session: requests.Session | None = None,
    ) -> None:
        key = api_key if api_key is not None else os.environ.get("OPENROUTER_API_KEY", "")
        self._api_key = key.strip() or None
        self.base_url = (
            base_url or os.environ.get("OPENROUTER_BASE_URL") or DEFAULT_BASE_URL
        ).rstrip("/")
        if not self.base_url.startswith(("http://", "https://")):
            raise ConfigError(
                f"OPENROUTER_BASE_URL={self.base_url!r} is not an http(s) URL; "
                f"unset it to use {DEFAULT_BASE_URL}"
            )
        self.timeout = timeout
        self.attempts = attempts
        self.retry_timeout = retry_timeout
        self._session = session or requests.Session()
        self._session.headers.setdefault("User-Agent", "openrouter-probe")

    def __repr__(self) -> str:
        # Never show the key, not even in a repr that ends up in a log.
        return f"Client(base_url={self.base_url!r}, has_key={self.has_key})"

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        self._session.close()

    @property
    def has_key(self) -> bool:
        """Whether requests carry an API key."""
        return self._api_key is not None

    # -- transport ------------------------------------------------------------------------------

    def _headers(self, *, accept: str) -> dict[str, str]:
        headers = {"Accept": accept}
        # The provider page is public HTML: it never needs the key, so it never gets it.
        if self._api_key and accept != "text/html":
            headers["Authorization"] = f"Bearer {self._api_key}"
        return headers

    def _send(
        self, url: str, *, params: Mapping[str, str] | None, accept: str
    ) -> requests.Response:
        """One GET; connection failures and error statuses become ``APIError`` subclasses."""
        try:
            response = self._session.get(
                url, params=params, headers=self._headers(accept=accept), timeout=self.timeout
            )
        except requests.Timeout as exc:
            raise APIConnectionError(f"timed out talking to {url}: {exc}", url=url) from exc
        except requests.ConnectionError as exc:
            raise APIConnectionError(
                f"cannot reach {url} ({type(exc).__name__}); check the network or "
                "OPENROUTER_BASE_URL, or use --offline",
                url=url,
            ) from exc
        except requests.RequestException as exc:
            raise APIConnectionError(f"request to {url} failed: {exc}", url=url) from exc
        if response.status_code >= 400:
            raise _translate_status(response)
        return response

    def _get(
        self,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        accept: str = "application/json",
    ) -> requests.Response:
        url = path if path.startswith("http") else f"{self.base_url}{path}"
        for attempt in stamina.retry_context(
            on=_backoff,
            attempts=self.attempts,
            timeout=self.retry_timeout,
            wait_initial=0.5,
            wait_max=20.0,
        ):
            with attempt:
                return self._send(url, params=params, accept=accept)
        raise AssertionError("unreachable: stamina re-raises the last error")  # pragma: no cover

    def _get_model(
        self, path: str, model: type[_T], *, params: Mapping[str, str] | None = None
    ) -> _T:
        response = self._get(path, params=params)
        try:
            payload = json.loads(response.text)
        except ValueError as exc:
            snippet = " ".join(response.text.split())[:120]
            raise APIError(
                f"{response.url} returned a body that is not JSON ({exc}): {snippet!r}; "
                "is OPENROUTER_BASE_URL an OpenRouter API URL?",
                url=response.url,
            ) from exc
        try:
            return model.model_validate(payload)
        except ValidationError as exc:
            raise APIError(
                f"{response.url} returned JSON that is not a {model.__name__}: "
                f"{first_validation_error(exc)}",
                url=response.url,
            ) from exc

    # -- API paths ------------------------------------------------------------------------------

    def endpoints(self, model: str) -> ModelEndpoints:
        """Return ``model``'s endpoints (by id, ``moonshotai/kimi-k2.5``, or canonical slug).

        Raises ``NoRouteError`` for a model OpenRouter does not know.
        """
        path = f"/models/{quote(_check_model(model), safe='/:')}/endpoints"
        try:
            return self._get_model(path, EndpointsResponse).data
        except NoRouteError as exc:
            raise NoRouteError(
                f"{exc.message} Check the model id with `openrouter-probe models` "
                "(ids look like moonshotai/kimi-k2.5).",
                status_code=exc.status_code,
                url=exc.url,
                code=exc.code,
                metadata=exc.metadata,
                body=exc.body,
                retry_after=exc.retry_after,
            ) from exc

    def models(self) -> ModelsList:
        """Return every model OpenRouter lists (``GET /models``)."""
        return self._get_model("/models", ModelsList)

    def providers(self) -> ProvidersList:
        """Return every provider with its routing slug (``GET /providers``)."""
        return self._get_model("/providers", ProvidersList)

    def key(self) -> KeyInfo:
        """Return the calling key's limits and usage (``GET /key``); needs ``OPENROUTER_API_KEY``."""
        if not self.has_key:
            raise ConfigError(
                "GET /key needs an API key: export OPENROUTER_API_KEY=... "
                "(create one at https://openrouter.ai/settings/keys)"
            )
        return self._get_model("/key", _KeyEnvelope).data

    def generation(self, generation_id: str, *, wait_seconds: float = 30.0) -> Generation:
        """Return what a generation cost and who served it.

        The lookup is eventually consistent: a fresh id answers 404 for several seconds, so 404s
        are retried with backoff for up to ``wait_seconds``.
        """
        if not self.has_key:
            raise ConfigError("GET /generation needs an API key: export OPENROUTER_API_KEY=...")
        for attempt in stamina.retry_context(
            on=NoRouteError, attempts=None, timeout=wait_seconds, wait_initial=1.0, wait_max=8.0
        ):
            with attempt:
                return self._get_model(
                    "/generation", _GenerationEnvelope, params={"id": generation_id}
                ).data
        raise AssertionError("unreachable")  # pragma: no cover

    def page(self, model: str) -> str:
        """Return the HTML of ``model``'s provider page (see ``openrouter_probe.scrape``)."""
        return self._get(page_url(model, base_url=self.base_url), accept="text/html").text


class _KeyEnvelope(BaseModel):
    data: KeyInfo


class _GenerationEnvelope(BaseModel):
    data: Generation

"""The synchronous client of OpenRouter's read-only paths, on ``requests``.

One ``Client`` talks to one ``api.connection.Connection`` (``OPENROUTER_BASE_URL`` with the key
from ``OPENROUTER_API_KEY``, optional for the public paths) through the one sync request loop the
batch and key clients share: ``api.wire`` says how it retries, waits and translates failures.

Example::

    from openrouter_probe import Client

    with Client() as client:
        data = client.endpoints("moonshotai/kimi-k2.5")
        for endpoint in data.endpoints:
            print(endpoint.tag, endpoint.quantization, endpoint.pricing.completion_usd_per_m)
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import TYPE_CHECKING
from urllib.parse import quote, urljoin, urlsplit, urlunsplit

import requests

from openrouter_probe.api.backoff import Backoff
from openrouter_probe.api.chat import Credits, Generation, KeyInfo, read_generation
from openrouter_probe.api.connection import DEFAULT_BASE_URL, DEFAULT_TIMEOUT, Connection
from openrouter_probe.api.payload import REPORT_SKIPPED
from openrouter_probe.api.schema import EndpointsResponse, ModelEndpoints
from openrouter_probe.api.wire import Wire, Wired, read_body, with_message
from openrouter_probe.errors import APIError, APIStatusError, ConfigError, NoRouteError

if TYPE_CHECKING:  # the listings' models are built for models() and providers() alone
    from openrouter_probe.api.listings import ModelsList, ProvidersList

__all__ = ["Client", "page_url"]

log = logging.getLogger(__name__)

_MAX_MODEL_PAGES = 100
_MODEL_RE = re.compile(r"^[A-Za-z0-9][\w.\-~]*/[\w.\-:~]+$")


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
    site = Connection.resolve(base_url=base_url).site
    return f"{site}/{_check_model(model)}/providers"


class Client(Wired):
    """A client for OpenRouter's read-only API paths.

    Options are keyword-only. ``api_key`` defaults to ``OPENROUTER_API_KEY`` (public paths work
    without it, but then endpoint latency and throughput come back ``null``); ``base_url`` to
    ``OPENROUTER_BASE_URL``; a key that is set but empty is said, once, and treated as none.
    ``timeout`` is ``(connect, read)`` seconds. A ``connection`` (``api.connection``) already
    resolved replaces those three. ``attempts`` counts every try of a transient failure
    (the first included); ``retry_timeout`` bounds their total time and ``wait_max`` each wait
    between them (``Retry-After`` included). ``sleep`` replaces ``time.sleep`` for those waits.
    """

    def __init__(
        self,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: tuple[float, float] = DEFAULT_TIMEOUT,
        attempts: int = 5,
        retry_timeout: float = 60.0,
        wait_max: float = 20.0,
        session: requests.Session | None = None,
        sleep: Callable[[float], None] | None = None,
        connection: Connection | None = None,
    ) -> None:
        connection = connection or Connection.resolve(
            api_key=api_key, base_url=base_url, timeout=timeout
        )
        if connection.key_is_blank:
            log.warning(
                "OPENROUTER_API_KEY is set but empty; going on without a key "
                "(latency and throughput come back null)"
            )
        super().__init__(
            Wire(
                connection,
                session=session,
                attempts=attempts,
                retry_timeout_s=retry_timeout,
                wait_max_s=wait_max,
                sleep=sleep,
            )
        )

    def __repr__(self) -> str:
        # Never show the key, not even in a repr that ends up in a log.
        return f"Client(base_url={self.base_url!r}, has_key={self.has_key})"

    @property
    def has_key(self) -> bool:
        """Whether requests carry an API key."""
        return self.connection.has_key

    @property
    def key_is_blank(self) -> bool:
        """Whether the key came from an OPENROUTER_API_KEY that is set but empty (or blank)."""
        return self.connection.key_is_blank

    # -- transport ------------------------------------------------------------------------------

    def _answers(self, path: str) -> bool:
        """Whether ``path`` answers without an error status (the body is not read). Only a diagnosis
        rests on it: any failure to ask (a connection error, a replay that has no such request)
        counts as an answer, so that nothing is blamed on a guess."""
        try:
            with self._wire.send("GET", path, stream=True):
                return True
        except APIStatusError:
            return False
        except Exception:  # any failure to ask: see the docstring
            return True

    def _wrong_base_url(self) -> ConfigError:
        """A 404 for ``/models`` itself: the base URL, not the model id, is wrong."""
        base = self.base_url
        expected = f"{base}/api/v1" if not base.endswith("/api/v1") else DEFAULT_BASE_URL
        return ConfigError(
            f"{base}/models answers 404: OPENROUTER_BASE_URL={base} is not an OpenRouter API "
            f"URL. Give the API's root, ending in /api/v1, e.g. {expected}"
        )

    # -- API paths ------------------------------------------------------------------------------

    def endpoints(self, model: str, *, diagnose: bool = True) -> ModelEndpoints:
        """Return ``model``'s endpoints (by id, ``moonshotai/kimi-k2.5``, or canonical slug).

        Raises ``NoRouteError`` for a model OpenRouter does not know; with ``diagnose`` (the
        default) a 404 first asks ``/models`` once, to tell a wrong base URL from a wrong model
        id (``diagnose=False``: the caller knows the URL answers, e.g. a ``:batch`` variant asked
        right after the model's own endpoints).
        """
        path = f"/models/{quote(_check_model(model), safe='/:')}/endpoints"
        try:
            return read_body(self._wire.get(path), EndpointsResponse).data
        except NoRouteError as exc:
            if diagnose and not self._answers("/models"):
                raise self._wrong_base_url() from exc
            raise with_message(
                exc,
                f"{exc.message} Check the model id with `openrouter-probe models` "
                "(ids look like moonshotai/kimi-k2.5).",
            ) from exc

    def models(self) -> ModelsList:
        """Return every model OpenRouter lists (``GET /models``), following its pages
        (``links.next``, else ``offset`` while ``total_count`` says more; on this client's host
        only; docs/api.md, "Paging"). An explicit ``links.next: null`` ends the list; so does a
        page that adds nothing or repeats (said). Models that cannot be read are left out and
        listed in the result's ``skipped``, with one warning for the whole list."""
        from openrouter_probe.api.listings import ModelsList

        quiet = {REPORT_SKIPPED: False}
        try:
            pages = [read_body(self._wire.get("/models"), ModelsList, context=quiet)]
        except NoRouteError as exc:
            raise self._wrong_base_url() from exc
        read = len(pages[0].data) + len(pages[0].skipped)  # entries seen, readable or not
        ids = {m.id for m in pages[0].data}
        asked: set[str] = set()
        while len(pages) < _MAX_MODEL_PAGES:
            target = self._next_models_page(pages[-1], read)
            if target is None or target[0] + str(target[1]) in asked:
                break
            asked.add(target[0] + str(target[1]))
            page = read_body(self._wire.get(target[0], params=target[1]), ModelsList, context=quiet)
            if not page.data and not page.skipped:
                break
            if page.data and all(m.id in ids for m in page.data):
                log.warning(
                    "%s: the page after %d models repeats models already listed (does the "
                    "server ignore offset?); the list ends there",
                    self.base_url + target[0].removeprefix(self.base_url),
                    read,
                )
                break
            pages.append(page)
            ids.update(m.id for m in page.data)
            read += len(page.data) + len(page.skipped)
        listing = ModelsList.joined(pages)
        if listing.skipped:
            log.warning("%s", listing.skipped_summary())
        return listing

    def _next_models_page(
        self, page: ModelsList, read: int
    ) -> tuple[str, dict[str, str] | None] | None:
        """The URL (and query) of the page after ``page``, or ``None`` when it was the last."""
        links = page.links if page.links is not None else page.raw_fields.get("links")
        if isinstance(links, dict) and "next" in links and links["next"] is None:
            return None  # the server says this was the last page
        nxt = links.get("next") if isinstance(links, dict) else None
        if isinstance(nxt, str) and nxt.strip():
            # Relative or absolute, the next page is asked of this client's own host: the key
            # is never sent to a host named in a response body.
            base = urlsplit(self.base_url)
            target = urlsplit(urljoin(self.base_url + "/", nxt.strip()))
            return urlunsplit((base.scheme, base.netloc, target.path, target.query, "")), None
        total = page.total_count
        if isinstance(total, int) and read < total:
            return "/models", {"offset": str(read)}
        return None

    def providers(self) -> ProvidersList:
        """Return every provider with its routing slug (``GET /providers``)."""
        from openrouter_probe.api.listings import ProvidersList

        return read_body(self._wire.get("/providers"), ProvidersList)

    def key(self) -> KeyInfo:
        """Return the calling key's limits and usage (``GET /key``); needs ``OPENROUTER_API_KEY``."""
        self.connection.require_key("GET /key")
        return read_body(self._wire.get("/key"), KeyInfo, member="data")

    def credits(self) -> Credits:
        """Return the account's credits bought and used (``GET /credits``); OpenRouter answers it
        for a management key (a paid run asks with ``OPENROUTER_MANAGEMENT_KEY`` when it is set)."""
        self.connection.require_key("GET /credits")
        return read_body(self._wire.get("/credits"), Credits, member="data")

    def generation(self, generation_id: str, *, wait_seconds: float = 30.0) -> Generation:
        """Return what a generation cost and who served it.

        The lookup is eventually consistent: a fresh id answers 404 for several seconds, so 404s
        are retried with backoff for up to ``wait_seconds``.
        """
        self.connection.require_key("GET /generation")
        settling = Backoff(
            wait_initial_s=1.0, wait_max_s=8.0, attempts=1_000, timeout_s=wait_seconds
        )
        answer = self._wire.get("/generation", params={"id": generation_id}, settling=settling)
        found = read_generation(answer.status_code, answer.text)  # one reader, the run's too
        if isinstance(found, Generation):
            return found
        raise APIError(
            f"{answer.url} returned a body that is not a Generation: {found}", url=answer.url
        )

    def page(self, model: str) -> str:
        """Return the HTML of ``model``'s provider page (see ``openrouter_probe.api.scrape``)."""
        return self._wire.get(page_url(model, base_url=self.base_url), accept="text/html").text

"""A client for OpenRouter's Batch API (``/api/v1/batches``), on ``requests``: ``BatchClient``.

What it sends and reads, the beta path it falls back on and why nothing here retries (a
``create`` retried after a lost answer can make a second batch: find the first in ``list``):
docs/api.md ("The Batch API client"); the API's facts and sources: docs/batch.md. Errors go
through the sync client's translation (``api.translate``).

Example::

    from openrouter_probe.api.batches import BatchClient

    with BatchClient() as batches:
        job = batches.create(
            model="moonshotai/kimi-k3",
            requests=[{"custom_id": "r1", "body": {"messages": [{"role": "user", "content": "Hi"}]}}],
            provider={"only": ["together"], "allow_fallbacks": False},
        )
        print(job.id, job.status)            # batch-1788697047-..., validating
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any

import requests
from pydantic import Field

from openrouter_probe.api.backoff import http_date
from openrouter_probe.api.connection import Connection
from openrouter_probe.api.payload import Payload
from openrouter_probe.api.wire import Wire, Wired, read_body
from openrouter_probe.errors import APIStatusError

__all__ = [
    "Batch",
    "BatchClient",
    "BatchCounts",
    "BatchList",
    "BatchResult",
    "ResultsPage",
]

log = logging.getLogger(__name__)

#: ``(connect, read)`` seconds of a batch request: a create uploads every request of the batch.
TIMEOUT = (10.0, 120.0)


class BatchCounts(Payload):
    total: int = 0
    completed: int = 0
    failed: int = 0


class BatchResult(Payload):
    """One result line: exactly one of ``response`` (``{status_code, request_id, body}``, the sync
    shape of the endpoint) and ``error`` (``{message, type, param, error_type}``) is set."""

    id: str | None = None
    custom_id: str
    response: dict[str, Any] | None = None
    error: dict[str, Any] | None = None

    @property
    def body(self) -> dict[str, Any] | None:
        """The response body (a ``chat.completion`` for a chat batch), or ``None``."""
        body = None if self.response is None else self.response.get("body")
        return body if isinstance(body, dict) else None


class Batch(Payload):
    """A ``BatchObject`` read tolerantly (``api.payload.Payload``, as every view of the API):
    recorded bodies lack fields the SDK requires (``provider``, ``expires_at``), so every field but
    ``id`` and ``status`` may be absent."""

    id: str
    status: str
    model: str | None = None
    endpoint: str | None = None
    provider: str | None = None
    created_at: int | None = None
    finalized_at: int | None = None
    expires_at: int | None = None
    request_counts: BatchCounts = Field(default_factory=BatchCounts)
    usage: dict[str, Any] | None = None
    results: list[BatchResult] | None = None
    error: dict[str, Any] | None = None

    @property
    def terminal(self) -> bool:
        """Whether the batch has finished (``completed``, ``failed``, ``expired``, ``cancelled``)."""
        return self.status in ("completed", "failed", "expired", "cancelled")

    @property
    def cost_usd(self) -> float | None:
        """``usage.cost``: what OpenRouter charged for the whole batch (``None`` until it is known)."""
        cost = None if self.usage is None else self.usage.get("cost")
        return float(cost) if isinstance(cost, int | float) and not isinstance(cost, bool) else None


class BatchList(Payload):
    data: list[Batch] = Field(default_factory=list)
    first_id: str | None = None
    last_id: str | None = None
    has_more: bool = False
    #: the server's clock when it answered (its ``Date`` header, Unix seconds; ``None``: no
    #: such header): what a batch's ``created_at`` is measured on, whatever this clock says
    served_at: float | None = Field(default=None, exclude=True)


class ResultsPage(Payload):
    data: list[BatchResult] = Field(default_factory=list)
    has_more: bool = False
    next_cursor: str | None = None


class BatchClient(Wired):
    """OpenRouter's Batch API; options keyword-only, as ``openrouter_probe.Client``'s.

    ``api_key`` defaults to ``OPENROUTER_API_KEY`` (required: every batch route needs it),
    ``base_url`` to ``OPENROUTER_BASE_URL``; a ``connection`` (``api.connection``) already
    resolved replaces them and ``timeout`` (its own timeout is used: ``TIMEOUT`` is a batch's).
    """

    def __init__(
        self,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: tuple[float, float] = TIMEOUT,
        session: requests.Session | None = None,
        connection: Connection | None = None,
    ) -> None:
        connection = connection or Connection.resolve(
            api_key=api_key, base_url=base_url, timeout=timeout
        )
        connection.require_key("the Batch API")
        super().__init__(Wire(connection, session=session))
        #: The batches path in use: ``{base}/batches``, or the beta path after a fallback.
        self.path = f"{self.base_url}/batches"
        self._fell_back = False

    def __repr__(self) -> str:
        return f"BatchClient(path={self.path!r})"  # never the key

    # -- transport ------------------------------------------------------------------------------

    def _beta_path(self) -> str | None:
        beta = f"{self.connection.site}/api/beta/batches"
        return None if beta == self.path else beta

    def _call(
        self,
        method: str,
        suffix: str = "",
        *,
        params: Sequence[tuple[str, str]] | None = None,
        data: bytes | None = None,
    ) -> requests.Response:
        """One request (``api.wire``, never repeated); a non-JSON 404 on the v1 path moves to the
        beta path once (said)."""
        while True:
            try:
                return self._wire.send(method, self.path + suffix, params=params, data=data)
            except APIStatusError as exc:
                beta = self._beta_path()
                if exc.status_code != 404 or self._fell_back or _is_json(exc.body) or not beta:
                    raise
                log.warning(
                    "%s answered a 404 that is not JSON (no Batch API there); using %s",
                    self.path,
                    beta,
                )
                self.path, self._fell_back = beta, True

    # -- the routes -----------------------------------------------------------------------------

    def create(
        self,
        *,
        model: str,
        requests: Sequence[Mapping[str, Any]],
        provider: Mapping[str, Any] | None = None,
    ) -> Batch:
        """Submit a batch of chat completions (``202``: stored, not yet valid; it may still go
        ``failed``). Each request is ``{"custom_id": ..., "body": {...}}``. The body is written
        with ``endpoint``, ``model`` and ``provider`` before ``requests``. Never retried."""
        head: dict[str, Any] = {"endpoint": "/v1/chat/completions", "model": model}
        if provider is not None:
            head["provider"] = dict(provider)
        # Dicts keep insertion order and json.dumps writes it: requests goes last.
        text = json.dumps({**head, "requests": [dict(r) for r in requests]}, ensure_ascii=False)
        return read_body(self._call("POST", data=text.encode()), Batch)

    def get(self, batch_id: str) -> Batch:
        """The batch now (``results`` inline once it completed). A 402 (results withheld until the
        charge is covered) raises ``InsufficientCreditsError``; a 404 right after the create is
        the asynchronous write, not a lost batch (ask again)."""
        return read_body(self._call("GET", f"/{batch_id}"), Batch)

    def results_page(
        self, batch_id: str, *, cursor: str | None = None, limit: int = 1000
    ) -> ResultsPage:
        """One page of ``/batches/{id}/results`` (``limit`` 1-1000; ``cursor`` from the last)."""
        params = [("limit", str(limit))] + ([("cursor", cursor)] if cursor else [])
        return read_body(self._call("GET", f"/{batch_id}/results", params=params), ResultsPage)

    def results(self, batch_id: str, *, limit: int = 1000) -> Iterator[BatchResult]:
        """Every result line of a finished batch, page after page (order not promised: match
        lines on ``custom_id``)."""
        cursor: str | None = None
        seen: set[str] = set()
        while True:
            page = self.results_page(batch_id, cursor=cursor, limit=limit)
            yield from page.data
            if not page.has_more or not page.next_cursor or page.next_cursor in seen:
                return
            seen.add(page.next_cursor)
            cursor = page.next_cursor

    def list(
        self,
        *,
        created_after: int | float | datetime | None = None,
        after: str | None = None,
        status: Sequence[str] = (),
        limit: int = 100,
    ) -> BatchList:
        """One page of the workspace's batches, newest first (items omit ``results``).
        ``created_after`` (Unix seconds or a datetime) is a strict bound; ``after`` is the previous
        page's ``last_id``."""
        params = [("limit", str(limit))]
        if created_after is not None:
            stamp = (
                created_after.timestamp() if isinstance(created_after, datetime) else created_after
            )
            params.append(("created_after", str(int(stamp))))
        if after is not None:
            params.append(("after", after))
        params += [("status", s) for s in status]
        response = self._call("GET", params=params)
        page = read_body(response, BatchList)
        page.served_at = http_date(response.headers.get("Date"))
        return page

    def list_all(
        self, *, created_after: int | float | datetime | None = None, status: Sequence[str] = ()
    ) -> Iterator[Batch]:
        """Every batch created after ``created_after``, following ``last_id`` pages."""
        after: str | None = None
        while True:
            page = self.list(created_after=created_after, after=after, status=status)
            yield from page.data
            if not page.has_more or not page.last_id or page.last_id == after:
                return
            after = page.last_id

    def delete(self, batch_id: str) -> dict[str, Any]:
        """Delete a finished batch's stored requests and results (``409`` while it runs; billing
        is kept; it is not a cancel: there is none)."""
        payload = read_body(self._call("DELETE", f"/{batch_id}"))
        return payload if isinstance(payload, dict) else {"answer": payload}


def _is_json(text: str | None) -> bool:
    try:
        json.loads(text or "")
    except ValueError:
        return False
    return True

"""Fresh snapshots: ``probe(model)`` reads the API (the paid run's too) and falls back to the
provider page, ``batch_listing`` its ``:batch`` endpoints; ``resolve_snapshot`` gives a command the
one it asked for (saved, bundled or probed)."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from openrouter_probe.errors import APIError, Message, NoRouteError, SnapshotError
from openrouter_probe.rules.snapshot import (
    Snapshot,
    bundled_snapshot,
    load_snapshot,
    model_mismatch,
)

if TYPE_CHECKING:
    from openrouter_probe.api.client import Client
    from openrouter_probe.rules.batch import BatchListing

__all__ = ["batch_listing", "probe", "resolve_snapshot"]

log = logging.getLogger(__name__)


def probe(
    model: str, *, client: Client | None = None, use_page: bool = True, batch: bool = True
) -> Snapshot:
    """Take a fresh snapshot of ``model``: the API first, then the provider page.

    The result's ``source`` says which one answered. An unknown model (404) is not retried on
    the page. ``client`` is an ``openrouter_probe.Client`` (one is made from the environment);
    ``batch``: read the ``:batch`` listing too (``batch_listing``).
    """
    from openrouter_probe.api.client import Client, page_url

    with Client() if client is None else contextlib.nullcontext(client) as api:
        try:
            parsed = api.endpoints(model)
            origin = f"{api.base_url}/models/{model}/endpoints"
            listing = batch_listing(api, model) if batch else None
            return Snapshot.from_endpoints(
                parsed, model=model, source="api", origin=origin, batch=listing
            )
        except NoRouteError:
            raise
        except APIError as api_exc:
            if not use_page:
                raise
            url = page_url(model, base_url=api.base_url)
            log.warning("API failed (%s); trying the provider page %s", api_exc, url)
            try:
                html = api.page(model)
            except APIError as page_exc:
                raise APIError(
                    Message(
                        "both-sources-failed",
                        "both sources failed: API: {api:s}; page: {page:s}. Use {offline=True} "
                        "or {snapshot=PATH} to work without the network",
                        api=str(api_exc),
                        page=str(page_exc),
                    ),
                    url=url,
                ) from page_exc
            from openrouter_probe.api.scrape import parse_provider_page  # bs4: the page only

            parsed = parse_provider_page(html, model=model, source=url)
            return Snapshot.from_endpoints(parsed, model=model, source="page", origin=url)


def resolve_snapshot(
    model: str | None,
    *,
    offline: bool = False,
    snapshot: Snapshot | str | Path | None = None,
    live: Callable[[str], Snapshot] = probe,
) -> Snapshot:
    """Return the snapshot a command asked for: ``--snapshot bundled|PATH`` (or a ``Snapshot``),
    ``--offline``, or a fresh one (``live``: ``probe``, or a paid run's own read of the API).
    A snapshot for another model than ``model`` is an error."""
    if isinstance(snapshot, Snapshot):
        snap = snapshot
    elif snapshot == "bundled" or (offline and not snapshot):
        snap = bundled_snapshot(model or "moonshotai/kimi-k2.5")
    elif snapshot:
        snap = load_snapshot(snapshot)
    elif model:
        snap = live(model)
    else:
        raise SnapshotError(Message("no-model", "give a model, {offline=True} or {snapshot=PATH}"))
    named = isinstance(snapshot, str | Path) and snapshot != "bundled"
    mismatch = model and model_mismatch(snap, model, source=str(snapshot) if named else None)
    if mismatch:
        raise SnapshotError(mismatch)
    return snap


def batch_listing(api: Client, model: str) -> BatchListing | None:
    """The model's ``:batch`` endpoints (a 404 or an empty list: none), or ``None`` when the
    listing could not be read (then nothing is known about batches, and that is said)."""
    from openrouter_probe.rules.batch import BatchListing, batch_model_id

    variant = batch_model_id(model)
    origin = f"{api.base_url}/models/{variant}/endpoints"
    when = datetime.now(UTC).replace(microsecond=0)
    try:
        parsed = api.endpoints(variant, diagnose=False)  # the model's own just answered
    except NoRouteError:
        return BatchListing(origin=origin, taken_at=when, data=None)
    except APIError as exc:
        log.warning("%s: %s; the snapshot says nothing about :batch endpoints", origin, exc)
        return None
    return BatchListing(origin=origin, taken_at=when, data=parsed.to_json_dict(), _parsed=parsed)

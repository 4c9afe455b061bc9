"""Snapshots: a model's endpoints, when and where they were taken, and a content hash.

Every analysis runs on a ``Snapshot``, so it can be saved, shared and reproduced. ``probe(model)``
takes one from the API and falls back to the provider page; ``bundled_snapshot(model)`` loads the
one shipped inside the package (the Kimi K2.5 scenario: reconstructed, not a live capture);
``load_snapshot(path)`` reads a saved one.

Example::

    from openrouter_probe import probe

    snap = probe("moonshotai/kimi-k2.5")          # API first, then the provider page
    snap.save("kimi-k2.5.snapshot.json")
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cached_property
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import ValidationError

from openrouter_probe.errors import APIError, NoRouteError, SnapshotError, first_validation_error
from openrouter_probe.schema import Endpoint, ModelEndpoints

if TYPE_CHECKING:
    from openrouter_probe.client import Client

__all__ = [
    "BUNDLED_MODELS",
    "Snapshot",
    "SnapshotSource",
    "bundled_snapshot",
    "load_snapshot",
    "probe",
    "resolve_snapshot",
]

log = logging.getLogger(__name__)

SnapshotSource = Literal["api", "page", "bundled", "file"]
_FORMAT = "openrouter-probe.snapshot/1"

#: Models with a snapshot shipped inside the package, and the package file that holds it.
BUNDLED_MODELS: dict[str, str] = {"moonshotai/kimi-k2.5": "kimi-k2.5.snapshot.json"}


def _content_hash(data: dict[str, Any]) -> str:
    canonical = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


@dataclass(frozen=True)
class Snapshot:
    """A model's endpoints as seen at ``taken_at`` from ``source``.

    ``data`` is the ``data`` object of ``GET /models/{id}/endpoints`` exactly as OpenRouter sent it
    (for a page scrape, the same shape built from the page). ``source`` says how this object was
    obtained (``api``, ``page``, ``bundled`` or ``file``); ``captured_from`` keeps the source of the
    capture when a snapshot is saved and loaded again; ``note`` carries provenance to show users.
    """

    model: str
    data: dict[str, Any]
    taken_at: datetime
    source: SnapshotSource
    origin: str
    captured_from: SnapshotSource | None = None
    note: str | None = None
    _parsed: ModelEndpoints | None = field(default=None, repr=False, compare=False)

    @classmethod
    def from_endpoints(
        cls,
        parsed: ModelEndpoints,
        *,
        model: str,
        source: SnapshotSource,
        origin: str,
        taken_at: datetime | None = None,
        note: str | None = None,
    ) -> Snapshot:
        """Build a snapshot from a parsed endpoints payload (the API's or the page's)."""
        return cls(
            model=model,
            data=parsed.to_json_dict(),
            taken_at=taken_at or datetime.now(UTC).replace(microsecond=0),
            source=source,
            origin=origin,
            captured_from=source,
            note=note,
            _parsed=parsed,
        )

    @cached_property
    def parsed(self) -> ModelEndpoints:
        """The typed view of ``data``."""
        if self._parsed is not None:
            return self._parsed
        try:
            return ModelEndpoints.model_validate(self.data)
        except ValidationError as exc:
            raise SnapshotError(
                f"{self.origin}: {first_validation_error(exc, prefix='data')}; re-take it with "
                f"`openrouter-probe endpoints {self.model} --save PATH`"
            ) from exc

    @property
    def endpoints(self) -> list[Endpoint]:
        return self.parsed.endpoints

    @cached_property
    def sha256(self) -> str:
        """A hash of ``data`` (canonical JSON): equal hashes mean equal endpoint data."""
        return _content_hash(self.data)

    @property
    def provenance(self) -> str:
        """One line saying what this snapshot is, for every place that shows results."""
        when = self.taken_at.strftime("%Y-%m-%d %H:%M UTC")
        first = self.captured_from or self.source
        text = f"{self.model}: {len(self.endpoints)} endpoints from {first} ({self.origin}), {when}"
        if self.source == "file" and first != "file":
            text += ", loaded from file"
        if self.note:
            text += f". {self.note}"
        return text

    def to_json(self) -> dict[str, Any]:
        """Return the snapshot as the JSON document ``save`` writes."""
        return {
            "format": _FORMAT,
            "model": self.model,
            "taken_at": self.taken_at.isoformat().replace("+00:00", "Z"),
            "source": self.captured_from or self.source,
            "origin": self.origin,
            "note": self.note,
            "sha256": self.sha256,
            "data": self.data,
        }

    def save(self, path: str | Path) -> Path:
        """Write the snapshot as JSON to ``path`` and return it."""
        target = Path(path)
        text = json.dumps(self.to_json(), indent=2, ensure_ascii=False) + "\n"
        try:
            target.write_text(text, encoding="utf-8")
        except OSError as exc:
            raise SnapshotError(f"cannot write snapshot to {target}: {exc.strerror}") from exc
        return target


def _from_document(doc: Any, *, where: str, source: SnapshotSource) -> Snapshot:
    """Build a snapshot from a saved document, or from a bare ``/endpoints`` response body."""
    if not isinstance(doc, dict):
        raise SnapshotError(f"{where}: not a snapshot (a JSON object with 'data' is expected)")
    if doc.get("format") == _FORMAT:
        try:
            taken_at = datetime.fromisoformat(str(doc["taken_at"]).replace("Z", "+00:00"))
            if taken_at.tzinfo is None:
                taken_at = taken_at.replace(tzinfo=UTC)  # a time without a zone is read as UTC
            data = doc["data"]
            model = str(doc["model"])
        except (KeyError, ValueError) as exc:
            raise SnapshotError(f"{where}: snapshot key {exc} is missing or malformed") from exc
        captured = doc.get("source")
        captured_from = captured if captured in ("api", "page", "bundled", "file") else None
        origin, note = str(doc.get("origin") or where), doc.get("note")
    elif isinstance(doc.get("data"), dict) and "endpoints" in doc["data"]:
        # A raw response body saved with curl: accept it, dated now, and say so.
        data, model = doc["data"], str(doc["data"].get("id", ""))
        taken_at = datetime.now(UTC).replace(microsecond=0)
        captured_from, origin, note = None, where, "raw /endpoints body; capture time unknown"
    else:
        raise SnapshotError(
            f"{where}: not a snapshot: expected 'format': {_FORMAT!r} or an /endpoints body "
            "with data.endpoints; save one with `openrouter-probe endpoints MODEL --save PATH`"
        )
    if not isinstance(data, dict):
        raise SnapshotError(f"{where}: 'data' must be an object with 'endpoints'")
    snap = Snapshot(
        model=model,
        data=data,
        taken_at=taken_at,
        source=source,
        origin=origin,
        captured_from=captured_from,
        note=note,
    )
    try:
        snap.parsed  # noqa: B018  (validate now, so a broken file fails where it is named)
    except SnapshotError as exc:
        # Name the file the user gave, not the origin recorded inside it.
        raise SnapshotError(str(exc).replace(snap.origin, where, 1)) from exc
    stored = doc.get("sha256")
    if stored and stored != snap.sha256:
        log.warning(
            "%s: data changed since it was saved (stored %s, now %s)", where, stored, snap.sha256
        )
    return snap


def load_snapshot(path: str | Path) -> Snapshot:
    """Load a snapshot saved by ``Snapshot.save`` (or a raw ``/endpoints`` response body)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise SnapshotError(f"{p}: no such snapshot file") from exc
    except OSError as exc:
        raise SnapshotError(f"{p}: cannot read snapshot: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise SnapshotError(f"{p}: not a text file ({exc.reason}); is this a snapshot?") from exc
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise SnapshotError(f"{p}: not JSON ({exc}); is this a snapshot file?") from exc
    return _from_document(doc, where=str(p), source="file")


def bundled_snapshot(model: str = "moonshotai/kimi-k2.5") -> Snapshot:
    """Load the snapshot shipped inside the package for ``model`` (offline, no key needed).

    The Kimi K2.5 one is *reconstructed* from what OpenRouter showed in early 2026, not a live
    capture; its ``note`` says so and every command that uses it prints that.
    """
    name = BUNDLED_MODELS.get(model)
    if name is None:
        known = ", ".join(sorted(BUNDLED_MODELS))
        raise SnapshotError(
            f"no bundled snapshot for {model!r} (bundled: {known}); "
            "take one with `openrouter-probe endpoints MODEL --save PATH` and pass --snapshot PATH"
        )
    text = resources.files("openrouter_probe.data").joinpath(name).read_text(encoding="utf-8")
    return _from_document(json.loads(text), where=f"bundled:{name}", source="bundled")


def probe(model: str, *, client: Client | None = None, use_page: bool = True) -> Snapshot:
    """Take a fresh snapshot of ``model``: the API first, then the provider page.

    The result's ``source`` says which one answered. An unknown model (404) is not retried on
    the page. ``client`` is an ``openrouter_probe.Client`` (one is made from the environment).
    """
    from openrouter_probe.client import Client, page_url
    from openrouter_probe.scrape import parse_provider_page

    own = client is None
    api = Client() if client is None else client
    try:
        try:
            parsed = api.endpoints(model)
            origin = f"{api.base_url}/models/{model}/endpoints"
            return Snapshot.from_endpoints(parsed, model=model, source="api", origin=origin)
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
                    f"both sources failed: API: {api_exc}; page: {page_exc}. "
                    "Use --offline or --snapshot PATH to work without the network",
                    url=url,
                ) from page_exc
            parsed = parse_provider_page(html, model=model, source=url)
            return Snapshot.from_endpoints(parsed, model=model, source="page", origin=url)
    finally:
        if own:
            api.close()


def resolve_snapshot(
    model: str | None, *, offline: bool = False, snapshot: str | None = None
) -> Snapshot:
    """Return the snapshot a command asked for: ``--snapshot bundled|PATH``, ``--offline``, or a
    fresh ``probe``. A loaded snapshot for another model than ``model`` is an error."""
    if snapshot == "bundled" or (offline and not snapshot):
        snap = bundled_snapshot(model or "moonshotai/kimi-k2.5")
    elif snapshot:
        snap = load_snapshot(snapshot)
    elif model:
        snap = probe(model)
    else:
        raise SnapshotError("give a MODEL, --offline or --snapshot PATH")
    if model and snap.model != model and snap.data.get("id") != model:
        raise SnapshotError(
            f"{snap.origin} holds {snap.model}, not {model}; pass the snapshot of {model}"
        )
    return snap

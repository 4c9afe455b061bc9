"""Snapshots: a model's endpoints, when and where they were taken, and a content hash.

Every analysis runs on a ``Snapshot``, so it can be saved, shared and reproduced:
``bundled_snapshot(model)`` loads the one shipped inside the package (reconstructed, not a live
capture), ``load_snapshot(path)`` a saved one, and ``rules.probing`` takes a fresh one. A snapshot
is immutable from outside (``rules.frozen``) and never makes up a capture time (docs/probe.md says
why both matter).

Example::

    from openrouter_probe import probe

    snap = probe("moonshotai/kimi-k2.5")          # API first, then the provider page
    snap.save("kimi-k2.5.snapshot.json")
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cached_property
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import ValidationError

from openrouter_probe.api.schema import Endpoint, ModelEndpoints
from openrouter_probe.errors import Message, SnapshotError, first_validation_error
from openrouter_probe.files import atomic_write_text, ensure_not_input
from openrouter_probe.rules.frozen import freeze_json, thaw

if TYPE_CHECKING:
    from openrouter_probe.rules.batch import BatchListing

__all__ = [
    "BUNDLED_MODELS",
    "Snapshot",
    "SnapshotSource",
    "bundled_snapshot",
    "load_snapshot",
    "model_mismatch",
]

log = logging.getLogger(__name__)

SnapshotSource = Literal["api", "page", "bundled", "file"]
_FORMAT = "openrouter-probe.snapshot/1"

#: Models with a snapshot shipped inside the package, and the package file that holds it.
BUNDLED_MODELS: dict[str, str] = {"moonshotai/kimi-k2.5": "kimi-k2.5.snapshot.json"}


def _as_utc(when: datetime | None) -> datetime | None:
    """``when`` in UTC: an offset is converted (not dropped), a time without a zone is read as UTC."""
    if when is None:
        return None
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)


def _iso(when: datetime | None) -> str | None:
    return None if when is None else when.isoformat().replace("+00:00", "Z")


@dataclass(frozen=True)
class Snapshot:
    """A model's endpoints as seen at ``taken_at`` from ``source``.

    ``data`` is the ``data`` object of ``GET /models/{id}/endpoints`` exactly as OpenRouter sent it
    (for a page scrape, the same shape built from the page), held as a read-only copy. ``taken_at``
    is in UTC (an offset is converted), or ``None`` when the capture time is unknown. ``source``
    says how this object was obtained (``api``, ``page``, ``bundled`` or ``file``);
    ``captured_from`` keeps the source of the capture when a snapshot is saved and loaded again;
    ``note`` carries provenance to show users. ``batch`` holds the model's ``:batch`` endpoints
    (``openrouter_probe.rules.batch``; ``None`` when they were not probed, as in older snapshots).
    """

    model: str
    data: dict[str, Any]
    taken_at: datetime | None
    source: SnapshotSource
    origin: str
    captured_from: SnapshotSource | None = None
    note: str | None = None
    batch: BatchListing | None = None
    _parsed: ModelEndpoints | None = field(default=None, repr=False, compare=False)
    _json: str | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        frozen, text = freeze_json(self.data)
        object.__setattr__(self, "data", frozen)
        object.__setattr__(self, "_json", text)
        object.__setattr__(self, "taken_at", _as_utc(self.taken_at))

    def __repr__(self) -> str:
        when = _iso(self.taken_at) or "capture time unknown"
        count = len(self.data.get("endpoints") or ())
        return (
            f"<Snapshot {self.model}: {count} endpoints from {self.captured_from or self.source}, "
            f"{when}, {self.sha256[:15]}…>"
        )

    def _repr_html_(self) -> str:
        """A table of the endpoints for Jupyter: tag, provider, quantization, prices, uptime."""
        import html  # for a notebook alone: a run never draws this table

        from openrouter_probe.rules.quantities import format_usd_per_m

        rows = []
        for e in self.endpoints:
            cells = (
                e.tag,
                e.provider_name,
                e.quantization or "-",
                format_usd_per_m(e.pricing.prompt_usd_per_m),
                format_usd_per_m(e.pricing.completion_usd_per_m),
                "-" if e.uptime_last_30m is None else f"{e.uptime_last_30m:.2f}",
            )
            rows.append(
                "<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in cells) + "</tr>"
            )
        head = "".join(
            f"<th>{h}</th>"
            for h in ("tag", "provider", "quantization", "input", "output", "uptime 30m %")
        )
        return (
            f"<p><b>{html.escape(self.provenance)}</b></p>"
            f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
        )

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
        batch: BatchListing | None = None,
    ) -> Snapshot:
        """Build a snapshot from a parsed endpoints payload (the API's or the page's): ``parsed``
        becomes its typed view (``parsed``, not copied: a fresh parse is the usual one; pass
        ``parsed.model_copy(deep=True)`` to change yours afterwards)."""
        return cls(
            model=model,
            data=parsed.to_json_dict(),
            taken_at=taken_at or datetime.now(UTC).replace(microsecond=0),
            source=source,
            origin=origin,
            captured_from=source,
            note=note,
            batch=batch,
            _parsed=parsed,
        )

    @property
    def batch_endpoints(self) -> list[Endpoint]:
        """The model's ``:batch`` endpoints (empty when it has none or they were not probed)."""
        return [] if self.batch is None else self.batch.endpoints

    def with_batch_acceptance(
        self, tag: str, batch_id: str, *, at: datetime | None = None
    ) -> Snapshot:
        """This snapshot with an accepted submit to the ``:batch`` endpoint ``tag`` recorded in
        its batch history (``batch.accepted``): from then on ``tag`` shows as ``accepted``, not
        only ``listed``. The endpoint data and ``sha256`` do not change."""
        if self.batch is None or tag not in {e.tag for e in self.batch.endpoints}:
            raise SnapshotError(
                Message(
                    "not-a-batch-endpoint",
                    "{origin:s}: {tag:s} is not a :batch endpoint of {model:s} in this snapshot; "
                    "re-probe it ({@save_snapshot})",
                    origin=str(self.origin),
                    tag=repr(tag),
                    model=self.model,
                )
            )
        when = _as_utc(at or datetime.now(UTC).replace(microsecond=0))
        from openrouter_probe.rules.batch import BatchAcceptance

        listing = self.batch.with_acceptance(BatchAcceptance(tag, batch_id, when))
        return dataclasses.replace(self, batch=listing, _parsed=self.parsed)

    @cached_property
    def parsed(self) -> ModelEndpoints:
        """The typed view of ``data``."""
        if self._parsed is not None:
            return self._parsed
        try:
            if self._json is not None:  # the JSON text the data was frozen from: parsed in Rust
                return ModelEndpoints.model_validate_json(self._json)
            return ModelEndpoints.model_validate(thaw(self.data))
        except ValidationError as exc:
            raise SnapshotError(
                Message(
                    "snapshot-invalid",
                    "{origin:s}: {error:s}; re-take it with {@save_model_snapshot}",
                    origin=str(self.origin),
                    error=first_validation_error(exc, prefix="data"),
                    model=self.model,
                )
            ) from exc

    @property
    def endpoints(self) -> list[Endpoint]:
        """The parsed endpoints (a new list each time: the snapshot's own cannot be reordered)."""
        return list(self.parsed.endpoints)

    @cached_property
    def sha256(self) -> str:
        """A hash of ``data`` (canonical JSON): equal hashes mean equal endpoint data."""
        canonical = json.dumps(self.data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()

    @property
    def provenance(self) -> str:
        """One line saying what this snapshot is, for every place that shows results."""
        when = (
            "capture time unknown"
            if self.taken_at is None
            else self.taken_at.strftime("%Y-%m-%d %H:%M UTC")
        )
        first = self.captured_from or self.source
        text = f"{self.model}: {len(self.endpoints)} endpoints from {first} ({self.origin}), {when}"
        if self.source == "file" and first != "file":
            text += ", loaded from file"
        if self.note:
            text += f". {self.note}"
        return text

    def to_json(self) -> dict[str, Any]:
        """Return the snapshot as the JSON document ``save`` writes (a fresh copy, free to edit)."""
        return {
            "format": _FORMAT,
            "model": self.model,
            "taken_at": _iso(self.taken_at),
            "source": self.captured_from or self.source,
            "origin": self.origin,
            "note": self.note,
            "sha256": self.sha256,
            "data": thaw(self.data) if self._json is None else json.loads(self._json),
        } | ({} if self.batch is None else {"batch": self.batch.to_json()})

    def save(self, path: str | Path, *, inputs: Iterable[str | Path] = ()) -> Path:
        """Write the snapshot as JSON to ``path`` atomically and return it.

        A failed write leaves the old file whole. ``inputs`` are files this snapshot was read
        from: writing over one of them is refused (a raw body would be replaced by this form).
        """
        target = Path(path)
        try:
            ensure_not_input(target, *inputs)
        except ValueError:
            raise SnapshotError(
                f"{target} is the snapshot being read; save to another file"
            ) from None
        text = json.dumps(self.to_json(), indent=2, ensure_ascii=False) + "\n"
        try:
            atomic_write_text(target, text)
        except OSError as exc:
            raise SnapshotError(f"cannot write snapshot to {target}: {exc.strerror}") from exc
        return target


def _from_document(doc: Any, *, where: str, source: SnapshotSource) -> Snapshot:
    """Build a snapshot from a saved document, or from a bare ``/endpoints`` response body."""
    if not isinstance(doc, dict):
        raise SnapshotError(f"{where}: not a snapshot (a JSON object with 'data' is expected)")
    if doc.get("format") == _FORMAT:
        try:
            stamp = doc["taken_at"]
            taken_at = None if stamp is None else _as_utc(datetime.fromisoformat(str(stamp)))
            data = doc["data"]
            model = str(doc["model"])
        except (KeyError, ValueError) as exc:
            raise SnapshotError(f"{where}: snapshot key {exc} is missing or malformed") from exc
        captured = doc.get("source")
        captured_from = captured if captured in ("api", "page", "bundled", "file") else None
        origin, note = str(doc.get("origin") or where), doc.get("note")
        batch = None
        if doc.get("batch") is not None:  # (its module only then)
            from openrouter_probe.rules.batch import listing_from_json

            batch = listing_from_json(doc["batch"], where=where)
        if source == "bundled":
            origin = where  # the package path: a file every user has
    elif isinstance(doc.get("data"), dict) and "endpoints" in doc["data"]:
        # A raw response body saved with curl: accept it, undated (never "now": the same bytes
        # must compile to the same policy), and say so.
        data, model = doc["data"], str(doc["data"].get("id", ""))
        taken_at = None
        captured_from, origin, note = None, where, "raw /endpoints body; capture time unknown"
        batch = None
    else:
        raise SnapshotError(
            Message(
                "not-a-snapshot",
                "{where:s}: not a snapshot: expected 'format': {format:s} or an /endpoints body "
                "with data.endpoints; save one with {@save_snapshot}",
                where=str(where),
                format=repr(_FORMAT),
            )
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
        batch=batch,
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
        raise SnapshotError(
            Message(
                "snapshot-not-json", "{path:s}: {why:s}", path=str(p), why=_not_json(p, text, exc)
            )
        ) from exc
    return _from_document(doc, where=str(p), source="file")


_SAVED_HOW = "the JSON that {@save_snapshot} writes"


def _not_json(path: Path, text: str, exc: ValueError) -> Message:
    """Why a file that is not JSON is no snapshot, in the reader's terms: a YAML file (a policy
    or spec given as a snapshot) by its kind; a cut JSON file by its line and column."""
    if path.suffix.lower() in (".yaml", ".yml") or not text.lstrip().startswith(("{", "[")):
        return Message("snapshot-is-text", "not a snapshot but a text or YAML file; a snapshot "
                       "is " + _SAVED_HOW)  # fmt: skip
    if isinstance(exc, json.JSONDecodeError):
        return Message(
            "snapshot-json-broken",
            "not valid JSON at line {line:d}, column {column:d} ({why:s}); a snapshot is "
            + _SAVED_HOW
            + ": save it again",
            line=exc.lineno,
            column=exc.colno,
            why=exc.msg.removesuffix(" at").removesuffix(" starting"),
        )
    return Message("snapshot-not-json", "not JSON; a snapshot is " + _SAVED_HOW)


def bundled_snapshot(model: str = "moonshotai/kimi-k2.5") -> Snapshot:
    """Load the snapshot shipped inside the package for ``model`` (offline, no key needed).

    The Kimi K2.5 one is *reconstructed* from what OpenRouter showed in early 2026, not a live
    capture; its ``note`` says so and every command that uses it prints that.
    """
    name = BUNDLED_MODELS.get(model)
    if name is None:
        known = ", ".join(sorted(BUNDLED_MODELS))
        raise SnapshotError(
            Message(
                "no-bundled-snapshot",
                "no bundled snapshot for {model:s} (bundled: {known:s}); take one with "
                "{@save_snapshot} and pass {snapshot=PATH}",
                model=repr(model),
                known=known,
            )
        )
    text = resources.files("openrouter_probe.data").joinpath(name).read_text(encoding="utf-8")
    return _from_document(json.loads(text), where=f"openrouter_probe/data/{name}", source="bundled")


def model_mismatch(
    snap: Snapshot, model: str, *, source: str | None = None, fix: str | None = None
) -> str | None:
    """Say ``model mismatch`` with both ids when ``snap`` is not of ``model`` (``None`` when it is).

    The one check every place that loads a snapshot for a model makes; each raises its own error
    with the line. ``source`` names the snapshot (default: its origin); ``fix`` replaces the
    default advice (pass a snapshot of ``model``).
    """
    if model in (snap.model, snap.data.get("id")):
        return None
    advice = fix or Message(
        "snapshot-of-model", "pass a snapshot of {model:s} (save one with {@save_model_snapshot})",
        model=model,
    )  # fmt: skip
    return Message(
        "model-mismatch",
        "model mismatch: {source:s} holds {held:s}, not {model:s}; {advice:s}",
        source=str(source or snap.origin),
        held=snap.model,
        model=model,
        advice=advice,
    )

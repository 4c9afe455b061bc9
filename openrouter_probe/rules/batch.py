"""A model's ``:batch`` endpoints: what OpenRouter's Batch API lists for it, and what it accepted.

A snapshot holds them in ``Snapshot.batch``, a ``BatchListing`` (``None``: the snapshot was taken
before batches were probed, so nothing is known), saved as its top-level ``batch`` key beside
``data`` and outside its ``sha256``. An endpoint is only ``listed`` until a submit to it was
accepted (``BatchListing.accepted``): docs/batch.md ("In a snapshot") has the layout and the
reasons.

A ``generate --batch`` run given ``--snapshot PATH`` records its first accepted submit per
``:batch`` endpoint in that file (``record_batch_acceptance``; docs/batch.md, "Where a run's
acceptance goes"). Only the top-level ``batch`` value changes: every other byte (``data``,
``sha256``, the key order and layout) stays, so a policy that pins the snapshot's ``sha256`` still
matches it. The file is replaced atomically, keeping its mode. A file that is read-only, not a
saved snapshot, or lists no such endpoint is left alone with a ``SnapshotError`` that says why (the
sender warns and the run goes on).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal

from pydantic import ValidationError

from openrouter_probe.api.schema import Endpoint, ModelEndpoints
from openrouter_probe.errors import Message, SnapshotError, first_validation_error
from openrouter_probe.files import atomic_write_text
from openrouter_probe.rules.frozen import thaw

__all__ = [
    "BatchAcceptance",
    "BatchListing",
    "BatchPair",
    "BatchStatus",
    "batch_model_id",
    "batch_pairs",
    "describe_batch",
    "listing_from_json",
    "record_batch_acceptance",
]

BatchStatus = Literal["listed", "accepted"]
_DECODER = json.JSONDecoder()


def batch_model_id(model: str) -> str:
    """The ``:batch`` variant id of ``model`` (``moonshotai/kimi-k3`` -> ``moonshotai/kimi-k3:batch``)."""
    return model if model.endswith(":batch") else f"{model}:batch"


def _iso(when: datetime | None) -> str | None:
    return None if when is None else when.isoformat().replace("+00:00", "Z")


def _parse_time(value: Any, where: str) -> datetime | None:
    if value is None:
        return None
    try:
        return datetime.fromisoformat(str(value))
    except ValueError as exc:
        raise SnapshotError(
            f"{where}: {value!r} is not an ISO time (e.g. 2026-11-20T09:00:00Z)"
        ) from exc


@dataclass(frozen=True)
class BatchAcceptance:
    """A submit OpenRouter accepted (202) for the ``:batch`` endpoint ``tag``."""

    tag: str
    batch_id: str
    at: datetime | None

    def to_json(self) -> dict[str, Any]:
        return {"tag": self.tag, "batch_id": self.batch_id, "at": _iso(self.at)}


@dataclass(frozen=True)
class BatchListing:
    """The ``:batch`` endpoints of a model as probed, and the submits accepted since.

    ``data`` is the ``data`` object of ``GET /models/{id}:batch/endpoints`` as sent (``None``
    when it answered 404: the model has no ``:batch`` endpoint).
    """

    origin: str
    taken_at: datetime | None
    data: Mapping[str, Any] | None = None
    accepted: tuple[BatchAcceptance, ...] = ()
    _parsed: ModelEndpoints | None = field(default=None, repr=False, compare=False)

    @property
    def endpoints(self) -> list[Endpoint]:
        """The ``:batch`` endpoints (empty when there are none)."""
        if self.data is None:
            return []
        parsed = self._parsed
        if parsed is None:
            try:
                parsed = ModelEndpoints.model_validate(thaw(self.data))
            except ValidationError as exc:
                raise SnapshotError(
                    Message(
                        "batch-listing-invalid",
                        "{origin:s}: {why:s}; re-take the snapshot with {@save_snapshot}",
                        origin=str(self.origin),
                        why=first_validation_error(exc, prefix="batch.data"),
                    )
                ) from exc
            object.__setattr__(self, "_parsed", parsed)
        return list(parsed.endpoints)

    def status(self, tag: str) -> BatchStatus:
        """``accepted`` once a submit to ``tag`` was accepted, ``listed`` until then."""
        return "accepted" if any(a.tag == tag for a in self.accepted) else "listed"

    def with_acceptance(self, acceptance: BatchAcceptance) -> BatchListing:
        """This listing with ``acceptance`` appended to its history (once per batch id)."""
        if any(a.batch_id == acceptance.batch_id for a in self.accepted):
            return self
        return replace(self, accepted=(*self.accepted, acceptance))

    def to_json(self) -> dict[str, Any]:
        return {
            "origin": self.origin,
            "taken_at": _iso(self.taken_at),
            "data": None if self.data is None else thaw(self.data),
            "accepted": [a.to_json() for a in self.accepted],
        }


def listing_from_json(doc: Any, *, where: str) -> BatchListing:
    """Read a snapshot's ``batch`` key (see the module docstring); errors name ``where``."""
    if not isinstance(doc, Mapping):
        raise SnapshotError(f"{where}: 'batch' must be an object with origin, data and accepted")
    data = doc.get("data")
    if data is not None and not isinstance(data, Mapping):
        raise SnapshotError(
            f"{where}: batch.data must be the :batch /endpoints data object or null"
        )
    accepted = []
    for index, raw in enumerate(doc.get("accepted") or []):
        loc = f"{where}: batch.accepted[{index}]"
        if not isinstance(raw, Mapping) or not raw.get("tag") or not raw.get("batch_id"):
            raise SnapshotError(f"{loc}: needs tag and batch_id (and at, an ISO time)")
        accepted.append(
            BatchAcceptance(
                tag=str(raw["tag"]),
                batch_id=str(raw["batch_id"]),
                at=_parse_time(raw.get("at"), loc),
            )
        )
    listing = BatchListing(
        origin=str(doc.get("origin") or where),
        taken_at=_parse_time(doc.get("taken_at"), f"{where}: batch.taken_at"),
        data=None if data is None else thaw(data),
        accepted=tuple(accepted),
    )
    listing.endpoints  # noqa: B018  (validate now, so a broken file fails where it is named)
    return listing


@dataclass(frozen=True)
class BatchPair:
    """A ``:batch`` endpoint beside the sync endpoint of the same deployment (``None`` when the
    model lists no sync endpoint with its tag or provider slug)."""

    batch: Endpoint
    sync: Endpoint | None
    status: BatchStatus

    @property
    def ratio(self) -> Decimal | None:
        """Batch output price over sync output price (``0.5`` is half price)."""
        b = self.batch.pricing.completion_usd_per_m
        s = None if self.sync is None else self.sync.pricing.completion_usd_per_m
        if b is None or not s:
            return None
        return (b / s).quantize(Decimal("0.001"))


def batch_pairs(listing: BatchListing | None, sync: Sequence[Endpoint]) -> list[BatchPair]:
    """Each ``:batch`` endpoint of ``listing`` with its sync twin: the sync endpoint with the same
    tag, else the only one with the same provider slug."""
    if listing is None:
        return []
    by_tag = {e.tag: e for e in sync}
    pairs = []
    for b in listing.endpoints:
        twin = by_tag.get(b.tag)
        if twin is None:
            same = [e for e in sync if e.slug == b.slug]
            twin = same[0] if len(same) == 1 else None
        pairs.append(BatchPair(b, twin, listing.status(b.tag)))
    return pairs


def describe_batch(listing: BatchListing | None, model: str) -> str:
    """One line for ``endpoints`` and ``matrix``: the model's ``:batch`` endpoints and their
    status, or that none is listed, or that the snapshot does not say."""
    if listing is None:
        return f"batch: no :batch endpoint is known for {model} (this snapshot was not probed for them)"
    eps = listing.endpoints
    if not eps:
        return f"batch: {model}: no :batch endpoint (OpenRouter lists none for this model)"
    tags = ", ".join(f"{e.tag} ({listing.status(e.tag)})" for e in eps)
    return f"batch: {model}: {len(eps)} :batch endpoint(s): {tags}"


def record_batch_acceptance(
    path: str | Path, tag: str, batch_id: str, *, at: datetime | None = None
) -> bool:
    """Record in the snapshot file ``path`` that OpenRouter accepted batch ``batch_id`` (a 202)
    for its ``:batch`` endpoint ``tag``; return ``False`` when that batch was already recorded.

    Only the file's ``batch`` value is rewritten (see the module). Raises ``SnapshotError``
    naming the file and the fix when it cannot be recorded.

    Example::

        record_batch_acceptance("kimi-k3.snapshot.json", "together", "batch-1788697047-yF7D")
    """
    target = Path(path)
    try:
        text = target.read_text(encoding="utf-8")
        doc = json.loads(text)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise SnapshotError(f"{target}: cannot read it to record batch {batch_id}: {exc}") from exc
    listing = _listing(doc, target, tag)
    when = (at or datetime.now(UTC)).astimezone(UTC).replace(microsecond=0)
    grown = listing.with_acceptance(BatchAcceptance(tag, batch_id, when))
    if grown is listing:
        return False
    if not os.access(target, os.W_OK) or not os.stat(target).st_mode & 0o222:
        # a file marked read-only is left alone, even by a user (root) who could replace it
        raise SnapshotError(
            f"{target} is read-only: batch {batch_id} accepted for {tag} is not recorded in its "
            "history; make it writable (chmod u+w) for later runs to record theirs"
        )
    new_text = _replace_value(text, "batch", grown.to_json())
    try:
        atomic_write_text(target, new_text)
    except OSError as exc:
        raise SnapshotError(
            f"cannot write {target} to record batch {batch_id}: {exc.strerror}; check the "
            "folder is writable"
        ) from exc
    return True


def _listing(doc: Any, target: Path, tag: str) -> BatchListing:
    """The file's batch listing, when it is a saved snapshot that lists ``tag``."""
    if not isinstance(doc, dict) or "format" not in doc or not isinstance(doc.get("batch"), dict):
        raise SnapshotError(
            Message(
                "no-batch-listing",
                "{target:s}: no :batch listing to record an accepted submit in (a snapshot saved "
                "before batches were probed, or a raw /endpoints body); save a fresh one with "
                "{@save_snapshot}",
                target=str(target),
            )
        )
    listing = listing_from_json(doc["batch"], where=str(target))
    if tag not in {e.tag for e in listing.endpoints}:
        raise SnapshotError(
            Message(
                "not-a-batch-endpoint",
                "{target:s}: {tag:s} is not among its :batch endpoints; re-probe it with "
                "{@save_snapshot}",
                target=str(target),
                tag=repr(tag),
            )
        )
    return listing


def _replace_value(text: str, key: str, value: Any) -> str:
    """``text`` (a JSON object) with the value of its top-level ``key`` replaced by ``value``,
    laid out as ``Snapshot.save`` lays it out, and every other byte as it was."""
    start, end = _value_span(text, key)
    laid_out = json.dumps(value, indent=2, ensure_ascii=False).replace("\n", "\n  ")
    return text[:start] + laid_out + text[end:]


def _value_span(text: str, key: str) -> tuple[int, int]:
    """Where the value of the top-level ``key`` of the JSON object ``text`` starts and ends
    (the last one, as ``json.loads`` keeps the last of a repeated key)."""
    i = _skip(text, 0)
    if not text.startswith("{", i):
        raise ValueError("not a JSON object")
    i = _skip(text, i + 1)
    found: tuple[int, int] | None = None
    while not text.startswith("}", i):
        name, i = _DECODER.raw_decode(text, i)  # the key: a JSON string
        i = _skip(text, _skip(text, i) + 1)  # past the colon
        _, end = _DECODER.raw_decode(text, i)
        if name == key:
            found = (i, end)
        i = _skip(text, end)
        if text.startswith(",", i):
            i = _skip(text, i + 1)
    if found is None:
        raise ValueError(f"no top-level {key!r}")
    return found


def _skip(text: str, i: int) -> int:
    """The first index at or after ``i`` that is not white space."""
    while i < len(text) and text[i] in " \t\r\n":
        i += 1
    return i

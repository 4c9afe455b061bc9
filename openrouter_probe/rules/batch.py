"""A model's ``:batch`` endpoints: what OpenRouter's Batch API lists for it, and what it accepted.

A snapshot holds them in ``Snapshot.batch``, a ``BatchListing`` (``None``: the snapshot was taken
before batches were probed, so nothing is known), saved as its top-level ``batch`` key beside
``data`` and outside its ``sha256``. An endpoint is only ``listed`` until a submit to it was
accepted (``BatchListing.accepted``, appended by ``rules.batch_history``): docs/batch.md ("In a
snapshot") has the layout and the reasons.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from decimal import Decimal
from typing import Any, Literal

from pydantic import ValidationError

from openrouter_probe.api.schema import Endpoint, ModelEndpoints
from openrouter_probe.errors import Message, SnapshotError, first_validation_error
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
]

BatchStatus = Literal["listed", "accepted"]


def batch_model_id(model: str) -> str:
    """The ``:batch`` variant id of ``model`` (``moonshotai/kimi-k3`` -> ``moonshotai/kimi-k3:batch``)."""
    return model if model.endswith(":batch") else f"{model}:batch"


def _iso(when: datetime | None) -> str | None:
    return None if when is None else when.isoformat().replace("+00:00", "Z")


def _parse_time(value: Any, where: str) -> datetime | None:
    if value is None:
        return None
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00"))
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

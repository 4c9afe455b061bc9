"""The tolerant reader every typed view of the OpenRouter API shares (``api.schema``,
``api.batches``): ``Payload``.

OpenRouter adds and reshapes fields over time, and a parser that rejects them breaks on the next
deploy: unknown keys are kept, only ``core_fields`` are strict, an odd-shaped other field is kept
raw, an unreadable list entry is skipped with one warning (docs/api.md, "Payloads and units").
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Self

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    ValidationError,
    ValidationInfo,
    model_validator,
)

if TYPE_CHECKING:  # the top-level name appeared after pydantic 2.6
    from pydantic.functional_validators import ModelWrapValidatorHandler

__all__ = [
    "REPORT_SKIPPED",
    "Number",
    "Payload",
    "PriceStr",
    "SkippedRecord",
    "to_optional_str",
]

#: The warnings name the API's views, where the skipped records are read (``api.schema``).
log = logging.getLogger("openrouter_probe.api.schema")

# Bumped whenever the reader keeps something aside, so that a payload can tell whether one inside
# it did (a list, not a global statement; a race can only cause a harmless extra walk).
_kept_events = [0]

#: Validation context key: ``{"report_skipped": False}`` silences the warning about skipped records
#: (for a caller that assembles several pages and reports once).
REPORT_SKIPPED = "report_skipped"


def _to_decimal_string(value: Any) -> Any:
    """Accept a price given as a number as well as the usual decimal string."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        return repr(value)
    return value


def to_optional_str(value: Any) -> Any:
    if value is None or isinstance(value, str):
        return value
    return str(value)


PriceStr = Annotated[str | None, BeforeValidator(_to_decimal_string)]
Number = int | float


@dataclass(frozen=True)
class SkippedRecord:
    """A list entry that could not be read: where it was, what it was, why, and the raw record."""

    index: int
    key: str | None
    reason: str
    raw: Any

    def __str__(self) -> str:
        name = f" ({self.key})" if self.key else ""
        return f"[{self.index}]{name}: {self.reason}"


def _loc(parts: tuple[int | str, ...]) -> str:
    text = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in parts)
    return text.lstrip(".") or "<record>"


class Payload(BaseModel):
    """A payload that validates its ``core_fields`` and keeps any other odd-shaped field raw."""

    model_config = ConfigDict(
        extra="allow", populate_by_name=True, protected_namespaces=(), defer_build=True
    )

    #: The fields the library computes from: validated, and a bad one makes the record unreadable.
    #: ``None`` means every declared field. Any other declared field with an unexpected shape is
    #: kept raw in ``raw_fields`` and its attribute left at its default.
    core_fields: ClassVar[frozenset[str] | None] = None
    #: The list field whose unreadable entries are skipped (``skipped``) instead of failing the
    #: whole payload, and what its entries are called in messages.
    skippable_list: ClassVar[str | None] = None
    record_noun: ClassVar[str] = "entries"

    # Class-level empty defaults, set on an instance only when it has something to keep: pydantic
    # private attributes would cost a Python call per instance (4x the parse time of a snapshot).
    _raw_fields: ClassVar[Mapping[str, Any]] = MappingProxyType({})
    _skipped: ClassVar[tuple[SkippedRecord, ...]] = ()
    #: True on an instance when it or a payload inside it kept something aside: ``to_json_dict``
    #: walks only those (a serializer hook on every payload made dumps 6-10x slower).
    _holds_kept: ClassVar[bool] = False

    @property
    def skipped(self) -> list[SkippedRecord]:
        """Entries of the list that could not be read and were left out (in list order)."""
        return list(self._skipped)

    @property
    def raw_fields(self) -> dict[str, Any]:
        """Declared fields whose value had an unexpected shape, as they came (not validated)."""
        return dict(self._raw_fields)

    def to_json_dict(self) -> dict[str, Any]:
        """Return the payload as OpenRouter sent it (only the keys that were present, odd-shaped
        fields and skipped records included; ``model_dump`` leaves those two out)."""
        out = self.model_dump(mode="json", exclude_unset=True)
        if self._holds_kept:
            self._restore_kept(out)
        return out

    def _restore_kept(self, out: dict[str, Any]) -> None:
        """Put the odd-shaped fields and skipped entries back into a dump of this payload."""
        for name in type(self).model_fields:
            if name in out:
                _restore_into(getattr(self, name), out[name])
        out.update(self._raw_fields)
        kept = out.get(self.skippable_list or "")
        if isinstance(kept, list):
            for record in self._skipped:  # ascending index: each insert restores its place
                kept.insert(record.index, record.raw)

    @model_validator(mode="wrap")
    @classmethod
    def _read_tolerantly(
        cls, data: Any, handler: ModelWrapValidatorHandler[Self], info: ValidationInfo
    ) -> Self:
        before = _kept_events[0]
        try:
            instance = handler(data)
        except ValidationError as exc:
            if not isinstance(data, dict):
                raise
            plan = cls._salvage(exc, data)
            if plan is None:
                raise
            odd, bad_items = plan
            if bad_items and len(bad_items) == len(data[cls.skippable_list or ""]):
                raise  # not one entry readable: the wrong kind of body, not an odd record
            cleaned = {k: v for k, v in data.items() if k not in odd}
            skipped: list[SkippedRecord] = []
            if bad_items and cls.skippable_list:
                items = data[cls.skippable_list]
                skipped = [
                    SkippedRecord(i, _record_key(items[i]), bad_items[i], items[i])
                    for i in sorted(bad_items)
                ]
                cleaned[cls.skippable_list] = [x for i, x in enumerate(items) if i not in bad_items]
            instance = handler(cleaned)
            instance._keep(raw_fields={k: data[k] for k in odd}, skipped=skipped)
            context = info.context if isinstance(info.context, dict) else {}
            if skipped and context.get(REPORT_SKIPPED, True):
                log.warning("%s", instance.skipped_summary())
        if _kept_events[0] != before:  # this payload, or one inside it, kept something aside
            object.__setattr__(instance, "_holds_kept", True)
        return instance

    def _keep(self, *, raw_fields: Mapping[str, Any], skipped: Sequence[SkippedRecord]) -> None:
        """Attach what the reader kept aside (not fields: no serializer or validator sees them)."""
        if raw_fields:
            object.__setattr__(self, "_raw_fields", dict(raw_fields))
        if skipped:
            object.__setattr__(self, "_skipped", tuple(skipped))
        if raw_fields or skipped:
            _kept_events[0] += 1
            object.__setattr__(self, "_holds_kept", True)

    @classmethod
    def _salvage(
        cls, exc: ValidationError, data: dict[str, Any]
    ) -> tuple[set[str], dict[int, str]] | None:
        """Sort the errors into odd non-core fields and unreadable list entries (index: reason);
        ``None`` when an error hits a core field (the record itself cannot be read)."""
        odd: set[str] = set()
        bad_items: dict[int, str] = {}
        for err in exc.errors():
            loc = err["loc"]
            name = loc[0] if loc else None
            if not isinstance(name, str) or name not in cls.model_fields or name not in data:
                return None
            if name == cls.skippable_list and len(loc) > 1 and isinstance(loc[1], int):
                bad_items.setdefault(loc[1], f"{_loc(loc[2:])}: {err['msg']}")
            elif cls.core_fields is not None and name not in cls.core_fields:
                odd.add(name)
            else:
                return None
        return odd, bad_items

    def skipped_summary(self) -> str:
        """One line: how many entries were skipped, of how many, and why the first one was
        (empty when none was)."""
        if not self._skipped:
            return ""
        name = self.skippable_list or ""
        total = len(getattr(self, name, None) or []) + len(self._skipped)
        owner = getattr(self, "id", None)
        whose = f" of {owner}" if isinstance(owner, str) else ""
        return (
            f"skipped {len(self._skipped)} of {total} {self.record_noun}{whose} that could not be "
            f"read; first: {name}{self._skipped[0]}"
        )


def _restore_into(value: Any, dumped: Any) -> None:
    """Walk ``value`` beside its dump and restore what payloads inside it kept aside."""
    if isinstance(value, Payload):
        if value._holds_kept and isinstance(dumped, dict):
            value._restore_kept(dumped)
    elif isinstance(value, list) and isinstance(dumped, list):
        for item, item_dump in zip(value, dumped, strict=False):
            _restore_into(item, item_dump)
    elif isinstance(value, dict) and isinstance(dumped, dict):
        for key, item in value.items():
            if key in dumped:
                _restore_into(item, dumped[key])


def _record_key(raw: Any) -> str | None:
    if isinstance(raw, dict):
        for key in ("id", "tag", "slug", "provider_name", "name"):
            if isinstance(raw.get(key), str):
                return str(raw[key])
    return None

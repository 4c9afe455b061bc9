"""Read-only JSON data: dicts and lists that refuse changes, whose copies are ordinary again.

A ``Snapshot`` holds its ``data`` so (``rules.snapshot``): nobody can change what its cached hash
and parsed endpoints were computed from.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any

_READ_ONLY = (
    "a Snapshot is read-only: take a copy with snapshot.to_json() (a fresh dict), edit it, "
    "and build a new Snapshot from it"
)


class _ReadOnly:
    """What both read-only containers share: every change refused, deep copies and pickles thawed
    (a pickle loads read-only again)."""

    def _refuse(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(_READ_ONLY)

    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        return thaw(self)

    def __reduce__(self) -> Any:
        return (_freeze, (thaw(self),))


class _FrozenDict(_ReadOnly, dict[str, Any]):
    """A dict that refuses changes; copies (``copy.deepcopy``, ``dict(x)``) are ordinary dicts."""

    __setitem__ = __delitem__ = __ior__ = _ReadOnly._refuse
    clear = pop = popitem = setdefault = update = _ReadOnly._refuse

    def __copy__(self) -> dict[str, Any]:
        return dict(self)


class _FrozenList(_ReadOnly, list[Any]):
    """A list that refuses changes; copies are ordinary lists."""

    __setitem__ = __delitem__ = __iadd__ = __imul__ = _ReadOnly._refuse
    append = extend = insert = remove = pop = clear = sort = reverse = _ReadOnly._refuse

    def __copy__(self) -> list[Any]:
        return list(self)


def _freeze(value: Any) -> Any:
    """A deep, read-only copy of JSON-like data."""
    if isinstance(value, dict):
        frozen = _FrozenDict()
        for key, item in value.items():
            dict.__setitem__(frozen, key, _freeze(item))
        return frozen
    if isinstance(value, list | tuple):
        frozen_list = _FrozenList()
        list.extend(frozen_list, (_freeze(item) for item in value))
        return frozen_list
    if value is None or isinstance(value, str | int | float | bool):
        return value  # immutable already
    return copy.deepcopy(value)


def _freeze_list(items: list[Any]) -> _FrozenList:
    for index, item in enumerate(items):
        if type(item) is list:  # lists of lists are rare: no generator on the common path
            items[index] = _freeze_list(item)
    return _FrozenList(items)


def _frozen_object(pairs: dict[str, Any]) -> _FrozenDict:
    # json's object_hook: inner objects arrive frozen already; freeze the lists beside them.
    for key, item in pairs.items():
        if type(item) is list:
            pairs[key] = _freeze_list(item)
    return _FrozenDict(pairs)


def freeze_json(data: Any) -> tuple[Any, str | None]:
    """A read-only copy of ``data`` and its JSON text. The round trip runs in C, with a hook per
    object only; data that is not JSON falls back to ``_freeze``'s walk (and has no text)."""
    try:
        text = json.dumps(data, ensure_ascii=False)
    except (TypeError, ValueError):
        return _freeze(data), None
    return json.loads(text, object_hook=_frozen_object), text


def thaw(value: Any) -> Any:
    """An ordinary (mutable) deep copy of JSON-like data, read-only views included."""
    if isinstance(value, Mapping):
        return {key: thaw(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [thaw(item) for item in value]
    return value

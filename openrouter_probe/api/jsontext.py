"""JSON text read fast: orjson where it can, the standard library where it cannot.

The answers of a paid run are the hot path (a 500-chunk stream is 500 JSON objects, and decoding
them is most of the client's work): orjson decodes them about twice as fast as ``json``. What
orjson refuses and ``json`` reads (``NaN`` and ``Infinity``, a lone surrogate) is read again by
``json``, so ``loads`` accepts what ``json.loads`` does, and raises what it raises. One value
differs: an integer beyond 64 bits, which recent orjson (3.13 here) returns as a float where
``json`` keeps an ``int`` (older releases refuse it, and ``json`` reads it); no count or price
OpenRouter sends comes near 2**64.

``dumps_record`` writes a record of the output the same way (compact, non-ASCII kept, anything
else as its ``str``) about four times faster than ``json``: what orjson refuses (a key that is not
a text, an integer beyond 64 bits) is written by ``json``. One difference is kept on purpose: a
float that is not a number (``NaN``, ``Infinity``, which JSON has not) is written ``null``, a
value unknown, where ``json`` writes a token no other JSON reader takes.
"""

from __future__ import annotations

import base64
import datetime as _dt
import json
import math
from collections.abc import Iterator, Mapping
from decimal import Decimal
from typing import Any

import orjson

__all__ = ["dumps_record", "json_text_value", "jsonable", "kind_of", "loads", "mappings_in"]


def loads(data: str | bytes) -> Any:
    """``json.loads(data)``, faster."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)


#: ``json``'s form of a record: compact, non-ASCII kept, anything else as its ``str``.
_JSON_RECORD = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=str).encode
#: Dataclasses and dates go to ``default`` (their ``str``), as ``json`` writes them.
_RECORD_OPTIONS = orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME


def dumps_record(value: Any) -> str:
    """A record as one compact JSON text (non-ASCII kept; a value JSON has no form for, such as
    a ``Decimal``, as its ``str``), faster than ``json``."""
    try:
        return orjson.dumps(value, default=str, option=_RECORD_OPTIONS).decode()
    except TypeError:  # orjson.JSONEncodeError: a non-text key, an integer beyond 64 bits
        return _JSON_RECORD(value)


def kind_of(value: Any) -> str:
    """What a decoded JSON value is, in JSON's words for a message ("null", "a number", "a
    list"), not Python's (``NoneType``, ``int``)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true or false"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def jsonable(value: Any) -> Any:
    """A dataset column's value as JSON can hold it (an output record is JSON): dates as ISO
    text, bytes as ``base64:...``, a ``Decimal`` and anything else as text, numpy scalars as
    their value, a float that is not a number as ``null``."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, _dt.datetime | _dt.date | _dt.time):
        return value.isoformat()
    if isinstance(value, bytes | bytearray):
        return "base64:" + base64.b64encode(bytes(value)).decode()
    if isinstance(value, Decimal):
        return str(value)
    item = getattr(value, "item", None)  # numpy scalars
    return jsonable(item()) if callable(item) else str(value)


def json_text_value(value: Any) -> Any:
    """A column's value, decoded where it is JSON text of a list or an object (Parquet written by
    ``export --format parquet`` holds nested values so; hermes-fc's ``tools`` is one); any other
    value (or text that is not JSON) as it is."""
    if isinstance(value, str) and value.lstrip()[:1] in ("[", "{"):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def mappings_in(value: Any) -> Iterator[dict[str, Any]]:
    """Every dict inside ``value`` (dicts and lists, nested), in document order."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            yield item
            stack.extend(reversed(list(item.values())))
        elif isinstance(item, list):
            stack.extend(reversed(item))

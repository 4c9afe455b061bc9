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

import json
from typing import Any

import orjson

__all__ = ["dumps_record", "kind_of", "loads"]


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

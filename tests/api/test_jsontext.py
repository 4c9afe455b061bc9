"""``api.jsontext``: JSON read and written fast (orjson), with ``json``'s answers where orjson has
none. The output's records are written by ``dumps_record``: the same text ``json`` writes for
every value a record holds, and ``null`` for a float that is not a number."""

from __future__ import annotations

import dataclasses
import datetime
import json
import math
from decimal import Decimal
from typing import Any

import pytest

from openrouter_probe.api.jsontext import dumps_record, loads
from openrouter_probe.errors import Message


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


@dataclasses.dataclass
class _Point:
    x: int


@pytest.mark.parametrize(
    "value",
    [
        {"id": "r1", "content": 'é 中文 \u2028 \x00 \n \t \\ " /', "n": [1, -2, None, True]},
        {"cost": Decimal("0.000012"), "when": datetime.datetime(2026, 1, 2, 3, 4, 5)},
        {1: "a non-text key"},
        {"big": 2**70},
        {"point": _Point(3)},
        {"message": Message("x", "said {n:d}", n=2)},
    ],
)
def test_a_record_reads_back_as_json_writes_it(value: Any) -> None:
    assert json.loads(dumps_record(value)) == json.loads(_json(value))


def test_floats_read_back_to_the_same_value() -> None:
    values = [0.1, 1e-05, 2.5e300, -0.0, 123456.789]
    assert json.loads(dumps_record(values)) == values


def test_a_float_that_is_not_a_number_is_written_null_not_an_invalid_token() -> None:
    text = dumps_record({"cost": math.nan, "ratio": math.inf})
    assert text == '{"cost":null,"ratio":null}'
    assert loads(text) == {"cost": None, "ratio": None}

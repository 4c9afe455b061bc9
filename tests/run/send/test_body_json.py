"""The JSON text of a request body's parts (``run.send.request.dumps``): the text of
``json.dumps(..., ensure_ascii=False, separators=(",", ":"))``, character for character, so a
row's body is the same bytes whichever encoder wrote it (the response cache keys the body)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from openrouter_probe.run.send import request
from openrouter_probe.run.send.request import dumps


class _Text(str):
    pass


VALUES: list[Any] = [
    "plain",
    _Text("a str of another type"),
    'quotes " and \\ backslashes, \n\t\r\b\f, \x00\x1f\x7f, é, 中文, \u2028, 😀',
    [{"role": "user", "content": "question 1: what is 1 * 41?"}],
    {"temperature": 1.0, "top_p": 0.95, "seed": 2**70, "stop": None, "logprobs": True},
    {"tiny": 1e-05, "big": 1.5e300, "neg": -0.0, "nan": float("nan"), "inf": float("inf")},
    [[], {}, [[[1]]], {"": {"nested": [1, 2.5, "x", False]}}, (1, 2)],
    {1: "int key", 2.5: "float key", False: "bool key", None: "null key"},
]


@pytest.mark.parametrize("c_loop", [True, False], ids=["c-loop", "no-c-loop"])
@pytest.mark.parametrize("value", VALUES)
def test_dumps_writes_what_json_dumps_writes(
    value: Any, c_loop: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not c_loop:  # PyPy, or a CPython built without _json: the encoder's own loop
        monkeypatch.setattr(request, "_ITERENCODE", None)
    assert dumps(value) == json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def test_what_json_cannot_write_is_refused_as_json_refuses_it() -> None:
    with pytest.raises(TypeError, match="not JSON serializable"):
        dumps([{"content": object()}])

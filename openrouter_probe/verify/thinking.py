"""Whether a check thinks, and the room its answers get past the reasoning.

``verify --thinking`` (``job``, ``on``, ``off``) sets the ``reasoning`` block of both arms; with
thinking, each request's ``max_tokens`` grows by a reasoning room: the reasoning budget sent, else
what a pilot measured, else ``DEFAULT_ROOM`` until one has run (``docs/verify.md``, "Thinking in
both arms").
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from openrouter_probe.errors import OptionError
from openrouter_probe.rules.sampling import sampling_advice

__all__ = [
    "DEFAULT_ROOM",
    "PILOT_MARGIN",
    "PILOT_MAX_TOKENS",
    "THINKINGS",
    "Thinking",
    "room_from_pilot",
    "thinking_for",
]

#: ``verify --thinking``: the job's own rule, on, off.
THINKINGS = ("job", "on", "off")
#: Reasoning room (tokens) before a pilot has measured the model's reasoning.
DEFAULT_ROOM = 2048
#: The pilot's longest reasoning times this is the room (a reasoning length is heavy-tailed).
PILOT_MARGIN = 3.0
#: The pilot's ``max_tokens`` (or the reference's own limit, when lower).
PILOT_MAX_TOKENS = 8192

_OFF: dict[str, Any] = {"effort": "none"}
_ON: dict[str, Any] = {"enabled": True}


@dataclass(frozen=True)
class Thinking:
    """What the check sends for reasoning, whether it thinks, its reasoning room and why.

    ``reasoning`` is the block every request carries (empty: none is sent, the model's default);
    ``room`` the tokens added to each request's ``max_tokens`` (0 without thinking); ``said`` and
    ``room_said`` the plan's words for them."""

    reasoning: Mapping[str, Any]
    on: bool
    room: int
    said: str
    room_said: str
    #: The room is ``DEFAULT_ROOM``, standing in until a pilot measures the reasoning.
    provisional: bool = False

    def lines(self) -> list[str]:
        """The plan's lines: what is sent, the room, and the text compared."""
        if not self.on:
            return [f"thinking: {self.said}, both arms; the answers are compared"]
        return [
            f"thinking: {self.said}, both arms; each request's max_tokens grows by a reasoning "
            f"room of {self.room} tokens ({self.room_said})",
            "compared: the answer text (message content), the reasoning apart; an answer cut "
            "at max_tokens is counted, and a sample with an empty answer is not a sample",
        ]


def _off(reasoning: Mapping[str, Any]) -> bool:
    return reasoning.get("effort") == "none" or reasoning.get("enabled") is False


def _budget(reasoning: Mapping[str, Any]) -> int | None:
    value = reasoning.get("max_tokens")
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def thinking_for(
    model: str,
    thinking: str | Thinking | None = None,
    *,
    reasoning: Mapping[str, Any] | None = None,
) -> Thinking:
    """The thinking of a check of ``model``: ``thinking`` (``job``, ``on``, ``off``) or, when
    ``None``, the ``reasoning`` block as given (default ``{"effort": "none"}``). A ``reasoning``
    block with ``max_tokens`` sets the room; else ``DEFAULT_ROOM`` stands in until a pilot
    measures it (``verify.run`` replaces it). A ``Thinking`` is returned as it is."""
    if isinstance(thinking, Thinking):
        return thinking
    if thinking is not None and thinking not in THINKINGS:
        raise OptionError("{thinking=}: must be one of " + ", ".join(THINKINGS), thinking=thinking)
    if thinking is not None and reasoning is not None:
        raise OptionError(
            "give {thinking} or {reasoning}, not both", thinking=thinking, reasoning=reasoning
        )
    advice = sampling_advice(model)
    if thinking == "off" or (thinking is None and (reasoning is None or _off(reasoning))):
        block = dict(_OFF if reasoning is None else reasoning)
        return Thinking(block, False, 0, f"off (reasoning {_said(block)})", "")
    if thinking == "on":
        block, said = dict(_ON), "on (reasoning {...})"
    elif thinking == "job" and advice is not None:
        block = dict(_ON)
        said = f"on, as the job runs {model} (it thinks by default; {advice.source})"
    elif thinking == "job":
        block, said = {}, f"{model}'s own default (no reasoning sent; no card known for it)"
    else:
        assert reasoning is not None
        block, said = dict(reasoning), "on (reasoning {...})"
    said = said.replace("{...}", _said(block))
    budget = _budget(block)
    if budget is not None:
        return Thinking(
            block, True, budget, said, "the reasoning budget sent, reasoning.max_tokens"
        )
    return Thinking(
        block,
        True,
        DEFAULT_ROOM,
        said,
        "a default until the pilot, a few requests to the reference sent first under the same "
        "cap, measures the model's reasoning",
        provisional=True,
    )


def room_from_pilot(reasoning_tokens: list[int], *, ceiling: int) -> int:
    """The reasoning room from a pilot's reasoning lengths: the longest times ``PILOT_MARGIN``
    (at least 256, at most ``ceiling``)."""
    longest = max(reasoning_tokens, default=0)
    return min(ceiling, max(256, math.ceil(longest * PILOT_MARGIN)))


def _said(block: Mapping[str, Any]) -> str:
    if not block:
        return "not sent"
    return ", ".join(
        f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in block.items()
    )

"""One response to one pinned request, as the check reads it (from a chat completion body or from
a line of the generator's output, through one translation): nothing here judges or sends.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["Observation", "ToolCall", "positions_of"]


@dataclass(frozen=True)
class ToolCall:
    """A tool call as returned: the function name and its arguments (parsed; ``None`` when the
    ``arguments`` string is not a JSON object)."""

    name: str
    arguments: dict[str, Any] | None
    raw_arguments: str


@dataclass(frozen=True)
class Observation:
    """One response to one item on one pinned endpoint.

    ``first_top_logprobs`` maps the top-k tokens at the first generated position to their logprobs
    (OpenAI's ``logprobs.content[0].top_logprobs``); ``tokens`` is the generated content token by
    token (``logprobs.content[].token``). Both are ``None`` when the response carried no logprobs.
    ``model`` is the permaslug that served it (a version change shows there).
    """

    endpoint: str
    item_id: str
    provider: str | None = None
    content: str | None = None
    finish_reason: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    first_top_logprobs: dict[str, float] | None = None
    tokens: tuple[str, ...] | None = None
    #: Every generated position's top-k ``{token: logprob}`` (``positions_of``).
    top_logprobs: tuple[dict[str, float], ...] | None = None
    model: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    reasoning_tokens: int = 0
    cost_usd: float | None = None
    error: str | None = None
    #: Which run of the endpoint this is (1 for all but the reference's repeats).
    repeat: int = 1

    @classmethod
    def from_completion(cls, endpoint: str, item_id: str, body: Mapping[str, Any]) -> Observation:
        """Read a chat completion body (as OpenRouter returns it) pinned to ``endpoint``.

        The body is mapped onto the generator's output-line fields, so both readers share one
        translation (``from_output_line``).
        """
        choices = body.get("choices") or [{}]
        choice = choices[0] if isinstance(choices[0], Mapping) else {}
        message = choice.get("message") or {}
        row = {
            "provider": body.get("provider"),
            "content": message.get("content"),
            "finish_reason": choice.get("finish_reason"),
            "tool_calls": message.get("tool_calls"),
            "logprobs": choice.get("logprobs"),
            "model": body.get("model"),
            "usage": body.get("usage"),
            "error": body.get("error") or choice.get("error"),
        }
        return cls.from_output_line(row, endpoint=endpoint, item_id=item_id)

    @classmethod
    def from_output_line(
        cls, row: Mapping[str, Any], *, endpoint: str, item_id: str, repeat: int = 1
    ) -> Observation:
        """Read a generator output line (``provider``, ``content``, ``finish_reason``, ``usage``,
        ``cost_usd``, ``error``; ``tool_calls`` and ``logprobs`` when the generator kept them)."""
        usage = row.get("usage") or {}
        return cls(
            repeat=repeat,
            endpoint=endpoint,
            item_id=item_id,
            provider=row.get("provider"),
            content=row.get("content"),
            finish_reason=row.get("finish_reason"),
            tool_calls=_tool_calls(row.get("tool_calls")),
            first_top_logprobs=_first_top(row.get("logprobs")),
            tokens=_tokens(row.get("logprobs")),
            top_logprobs=positions_of(row.get("logprobs")),
            model=row.get("model"),
            prompt_tokens=_count(usage.get("prompt_tokens")),
            completion_tokens=_count(usage.get("completion_tokens")),
            reasoning_tokens=_count(
                (usage.get("completion_tokens_details") or {}).get("reasoning_tokens")
            ),
            cost_usd=_number(row["cost_usd"] if "cost_usd" in row else usage.get("cost")),
            error=_error_text(row.get("error")),
        )

    @property
    def failed(self) -> bool:
        return self.error is not None or self.finish_reason == "error"


def _number(value: Any) -> float | None:
    """A float from a JSON number or numeric string; ``None`` for anything else."""
    if isinstance(value, bool) or value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _count(value: Any) -> int:
    number = _number(value)
    return 0 if number is None else int(number)


def _error_text(error: Any) -> str | None:
    if not error:
        return None
    if isinstance(error, Mapping):
        return str(error.get("message") or error)
    return str(error)


def _tool_calls(raw: Any) -> tuple[ToolCall, ...]:
    calls = []
    for entry in raw or ():
        function = entry.get("function") if isinstance(entry, Mapping) else None
        if not isinstance(function, Mapping):
            continue
        text = function.get("arguments")
        text = text if isinstance(text, str) else json.dumps(text)
        try:
            parsed = json.loads(text)
        except (json.JSONDecodeError, TypeError):
            parsed = None
        calls.append(
            ToolCall(
                str(function.get("name", "")), parsed if isinstance(parsed, dict) else None, text
            )
        )
    return tuple(calls)


def _content_entries(logprobs: Any) -> list[Any]:
    if not isinstance(logprobs, Mapping):
        return []
    content = logprobs.get("content")
    return list(content) if isinstance(content, list) else []


def _first_top(logprobs: Any) -> dict[str, float] | None:
    entries = _content_entries(logprobs)
    top = entries[0].get("top_logprobs") if entries and isinstance(entries[0], Mapping) else None
    return (_top_of(top) or None) if isinstance(top, list) else None


def _tokens(logprobs: Any) -> tuple[str, ...] | None:
    entries = _content_entries(logprobs)
    if not entries:
        return None
    return tuple(str(e.get("token", "")) for e in entries if isinstance(e, Mapping))


def positions_of(logprobs: Any) -> tuple[dict[str, float], ...] | None:
    """Each generated position's top-k ``{token: logprob}`` from ``choices[0].logprobs``
    (``None`` without logprobs; a position without ``top_logprobs`` maps its own token)."""
    out = []
    for entry in _content_entries(logprobs):
        if isinstance(entry, Mapping):
            top = entry.get("top_logprobs")
            out.append(_top_of(top if isinstance(top, list) and top else [entry]))
    return tuple(out) or None


def _top_of(listed: list[Any]) -> dict[str, float]:
    """``{token: logprob}`` of one position's ``top_logprobs`` list (entries without a string
    token or a finite logprob left out; a duplicate token keeps its larger logprob)."""
    position: dict[str, float] = {}
    for t in listed:
        if not isinstance(t, Mapping) or not isinstance(t.get("token"), str):
            continue
        lp = _number(t.get("logprob"))
        if lp is not None:
            position[t["token"]] = max(lp, position.get(t["token"], -math.inf))
    return position

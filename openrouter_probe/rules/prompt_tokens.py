"""A request's prompt tokens: the estimate the fit check, the verify planner and the fake's bill
share (``estimate_prompt_tokens``), and the upper bound the spend cap reserves and verify's worst
case prices (``prompt_tokens_bound``: every byte sent plus a template allowance; a BPE token is at
least a byte, whatever the tokenizer).

The estimate: 3, plus 3 a message and one per 4 characters of what the template renders of it (its
text, a tool result's, reasoning sent back, the JSON of its ``tool_calls``), plus one per 4
characters of the JSON of ``tools``, ``tool_choice`` and ``response_format``. Not a tokenizer:
stable, cheap, close for English (the K2.5 capture's 27- and 20-character messages: 21, as
reported). Images are not counted.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["PROMPT_FIELDS", "estimate_prompt_tokens", "prompt_tokens_bound"]

#: Request fields besides ``messages`` that the model reads as prompt (a tool's schema is prompt).
PROMPT_FIELDS = ("tools", "tool_choice", "response_format")


def estimate_prompt_tokens(messages: Iterable[Any], params: Mapping[str, Any] | None = None) -> int:
    """The prompt tokens of a request of ``messages`` and body ``params`` (the module's count)."""
    total = 3
    for message in messages:
        total += 3
        if not isinstance(message, dict):
            continue
        total += _text_tokens(message.get("content"))
        total += _text_tokens(message.get("reasoning") or message.get("reasoning_details"))
        if message.get("tool_calls"):
            total += _json_tokens(message["tool_calls"])
    for key in PROMPT_FIELDS:
        if params is not None and params.get(key) is not None:
            total += _json_tokens(params[key])
    return total


def prompt_tokens_bound(prompt_bytes: int, messages: int) -> int:
    """Return an upper bound on a prompt's tokens: its bytes plus what a chat template may add
    (role markers, separators), 16 tokens a message and 32 a request."""
    return prompt_bytes + 16 * messages + 32


def _text_tokens(text: Any) -> int:
    """A string's tokens, or a list of parts' (``text``, a reasoning summary's ``summary``)."""
    if isinstance(text, list):
        said = (p.get("text", p.get("summary")) for p in text if isinstance(p, dict))
        return sum(math.ceil(len(s) / 4) for s in said if isinstance(s, str))
    return math.ceil(len(text) / 4) if isinstance(text, str) else 0


def _json_tokens(value: Any) -> int:
    return math.ceil(len(json.dumps(value, separators=(",", ":"))) / 4)

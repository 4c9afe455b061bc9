"""A request's prompt tokens: estimated (``estimate_prompt_tokens``), the one count the fit check,
the verify planner and the fake server's bill share; and bounded (``prompt_tokens_bound``), what
the spend cap reserves and the verify planner's worst case.

3 a message plus one per 4 characters of its text (string content, the text of content parts, a
tool result's content), of an assistant turn's reasoning sent back (``reasoning``, else the text
of its ``reasoning_details``) and of the JSON of its ``tool_calls``, plus 3 for the reply's
priming, plus one per 4 characters of the JSON of the request's ``tools``, ``tool_choice`` and
``response_format``: everything the chat template renders is billed as prompt. Not a real
tokenizer: stable, cheap and close to real counts for English (the K2.5 capture with a 27- and a
20-character message reports 21 prompt tokens; this gives 21). Images are not counted here.

The bound is every byte sent plus a chat-template allowance per message and per request: a BPE
token is never shorter than one byte, so it holds whatever the tokenizer.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["PROMPT_FIELDS", "estimate_prompt_tokens", "prompt_tokens_bound"]

#: Request fields besides ``messages`` that the model reads as prompt (a tool's schema is prompt).
PROMPT_FIELDS = ("tools", "tool_choice", "response_format")
#: Tokens a chat template may add per message (role markers, separators), and per request.
TEMPLATE_TOKENS_PER_MESSAGE = 16
TEMPLATE_TOKENS_PER_REQUEST = 32


def estimate_prompt_tokens(messages: Iterable[Any], params: Mapping[str, Any] | None = None) -> int:
    """The prompt tokens of a request of ``messages`` and body ``params`` (the module's count)."""
    total = 3
    for message in messages:
        total += 3
        if not isinstance(message, dict):
            continue
        total += _text_tokens(message.get("content"))
        reasoning = message.get("reasoning")
        if not isinstance(reasoning, str):
            reasoning = message.get("reasoning_details")
        total += _text_tokens(reasoning)
        if message.get("tool_calls"):
            total += _json_tokens(message["tool_calls"])
    for key in PROMPT_FIELDS:
        value = params.get(key) if params is not None else None
        if value is not None:
            total += _json_tokens(value)
    return total


def prompt_tokens_bound(prompt_bytes: int, messages: int) -> int:
    """Return an upper bound on a prompt's tokens: its bytes plus the template's allowance."""
    return prompt_bytes + TEMPLATE_TOKENS_PER_MESSAGE * messages + TEMPLATE_TOKENS_PER_REQUEST


def _text_tokens(text: Any) -> int:
    """A string's tokens, or a list of parts' (a content part's ``text``, a reasoning detail's
    ``text`` or ``summary``)."""
    if isinstance(text, str):
        return math.ceil(len(text) / 4)
    if not isinstance(text, list):
        return 0
    total = 0
    for part in text:
        if isinstance(part, dict):
            said = part.get("text", part.get("summary"))
            total += math.ceil(len(said) / 4) if isinstance(said, str) else 0
    return total


def _json_tokens(value: Any) -> int:
    return math.ceil(len(json.dumps(value, separators=(",", ":"))) / 4)

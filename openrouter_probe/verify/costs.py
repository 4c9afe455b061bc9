"""What a check's requests cost: prompt tokens counted the planner's way, and prices applied.

Worst case: a prompt counted at one token per UTF-8 byte plus a chat-template allowance (a BPE
token is at least one byte, so this bounds the real count), every request spending its
``max_tokens`` at the dearer of the output and reasoning prices. Expected: about four
characters a token. ``plan`` and ``sampled_arm`` price their requests here.
"""

from __future__ import annotations

import json
import math
from decimal import Decimal

from openrouter_probe.api.schema import Endpoint
from openrouter_probe.verify.suites import Item

__all__ = ["prompt_tokens", "request_cost"]

#: Chat-template tokens allowed per message and per request in the worst-case prompt count.
_TEMPLATE_TOKENS_PER_MESSAGE = 8
_TEMPLATE_TOKENS_PER_REQUEST = 16


def prompt_tokens(item: Item) -> tuple[int, int]:
    """Return (expected, worst-case) prompt tokens of ``item``: about 4 characters a token, and one
    token per UTF-8 byte plus the template allowance (tools included: they are sent as text)."""
    text = json.dumps(list(item.messages), ensure_ascii=False)
    if item.tools:
        text += json.dumps(list(item.tools), ensure_ascii=False)
    overhead = _TEMPLATE_TOKENS_PER_REQUEST + _TEMPLATE_TOKENS_PER_MESSAGE * len(item.messages)
    expected = math.ceil(len(text) / 4) + overhead // 2
    return expected, len(text.encode()) + overhead


def request_cost(
    n_in: int, n_out: int, requests: int, endpoint: Endpoint, *, worst: bool
) -> Decimal | None:
    """What ``requests`` requests of ``n_in`` prompt and ``n_out`` output tokens in all cost at
    ``endpoint``'s prices (``worst``: output at the dearer of the output and reasoning
    prices); ``None`` when it lists no price."""
    pricing = endpoint.pricing
    p_in = pricing.usd_per_unit("prompt")
    p_out = pricing.usd_per_unit("completion")
    if p_in is None or p_out is None:
        return None
    if worst:
        p_reason = pricing.usd_per_unit("internal_reasoning")
        p_out = max(p_out, p_reason) if p_reason is not None else p_out
    per_request = pricing.usd_per_unit("request") or Decimal(0)
    return p_in * n_in + p_out * n_out + per_request * requests

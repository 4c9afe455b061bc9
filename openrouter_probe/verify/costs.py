"""What a check's requests cost: prompt tokens counted the planner's way, and prices applied
(worst case at the spend cap's bound, expected at ``rules.prompt_tokens``' estimate;
``docs/verify.md``, "Cost first"). ``endpoint_plan`` is one endpoint's share of the check.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import NamedTuple

from openrouter_probe.api.schema import Endpoint
from openrouter_probe.rules.prompt_tokens import estimate_prompt_tokens, prompt_tokens_bound
from openrouter_probe.verify.suites import Item

__all__ = ["EndpointPlan", "Tokens", "endpoint_plan", "prompt_tokens", "request_cost", "tokens_of"]


def prompt_tokens(item: Item) -> tuple[int, int]:
    """Return (expected, worst-case) prompt tokens of ``item``: ``rules.prompt_tokens``' estimate
    and bound (the spend cap's: one token per UTF-8 byte, tools included, plus the template's)."""
    text = json.dumps(list(item.messages), ensure_ascii=False)
    if item.tools:
        text += json.dumps(list(item.tools), ensure_ascii=False)
    expected = estimate_prompt_tokens(item.messages, {"tools": list(item.tools) or None})
    return expected, prompt_tokens_bound(len(text.encode()), len(item.messages))


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


class Tokens(NamedTuple):
    """The tokens the check sends to each endpoint, summed over its items."""

    in_expected: int
    in_worst: int
    out_expected: int
    out_worst: int
    requests: int

    def times(self, repeats: int) -> Tokens:
        """The reference's share: every item sent ``repeats`` times."""
        return Tokens(*(value * repeats for value in self))


@dataclass(frozen=True)
class EndpointPlan:
    """One endpoint's share of the check: requests, tokens, prices, costs and what it is sent."""

    tag: str
    provider_name: str
    quantization: str | None
    role: str  # "reference" | "compared"
    tokens: Tokens
    price_in_per_m: Decimal | None
    price_out_per_m: Decimal | None
    expected_usd: Decimal | None
    worst_case_usd: Decimal | None
    seed_sent: bool
    logprobs_sent: bool
    warnings: tuple[str, ...] = ()

    @property
    def requests(self) -> int:
        return self.tokens.requests


def endpoint_plan(
    tag: str, endpoint: Endpoint, *, ref: str, totals: Tokens, names: list[str], top: int
) -> EndpointPlan:
    """What the check sends to one pinned endpoint, what it may cost, and what to watch for."""
    supported = set(endpoint.supported_parameters)
    warnings = [
        f"does not list {name}: it may ignore it, so its answers may differ for that reason "
        "rather than precision"
        for name in ("temperature", "reasoning", "seed")
        if name not in supported
    ]
    if names.count(endpoint.provider_name) > 1:
        warnings.append(
            f"another endpoint is also served by {endpoint.provider_name!r}: a leak to it "
            "cannot be told from the response's provider"
        )
    n = totals.requests
    return EndpointPlan(
        tag=tag,
        provider_name=endpoint.provider_name,
        quantization=endpoint.quantization,
        role="reference" if tag == ref else "compared",
        tokens=totals,
        price_in_per_m=endpoint.pricing.usd_per_m("prompt"),
        price_out_per_m=endpoint.pricing.usd_per_m("completion"),
        expected_usd=request_cost(
            totals.in_expected, totals.out_expected, n, endpoint, worst=False
        ),
        worst_case_usd=request_cost(totals.in_worst, totals.out_worst, n, endpoint, worst=True),
        seed_sent="seed" in supported,
        logprobs_sent=top > 0 and {"logprobs", "top_logprobs"} <= supported,
        warnings=tuple(warnings),
    )


def tokens_of(items: Sequence[Item], *, reasoning_off: bool, room: int = 0) -> Tokens:
    """The tokens one endpoint is sent and may answer, summed over ``items`` (each request's
    ``max_tokens`` grown by the reasoning ``room``)."""
    tokens = [prompt_tokens(item) for item in items]
    out_worst = sum(item.max_tokens + room for item in items)
    out_expected = (
        sum(item.expected_output_tokens for item in items) if reasoning_off else out_worst
    )
    return Tokens(
        sum(t[0] for t in tokens), sum(t[1] for t in tokens), out_expected, out_worst, len(items)
    )

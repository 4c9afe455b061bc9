"""What a fake generation costs: the price that applies, 402s and the credit (its prompt tokens:
``rules.prompt_tokens``).

Prices come from the serving endpoint through the schema's helpers (``Pricing.usd_per_unit``, which
applies the endpoint's ``discount``); ``prices_at`` applies the conditional prices
(``pricing.overrides``) that hold for a request. Reasoning tokens are billed as output tokens at the
reasoning price (``internal_reasoning`` where listed, else ``completion``), as OpenRouter does.
Amounts are ``Decimal`` USD until they go into a body.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from openrouter_probe.api.schema import Endpoint, Pricing
from openrouter_probe.rules.pricing import effective_pricing
from openrouter_probe.rules.server_tools import (
    ADVISOR,
    RESULT_USD,
    WEB_SEARCH,
    ServerTools,
    server_tools,
)

__all__ = [
    "Charge",
    "Credit",
    "UnitPrices",
    "advised",
    "affordable_tokens",
    "charge",
    "output_cap",
    "prices_at",
    "searched",
    "unit_prices",
    "worst_case_usd",
]

_ZERO = Decimal(0)


@dataclass(frozen=True)
class Charge:
    """The cost of one generation in USD, split as ``usage.cost_details`` reports it.

    ``search_usd``: the web search server tool's fee (``searches`` searches, ``search_results``
    results), in ``usage.cost`` as OpenRouter bills it. ``byok``: the provider billed the user's
    own key for the tokens (``upstream_inference_cost``); OpenRouter's part (``cost``) is then its
    tools' fees only (the BYOK fee is waived for the first requests of a month, OPENROUTER.md 19).
    ``total_usd`` is what the user pays in all, both parts."""

    prompt_tokens: int
    completion_tokens: int
    reasoning_tokens: int
    prompt_usd: Decimal
    completion_usd: Decimal
    search_usd: Decimal = _ZERO
    searches: int = 0
    search_results: int = 0
    byok: bool = False
    advisor_usd: Decimal = _ZERO  # the advisor server tool's tokens, at its model's prices

    @property
    def tokens_usd(self) -> Decimal:
        return self.prompt_usd + self.completion_usd

    @property
    def total_usd(self) -> Decimal:
        return self.tokens_usd + self.search_usd + self.advisor_usd

    @property
    def cost_usd(self) -> Decimal:
        """``usage.cost``: what OpenRouter charged (its tools only, for a BYOK answer)."""
        return self.search_usd + self.advisor_usd if self.byok else self.total_usd

    @property
    def upstream_usd(self) -> Decimal:
        """``cost_details.upstream_inference_cost``: the provider's tokens alone where a BYOK key
        or a server tool makes ``cost`` differ (2026-07: ``cost`` 0.0160614 with an advisor,
        upstream 0.0001764), else ``cost`` (7.2)."""
        if self.byok or self.search_usd or self.advisor_usd:
            return self.tokens_usd
        return self.total_usd


@dataclass(frozen=True)
class UnitPrices:
    """USD per token (per request for ``request``) with the discount applied; 0 where unlisted."""

    prompt: Decimal
    completion: Decimal
    reasoning: Decimal
    request: Decimal

    @property
    def output_max(self) -> Decimal:
        """The dearer of the output and reasoning prices: what a worst case is priced at."""
        return max(self.completion, self.reasoning)


# Parsing price strings is the costly part of billing; an endpoint's base Pricing object lives as
# long as the server, so its unit prices are computed once (the object is kept to rule out a reused
# id). Prices after overrides are new objects and are computed each time.
_UNIT_CACHE: dict[int, tuple[Pricing, UnitPrices]] = {}


def prices_at(endpoint: Endpoint, *, prompt_tokens: int, at: datetime) -> UnitPrices:
    """The unit prices of a request to ``endpoint``: its ``overrides`` that hold for the request
    applied (``rules.pricing.effective_pricing``); without overrides the endpoint's own, cached
    (the fast path of almost every request)."""
    pricing = endpoint.pricing
    if pricing.overrides:
        pricing = effective_pricing(pricing, prompt_tokens=prompt_tokens, at=at)
    return unit_prices(pricing)


def unit_prices(pricing: Pricing) -> UnitPrices:
    """The unit prices of ``pricing`` through the schema's ``Pricing.usd_per_unit`` helper."""
    hit = _UNIT_CACHE.get(id(pricing))
    if hit is not None and hit[0] is pricing:
        return hit[1]
    completion = pricing.usd_per_unit("completion") or _ZERO
    listed = pricing.usd_per_unit("internal_reasoning")
    prices = UnitPrices(
        prompt=pricing.usd_per_unit("prompt") or _ZERO,
        completion=completion,
        reasoning=completion if listed is None else listed,
        request=pricing.usd_per_unit("request") or _ZERO,
    )
    if not pricing.overrides and len(_UNIT_CACHE) < 65536:
        _UNIT_CACHE[id(pricing)] = (pricing, prices)
    return prices


def charge(
    endpoint: Endpoint,
    *,
    prompt_tokens: int,
    completion_tokens: int,
    reasoning_tokens: int,
    at: datetime,
    searches: int = 0,
    search_results: int = 0,
    byok: bool = False,
    advisor_usd: Decimal = _ZERO,
) -> Charge:
    """Price a generation at ``endpoint``'s prices (discount and applicable overrides included).

    ``completion_tokens`` includes ``reasoning_tokens``; reasoning is billed at
    ``internal_reasoning`` where the endpoint lists it, otherwise at the output price.
    ``searches`` web searches that found ``search_results`` results (their tokens are in
    ``prompt_tokens``) cost the endpoint's own ``web_search`` price each where it lists one (its
    native search), else ``rules.server_tools.RESULT_USD`` per result (OpenRouter's engine).
    """
    prices = prices_at(endpoint, prompt_tokens=prompt_tokens, at=at)
    answer = completion_tokens - reasoning_tokens
    native = endpoint.pricing.usd_per_unit("web_search") or _ZERO
    search_usd = native * searches if native > 0 else RESULT_USD * search_results
    return Charge(
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        reasoning_tokens=reasoning_tokens,
        prompt_usd=prices.prompt * prompt_tokens + prices.request,
        completion_usd=prices.completion * answer + prices.reasoning * reasoning_tokens,
        search_usd=search_usd if searches else _ZERO,
        searches=searches,
        search_results=search_results,
        byok=byok,
        advisor_usd=advisor_usd,
    )


#: Prompt tokens one web search result adds (a 2026-08 recording: 8,174 for one search of five).
SEARCH_RESULT_TOKENS = 1_600


def searched(body: Any, endpoint: Endpoint, prompt_tokens: int) -> tuple[int, int, int]:
    """The web searches the ``openrouter:web_search`` server tools of a request ran (each tool
    uses all its ``max_uses``; ``rules.server_tools``), their results, and the prompt tokens the
    results add (never past the endpoint's context): ``(searches, results, tokens)``."""
    tools = body.get("tools") if isinstance(body, dict) else None
    if not isinstance(tools, list) or not any(
        isinstance(t, dict) and t.get("type") == WEB_SEARCH for t in tools
    ):
        return 0, 0, 0
    try:
        used = server_tools(tools)
    except ValueError:  # a tool the client could not bound: the fake searches nothing for it
        used = ServerTools()
    room = max(0, (endpoint.context_length or 0) - prompt_tokens)
    return used.searches, used.results, min(room, used.results * SEARCH_RESULT_TOKENS)


#: The advisor's answer when its tool names no ``max_completion_tokens``.
ADVISOR_TOKENS = 1_024


def advised(body: Any, endpoint: Endpoint, prompt_tokens: int) -> Decimal:
    """What the ``openrouter:advisor`` server tools of a request cost: one consultation each,
    reading the prompt and answering its ``max_completion_tokens`` (default ``ADVISOR_TOKENS``),
    at the serving endpoint's prices (the fake's advisor is the request's own model: OpenRouter's
    fallback when the tool names none). Billed in ``cost``, as OpenRouter does (2026-07)."""
    tools = body.get("tools") if isinstance(body, dict) else None
    total = _ZERO
    prices = None
    for tool in tools if isinstance(tools, list) else ():
        if not isinstance(tool, dict) or tool.get("type") != ADVISOR:
            continue
        raw = tool.get("parameters")
        answer = raw.get("max_completion_tokens") if isinstance(raw, dict) else None
        tokens = answer if isinstance(answer, int) and answer > 0 else ADVISOR_TOKENS
        prices = prices or unit_prices(endpoint.pricing)
        total += prices.prompt * prompt_tokens + prices.output_max * tokens
    return total


def output_cap(max_tokens: int | None, endpoint: Endpoint, prompt_tokens: int) -> int:
    """The output tokens a request may produce: ``max_tokens``, else the endpoint's limit."""
    if max_tokens is not None:
        return max_tokens
    if endpoint.max_completion_tokens:
        return endpoint.max_completion_tokens
    return max(1, (endpoint.context_length or 65536) - prompt_tokens)


def worst_case_usd(
    endpoint: Endpoint, *, prompt_tokens: int, max_tokens: int, at: datetime
) -> Decimal:
    """What a request could cost at most: its prompt plus ``max_tokens`` at the dearer output price."""
    prices = prices_at(endpoint, prompt_tokens=prompt_tokens, at=at)
    return prices.prompt * prompt_tokens + prices.request + prices.output_max * max_tokens


def affordable_tokens(
    endpoint: Endpoint, *, prompt_tokens: int, remaining_usd: Decimal, at: datetime
) -> int:
    """How many output tokens ``remaining_usd`` pays for after the prompt (0 when none)."""
    prices = prices_at(endpoint, prompt_tokens=prompt_tokens, at=at)
    left = remaining_usd - prices.prompt * prompt_tokens - prices.request
    if left <= 0:
        return 0
    if prices.output_max == 0:
        return 2**31 - 1
    return int(left / prices.output_max)


class Credit:
    """The key's credit: a limit (``None`` = unlimited), what was spent and what is reserved.

    A request reserves its worst case before it is served and settles to its real cost after, so
    concurrent requests can never spend past the limit. Every caller runs on the server's one event
    loop and does the check and the reservation with no ``await`` between them, so no lock is needed.
    """

    def __init__(self, limit_usd: Decimal | None) -> None:
        self.limit_usd = limit_usd
        self.spent_usd = _ZERO
        self.reserved_usd = _ZERO

    @property
    def available_usd(self) -> Decimal | None:
        """What a new request may still reserve; ``None`` when there is no limit."""
        if self.limit_usd is None:
            return None
        return self.limit_usd - self.spent_usd - self.reserved_usd

    @property
    def remaining_usd(self) -> Decimal | None:
        """``limit_remaining`` as ``/key`` reports it (reservations are not spending)."""
        return None if self.limit_usd is None else self.limit_usd - self.spent_usd

    def reserve(self, amount_usd: Decimal) -> None:
        self.reserved_usd += amount_usd

    def settle(self, reserved_usd: Decimal, spent_usd: Decimal) -> None:
        self.reserved_usd -= reserved_usd
        self.spent_usd += spent_usd

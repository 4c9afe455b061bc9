"""How OpenRouter ranks the endpoints a ``provider`` block admits (``rules.routing``): the blended
price, the sort keys, the ``preferred_*`` cutoffs, what counts as stable, the fallback chain's
traffic shares and load balancing's 1/price² weights, and what Auto Exacto does with tools.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from openrouter_probe.api.schema import Endpoint
from openrouter_probe.rules.provider_block import NON_PARAMETER_KEYS, ProviderBlock

__all__ = ["RequestParams", "blended_price_usd_per_m", "tool_routing"]


@dataclass(frozen=True)
class RequestParams:
    """What a request sends that routing looks at.

    ``parameters`` are the body keys sent; only request parameters are kept (``tools``,
    ``reasoning``, ``response_format``, ...): keys in ``NON_PARAMETER_KEYS`` (``model``,
    ``messages``, ``stream``, ``provider``, ...) are dropped, so a request body's keys can be passed
    as they are. ``prompt_tokens``/``output_tokens`` are typical counts, used to blend input and
    output prices.
    """

    max_tokens: int | None = None
    parameters: frozenset[str] = frozenset()
    prompt_tokens: int | None = None
    output_tokens: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "parameters", frozenset(self.parameters) - NON_PARAMETER_KEYS)


def blended_price_usd_per_m(
    endpoint: Endpoint, params: RequestParams | None = None
) -> Decimal | None:
    """USD per million tokens of a request mix: input and output prices weighted by token counts
    (1:1 without counts). ``None`` when the endpoint lists no price."""
    p_in = endpoint.pricing.prompt_usd_per_m
    p_out = endpoint.pricing.completion_usd_per_m
    if p_in is None or p_out is None:
        return None
    n_in = Decimal(params.prompt_tokens) if params and params.prompt_tokens is not None else None
    n_out = Decimal(params.output_tokens) if params and params.output_tokens is not None else None
    if n_in is None or n_out is None or (n_in == 0 and n_out == 0):
        return (p_in + p_out) / 2
    return (p_in * n_in + p_out * n_out) / (n_in + n_out)


def price_key(e: Endpoint, params: RequestParams) -> float:
    price = blended_price_usd_per_m(e, params)
    return math.inf if price is None else float(price)


def _throughput_key(e: Endpoint, _: RequestParams) -> float:
    v = getattr(e.throughput_last_30m, "p50", None)
    return math.inf if v is None else -float(v)


def _latency_key(e: Endpoint, _: RequestParams) -> float:
    v = getattr(e.latency_last_30m, "p50", None)
    return math.inf if v is None else float(v)


#: How each sort key ranks an endpoint: lower first, endpoints without the figure last.
_SORT_KEYS: dict[str, Callable[[Endpoint, RequestParams], float]] = {
    "price": price_key,
    "throughput": _throughput_key,
    "latency": _latency_key,
}


def _cutoffs(value: float | dict[str, float] | None) -> dict[str, float]:
    """A ``preferred_*`` value as ``{percentile: cutoff}`` (a bare number applies to p50)."""
    if value is None:
        return {}
    return {"p50": float(value)} if isinstance(value, float | int) else dict(value)


def preferred(block: ProviderBlock, e: Endpoint, params: RequestParams) -> bool:
    """False when ``e`` misses any cutoff of ``preferred_min_throughput`` (tokens/s) or
    ``preferred_max_latency`` (seconds; endpoint latency is in milliseconds), or lacks ``tools``
    for a request that sends tools (OpenRouter prefers tool-capable providers then)."""
    if "tools" in params.parameters and "tools" not in e.supported_parameters:
        return False
    for pct, cut in _cutoffs(block.preferred_min_throughput).items():
        have = getattr(e.throughput_last_30m, pct, None)
        if have is not None and have < cut:
            return False
    for pct, cut_s in _cutoffs(block.preferred_max_latency).items():
        have = getattr(e.latency_last_30m, pct, None)
        if have is not None and have > cut_s * 1000:
            return False
    return True


def is_stable(e: Endpoint) -> bool:
    """No sign of a recent outage: status not negative, not deranked (a provider-page flag)."""
    degraded = e.status is not None and e.status < 0
    return not degraded and not (e.model_extra or {}).get("is_deranked")


def rank(
    endpoints: Sequence[Endpoint], key: str, block: ProviderBlock, params: RequestParams
) -> list[Endpoint]:
    """Order by ``key``, preferred endpoints first, ties by tag."""
    value = _SORT_KEYS[key]
    return sorted(
        endpoints, key=lambda e: (not preferred(block, e, params), value(e, params), e.tag)
    )


def fallback_shares(endpoints: Sequence[Endpoint]) -> list[float]:
    """Expected traffic shares of a fallback chain (``ASSUMPTIONS["fallback_share"]``); an endpoint
    without uptime stats counts as always up; when none is ever up, the first takes everything."""
    ups = [
        1.0 if e.uptime_last_30m is None else min(max(e.uptime_last_30m / 100, 0.0), 1.0)
        for e in endpoints
    ]
    shares = [up * math.prod(1 - before for before in ups[:i]) for i, up in enumerate(ups)]
    total = sum(shares)
    if total > 0:
        return [s / total for s in shares]
    return [float(i == 0) for i in range(len(shares))]


def balance_weights(stable: Sequence[Endpoint], params: RequestParams) -> dict[str, float]:
    """Load-balancing shares of the stable endpoints: 1/price², normalized to sum to 1."""
    prices = {e.tag: blended_price_usd_per_m(e, params) for e in stable}
    free = [tag for tag, p in prices.items() if p == 0]
    if free:
        # 1/price² is unbounded for a free endpoint: the free ones share the traffic evenly.
        return {tag: 1 / len(free) if tag in free else 0.0 for tag in prices}
    inverse = {tag: float(p) ** -2 for tag, p in prices.items() if p is not None}
    if not inverse:
        return {tag: 1 / len(prices) for tag in prices}  # nothing priced: spread evenly
    total = sum(inverse.values())
    return {tag: inverse.get(tag, 0.0) / total for tag in prices}


def tool_routing(block: ProviderBlock | Mapping[str, Any] | None) -> str:
    """What OpenRouter does with a request that carries ``tools`` under ``block`` (Auto Exacto,
    docs ``guides/routing/auto-exacto``), in one sentence, for ``policy explain``."""
    blk = block if isinstance(block, ProviderBlock) else ProviderBlock.parse(block or {})
    key = blk.sort_key
    if blk.order:
        return "requests with tools follow the order list like any other (explicit order wins)"
    if key == "price":
        return "requests with tools keep price order (sort: price turns Auto Exacto off)"
    if key == "exacto":
        return (
            "every request, with tools or not, is ordered by Auto Exacto (throughput, tool-call "
            "error rate, benchmarks), not by price"
        )
    if key is not None:
        return f"requests with tools keep the sort by {key}"
    return (
        "requests with tools are ordered by Auto Exacto (throughput, tool-call error rate, "
        "benchmarks), not by price: add sort: price to keep price order"
    )

"""The one model of OpenRouter's provider routing (https://openrouter.ai/docs/features/provider-routing).

Given a ``provider`` block, a snapshot's endpoints and the request's parameters, ``route`` says which
endpoints are admitted, in what order or with what weights, and why every other endpoint is
excluded. The policy compiler, the budget, the fake server and the audit all ask this module; nothing
else decides "which endpoints does this block admit". ``rules.ranking`` holds how the admitted ones
are ranked and weighed.

The documented behaviour it follows (slugs and service tiers, the hard filters, ``order`` and its
fallbacks, ``sort``, load balancing by 1/price², Auto Exacto, ``preferred_*``) is listed in
docs/policy.md ("The routing model and its assumptions").

Where OpenRouter does not document its behaviour, the model states what it assumes in
``ASSUMPTIONS``; each decision lists the ones it relied on in ``RouteDecision.notes`` and ``policy
explain`` prints them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Any, Literal

from openrouter_probe.api.schema import Endpoint
from openrouter_probe.rules.provider_block import (
    MAX_PRICE_UNITS,
    REQUEST_PARAMETERS,
    ProviderBlock,
    SortKey,
)
from openrouter_probe.rules.ranking import (
    RequestParams,
    balance_weights,
    fallback_shares,
    is_stable,
    preferred,
    price_key,
    rank,
)

__all__ = [
    "ASSUMPTIONS",
    "BATCH_PROVIDER_KEYS",
    "SERVICE_TIER_VARIANTS",
    "Candidate",
    "Exclusion",
    "RequestParams",
    "RouteDecision",
    "matches",
    "route",
    "route_batch",
    "service_tier",
]

#: Tag suffixes that mark a service-tier endpoint in data without a ``service_tier`` field
#: (OpenRouter docs: service tiers must be named; a base slug does not match them).
SERVICE_TIER_VARIANTS = frozenset({"priority", "flex"})

#: Undocumented points and what this model assumes about them.
ASSUMPTIONS: dict[str, str] = {
    "case": "Slugs are matched case-sensitively against lowercase tags: a display name or a "
    "mixed-case slug matches nothing (third-party evidence: OpenRouter silently drops them).",
    "quantization_exact": "quantizations matches the tag exactly: 'fp4' does not admit 'nvfp4' or "
    "'mxfp4' endpoints, and an endpoint with a null quantization is excluded by any list.",
    "stable": "'Recent outage' is read from status: an endpoint with status < 0 (observed on "
    "degraded endpoints), or flagged deranked on the provider page, is a fallback under load "
    "balancing, not a first choice.",
    "balance_price": "Load balancing weighs every stable admitted endpoint by 1/price², the price "
    "being the request's blended USD per million tokens (input and output mixed by the request's "
    "token counts; 1:1 when unknown).",
    "sort_price": "sort 'price' orders by the same blended price; ties keep tag order.",
    "missing_stats": "Endpoints without throughput or latency stats sort last for those keys.",
    "fallback_share": "Ordered and sorted routes send each request to the first candidate and fall "
    "back on failure: the expected traffic share of candidate i is uptime_i × Π(1 − uptime_j) "
    "over earlier j (30-minute uptime), normalized to sum to 1; fallbacks after an order list "
    "are ranked by price.",
    "data_policy": "data_collection, zdr and enforce_distillable_text are enforced by OpenRouter "
    "from account data the endpoints list does not carry: the model cannot evaluate them.",
    "auto_exacto": "Auto Exacto orders requests with tools (and every request under sort "
    "'exacto') by throughput, tool-call error rate and benchmark scores: the endpoints list "
    "carries only throughput, so the model sorts by it (tool-capable endpoints first) and "
    "price does not decide; a sort by throughput or latency is taken as kept.",
    "default_estimate": "OpenRouter's default routing now also weighs effective price (cache "
    "hits, token mix), throughput, time to first token and rate limits from recent traffic: "
    "1/price² is what its docs said before, so a blended price under it is an estimate.",
    "max_price_audio": "max_price.audio is documented only as 'USD per audio unit': it is compared "
    "with the endpoint's audio price as listed (USD per audio input token), not per million.",
    "unknown_parameter": "A body key that is neither a known request parameter nor a known "
    "routing key counts as a parameter under require_parameters: an endpoint must list it.",
}


@dataclass(frozen=True)
class Candidate:
    """An admitted endpoint: its 1-based position and its expected share of the traffic."""

    endpoint: Endpoint
    position: int
    weight: float
    role: Literal["ordered", "sorted", "balanced", "fallback"]
    matched_by: str | None = None


@dataclass(frozen=True)
class Exclusion:
    """An endpoint the block does not admit: a reason code and a sentence."""

    endpoint: Endpoint
    reason: str
    detail: str


@dataclass(frozen=True)
class RouteDecision:
    """What a provider block admits on a set of endpoints, in the order OpenRouter would try them.

    ``mode`` is how the order arises (an explicit ``order``, a ``sort``, or OpenRouter's load
    balancing); ``candidates`` are the admitted endpoints with their position and expected share
    of the traffic; ``excluded`` the others, each with a reason; ``notes`` the assumptions that
    applied.
    """

    mode: Literal["ordered", "sorted", "load_balanced", "exacto"]
    candidates: tuple[Candidate, ...]
    excluded: tuple[Exclusion, ...]
    notes: tuple[str, ...] = field(default=())

    @property
    def admitted(self) -> list[Endpoint]:
        """The admitted endpoints, in routing order."""
        return [c.endpoint for c in self.candidates]

    @property
    def admitted_tags(self) -> list[str]:
        """The admitted endpoints' tags, in routing order."""
        return [c.endpoint.tag for c in self.candidates]

    @property
    def weights(self) -> dict[str, float]:
        """Each admitted tag's expected share of the traffic."""
        return {c.endpoint.tag: c.weight for c in self.candidates}

    def candidate(self, tag: str) -> Candidate | None:
        """Return the admitted endpoint with this exact tag, or ``None``."""
        return next((c for c in self.candidates if c.endpoint.tag == tag), None)

    def exclusion(self, tag: str) -> Exclusion | None:
        """Return why the endpoint with this exact tag is not admitted, or ``None``."""
        return next((x for x in self.excluded if x.endpoint.tag == tag), None)


# -- matching -------------------------------------------------------------------------------------


def service_tier(endpoint: Endpoint) -> str | None:
    """The service tier ``endpoint`` sells (``flex``, ``priority``, ...), ``None`` for a standard one.

    The endpoint's ``service_tier`` field decides where the data has it (so ``fireworks/fast`` may be
    a tier and ``openai/priority`` may not); older data without the field falls back to the tag's
    ``/priority`` or ``/flex`` suffix.
    """
    if "service_tier" in endpoint.model_fields_set:  # a declared field or an extra key alike
        declared = getattr(endpoint, "service_tier")  # noqa: B009 (an extra key or a field)
        if declared is None or isinstance(declared, str):
            return declared or None
    return endpoint.variant if endpoint.variant in SERVICE_TIER_VARIANTS else None


def matches(entry: str, endpoint: Endpoint) -> bool:
    """Whether an ``order``/``only``/``ignore`` entry selects ``endpoint``."""
    if entry == endpoint.tag:
        return True
    # a base slug never holds "/": an entry that does can only equal the whole tag
    return entry == endpoint.tag.partition("/")[0] and service_tier(endpoint) is None


def _first_match(entries: Sequence[str] | None, endpoint: Endpoint) -> str | None:
    return next((e for e in entries or () if matches(e, endpoint)), None)


def _listed_price(e: Endpoint, key: str) -> Decimal | None:
    """The endpoint's price for a ``max_price`` key, in that key's unit (``MAX_PRICE_UNITS``)."""
    per_m = MAX_PRICE_UNITS[key] == "/M tokens"
    return e.pricing.usd_per_m(key) if per_m else e.pricing.usd_per_unit(key)


def _exclusion(block: ProviderBlock, e: Endpoint, params: RequestParams) -> Exclusion | None:
    """The first hard filter ``e`` fails, in the order OpenRouter's routing funnel applies them."""
    if (e.model_extra or {}).get("is_byok_only"):
        # Seen on provider pages: reachable only with the user's own provider key.
        return Exclusion(e, "byok_only", "serves only requests that bring their own provider key")
    if block.only is not None and _first_match(block.only, e) is None:
        return Exclusion(e, "only", f"not matched by only {block.only}")
    if (hit := _first_match(block.ignore, e)) is not None:
        return Exclusion(e, "ignore", f"ignored by {hit!r}")
    if block.quantizations is not None and e.quantization not in block.quantizations:
        said = f"quantization {e.quantization!r} not in {block.quantizations}"
        return Exclusion(e, "quantization", said)
    for key, unit in MAX_PRICE_UNITS.items():
        limit = None if block.max_price is None else block.max_price.limit(key)
        price = None if limit is None else _listed_price(e, key)
        if limit is not None and price is not None and price > limit:
            said = f"{key} ${price:f}{unit} > max_price.{key} ${limit:f}{unit}"
            return Exclusion(e, "max_price", said)
    if block.require_parameters and (
        missing := sorted(params.parameters - set(e.supported_parameters))
    ):
        return Exclusion(e, "require_parameters", f"does not support {', '.join(missing)}")
    cap = e.max_completion_tokens
    if params.max_tokens is not None and cap is not None and params.max_tokens > cap:
        return Exclusion(e, "max_tokens", f"max_tokens {params.max_tokens} > its max {cap}")
    context, prompt = e.context_length, params.prompt_tokens
    if context is not None and prompt is not None and prompt + (params.max_tokens or 0) > context:
        return Exclusion(e, "context_length", f"request exceeds its context {context}")
    return None


# -- the three routing modes ----------------------------------------------------------------------


def _ordered_route(
    block: ProviderBlock,
    admitted: Sequence[Endpoint],
    excluded: Sequence[Exclusion],
    sort_key: SortKey | None,
    params: RequestParams,
    notes: Sequence[str],
) -> RouteDecision:
    """``order`` entries first (an entry's endpoints cheapest first), then fallbacks."""
    placed: dict[str, str] = {}  # tag -> the order entry that placed it
    chain: list[Endpoint] = []
    for entry in block.order or ():
        hits = [e for e in admitted if e.tag not in placed and matches(entry, e)]
        for e in sorted(hits, key=lambda e: price_key(e, params)):
            placed[e.tag] = entry
            chain.append(e)
    rest = [e for e in admitted if e.tag not in placed]
    if block.allow_fallbacks is False:
        reason = "not in order and allow_fallbacks is false"
        excluded = [*excluded, *(Exclusion(e, "not_in_order", reason) for e in rest)]
        rest = []
    chain += rank(rest, sort_key or "price", block, params)
    shares = fallback_shares(chain)
    candidates = tuple(
        Candidate(
            e, i, shares[i - 1], "ordered" if e.tag in placed else "fallback", placed.get(e.tag)
        )
        for i, e in enumerate(chain, start=1)
    )
    notes = [*notes, ASSUMPTIONS["fallback_share"]]
    return RouteDecision("ordered", candidates, tuple(excluded), tuple(notes))


def _sorted_route(
    block: ProviderBlock,
    admitted: Sequence[Endpoint],
    excluded: Sequence[Exclusion],
    sort_key: SortKey,
    params: RequestParams,
    notes: Sequence[str],
) -> RouteDecision:
    """Strictly by ``sort_key``, preferred endpoints first; traffic falls down the chain."""
    chain = rank(admitted, sort_key, block, params)
    shares = fallback_shares(chain)
    notes = [*notes, ASSUMPTIONS["fallback_share"]]
    if sort_key != "price":
        notes.append(ASSUMPTIONS["missing_stats"])
    candidates = tuple(
        Candidate(e, i, shares[i - 1], "sorted") for i, e in enumerate(chain, start=1)
    )
    return RouteDecision("sorted", candidates, tuple(excluded), tuple(notes))


def _balanced_route(
    block: ProviderBlock,
    admitted: Sequence[Endpoint],
    excluded: Sequence[Exclusion],
    params: RequestParams,
    notes: Sequence[str],
) -> RouteDecision:
    """Stable, preferred endpoints weighted by 1/price²; the others as zero-weight fallbacks."""
    notes = [*notes, ASSUMPTIONS["balance_price"], ASSUMPTIONS["default_estimate"]]
    stable = [e for e in admitted if is_stable(e) and preferred(block, e, params)]
    fallbacks = rank([e for e in admitted if e not in stable], "price", block, params)
    if fallbacks:
        notes.append(ASSUMPTIONS["stable"])
    weights = balance_weights(stable, params)
    stable.sort(key=lambda e: (-weights[e.tag], e.tag))
    rows: list[tuple[Endpoint, float, Literal["balanced", "fallback"]]] = [
        (e, weights[e.tag], "balanced") for e in stable
    ]
    if stable:
        rows += [(e, 0.0, "fallback") for e in fallbacks]
    else:
        # Everything is degraded: OpenRouter still routes, in fallback order.
        shares = fallback_shares(fallbacks)
        rows = [(e, shares[i], "fallback") for i, e in enumerate(fallbacks)]
    candidates = tuple(Candidate(e, i, w, role) for i, (e, w, role) in enumerate(rows, start=1))
    return RouteDecision("load_balanced", candidates, tuple(excluded), tuple(notes))


def _exacto_route(
    block: ProviderBlock,
    admitted: Sequence[Endpoint],
    excluded: Sequence[Exclusion],
    params: RequestParams,
    notes: Sequence[str],
) -> RouteDecision:
    """Auto Exacto's order (``ASSUMPTIONS["auto_exacto"]``): tool-capable endpoints first, then by
    throughput; traffic falls down the chain. An ``order`` list stays first (explicit wins)."""
    if block.order:
        ordered = _ordered_route(block, admitted, excluded, "throughput", params, notes)
        return replace(ordered, notes=(*ordered.notes, ASSUMPTIONS["auto_exacto"]))
    notes = [*notes, ASSUMPTIONS["auto_exacto"]]
    chain = _sorted_route(block, admitted, excluded, "throughput", params, notes)
    return replace(chain, mode="exacto")


def _block_notes(block: ProviderBlock, params: RequestParams) -> list[str]:
    """The assumptions a block's filters rely on, whatever the routing mode."""
    notes = []
    if block.quantizations:
        notes.append(ASSUMPTIONS["quantization_exact"])
    if block.max_price is not None and block.max_price.audio is not None:
        notes.append(ASSUMPTIONS["max_price_audio"])
    if block.require_parameters and params.parameters - REQUEST_PARAMETERS:
        notes.append(ASSUMPTIONS["unknown_parameter"])
    if any(
        v is not None for v in (block.data_collection, block.zdr, block.enforce_distillable_text)
    ):
        notes.append(ASSUMPTIONS["data_policy"])
    return notes


def route(
    block: ProviderBlock | Mapping[str, Any] | None,
    endpoints: Iterable[Endpoint],
    params: RequestParams | None = None,
) -> RouteDecision:
    """Decide which of ``endpoints`` a request with ``block`` can reach, in what order, and why not.

    Example::

        decision = route({"ignore": ["fireworks"], "quantizations": ["int4"]}, snap.endpoints)
        decision.admitted_tags      # ['chutes/int4', ...]
        decision.exclusion("fireworks").detail
    """
    blk = block if isinstance(block, ProviderBlock) else ProviderBlock.parse(block or {})
    req = params or RequestParams()
    admitted: list[Endpoint] = []
    excluded: list[Exclusion] = []
    for e in endpoints:
        why = _exclusion(blk, e, req)
        if why is None:
            admitted.append(e)
        else:
            excluded.append(why)
    notes = _block_notes(blk, req)
    sort_key = blk.sort_key
    if sort_key == "exacto" or (sort_key is None and not blk.order and "tools" in req.parameters):
        return _exacto_route(blk, admitted, excluded, req, notes)
    if blk.order:
        return _ordered_route(blk, admitted, excluded, sort_key, req, notes)
    if sort_key is not None:
        return _sorted_route(blk, admitted, excluded, sort_key, req, notes)
    return _balanced_route(blk, admitted, excluded, req, notes)


#: The only ``provider`` keys a Batch API request honours (SDK 1.3.84 ``BatchProviderPreferences``).
BATCH_PROVIDER_KEYS = ("only", "allow_fallbacks")


def route_batch(
    provider: Mapping[str, Any] | None, batch_endpoints: Iterable[Endpoint]
) -> RouteDecision:
    """Decide which ``:batch`` endpoint a Batch API request with ``provider`` runs on.

    A batch runs on one provider: "by default OpenRouter picks the cheapest eligible batch
    endpoint for the model, and you can pin a provider with ``provider.only``". Only ``only`` (and
    ``allow_fallbacks``) apply; other keys are left out here (the fake refuses them, ``policy
    lint`` flags them). The first candidate is the endpoint that runs the batch.
    """
    only = (provider or {}).get("only")
    return route({"only": only, "sort": "price"} if only else {"sort": "price"}, batch_endpoints)

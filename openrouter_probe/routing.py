"""The one model of OpenRouter's provider routing (``OPENROUTER.md`` §6).

Given a ``provider`` block, a snapshot's endpoints and the request's parameters, ``route`` says which
endpoints are admitted, in what order or with what weights, and why every other endpoint is
excluded. The policy compiler, the budget, the fake server and the audit all ask this module; nothing
else decides "which endpoints does this block admit".

Documented behaviour it follows:

- slugs are lowercase; a base slug (``deepinfra``) matches every variant (``deepinfra/turbo``) except
  service-tier endpoints (``openai/priority``, ``google-vertex/flex``); a full tag matches one endpoint;
- ``only`` is an allow-list, ``ignore`` a deny-list; ``quantizations`` keeps endpoints whose tag is
  listed; ``max_price`` is USD per **million** (endpoint prices are USD per token); with
  ``require_parameters`` every parameter sent must be in the endpoint's ``supported_parameters``;
  ``max_tokens`` above an endpoint's ``max_completion_tokens`` excludes it;
- ``order`` is tried first, then the other admitted endpoints as fallbacks unless
  ``allow_fallbacks: false``; ``sort`` sorts strictly; neither means load balancing: endpoints with
  recent outages are skipped, the stable ones weighted by 1/price²;
- ``preferred_min_throughput`` (tokens/s) and ``preferred_max_latency`` (**seconds**; endpoint latency
  is ms) deprioritize, never exclude.

Where OpenRouter does not document its behaviour, the model states what it assumes in
``ASSUMPTIONS`` (case, exact quantization matching, what "stable" means, which price is balanced or
sorted on, missing stats, fallback traffic shares, data policies, ``exacto``); each decision lists
the ones it relied on in ``RouteDecision.notes`` and ``policy explain`` prints them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from openrouter_probe.errors import PolicyError, validation_errors
from openrouter_probe.schema import Endpoint

__all__ = [
    "ASSUMPTIONS",
    "SERVICE_TIER_VARIANTS",
    "Candidate",
    "Exclusion",
    "MaxPrice",
    "ProviderBlock",
    "RequestParams",
    "RouteDecision",
    "SortSpec",
    "blended_price_usd_per_m",
    "matches",
    "route",
]

#: Variants that a base slug does not match (OpenRouter docs: service tiers must be named).
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
    "exacto": "sort 'exacto' is undocumented: modelled as load balancing.",
}

SortKey = Literal["price", "throughput", "latency", "exacto"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SortSpec(_Strict):
    """The object form of ``sort``: ``{"by": ..., "partition": "model" | "none"}``."""

    by: SortKey
    partition: Literal["model", "none"] | None = None


class MaxPrice(_Strict):
    """``max_price``: USD per **million** tokens for prompt/completion; per request/image/audio unit."""

    prompt: float | str | None = None
    completion: float | str | None = None
    request: float | str | None = None
    image: float | str | None = None
    audio: float | str | None = None

    @field_validator("prompt", "completion", "request", "image", "audio")
    @classmethod
    def _finite(cls, value: float | str | None) -> float | str | None:
        if value is None:
            return value
        try:
            number = Decimal(str(value))
        except InvalidOperation:
            raise ValueError(f"{value!r} is not a number (USD per million tokens)") from None
        if not number.is_finite() or number < 0:
            raise ValueError(f"{value!r} must be a finite, non-negative number")
        return value

    def limit(self, key: str) -> Decimal | None:
        value = getattr(self, key)
        return None if value is None else Decimal(str(value))


class ProviderBlock(_Strict):
    """OpenRouter's ``provider`` request field (``ProviderPreferences``, no extra keys)."""

    order: list[str] | None = None
    allow_fallbacks: bool | None = None
    require_parameters: bool | None = None
    data_collection: Literal["allow", "deny"] | None = None
    zdr: bool | None = None
    enforce_distillable_text: bool | None = None
    only: list[str] | None = None
    ignore: list[str] | None = None
    quantizations: list[str] | None = None
    sort: SortKey | SortSpec | None = None
    preferred_min_throughput: float | dict[str, float] | None = None
    preferred_max_latency: float | dict[str, float] | None = None
    max_price: MaxPrice | None = None

    @field_validator("order", "only", "ignore", "quantizations")
    @classmethod
    def _strings(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and any(not isinstance(v, str) or not v for v in value):
            raise ValueError("entries must be non-empty strings")
        return value

    @field_validator("preferred_min_throughput", "preferred_max_latency")
    @classmethod
    def _percentiles(
        cls, value: float | dict[str, float] | None
    ) -> float | dict[str, float] | None:
        if isinstance(value, dict):
            bad = sorted(set(value) - {"p50", "p75", "p90", "p99"})
            if bad:
                raise ValueError(f"percentile keys are p50, p75, p90, p99 (not {', '.join(bad)})")
        return value

    @classmethod
    def parse(cls, data: Any, *, source: str | None = None) -> ProviderBlock:
        """Validate a mapping as a provider block; errors name the key (``provider.order[2]``)."""
        if not isinstance(data, Mapping):
            raise PolicyError("a provider block must be a mapping", source=source)
        try:
            return cls.model_validate(dict(data))
        except ValidationError as exc:
            errors = [
                (
                    loc,
                    "not a key OpenRouter accepts in provider (see https://openrouter.ai/docs/features/provider-routing)"
                    if msg == "not an accepted key"
                    else msg,
                )
                for loc, msg in validation_errors(exc, prefix="provider")
            ]
            raise PolicyError("invalid provider block", source=source, errors=errors) from exc

    def to_request(self) -> dict[str, Any]:
        """The block as it goes into a request body (unset keys left out)."""
        return self.model_dump(mode="json", exclude_none=True)

    @property
    def sort_key(self) -> SortKey | None:
        return self.sort.by if isinstance(self.sort, SortSpec) else self.sort


@dataclass(frozen=True)
class RequestParams:
    """What a request sends that routing looks at.

    ``parameters`` are the body keys sent (``tools``, ``reasoning``, ``response_format``, ...);
    ``prompt_tokens``/``output_tokens`` are typical counts, used to blend input and output prices.
    """

    max_tokens: int | None = None
    parameters: frozenset[str] = frozenset()
    prompt_tokens: int | None = None
    output_tokens: int | None = None


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
    mode: Literal["ordered", "sorted", "load_balanced"]
    candidates: tuple[Candidate, ...]
    excluded: tuple[Exclusion, ...]
    notes: tuple[str, ...] = field(default=())

    @property
    def admitted(self) -> list[Endpoint]:
        return [c.endpoint for c in self.candidates]

    @property
    def admitted_tags(self) -> list[str]:
        return [c.endpoint.tag for c in self.candidates]

    @property
    def weights(self) -> dict[str, float]:
        return {c.endpoint.tag: c.weight for c in self.candidates}

    def candidate(self, tag: str) -> Candidate | None:
        return next((c for c in self.candidates if c.endpoint.tag == tag), None)

    def exclusion(self, tag: str) -> Exclusion | None:
        return next((x for x in self.excluded if x.endpoint.tag == tag), None)

    def admits_provider(self, provider_name: str) -> bool:
        """Whether a response's ``provider`` (a display name) is among the admitted endpoints."""
        return any(c.endpoint.provider_name == provider_name for c in self.candidates)


def matches(entry: str, endpoint: Endpoint) -> bool:
    """Whether an ``order``/``only``/``ignore`` entry selects ``endpoint``."""
    if entry == endpoint.tag:
        return True
    return (
        "/" not in entry
        and entry == endpoint.tag.split("/", 1)[0]
        and (endpoint.variant or "") not in SERVICE_TIER_VARIANTS
    )


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
    if n_in is None or n_out is None or n_in + n_out == 0:
        return (p_in + p_out) / 2
    return (p_in * n_in + p_out * n_out) / (n_in + n_out)


def _first_match(entries: Sequence[str] | None, endpoint: Endpoint) -> str | None:
    return next((e for e in entries or () if matches(e, endpoint)), None)


def _exclusion(block: ProviderBlock, e: Endpoint, params: RequestParams) -> Exclusion | None:
    """The first hard filter ``e`` fails, in the order OpenRouter's routing funnel applies them."""
    if (e.model_extra or {}).get("is_byok_only"):
        # Seen on provider pages: reachable only with the user's own provider key.
        return Exclusion(e, "byok_only", "serves only requests that bring their own provider key")
    if block.only is not None and _first_match(block.only, e) is None:
        return Exclusion(e, "only", f"not matched by only {block.only}")
    hit = _first_match(block.ignore, e)
    if hit is not None:
        return Exclusion(e, "ignore", f"ignored by {hit!r}")
    if block.quantizations is not None and e.quantization not in block.quantizations:
        return Exclusion(
            e, "quantization", f"quantization {e.quantization!r} not in {block.quantizations}"
        )
    if block.max_price is not None:
        for key, price in (
            ("prompt", e.pricing.prompt_usd_per_m),
            ("completion", e.pricing.completion_usd_per_m),
            ("request", e.pricing.usd_per_unit("request")),
            ("image", e.pricing.usd_per_unit("image")),
        ):
            limit = block.max_price.limit(key)
            if limit is not None and price is not None and price > limit:
                unit = "/M tokens" if key in ("prompt", "completion") else f" per {key}"
                return Exclusion(
                    e, "max_price", f"{key} ${price:f}{unit} > max_price.{key} ${limit:f}{unit}"
                )
    if block.require_parameters:
        missing = sorted(params.parameters - set(e.supported_parameters))
        if missing:
            return Exclusion(e, "require_parameters", f"does not support {', '.join(missing)}")
    if (
        params.max_tokens is not None
        and e.max_completion_tokens is not None
        and params.max_tokens > e.max_completion_tokens
    ):
        return Exclusion(
            e, "max_tokens", f"max_tokens {params.max_tokens} > its max {e.max_completion_tokens}"
        )
    if (
        params.prompt_tokens is not None
        and e.context_length is not None
        and params.prompt_tokens + (params.max_tokens or 0) > e.context_length
    ):
        return Exclusion(e, "context_length", f"request exceeds its context {e.context_length}")
    return None


def _sort_value(e: Endpoint, key: SortKey, params: RequestParams) -> tuple[int, float]:
    if key == "throughput":
        v = e.throughput_last_30m.p50 if e.throughput_last_30m else None
        return (1, 0.0) if v is None else (0, -float(v))
    if key == "latency":
        v = e.latency_last_30m.p50 if e.latency_last_30m else None
        return (1, 0.0) if v is None else (0, float(v))
    price = blended_price_usd_per_m(e, params)
    return (1, 0.0) if price is None else (0, float(price))


def _cutoffs(value: float | dict[str, float] | None) -> dict[str, float]:
    """A ``preferred_*`` value as ``{percentile: cutoff}`` (a bare number applies to p50)."""
    if value is None:
        return {}
    return {"p50": float(value)} if isinstance(value, float | int) else dict(value)


def _preferred(block: ProviderBlock, e: Endpoint, params: RequestParams) -> bool:
    """False when ``e`` misses any cutoff of ``preferred_min_throughput`` (tokens/s) or
    ``preferred_max_latency`` (seconds; endpoint latency is in milliseconds), or lacks ``tools``
    for a request that sends tools (OpenRouter prefers tool-capable providers then)."""
    if "tools" in params.parameters and "tools" not in e.supported_parameters:
        return False
    for pct, cut in _cutoffs(block.preferred_min_throughput).items():
        have = getattr(e.throughput_last_30m, pct, None) if e.throughput_last_30m else None
        if have is not None and have < cut:
            return False
    for pct, cut_s in _cutoffs(block.preferred_max_latency).items():
        have = getattr(e.latency_last_30m, pct, None) if e.latency_last_30m else None
        if have is not None and have > cut_s * 1000:
            return False
    return True


def _stable(e: Endpoint) -> bool:
    """No sign of a recent outage: status not negative, not deranked (a provider-page flag)."""
    return (e.status or 0) >= 0 and not (e.model_extra or {}).get("is_deranked")


def _fallback_shares(endpoints: Sequence[Endpoint]) -> list[float]:
    shares, miss = [], 1.0
    for e in endpoints:
        up = (e.uptime_last_30m if e.uptime_last_30m is not None else 100.0) / 100.0
        up = min(max(up, 0.0), 1.0)
        shares.append(miss * up)
        miss *= 1.0 - up
    total = sum(shares)
    return [s / total for s in shares] if total > 0 else [1.0] + [0.0] * (len(shares) - 1)


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
    notes: list[str] = []
    admitted: list[Endpoint] = []
    excluded: list[Exclusion] = []
    for e in endpoints:
        why = _exclusion(blk, e, req)
        if why is None:
            admitted.append(e)
        else:
            excluded.append(why)
    if blk.quantizations:
        notes.append(ASSUMPTIONS["quantization_exact"])
    if any(v is not None for v in (blk.data_collection, blk.zdr, blk.enforce_distillable_text)):
        notes.append(ASSUMPTIONS["data_policy"])

    sort_key = blk.sort_key
    if sort_key == "exacto":
        notes.append(ASSUMPTIONS["exacto"])
        sort_key = None

    ordered: list[tuple[Endpoint, str]] = []
    if blk.order:
        placed: set[str] = set()
        for entry in blk.order:
            hits = [e for e in admitted if e.tag not in placed and matches(entry, e)]
            hits.sort(key=lambda e: _sort_value(e, "price", req))
            for e in hits:
                placed.add(e.tag)
                ordered.append((e, entry))
        rest = [e for e in admitted if e.tag not in placed]
        if blk.allow_fallbacks is False:
            excluded.extend(
                Exclusion(e, "not_in_order", "not in order and allow_fallbacks is false")
                for e in rest
            )
            rest = []
        rest = _rank(rest, sort_key, blk, req)
        chain = [e for e, _ in ordered] + rest
        shares = _fallback_shares(chain)
        notes.append(ASSUMPTIONS["fallback_share"])
        by = dict((e.tag, entry) for e, entry in ordered)
        candidates = tuple(
            Candidate(e, i + 1, shares[i], "ordered" if e.tag in by else "fallback", by.get(e.tag))
            for i, e in enumerate(chain)
        )
        return RouteDecision("ordered", candidates, tuple(excluded), tuple(notes))

    if sort_key is not None:
        chain = _rank(admitted, sort_key, blk, req)
        shares = _fallback_shares(chain)
        notes.append(ASSUMPTIONS["fallback_share"])
        if sort_key != "price":
            notes.append(ASSUMPTIONS["missing_stats"])
        candidates = tuple(Candidate(e, i + 1, shares[i], "sorted") for i, e in enumerate(chain))
        return RouteDecision("sorted", candidates, tuple(excluded), tuple(notes))

    notes.append(ASSUMPTIONS["balance_price"])
    stable = [e for e in admitted if _stable(e) and _preferred(blk, e, req)]
    unstable = [e for e in admitted if e not in stable]
    if unstable:
        notes.append(ASSUMPTIONS["stable"])
    inverse: dict[str, float] = {}
    for e in stable:
        price = blended_price_usd_per_m(e, req)
        inverse[e.tag] = 0.0 if price is None or price <= 0 else 1.0 / float(price) ** 2
    free = [e.tag for e in stable if (p := blended_price_usd_per_m(e, req)) is not None and p == 0]
    if free:
        # 1/price² is unbounded for a free endpoint: the free ones share the traffic evenly.
        inverse = {tag: (1.0 if tag in free else 0.0) for tag in inverse}
    elif stable and not any(inverse.values()):
        inverse = dict.fromkeys(inverse, 1.0)  # nothing priced: spread evenly
    total = sum(inverse.values())
    stable.sort(key=lambda e: (-inverse[e.tag], e.tag))
    chain_weights = [(e, inverse[e.tag] / total if total else 0.0, "balanced") for e in stable]
    chain_weights += [(e, 0.0, "fallback") for e in _rank(unstable, "price", blk, req)]
    if not stable and unstable:
        # Everything is degraded: OpenRouter still routes, in fallback order.
        shares = _fallback_shares([e for e, _, _ in chain_weights])
        chain_weights = [(e, s, r) for (e, _, r), s in zip(chain_weights, shares, strict=True)]
    candidates = tuple(
        Candidate(e, i + 1, w, role)  # type: ignore[arg-type]
        for i, (e, w, role) in enumerate(chain_weights)
    )
    return RouteDecision("load_balanced", candidates, tuple(excluded), tuple(notes))


def _rank(
    endpoints: Sequence[Endpoint], key: SortKey | None, block: ProviderBlock, params: RequestParams
) -> list[Endpoint]:
    """Order fallbacks: by ``key`` (price when none), preferred endpoints first, ties by tag."""
    k: SortKey = key or "price"
    return sorted(
        endpoints,
        key=lambda e: (not _preferred(block, e, params), _sort_value(e, k, params), e.tag),
    )

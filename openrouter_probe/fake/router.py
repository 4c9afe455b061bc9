"""The fake OpenRouter's routing: the models it serves (``ServedModel``), provider blocks parsed
once, one routing decision per distinct request, and the 404 of a block that admits nothing.

Nothing here decides which endpoints a block admits: the routing model (``rules.routing``) does,
asked once per distinct (model, block, parameters) and kept as a ``Plan`` with its fallback chains.
"""

from __future__ import annotations

import bisect
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from openrouter_probe.api.schema import Endpoint
from openrouter_probe.errors import ConfigError, PolicyError
from openrouter_probe.fake import bodies
from openrouter_probe.rules.provider_block import ProviderBlock
from openrouter_probe.rules.routing import RequestParams, RouteDecision, route
from openrouter_probe.rules.snapshot import Snapshot

__all__ = ["Plan", "Router", "ServedModel", "served_models"]

#: How many distinct blocks and decisions each cache keeps (the oldest decision goes first).
_CACHE_SIZE = 8192

#: The routing funnel's steps, in the order OpenRouter applies them, by ``Exclusion.reason``.
#: Only "Filter by Allowed Providers" and "Filter by Parameters" are real recorded names.
_FUNNEL = (
    ("byok_only", "Filter by BYOK"),
    ("only", "Filter by Allowed Providers"),
    ("ignore", "Filter by Ignored Providers"),
    ("quantization", "Filter by Quantization"),
    ("max_price", "Filter by Max Price"),
    ("require_parameters", "Filter by Parameters"),
    ("max_tokens", "Filter by Max Tokens"),
    ("context_length", "Filter by Context Length"),
    ("not_in_order", "Filter by Allowed Providers"),
)
_STEP = dict(_FUNNEL)
_STEP_RANK = {reason: i for i, (reason, _) in enumerate(_FUNNEL)}


class Plan:
    """A routing decision and what serving needs from it, computed once per cached decision.

    Under load balancing the first endpoint is drawn by the routing model's weights and the other
    admitted ones follow as fallbacks; ``order``/``sort`` keep the decision's order. Without
    fallbacks a sorted or balanced request gets one endpoint; an ordered one keeps its order list
    (the decision already left out everything else).
    """

    def __init__(self, decision: RouteDecision, block: ProviderBlock) -> None:
        self.decision = decision
        endpoints = [c.endpoint for c in decision.candidates]
        single = block.allow_fallbacks is False and decision.mode != "ordered"
        # The chains are computed here, once per decision: a request only draws which one it gets.
        self._bounds: list[float] = []  # cumulative weights of the endpoints that can be drawn
        self._chains: list[tuple[Endpoint, ...]] = []
        if decision.mode == "load_balanced":
            acc = 0.0
            for i, c in enumerate(decision.candidates):
                if c.weight > 0:
                    acc += c.weight
                    self._bounds.append(acc)
                    chain = [endpoints[i], *endpoints[:i], *endpoints[i + 1 :]]
                    self._chains.append(tuple(chain[:1] if single else chain))
        if not self._chains:
            self._bounds = []
            self._chains = [tuple(endpoints[:1] if single else endpoints)]

    def chain(self, u: float) -> tuple[Endpoint, ...]:
        """The endpoints to try, in order, for a request whose draw is ``u`` in [0, 1)."""
        chains = self._chains
        if len(chains) == 1:
            return chains[0]
        bounds = self._bounds
        pick = bisect.bisect_right(bounds, u * bounds[-1])
        return chains[pick if pick < len(chains) else -1]


@dataclass
class ServedModel:
    """A model the fake serves: its snapshot, id, permaslug and endpoints."""

    snapshot: Snapshot
    model_id: str
    permaslug: str
    endpoints: list[Endpoint]

    @property
    def slugs(self) -> list[str]:
        return list(dict.fromkeys(e.slug for e in self.endpoints))


def served_models(snaps: Sequence[Snapshot]) -> dict[str, ServedModel]:
    """The models the fake serves, by id and by permaslug (the first id's wins)."""
    models: dict[str, ServedModel] = {}
    for snap in snaps:
        endpoints = snap.endpoints
        if not endpoints:
            raise ConfigError(f"{snap.origin}: the snapshot has no endpoints to serve")
        names = [e.name for e in endpoints if e.name and " | " in e.name]
        permaslug = names[0].split(" | ", 1)[1] if names else snap.model
        entry = ServedModel(snap, snap.model, permaslug, endpoints)
        models[snap.model] = entry
        models.setdefault(permaslug, entry)
    return models


class Router:
    """The routing caches of one fake server (see the module)."""

    def __init__(self) -> None:
        self._routes: OrderedDict[tuple[Any, ...], Plan] = OrderedDict()
        self._blocks: dict[str, ProviderBlock | PolicyError] = {}

    def block(self, raw: Any) -> tuple[str, ProviderBlock | PolicyError]:
        """The request's provider block, parsed (or the error a bad one raised), and its cache
        key (``plan`` takes it)."""
        key = repr(raw) if raw is not None else ""  # a cache key: cheaper than a JSON dump
        parsed = self._blocks.get(key)
        if parsed is None:
            try:
                parsed = ProviderBlock.parse(raw if raw is not None else {}, source="provider")
            except PolicyError as exc:
                parsed = exc
            if len(self._blocks) < _CACHE_SIZE:
                self._blocks[key] = parsed
        return key, parsed

    def plan(
        self,
        model: ServedModel,
        key: str,
        block: ProviderBlock,
        *,
        max_tokens: int | None,
        sent: frozenset[str],
        prompt_tokens: int,
    ) -> Plan:
        """Ask the routing model, once per distinct (model, block, parameters)."""
        # A plain tuple of strings and ints: far cheaper to hash than a RequestParams.
        cache_key = (model.model_id, key, max_tokens, sent, prompt_tokens)
        plan = self._routes.get(cache_key)
        if plan is None:
            params = RequestParams(
                max_tokens=max_tokens, parameters=sent, prompt_tokens=prompt_tokens
            )
            plan = Plan(route(block, model.endpoints, params), block)
            self._routes[cache_key] = plan
            if len(self._routes) > _CACHE_SIZE:
                self._routes.popitem(last=False)
        return plan

    def no_route(self, model: ServedModel, decision: RouteDecision, block: ProviderBlock) -> bytes:
        """The routing-failure 404's body (https://openrouter.ai/docs/api-reference/errors), naming
        the providers serving the model and the step where the last endpoint dropped out."""
        reasons = [x.reason for x in decision.excluded]
        worst = max(reasons, key=lambda r: _STEP_RANK.get(r, -1)) if reasons else "only"
        if worst in ("only", "not_in_order"):
            pref = "provider.only" if worst == "only" else "provider.order"
            requested = block.only if worst == "only" else block.order
        else:
            pref, requested = f"provider.{worst}", (block.only or block.order or [])
        step = _STEP.get(worst, "Filter by Provider Preferences")
        avail, req, name = model.slugs, list(requested or []), model.permaslug
        if step == "Filter by Allowed Providers":
            message = (
                "No allowed providers are available for the selected model. "
                f"Providers serving {name}: {', '.join(avail)}, but your request's "
                f"{pref} preference permits only: {', '.join(req)}."
            )
        elif step == "Filter by Parameters":
            message = (
                "No endpoints found that can handle the requested parameters. To learn more "
                "about provider routing, visit: "
                "https://openrouter.ai/docs/guides/routing/provider-selection"
            )
        else:
            message = (
                f"No endpoints found matching your provider preferences ({pref}). "
                f"Providers serving {name}: {', '.join(avail)}."
            )
        metadata = {
            "available_providers": avail,
            "requested_providers": req,
            "routing_funnel": [
                {"step": "Initial Endpoints", "endpoint_count": len(model.endpoints)}
            ],
            "failed_routing_step": step,
        }
        return bodies.error_body(404, message, metadata)

"""The fake OpenRouter: an ``aiohttp.web`` application that answers from snapshots.

``FakeOpenRouter`` holds the state (snapshots, credit, ledger, faults, clock) and the handlers;
``serve`` runs it on 127.0.0.1 in a background thread for sync code, notebooks and tests. Routing is
asked of ``routing.route`` (one decision per distinct provider block and request parameters, cached),
prices of the schema's helpers through ``fake.billing``; nothing here decides which endpoints a
block admits.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import itertools
import json
import math
import random
import threading
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from aiohttp import web

from openrouter_probe.errors import ConfigError, PolicyError
from openrouter_probe.fake import bodies
from openrouter_probe.fake.billing import (
    Credit,
    affordable_tokens,
    charge,
    count_prompt_tokens,
    worst_case_usd,
)
from openrouter_probe.fake.clock import Clock, SystemClock
from openrouter_probe.fake.content import Answer, answer_for, perturb
from openrouter_probe.fake.faults import FaultPlan, FaultRule, parse_degrade, parse_faults
from openrouter_probe.fake.ledger import Ledger, LedgerEntry
from openrouter_probe.routing import ProviderBlock, RequestParams, RouteDecision, matches, route
from openrouter_probe.schema import Endpoint, Percentiles
from openrouter_probe.snapshot import Snapshot

__all__ = ["FakeOpenRouter", "FakeServer", "serve"]

#: Body keys that are model parameters (what ``require_parameters`` checks).
_PARAMETER_KEYS = frozenset(
    {
        "temperature", "top_p", "top_k", "min_p", "top_a", "max_tokens", "stop", "seed", "tools",
        "tool_choice", "parallel_tool_calls", "response_format", "structured_outputs", "reasoning",
        "include_reasoning", "logprobs", "top_logprobs", "frequency_penalty", "presence_penalty",
        "repetition_penalty", "logit_bias", "verbosity", "web_search_options",
    }
)  # fmt: skip
_ROUTE_CACHE_SIZE = 8192
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
_JSON = "application/json"


def _json_response(
    status: int, body: bytes, headers: Mapping[str, str] | None = None
) -> web.Response:
    return web.Response(status=status, body=body, content_type=_JSON, headers=headers)


def _error(status: int, message: str, metadata: dict[str, Any] | None = None) -> web.Response:
    return _json_response(status, bodies.error_body(status, message, metadata))


@dataclass
class _Model:
    snapshot: Snapshot
    model_id: str
    permaslug: str
    endpoints: list[Endpoint]

    @property
    def slugs(self) -> list[str]:
        return list(dict.fromkeys(e.slug for e in self.endpoints))


@dataclass
class _Generation:
    """What ``/generation?id=`` reports (billed or not)."""

    id: str
    model: str
    provider: str
    tag: str
    created_s: float
    ready_s: float
    streamed: bool
    cancelled: bool = False
    finish_reason: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    reasoning_tokens: int = 0
    cost_usd: Decimal = Decimal(0)
    latency_ms: float = 0.0
    generation_time_ms: float = 0.0
    attempts: list[dict[str, Any]] = field(default_factory=list)


def _draw(p: Percentiles | None, u: float, default: float) -> float:
    """Inverse-CDF draw from percentiles (p50..p99), linear between them."""
    if p is None or p.p50 is None:
        return default
    p50 = float(p.p50)
    points = [(0.0, p50 * 0.5), (0.5, p50)]
    for q, v in ((0.75, p.p75), (0.9, p.p90), (0.99, p.p99)):
        if v is not None:
            points.append((q, float(v)))
    points.append((1.0, points[-1][1]))
    for (q0, v0), (q1, v1) in itertools.pairwise(points):
        if u <= q1:
            return v0 + (v1 - v0) * (u - q0) / (q1 - q0 or 1.0)
    return points[-1][1]


class FakeOpenRouter:
    """The fake OpenRouter's state and handlers; ``app()`` builds the ``aiohttp.web`` application.

    Options (keyword-only): ``credit_usd`` (the key's limit; ``None`` = unlimited), ``faults`` (a
    ``--faults`` spec, a YAML path or a ``FaultPlan``), ``seed``, ``speed`` (1 = the endpoints'
    own latency and throughput, 10 = ten times faster, 0 = no waits), ``degrade`` (``{tag: rate}``
    or ``["tag=rate"]``), ``reasoning_share`` (of completion tokens), ``median_tokens`` (of the
    completion length), ``generation_lag_s`` (``/generation`` answers 404 until then), ``clock``,
    ``api_key`` (when set, other keys get 401 "User not found."), ``tokens_per_chunk``.
    """

    def __init__(
        self,
        snapshots: Snapshot | Sequence[Snapshot],
        *,
        credit_usd: float | Decimal | None = None,
        faults: str | FaultPlan | None = None,
        seed: int = 0,
        speed: float = 1.0,
        degrade: Mapping[str, float] | Sequence[str] | None = None,
        reasoning_share: float = 0.8,
        median_tokens: int = 300,
        generation_lag_s: float = 0.0,
        clock: Clock | None = None,
        api_key: str | None = None,
        tokens_per_chunk: int = 2,
    ) -> None:
        snaps = [snapshots] if isinstance(snapshots, Snapshot) else list(snapshots)
        if not snaps:
            raise ConfigError("the fake server needs at least one snapshot")
        if speed < 0 or not math.isfinite(speed):
            raise ConfigError(f"--speed {speed}: must be 0 (no waits) or a positive factor")
        if not 0.0 <= reasoning_share <= 1.0:
            raise ConfigError(f"reasoning_share {reasoning_share}: must be between 0 and 1")
        self._models: dict[str, _Model] = {}
        for snap in snaps:
            endpoints = snap.endpoints
            if not endpoints:
                raise ConfigError(f"{snap.origin}: the snapshot has no endpoints to serve")
            names = [e.name for e in endpoints if e.name and " | " in e.name]
            permaslug = names[0].split(" | ", 1)[1] if names else snap.model
            entry = _Model(snap, snap.model, permaslug, endpoints)
            self._models[snap.model] = entry
            self._models.setdefault(permaslug, entry)
        if isinstance(faults, FaultPlan):
            self.faults = faults
        else:
            self.faults = parse_faults(faults or "", seed=seed)
        self.seed = seed
        self.speed = speed
        self.degrade = parse_degrade(degrade or {})
        self.reasoning_share = reasoning_share
        self.median_tokens = median_tokens
        self.generation_lag_s = generation_lag_s
        self.clock: Clock = clock or SystemClock()
        self.tokens_per_chunk = max(1, tokens_per_chunk)
        self.ledger = Ledger()
        self.credit = Credit(None if credit_usd is None else Decimal(str(credit_usd)))
        self._api_key = api_key
        self._requests = 0
        self._generations: dict[str, _Generation] = {}
        self._routes: OrderedDict[tuple[Any, ...], RouteDecision | PolicyError] = OrderedDict()
        self._blocks: dict[str, ProviderBlock | PolicyError] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._id_rng = random.Random(f"ids:{seed}")

    # -- application ----------------------------------------------------------------------------

    def app(self) -> web.Application:
        """The ``aiohttp.web`` application serving OpenRouter's paths and ``/_fake/ledger``."""
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_get("/api/v1/models", self.models)
        app.router.add_get("/api/v1/models/{author}/{slug}/endpoints", self.endpoints)
        app.router.add_get("/api/v1/providers", self.providers)
        app.router.add_get("/api/v1/key", self.key)
        app.router.add_get("/api/v1/generation", self.generation)
        app.router.add_post("/api/v1/chat/completions", self.chat)
        app.router.add_get("/_fake/ledger", self.ledger_view)
        return app

    # -- helpers --------------------------------------------------------------------------------

    def _auth(self, request: web.Request) -> web.Response | None:
        """The real 401 for a missing or empty bearer key (the key itself is never logged)."""
        header = request.headers.get("Authorization", "")
        scheme, _, key = header.partition(" ")
        if scheme.lower() != "bearer" or not key.strip():
            return _error(401, "No auth credentials found")
        if self._api_key is not None and key.strip() != self._api_key:
            return _error(401, "User not found.")
        return None

    def _new_id(self) -> str:
        alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
        tail = "".join(self._id_rng.choice(alphabet) for _ in range(20))
        return f"gen-{int(self.clock.now())}-{tail}"

    def _now(self) -> datetime:
        return datetime.fromtimestamp(self.clock.now(), UTC)

    def _block(self, raw: Any) -> tuple[str, ProviderBlock | PolicyError]:
        key = json.dumps(raw, sort_keys=True, separators=(",", ":")) if raw is not None else ""
        parsed = self._blocks.get(key)
        if parsed is None:
            try:
                parsed = ProviderBlock.parse(raw if raw is not None else {}, source="provider")
            except PolicyError as exc:
                parsed = exc
            if len(self._blocks) < _ROUTE_CACHE_SIZE:
                self._blocks[key] = parsed
        return key, parsed

    def _route(
        self, model: _Model, key: str, block: ProviderBlock, params: RequestParams
    ) -> RouteDecision:
        cache_key = (model.model_id, key, params)
        decision = self._routes.get(cache_key)
        if decision is None:
            decision = route(block, model.endpoints, params)
            self._routes[cache_key] = decision
            if len(self._routes) > _ROUTE_CACHE_SIZE:
                self._routes.popitem(last=False)
        assert isinstance(decision, RouteDecision)
        return decision

    def _chain(
        self, decision: RouteDecision, block: ProviderBlock, request_no: int
    ) -> list[Endpoint]:
        """The endpoints to try, in order: the weighted pick first under load balancing."""
        candidates = list(decision.candidates)
        if decision.mode == "load_balanced":
            weighted = [c for c in candidates if c.weight > 0]
            if weighted:
                u = random.Random(f"lb:{self.seed}:{request_no}").random()
                acc = 0.0
                pick = weighted[-1]
                for c in weighted:
                    acc += c.weight
                    if u < acc:
                        pick = c
                        break
                candidates.remove(pick)
                candidates.insert(0, pick)
        chain = [c.endpoint for c in candidates]
        if block.allow_fallbacks is False and decision.mode != "ordered":
            chain = chain[:1]
        return chain

    def _no_route(
        self, model: _Model, decision: RouteDecision, block: ProviderBlock
    ) -> web.Response:
        reasons = [x.reason for x in decision.excluded]
        worst = max(reasons, key=lambda r: _STEP_RANK.get(r, -1)) if reasons else "only"
        step = _STEP.get(worst, "Filter by Provider Preferences")
        if worst in ("only", "not_in_order"):
            pref = "provider.only" if worst == "only" else "provider.order"
            requested = block.only if worst == "only" else block.order
        else:
            pref, requested = f"provider.{worst}", (block.only or block.order or [])
        body = bodies.no_route_body(
            model=model.permaslug,
            available=model.slugs,
            requested=requested,
            step=step,
            preference=pref,
            initial_count=len(model.endpoints),
        )
        self.ledger.count_error("no_route")
        return _json_response(404, body)

    def _upstream_error(self, rule: FaultRule, endpoint: Endpoint, model: _Model) -> web.Response:
        name = endpoint.provider_name
        kind = rule.kind
        if kind == "upstream_429":
            raw = (
                f"{model.model_id} is temporarily rate-limited upstream. Please retry shortly, or "
                "add your own key to accumulate your rate limits: "
                "https://openrouter.ai/settings/integrations"
            )
            status = 429
        elif kind == "upstream_502":
            raw, status = "upstream connect error or disconnect/reset before headers", 502
        elif kind == "upstream_503":
            raw, status = f"{name} is overloaded: no instances available", 503
        else:  # wrapped_400
            raw = json.dumps(
                {"error": {"message": "Rate limit reached, retry shortly", "code": 429}}
            )
            status = 400
        response = _error(status, "Provider returned error", {"raw": raw, "provider_name": name})
        response.headers["X-Fake-Fault"] = kind
        return response

    def _platform_429(self) -> web.Response:
        reset_ms = int((self.clock.now() + 10) * 1000)
        response = _error(
            429,
            "Rate limit exceeded: limit_rpm/moonshotai/kimi-k2.5. High demand: please retry shortly.",
            {
                "headers": {
                    "X-RateLimit-Limit": "20",
                    "X-RateLimit-Remaining": "0",
                    "X-RateLimit-Reset": str(reset_ms),
                }
            },
        )
        response.headers.update(
            {
                "Retry-After": "10",
                "X-RateLimit-Limit": "20",
                "X-RateLimit-Remaining": "0",
                "X-RateLimit-Reset": str(reset_ms),
                "X-Fake-Fault": "platform_429",
            }
        )
        return response

    # -- read-only paths ------------------------------------------------------------------------

    async def endpoints(self, request: web.Request) -> web.Response:
        name = f"{request.match_info['author']}/{request.match_info['slug']}"
        model = self._models.get(name)
        if model is None:
            return _error(404, f"No endpoints found for {name}.")
        data = model.snapshot.data
        if "Authorization" not in request.headers:
            # Without a key OpenRouter returns the performance stats as null (OPENROUTER.md §1.1).
            data = dict(data)
            data["endpoints"] = [
                {**e, "latency_last_30m": None, "throughput_last_30m": None}
                for e in model.snapshot.data.get("endpoints", [])
            ]
        return web.json_response({"data": data})

    def _model_entry(self, model: _Model) -> dict[str, Any]:
        first = model.endpoints[0]
        cheapest = min(
            model.endpoints,
            key=lambda e: e.pricing.completion_usd_per_m or Decimal("Infinity"),
        )
        supported = sorted({p for e in model.endpoints for p in e.supported_parameters})
        data = model.snapshot.data
        return {
            "id": model.model_id,
            "canonical_slug": model.permaslug,
            "hugging_face_id": None,
            "name": data.get("name") or first.model_name,
            "created": data.get("created"),
            "description": data.get("description"),
            "context_length": max(e.context_length or 0 for e in model.endpoints) or None,
            "architecture": data.get("architecture"),
            "pricing": cheapest.pricing.to_json_dict(),
            "top_provider": {
                "context_length": first.context_length,
                "max_completion_tokens": first.max_completion_tokens,
                "is_moderated": False,
            },
            "per_request_limits": None,
            "supported_parameters": supported,
            "default_parameters": None,
            "expiration_date": None,
            "links": {"details": f"/api/v1/models/{model.permaslug}/endpoints"},
            "reasoning": {"mandatory": False, "default_enabled": True}
            if "reasoning" in supported
            else None,
        }

    async def models(self, request: web.Request) -> web.Response:
        seen = {id(m): m for m in self._models.values()}
        data = [self._model_entry(m) for m in seen.values()]
        return web.json_response({"data": data, "total_count": len(data), "links": {"next": None}})

    async def providers(self, request: web.Request) -> web.Response:
        out: dict[str, dict[str, Any]] = {}
        for model in {id(m): m for m in self._models.values()}.values():
            for e in model.endpoints:
                out.setdefault(
                    e.slug,
                    {
                        "name": e.provider_name,
                        "slug": e.slug,
                        "privacy_policy_url": f"https://example.invalid/{e.slug}/privacy",
                        "terms_of_service_url": None,
                        "status_page_url": None,
                        "headquarters": None,
                        "datacenters": None,
                    },
                )
        return web.json_response({"data": list(out.values())})

    async def key(self, request: web.Request) -> web.Response:
        denied = self._auth(request)
        if denied is not None:
            return denied
        usage = float(self.credit.spent_usd)
        limit = self.credit.limit_usd
        remaining = self.credit.remaining_usd
        return web.json_response(
            {
                "data": {
                    "label": "fake-openrouter",
                    "limit": None if limit is None else float(limit),
                    "limit_remaining": None if remaining is None else float(remaining),
                    "limit_reset": None,
                    "include_byok_in_limit": False,
                    "usage": usage,
                    "usage_daily": usage,
                    "usage_weekly": usage,
                    "usage_monthly": usage,
                    "byok_usage": 0,
                    "byok_usage_daily": 0,
                    "byok_usage_weekly": 0,
                    "byok_usage_monthly": 0,
                    "is_free_tier": False,
                    "is_management_key": False,
                    "is_provisioning_key": False,
                    "creator_user_id": "user_fake",
                    "expires_at": None,
                    "rate_limit": {"requests": -1, "interval": "10s"},
                }
            }
        )

    async def generation(self, request: web.Request) -> web.Response:
        denied = self._auth(request)
        if denied is not None:
            return denied
        gen_id = request.query.get("id", "")
        if not gen_id:
            return _error(400, "Missing required query parameter: id")
        gen = self._generations.get(gen_id)
        if gen is None or self.clock.now() < gen.ready_s:
            return _error(404, f"Generation {gen_id} not found")
        cost = float(gen.cost_usd)
        return web.json_response(
            {
                "data": {
                    "id": gen.id,
                    "upstream_id": None,
                    "created_at": datetime.fromtimestamp(gen.created_s, UTC).isoformat(),
                    "model": gen.model,
                    "origin": "",
                    "api_type": "completions",
                    "streamed": gen.streamed,
                    "cancelled": gen.cancelled,
                    "latency": round(gen.latency_ms),
                    "moderation_latency": None,
                    "generation_time": round(gen.generation_time_ms),
                    "total_cost": cost,
                    "usage": cost,
                    "upstream_inference_cost": 0,
                    "cache_discount": None,
                    "is_byok": False,
                    "tokens_prompt": gen.prompt_tokens,
                    "tokens_completion": gen.completion_tokens,
                    "native_tokens_prompt": gen.prompt_tokens,
                    "native_tokens_completion": gen.completion_tokens,
                    "native_tokens_reasoning": gen.reasoning_tokens,
                    "native_tokens_cached": 0,
                    "finish_reason": gen.finish_reason,
                    "native_finish_reason": gen.finish_reason,
                    "provider_name": gen.provider,
                    "provider_responses": gen.attempts,
                }
            }
        )

    async def ledger_view(self, request: web.Request) -> web.Response:
        return web.json_response(self.ledger.to_json())

    # -- chat completions -----------------------------------------------------------------------

    async def chat(self, request: web.Request) -> web.StreamResponse:
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        try:
            return await self._chat(request)
        finally:
            if task is not None:
                self._tasks.discard(task)

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        self._requests += 1
        request_no = self._requests
        denied = self._auth(request)
        if denied is not None:
            return denied
        raw = await request.read()
        try:
            body = json.loads(raw)
        except ValueError as exc:
            self.ledger.count_error("bad_request")
            return _error(400, f"Invalid JSON in request body: {exc}")
        problem = _check_body(body)
        if problem is not None:
            self.ledger.count_error("bad_request")
            return _error(400, problem)
        model = self._models.get(body["model"])
        if model is None:
            self.ledger.count_error("bad_request")
            return _error(400, f"{body['model']} is not a valid model ID")
        key, block = self._block(body.get("provider"))
        if isinstance(block, PolicyError):
            self.ledger.count_error("bad_request")
            return _error(400, f"Invalid provider preferences: {block}")
        messages: list[Any] = body["messages"]
        prompt_tokens = count_prompt_tokens(messages)
        max_tokens = body.get("max_tokens", body.get("max_completion_tokens"))
        sent = frozenset(k for k in body if k in _PARAMETER_KEYS)
        if "max_completion_tokens" in body:
            sent |= {"max_tokens"}
        params = RequestParams(max_tokens=max_tokens, parameters=sent, prompt_tokens=prompt_tokens)
        decision = self._route(model, key, block, params)
        if not decision.candidates:
            return self._no_route(model, decision, block)
        stream = bool(body.get("stream"))
        if self.faults and self.faults.draw(
            "request", request_no=request_no, attempt=0, endpoint=None, stream=stream
        ):
            self.ledger.count_error("platform_429")
            return self._platform_429()
        chain = self._chain(decision, block, request_no)
        now = self._now()

        # Reserve the worst case on the dearest endpoint that may serve (no await in between).
        reserve = Decimal(0)
        if self.credit.limit_usd is not None:
            refused = self._refuse_credit(chain, prompt_tokens, max_tokens, now)
            if refused is not None:
                return refused
            reserve = max(
                worst_case_usd(
                    e,
                    prompt_tokens=prompt_tokens,
                    max_tokens=_cap(max_tokens, e, prompt_tokens),
                    at=now,
                )
                for e in chain
            )
            self.credit.reserve(reserve)
        billed = Decimal(0)
        try:
            attempts: list[dict[str, Any]] = []
            last_error: web.Response | None = None
            for attempt, endpoint in enumerate(chain):
                fault = (
                    self.faults.draw(
                        "upstream",
                        request_no=request_no,
                        attempt=attempt,
                        endpoint=endpoint,
                        stream=stream,
                    )
                    if self.faults
                    else None
                )
                if fault is not None:
                    last_error = self._upstream_error(fault, endpoint, model)
                    attempts.append(_attempt(endpoint, model, last_error.status))
                    self.ledger.count_error(fault.kind)
                    continue
                attempts.append(_attempt(endpoint, model, 200))
                served = _Served(
                    self, request, body, model, endpoint, request_no, prompt_tokens, attempts
                )
                response = await served.run(stream, max_tokens)
                billed = served.billed_usd
                return response
            assert last_error is not None
            return last_error
        finally:
            if self.credit.limit_usd is not None:
                self.credit.settle(reserve, billed)

    def _refuse_credit(
        self, chain: list[Endpoint], prompt_tokens: int, max_tokens: int | None, now: datetime
    ) -> web.Response | None:
        """The 402s: no credit left at all, or not enough for ``max_tokens`` (with what would fit)."""
        available = self.credit.available_usd
        assert available is not None
        dearest = max(
            chain,
            key=lambda e: worst_case_usd(
                e,
                prompt_tokens=prompt_tokens,
                max_tokens=_cap(max_tokens, e, prompt_tokens),
                at=now,
            ),
        )
        requested = _cap(max_tokens, dearest, prompt_tokens)
        need = worst_case_usd(dearest, prompt_tokens=prompt_tokens, max_tokens=requested, at=now)
        if need <= available:
            return None
        affordable = affordable_tokens(
            dearest, prompt_tokens=prompt_tokens, remaining_usd=available, at=now
        )
        self.ledger.count_error("insufficient_credits")
        if affordable >= 1:
            return _error(
                402,
                "This request requires more credits, or fewer max_tokens. You requested up to "
                f"{requested} tokens, but can only afford {affordable}.",
            )
        return _error(
            402, "Insufficient credits. Add more using https://openrouter.ai/settings/credits"
        )

    def _record(self, gen: _Generation) -> None:
        self._generations[gen.id] = gen

    async def cancel_all(self) -> None:
        """Cancel the requests still being served (a stalled stream, a slow first byte)."""
        tasks = [t for t in self._tasks if not t.done()]
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)


def _cap(max_tokens: int | None, endpoint: Endpoint, prompt_tokens: int) -> int:
    """The output tokens a request may produce: ``max_tokens``, else the endpoint's limit."""
    if max_tokens is not None:
        return max_tokens
    if endpoint.max_completion_tokens:
        return endpoint.max_completion_tokens
    return max(1, (endpoint.context_length or 65536) - prompt_tokens)


def _attempt(endpoint: Endpoint, model: _Model, status: int) -> dict[str, Any]:
    return {
        "endpoint_id": hashlib.sha1(endpoint.tag.encode()).hexdigest()[:12],
        "id": None,
        "is_byok": False,
        "latency": 0,
        "model_permaslug": model.permaslug,
        "provider_name": endpoint.provider_name,
        "routed_service_tier": None,
        "status": status,
    }


def _check_body(body: Any) -> str | None:
    """What is wrong with a chat request body, as OpenRouter words it (``None`` when fine)."""
    if not isinstance(body, dict):
        return "Invalid request body: expected a JSON object"
    if not isinstance(body.get("model"), str) or not body["model"]:
        return "No models provided: set `model` to a model ID such as moonshotai/kimi-k2.5"
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return 'Input required: specify "messages" (a non-empty list of chat messages)'
    if not all(isinstance(m, dict) and "role" in m for m in messages):
        return 'Invalid messages: each message needs a "role" and "content"'
    for key in ("max_tokens", "max_completion_tokens"):
        value = body.get(key)
        if value is not None and (
            not isinstance(value, int) or isinstance(value, bool) or value < 1
        ):
            return f"{key} must be a positive integer, got {value!r}"
    return None


class _Served:
    """One attempt that an endpoint serves: the answer, the body or stream, the bill."""

    def __init__(
        self,
        fake: FakeOpenRouter,
        request: web.Request,
        body: dict[str, Any],
        model: _Model,
        endpoint: Endpoint,
        request_no: int,
        prompt_tokens: int,
        attempts: list[dict[str, Any]],
    ) -> None:
        self.fake = fake
        self.request = request
        self.body = body
        self.model = model
        self.endpoint = endpoint
        self.request_no = request_no
        self.prompt_tokens = prompt_tokens
        self.attempts = attempts
        self.billed_usd = Decimal(0)
        self.started_s = fake.clock.now()
        self.id = fake._new_id()
        self.rng = random.Random(f"lat:{fake.seed}:{request_no}:{endpoint.tag}")

    # -- what to say ----------------------------------------------------------------------------

    def _answer(self, max_tokens: int | None) -> tuple[Answer, bool]:
        fake, body = self.fake, self.body
        raw = body.get("reasoning")
        reasoning: dict[str, Any] = raw if isinstance(raw, dict) else {}
        enabled = not (
            reasoning.get("enabled") is False
            or reasoning.get("effort") == "none"
            or body.get("reasoning_effort") == "none"
        )
        show = not (reasoning.get("exclude") is True or body.get("include_reasoning") is False)
        temperature = body.get("temperature")
        hot = isinstance(temperature, int | float) and temperature > 0
        cap = _cap(max_tokens, self.endpoint, self.prompt_tokens)
        answer = answer_for(
            body["messages"],
            seed=fake.seed,
            nonce=self.request_no if hot else None,
            max_tokens=cap,
            reasoning=enabled,
            reasoning_share=fake.reasoning_share,
            median_tokens=fake.median_tokens,
        )
        rate = next((r for tag, r in fake.degrade.items() if matches(tag, self.endpoint)), 0.0)
        if rate > 0:
            key = (fake.seed, self.request_no if hot else None, body["messages"], self.endpoint.tag)
            answer = perturb(answer, rate=rate, key=key)
        return answer, show

    def _logprobs_top(self) -> int | None:
        """``top_logprobs`` when logprobs were asked for and the endpoint supports them."""
        if self.body.get("logprobs") is not True:
            return None
        if "logprobs" not in self.endpoint.supported_parameters:
            return None
        top = self.body.get("top_logprobs")
        return int(top) if isinstance(top, int) and top > 0 else 0

    def _bill(
        self, reasoning_tokens: int, content_tokens: int, *, cancelled: bool
    ) -> dict[str, Any]:
        fake = self.fake
        c = charge(
            self.endpoint,
            prompt_tokens=self.prompt_tokens,
            completion_tokens=reasoning_tokens + content_tokens,
            reasoning_tokens=reasoning_tokens,
            at=fake._now(),
        )
        self.billed_usd = c.total_usd
        fake.ledger.add(
            LedgerEntry(
                generation_id=self.id,
                model=self.model.permaslug,
                provider=self.endpoint.provider_name,
                tag=self.endpoint.tag,
                prompt_tokens=c.prompt_tokens,
                completion_tokens=c.completion_tokens,
                reasoning_tokens=c.reasoning_tokens,
                cost_usd=c.total_usd,
                streamed=bool(self.body.get("stream")),
                cancelled=cancelled,
                created=int(self.started_s),
            )
        )
        return bodies.usage_object(c)

    def _generation(
        self, finish: str | None, *, first_byte_s: float, cancelled: bool = False
    ) -> None:
        fake = self.fake
        end = fake.clock.now()
        entry = fake.ledger.get(self.id)
        fake._record(
            _Generation(
                id=self.id,
                model=self.model.permaslug,
                provider=self.endpoint.provider_name,
                tag=self.endpoint.tag,
                created_s=self.started_s,
                ready_s=end + fake.generation_lag_s,
                streamed=bool(self.body.get("stream")),
                cancelled=cancelled,
                finish_reason=finish,
                prompt_tokens=entry.prompt_tokens if entry else 0,
                completion_tokens=entry.completion_tokens if entry else 0,
                reasoning_tokens=entry.reasoning_tokens if entry else 0,
                cost_usd=entry.cost_usd if entry else Decimal(0),
                latency_ms=(first_byte_s - self.started_s) * 1000,
                generation_time_ms=(end - first_byte_s) * 1000,
                attempts=self.attempts,
            )
        )

    def _headers(self, fault: FaultRule | None) -> dict[str, str]:
        headers = {"X-Generation-Id": self.id}
        if fault is not None:
            headers["X-Fake-Fault"] = fault.kind
        return headers

    def _ttft_s(self) -> float:
        if self.fake.speed == 0:
            return 0.0
        ms = _draw(self.endpoint.latency_last_30m, self.rng.random(), 1000.0)
        return ms / 1000.0 / self.fake.speed

    def _seconds_per_token(self) -> float:
        if self.fake.speed == 0:
            return 0.0
        tps = _draw(self.endpoint.throughput_last_30m, 1.0 - self.rng.random(), 40.0)
        return 1.0 / max(tps, 0.1) / self.fake.speed

    # -- how to say it --------------------------------------------------------------------------

    async def run(self, stream: bool, max_tokens: int | None) -> web.StreamResponse:
        fake = self.fake
        fault = (
            fake.faults.draw(
                "response",
                request_no=self.request_no,
                attempt=0,
                endpoint=self.endpoint,
                stream=stream,
            )
            if fake.faults
            else None
        )
        answer, show = self._answer(max_tokens)
        if fault is not None:
            fake.ledger.count_error(fault.kind)
            if fault.kind == "slow_first_byte":
                await fake.clock.sleep(fault.wait_s)
        if stream:
            return await self._stream(answer, show, fault)
        return await self._complete(answer, show, fault)

    async def _complete(
        self, answer: Answer, show: bool, fault: FaultRule | None
    ) -> web.StreamResponse:
        fake = self.fake
        created = int(self.started_s)
        top = self._logprobs_top()
        logprobs = (
            bodies.logprobs_object(answer.content, answer.logprobs, answer.alternatives, top)
            if top is not None
            else None
        )
        kind = fault.kind if fault is not None else None
        wait = self._ttft_s() + answer.completion_tokens * self._seconds_per_token()
        if kind == "choice_error":
            error = {
                "code": 502,
                "message": f"Upstream error from {self.endpoint.provider_name}: connection reset",
                "metadata": {
                    "provider_name": self.endpoint.provider_name,
                    "raw": "connection reset",
                },
            }
            payload = bodies.completion_body(
                generation_id=self.id,
                created=created,
                model=self.model.permaslug,
                provider=self.endpoint.provider_name,
                answer=answer,
                usage=None,
                show_reasoning=False,
                logprobs=None,
                choice_error=error,
            )
            await fake.clock.sleep(wait) if wait else None
            self._generation("error", first_byte_s=fake.clock.now())
            return _json_response(200, payload, self._headers(fault))
        usage = None
        if kind != "drop":
            usage = self._bill(len(answer.reasoning), len(answer.content), cancelled=False)
        payload = bodies.completion_body(
            generation_id=self.id,
            created=created,
            model=self.model.permaslug,
            provider=self.endpoint.provider_name,
            answer=answer,
            usage=usage or {},
            show_reasoning=show,
            logprobs=logprobs,
        )
        if wait == 0 and kind is None:
            first = fake.clock.now()
            self._generation(answer.finish_reason, first_byte_s=first)
            return _json_response(200, payload, self._headers(None))
        response = web.StreamResponse(status=200, headers=self._headers(fault))
        response.content_type = _JSON
        response.content_length = len(payload)
        await response.prepare(self.request)
        first = fake.clock.now()
        pad = len(bodies.PADDING)
        await response.write(payload[:pad])
        if wait:
            await fake.clock.sleep(wait)
        if kind == "drop":
            await response.write(payload[pad : pad + (len(payload) - pad) // 2])
            self._generation("error", first_byte_s=first)
            _drop(self.request)
            return response
        await response.write(payload[pad:])
        await response.write_eof()
        self._generation(answer.finish_reason, first_byte_s=first)
        return response

    async def _stream(
        self, answer: Answer, show: bool, fault: FaultRule | None
    ) -> web.StreamResponse:
        fake = self.fake
        writer = bodies.ChunkWriter(
            generation_id=self.id,
            created=int(self.started_s),
            model=self.model.permaslug,
            provider=self.endpoint.provider_name,
        )
        response = web.StreamResponse(status=200, headers=self._headers(fault))
        response.content_type = "text/event-stream"
        response.headers["Cache-Control"] = "no-cache"
        top = self._logprobs_top()
        per_token = self._seconds_per_token()
        n = fake.tokens_per_chunk
        # (frame, reasoning tokens, content tokens) in the order they go out
        frames: list[tuple[str, int, int]] = []
        for i in range(0, len(answer.reasoning), n):
            piece = answer.reasoning[i : i + n]
            if show:
                frames.append((writer.reasoning("".join(piece)), len(piece), 0))
            else:
                frames.append(("", len(piece), 0))  # excluded reasoning: billed, never sent
        for i in range(0, len(answer.content), n):
            piece = answer.content[i : i + n]
            lp = (
                bodies.logprobs_object(
                    piece, answer.logprobs[i : i + n], answer.alternatives[i : i + n], top
                )
                if top is not None
                else None
            )
            frames.append((writer.content("".join(piece), logprobs=lp), 0, len(piece)))
        kind = fault.kind if fault is not None else None
        cut = len(frames) // 2 if kind in ("stream_error", "drop", "stall") else None
        sent_reasoning = sent_content = 0
        first = fake.clock.now()
        try:
            await response.prepare(self.request)
            first = fake.clock.now()
            await response.write(bodies.PROCESSING)
            ttft = self._ttft_s()
            if ttft:
                await fake.clock.sleep(ttft)
            batch: list[str] = []
            pending_r = pending_c = 0
            size = 0
            for index, (frame, n_r, n_c) in enumerate(frames):
                if cut is not None and index == cut:
                    break
                if per_token:
                    await fake.clock.sleep(per_token * (n_r + n_c))
                if frame:
                    batch.append(frame)
                    size += len(frame)
                pending_r += n_r
                pending_c += n_c
                if per_token or size > 32768:
                    if batch:
                        await response.write("".join(batch).encode())
                    sent_reasoning += pending_r
                    sent_content += pending_c
                    batch, size, pending_r, pending_c = [], 0, 0, 0
            if batch:
                await response.write("".join(batch).encode())
            sent_reasoning += pending_r
            sent_content += pending_c
            if kind == "stream_error":
                error = {
                    "code": 502,
                    "message": "Provider returned error",
                    "metadata": {
                        "error_type": "provider_unavailable",
                        "provider_name": self.endpoint.provider_name,
                    },
                }
                await response.write(writer.error(error).encode())
                await response.write_eof()
                self._generation("error", first_byte_s=first)
                return response
            if kind in ("drop", "stall"):
                if kind == "stall":
                    await fake.clock.sleep(fault.wait_s if fault else 0.0)
                self._generation("error", first_byte_s=first)
                _drop(self.request)
                return response
            usage = self._bill(sent_reasoning, sent_content, cancelled=False)
            tail = writer.finish(answer.finish_reason) + writer.finish(
                answer.finish_reason, usage=usage
            )
            await response.write(tail.encode() + bodies.DONE)
            await response.write_eof()
            self._generation(answer.finish_reason, first_byte_s=first)
            return response
        except (ConnectionError, asyncio.CancelledError):
            # The client went away: bill what was sent, as providers without stream cancellation do.
            if kind is None and self.fake.ledger.get(self.id) is None:
                self._bill(sent_reasoning, sent_content, cancelled=True)
                self._generation(None, first_byte_s=first, cancelled=True)
            raise


def _drop(request: web.Request) -> None:
    """Close the connection mid-body, as a dropped upstream does."""
    transport = request.transport
    if transport is not None:
        transport.close()


# -- running in a background thread ----------------------------------------------------------------


class FakeServer:
    """A running fake OpenRouter: ``base_url`` for clients, ``ledger`` for the truth about spend."""

    def __init__(self, fake: FakeOpenRouter, host: str, port: int) -> None:
        self.fake = fake
        self.host = host
        self.port = port
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The server's root, ``http://127.0.0.1:PORT``."""
        return f"http://{self.host}:{self.port}"

    @property
    def base_url(self) -> str:
        """What ``OPENROUTER_BASE_URL`` (or the openai SDK's ``base_url``) should be."""
        return f"{self.url}/api/v1"

    @property
    def ledger(self) -> Ledger:
        return self.fake.ledger

    @property
    def clock(self) -> Clock:
        return self.fake.clock

    def start(self) -> FakeServer:
        """Start serving in a daemon thread; return once the port is bound."""
        ready = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(self._start())
            except BaseException as exc:  # reported to the starting thread
                failure.append(exc)
                ready.set()
                loop.close()
                return
            ready.set()
            try:
                loop.run_forever()
            finally:
                loop.close()

        self._thread = threading.Thread(target=run, name="fake-openrouter", daemon=True)
        self._thread.start()
        ready.wait()
        if failure:
            exc = failure[0]
            raise ConfigError(f"cannot serve on {self.host}:{self.port}: {exc}") from exc
        return self

    async def _start(self) -> None:
        runner = web.AppRunner(self.fake.app(), access_log=None, handle_signals=False)
        await runner.setup()
        site = web.TCPSite(runner, self.host, self.port, backlog=4096, reuse_address=True)
        await site.start()
        self._runner = runner
        if self.port == 0:
            # the port the system picked: the first listening address of the runner
            self.port = int(runner.addresses[0][1])

    async def _stop(self) -> None:
        await self.fake.cancel_all()
        if self._runner is not None:
            await self._runner.cleanup()

    def stop(self) -> None:
        """Stop serving: cancel requests in flight, close the port, end the thread."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None or not thread.is_alive():
            return
        asyncio.run_coroutine_threadsafe(self._stop(), loop).result(timeout=30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=30)

    def __enter__(self) -> FakeServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


@contextlib.contextmanager
def serve(
    snapshot: Snapshot | Sequence[Snapshot] | None = None,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    **options: Any,
) -> Iterator[FakeServer]:
    """Run a fake OpenRouter on loopback for the duration of a ``with`` block.

    ``snapshot`` defaults to the bundled Kimi K2.5 one; ``port=0`` picks a free port. ``options``
    are ``FakeOpenRouter``'s (``credit_usd``, ``faults``, ``seed``, ``speed``, ``degrade``, ...).

    Example::

        import openai
        import openrouter_probe as orp

        with orp.fake.serve(speed=0, credit_usd=1.0) as fake:
            client = openai.OpenAI(base_url=fake.base_url, api_key="sk-fake")
            client.chat.completions.create(
                model="moonshotai/kimi-k2.5",
                messages=[{"role": "user", "content": "What is 37 * 41?"}],
                extra_body={"provider": {"order": ["chutes/int4"], "allow_fallbacks": False}},
            )
            print(fake.ledger.total_usd)
    """
    if snapshot is None:
        from openrouter_probe.snapshot import bundled_snapshot

        snapshot = bundled_snapshot()
    server = FakeServer(FakeOpenRouter(snapshot, **options), host, port).start()
    try:
        yield server
    finally:
        server.stop()

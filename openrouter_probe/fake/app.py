"""The fake OpenRouter's ``aiohttp.web`` application: state, checks, credit and the handlers.

``FakeOpenRouter`` holds the snapshots, the credit, the ledger, the fault plan and the clock. Each
chat request is checked (401, 400), routed by ``fake.router`` (``routing.route`` asked once per
distinct provider block and request parameters; a block that admits nothing gets the real 404),
refused when the credit cannot cover its worst case (402), then tried on the endpoints the
decision gives, in order, falling back on upstream faults unless ``allow_fallbacks`` is false;
``fake.reply`` answers.
Nothing here decides which endpoints a block admits or what a token costs.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import math
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from aiohttp import web

from openrouter_probe.api.schema import Endpoint
from openrouter_probe.errors import ConfigError, Message, OptionError, PolicyError
from openrouter_probe.fake import bodies
from openrouter_probe.fake.account import (
    AccountLimits,
    credits_data,
    default_key_data,
    hold_for,
    reserve,
    settle,
)
from openrouter_probe.fake.batches import BatchService
from openrouter_probe.fake.billing import Credit
from openrouter_probe.fake.clock import Clock, SystemClock
from openrouter_probe.fake.content import Answer
from openrouter_probe.fake.degrade import (
    Degradation,
    parse_sampling,
    parse_template,
    template_tokens,
)
from openrouter_probe.fake.faults import FaultPlan, check_fault_tags, parse_faults, uniform
from openrouter_probe.fake.generation import GenerationRecord
from openrouter_probe.fake.keys import KeyStore
from openrouter_probe.fake.ledger import Ledger
from openrouter_probe.fake.refusals import refuse_request
from openrouter_probe.fake.reply import Reply
from openrouter_probe.fake.response_cache import ResponseCache, cache_request
from openrouter_probe.fake.router import Router, ServedModel, served_models
from openrouter_probe.rules.prompt_tokens import estimate_prompt_tokens
from openrouter_probe.rules.provider_block import REQUEST_PARAMETERS
from openrouter_probe.rules.snapshot import Snapshot

__all__ = ["FakeOpenRouter"]

#: Body keys that are model parameters (what ``require_parameters`` checks): the routing model's,
#: ``max_completion_tokens`` read as ``max_tokens`` (``_chat``); the fake checks neither
#: ``prediction`` nor ``reasoning_effort``.
_PARAMETER_KEYS = REQUEST_PARAMETERS - {"max_completion_tokens", "prediction", "reasoning_effort"}
_CACHE_SIZE = 8192
_ID_TABLE = bytes.maketrans(b"+/", b"Qz")
_decode = json.JSONDecoder().decode


class FakeOpenRouter:
    """The fake OpenRouter's state and handlers; ``app()`` builds the ``aiohttp.web`` application.

    Options (keyword-only) are ``serve``'s, each described in ``docs/fake-server.md`` (its table;
    ``workspace_budget_usd``, ``batch_seconds``, ``batch_api`` and ``management_key`` in their own
    sections); ``faults`` is a spec, a YAML path or a ``FaultPlan``.
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
        degrade_flip: Mapping[str, float] | Sequence[str] | None = None,
        degrade_tools: Mapping[str, float] | Sequence[str] | None = None,
        degrade_template: Mapping[str, int] | Sequence[str] | None = None,
        degrade_sampling: Mapping[str, float] | Sequence[str] | None = None,
        noise: float = 0.0,
        hard: float = 0.0,
        reasoning_share: float = 0.8,
        median_tokens: int = 300,
        generation_lag_s: float = 0.0,
        clock: Clock | None = None,
        api_key: str | None = None,
        tokens_per_chunk: int = 2,
        record_requests: bool = False,
        workspace_budget_usd: float | None = None,
        batch_seconds: float = 420.0,
        batch_api: str = "v1",
        management_key: str | None = None,
        in_flight_share: float | None = None,
        in_flight_usd: float | Decimal | None = None,
        key_limit_usd: float | Decimal | None = None,
        in_flight_retry_after_s: int = 1,
        in_flight_settle_s: float = 0.0,
    ) -> None:
        snaps = [snapshots] if isinstance(snapshots, Snapshot) else list(snapshots)
        _check_settings(snaps, speed, reasoning_share, credit_usd, in_flight_share)
        self._models = served_models(snaps)
        served = [e for m in self._models.values() for e in m.endpoints]
        self.faults = (
            faults if isinstance(faults, FaultPlan) else parse_faults(faults or "", seed=seed)
        )
        check_fault_tags(self.faults, served)  # a tag that matches no endpoint could never strike
        self.seed, self.speed = seed, speed
        self.degradation = Degradation.build(
            served, degrade=degrade, flip=degrade_flip, tools=degrade_tools, noise=noise, hard=hard
        )
        self.template = parse_template(degrade_template or {}, endpoints=served)
        self.sampling = parse_sampling(degrade_sampling or {}, endpoints=served)
        self.reasoning_share, self.median_tokens = reasoning_share, median_tokens
        self.generation_lag_s = generation_lag_s
        self.clock: Clock = clock or SystemClock()
        self.tokens_per_chunk = max(1, tokens_per_chunk)
        self.ledger = Ledger()
        self.credit = Credit(None if credit_usd is None else Decimal(str(credit_usd)))
        #: ``/generation`` records as plain tuples (``GenerationRecord(*row)`` reads one)
        self.generations: dict[str, tuple[Any, ...]] = {}
        self.answers: OrderedDict[tuple[Any, ...], Answer] = OrderedDict()
        #: OpenRouter's response cache (``X-OpenRouter-Cache: true``; ``fake.response_cache``)
        self.response_cache = ResponseCache()
        self.choices: dict[tuple[Any, ...], str] = {}
        self._api_key, self._requests, self._ids = api_key, 0, 0
        #: the seed's own prefix of every id the fake makes (ten URL-safe characters)
        digest = hashlib.blake2b(str(seed).encode(), digest_size=8).digest()
        self._id_prefix = base64.b64encode(digest).translate(_ID_TABLE).decode()[:10]
        #: provider blocks and routing decisions, each parsed or asked once (``fake.router``)
        self.router = Router()
        self._tasks: set[asyncio.Task[Any]] = set()
        #: A workspace budget (USD a month; settable while the server runs): once the ledger holds
        #: that much, every chat request answers 403 "Workspace monthly budget of $X exceeded"
        self.workspace_budget_usd = workspace_budget_usd
        #: Every chat request's body, parsed, in arrival order (``record_requests=True``)
        self.requests: list[Any] | None = [] if record_requests else None
        #: The Batch API (``fake.batches``): ``batch_seconds`` in progress, routes under ``batch_api``
        self.batches = BatchService(self, batch_seconds=batch_seconds, mount=batch_api)
        #: the in-flight budget (``fake.account.AccountLimits``) and the keys, each held to its
        #: own limit: the default key (``key_limit_usd``) and, with ``management_key``, the key
        #: management API and the keys it makes (``fake.keys``)
        in_flight = None if in_flight_usd is None else Decimal(str(in_flight_usd))
        self.limits = AccountLimits(
            in_flight_share, in_flight, in_flight_retry_after_s, settle_s=in_flight_settle_s
        )
        limit = None if key_limit_usd is None else Decimal(str(key_limit_usd))
        self.keys = KeyStore(
            management_key or None, ledger=self.ledger, now=self.now, default_limit_usd=limit
        )

    def app(self) -> web.Application:
        """The ``aiohttp.web`` application serving OpenRouter's paths and ``/_fake/ledger``."""
        app = web.Application(client_max_size=256 * 1024 * 1024)  # a batch is up to 200 MB
        self.batches.register(app)
        self.keys.register(app)
        app.router.add_get("/api/v1/models", self.models)
        app.router.add_get("/api/v1/models/{author}/{slug}/endpoints", self.endpoints)
        app.router.add_get("/api/v1/providers", self.providers)
        app.router.add_get("/api/v1/key", self.key)
        app.router.add_get("/api/v1/credits", self.credits)
        app.router.add_get("/api/v1/generation", self.generation)
        app.router.add_post("/api/v1/chat/completions", self.chat)
        app.router.add_get("/_fake/ledger", self.ledger_view)
        return app

    # -- helpers used by replies ----------------------------------------------------------------

    def new_id(self) -> str:
        """A generation id shaped like OpenRouter's (``gen-<unix>-<20 characters>``): a seeded
        prefix and a counter, so ids are unique within a run and the same across runs."""
        self._ids += 1
        return f"gen-{int(self.clock.now())}-{self._id_prefix}{self._ids:010d}"

    def now(self) -> datetime:
        return datetime.fromtimestamp(self.clock.now(), UTC)

    def remember(self, key: tuple[Any, ...], answer: Answer) -> None:
        self.answers[key] = answer
        if len(self.answers) > _CACHE_SIZE:
            self.answers.popitem(last=False)

    async def cancel_all(self) -> None:
        """Cancel the requests still being served (a stalled stream, a slow first byte)."""
        tasks = [t for t in self._tasks if not t.done()]
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    # -- checks and refusals ---------------------------------------------------------------------

    def _auth(self, request: web.Request) -> web.Response | None:
        """The real 401 for a missing or empty bearer key (the key itself is never logged)."""
        key = self.keys.bearer(request)
        if not key:
            return bodies.error_response(401, "No auth credentials found")
        if self._api_key is not None and key != self._api_key and not self.keys.knows(key):
            return bodies.error_response(401, "User not found.")
        return None

    # -- read-only paths ------------------------------------------------------------------------

    async def endpoints(self, request: web.Request) -> web.Response:
        name = f"{request.match_info['author']}/{request.match_info['slug']}"
        model = self._models.get(name)
        if model is None:
            return bodies.error_response(404, f"No endpoints found for {name}.")
        stats = "Authorization" in request.headers
        data = dict(model.snapshot.data)
        data["endpoints"] = [
            bodies.endpoint_entry(raw, endpoint, stats=stats)
            for raw, endpoint in zip(data.get("endpoints", []), model.endpoints, strict=True)
        ]
        return web.json_response({"data": data})

    def _served_models(self) -> list[ServedModel]:
        return list({id(m): m for m in self._models.values()}.values())

    async def models(self, request: web.Request) -> web.Response:
        data = [
            bodies.model_entry(m.model_id, m.permaslug, m.endpoints, m.snapshot.data)
            for m in self._served_models()
        ]
        return web.json_response({"data": data, "total_count": len(data), "links": {"next": None}})

    async def providers(self, request: web.Request) -> web.Response:
        seen: dict[str, dict[str, Any]] = {}
        for model in self._served_models():
            for e in model.endpoints:
                seen.setdefault(e.slug, bodies.provider_entry(e.provider_name, e.slug))
        return web.json_response({"data": list(seen.values())})

    async def key(self, request: web.Request) -> web.Response:
        denied = self._auth(request)
        if denied is not None:
            return denied
        own = self.keys.of(self.keys.bearer(request))
        data = default_key_data(self) if own is None else self.keys.key_data(own)
        return web.json_response({"data": data})

    async def credits(self, request: web.Request) -> web.Response:
        """``/credits``: what the account bought (the key's limit) and used. OpenRouter asks for a
        management key here: a fake serving the management API (``management_key``) answers the
        401 of its other management paths to any other key; without one, it takes any key."""
        denied = self._auth(request)
        if denied is None and self.keys.management_key is not None:
            denied = self.keys.manager_only(request)
        if denied is not None:
            return denied
        return web.json_response({"data": credits_data(self.credit)})

    async def generation(self, request: web.Request) -> web.Response:
        """``/generation?id=``: 404 until ``generation_lag_s`` after the generation ended."""
        denied = self._auth(request)
        if denied is not None:
            return denied
        gen_id = request.query.get("id", "")
        if not gen_id:
            return bodies.error_response(400, "Missing required query parameter: id")
        row = self.generations.get(gen_id)
        gen = None if row is None else GenerationRecord(*row)
        if gen is None or self.clock.now() < gen.ready_s:
            return bodies.error_response(404, f"Generation {gen_id} not found")
        return web.json_response({"data": gen.to_json()})

    async def ledger_view(self, request: web.Request) -> web.Response:
        return web.json_response(self.ledger.to_json())

    # -- chat completions -----------------------------------------------------------------------

    async def chat(self, request: web.Request) -> web.StreamResponse:
        task = asyncio.current_task()  # aiohttp runs each request in a task of its own
        assert task is not None
        self._tasks.add(task)
        try:
            return await self._chat(request)
        finally:
            self._tasks.discard(task)

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        self._requests += 1
        request_no = self._requests
        denied = self._auth(request)
        if denied is not None:
            return denied
        raw = await request.read()
        try:
            # str input skips json's encoding detection; other encodings take the general path
            body = _decode(raw.decode()) if raw.isascii() else json.loads(raw)
        except ValueError as exc:
            self.ledger.count_error("bad_request")
            return bodies.error_response(400, f"Invalid JSON in request body: {exc}")
        if self.requests is not None:
            self.requests.append(body)
        problem = _check_body(body)
        model = self._models.get(body["model"]) if problem is None else None
        if problem is None and model is None:
            problem = f"{body['model']} is not a valid model ID"
        key, block = self.router.block(body.get("provider") if problem is None else None)
        if problem is None and isinstance(block, PolicyError):
            problem = f"Invalid provider preferences: {block}"
        if problem is not None or model is None or isinstance(block, PolicyError):
            self.ledger.count_error("bad_request")
            return bodies.error_response(400, problem or "Bad request")
        max_tokens = body.get("max_tokens", body.get("max_completion_tokens"))
        stream = bool(body.get("stream"))
        cache = cache_request(request.headers, raw, stream)
        hit = None if cache is None else self.response_cache.get(cache[0], self.clock.now())
        if hit is not None:  # before any provider: a hit bills nothing, holds nothing
            replay = Reply(
                self, request, body, hit.permaslug, hit.endpoint, request_no, 0,
                [(hit.endpoint, 200)], stream=stream, cached=hit, cache=cache,
            )  # fmt: skip
            return await replay.run(max_tokens)
        prompt_tokens = estimate_prompt_tokens(body["messages"], body)
        sent = _PARAMETER_KEYS.intersection(body)
        if "max_completion_tokens" in body:
            sent |= {"max_tokens"}
        plan = self.router.plan(
            model, key, block, max_tokens=max_tokens, sent=sent, prompt_tokens=prompt_tokens
        )
        if not plan.decision.candidates:
            self.ledger.count_error("no_route")
            return bodies.json_response(404, self.router.no_route(model, plan.decision, block))
        refused = refuse_request(self, request_no, model.model_id, stream)
        if refused is not None:
            return refused
        chain = plan.chain(uniform(self.seed, request_no, 1))
        held = hold_for(self, chain, prompt_tokens, max_tokens)
        if isinstance(held, web.Response):
            return held
        billed: list[Decimal] = []
        try:
            return await self._serve(
                request, body, model, chain, request_no, prompt_tokens, max_tokens, stream,
                billed, cache,
            )  # fmt: skip
        finally:
            if held:
                self.limits.release(held, sum(billed, Decimal(0)), self.clock.now())

    async def _serve(
        self,
        request: web.Request,
        body: Any,
        model: ServedModel,
        chain: Sequence[Endpoint],
        request_no: int,
        prompt_tokens: int,
        max_tokens: int | None,
        stream: bool,
        billed: list[Decimal],
        cache: tuple[str, int] | None,
    ) -> web.StreamResponse:
        """Serve a request the account may hold: the credit's 402, or the endpoints in turn
        (what it billed is appended to ``billed``)."""
        refused, reserved = reserve(self, request, chain, prompt_tokens, max_tokens)
        if refused is not None:
            return refused
        reply: Reply | None = None
        try:
            attempts: list[tuple[Endpoint, int]] = []
            failure: web.Response | None = None
            for attempt, endpoint in enumerate(chain):
                fault = None
                if self.faults:
                    fault = self.faults.draw("upstream", request_no, stream, endpoint, attempt)
                if fault is None:
                    attempts.append((endpoint, 200))
                    reply = Reply(
                        self,
                        request,
                        body,
                        model.permaslug,
                        endpoint,
                        request_no,
                        template_tokens(self.template, endpoint, prompt_tokens),
                        attempts,
                        stream=stream,
                        cache=cache,
                    )
                    return await reply.run(max_tokens)
                status, payload = bodies.upstream_error_body(
                    fault.kind, model=model.model_id, provider=endpoint.provider_name
                )
                failure = bodies.json_response(status, payload, {"X-Fake-Fault": fault.kind})
                attempts.append((endpoint, status))
                self.ledger.count_error(fault.kind)
            assert failure is not None
            return failure
        finally:
            entry = None if reply is None else reply.billed
            if entry is not None:
                billed.append(entry.cost_usd)
            settle(self, reserved, entry)


def _check_settings(
    snaps: Sequence[Snapshot],
    speed: float,
    reasoning_share: float,
    credit_usd: float | Decimal | None,
    in_flight_share: float | None,
) -> None:
    """The fake's settings, checked before anything is built."""
    if not snaps:
        raise ConfigError("the fake server needs at least one snapshot")
    if speed < 0 or not math.isfinite(speed):
        raise OptionError("{speed=}: must be 0 (no waits) or a positive factor", speed=speed)
    if not 0.0 <= reasoning_share <= 1.0:
        raise ConfigError(
            Message(
                "reasoning-share",
                "{reasoning_share=}: must be between 0 and 1",
                reasoning_share=reasoning_share,
            )
        )
    if credit_usd is not None and credit_usd < 0:
        raise ConfigError(
            Message("credit-negative", "{credit_usd=}: must not be negative", credit_usd=credit_usd)
        )
    if in_flight_share is not None and credit_usd is None:
        raise ConfigError(
            Message(
                "in-flight-share-needs-credit",
                "{in_flight_share:bare} is a share of the credit left: give {credit_usd:bare} too",
            )
        )


def _check_body(body: Any) -> str | None:
    """What is wrong with a chat request body (``None`` when nothing is). The wording is the
    fake's own where no real message was recorded (docs/fake-server.md lists which)."""
    if not isinstance(body, dict):
        return "Invalid request body: expected a JSON object"
    if not isinstance(body.get("model"), str) or not body["model"]:
        return "No models provided: set `model` to a model ID such as moonshotai/kimi-k2.5"
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return 'Input required: specify "messages" (a non-empty list of chat messages)'
    for m in messages:
        if not isinstance(m, dict) or "role" not in m:
            return 'Invalid messages: each message needs a "role" and "content"'
    for key in ("max_tokens", "max_completion_tokens"):
        value = body.get(key)
        if value is not None and (
            not isinstance(value, int) or isinstance(value, bool) or value < 1
        ):
            return f"{key} must be a positive integer, got {value!r}"
    return None

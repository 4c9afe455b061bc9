"""One endpoint's reply to one chat request: what it says, how it sends it, what it bills.

A ``Reply`` composes the answer (``fake.content``), sends it as a body with keep-alive padding or as
a stream (``fake.bodies``), paced by the endpoint's latency and throughput scaled by the server's
speed, strikes the response-phase fault it drew (``docs/fake-server.md``'s table), and bills what
was generated (or, for a stream the client abandoned, what was sent) into the ledger. Errors are
never billed. A response cache hit (``cached``) replays its answer and bills nothing.
"""

from __future__ import annotations

import asyncio
import itertools
import zlib
from collections import OrderedDict
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any, Protocol

from aiohttp import web

from openrouter_probe.api.schema import Endpoint, Percentiles
from openrouter_probe.fake import bodies
from openrouter_probe.fake.billing import Charge, Credit, advised, charge, output_cap, searched
from openrouter_probe.fake.clock import Clock
from openrouter_probe.fake.content import Answer, answer_for, at_limit
from openrouter_probe.fake.degrade import Degradation
from openrouter_probe.fake.faults import FaultPlan, FaultRule, uniform
from openrouter_probe.fake.ledger import Ledger, LedgerEntry
from openrouter_probe.fake.response_cache import CachedAnswer, ResponseCache
from openrouter_probe.fake.router import ServedModel
from openrouter_probe.fake.tags import first_match

__all__ = ["KEEPALIVE_S", "Reply", "Server"]

_JSON = "application/json"
_BATCH_BYTES = 32768
#: Seconds between keep-alives while an answer is on its way (padding or a comment).
KEEPALIVE_S = 5.0
_PAD_BEAT = b"\n         "
#: Prices without overrides do not depend on the time: skip reading the clock for them.
_NO_TIME = datetime(1970, 1, 1, tzinfo=UTC)
_EMPTY: dict[str, Any] = {}


def _draw(p: Percentiles | None, u: float, default: float) -> float:
    """Inverse-CDF draw from percentiles (p50..p99), linear between them (0 maps to p50/2)."""
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


#: Faults after which the answer is still whole (a response cache may keep it).
_WHOLE = frozenset({"slow_first_byte", "keepalive", "finish_null", "overbill", "byok"})


#: A cache hit's usage: every billable counter 0.
_NO_USAGE = bodies.usage_json(Charge(0, 0, 0, Decimal(0), Decimal(0)))


def _drop(request: web.Request) -> None:
    """Close the connection mid-body, as a dropped upstream does."""
    if request.transport is not None:
        request.transport.close()


class Server(Protocol):
    """What a reply and a batch read and write of the server (``FakeOpenRouter``, which imports
    this)."""

    _models: dict[str, ServedModel]
    clock: Clock
    credit: Credit
    seed: int
    speed: float
    degradation: Degradation
    sampling: dict[str, float]
    reasoning_share: float
    median_tokens: int
    generation_lag_s: float
    tokens_per_chunk: int
    ledger: Ledger
    generations: dict[str, tuple[Any, ...]]
    answers: OrderedDict[tuple[Any, ...], Answer]
    choices: dict[tuple[Any, ...], str]
    faults: FaultPlan
    response_cache: ResponseCache
    #: Extra prompt tokens by tag (``--degrade-template``; ``degrade.template_tokens``).
    template: dict[str, int]

    def new_id(self) -> str: ...
    def now(self) -> datetime: ...
    def remember(self, key: tuple[Any, ...], answer: Answer) -> None: ...
    def _auth(self, request: web.Request) -> web.Response | None: ...


class Reply:
    """One endpoint's reply to a request: the answer, the body or the stream, the bill."""

    def __init__(
        self,
        fake: Server,
        request: web.Request,
        body: dict[str, Any],
        permaslug: str,
        endpoint: Endpoint,
        request_no: int,
        prompt_tokens: int,
        attempts: list[tuple[Endpoint, int]],
        *,
        stream: bool,
        cached: CachedAnswer | None = None,
        cache: tuple[str, int] | None = None,
    ) -> None:
        self.fake = fake
        self.cached = cached  # a response cache hit: replay this, bill nothing
        self.cache = cache  # the response cache's key and TTL (the request asked for it)
        self.cap = 0  # the output tokens the request may produce (``output_cap``)
        self.overbill = 0.0  # the ``overbill`` fault's factor (0: bill what was generated)
        self.byok = False  # the ``byok`` fault: the provider bills the user's own key
        self.byok_usd: float | None = None  # then the provider's part of the bill
        self.request = request
        self.body = body
        self.permaslug = permaslug
        self.endpoint = endpoint
        self.request_no = request_no
        self.prompt_tokens = prompt_tokens
        self.attempts = attempts
        self.billed: LedgerEntry | None = None
        self.started_s = fake.clock.now()
        self.id = fake.new_id()
        self.streamed = stream
        self.cache_key: tuple[Any, ...] | None = None

    # -- what to say ----------------------------------------------------------------------------

    def _answer(self, max_tokens: int | None) -> tuple[Answer, bool]:
        """The answer (cached per distinct request) and whether reasoning text is shown."""
        fake, body = self.fake, self.body
        if self.cached is not None:
            return self.cached.answer, self.cached.show
        raw = body.get("reasoning")
        reasoning: dict[str, Any] = raw if isinstance(raw, dict) else _EMPTY
        enabled = not (
            reasoning.get("enabled") is False
            or reasoning.get("effort") == "none"
            or body.get("reasoning_effort") == "none"
        )
        show = not (reasoning.get("exclude") is True or body.get("include_reasoning") is False)
        budget = reasoning.get("max_tokens")  # the reasoning budget: reasoning stops there
        if isinstance(budget, bool) or not isinstance(budget, int) or budget < 0:
            budget = None
        temperature = body.get("temperature")
        hot = isinstance(temperature, int | float) and temperature > 0
        nonce = self.request_no if hot else None
        cap = self.cap = output_cap(max_tokens, self.endpoint, self.prompt_tokens)
        messages = body["messages"]
        tools = body.get("tools")
        if not tools or not isinstance(tools, list) or body.get("tool_choice") == "none":
            tools = None
        changes = fake.degradation
        # repr of the parsed JSON: cheaper than dumping it, and equal for equal requests
        key = (repr(messages), nonce, cap, enabled, budget, None if tools is None else repr(tools))
        answer = fake.answers.get(key)
        if answer is None:
            sampled = 0.0
            if nonce is not None:  # the endpoint may sample hotter (``--degrade-sampling``)
                assert isinstance(temperature, int | float)
                sampled = float(temperature) * first_match(fake.sampling, self.endpoint, 1.0)
            top_p = body.get("top_p")
            answer = answer_for(
                messages,
                seed=fake.seed,
                nonce=nonce,
                max_tokens=cap,
                reasoning=enabled,
                reasoning_budget=budget,
                reasoning_share=fake.reasoning_share,
                median_tokens=fake.median_tokens,
                tools=tools,
                hard=changes.hard,
                temperature=sampled,
                top_p=float(top_p) if isinstance(top_p, int | float) and 0 < top_p <= 1 else 1.0,
            )
            fake.remember(key, answer)
        self.cache_key = key
        if changes.active:
            seeded = (fake.seed, key[0], nonce, self.endpoint.tag)
            noise = uniform(fake.seed, self.request_no, 0x6E6F69)
            changed = changes.change(answer, self.endpoint, seeded, noise)
            if changed is not answer:
                self.cache_key = None  # a changed answer is this request's own: not shared
                answer = changed
        return answer, show

    def _logprobs_top(self) -> int | None:
        """``top_logprobs`` when logprobs were asked for and the endpoint lists them."""
        if self.body.get("logprobs") is not True:
            return None
        if "logprobs" not in self.endpoint.supported_parameters:
            return None
        top = self.body.get("top_logprobs")
        return top if isinstance(top, int) and not isinstance(top, bool) and top > 0 else 0

    def _bill(self, reasoning_tokens: int, content_tokens: int, *, cancelled: bool) -> str:
        """Charge the tokens at the endpoint's prices, add the ledger entry, return ``usage``
        serialized."""
        fake = self.fake
        if self.cached is not None:  # a response cache hit: every billable counter 0
            return _NO_USAGE
        if self.overbill:  # billed past max_tokens: the tokens past what was sent as reasoning
            billed = -(-int(self.overbill * self.cap * 1000) // 1000)
            reasoning_tokens += max(0, billed - reasoning_tokens - content_tokens)
        searches, results, found_tokens = searched(self.body, self.endpoint, self.prompt_tokens)
        c = charge(
            self.endpoint,
            prompt_tokens=self.prompt_tokens + found_tokens,
            completion_tokens=reasoning_tokens + content_tokens,
            reasoning_tokens=reasoning_tokens,
            at=fake.now() if self.endpoint.pricing.overrides else _NO_TIME,
            searches=searches,
            search_results=results,
            byok=self.byok,
            advisor_usd=advised(self.body, self.endpoint, self.prompt_tokens),
        )
        if c.byok:
            self.byok_usd = float(c.tokens_usd)
        self.billed = LedgerEntry(
            generation_id=self.id,
            model=self.permaslug,
            provider=self.endpoint.provider_name,
            tag=self.endpoint.tag,
            prompt_tokens=c.prompt_tokens,
            completion_tokens=c.completion_tokens,
            reasoning_tokens=c.reasoning_tokens,
            cost_usd=c.total_usd,
            streamed=self.streamed,
            cancelled=cancelled,
            created=int(self.started_s),
        )
        fake.ledger.add(self.billed)
        return bodies.usage_json(c)

    def _record(self, finish: str | None, *, first_byte_s: float, cancelled: bool = False) -> None:
        fake = self.fake
        end = fake.clock.now()
        billed = self.billed
        # a plain tuple in GenerationRecord's field order (a tuple subclass stays GC-tracked)
        fake.generations[self.id] = (
            self.id,
            self.permaslug,
            self.endpoint.provider_name,
            self.endpoint.tag,
            self.started_s,
            end + fake.generation_lag_s,
            self.streamed,
            cancelled,
            finish,
            billed.prompt_tokens if billed else 0,
            billed.completion_tokens if billed else 0,
            billed.reasoning_tokens if billed else 0,
            float(billed.cost_usd) if billed else 0.0,
            (first_byte_s - self.started_s) * 1000,
            (end - first_byte_s) * 1000,
            tuple([(e.tag, e.provider_name, status) for e, status in self.attempts]),
            None if self.cached is None else self.cached.source_id,
            self.byok_usd,
        )

    def _headers(self, fault: FaultRule | None) -> dict[str, str]:
        headers = {"X-Generation-Id": self.id}
        if fault is not None:
            headers["X-Fake-Fault"] = fault.kind
        if self.cache is not None:
            headers["X-OpenRouter-Cache-Status"] = "HIT" if self.cached is not None else "MISS"
            headers["X-OpenRouter-Cache-TTL"] = str(self.cache[1])
        return headers

    def _store(self, answer: Answer, show: bool, fault: FaultRule | None) -> None:
        """Keep a whole 200 answer in the response cache, when the request asked for it."""
        if self.cache is None or self.cached is not None:
            return
        if fault is not None and fault.kind not in _WHOLE:
            return
        key, ttl = self.cache
        now = self.fake.clock.now()
        entry = CachedAnswer(answer, show, self.endpoint, self.permaslug, now, float(ttl), self.id)
        self.fake.response_cache.put(key, entry)

    def _pace(self) -> tuple[float, float]:
        """Time to first token and seconds per token, drawn from the endpoint's latency (ms) and
        throughput (tokens/s) percentiles, over ``speed``."""
        speed, seed, endpoint = self.fake.speed, self.fake.seed, self.endpoint
        if speed == 0:
            return 0.0, 0.0
        tag = zlib.crc32(endpoint.tag.encode())
        ttft = _draw(endpoint.latency_last_30m, uniform(seed, self.request_no, tag, 3), 1000.0)
        u = uniform(seed, self.request_no, tag, 4)
        tps = _draw(endpoint.throughput_last_30m, 1.0 - u, 40.0)
        return ttft / 1000.0 / speed, 1.0 / max(tps, 0.1) / speed

    # -- how to say it --------------------------------------------------------------------------

    async def _wait(self, seconds: float, response: web.StreamResponse, beat: bytes) -> None:
        """Wait ``seconds`` of the server's clock, sending ``beat`` every ``KEEPALIVE_S`` as
        OpenRouter does (whitespace before a body, ``: OPENROUTER PROCESSING`` in a stream), so a
        client's read timeout sees the same traffic it would see for real."""
        while seconds > 0:
            step = min(seconds, KEEPALIVE_S)
            await self.fake.clock.sleep(step)
            seconds -= step
            if seconds > 0:
                await response.write(beat)

    async def run(self, max_tokens: int | None) -> web.StreamResponse:
        fake, stream = self.fake, self.streamed
        fault = None
        if fake.faults and self.cached is None:
            fault = fake.faults.draw("response", self.request_no, stream, self.endpoint)
        answer, show = self._answer(max_tokens)
        if fault is not None:
            fake.ledger.count_error(fault.kind)
            if fault.kind == "slow_first_byte":
                await fake.clock.sleep(fault.wait_s)
            elif fault.kind == "finish_null":
                answer = at_limit(answer, self.cap)
                self.cache_key = None  # this request's own answer: not shared
            elif fault.kind == "overbill":
                self.overbill = fault.wait_s
            elif fault.kind == "byok":
                self.byok = True
        if stream:
            return await self._stream(answer, show, fault)
        return await self._complete(answer, show, fault)

    async def _complete(
        self, answer: Answer, show: bool, fault: FaultRule | None
    ) -> web.StreamResponse:
        """A non-streaming body: padding at once, the JSON when the answer is done."""
        fake = self.fake
        kind = fault.kind if fault is not None else None
        top = self._logprobs_top()
        ttft, per_token = self._pace()
        generating = answer.completion_tokens * per_token
        choice_error = None
        usage: str | None = None
        if kind == "choice_error":
            provider = self.endpoint.provider_name
            choice_error = {
                "code": 502,
                "message": f"Upstream error from {provider}: connection reset by peer",
                "metadata": {"provider_name": provider, "raw": "connection reset by peer"},
            }
        elif kind != "drop":
            usage = self._bill(len(answer.reasoning), answer.output_tokens, cancelled=False)
        if choice_error is None and self.cache_key is not None:
            ckey = (self.cache_key, show, top)
            choices = fake.choices.get(ckey)
            if choices is None:
                choices = fake.choices[ckey] = bodies.choices_json(
                    answer, show_reasoning=show, top=top
                )
                if len(fake.choices) > len(fake.answers) + 64:
                    fake.choices.clear()  # bounded like the answer cache it mirrors
        else:
            choices = bodies.choices_json(
                answer, show_reasoning=show, top=top, choice_error=choice_error
            )
        payload = bodies.completion_body(
            generation_id=self.id,
            created=int(self.started_s),
            model=self.permaslug,
            provider=self.endpoint.provider_name,
            choices=choices,
            usage=usage,
        )
        finish = "error" if kind in ("choice_error", "drop") else answer.finish_reason
        if kind == "keepalive" and fault is not None:
            ttft += fault.wait_s  # padding only, then the answer
        if ttft == 0 and generating == 0 and kind != "drop":
            self._store(answer, show, fault)
            self._record(finish, first_byte_s=fake.clock.now())
            return web.Response(
                status=200, body=payload, content_type=_JSON, headers=self._headers(fault)
            )
        response = web.StreamResponse(status=200, headers=self._headers(fault))
        response.content_type = _JSON
        # chunked: keep-alive padding goes out while the answer is on its way
        first = fake.clock.now()
        try:
            await response.prepare(self.request)
            pad = len(bodies.PADDING)
            await response.write(payload[:pad])  # keep-alive padding at once, as OpenRouter does
            await self._wait(ttft, response, _PAD_BEAT)
            first = fake.clock.now()  # the first token: what /generation reports as latency
            await self._wait(generating, response, _PAD_BEAT)
            if kind == "drop":
                await response.write(payload[pad : pad + (len(payload) - pad) // 2])
                _drop(self.request)
            else:
                await response.write(payload[pad:])
                await response.write_eof()
        except ConnectionError:
            pass  # the client left: a non-streaming answer is billed in full all the same
        if kind != "drop":  # generated whole and billed, whether the client stayed or not
            self._store(answer, show, fault)
        self._record(finish, first_byte_s=first)
        return response

    async def _stream(
        self, answer: Answer, show: bool, fault: FaultRule | None
    ) -> web.StreamResponse:
        """An SSE stream; a client that goes away is billed for the tokens already sent."""
        fake = self.fake
        writer = bodies.ChunkWriter(
            generation_id=self.id,
            created=int(self.started_s),
            model=self.permaslug,
            provider=self.endpoint.provider_name,
        )
        response = web.StreamResponse(status=200, headers=self._headers(fault))
        response.content_type = "text/event-stream"
        response.headers["Cache-Control"] = "no-cache"
        n = fake.tokens_per_chunk
        n_frames = bodies.frame_count(answer, n)
        ttft, per_token = self._pace()
        kind = fault.kind if fault is not None else None
        cut = n_frames // 2 if kind in ("stream_error", "drop", "stall") else n_frames
        sent_r = sent_c = 0
        first = fake.clock.now()
        try:
            await response.prepare(self.request)
            first = fake.clock.now()
            await response.write(bodies.PROCESSING)
            keepalive = fault.wait_s if fault is not None and kind == "keepalive" else 0.0
            await self._wait(ttft + keepalive, response, bodies.PROCESSING)
            first = fake.clock.now()
            batch: list[str] = []
            size = pending_r = pending_c = 0
            frames = writer.frames(answer, show=show, n=n, top=self._logprobs_top())
            for frame, n_r, n_c in itertools.islice(frames, cut):
                if per_token:
                    await fake.clock.sleep(per_token * (n_r + n_c))
                batch.append(frame)
                size += len(frame)
                pending_r += n_r
                pending_c += n_c
                if per_token or size > _BATCH_BYTES:
                    await response.write("".join(batch).encode())
                    sent_r, sent_c = sent_r + pending_r, sent_c + pending_c
                    batch, size, pending_r, pending_c = [], 0, 0, 0
            if batch:
                await response.write("".join(batch).encode())
            sent_r, sent_c = sent_r + pending_r, sent_c + pending_c
            if kind in ("drop", "stall"):
                if fault is not None and kind == "stall":
                    await fake.clock.sleep(fault.wait_s)
                self._record("error", first_byte_s=first)
                _drop(self.request)
                return response
            finish: str | None = "error"
            if kind == "stream_error":
                provider = {"provider_name": self.endpoint.provider_name}
                error = {"error_type": "provider_unavailable", **provider}
                said = {"code": 502, "message": "Provider returned error", "metadata": error}
                data = writer.error(said).encode()
            elif kind == "length_error":  # issue 23: content, a length finish, then an error
                tail = writer.error({"code": 400, "message": "Token limit reached"})
                data = (writer.finish("length") + tail).encode()
            else:
                usage = self._bill(sent_r, sent_c, cancelled=False)
                finish = answer.finish_reason
                tail = writer.finish(finish) + writer.finish(finish, usage=usage)
                data = tail.encode() + bodies.DONE
            await response.write(data)
            await response.write_eof()
            self._store(answer, show, fault)  # an error's answer is not whole: not kept
            self._record(finish, first_byte_s=first)
            return response
        except (ConnectionError, asyncio.CancelledError) as exc:
            # The client went away (or the server is stopping): bill what was sent, as providers
            # without stream cancellation do. Faulted streams are errors and stay unbilled.
            if kind in (None, "keepalive") and self.billed is None:
                self._bill(sent_r, sent_c, cancelled=True)
                self._record(None, first_byte_s=first, cancelled=True)
            if isinstance(exc, asyncio.CancelledError):
                raise
            return response

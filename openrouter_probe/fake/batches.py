"""The fake's Batch API: ``/api/v1/batches`` served from a snapshot's ``:batch`` endpoints.

Its bodies are the shapes the official SDK 1.3.84 types (``openrouter.components.BatchObject``
...); what it does, route by route (the submit-time refusals, the status on the fake's clock,
billing at finalize, the 402 gate, the ``batch`` faults, the ``batch_api`` mounts), is in
``docs/fake-server.md`` ("The Batch API"), following the facts in ``docs/batch.md`` with their
sources (a ``batch_expire`` bills half the lines: the harsher reading of an open question). One
batch on the clock is ``fake.batch_run``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import math
from datetime import UTC, datetime
from decimal import Decimal
from email.utils import formatdate
from typing import Any

from aiohttp import web

from openrouter_probe.errors import ConfigError, Message
from openrouter_probe.fake.batch_run import (
    FINALIZING_S,
    TERMINAL,
    VALIDATING_S,
    BatchLine,
    BatchRun,
)
from openrouter_probe.fake.billing import output_cap, worst_case_usd
from openrouter_probe.fake.degrade import template_tokens
from openrouter_probe.fake.reply import Server
from openrouter_probe.rules.prompt_tokens import estimate_prompt_tokens
from openrouter_probe.rules.routing import BATCH_PROVIDER_KEYS, route_batch

__all__ = ["BATCH_ENDPOINTS", "FINALIZING_S", "MAX_REQUESTS", "VALIDATING_S", "BatchService"]

#: The ``endpoint`` values a batch accepts (SDK 1.3.84 ``BatchSubmitBody``).
BATCH_ENDPOINTS = ("/v1/chat/completions", "/v1/responses", "/v1/messages", "/v1/embeddings")
#: Requests per batch (OpenRouter's documented limit).
MAX_REQUESTS = 5000
_LIST_STATUSES = frozenset(
    {"validating", "in_progress", "completed", "failed", "expired", "cancelled"}
)
#: Where the routes are mounted, by ``batch_api``.
_MOUNTS = {"v1": ["/api/v1"], "beta": ["/api/beta"], "both": ["/api/v1", "/api/beta"]}
_ORDER_MESSAGE = (
    "endpoint and model are required and must appear before requests in the request body"
)


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": {"code": status, "message": message}}, status=status)


class BatchService:
    """The Batch API of one ``FakeOpenRouter``: its batches, their clock and their bills."""

    def __init__(self, fake: Server, *, batch_seconds: float = 420.0, mount: str = "v1") -> None:
        if batch_seconds < 0 or not math.isfinite(batch_seconds):
            raise ConfigError(
                Message(
                    "batch-seconds",
                    "{batch_seconds=}: must be 0 or a positive number",
                    batch_seconds=batch_seconds,
                )
            )
        if mount not in _MOUNTS:
            raise ConfigError(f"batch_api {mount!r}: must be v1, beta or both")
        self.fake, self.mount = fake, mount
        self.batch_seconds = batch_seconds
        self.batches: dict[str, BatchRun] = {}
        self._count = 0

    def register(self, app: web.Application) -> None:
        """Add the routes (under ``mount``: ``v1``, ``beta`` or ``both``) and the ``:batch``
        variant's ``/endpoints`` (before the sync ``/endpoints`` route, which would answer 404)."""
        app.router.add_get("/api/v1/models/{author}/{slug:[^/]+:batch}/endpoints", self.endpoints)
        app.on_response_prepare.append(self._dated)
        for prefix in _MOUNTS[self.mount]:
            app.router.add_post(f"{prefix}/batches", self.create)
            app.router.add_get(f"{prefix}/batches", self.list)
            app.router.add_get(f"{prefix}/batches/{{id}}", self.get)
            app.router.add_get(f"{prefix}/batches/{{id}}/results", self.results_page)
            app.router.add_delete(f"{prefix}/batches/{{id}}", self.delete)

    async def _dated(self, request: web.Request, response: web.StreamResponse) -> None:
        """A Batch API answer's ``Date`` is the fake's clock (what ``created_at`` is on), as a
        server's own clock is, whatever the client's says."""
        if "/batches" in request.path:
            response.headers["Date"] = formatdate(self.fake.clock.now(), usegmt=True)

    # -- the :batch variant's endpoints ---------------------------------------------------------

    async def endpoints(self, request: web.Request) -> web.Response:
        base = f"{request.match_info['author']}/{request.match_info['slug'].removesuffix(':batch')}"
        model = self.fake._models.get(base)
        listing = None if model is None else model.snapshot.batch
        if listing is None or listing.data is None or not listing.endpoints:
            error = {"message": f"No endpoints found for {base}:batch.", "code": 404}
            return web.json_response({"error": error}, status=404)
        return web.json_response({"data": dict(listing.data)})

    # -- create ----------------------------------------------------------------------------------

    async def create(self, request: web.Request) -> web.Response:
        denied = self.fake._auth(request)
        if denied is not None:
            return denied
        try:
            body = json.loads(await request.read())
        except ValueError as exc:
            return _error(400, f"Invalid JSON in request body: {exc}")
        if not isinstance(body, dict):
            return _error(400, "Invalid request body: expected a JSON object")
        keys = list(body)  # JSON objects keep their order: OpenRouter reads the body as a stream
        ahead = keys[: keys.index("requests")] if "requests" in keys else keys
        if "endpoint" not in ahead or "model" not in ahead:
            return _error(400, _ORDER_MESSAGE)
        for key in ("callback_url", "completion_window", "provider"):
            if key in keys and key not in ahead:
                return _error(400, f"{key} must appear before requests in the request body")
        refused = self._refuse(body)
        if refused is not None:
            return refused
        model = self.fake._models[body["model"]]
        decision = route_batch(body.get("provider"), model.snapshot.batch_endpoints)
        if not decision.candidates:
            only = ", ".join(map(str, (body.get("provider") or {}).get("only") or []))
            return _error(
                404,
                f"Model '{body['model']}' does not have an eligible :batch endpoint matching "
                f"provider.only: {only}.",
            )
        runs_on = decision.admitted[0]
        lines = [BatchLine(str(r["custom_id"]), dict(r["body"])) for r in body["requests"]]
        estimate = Decimal(0)
        now = self.fake.now()
        for line in lines:
            messages = line.body.get("messages")
            line.prompt_tokens = template_tokens(
                self.fake.template,
                runs_on,
                estimate_prompt_tokens(messages if isinstance(messages, list) else [], line.body),
            )
            raw_max = line.body.get("max_tokens", line.body.get("max_completion_tokens"))
            line.max_tokens = output_cap(
                raw_max if isinstance(raw_max, int) else None, runs_on, line.prompt_tokens
            )
            estimate += worst_case_usd(
                runs_on,
                prompt_tokens=line.prompt_tokens,
                max_tokens=max(line.max_tokens, 1),
                at=now,
            )
        available = self.fake.credit.available_usd
        if available is not None and estimate > available:
            self.fake.ledger.count_error("batch_preflight_402")
            return _error(
                402,
                f"Insufficient credits for this batch: its estimated cost ${float(estimate):.6f} "
                f"is above the spendable balance ${float(available):.6f}. Add more using "
                "https://openrouter.ai/settings/credits",
            )
        self._count += 1
        number = self._count
        created = int(self.fake.clock.now())
        digest = hashlib.blake2b(f"{self.fake.seed}:{number}".encode(), digest_size=15).digest()
        batch_id = f"batch-{created}-{base64.b64encode(digest).decode().translate(str.maketrans('+/', 'Qz'))}"
        batch = BatchRun(number, batch_id, model, str(body["endpoint"]), runs_on, lines, created)
        self._strike(batch)
        self.batches[batch_id] = batch
        return web.json_response(batch.to_object(results=False), status=202)

    def _refuse(self, body: dict[str, Any]) -> web.Response | None:
        """The submit-time 4xx for a body whose fields are in order (``None``: accept it)."""
        model_id = body.get("model")
        if not isinstance(model_id, str) or not model_id:
            return _error(400, _ORDER_MESSAGE)
        if body.get("endpoint") not in BATCH_ENDPOINTS:
            return _error(400, f"endpoint must be one of {', '.join(BATCH_ENDPOINTS)}")
        model = self.fake._models.get(model_id.removesuffix(":batch"))
        if model is None or not model.snapshot.batch_endpoints:
            return _error(400, f"Model '{model_id}' does not have a :batch endpoint.")
        if model_id.endswith(":batch"):
            body["model"] = model_id.removesuffix(":batch")
        if body.get("completion_window", "24h") != "24h":
            return _error(400, "completion_window must be 24h")
        provider = body.get("provider")
        if provider is not None:
            if not isinstance(provider, dict):
                return _error(400, "provider must be an object with only and allow_fallbacks")
            extra = sorted(set(provider) - set(BATCH_PROVIDER_KEYS))
            if extra:
                return _error(
                    400,
                    f"Batch requests support only provider.only and provider.allow_fallbacks; "
                    f"remove {', '.join(extra)}",
                )
        requests = body.get("requests")
        if not isinstance(requests, list) or not requests:
            return _error(400, "requests must contain at least one item.")
        if len(requests) > MAX_REQUESTS:
            return _error(
                400, f"A batch holds at most {MAX_REQUESTS} requests; got {len(requests)}."
            )
        seen: set[str] = set()
        for number, item in enumerate(requests, start=1):
            if (
                not isinstance(item, dict)
                or not isinstance(item.get("custom_id"), str)
                or not item["custom_id"]
            ):
                return _error(400, f"Request at line {number} is missing custom_id.")
            if not isinstance(item.get("body"), dict):
                return _error(400, f"Request at line {number} has no body object.")
            cid = item["custom_id"]
            if cid in seen:
                return _error(422, f"Request at line {number} has a duplicate custom_id '{cid}'.")
            seen.add(cid)
            line_model = item["body"].get("model")
            if line_model is not None and line_model.removesuffix(":batch") != body["model"]:
                return _error(400, "Each batch request body model must match the top-level model.")
        return None

    def _strike(self, batch: BatchRun) -> None:
        """Decide the batch's faults and each line's fate now (seeded: the same every run)."""
        plan = self.fake.faults
        for index, rule in enumerate(plan.rules):
            if rule.phase != "batch" or not rule.applies_to(batch.runs_on, stream=False):
                continue
            if rule.kind == "line_fail":
                for i, line in enumerate(batch.lines, start=1):
                    if rule.strikes(i, plan.seed, batch.number * 100_003 + i, index, 5):
                        line.failed = True
            elif rule.strikes(batch.number, plan.seed, batch.number, index, 5):
                if rule.kind == "batch_404":
                    batch.hidden_until = self.fake.clock.now() + rule.wait_s
                elif batch.fault is None:
                    batch.fault = rule.kind
        for line in batch.lines:
            if line.body.get("stream") is True:
                batch.error = "Batch requests do not support stream: true."
            value = line.body.get("max_tokens")
            if value is not None and (not isinstance(value, int) or value < 1):
                batch.error = f"Batch request '{line.custom_id}' has max_tokens below 1."

    # -- the clock -------------------------------------------------------------------------------

    def _find(self, request: web.Request) -> BatchRun | web.Response:
        """The batch the path names, moved to where the clock says it is (or the 401/404)."""
        denied = self.fake._auth(request)
        if denied is not None:
            return denied
        batch = self.batches.get(request.match_info["id"])
        if batch is None or self.fake.clock.now() < batch.hidden_until:
            return _error(404, f"Batch job {request.match_info['id']} not found.")
        batch.tick(self.fake, self.batch_seconds)
        return batch

    def _gate(self, batch: BatchRun) -> web.Response | None:
        if not batch.gated:
            return None
        self.fake.ledger.count_error("batch_results_402")
        message = (
            f"Results withheld until the batch charge of ${float(batch.cost_usd):.6f} is covered. "
            "Add credits to unlock the already-computed results; the batch is not re-run."
        )
        error = {"code": 402, "message": message}
        return web.json_response({**batch.to_object(results=False), "error": error}, status=402)

    # -- reads -----------------------------------------------------------------------------------

    async def get(self, request: web.Request) -> web.Response:
        batch = self._find(request)
        if isinstance(batch, web.Response):
            return batch
        return self._gate(batch) or web.json_response(batch.to_object(results=True))

    async def results_page(self, request: web.Request) -> web.Response:
        batch = self._find(request)
        if isinstance(batch, web.Response):
            return batch
        gated = self._gate(batch)
        if gated is not None:
            return gated
        if batch.status not in TERMINAL:
            return _error(
                409, f"Batch {batch.id} is {batch.status}; results are served once it has finished."
            )
        try:
            limit = int(request.query.get("limit", "100"))
        except ValueError:
            return _error(400, "limit must be an integer from 1 to 1000")
        if not 1 <= limit <= 1000:
            return _error(400, "limit must be an integer from 1 to 1000")
        start = 0
        cursor = request.query.get("cursor")
        if cursor:
            try:
                tag, owner, offset = (
                    base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode().split(":")
                )
                start = int(offset)
                if tag != "v1" or owner != batch.id:
                    raise ValueError(cursor)
            except (ValueError, binascii.Error, UnicodeDecodeError):
                return _error(400, f"cursor {cursor!r} is not a cursor of this batch's results")
        rows = batch.results or []
        page = rows[start : start + limit]
        end = start + len(page)
        next_cursor = (
            base64.urlsafe_b64encode(f"v1:{batch.id}:{end}".encode()).decode().rstrip("=")
            if end < len(rows)
            else None
        )
        listing = {"object": "list", "data": page, "has_more": next_cursor is not None}
        return web.json_response({**listing, "next_cursor": next_cursor})

    async def list(self, request: web.Request) -> web.Response:
        denied = self.fake._auth(request)
        if denied is not None:
            return denied
        query = request.query
        try:
            limit = int(query.get("limit", "20"))
            after_t = _timestamp(query.get("created_after"))
            before_t = _timestamp(query.get("created_before"))
        except ValueError as exc:
            return _error(400, str(exc))
        if not 1 <= limit <= 100:
            return _error(400, "limit must be an integer from 1 to 100")
        statuses = set(query.getall("status", []))
        if statuses - _LIST_STATUSES:
            return _error(400, f"status must be one of {', '.join(sorted(_LIST_STATUSES))}")
        now = self.fake.clock.now()
        items = sorted(self.batches.values(), key=lambda b: (b.created_at, b.number), reverse=True)
        after = query.get("after")
        if after:
            ids = [b.id for b in items]
            items = items[ids.index(after) + 1 :] if after in ids else []
        picked = []
        for b in items:
            if now < b.hidden_until:
                continue
            if (after_t is not None and b.created_at <= after_t) or (
                before_t is not None and b.created_at >= before_t
            ):
                continue
            b.tick(self.fake, self.batch_seconds)
            # the list shows ``finalizing`` as ``in_progress``
            listed = "in_progress" if b.status == "finalizing" else b.status
            item = {**b.to_object(results=False), "status": listed}
            if not statuses or item["status"] in statuses:
                picked.append(item)
        data = picked[:limit]
        first, last = (data[0]["id"], data[-1]["id"]) if data else (None, None)
        listing = {"object": "list", "data": data, "first_id": first, "last_id": last}
        return web.json_response({**listing, "has_more": len(picked) > limit})

    async def delete(self, request: web.Request) -> web.Response:
        batch = self._find(request)
        if isinstance(batch, web.Response):
            return batch
        if batch.status not in TERMINAL:
            return _error(
                409, f"Batch {batch.id} is {batch.status}; only a finished batch can be deleted."
            )
        del self.batches[batch.id]
        upstream = {"provider": batch.runs_on.provider_name, "status": "unsupported"}
        deletion = {"openrouter": "deleted", "upstream": upstream}
        return web.json_response({"id": batch.id, "object": "batch", "deletion": deletion})


def _timestamp(value: str | None) -> float | None:
    """``created_after``/``created_before``: Unix seconds or an ISO-8601 time."""
    if value is None or value == "":
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:
        when = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"{value!r} is not Unix seconds or an ISO-8601 time") from None
    return (when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp()

"""The fake OpenRouter's keys, each with its own limit: the key it was started with (the default
key: ``--key-limit-usd``) and the keys of its management API (``--management-key KEY``).

``KeyStore`` serves ``/api/v1/keys`` and ``/api/v1/activity`` to the management key only (the
routes and their bodies, the spec's: ``docs/fake-server.md``, "Keys: the management API"), and
holds every chat request to its key's limit (``admit``, then ``settle``).
"""

from __future__ import annotations

import hashlib
import json
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING, Any

from aiohttp import web

from openrouter_probe.errors import ConfigError
from openrouter_probe.fake import bodies
from openrouter_probe.fake.account import dearest_worst_case, key_data, usage_fields
from openrouter_probe.fake.billing import Credit, affordable_tokens, output_cap

if TYPE_CHECKING:
    from openrouter_probe.api.schema import Endpoint
    from openrouter_probe.fake.ledger import Ledger, LedgerEntry

__all__ = ["DEFAULT_HASH", "KeyStore", "ManagedKey"]

_RESETS = (None, "daily", "weekly", "monthly")
_KEY_LIMIT_HINT = "Raise the key's limit or use another key"


def _iso(moment: datetime) -> str:
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")


@dataclass
class ManagedKey:
    """A key made through the management API: its limit, its spend and its activity."""

    hash: str
    secret: str
    name: str
    created_at: str
    limit_reset: str | None = None
    include_byok_in_limit: bool = False
    expires_at: str | None = None
    disabled: bool = False
    updated_at: str | None = None
    credit: Credit = field(default_factory=lambda: Credit(None))
    #: what the key was billed, one entry per generation (``/activity`` sums them)
    billed: list[LedgerEntry] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        limit, remaining = self.credit.limit_usd, self.credit.remaining_usd
        return {
            "hash": self.hash,
            "name": self.name,
            "label": f"{self.secret[:12]}...{self.secret[-4:]}",
            "disabled": self.disabled,
            "limit": None if limit is None else float(limit),
            "limit_remaining": None if remaining is None else float(remaining),
            "limit_reset": self.limit_reset,
            "include_byok_in_limit": self.include_byok_in_limit,
            **usage_fields(float(self.credit.spent_usd)),
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "expires_at": self.expires_at,
            "creator_user_id": None,
            "workspace_id": None,
        }


#: The default key's hash (the sha256 of no secret: the fake takes any key as its default key)
DEFAULT_HASH = hashlib.sha256(b"").hexdigest()


class KeyStore:
    """The fake's keys: the default key (``default``) and those a management key made, by hash
    and by secret; the management routes and the chat checks."""

    def __init__(
        self,
        management_key: str | None,
        *,
        ledger: Ledger,
        now: Callable[[], datetime],
        default_limit_usd: Decimal | None = None,
    ) -> None:
        self.ledger = ledger  # the server's: refusals are counted there
        self.now = now  # the server's clock
        self.management_key = management_key
        self.keys: dict[str, ManagedKey] = {}
        self._by_secret: dict[str, str] = {}
        if default_limit_usd is not None and default_limit_usd < 0:
            raise ConfigError(f"key_limit_usd {default_limit_usd}: must not be negative")
        #: every other key the fake accepts: its limit is ``key_limit_usd`` (``--key-limit-usd``)
        self.default = ManagedKey(
            hash=DEFAULT_HASH,
            secret="",
            name="default",
            created_at=_iso(now()),
            credit=Credit(default_limit_usd),
        )

    def register(self, app: web.Application) -> None:
        """Mount the management API (only with a management key)."""
        if self.management_key is None:
            return
        app.router.add_get("/api/v1/keys", self.list_keys)
        app.router.add_post("/api/v1/keys", self.create)
        app.router.add_get("/api/v1/keys/{hash}", self.get)
        app.router.add_patch("/api/v1/keys/{hash}", self.patch)
        app.router.add_delete("/api/v1/keys/{hash}", self.delete)
        app.router.add_get("/api/v1/activity", self.activity)

    # -- who is calling ---------------------------------------------------------------------------

    @staticmethod
    def bearer(request: web.Request) -> str:
        scheme, _, key = request.headers.get("Authorization", "").partition(" ")
        return key.strip() if scheme.lower() == "bearer" else ""

    def knows(self, secret: str) -> bool:
        """A secret the server accepts: the management key or one of its keys (even deleted keys
        are refused later, with their own message)."""
        return (
            self.management_key is not None and secret == self.management_key
        ) or secret in self._by_secret

    def of(self, secret: str) -> ManagedKey | None:
        found = self._by_secret.get(secret)
        return None if found is None else self.keys.get(found)

    def manager_only(self, request: web.Request) -> web.Response | None:
        """The 401 for a request not made with the management key (``None``: it is)."""
        secret = self.bearer(request)
        if not secret:
            return bodies.error_response(401, "No auth credentials found")
        if self.management_key is None or secret != self.management_key:
            return bodies.error_response(
                401, "Invalid management key: this endpoint needs a management key"
            )
        return None

    # -- the chat handler's checks --------------------------------------------------------------

    def admit(
        self,
        request: web.Request,
        chain: Sequence[Endpoint],
        prompt_tokens: int,
        max_tokens: int | None,
        now: datetime,
    ) -> tuple[web.Response | None, ManagedKey | None, Decimal]:
        """The request's key and its worst case, reserved on the key at once (no ``await`` between
        the check and the reservation: concurrent requests cannot both take the last of a key's
        limit); or its refusal: the management key, a deleted, disabled or expired key, a spent
        limit (the 402 "can only afford N", ``limit_source: openrouter_key_limit``, OPENROUTER.md
        18, or the 403 "Key limit exceeded", 15). A secret the store did not make is the default
        key's; without a limit it is not held (``None``: nothing to reserve or settle)."""
        secret = self.bearer(request)
        if self.management_key is not None and secret == self.management_key:
            message = "Management keys cannot be used for completions; use an API key"
            return self._refused("management_key", 403, message)
        key = self.of(secret) if secret in self._by_secret else self.default
        if key is None:
            return self._refused("key_deleted", 401, "User not found.")
        if key.disabled:
            return self._refused("key_disabled", 403, "This API key is disabled")
        if key.expires_at is not None and _iso(now) >= key.expires_at:
            return self._refused("key_expired", 401, "This API key has expired")
        available = key.credit.available_usd
        if available is None:  # no limit: only a managed key's usage is counted
            return None, None if key is self.default else key, Decimal(0)
        need, dearest = dearest_worst_case(chain, prompt_tokens, max_tokens, now)
        if need <= available:
            key.credit.reserve(need)
            return None, key, need
        affordable = affordable_tokens(
            dearest, prompt_tokens=prompt_tokens, remaining_usd=available, at=now
        )
        if affordable < 1:
            message = (
                f"Key limit exceeded ({key.limit_reset or 'total'} limit). Manage it using "
                "https://openrouter.ai/settings/keys"
            )
            return self._refused("key_limit", 403, message)
        requested = output_cap(max_tokens, dearest, prompt_tokens)
        message = (
            "This request requires more credits, or fewer max_tokens. You requested up to "
            f"{requested} tokens, but can only afford {affordable}. To increase, visit "
            "https://openrouter.ai/settings/keys and raise your key's limit"
        )
        metadata = {
            "limit_source": "openrouter_key_limit",
            "remedy_hint": _KEY_LIMIT_HINT,
            "provider_name": None,
        }
        return self._refused("key_limit", 402, message, metadata)

    def _refused(
        self, kind: str, status: int, message: str, metadata: dict[str, Any] | None = None
    ) -> tuple[web.Response, None, Decimal]:
        """A chat request refused for its key, counted in the ledger as ``kind``."""
        self.ledger.count_error(kind)
        return bodies.error_response(status, message, metadata), None, Decimal(0)

    def settle(self, key: ManagedKey, reserved: Decimal, billed: LedgerEntry | None) -> None:
        """Settle a request of ``key``: its reservation given back, its real cost spent."""
        key.credit.settle(reserved, billed.cost_usd if billed is not None else Decimal(0))
        if billed is not None:
            key.billed.append(billed)

    def key_data(self, key: ManagedKey) -> dict[str, Any]:
        """``GET /key`` answered for one of the store's keys: its own limit and usage."""
        data = key_data(key.credit)
        data.update(label=key.to_json()["label"], limit_reset=key.limit_reset)
        data.update(expires_at=key.expires_at, include_byok_in_limit=key.include_byok_in_limit)
        return data

    # -- the management routes --------------------------------------------------------------------

    async def list_keys(self, request: web.Request) -> web.Response:
        denied = self.manager_only(request)
        if denied is not None:
            return denied
        include_disabled = request.query.get("include_disabled", "false").lower() == "true"
        try:
            offset = int(request.query.get("offset", "0"))
        except ValueError:
            return bodies.error_response(400, "offset must be a whole number")
        keys = [k for k in self.keys.values() if include_disabled or not k.disabled]
        return web.json_response({"data": [k.to_json() for k in keys[offset : offset + 100]]})

    async def _body(self, request: web.Request) -> dict[str, Any] | web.Response:
        try:
            body = json.loads(await request.read() or b"{}")
        except ValueError as exc:
            return bodies.error_response(400, f"Invalid JSON in request body: {exc}")
        if not isinstance(body, dict):
            return bodies.error_response(400, "Invalid request body: expected a JSON object")
        return body

    @staticmethod
    def _fields(body: dict[str, Any], key: ManagedKey) -> str | None:
        """Apply the fields of a create or patch body to ``key``; a problem's message, or None."""
        if "limit" in body:
            limit = body["limit"]
            if limit is None:
                key.credit.limit_usd = None
            else:
                try:
                    value = Decimal(str(limit))
                except InvalidOperation:
                    return f"limit must be a number, got {limit!r}"
                if isinstance(limit, bool) or not value.is_finite() or value < 0:
                    return f"limit must be a number >= 0, got {limit!r}"
                key.credit.limit_usd = value
        if "limit_reset" in body:
            if body["limit_reset"] not in _RESETS:
                return f"limit_reset must be daily, weekly, monthly or null, got {body['limit_reset']!r}"
            key.limit_reset = body["limit_reset"]
        for name in ("include_byok_in_limit", "disabled"):
            if name in body:
                if not isinstance(body[name], bool):
                    return f"{name} must be true or false"
                setattr(key, name, body[name])
        if "expires_at" in body:
            expires = body["expires_at"]
            if expires is not None:
                try:
                    moment = datetime.fromisoformat(str(expires).replace("Z", "+00:00"))
                except ValueError:
                    return f"expires_at must be an ISO 8601 time, got {expires!r}"
                expires = _iso(moment.astimezone(UTC))
            key.expires_at = expires
        if "name" in body:
            if not isinstance(body["name"], str) or not body["name"].strip():
                return "name must be a non-empty string"
            key.name = body["name"]
        return None

    async def create(self, request: web.Request) -> web.Response:
        denied = self.manager_only(request)
        if denied is not None:
            return denied
        body = await self._body(request)
        if isinstance(body, web.Response):
            return body
        if not isinstance(body.get("name"), str) or not body["name"].strip():
            return bodies.error_response(400, "name is required: a non-empty string")
        secret = "sk-or-v1-" + secrets.token_hex(32)
        digest = hashlib.sha256(secret.encode()).hexdigest()
        key = ManagedKey(hash=digest, secret=secret, name=body["name"], created_at=_iso(self.now()))
        problem = self._fields(body, key)
        if problem is not None:
            return bodies.error_response(400, problem)
        self.keys[digest] = key
        self._by_secret[secret] = digest
        return web.json_response({"data": key.to_json(), "key": secret}, status=201)

    def _found(self, request: web.Request) -> ManagedKey | web.Response:
        denied = self.manager_only(request)
        if denied is not None:
            return denied
        key = self.keys.get(request.match_info["hash"])
        if key is None:
            return bodies.error_response(404, f"API key {request.match_info['hash']} not found")
        return key

    async def get(self, request: web.Request) -> web.Response:
        key = self._found(request)
        if isinstance(key, web.Response):
            return key
        return web.json_response({"data": key.to_json()})

    async def patch(self, request: web.Request) -> web.Response:
        key = self._found(request)
        if isinstance(key, web.Response):
            return key
        body = await self._body(request)
        if isinstance(body, web.Response):
            return body
        problem = self._fields(body, key)
        if problem is not None:
            return bodies.error_response(400, problem)
        key.updated_at = _iso(self.now())
        return web.json_response({"data": key.to_json()})

    async def delete(self, request: web.Request) -> web.Response:
        key = self._found(request)
        if isinstance(key, web.Response):
            return key
        del self.keys[key.hash]  # its secret stays known: a request with it gets the 401
        return web.json_response({"deleted": True})

    async def activity(self, request: web.Request) -> web.Response:
        denied = self.manager_only(request)
        if denied is not None:
            return denied
        wanted_hash = request.query.get("api_key_hash")
        wanted_date = request.query.get("date")
        totals: dict[tuple[str, str, str, str], list[Any]] = {}
        for key in self.keys.values():
            if wanted_hash and key.hash != wanted_hash:
                continue
            for e in key.billed:
                day = datetime.fromtimestamp(e.created, UTC).date().isoformat()
                if wanted_date and day != wanted_date:
                    continue
                row = totals.setdefault((day, e.model, e.provider, e.tag), [0, 0, 0, 0, Decimal(0)])
                tokens = (e.prompt_tokens, e.completion_tokens, e.reasoning_tokens)
                for i, value in enumerate((1, *tokens, e.cost_usd)):
                    row[i] += value
        data = [
            {
                "date": day,
                "model": model,
                "model_permaslug": model,
                "endpoint_id": tag,
                "provider_name": provider,
                "usage": float(row[4]),
                "byok_usage_inference": 0,
                "requests": row[0],
                "prompt_tokens": row[1],
                "completion_tokens": row[2],
                "reasoning_tokens": row[3],
            }
            for (day, model, provider, tag), row in sorted(totals.items())
        ]
        return web.json_response({"data": data})

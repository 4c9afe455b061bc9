"""Typed views of what a request costs: ``Usage`` (a completion's), ``Generation``
(``GET /generation``, read by ``read_generation`` for the client and the run alike), ``KeyInfo``
(``GET /key``) and ``Credits`` (``GET /credits``), read tolerantly (``api.payload``); ``read_spend``
and ``read_cost`` read a cost, never taking an unreadable one as zero.
"""

from __future__ import annotations

import json
import math
from decimal import Decimal, InvalidOperation
from typing import Any, ClassVar

from openrouter_probe.api.payload import Number, Payload

__all__ = [
    "CompletionTokensDetails",
    "Credits",
    "Generation",
    "KeyBudget",
    "KeyInfo",
    "PromptTokensDetails",
    "ProviderResponse",
    "Usage",
    "read_cost",
    "read_generation",
    "read_spend",
    "usage_spend",
]


_SCOPES = {
    "key_limit": "key's own limit",
    "api_key": "key's budget",
    "workspace": "workspace budget",
    "member": "member budget",
    "workspace_default_member": "workspace's default member budget",
    "workspace_default_key": "workspace's default key budget",
}


def _usd(amount: Decimal) -> str:
    """Dollars as a budget line shows them: cents, or the digits a sub-cent amount needs."""
    if amount == 0 or abs(amount) >= Decimal("0.01"):
        return f"${amount:,.2f}"
    return f"${amount.quantize(Decimal('0.000001')).normalize():f}"


class KeyBudget(Payload):
    """One budget layer that ``GET /key`` lists (SDK 1.3.84 ``KeyBudget``; OPENROUTER.md 15).

    ``scope`` is ``workspace_default_member``, ``workspace_default_key``, ``member``, ``api_key``,
    ``workspace``, ``key_limit`` or a newer value; ``remaining_usd`` (``limit_usd - spend_usd``)
    zero or below means this layer answers every request with a 403 until ``resets_at``.
    """

    core_fields: ClassVar[frozenset[str] | None] = frozenset()

    scope: str | None = None
    limit_usd: Number | None = None
    spend_usd: Number | None = None
    remaining_usd: Number | None = None
    reset_interval: str | None = None
    resets_at: str | None = None
    include_byok: bool | None = None
    budget_id: str | None = None
    guardrail_id: str | None = None

    @property
    def remaining(self) -> Decimal | None:
        """What is left in USD (``remaining_usd``, else ``limit_usd - spend_usd``)."""
        if self.remaining_usd is not None:
            return Decimal(str(self.remaining_usd))
        if self.limit_usd is not None and self.spend_usd is not None:
            return Decimal(str(self.limit_usd)) - Decimal(str(self.spend_usd))
        return None

    def describe(self) -> str:
        """``"the workspace budget ($0.40 of $500.00 left, resets monthly)"``, for one line."""
        scope = _SCOPES.get(
            self.scope or "", f"{(self.scope or 'unknown').replace('_', ' ')} budget"
        )
        if self.guardrail_id:
            scope = "guardrail budget"
        left = self.remaining
        have = "" if left is None else f"{_usd(max(left, Decimal(0)))} of "
        limit = "?" if self.limit_usd is None else _usd(Decimal(str(self.limit_usd)))
        reset = f"resets {self.reset_interval}" if self.reset_interval else "never resets"
        return f"the {scope} ({have}{limit} left, {reset})"


class Credits(Payload):
    """``GET /credits``: the account's credits bought and used, in USD (OpenRouter asks for a
    management key here; OPENROUTER.md 5). ``balance`` is what is left, below zero when the
    account is overdrawn; ``None`` when either figure is missing."""

    total_credits: Number | None = None
    total_usage: Number | None = None

    @property
    def balance(self) -> Decimal | None:
        """``total_credits - total_usage`` (``None``: one of them is not said)."""
        if self.total_credits is None or self.total_usage is None:
            return None
        return Decimal(str(self.total_credits)) - Decimal(str(self.total_usage))


class KeyInfo(Payload):
    """``GET /key``: the calling key's limits and usage, in USD.

    ``limit`` and ``limit_remaining`` are the key's own limit only; ``budgets`` every layer that
    enforcement checks (guardrail, workspace, the key's limit) and ``effective_budget`` the one
    that blocks first (``blocking_budget`` falls back on the key's limit for older answers).
    """

    label: str | None = None
    limit: Number | None = None
    limit_remaining: Number | None = None
    limit_reset: str | None = None
    include_byok_in_limit: bool | None = None
    usage: Number | None = None
    usage_daily: Number | None = None
    usage_weekly: Number | None = None
    usage_monthly: Number | None = None
    byok_usage: Number | None = None
    byok_usage_daily: Number | None = None
    byok_usage_weekly: Number | None = None
    byok_usage_monthly: Number | None = None
    is_free_tier: bool | None = None
    is_management_key: bool | None = None
    is_provisioning_key: bool | None = None
    creator_user_id: str | None = None
    expires_at: str | None = None
    rate_limit: Any = None
    budgets: list[KeyBudget] | None = None
    effective_budget: KeyBudget | None = None
    workspace_id: str | None = None

    @property
    def blocking_budget(self) -> KeyBudget | None:
        """The budget that blocks requests first: ``effective_budget``; else the spent or least
        remaining of ``budgets``; else, for an answer without them, the key's own limit."""
        if self.effective_budget is not None:
            return self.effective_budget
        layers = [b for b in self.budgets or () if b.remaining is not None]
        if layers:
            return min(layers, key=lambda b: b.remaining or Decimal(0))
        if self.limit is None:
            return None
        return KeyBudget(
            scope="key_limit",
            limit_usd=self.limit,
            remaining_usd=self.limit_remaining,
            reset_interval=self.limit_reset,
        )


class ProviderResponse(Payload):
    """One routing attempt inside a generation (fallbacks included)."""

    endpoint_id: str | None = None
    id: str | None = None
    is_byok: bool | None = None
    latency: Number | None = None
    model_permaslug: str | None = None
    provider_name: str | None = None
    routed_service_tier: str | None = None
    status: int | None = None


class Generation(Payload):
    """``GET /generation?id=``: what a request cost and who served it. ``total_cost`` is USD.

    Nothing in it fails the record: a field of an odd shape (``total_cost: "n/a"``) is kept in
    ``raw_fields``, so ``cost`` can say it is not a cost rather than "no record".
    """

    core_fields: ClassVar[frozenset[str] | None] = frozenset()

    id: str | None = None
    request_id: str | None = None
    upstream_id: str | None = None
    created_at: str | None = None
    model: str | None = None
    origin: str | None = None
    api_type: str | None = None
    streamed: bool | None = None
    cancelled: bool | None = None
    latency: Number | None = None
    moderation_latency: Number | None = None
    generation_time: Number | None = None
    total_cost: Number | None = None
    usage: Number | None = None
    upstream_inference_cost: Number | None = None
    cache_discount: Number | None = None
    is_byok: bool | None = None
    tokens_prompt: int | None = None
    tokens_completion: int | None = None
    native_tokens_prompt: int | None = None
    native_tokens_completion: int | None = None
    native_tokens_reasoning: int | None = None
    native_tokens_cached: int | None = None
    finish_reason: str | None = None
    native_finish_reason: str | None = None
    provider_name: str | None = None
    provider_responses: list[ProviderResponse] | None = None
    service_tier: str | None = None
    router: str | None = None
    data_region: str | None = None
    #: a response cache hit's: the generation whose answer it replayed (and that was billed)
    response_cache_source_id: str | None = None

    def cost(self) -> tuple[Decimal | None, bool]:
        """What the user paid, read as ``read_spend`` reads a usage: ``total_cost``, plus
        ``upstream_inference_cost`` when ``is_byok`` (``(cost, invalid)``)."""
        fields = self.raw_fields
        return read_spend(
            fields.get("total_cost", self.total_cost),
            fields.get("is_byok", self.is_byok),
            fields.get("upstream_inference_cost", self.upstream_inference_cost),
        )[:2]


def read_generation(status: int, data: bytes | str) -> Generation | str | None:
    """Read a ``GET /generation`` answer, for the sync client and the run alike: a 200 gives the
    record (``data``); 404 (not visible yet: ``/generation`` is eventually consistent), 429 and
    5xx are ``None`` (ask again); anything else says why it is unreadable (``"HTTP 401"``,
    ``"not a /generation body"``)."""
    if status == 404 or status == 429 or status >= 500:
        return None
    if status != 200:
        return f"HTTP {status}"
    try:
        payload = json.loads(data)
    except ValueError:
        return "not a /generation body"
    record = payload.get("data") if isinstance(payload, dict) else None
    if not isinstance(record, dict):
        return "not a /generation body"
    return Generation.model_validate(record)


class CompletionTokensDetails(Payload):
    reasoning_tokens: int | None = None
    image_tokens: int | None = None
    audio_tokens: int | None = None


class PromptTokensDetails(Payload):
    cached_tokens: int | None = None
    cache_write_tokens: int | None = None
    audio_tokens: int | None = None


class Usage(Payload):
    """Token counts and cost of one chat request.

    ``completion_tokens`` *includes* ``completion_tokens_details.reasoning_tokens`` (reasoning is
    billed as output); ``cost`` is the USD actually charged.
    """

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int | None = None
    cost: Number | None = None
    is_byok: bool | None = None
    prompt_tokens_details: PromptTokensDetails | None = None
    completion_tokens_details: CompletionTokensDetails | None = None
    cost_details: dict[str, Any] | None = None

    @property
    def reasoning_tokens(self) -> int:
        """Reasoning tokens billed (part of ``completion_tokens``); 0 when not reported."""
        details = self.completion_tokens_details
        return (details.reasoning_tokens or 0) if details else 0


def read_spend(
    cost: Any, is_byok: Any, upstream: Any
) -> tuple[Decimal | None, bool, Decimal | None]:
    """What a request cost the user in all: ``(spend, invalid, provider's part)``.

    ``cost`` is OpenRouter's charge (``usage.cost``, ``total_cost``); when ``is_byok`` is true
    the provider billed the user's own key ``upstream`` (``cost_details.upstream_inference_cost``)
    besides it (OPENROUTER.md 19: ``cost: 0``, upstream 0.0003253), so the spend is both. A BYOK
    answer whose upstream cost is absent or not a cost is unknown (``None``), never its
    ``cost`` alone. Without BYOK ``upstream`` is ignored (it repeats ``cost``, 7.2)."""
    spend, invalid = read_cost(cost)
    if is_byok is not True or spend is None:
        return spend, invalid, None
    part, bad = read_cost(upstream)
    if part is None:
        return None, bad, None
    return spend + part, False, part


def usage_spend(usage: Any) -> tuple[Decimal | None, bool, Decimal | None]:
    """``read_spend`` of a ``usage`` object (``cost``, ``is_byok``,
    ``cost_details.upstream_inference_cost``)."""
    if not isinstance(usage, dict):
        return None, False, None
    details = usage.get("cost_details")
    upstream = details.get("upstream_inference_cost") if isinstance(details, dict) else None
    return read_spend(usage.get("cost"), usage.get("is_byok"), upstream)


def read_cost(value: Any) -> tuple[Decimal | None, bool]:
    """Read ``usage.cost``: ``(cost, invalid)``. A cost is a finite number >= 0; anything else
    (``"n/a"``, ``NaN``, a negative number, ``true``) is invalid, never zero."""
    kind = type(value)
    if kind is float or kind is int:  # what OpenRouter sends: a plain number (NaN fails >= 0)
        if value >= 0 and value != math.inf:
            return Decimal(str(value)), False
        return None, True
    if value is None:
        return None, False
    if kind is not str:
        return None, True  # true, a list, an object
    try:
        cost = Decimal(value.strip())
    except InvalidOperation:
        return None, True
    if not cost.is_finite() or cost < 0:
        return None, True
    return cost, False

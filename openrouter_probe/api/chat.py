"""Typed views of what a request returns and costs: chat completions, usage, generations, the key.

``ChatCompletion`` (with ``Choice``, ``Usage`` and its token details, ``ErrorBody``) is a
``POST /chat/completions`` reply; ``Generation`` (with ``ProviderResponse``, one routing attempt) is
``GET /generation``; ``KeyInfo`` is ``GET /key``. They read tolerantly like every payload in
``openrouter_probe.api.schema``: unknown keys are kept, and only the fields the library computes from
are validated strictly.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from openrouter_probe.api.schema import Number, _Payload

__all__ = [
    "ChatCompletion",
    "Choice",
    "CompletionTokensDetails",
    "ErrorBody",
    "Generation",
    "KeyInfo",
    "PromptTokensDetails",
    "ProviderResponse",
    "Usage",
]


class KeyInfo(_Payload):
    """``GET /key``: the calling key's limits and usage, in USD."""

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


class ProviderResponse(_Payload):
    """One routing attempt inside a generation (fallbacks included)."""

    endpoint_id: str | None = None
    id: str | None = None
    is_byok: bool | None = None
    latency: Number | None = None
    model_permaslug: str | None = None
    provider_name: str | None = None
    routed_service_tier: str | None = None
    status: int | None = None


class Generation(_Payload):
    """``GET /generation?id=``: what a request cost and who served it. ``total_cost`` is USD."""

    id: str
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


class CompletionTokensDetails(_Payload):
    reasoning_tokens: int | None = None
    image_tokens: int | None = None
    audio_tokens: int | None = None


class PromptTokensDetails(_Payload):
    cached_tokens: int | None = None
    cache_write_tokens: int | None = None
    audio_tokens: int | None = None


class Usage(_Payload):
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


class ErrorBody(_Payload):
    """OpenRouter's error object: ``{"code", "message", "metadata"}``."""

    code: int | str | None = None
    message: str | None = None
    metadata: dict[str, Any] | None = None


class Choice(_Payload):
    index: int = 0
    finish_reason: str | None = None
    native_finish_reason: str | None = None
    message: dict[str, Any] | None = None
    delta: dict[str, Any] | None = None
    error: ErrorBody | None = None


class ChatCompletion(_Payload):
    """A chat completion body or one stream chunk. ``provider`` is the display name of who served
    it (not in the spec, present in every real capture); ``model`` is the permaslug used."""

    id: str | None = None
    object: str | None = None
    created: int | None = None
    model: str | None = None
    provider: str | None = None
    choices: list[Choice] = Field(default_factory=list)
    usage: Usage | None = None
    error: ErrorBody | None = None

    @property
    def failed(self) -> bool:
        """True when the body reports an error: a top-level ``error``, a ``choices[].error`` or a
        ``finish_reason`` of ``"error"`` (all three occur with HTTP 200)."""
        return self.error is not None or any(
            c.error is not None or c.finish_reason == "error" for c in self.choices
        )

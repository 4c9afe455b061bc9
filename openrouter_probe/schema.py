"""Typed views of what the OpenRouter API returns.

Every model keeps unknown keys (``extra="allow"``) and tolerates unknown enum values: OpenRouter adds
fields and quantization tags over time and a parser that rejects them breaks on the next deploy.
Numbers are typed ``int | float`` so that a payload dumped with
``model_dump(mode="json", exclude_unset=True)`` is the payload that came in.

Units are OpenRouter's own here (prices are decimal strings in USD per token, uptime in percent,
latency in milliseconds, throughput in tokens per second). Helpers that convert say so in their name:
``Pricing.prompt_usd_per_m`` is USD per million tokens with the discount applied.
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator

__all__ = [
    "KNOWN_QUANTIZATIONS",
    "KNOWN_STATUSES",
    "Architecture",
    "ChatCompletion",
    "Choice",
    "Endpoint",
    "EndpointsResponse",
    "ErrorBody",
    "Generation",
    "KeyInfo",
    "Model",
    "ModelEndpoints",
    "ModelsList",
    "Percentiles",
    "Pricing",
    "PricingOverride",
    "Provider",
    "ProvidersList",
    "Usage",
]

#: The quantization values OpenRouter documents (Aug 2026; ``mxfp4``/``nvfp4``/``mxfp8`` since
#: 2026-07-27). Endpoints may also carry ``null`` (undeclared) or a value added later.
KNOWN_QUANTIZATIONS: tuple[str, ...] = (
    "int4",
    "int8",
    "fp4",
    "mxfp4",
    "nvfp4",
    "fp6",
    "fp8",
    "mxfp8",
    "fp16",
    "bf16",
    "fp32",
    "unknown",
)

#: Endpoint ``status`` codes in OpenRouter's spec. Meanings are undocumented; ``-2`` was observed on
#: degraded endpoints (uptime 72-91%) and ``-5`` on worse ones. Other values may appear.
KNOWN_STATUSES: tuple[int, ...] = (0, -1, -2, -3, -5, -10)

_MILLION = Decimal(1_000_000)


def _to_decimal_string(value: Any) -> Any:
    """Accept a price given as a number as well as the usual decimal string."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        return repr(value)
    return value


def _to_optional_str(value: Any) -> Any:
    if value is None or isinstance(value, str):
        return value
    return str(value)


PriceStr = Annotated[str | None, BeforeValidator(_to_decimal_string)]
Number = int | float


class _Payload(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True, protected_namespaces=())

    def to_json_dict(self) -> dict[str, Any]:
        """Return the payload as OpenRouter sent it (only the keys that were present)."""
        return self.model_dump(mode="json", exclude_unset=True)


class Percentiles(_Payload):
    """Percentiles over the last 30 minutes (``latency_last_30m`` in ms, throughput in tokens/s)."""

    p50: Number | None = None
    p75: Number | None = None
    p90: Number | None = None
    p99: Number | None = None


class PricingOverride(_Payload):
    """A conditional price (``min_prompt_tokens`` or a UTC time window); price keys are extras."""

    min_prompt_tokens: int | None = None
    utc_start: int | None = None
    utc_end: int | None = None


class Pricing(_Payload):
    """Endpoint or model pricing: decimal strings in USD per token (per image/request/search where
    the key says so); keys are sparse. ``discount`` is a fraction (0..1) taken off every price."""

    prompt: PriceStr = None
    completion: PriceStr = None
    request: PriceStr = None
    image: PriceStr = None
    image_output: PriceStr = None
    image_token: PriceStr = None
    audio: PriceStr = None
    audio_output: PriceStr = None
    input_audio_cache: PriceStr = None
    web_search: PriceStr = None
    internal_reasoning: PriceStr = None
    input_cache_read: PriceStr = None
    input_cache_write: PriceStr = None
    input_cache_write_1h: PriceStr = None
    discount: Number = 0
    overrides: list[PricingOverride] | None = None

    @field_validator("discount")
    @classmethod
    def _fraction(cls, value: Number) -> Number:
        # Outside 0..1 every price would be wrong (negative or inflated): refuse, never guess.
        if not 0 <= value <= 1:
            raise ValueError(
                f"discount {value!r} is outside 0..1 (a fraction taken off every price)"
            )
        return value

    def usd_per_unit(self, key: str) -> Decimal | None:
        """Return the price under ``key`` in USD per unit (token, image, request), discount applied.

        ``None`` when the key is absent or not a number (routers list ``"-1"``: a negative price
        means "variable" and is returned as ``None`` too).
        """
        raw = getattr(self, key, None)
        if raw is None and self.model_extra:
            raw = self.model_extra.get(key)
        if raw is None or isinstance(raw, bool):
            return None
        try:
            value = Decimal(str(raw))
        except InvalidOperation:
            return None
        if value < 0 or not value.is_finite():
            return None
        discount = Decimal(str(self.discount or 0))
        return value * (Decimal(1) - discount)

    def usd_per_m(self, key: str) -> Decimal | None:
        """Return the price under ``key`` in USD per million units, discount applied."""
        per_unit = self.usd_per_unit(key)
        return None if per_unit is None else (per_unit * _MILLION).normalize()

    @property
    def prompt_usd_per_m(self) -> Decimal | None:
        """Input price in USD per million tokens, discount applied."""
        return self.usd_per_m("prompt")

    @property
    def completion_usd_per_m(self) -> Decimal | None:
        """Output price in USD per million tokens (reasoning included), discount applied."""
        return self.usd_per_m("completion")

    @property
    def reasoning_usd_per_m(self) -> Decimal | None:
        """Reasoning-token price in USD per million: ``internal_reasoning`` where listed, otherwise
        the output price (OpenRouter bills reasoning tokens as output tokens)."""
        listed = self.usd_per_m("internal_reasoning")
        return listed if listed is not None else self.completion_usd_per_m

    @property
    def cache_read_usd_per_m(self) -> Decimal | None:
        """Cached-input read price in USD per million tokens, discount applied."""
        return self.usd_per_m("input_cache_read")


class Architecture(_Payload):
    tokenizer: str | None = None
    instruct_type: str | None = None
    modality: str | None = None
    input_modalities: list[str] = Field(default_factory=list)
    output_modalities: list[str] = Field(default_factory=list)


class Endpoint(_Payload):
    """One provider endpoint of a model (``PublicEndpoint``).

    ``tag`` is the exact routing token (``provider_slug[/variant]``); ``quantization`` is ``None``
    when the provider did not declare it, ``"unknown"`` when it declared it unknown, or any string.
    """

    name: str | None = None
    model_id: str | None = None
    model_name: str | None = None
    context_length: int | None = None
    pricing: Pricing = Field(default_factory=Pricing)
    provider_name: str
    tag: str
    quantization: Annotated[str | None, BeforeValidator(_to_optional_str)] = None
    max_completion_tokens: int | None = None
    max_prompt_tokens: int | None = None
    supported_parameters: list[str] = Field(default_factory=list)
    status: int | None = None
    uptime_last_5m: Number | None = None
    uptime_last_30m: Number | None = None
    uptime_last_1d: Number | None = None
    latency_last_30m: Percentiles | None = None
    throughput_last_30m: Percentiles | None = None
    supports_implicit_caching: bool | None = None
    supports_voice_cloning: bool | None = None
    supports_tool_choice: dict[str, Any] | None = None

    @property
    def slug(self) -> str:
        """The provider's base slug: the part of ``tag`` before the first ``/``."""
        return self.tag.split("/", 1)[0].lower()

    @property
    def variant(self) -> str | None:
        """The part of ``tag`` after the slug (``int4``, ``fast``, ``us-east5``), if any."""
        parts = self.tag.split("/", 1)
        return parts[1] if len(parts) == 2 else None

    @property
    def has_stats(self) -> bool:
        """Whether latency or throughput percentiles are present (they need an API key)."""
        return self.latency_last_30m is not None or self.throughput_last_30m is not None


class ModelEndpoints(_Payload):
    """The ``data`` of ``GET /models/{author}/{slug}/endpoints``: a model and its endpoints."""

    id: str
    name: str | None = None
    created: int | None = None
    description: str | None = None
    architecture: Architecture | None = None
    endpoints: list[Endpoint] = Field(default_factory=list)

    @property
    def stats_missing(self) -> bool:
        """True when no endpoint carries latency/throughput (what OpenRouter does without a key)."""
        return bool(self.endpoints) and not any(e.has_stats for e in self.endpoints)


class EndpointsResponse(_Payload):
    data: ModelEndpoints


class TopProvider(_Payload):
    context_length: int | None = None
    max_completion_tokens: int | None = None
    is_moderated: bool | None = None


class Model(_Payload):
    """One entry of ``GET /models``; both the early-2026 and the newer field sets."""

    id: str
    canonical_slug: str | None = None
    hugging_face_id: str | None = None
    name: str | None = None
    created: int | None = None
    description: str | None = None
    context_length: int | None = None
    architecture: Architecture | None = None
    pricing: Pricing = Field(default_factory=Pricing)
    top_provider: TopProvider | None = None
    per_request_limits: dict[str, Any] | None = None
    supported_parameters: list[str] = Field(default_factory=list)
    default_parameters: dict[str, Any] | None = None
    expiration_date: str | None = None
    knowledge_cutoff: str | None = None
    supported_voices: list[Any] | None = None
    links: dict[str, Any] | None = None
    reasoning: dict[str, Any] | None = None
    benchmarks: dict[str, Any] | None = None
    alias_target: str | None = None


class ModelsList(_Payload):
    data: list[Model]
    total_count: int | None = None
    links: dict[str, Any] | None = None


class Provider(_Payload):
    """One entry of ``GET /providers``. ``slug`` is what routing wants, never ``name``."""

    name: str
    slug: str
    privacy_policy_url: str | None = None
    terms_of_service_url: str | None = None
    status_page_url: str | None = None
    headquarters: str | None = None
    datacenters: list[str] | None = None


class ProvidersList(_Payload):
    data: list[Provider]


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

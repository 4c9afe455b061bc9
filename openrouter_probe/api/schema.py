"""Typed views of what the OpenRouter API returns, each read tolerantly (``api.payload``).

Only each class's ``core_fields`` are validated strictly; a model or endpoint that cannot be read
is left out of its list (``skipped``) but kept in ``to_json_dict()`` (docs/api.md, "Payloads and
units"). The listings (``GET /models``, ``GET /providers``) are ``api.listings``. Numbers are
typed ``int | float`` so that a payload dumped with ``model_dump(mode="json",
exclude_unset=True)`` is the payload that came in. Units are
OpenRouter's own (prices are decimal strings in USD per token, uptime in percent, latency in
milliseconds, throughput in tokens per second); helpers that convert say so in their name
(``Pricing.prompt_usd_per_m``: USD per million tokens, the discount applied).
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from typing import Annotated, Any, ClassVar

from pydantic import BeforeValidator, ConfigDict, Field, field_validator

from openrouter_probe.api.payload import Number, Payload, PriceStr, SkippedRecord, to_optional_str

__all__ = [
    "KNOWN_QUANTIZATIONS",
    "KNOWN_SERVICE_TIERS",
    "Architecture",
    "Endpoint",
    "EndpointsResponse",
    "ModelEndpoints",
    "Percentiles",
    "Pricing",
    "PricingOverride",
    "SkippedRecord",
    "WorkloadPerf",
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

#: Endpoint ``service_tier`` values in OpenRouter's spec (``null`` is a standard endpoint). Other
#: strings are kept as they came.
KNOWN_SERVICE_TIERS: tuple[str, ...] = ("flex", "priority", "ultrafast")

_MILLION = Decimal(1_000_000)


class Percentiles(Payload):
    """Percentiles over the last 30 minutes (``latency_last_30m`` in ms, throughput in tokens/s)."""

    p50: Number | None = None
    p75: Number | None = None
    p90: Number | None = None
    p99: Number | None = None


class PricingOverride(Payload):
    """A conditional price; price keys are extras. It applies when all of its conditions match:
    ``min_prompt_tokens`` (prompt strictly longer), the UTC window ``utc_start``..``utc_end``
    (HHMM, half-open, may wrap midnight), ``utc_days`` (``monday`` .. ``sunday``)."""

    min_prompt_tokens: int | None = None
    utc_start: int | None = None
    utc_end: int | None = None
    utc_days: list[str] | None = None


class Pricing(Payload):
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
        """Reasoning-token price in USD per million, by the reasoning price rule
        (``reasoning_price_rule``): a non-zero ``internal_reasoning``, otherwise the output price
        (OpenRouter bills reasoning tokens as output tokens)."""
        listed = self.listed_reasoning_usd_per_m
        return listed if listed is not None else self.completion_usd_per_m

    @property
    def listed_reasoning_usd_per_m(self) -> Decimal | None:
        """``internal_reasoning`` in USD per million when it is listed and not zero, else ``None``.

        A listed zero is not a free-reasoning promise: endpoints of 2025 listed
        ``internal_reasoning: "0"`` (319 of 321 models in one list) while their bills charged
        reasoning tokens at the completion rate (362 completion tokens, 356 of them reasoning,
        cost 362 x $2.50/M; issue 23)."""
        listed = self.usd_per_m("internal_reasoning")
        return listed if listed else None

    @property
    def reasoning_price_rule(self) -> str:
        """Which rule prices reasoning tokens here: ``"listed"`` (a non-zero
        ``internal_reasoning``), ``"listed 0: completion rate"`` or ``"not listed: completion
        rate"``."""
        if self.listed_reasoning_usd_per_m is not None:
            return "listed"
        if self.usd_per_m("internal_reasoning") is not None:
            return "listed 0: completion rate"
        return "not listed: completion rate"

    @property
    def cache_read_usd_per_m(self) -> Decimal | None:
        """Cached-input read price in USD per million tokens, discount applied."""
        return self.usd_per_m("input_cache_read")


class Architecture(Payload):
    core_fields: ClassVar[frozenset[str] | None] = frozenset()

    tokenizer: str | None = None
    instruct_type: str | None = None
    modality: str | None = None
    input_modalities: list[str] = Field(default_factory=list)
    output_modalities: list[str] = Field(default_factory=list)


class WorkloadPerf(Payload):
    """One workload's performance in ``perf_last_30m_by_workload`` (only with an API key):
    ``latency`` in ms (end to end for image and video generation), ``throughput`` in tokens/s."""

    core_fields: ClassVar[frozenset[str] | None] = frozenset()

    latency: Percentiles | None = None
    throughput: Percentiles | None = None
    request_count: int | None = None


class Endpoint(Payload):
    """One provider endpoint of a model (``PublicEndpoint``).

    ``tag`` is the exact routing token (``provider_slug[/variant]``); ``quantization`` is ``None``
    when the provider did not declare it, ``"unknown"`` when it declared it unknown, or any string.
    ``service_tier`` is the tier the endpoint sells (``flex``, ``priority``, ``ultrafast``, another
    string, or ``None`` for a standard endpoint or older data that lacks the field).
    """

    core_fields: ClassVar[frozenset[str] | None] = frozenset(
        {
            "provider_name",
            "tag",
            "pricing",
            "quantization",
            "context_length",
            "max_completion_tokens",
            "max_prompt_tokens",
            "supported_parameters",
            "status",
            "uptime_last_5m",
            "uptime_last_30m",
            "uptime_last_1d",
            "latency_last_30m",
            "throughput_last_30m",
        }
    )

    name: str | None = None
    model_id: str | None = None
    model_name: str | None = None
    context_length: int | None = None
    pricing: Pricing = Field(default_factory=Pricing)
    provider_name: str
    tag: str
    quantization: Annotated[str | None, BeforeValidator(to_optional_str)] = None
    max_completion_tokens: int | None = None
    max_prompt_tokens: int | None = None
    supported_parameters: list[str] = Field(default_factory=list)
    #: in OpenRouter's spec 0, -1, -2, -3, -5 or -10, meanings undocumented: -2 was observed on
    #: degraded endpoints (uptime 72-91%), -5 on worse ones (``rules.ranking.is_stable``)
    status: int | None = None
    uptime_last_5m: Number | None = None
    uptime_last_30m: Number | None = None
    uptime_last_1d: Number | None = None
    latency_last_30m: Percentiles | None = None
    throughput_last_30m: Percentiles | None = None
    supports_implicit_caching: bool | None = None
    supports_voice_cloning: bool | None = None
    supports_tool_choice: dict[str, Any] | None = None
    supports_diarization: bool | None = None
    supports_image_reference: bool | None = None
    supports_multiple_audio_references: bool | None = None
    service_tier: str | None = None
    native_tools: dict[str, Any] | None = None
    perf_last_30m_by_workload: dict[str, WorkloadPerf] | None = None

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

    @property
    def stats_withheld(self) -> bool:
        """Whether latency and throughput were sent as ``null`` (OpenRouter's answer without a
        key), not left out (a 2025 body had no such fields at all: nothing was withheld)."""
        sent = self.model_fields_set
        return (
            "latency_last_30m" in sent
            and "throughput_last_30m" in sent
            and self.latency_last_30m is None
            and self.throughput_last_30m is None
        )

    @property
    def request_count_30m(self) -> int | None:
        """How many requests stand behind the 30-minute uptime and speed figures:
        ``perf_last_30m_by_workload.*.request_count`` summed over workloads (``None``: not given)."""
        counts = [
            w.request_count
            for w in (self.perf_last_30m_by_workload or {}).values()
            if w.request_count is not None
        ]
        return sum(counts) if counts else None


class ModelEndpoints(Payload):
    """The ``data`` of ``GET /models/{author}/{slug}/endpoints``: a model and its endpoints.

    An endpoint that cannot be read is left out of ``endpoints`` and listed in ``skipped``.
    """

    # built at import, not deferred: ``EndpointsResponse`` (the body a run reads) then reuses its
    # schema, and a snapshot's dump (``to_json_dict``) has its serializer: built once, not twice
    model_config = ConfigDict(defer_build=False)

    core_fields: ClassVar[frozenset[str] | None] = frozenset({"id", "endpoints"})
    skippable_list: ClassVar[str | None] = "endpoints"
    record_noun: ClassVar[str] = "endpoints"

    id: str
    name: str | None = None
    created: int | None = None
    description: str | None = None
    architecture: Architecture | None = None
    endpoints: list[Endpoint] = Field(default_factory=list)

    @property
    def stats_missing(self) -> bool:
        """True when no endpoint carries latency/throughput and they came as ``null`` (what
        OpenRouter sends without a key); a body without the fields at all is not that."""
        return (
            bool(self.endpoints)
            and not any(e.has_stats for e in self.endpoints)
            and any(e.stats_withheld for e in self.endpoints)
        )


class EndpointsResponse(Payload):
    data: ModelEndpoints

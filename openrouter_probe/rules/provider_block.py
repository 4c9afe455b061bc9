"""OpenRouter's ``provider`` request field, validated: ``ProviderBlock`` and its parts.

``ProviderBlock`` is the block as a request sends it (``ProviderPreferences``, no extra keys);
``MaxPrice`` its price limits (USD per **million** tokens for prompt and completion, per unit for
request, image and audio: ``MAX_PRICE_UNITS``) and ``SortSpec`` the object form of ``sort``.
Errors name the key (``provider.order[2]``) and say which keys are accepted. What a block admits is
decided by ``openrouter_probe.rules.routing``; ``REQUEST_PARAMETERS`` are the body keys its
``require_parameters`` checks, ``NON_PARAMETER_KEYS`` those it never does.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from openrouter_probe.errors import PolicyError, validation_errors

__all__ = [
    "MAX_PRICE_UNITS",
    "NON_PARAMETER_KEYS",
    "REQUEST_PARAMETERS",
    "MaxPrice",
    "ProviderBlock",
    "SortKey",
    "SortSpec",
]

#: What endpoints list in ``supported_parameters`` (OpenRouter's ``Parameter`` enum): the request
#: parameters ``require_parameters`` checks.
REQUEST_PARAMETERS = frozenset(
    {
        "frequency_penalty",
        "include_reasoning",
        "logit_bias",
        "logprobs",
        "max_completion_tokens",
        "max_tokens",
        "min_p",
        "parallel_tool_calls",
        "prediction",
        "presence_penalty",
        "reasoning",
        "reasoning_effort",
        "repetition_penalty",
        "response_format",
        "seed",
        "stop",
        "structured_outputs",
        "temperature",
        "tool_choice",
        "tools",
        "top_a",
        "top_k",
        "top_logprobs",
        "top_p",
        "verbosity",
        "web_search_options",
    }
)

#: Request body keys that are not request parameters: what to run and how to route, stream, bill
#: or trace it. ``require_parameters`` never checks them against ``supported_parameters``.
NON_PARAMETER_KEYS = frozenset(
    {
        "cache_control",
        "debug",
        "deferred_tools",
        "image_config",
        "messages",
        "metadata",
        "modalities",
        "model",
        "models",
        "plugins",
        "prompt",
        "prompt_cache_key",
        "prompt_cache_options",
        "provider",
        "route",
        "service_tier",
        "session_id",
        "stop_server_tools_when",
        "stream",
        "stream_options",
        "trace",
        "transforms",
        "usage",
        "user",
    }
)

SortKey = Literal["price", "throughput", "latency", "exacto"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)


class SortSpec(_Strict):
    """The object form of ``sort``: ``{"by": ..., "partition": "model" | "none"}``."""

    by: SortKey
    partition: Literal["model", "none"] | None = None


#: Each ``max_price`` key and the unit its limit and the endpoint price are compared in.
MAX_PRICE_UNITS: dict[str, str] = {
    "prompt": "/M tokens",
    "completion": "/M tokens",
    "request": " per request",
    "image": " per image",
    "audio": " per audio token",
}


class MaxPrice(_Strict):
    """``max_price``: USD per **million** tokens for prompt/completion; per request/image/audio unit.

    Values may be given as numbers or decimal strings; they are kept as decimal strings (``"2.2"``),
    the type OpenRouter's spec and official SDK give them.
    """

    prompt: str | None = None
    completion: str | None = None
    request: str | None = None
    image: str | None = None
    audio: str | None = None

    @field_validator("prompt", "completion", "request", "image", "audio", mode="before")
    @classmethod
    def _decimal_string(cls, value: Any) -> Any:
        if value is None:
            return value
        if isinstance(value, bool) or not isinstance(value, int | float | str | Decimal):
            raise ValueError(f"{value!r} is not a number (USD per million tokens)")
        try:
            number = Decimal(str(value).strip())
        except InvalidOperation:
            raise ValueError(f"{value!r} is not a number (USD per million tokens)") from None
        if not number.is_finite() or number < 0:
            raise ValueError(f"{value!r} must be a finite, non-negative number")
        return f"{number.normalize():f}"

    def limit(self, key: str) -> Decimal | None:
        value = getattr(self, key)
        return None if value is None else Decimal(str(value))


def _explain(loc: str, msg: str) -> str:
    """Say which keys are accepted where pydantic only says a key is not."""
    if msg != "not an accepted key":
        return msg
    if loc.startswith("provider.max_price."):
        return f"not a max_price key (use {', '.join(MAX_PRICE_UNITS)})"
    return "not a key OpenRouter accepts in provider (see https://openrouter.ai/docs/features/provider-routing)"


class ProviderBlock(_Strict):
    """OpenRouter's ``provider`` request field (``ProviderPreferences``, no extra keys)."""

    order: list[str] | None = None
    allow_fallbacks: bool | None = None
    require_parameters: bool | None = None
    data_collection: Literal["allow", "deny"] | None = None
    zdr: bool | None = None
    enforce_distillable_text: bool | None = None
    only: list[str] | None = None
    ignore: list[str] | None = None
    quantizations: list[str] | None = None
    sort: SortKey | SortSpec | None = None
    preferred_min_throughput: float | dict[str, float] | None = None
    preferred_max_latency: float | dict[str, float] | None = None
    max_price: MaxPrice | None = None
    #: Provider-specific options keyed by provider slug: sent as given, never routed on.
    options: dict[str, dict[str, Any]] | None = None

    @field_validator("order", "only", "ignore", "quantizations")
    @classmethod
    def _strings(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and any(not isinstance(v, str) or not v for v in value):
            raise ValueError("entries must be non-empty strings")
        return value

    @field_validator("preferred_min_throughput", "preferred_max_latency")
    @classmethod
    def _percentiles(
        cls, value: float | dict[str, float] | None
    ) -> float | dict[str, float] | None:
        if isinstance(value, dict):
            bad = sorted(set(value) - {"p50", "p75", "p90", "p99"})
            if bad:
                raise ValueError(f"percentile keys are p50, p75, p90, p99 (not {', '.join(bad)})")
        return value

    @classmethod
    def parse(cls, data: Any, *, source: str | None = None) -> ProviderBlock:
        """Validate a mapping as a provider block; errors name the key (``provider.order[2]``)."""
        if not isinstance(data, Mapping):
            raise PolicyError("a provider block must be a mapping", source=source)
        try:
            return cls.model_validate(dict(data))
        except ValidationError as exc:
            errors = [
                (loc, _explain(loc, msg)) for loc, msg in validation_errors(exc, prefix="provider")
            ]
            raise PolicyError("invalid provider block", source=source, errors=errors) from exc

    def to_request(self) -> dict[str, Any]:
        """The block as it goes into a request body (unset keys left out, ``options`` as given)."""
        return self.model_dump(mode="json", exclude_none=True)

    @property
    def sort_key(self) -> SortKey | None:
        """The metric ``sort`` names (``price``, ``throughput``, ``latency``), or ``None``."""
        return self.sort.by if isinstance(self.sort, SortSpec) else self.sort

"""What ``GET /generation?id=`` reports about one generation: ``GenerationRecord``, kept by the
server for every generation, billed or not, and the fields the fake's account fills alike for all.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import Any, NamedTuple

from openrouter_probe.fake.account import WORKSPACE_ID

__all__ = ["GENERATION_EXTRAS", "GenerationRecord"]

#: What ``/generation`` reports beyond the generation's own figures: no app, preset, router,
#: search or media, the global data region, the fake account's workspace.
GENERATION_EXTRAS: dict[str, Any] = {
    "app_id": None,
    "data_region": "global",
    "external_user": None,
    "http_referer": None,
    "native_tokens_completion_images": 0,
    "num_fetches": 0,
    "num_input_audio_prompt": 0,
    "num_media_completion": 0,
    "num_media_prompt": 0,
    "num_search_results": 0,
    "preset_id": None,
    "router": None,
    "service_tier": None,
    "user_agent": None,
    "web_search_engine": None,
    "workspace_id": WORKSPACE_ID,
}


class GenerationRecord(NamedTuple):
    """What ``/generation?id=`` reports about one generation (billed or not).

    Plain values only (``attempts``: ``(tag, provider name, status)`` per attempt): the server
    keeps one per generation for its whole life as a plain ``tuple`` (``FakeOpenRouter.generations``,
    read back with ``GenerationRecord(*row)``), which the garbage collector stops tracking, so a
    long run's records cost its collections nothing.
    """

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
    cost_usd: float = 0.0
    latency_ms: float = 0.0
    generation_time_ms: float = 0.0
    attempts: tuple[tuple[str, str, int], ...] = ()
    #: a response cache hit's: the generation its answer was cached from
    cache_source_id: str | None = None
    #: a BYOK answer's part billed by the provider to the user's own key (in ``cost_usd``)
    byok_usd: float | None = None

    def to_json(self) -> dict[str, Any]:
        byok = self.byok_usd is not None
        cost = self.cost_usd - (self.byok_usd or 0.0)
        prompt, completion = self.prompt_tokens, self.completion_tokens
        return {
            "id": self.id,
            "upstream_id": None,
            "created_at": datetime.fromtimestamp(self.created_s, UTC).isoformat(),
            "model": self.model,
            "origin": "",
            "api_type": "completions",
            "streamed": self.streamed,
            "cancelled": self.cancelled,
            "latency": round(self.latency_ms),
            "moderation_latency": None,
            "generation_time": round(self.generation_time_ms),
            "total_cost": cost,
            "usage": cost,
            "upstream_inference_cost": self.byok_usd or 0,
            "cache_discount": None,
            "is_byok": byok,
            "tokens_prompt": prompt,
            "tokens_completion": completion,
            "native_tokens_prompt": prompt,
            "native_tokens_completion": completion,
            "native_tokens_reasoning": self.reasoning_tokens,
            "native_tokens_cached": 0,
            "finish_reason": self.finish_reason,
            "native_finish_reason": self.finish_reason,
            "provider_name": self.provider,
            "provider_responses": [
                {
                    "endpoint_id": hashlib.sha1(tag.encode()).hexdigest()[:12],
                    "id": None,
                    "is_byok": byok,
                    "latency": 0,
                    "model_permaslug": self.model,
                    "provider_name": provider_name,
                    "routed_service_tier": None,
                    "status": status,
                }
                for tag, provider_name, status in self.attempts
            ],
            **GENERATION_EXTRAS,
            "response_cache_source_id": self.cache_source_id,
        }

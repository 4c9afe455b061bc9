"""Talking to OpenRouter, and its payloads typed: the sync client, schema and chat models, SSE,
backoff, the provider-page scraper and the bundled models list.
May import only ``errors`` and ``files`` of this package.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from openrouter_probe import lazy_exports

# name -> module that defines it, imported on first use
_EXPORTS: dict[str, str] = {
    "Backoff": "openrouter_probe.api.backoff",
    "ChatCompletion": "openrouter_probe.api.completion",
    "Client": "openrouter_probe.api.client",
    "Connection": "openrouter_probe.api.connection",
    "DEFAULT_BASE_URL": "openrouter_probe.api.connection",
    "Endpoint": "openrouter_probe.api.schema",
    "Generation": "openrouter_probe.api.chat",
    "KeyInfo": "openrouter_probe.api.chat",
    "Model": "openrouter_probe.api.schema",
    "ModelEndpoints": "openrouter_probe.api.schema",
    "ModelsList": "openrouter_probe.api.schema",
    "Pricing": "openrouter_probe.api.schema",
    "Provider": "openrouter_probe.api.schema",
    "SkippedRecord": "openrouter_probe.api.schema",
    "Usage": "openrouter_probe.api.chat",
    "bundled_models_list": "openrouter_probe.api.catalog",
    "iter_sse_events": "openrouter_probe.api.sse",
    "load_models_list": "openrouter_probe.api.catalog",
    "parse_provider_page": "openrouter_probe.api.scrape",
}

__all__ = [
    "DEFAULT_BASE_URL",
    "Backoff",
    "ChatCompletion",
    "Client",
    "Connection",
    "Endpoint",
    "Generation",
    "KeyInfo",
    "Model",
    "ModelEndpoints",
    "ModelsList",
    "Pricing",
    "Provider",
    "SkippedRecord",
    "Usage",
    "bundled_models_list",
    "iter_sse_events",
    "load_models_list",
    "parse_provider_page",
]

if TYPE_CHECKING:
    from openrouter_probe.api.backoff import Backoff
    from openrouter_probe.api.catalog import bundled_models_list, load_models_list
    from openrouter_probe.api.chat import Generation, KeyInfo, Usage
    from openrouter_probe.api.client import Client
    from openrouter_probe.api.completion import ChatCompletion
    from openrouter_probe.api.connection import DEFAULT_BASE_URL, Connection
    from openrouter_probe.api.schema import (
        Endpoint,
        Model,
        ModelEndpoints,
        ModelsList,
        Pricing,
        Provider,
        SkippedRecord,
    )
    from openrouter_probe.api.scrape import parse_provider_page
    from openrouter_probe.api.sse import iter_sse_events

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

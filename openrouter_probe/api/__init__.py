"""Talking to OpenRouter, and its payloads typed: the sync client, schema and chat models, SSE,
backoff, the provider-page scraper and the bundled models list.
May import only ``errors`` and ``files`` of this package.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from openrouter_probe import exports_of, lazy_exports

# The public names, written once as the imports a type checker reads (``exports_of``).
if TYPE_CHECKING:
    from openrouter_probe.api.backoff import Backoff as Backoff
    from openrouter_probe.api.catalog import bundled_models_list as bundled_models_list
    from openrouter_probe.api.catalog import load_models_list as load_models_list
    from openrouter_probe.api.chat import Generation as Generation
    from openrouter_probe.api.chat import KeyInfo as KeyInfo
    from openrouter_probe.api.chat import Usage as Usage
    from openrouter_probe.api.client import Client as Client
    from openrouter_probe.api.completion import ChatCompletion as ChatCompletion
    from openrouter_probe.api.connection import DEFAULT_BASE_URL as DEFAULT_BASE_URL
    from openrouter_probe.api.connection import Connection as Connection
    from openrouter_probe.api.listings import Model as Model
    from openrouter_probe.api.listings import ModelsList as ModelsList
    from openrouter_probe.api.listings import Provider as Provider
    from openrouter_probe.api.schema import Endpoint as Endpoint
    from openrouter_probe.api.schema import ModelEndpoints as ModelEndpoints
    from openrouter_probe.api.schema import Pricing as Pricing
    from openrouter_probe.api.schema import SkippedRecord as SkippedRecord
    from openrouter_probe.api.scrape import parse_provider_page as parse_provider_page
    from openrouter_probe.api.sse import iter_sse_events as iter_sse_events

_EXPORTS: dict[str, str] = exports_of(__file__)
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

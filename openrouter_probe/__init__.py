"""openrouter-probe: choose OpenRouter providers with care, then run the job through them.

The public API is re-exported here. Names are resolved on first use (PEP 562) so that
``import openrouter_probe`` stays fast and never imports pandas, requests or pydantic by itself.

Example::

    import openrouter_probe as orp

    snap = orp.bundled_snapshot("moonshotai/kimi-k2.5")   # or orp.probe(...) with the network
    for endpoint in snap.endpoints:
        print(endpoint.tag, endpoint.quantization, endpoint.pricing.completion_usd_per_m)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# name -> module that defines it
_EXPORTS: dict[str, str] = {
    "APIConnectionError": "openrouter_probe.errors",
    "APIError": "openrouter_probe.errors",
    "APIStatusError": "openrouter_probe.errors",
    "BudgetExceededError": "openrouter_probe.errors",
    "ChatCompletion": "openrouter_probe.schema",
    "Client": "openrouter_probe.client",
    "ConfigError": "openrouter_probe.errors",
    "Endpoint": "openrouter_probe.schema",
    "Generation": "openrouter_probe.schema",
    "InsufficientCreditsError": "openrouter_probe.errors",
    "KeyInfo": "openrouter_probe.schema",
    "Model": "openrouter_probe.schema",
    "ModelEndpoints": "openrouter_probe.schema",
    "NoRouteError": "openrouter_probe.errors",
    "PolicyError": "openrouter_probe.errors",
    "Pricing": "openrouter_probe.schema",
    "ProbeError": "openrouter_probe.errors",
    "Provider": "openrouter_probe.schema",
    "RateLimitError": "openrouter_probe.errors",
    "Snapshot": "openrouter_probe.snapshot",
    "SnapshotError": "openrouter_probe.errors",
    "Usage": "openrouter_probe.schema",
    "bundled_snapshot": "openrouter_probe.snapshot",
    "load_snapshot": "openrouter_probe.snapshot",
    "parse_provider_page": "openrouter_probe.scrape",
    "probe": "openrouter_probe.snapshot",
}

__all__ = [
    "APIConnectionError",
    "APIError",
    "APIStatusError",
    "BudgetExceededError",
    "ChatCompletion",
    "Client",
    "ConfigError",
    "Endpoint",
    "Generation",
    "InsufficientCreditsError",
    "KeyInfo",
    "Model",
    "ModelEndpoints",
    "NoRouteError",
    "PolicyError",
    "Pricing",
    "ProbeError",
    "Provider",
    "RateLimitError",
    "Snapshot",
    "SnapshotError",
    "Usage",
    "__version__",
    "bundled_snapshot",
    "load_snapshot",
    "parse_provider_page",
    "probe",
]

if TYPE_CHECKING:
    from openrouter_probe.client import Client
    from openrouter_probe.errors import (
        APIConnectionError,
        APIError,
        APIStatusError,
        BudgetExceededError,
        ConfigError,
        InsufficientCreditsError,
        NoRouteError,
        PolicyError,
        ProbeError,
        RateLimitError,
        SnapshotError,
    )
    from openrouter_probe.schema import (
        ChatCompletion,
        Endpoint,
        Generation,
        KeyInfo,
        Model,
        ModelEndpoints,
        Pricing,
        Provider,
        Usage,
    )
    from openrouter_probe.scrape import parse_provider_page
    from openrouter_probe.snapshot import Snapshot, bundled_snapshot, load_snapshot, probe


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'openrouter_probe' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))

"""What OpenRouter does and what a snapshot is: routing (the one copy of its rules), the provider
block, pricing, precision verdicts, snapshots, and the quantities people type.
May import ``api`` (and ``errors``, ``files``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from openrouter_probe import lazy_exports

# name -> module that defines it, imported on first use
_EXPORTS: dict[str, str] = {
    "MaxPrice": "openrouter_probe.rules.provider_block",
    "PrecisionRegistry": "openrouter_probe.rules.precision",
    "ProviderBlock": "openrouter_probe.rules.provider_block",
    "RequestParams": "openrouter_probe.rules.routing",
    "RouteDecision": "openrouter_probe.rules.routing",
    "Snapshot": "openrouter_probe.rules.snapshot",
    "SortSpec": "openrouter_probe.rules.provider_block",
    "bundled_snapshot": "openrouter_probe.rules.snapshot",
    "default_registry": "openrouter_probe.rules.precision",
    "effective_pricing": "openrouter_probe.rules.pricing",
    "load_snapshot": "openrouter_probe.rules.snapshot",
    "parse_token_count": "openrouter_probe.rules.quantities",
    "price_windows": "openrouter_probe.rules.pricing",
    "probe": "openrouter_probe.rules.snapshot",
    "route": "openrouter_probe.rules.routing",
}

__all__ = [
    "MaxPrice",
    "PrecisionRegistry",
    "ProviderBlock",
    "RequestParams",
    "RouteDecision",
    "Snapshot",
    "SortSpec",
    "bundled_snapshot",
    "default_registry",
    "effective_pricing",
    "load_snapshot",
    "parse_token_count",
    "price_windows",
    "probe",
    "route",
]

if TYPE_CHECKING:
    from openrouter_probe.rules.precision import PrecisionRegistry, default_registry
    from openrouter_probe.rules.pricing import effective_pricing, price_windows
    from openrouter_probe.rules.provider_block import MaxPrice, ProviderBlock, SortSpec
    from openrouter_probe.rules.quantities import parse_token_count
    from openrouter_probe.rules.routing import RequestParams, RouteDecision, route
    from openrouter_probe.rules.snapshot import Snapshot, bundled_snapshot, load_snapshot, probe

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

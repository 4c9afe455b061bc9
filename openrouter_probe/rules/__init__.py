"""What OpenRouter does and what a snapshot is: routing (the one copy of its rules), the provider
block, pricing, precision verdicts, snapshots, and the quantities people type.
May import ``api`` (and ``errors``, ``files``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from openrouter_probe import exports_of, lazy_exports

# The public names, written once as the imports a type checker reads (``exports_of``).
if TYPE_CHECKING:
    from openrouter_probe.rules.precision import PrecisionRegistry as PrecisionRegistry
    from openrouter_probe.rules.precision import default_registry as default_registry
    from openrouter_probe.rules.pricing import effective_pricing as effective_pricing
    from openrouter_probe.rules.pricing import price_windows as price_windows
    from openrouter_probe.rules.probing import probe as probe
    from openrouter_probe.rules.provider_block import MaxPrice as MaxPrice
    from openrouter_probe.rules.provider_block import ProviderBlock as ProviderBlock
    from openrouter_probe.rules.provider_block import SortSpec as SortSpec
    from openrouter_probe.rules.quantities import parse_token_count as parse_token_count
    from openrouter_probe.rules.ranking import RequestParams as RequestParams
    from openrouter_probe.rules.routing import RouteDecision as RouteDecision
    from openrouter_probe.rules.routing import route as route
    from openrouter_probe.rules.snapshot import Snapshot as Snapshot
    from openrouter_probe.rules.snapshot import bundled_snapshot as bundled_snapshot
    from openrouter_probe.rules.snapshot import load_snapshot as load_snapshot

_EXPORTS: dict[str, str] = exports_of(__file__)
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

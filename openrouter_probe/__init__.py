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
    "BudgetPlan": "openrouter_probe.budget",
    "ChatCompletion": "openrouter_probe.schema",
    "Client": "openrouter_probe.client",
    "CompiledPolicy": "openrouter_probe.policy",
    "ConfigError": "openrouter_probe.errors",
    "DriftReport": "openrouter_probe.drift",
    "Endpoint": "openrouter_probe.schema",
    "Generation": "openrouter_probe.schema",
    "InsufficientCreditsError": "openrouter_probe.errors",
    "KeyInfo": "openrouter_probe.schema",
    "Model": "openrouter_probe.schema",
    "ModelEndpoints": "openrouter_probe.schema",
    "ModelsList": "openrouter_probe.schema",
    "NoRouteError": "openrouter_probe.errors",
    "PolicyError": "openrouter_probe.errors",
    "PolicySpec": "openrouter_probe.policy",
    "PrecisionRegistry": "openrouter_probe.precision",
    "Pricing": "openrouter_probe.schema",
    "ProbeError": "openrouter_probe.errors",
    "Provider": "openrouter_probe.schema",
    "ProviderBlock": "openrouter_probe.routing",
    "RateLimitError": "openrouter_probe.errors",
    "RequestParams": "openrouter_probe.routing",
    "RouteDecision": "openrouter_probe.routing",
    "RunSummary": "openrouter_probe.generate",
    "SkippedRecord": "openrouter_probe.schema",
    "Snapshot": "openrouter_probe.snapshot",
    "SnapshotError": "openrouter_probe.errors",
    "Usage": "openrouter_probe.schema",
    "VerifyPlan": "openrouter_probe.verify.plan",
    "VerifyReport": "openrouter_probe.verify.report",
    "build_matrix": "openrouter_probe.matrix",
    "build_report": "openrouter_probe.verify.report",
    "bundled_models_list": "openrouter_probe.catalog",
    "bundled_snapshot": "openrouter_probe.snapshot",
    "check_policy": "openrouter_probe.drift",
    "compile_policy": "openrouter_probe.policy",
    "default_registry": "openrouter_probe.precision",
    "effective_pricing": "openrouter_probe.pricing",
    "generate": "openrouter_probe.generate",
    "lint_block": "openrouter_probe.lint",
    "load_compiled_policy": "openrouter_probe.policy",
    "load_models_list": "openrouter_probe.catalog",
    "load_snapshot": "openrouter_probe.snapshot",
    "load_spec": "openrouter_probe.policy",
    "matrix_history": "openrouter_probe.matrix",
    "parse_provider_page": "openrouter_probe.scrape",
    "parse_token_count": "openrouter_probe.quantities",
    "plan_budget": "openrouter_probe.budget",
    "plan_precision_check": "openrouter_probe.verify.run",
    "plan_verify": "openrouter_probe.verify.plan",
    "price_windows": "openrouter_probe.pricing",
    "probe": "openrouter_probe.snapshot",
    "route": "openrouter_probe.routing",
    "verify_precision": "openrouter_probe.verify.run",
}

__all__ = [
    "APIConnectionError",
    "APIError",
    "APIStatusError",
    "BudgetExceededError",
    "BudgetPlan",
    "ChatCompletion",
    "Client",
    "CompiledPolicy",
    "ConfigError",
    "DriftReport",
    "Endpoint",
    "Generation",
    "InsufficientCreditsError",
    "KeyInfo",
    "Model",
    "ModelEndpoints",
    "ModelsList",
    "NoRouteError",
    "PolicyError",
    "PolicySpec",
    "PrecisionRegistry",
    "Pricing",
    "ProbeError",
    "Provider",
    "ProviderBlock",
    "RateLimitError",
    "RequestParams",
    "RouteDecision",
    "RunSummary",
    "SkippedRecord",
    "Snapshot",
    "SnapshotError",
    "Usage",
    "VerifyPlan",
    "VerifyReport",
    "__version__",
    "build_matrix",
    "build_report",
    "bundled_models_list",
    "bundled_snapshot",
    "check_policy",
    "compile_policy",
    "default_registry",
    "effective_pricing",
    "generate",
    "lint_block",
    "load_compiled_policy",
    "load_models_list",
    "load_snapshot",
    "load_spec",
    "matrix_history",
    "parse_provider_page",
    "parse_token_count",
    "plan_budget",
    "plan_precision_check",
    "plan_verify",
    "price_windows",
    "probe",
    "route",
    "verify_precision",
]

if TYPE_CHECKING:
    from openrouter_probe.budget import BudgetPlan, plan_budget
    from openrouter_probe.catalog import bundled_models_list, load_models_list
    from openrouter_probe.client import Client
    from openrouter_probe.drift import DriftReport, check_policy
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
    from openrouter_probe.generate import RunSummary, generate
    from openrouter_probe.lint import lint_block
    from openrouter_probe.matrix import build_matrix, matrix_history
    from openrouter_probe.policy import (
        CompiledPolicy,
        PolicySpec,
        compile_policy,
        load_compiled_policy,
        load_spec,
    )
    from openrouter_probe.precision import PrecisionRegistry, default_registry
    from openrouter_probe.pricing import effective_pricing, price_windows
    from openrouter_probe.quantities import parse_token_count
    from openrouter_probe.routing import ProviderBlock, RequestParams, RouteDecision, route
    from openrouter_probe.schema import (
        ChatCompletion,
        Endpoint,
        Generation,
        KeyInfo,
        Model,
        ModelEndpoints,
        ModelsList,
        Pricing,
        Provider,
        SkippedRecord,
        Usage,
    )
    from openrouter_probe.scrape import parse_provider_page
    from openrouter_probe.snapshot import Snapshot, bundled_snapshot, load_snapshot, probe
    from openrouter_probe.verify.plan import VerifyPlan, plan_verify
    from openrouter_probe.verify.report import VerifyReport, build_report
    from openrouter_probe.verify.run import plan_precision_check, verify_precision


#: Subpackages reachable as attributes (``orp.fake.serve``) without importing them up front.
_SUBPACKAGES = frozenset({"fake"})


def __getattr__(name: str) -> Any:
    if name in _SUBPACKAGES:
        return importlib.import_module(f"openrouter_probe.{name}")
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'openrouter_probe' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))

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
import sys
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

__version__ = "0.2.0"

# name -> the folder (or module) that exports it; each folder resolves it to its module.
_EXPORTS: dict[str, str] = {
    "APIConnectionError": "openrouter_probe.errors",
    "APIError": "openrouter_probe.errors",
    "APIStatusError": "openrouter_probe.errors",
    "BudgetExceededError": "openrouter_probe.errors",
    "BudgetPlan": "openrouter_probe.analysis",
    "ChatCompletion": "openrouter_probe.api",
    "Client": "openrouter_probe.api",
    "CompiledPolicy": "openrouter_probe.policy",
    "ConfigError": "openrouter_probe.errors",
    "DriftReport": "openrouter_probe.policy",
    "Endpoint": "openrouter_probe.api",
    "Generation": "openrouter_probe.api",
    "InsufficientCreditsError": "openrouter_probe.errors",
    "KeyInfo": "openrouter_probe.api",
    "Model": "openrouter_probe.api",
    "ModelEndpoints": "openrouter_probe.api",
    "ModelsList": "openrouter_probe.api",
    "NoRouteError": "openrouter_probe.errors",
    "PolicyError": "openrouter_probe.errors",
    "PolicySpec": "openrouter_probe.policy",
    "PrecisionRegistry": "openrouter_probe.rules",
    "Pricing": "openrouter_probe.api",
    "ProbeError": "openrouter_probe.errors",
    "Provider": "openrouter_probe.api",
    "ProviderBlock": "openrouter_probe.rules",
    "RateLimitError": "openrouter_probe.errors",
    "RequestParams": "openrouter_probe.rules",
    "RouteDecision": "openrouter_probe.rules",
    "RunSummary": "openrouter_probe.run",
    "SkippedRecord": "openrouter_probe.api",
    "Snapshot": "openrouter_probe.rules",
    "SnapshotError": "openrouter_probe.errors",
    "Usage": "openrouter_probe.api",
    "VerifyPlan": "openrouter_probe.verify",
    "VerifyReport": "openrouter_probe.verify",
    "build_matrix": "openrouter_probe.analysis",
    "build_report": "openrouter_probe.verify",
    "bundled_models_list": "openrouter_probe.api",
    "bundled_snapshot": "openrouter_probe.rules",
    "check_policy": "openrouter_probe.policy",
    "compile_policy": "openrouter_probe.policy",
    "default_registry": "openrouter_probe.rules",
    "effective_pricing": "openrouter_probe.rules",
    "generate": "openrouter_probe.generation",
    "lint_block": "openrouter_probe.policy",
    "load_compiled_policy": "openrouter_probe.policy",
    "load_models_list": "openrouter_probe.api",
    "load_snapshot": "openrouter_probe.rules",
    "load_spec": "openrouter_probe.policy",
    "matrix_history": "openrouter_probe.analysis",
    "parse_provider_page": "openrouter_probe.api",
    "parse_token_count": "openrouter_probe.rules",
    "plan_budget": "openrouter_probe.analysis",
    "plan_precision_check": "openrouter_probe.verify",
    "plan_verify": "openrouter_probe.verify",
    "price_windows": "openrouter_probe.rules",
    "probe": "openrouter_probe.rules",
    "route": "openrouter_probe.rules",
    "verify_precision": "openrouter_probe.verify",
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
    from openrouter_probe.analysis import (
        BudgetPlan,
        build_matrix,
        matrix_history,
        plan_budget,
    )
    from openrouter_probe.api import (
        ChatCompletion,
        Client,
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
        bundled_models_list,
        load_models_list,
        parse_provider_page,
    )
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
    from openrouter_probe.generation import (
        generate,
    )
    from openrouter_probe.policy import (
        CompiledPolicy,
        DriftReport,
        PolicySpec,
        check_policy,
        compile_policy,
        lint_block,
        load_compiled_policy,
        load_spec,
    )
    from openrouter_probe.rules import (
        PrecisionRegistry,
        ProviderBlock,
        RequestParams,
        RouteDecision,
        Snapshot,
        bundled_snapshot,
        default_registry,
        effective_pricing,
        load_snapshot,
        parse_token_count,
        price_windows,
        probe,
        route,
    )
    from openrouter_probe.run import (
        RunSummary,
    )
    from openrouter_probe.verify import (
        VerifyPlan,
        VerifyReport,
        build_report,
        plan_precision_check,
        plan_verify,
        verify_precision,
    )


#: Subpackages reachable as attributes (``orp.fake.serve``) without importing them up front.
_SUBPACKAGES = frozenset({"analysis", "api", "fake", "policy", "rules", "run", "verify"})


def lazy_exports(
    package: str, exports: Mapping[str, str], subpackages: frozenset[str] = frozenset()
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """Return a package's ``__getattr__`` and ``__dir__`` that import each name on first use.

    ``exports`` maps a public name to the module that defines it (PEP 562). Every folder of the
    package uses this, so that importing one module never imports its siblings' dependencies.
    """
    namespace = sys.modules[package].__dict__

    def __getattr__(name: str) -> Any:
        if name in subpackages:
            return importlib.import_module(f"{package}.{name}")
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(namespace.get("__all__", ())))

    return __getattr__, __dir__


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, _SUBPACKAGES)

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
import re
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

#: The version of the installed package, as in its metadata.
__version__ = "0.2.0"

# The public surface, written once: each name below is exported (``__all__``), loaded on first use
# (``__getattr__``, read from this block by ``exports_of``) and typed for checkers (the imports
# themselves). ``name as name`` marks an explicit re-export for mypy --strict. Each ``# --`` line
# opens a group of docs/reference.md (``python docs/make_api_reference.py``).
if TYPE_CHECKING:
    # The groups' order is the page's, not isort's.
    # isort: off
    # -- Probe: who serves a model, from the API, the provider page or bundled data
    from openrouter_probe.api import ChatCompletion as ChatCompletion
    from openrouter_probe.api import Client as Client
    from openrouter_probe.api import Endpoint as Endpoint
    from openrouter_probe.api import Generation as Generation
    from openrouter_probe.api import KeyInfo as KeyInfo
    from openrouter_probe.api import Model as Model
    from openrouter_probe.api import ModelEndpoints as ModelEndpoints
    from openrouter_probe.api import ModelsList as ModelsList
    from openrouter_probe.api import Pricing as Pricing
    from openrouter_probe.api import Provider as Provider
    from openrouter_probe.api import SkippedRecord as SkippedRecord
    from openrouter_probe.api import Usage as Usage
    from openrouter_probe.api import bundled_models_list as bundled_models_list
    from openrouter_probe.api import load_models_list as load_models_list
    from openrouter_probe.api import parse_provider_page as parse_provider_page
    from openrouter_probe.rules import Snapshot as Snapshot
    from openrouter_probe.rules import bundled_snapshot as bundled_snapshot
    from openrouter_probe.rules import load_snapshot as load_snapshot
    from openrouter_probe.rules import probe as probe

    # -- Rules: OpenRouter's routing, the prices and the precision registry
    from openrouter_probe.rules import PrecisionRegistry as PrecisionRegistry
    from openrouter_probe.rules import ProviderBlock as ProviderBlock
    from openrouter_probe.rules import RequestParams as RequestParams
    from openrouter_probe.rules import RouteDecision as RouteDecision
    from openrouter_probe.rules import default_registry as default_registry
    from openrouter_probe.rules import effective_pricing as effective_pricing
    from openrouter_probe.rules import parse_token_count as parse_token_count
    from openrouter_probe.rules import price_windows as price_windows
    from openrouter_probe.rules import route as route

    # -- Analyze: the endpoint matrix, the budget plan and the plots
    from openrouter_probe.analysis import BudgetPlan as BudgetPlan
    from openrouter_probe.analysis import build_matrix as build_matrix
    from openrouter_probe.analysis import matrix_history as matrix_history
    from openrouter_probe.analysis import plan_budget as plan_budget
    from openrouter_probe.analysis import plot_budget as plot_budget
    from openrouter_probe.analysis import plot_price_uptime as plot_price_uptime

    # -- Compile: a policy spec into OpenRouter's provider block, lint and drift
    from openrouter_probe.policy import CompiledPolicy as CompiledPolicy
    from openrouter_probe.policy import DriftReport as DriftReport
    from openrouter_probe.policy import PolicySpec as PolicySpec
    from openrouter_probe.policy import check_policy as check_policy
    from openrouter_probe.policy import compile_policy as compile_policy
    from openrouter_probe.policy import lint_block as lint_block
    from openrouter_probe.policy import load_compiled_policy as load_compiled_policy
    from openrouter_probe.policy import load_spec as load_spec

    # -- Generate: the paid job, who served each row (audit) and the training files (export)
    from openrouter_probe.generation import generate as generate
    from openrouter_probe.generation.audit import AuditReport as AuditReport
    from openrouter_probe.generation.audit import audit as audit
    from openrouter_probe.generation.export import ExportSummary as ExportSummary
    from openrouter_probe.generation.export import export as export
    from openrouter_probe.run import RunResult as RunResult
    from openrouter_probe.run import RunSummary as RunSummary
    from openrouter_probe.run import StopReason as StopReason
    from openrouter_probe.run import render_result as render_result

    # -- Verify: the empirical precision check
    from openrouter_probe.verify import VerifyPlan as VerifyPlan
    from openrouter_probe.verify import VerifyReport as VerifyReport
    from openrouter_probe.verify import build_report as build_report
    from openrouter_probe.verify import plan_precision_check as plan_precision_check
    from openrouter_probe.verify import plan_verify as plan_verify
    from openrouter_probe.verify import verify_precision as verify_precision

    # -- Errors: one tree under ProbeError, defined in openrouter_probe.errors
    from openrouter_probe.errors import APIConnectionError as APIConnectionError
    from openrouter_probe.errors import APIError as APIError
    from openrouter_probe.errors import APIStatusError as APIStatusError
    from openrouter_probe.errors import ConfigError as ConfigError
    from openrouter_probe.errors import InsufficientCreditsError as InsufficientCreditsError
    from openrouter_probe.errors import NoRouteError as NoRouteError
    from openrouter_probe.errors import PolicyError as PolicyError
    from openrouter_probe.errors import ProbeError as ProbeError
    from openrouter_probe.errors import RateLimitError as RateLimitError
    from openrouter_probe.errors import SnapshotError as SnapshotError
    # isort: on


_REEXPORT = re.compile(r"^    from ([\w.]+) import (\w+) as \2$", re.MULTILINE)


def exports_of(path: str | Path) -> dict[str, str]:
    """Return ``{name: module}`` for every ``from module import name as name`` line, indented
    once, in the Python file at ``path``: the re-exports of its ``if TYPE_CHECKING:`` block.

    A package that writes its public names once, as the imports its type checker reads, gets its
    lazy table from them (the pattern of scientific-python's ``lazy_loader.attach_stub``). A
    regular expression, not ``ast``, reads them: parsing the file would make ``import
    openrouter_probe`` five times slower; ``tests/project/test_exported_members.py`` checks that the two
    readings agree.
    """
    text = Path(path).read_text(encoding="utf-8")
    return {name: module for module, name in _REEXPORT.findall(text)}


def lazy_exports(
    package: str, exports: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """Return a package's ``__getattr__`` and ``__dir__`` that import each name on first use.

    ``exports`` maps a public name to the module that defines it (PEP 562; every folder reads
    its own from its ``TYPE_CHECKING`` block with ``exports_of``). Any other name that is a module
    or a folder of the package is imported as one (``orp.generation``, ``orp.fake.server``), as
    after an explicit ``import``. Importing one module never imports its siblings' dependencies.
    """
    namespace = sys.modules[package].__dict__
    folder = Path(namespace["__file__"]).parent

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            if not name.startswith("_") and (
                (folder / name / "__init__.py").is_file() or (folder / f"{name}.py").is_file()
            ):
                return importlib.import_module(f"{package}.{name}")
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(namespace.get("__all__", ())))

    return __getattr__, __dir__


#: name -> the folder (or module) that exports it, read from the ``TYPE_CHECKING`` block above.
_EXPORTS: dict[str, str] = exports_of(__file__)

__all__ = sorted([*_EXPORTS, "__version__"])

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

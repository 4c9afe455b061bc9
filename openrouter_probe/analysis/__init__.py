"""Analysis for people and notebooks: the endpoint matrix (pandas), the budget plan and the plots.
May import ``rules`` and ``api`` (and ``errors``, ``files``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from openrouter_probe import exports_of, lazy_exports

# The public names, written once as the imports a type checker reads (``exports_of``).
if TYPE_CHECKING:
    from openrouter_probe.analysis.budget import plan_budget as plan_budget
    from openrouter_probe.analysis.budget_plan import BudgetPlan as BudgetPlan
    from openrouter_probe.analysis.matrix import build_matrix as build_matrix
    from openrouter_probe.analysis.matrix import matrix_history as matrix_history
    from openrouter_probe.analysis.plots import plot_budget as plot_budget
    from openrouter_probe.analysis.plots import plot_price_uptime as plot_price_uptime

_EXPORTS: dict[str, str] = exports_of(__file__)
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

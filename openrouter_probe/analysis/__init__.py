"""Analysis for people and notebooks: the endpoint matrix (pandas), the budget plan and the plots.
May import ``rules`` and ``api`` (and ``errors``, ``files``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from openrouter_probe import lazy_exports

# name -> module that defines it, imported on first use
_EXPORTS: dict[str, str] = {
    "BudgetPlan": "openrouter_probe.analysis.budget_plan",
    "build_matrix": "openrouter_probe.analysis.matrix",
    "matrix_history": "openrouter_probe.analysis.matrix",
    "plan_budget": "openrouter_probe.analysis.budget",
    "plot_budget": "openrouter_probe.analysis.plots",
    "plot_price_uptime": "openrouter_probe.analysis.plots",
}

__all__ = [
    "BudgetPlan",
    "build_matrix",
    "matrix_history",
    "plan_budget",
    "plot_budget",
    "plot_price_uptime",
]

if TYPE_CHECKING:
    from openrouter_probe.analysis.budget import plan_budget
    from openrouter_probe.analysis.budget_plan import BudgetPlan
    from openrouter_probe.analysis.matrix import build_matrix, matrix_history
    from openrouter_probe.analysis.plots import plot_budget, plot_price_uptime

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

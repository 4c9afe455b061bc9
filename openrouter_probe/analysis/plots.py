"""Plots of the matrix and the budget (matplotlib).

Each function returns a ``matplotlib.figure.Figure`` built without pyplot, so nothing depends on
the interactive backend; ``save_figure`` writes it through the Agg canvas. matplotlib is imported
inside the functions, so importing this module stays cheap.
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING

from openrouter_probe.errors import ConfigError, Message
from openrouter_probe.rules.quantities import format_tokens

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from openrouter_probe.analysis.budget_plan import BudgetPlan

__all__ = [
    "VERDICT_COLOURS",
    "plot_budget",
    "plot_price_uptime",
    "save_figure",
]

#: The target (and the shortfall to it) and the headroom under the budget, in every plot.
_TARGET_COLOUR = "#c0392b"
_HEADROOM_COLOUR = "#2c7fb8"

#: One colour per precision verdict, the same in every plot.
VERDICT_COLOURS: dict[str, str] = {
    "native": "#1b9e77",
    "upcast": "#7570b3",
    "requantized": "#d95f02",
    "undeclared": "#777777",
    "unassessed": "#e6ab02",
}


def plot_price_uptime(
    matrix: pd.DataFrame,
    *,
    price_column: str = "output_usd_per_m",
    uptime_column: str = "uptime_30m_pct",
    plan: BudgetPlan | None = None,
    title: str | None = None,
) -> Figure:
    """Scatter each endpoint's price against its uptime, coloured by precision verdict.

    ``matrix`` is a frame from ``build_matrix``; endpoints without the price or the uptime are left
    out. The best endpoints sit bottom right (cheap, reliable); each point is labelled with its tag.
    With ``plan`` (from ``plan_budget``), a dotted line marks the output price at which the plan's
    budget buys its whole target, and the band under it is shaded: endpoints inside it fit.
    """
    from matplotlib.figure import Figure

    for column in (price_column, uptime_column, "verdict", "tag"):
        if column not in matrix.columns:
            raise ConfigError(f"plot_price_uptime: the frame has no {column!r} column")
    data = matrix.dropna(subset=[price_column, uptime_column])
    fig = Figure(figsize=(8, 5), layout="constrained")
    ax = fig.add_subplot()
    for verdict, group in data.groupby("verdict", sort=True):
        ax.scatter(
            group[uptime_column],
            group[price_column],
            s=60,
            color=VERDICT_COLOURS.get(str(verdict), "#333333"),
            label=str(verdict),
            edgecolors="black",
            linewidths=0.5,
            zorder=3,
        )
    # Endpoints often share a price: stack their labels instead of printing them over each other.
    seen: dict[float, int] = {}
    for _, row in data.sort_values([price_column, uptime_column]).iterrows():
        price = round(float(row[price_column]), 2)
        k = seen[price] = seen.get(price, -1) + 1
        ax.annotate(
            str(row["tag"]),
            (row[uptime_column], row[price_column]),
            xytext=(-6, 5 + 9 * k),
            textcoords="offset points",
            ha="right",
            fontsize=7,
            arrowprops={"arrowstyle": "-", "color": "#999999", "linewidth": 0.5} if k else None,
        )
    ax.set_xlabel(uptime_column.replace("_pct", " (%)").replace("_", " "))
    ax.set_ylabel(
        price_column.replace("_usd_per_m", " price (USD per 1M tokens)").replace("_", " ")
    )
    models = sorted({str(m) for m in data["model"]}) if "model" in data.columns else []
    ax.set_title(
        title
        or (f"{models[0]}: price against uptime" if len(models) == 1 else "price against uptime")
    )
    if plan is not None and plan.output_tokens > 0:
        fit = float(plan.budget_usd) / plan.output_tokens * 1e6
        ax.axhspan(0, fit, color=_HEADROOM_COLOUR, alpha=0.12, zorder=0)
        ax.axhline(
            fit,
            color=_HEADROOM_COLOUR,
            linestyle=":",
            linewidth=2,
            # "\$": two dollar signs in one label would be read as mathtext.
            label=f"\\${float(plan.budget_usd):,.0f} buys {format_tokens(plan.output_tokens)} "
            f"at or below \\${fit:.2f}/M",
        )
        low = min([fit, *(float(p) for p in data[price_column])])
        ax.set_ylim(bottom=low * 0.9)
    ax.grid(True, alpha=0.3)
    ax.margins(x=0.1)  # room for the labels, which sit left of their points
    ax.legend(title="precision verdict")
    return fig


def plot_budget(
    plan: BudgetPlan,
    *,
    shares: tuple[float, ...] | None = None,
    price_usd_per_m: Decimal | float | None = None,
    title: str | None = None,
) -> Figure:
    """Plot cost against visible output tokens for several reasoning shares, with the budget line.

    Reasoning tokens are billed as output, so wanting V visible tokens at reasoning share s bills
    V / (1 − s) tokens. Each line is one share (default: the plan's low, middle and high share);
    the dashed line is the budget, and each dot marks the visible tokens the budget buys at that
    share. The price is the plan's cheapest admitted output price unless given.

    The target is marked too: a red dotted line at what the plan's billed output tokens cost, the
    gap to the budget shaded (red: the shortfall; green: the headroom), and a grey band over the
    visible tokens the target holds between the plan's lowest and highest reasoning share.
    """
    from matplotlib.figure import Figure

    price = Decimal(str(price_usd_per_m)) if price_usd_per_m is not None else None
    price_f = float(price if price is not None else plan.cheapest.price_out_usd_per_m)
    low, high = float(plan.reasoning_share_min), float(plan.reasoning_share_max)
    if shares is None:
        shares = (low,) if low == high else (low, (low + high) / 2, high)
    budget = float(plan.budget_usd)
    target_cost = plan.output_tokens * price_f / 1e6
    x_max = max(plan.output_tokens * 1.2, 1.0)
    steps = 50
    xs = [x_max * i / steps for i in range(steps + 1)]
    fig = Figure(figsize=(8, 6.5), layout="constrained")
    ax = fig.add_subplot()
    for share in shares:
        ys = [x / (1 - share) * price_f / 1e6 for x in xs]
        (line,) = ax.plot([x / 1e6 for x in xs], ys, label=f"reasoning {share:.0%} of output")
        # Where the line meets the budget: the visible tokens the budget buys at this share.
        bought_m = budget / price_f * (1 - share) if price_f > 0 else None
        if bought_m is not None and bought_m * 1e6 <= x_max:
            ax.plot([bought_m], [budget], "o", color=line.get_color(), zorder=3)
            ax.annotate(
                f"{bought_m:.2f}M",
                (bought_m, budget),
                xytext=(4, -12),
                textcoords="offset points",
                fontsize=8,
            )
    ax.axhline(budget, color="black", linestyle="--", label=f"budget ${budget:,.0f}")
    ax.plot([], [], "o", color="grey", label="visible tokens the budget buys (M)")
    _mark_target(ax, plan, price_f, budget)
    ax.set_xlabel("visible output tokens wanted (millions)")
    ax.set_ylabel("cost (USD)")
    who = "cheapest admitted" if price is None else "given price"
    ax.set_title(title or f"{plan.model or 'model'}: cost at ${price_f:.2f}/M output ({who})")
    ax.set_ylim(0, max(budget * 2.5, target_cost * 1.2, 1.0))
    ax.grid(True, alpha=0.3)
    # Below the axes: inside, the legend would hide the budget line and the dots on it.
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=2, fontsize=8)
    return fig


def _target_label(plan: BudgetPlan) -> str:
    per = set(plan.output_tokens_per_dataset)
    if plan.datasets > 1 and len(per) == 1:
        return f"{format_tokens(per.pop())} x {plan.datasets} datasets"
    return f"over {plan.datasets} datasets" if plan.datasets > 1 else "one dataset"


def _mark_target(ax: Axes, plan: BudgetPlan, price_f: float, budget: float) -> None:
    """Draw the target on a cost-against-visible-tokens plot: its cost, the gap, its visible text."""
    if plan.output_tokens <= 0:
        return
    target_cost = plan.output_tokens * price_f / 1e6
    gap = target_cost - budget
    ax.axhline(
        target_cost,
        color=_TARGET_COLOUR,
        linestyle=":",
        linewidth=2,
        label=f"target {format_tokens(plan.output_tokens)} billed "
        f"({_target_label(plan)}) costs ${target_cost:,.2f}",
    )
    if abs(gap) >= 0.005:
        ax.axhspan(
            min(budget, target_cost),
            max(budget, target_cost),
            color=_TARGET_COLOUR if gap > 0 else _HEADROOM_COLOUR,
            alpha=0.12,
            label=f"shortfall ${gap:,.2f}" if gap > 0 else f"headroom ${-gap:,.2f}",
        )
    low_m = plan.target_visible_tokens_min / 1e6
    high_m = plan.target_visible_tokens_max / 1e6
    if high_m > low_m:
        low, high = float(plan.reasoning_share_max), float(plan.reasoning_share_min)
        ax.axvspan(
            low_m,
            high_m,
            color="grey",
            alpha=0.12,
            label=f"target's visible text: {format_tokens(plan.target_visible_tokens_min)} "
            f"({low:.0%} reasoning) to {format_tokens(plan.target_visible_tokens_max)} "
            f"({high:.0%})",
        )


def save_figure(fig: Figure, path: str | Path, *, dpi: int = 120) -> Path:
    """Write ``fig`` to ``path`` (the format from its suffix, e.g. ``.png``) with the Agg canvas.

    The figure is rendered to bytes first and then written atomically: a failed render or write
    leaves an existing file whole.
    """
    import io

    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from openrouter_probe.files import atomic_write_bytes

    target = Path(path)  # (a missing folder is made: ``atomic_write_bytes``)
    FigureCanvasAgg(fig)  # attach a non-interactive canvas: works headless, in CI and in a CLI
    suffix = target.suffix.lstrip(".").lower() or None  # none: matplotlib's default, PNG
    buf = io.BytesIO()
    try:
        fig.savefig(buf, dpi=dpi, format=suffix)
        atomic_write_bytes(target, buf.getvalue())
    except (OSError, ValueError) as exc:
        raise ConfigError(
            Message(
                "plot-unwritable",
                "{path=}: cannot write the plot: {reason:s}",
                path=target,
                reason=str(exc),
            )
        ) from exc
    return target

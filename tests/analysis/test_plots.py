"""The plots mark what a person deciding how to spend the budget looks for: the target, its cost,
the shortfall (or headroom) and the price at which the budget would buy the whole target.

The figures are inspected through their Axes (lines, patches, legend labels), not as pixels.
"""

from __future__ import annotations

from typing import Any

import pytest

from openrouter_probe.analysis.budget import plan_budget
from openrouter_probe.analysis.matrix import build_matrix
from openrouter_probe.analysis.plots import plot_budget, plot_price_uptime, save_figure
from openrouter_probe.rules.snapshot import bundled_snapshot

SNAP = bundled_snapshot("moonshotai/kimi-k2.5")


def _plan(**options: Any) -> Any:
    options.setdefault("output_tokens", "60M")
    return plan_budget(SNAP, budget_usd=100, datasets=6, reasoning_share="0.5:0.8", **options)


def _legend(ax: Any) -> list[str]:
    return [t.get_text() for t in ax.get_legend().get_texts()]


def _hlines(ax: Any) -> dict[str, float]:
    """Horizontal lines by label: their y."""
    out = {}
    for line in ax.get_lines():
        ys = list(line.get_ydata())
        if len(ys) == 2 and ys[0] == ys[1] and not line.get_label().startswith("_"):
            out[line.get_label()] = float(ys[0])
    return out


def _span(patch: Any, axis: int) -> tuple[float, float]:
    """The patch's extent along x (0) or y (1) in its own coordinates: ``axhspan`` returns a
    Polygon up to matplotlib 3.8 and a Rectangle from 3.9 on; both map their path this way."""
    points = patch.get_patch_transform().transform(patch.get_path().vertices)
    return float(points[:, axis].min()), float(points[:, axis].max())


def test_budget_plot_marks_the_target_its_cost_and_the_shortfall() -> None:
    ax = plot_budget(_plan()).axes[0]
    labels = _legend(ax)
    target = "target 60M billed (10M x 6 datasets) costs $132.00"
    assert target in labels and "budget $100" in labels and "shortfall $32.00" in labels
    lines = _hlines(ax)
    assert lines[target] == pytest.approx(132.0) and lines["budget $100"] == pytest.approx(100.0)
    spans = {p.get_label(): p for p in ax.patches}
    assert _span(spans["shortfall $32.00"], 1) == pytest.approx((100.0, 132.0))
    # The target's visible text: 60M billed at 80% reasoning is 12M visible, at 50% 30M.
    band = "target's visible text: 12M (80% reasoning) to 30M (50%)"
    assert band in spans and band in labels
    assert _span(spans[band], 0) == pytest.approx((12.0, 30.0))
    assert ax.get_ylim()[1] >= 132.0  # the target's cost is on the plot


def test_budget_plot_shows_headroom_when_the_target_fits() -> None:
    ax = plot_budget(_plan(output_tokens="30M")).axes[0]
    labels = _legend(ax)
    assert "target 30M billed (5M x 6 datasets) costs $66.00" in labels
    assert "headroom $34.00" in labels and not any(s.startswith("shortfall") for s in labels)


def test_price_uptime_plot_marks_the_price_that_buys_the_target() -> None:
    matrix = build_matrix(SNAP)
    plain = plot_price_uptime(matrix).axes[0]
    assert _hlines(plain) == {} and len(plain.patches) == 0  # without a plan: nothing added
    ax = plot_price_uptime(matrix, plan=_plan()).axes[0]
    label = r"\$100 buys 60M at or below \$1.67/M"
    assert _hlines(ax) == {label: pytest.approx(100 / 60)}
    assert label in _legend(ax)
    assert ax.get_ylim()[0] < 100 / 60  # the line and the band under it are in view
    # Every endpoint is dearer: none sits in the band where $100 buys the target.
    assert min(matrix["output_usd_per_m"]) > 100 / 60


def test_marked_plots_render_without_mathtext_errors(tmp_path: Any) -> None:
    """Two '$' in one label would be parsed as mathtext; saving renders every label."""
    plan = _plan()
    for fig in (plot_budget(plan), plot_price_uptime(build_matrix(SNAP), plan=plan)):
        path = save_figure(fig, tmp_path / "plot.png")
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

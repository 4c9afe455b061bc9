"""What ``plan_budget`` works out, as plain frozen data: ``to_dict()`` gives every figure by name
with its unit in the name, ``endpoint_rows()`` one plain row per endpoint. Money is ``Decimal``;
figures are rounded only where they are shown.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, is_dataclass
from decimal import ROUND_FLOOR, Decimal
from typing import TYPE_CHECKING, Any, Literal

from openrouter_probe.rules.quantities import format_tokens, format_usd, format_usd_per_m

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["BudgetPlan", "DatasetRun", "EndpointBudget", "Figures", "TimeWindowCost"]


@dataclass(frozen=True)
class DatasetRun:
    """One dataset in "run until the money runs out": what it wanted, got and cost."""

    dataset: str
    target_output_tokens: int
    funded_output_tokens: int
    cost_usd: Decimal
    completed_pct: Decimal
    status: Literal["complete", "partial", "not started"]


@dataclass(frozen=True)
class Figures:
    """What the target costs and what the budget buys at one effective price.

    ``basis`` is ``output_only`` (output tokens at the output price) or ``all_in`` (input tokens
    added: the effective price per million output tokens includes the prompts they need).
    Token counts bought are ``None`` when the price is zero (the budget does not bind).
    """

    basis: Literal["output_only", "all_in"]
    effective_usd_per_m: Decimal
    cost_usd: Decimal
    affordable_output_tokens: int | None
    affordable_output_tokens_per_dataset: int | None
    affordable_visible_tokens_min: int | None
    affordable_visible_tokens_max: int | None
    target_covered_pct: Decimal | None
    shortfall_usd: Decimal
    shortfall_pct: Decimal
    headroom_usd: Decimal
    headroom_pct: Decimal
    datasets_completed: int
    run: tuple[DatasetRun, ...]


@dataclass(frozen=True)
class EndpointBudget:
    """The budget figures for one admitted endpoint, or for the routing blend (``tag="blended"``).

    ``weight`` is the expected share of traffic from the routing model (1 for the blend).
    ``price_out_usd_per_m`` is what one million *billed* output tokens cost there: the listed
    output price, with the reasoning share priced at ``internal_reasoning`` where the endpoint lists
    it (at the end of the share range that costs more) and the prompt-size overrides applied.
    ``price_completion_usd_per_m`` and ``price_reasoning_usd_per_m`` are the listed prices it comes
    from (``None`` for the blend, and for the reasoning price where none is listed).
    """

    tag: str
    provider: str
    verdict: str | None
    role: str
    position: int | None
    weight: float
    price_in_usd_per_m: Decimal | None
    price_out_usd_per_m: Decimal
    price_completion_usd_per_m: Decimal | None
    price_reasoning_usd_per_m: Decimal | None
    throughput_p50_tps: float | None
    time_to_finish_s: float | None
    output_only: Figures
    all_in: Figures | None

    def to_dict(self) -> dict[str, Any]:
        plain = _plain(self)
        hours = None if self.time_to_finish_s is None else self.time_to_finish_s / 3600
        output_only, all_in = plain.pop("output_only"), plain.pop("all_in")
        return {**plain, "time_to_finish_h": hours, "output_only": output_only, "all_in": all_in}


@dataclass(frozen=True)
class TimeWindowCost:
    """The cheapest UTC window of the day at one endpoint, when its prices vary by time of day.

    ``start_hhmm``/``end_hhmm`` are HHMM clock numbers (half-open; ``start > end`` wraps midnight);
    the price and cost are the output-only ones for the plan's target inside the window.
    """

    tag: str
    start_hhmm: int
    end_hhmm: int
    price_out_usd_per_m: Decimal
    cost_usd: Decimal
    default_price_out_usd_per_m: Decimal

    @property
    def label(self) -> str:
        """The window as ``HH:MM-HH:MM UTC``."""
        start, end = divmod(self.start_hhmm, 100), divmod(self.end_hhmm, 100)
        return f"{start[0]:02d}:{start[1]:02d}-{end[0]:02d}:{end[1]:02d} UTC"

    def to_dict(self) -> dict[str, Any]:
        return {
            "tag": self.tag,
            "utc_start": self.start_hhmm,
            "utc_end": self.end_hhmm,
            "price_out_usd_per_m": float(self.price_out_usd_per_m),
            "cost_usd": float(self.cost_usd),
            "default_price_out_usd_per_m": float(self.default_price_out_usd_per_m),
        }


@dataclass(frozen=True)
class BudgetPlan:
    """Everything ``plan_budget`` worked out; ``to_dict()`` gives every figure by name."""

    model: str | None
    snapshot: str | None
    budget_usd: Decimal
    output_tokens: int
    datasets: int
    dataset_names: tuple[str, ...]
    output_tokens_per_dataset: tuple[int, ...]
    reasoning_share_min: Decimal
    reasoning_share_max: Decimal
    prompt_tokens_per_request: int | None
    output_tokens_per_request: int | None
    input_tokens_per_output_token: Decimal | None
    input_tokens: int | None
    requests: int | None
    concurrency: int
    routing_mode: str
    policy: dict[str, Any] | None
    cheapest: EndpointBudget
    blended: EndpointBudget
    endpoints: tuple[EndpointBudget, ...]
    excluded: tuple[tuple[str, str, str], ...]
    notes: tuple[str, ...] = field(default=())
    #: ``order``/``only`` entries of the block that match no endpoint (a stale policy names them).
    unmatched_entries: tuple[str, ...] = field(default=())
    #: The cheapest time-of-day window over the admitted endpoints, when prices vary by time.
    cheapest_window: TimeWindowCost | None = None

    @property
    def target_visible_tokens_min(self) -> int:
        """Visible tokens in the target at the highest reasoning share."""
        return visible_tokens(self.output_tokens, self.reasoning_share_max)

    @property
    def target_visible_tokens_max(self) -> int:
        """Visible tokens in the target at the lowest reasoning share."""
        return visible_tokens(self.output_tokens, self.reasoning_share_min)

    @property
    def headline(self) -> str:
        """One sentence with the scenario's numbers: cost, shortfall, what the budget buys."""
        c, fig = self.cheapest, self.cheapest.output_only
        where = "over" if fig.shortfall_usd > 0 else "under"
        pct = fig.shortfall_pct if fig.shortfall_usd > 0 else fig.headroom_pct
        per = (
            f", {_buys(fig.affordable_output_tokens_per_dataset)} per dataset over {self.datasets}"
            if self.datasets > 1
            else ""
        )
        text = (
            f"{format_tokens(self.output_tokens)} output tokens at the cheapest admitted "
            f"{format_usd_per_m(c.price_out_usd_per_m)} ({c.provider}) cost "
            f"{format_usd(fig.cost_usd)}, {pct:.0f}% {where} the {format_usd(self.budget_usd)} "
            f"budget; {format_usd(self.budget_usd)} buys {_buys(fig.affordable_output_tokens)} "
            f"output tokens{per}"
        )
        if c.all_in is not None:
            text += (
                f"; all-in with the prompts ({format_usd(c.all_in.effective_usd_per_m)} per "
                f"million output tokens) the target costs {format_usd(c.all_in.cost_usd)} and "
                f"{format_usd(self.budget_usd)} buys {_buys(c.all_in.affordable_output_tokens)} "
                "output tokens"
            )
        return text

    def __repr__(self) -> str:
        c = self.cheapest
        return (
            f"<BudgetPlan {self.model or 'model'}: {format_tokens(self.output_tokens)} output "
            f"tokens, {format_usd(self.budget_usd)} budget, {len(self.endpoints)} endpoints; "
            f"cheapest {c.tag} {format_usd_per_m(c.price_out_usd_per_m)} costs "
            f"{format_usd(c.output_only.cost_usd)}>"
        )

    def to_dict(self) -> dict[str, Any]:
        """Every figure by name, units in the names (JSON-ready: floats, ints, strings)."""
        plain = _plain(self)
        plain["excluded"] = [
            {"tag": tag, "reason": reason, "detail": detail}
            for tag, reason, detail in self.excluded
        ]
        return {
            "headline": self.headline,
            "target_visible_tokens_min": self.target_visible_tokens_min,
            "target_visible_tokens_max": self.target_visible_tokens_max,
            **plain,
        }

    def endpoint_rows(self) -> list[dict[str, Any]]:
        """One plain row per admitted endpoint (then the blend): prices, cost, what it buys."""
        rows = []
        for e in (*self.endpoints, self.blended):
            out, all_in = e.output_only, e.all_in
            rows.append(
                {
                    "tag": e.tag,
                    "provider": e.provider,
                    "verdict": e.verdict,
                    "role": e.role,
                    "weight": e.weight,
                    "price_in_usd_per_m": _f(e.price_in_usd_per_m),
                    "price_out_usd_per_m": float(e.price_out_usd_per_m),
                    "price_reasoning_usd_per_m": _f(e.price_reasoning_usd_per_m),
                    "cost_usd": float(out.cost_usd),
                    "shortfall_usd": float(out.shortfall_usd),
                    "shortfall_pct": float(out.shortfall_pct),
                    "over_budget_pct": float(out.shortfall_pct - out.headroom_pct),
                    "affordable_output_tokens": out.affordable_output_tokens,
                    "affordable_output_tokens_per_dataset": out.affordable_output_tokens_per_dataset,
                    "affordable_visible_tokens_min": out.affordable_visible_tokens_min,
                    "affordable_visible_tokens_max": out.affordable_visible_tokens_max,
                    "datasets_completed": out.datasets_completed,
                    "all_in_cost_usd": None if all_in is None else float(all_in.cost_usd),
                    "all_in_affordable_output_tokens": None
                    if all_in is None
                    else all_in.affordable_output_tokens,
                    "time_to_finish_h": None
                    if e.time_to_finish_s is None
                    else e.time_to_finish_s / 3600,
                }
            )
        return rows

    def endpoints_frame(self) -> pd.DataFrame:
        """``endpoint_rows`` as a DataFrame (nullable integers for the token counts)."""
        import pandas as pd

        frame = pd.DataFrame(self.endpoint_rows())
        for column in (
            "affordable_output_tokens",
            "affordable_output_tokens_per_dataset",
            "affordable_visible_tokens_min",
            "affordable_visible_tokens_max",
            "all_in_affordable_output_tokens",
        ):
            frame[column] = frame[column].astype("Int64")
        for column in (
            "price_in_usd_per_m",
            "price_reasoning_usd_per_m",
            "all_in_cost_usd",
            "time_to_finish_h",
        ):
            frame[column] = frame[column].astype("float64")
        return frame

    def run_frame(self, *, which: Literal["cheapest", "blended"] = "cheapest") -> pd.DataFrame:
        """ "Run until the money runs out" at the cheapest (or blended) price, one row per dataset,
        output-only and, when the prompt size is known, all-in."""
        import pandas as pd

        entry = self.cheapest if which == "cheapest" else self.blended
        rows = []
        for figures in (entry.output_only, entry.all_in):
            if figures is None:
                continue
            for r in figures.run:
                rows.append({"basis": figures.basis, **_plain(r)})
        return pd.DataFrame(rows)


def _f(value: Decimal | None) -> float | None:
    return None if value is None else float(value)


def _plain(figures: Any) -> dict[str, Any]:
    """A dataclass of figures as JSON-ready values, field by field: ``Decimal`` as float, a tuple
    as a list, a nested dataclass by its own ``to_dict`` where it has one."""

    def plain(value: Any) -> Any:
        if isinstance(value, Decimal):
            return float(value)
        if isinstance(value, tuple):
            return [plain(v) for v in value]
        if hasattr(value, "to_dict"):
            return value.to_dict()
        return _plain(value) if is_dataclass(value) else value

    return {f.name: plain(getattr(figures, f.name)) for f in fields(figures)}


def _buys(tokens: int | None) -> str:
    return "unlimited" if tokens is None else format_tokens(tokens)


def visible_tokens(billed: int, share: Decimal) -> int:
    """The visible part of ``billed`` output tokens at reasoning ``share``, rounded down."""
    return int((Decimal(billed) * (1 - share)).to_integral_value(rounding=ROUND_FLOOR))


def floor_tokens(value: Decimal) -> int:
    """A token count worked out in ``Decimal``, rounded down to a whole token."""
    return int(value.to_integral_value(rounding=ROUND_FLOOR))

"""What a job costs through OpenRouter's Batch API, beside the sync figures: the target at the
cheapest admitted ``:batch`` endpoint, or one line saying why there is no batch figure (not
probed, none listed, none admitted). Output tokens only, like the headline (``docs/analysis.md``,
"The batch line"; ``docs/batch.md``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from openrouter_probe.rules.batch import batch_pairs
from openrouter_probe.rules.quantities import (
    format_pct,
    format_tokens,
    format_usd,
    format_usd_per_m,
)

if TYPE_CHECKING:
    from openrouter_probe.rules.snapshot import Snapshot

__all__ = ["BatchBudget", "plan_batch"]

_MILLION = Decimal(1_000_000)


@dataclass(frozen=True)
class BatchBudget:
    """The target at the batch price (``tag`` ``None``: no batch figure, ``line`` says why)."""

    model: str
    output_tokens: int
    budget_usd: Decimal
    line: str
    tag: str | None = None
    status: str | None = None
    price_out_usd_per_m: Decimal | None = None
    cost_usd: Decimal | None = None
    sync_price_out_usd_per_m: Decimal | None = None
    sync_cost_usd: Decimal | None = None
    affordable_output_tokens: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """The batch figure as JSON-ready values (the job's own numbers left out)."""
        shown = {f.name: getattr(self, f.name) for f in fields(self)[3:]}
        return {k: float(v) if isinstance(v, Decimal) else v for k, v in shown.items()}


def plan_batch(
    snapshot: Snapshot,
    *,
    output_tokens: int,
    budget_usd: Decimal | float | int | str,
    admitted: Sequence[str] | None = None,
    policy_note: str | None = None,
) -> BatchBudget:
    """Price ``output_tokens`` at the cheapest admitted ``:batch`` endpoint of ``snapshot``.

    ``admitted``: the ``:batch`` tags a compiled policy admits, in its order (``None``: no policy,
    all of them); ``policy_note``: the compiled batch block's note, shown when it admits none.
    """
    budget = Decimal(str(budget_usd))

    def without(line: str) -> BatchBudget:
        return BatchBudget(snapshot.model, output_tokens, budget, line)

    if snapshot.batch is None:
        return without(
            f"batch: no :batch endpoint is known for {snapshot.model} (this snapshot was "
            "not probed for them; a fresh probe asks GET /models/MODEL:batch/endpoints)"
        )
    pairs = batch_pairs(snapshot.batch, snapshot.endpoints)
    if not pairs:
        return without(f"batch: no :batch endpoint is listed for {snapshot.model}: run it sync")
    chosen = [p for p in pairs if admitted is None or p.batch.tag in admitted]
    priced = [p for p in chosen if p.batch.pricing.completion_usd_per_m is not None]
    if not priced:
        why = policy_note or (
            f"no :batch endpoint admitted by this policy ({len(pairs)} listed, none admitted)"
        )
        return without(f"batch: {why.removeprefix('batch: ')}")
    best = min(priced, key=lambda p: (p.batch.pricing.completion_usd_per_m, p.batch.tag))
    price = best.batch.pricing.completion_usd_per_m
    assert price is not None
    cost = price * output_tokens / _MILLION
    sync = None if best.sync is None else best.sync.pricing.completion_usd_per_m
    sync_cost = None if sync is None else sync * output_tokens / _MILLION
    buys = int(budget / price * _MILLION) if price > 0 else None
    line = (
        f"batch: {format_tokens(output_tokens)} output tokens at the batch price "
        f"{format_usd_per_m(price)} ({best.batch.tag}, {best.status}) cost {format_usd(cost)}"
    )
    if sync_cost is not None and sync:
        line += f", {format_pct(price / sync)} of {format_usd(sync_cost)} at its sync price"
    line += f"; {format_usd(budget)} buys {format_tokens(buys)}" if buys is not None else ""
    return BatchBudget(
        snapshot.model,
        output_tokens,
        budget,
        line,
        tag=best.batch.tag,
        status=best.status,
        price_out_usd_per_m=price,
        cost_usd=cost,
        sync_price_out_usd_per_m=sync,
        sync_cost_usd=sync_cost,
        affordable_output_tokens=buys,
    )

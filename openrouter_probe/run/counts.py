"""What a run's rows, requests and money came to, as its books count them (``run.books.books``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal

from openrouter_probe.run.summary import ProviderTally

__all__ = ["Counts"]

_ZERO = Decimal(0)


@dataclass
class Counts:
    """What this run's rows, requests and money came to, as the books count them."""

    ok: int = 0
    truncated: int = 0
    failed: int = 0
    cancelled: int = 0
    not_sent: int = 0
    rows_partial: int = 0
    requests: int = 0
    turns_done: int = 0
    spent_usd: Decimal = _ZERO
    possibly_billed_usd: Decimal = _ZERO
    reconciled: int = 0
    reconciled_back_usd: Decimal = _ZERO
    reconciled_before: int = 0
    reconciled_before_back_usd: Decimal = _ZERO
    possibly_billed_before_settled_usd: Decimal = _ZERO
    unsettleable: int = 0
    cache_hits: int = 0  # answers of OpenRouter's response cache (billed nothing)
    done: dict[str, int] = field(default_factory=dict)  # rows finished, per dataset
    not_sent_by: dict[str, int] = field(default_factory=dict)
    output_tokens: dict[str, int] = field(default_factory=dict)  # this run, per dataset
    providers: dict[str, ProviderTally] = field(default_factory=dict)

"""The spend cap: reserve each request's worst case before sending, settle to ``usage.cost`` after.

A request may be sent only while ``spent + reserved + its worst case <= cap``. Its worst case is its
prompt tokens times the highest input price, plus its ``max_tokens`` times the highest output price,
plus the highest per-request price, among the endpoints the policy admits (the routing model says
which). When the answer returns, its reservation is released and its ``usage.cost`` is added to
``spent``. Concurrency therefore shrinks by itself as the money runs out, and the cap is never
crossed as long as no answer costs more than its worst case.

Prompt tokens are not known before the provider's tokenizer counts them; the bound used is the
prompt's UTF-8 size in bytes plus a chat-template allowance per message: a BPE token is never
shorter than one byte, so this is an upper bound, whatever the tokenizer.

Money is ``Decimal`` (``usage.cost`` has eight decimals; floats would drift over 100k requests).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal

from openrouter_probe.api.schema import Endpoint

__all__ = ["Prices", "SpendCap", "prompt_tokens_bound", "worst_case_prices"]

#: Tokens a chat template may add per message (role markers, separators), and per request.
TEMPLATE_TOKENS_PER_MESSAGE = 16
TEMPLATE_TOKENS_PER_REQUEST = 32
_ZERO = Decimal(0)


def prompt_tokens_bound(prompt_bytes: int, messages: int) -> int:
    """Return an upper bound on a prompt's tokens: its bytes plus the template's allowance."""
    return prompt_bytes + TEMPLATE_TOKENS_PER_MESSAGE * messages + TEMPLATE_TOKENS_PER_REQUEST


@dataclass(frozen=True)
class Prices:
    """The highest prices among the admitted endpoints, in USD per token (per request for
    ``request_usd``): what a request may cost at worst wherever it is routed."""

    input_usd_per_token: Decimal
    output_usd_per_token: Decimal
    request_usd: Decimal = _ZERO

    def worst_case_usd(self, *, prompt_tokens: int, max_tokens: int) -> Decimal:
        """Return the most a request with these token counts can cost."""
        return (
            prompt_tokens * self.input_usd_per_token
            + max_tokens * self.output_usd_per_token
            + self.request_usd
        )


def _prices(endpoint: Endpoint, key: str) -> list[Decimal]:
    """The price under ``key`` and under every conditional override (prompt size, time window)."""
    found = []
    base = endpoint.pricing.usd_per_unit(key)
    if base is not None:
        found.append(base)
    discount = Decimal(str(endpoint.pricing.discount or 0))
    for override in endpoint.pricing.overrides or []:
        raw = (override.model_extra or {}).get(key)
        try:
            value = Decimal(str(raw)) if raw is not None else None
        except ArithmeticError:
            value = None
        if value is not None and value.is_finite() and value >= 0:
            found.append(value * (1 - discount) if 0 <= discount <= 1 else value)
    return found


def worst_case_prices(endpoints: Iterable[Endpoint]) -> Prices:
    """Return the highest input, output (reasoning included) and per-request prices of
    ``endpoints`` (the ones the routing model admits), overrides included.

    An admitted endpoint with no listed output price makes the worst case unknowable: that is a
    ``ValueError`` for the caller to turn into a clear message.
    """
    inputs: list[Decimal] = []
    outputs: list[Decimal] = []
    requests: list[Decimal] = []
    for e in endpoints:
        out = _prices(e, "completion") + _prices(e, "internal_reasoning")
        if not out:
            raise ValueError(f"{e.tag} lists no output price: the worst case cannot be bounded")
        outputs.extend(out)
        inputs.extend(_prices(e, "prompt"))
        requests.extend(_prices(e, "request"))
    if not outputs:
        raise ValueError("no admitted endpoint: nothing to price")
    return Prices(max(inputs, default=_ZERO), max(outputs), max(requests, default=_ZERO))


class SpendCap:
    """Money spent, money reserved for requests in flight, and the cap they must stay under.

    ``spent_usd`` starts at what earlier runs recorded (resume). All methods are synchronous: in
    one asyncio loop, code between two ``await``s runs without interruption, so ``try_reserve``'s
    check and its reservation can never interleave with another worker's, and no lock is needed.
    Keep it that way: never put an ``await`` inside these methods.
    """

    def __init__(self, cap_usd: Decimal | None, *, spent_usd: Decimal = _ZERO) -> None:
        self.cap_usd = cap_usd
        self.spent_usd = spent_usd
        self.reserved_usd = _ZERO
        self.in_flight = 0
        self.peak_committed_usd = spent_usd
        self.overruns = 0  # answers that cost more than their reservation (should stay 0)

    @property
    def committed_usd(self) -> Decimal:
        """Spent plus reserved: the most the run can have cost once everything in flight settles."""
        return self.spent_usd + self.reserved_usd

    @property
    def remaining_usd(self) -> Decimal | None:
        return None if self.cap_usd is None else self.cap_usd - self.spent_usd

    def fits(self, amount_usd: Decimal) -> bool:
        """Whether a reservation of ``amount_usd`` would fit now."""
        return self.cap_usd is None or self.committed_usd + amount_usd <= self.cap_usd

    def try_reserve(self, amount_usd: Decimal) -> bool:
        """Reserve ``amount_usd`` if it fits under the cap; return whether it did."""
        # No await between the check and the update (see the class docstring): atomic in asyncio.
        if not self.fits(amount_usd):
            return False
        self.reserved_usd += amount_usd
        self.in_flight += 1
        committed = self.committed_usd
        if committed > self.peak_committed_usd:
            self.peak_committed_usd = committed
        return True

    def settle(self, reserved_usd: Decimal, cost_usd: Decimal | None) -> None:
        """Release a reservation and add what the request really cost (``None``: nothing known)."""
        self.reserved_usd -= reserved_usd
        self.in_flight -= 1
        if cost_usd:
            if cost_usd > reserved_usd:
                self.overruns += 1
            self.spent_usd += cost_usd

    def add_spent(self, cost_usd: Decimal) -> None:
        """Add a cost that had no reservation of its own (a failed attempt that was billed)."""
        self.spent_usd += cost_usd

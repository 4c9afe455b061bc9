"""Answers billed past ``max_tokens``, learned as a run goes, so the cap holds when providers do it.

Providers bill past the limit (2026 recordings: ``OPENROUTER.md`` §18), so every reservation adds
room for output past it (``extra_usd``). Until the run has had ``FIRST_ANSWERS`` answers (the first
wave) nothing is known and the room is the unseen one (``first_room_usd``: ``UNSEEN_SHARE`` of
``max_tokens`` plus ``UNSEEN_TOKENS``): a wide first wave on a tight cap is smaller, and cannot pass
the cap before its first answer comes back. From then on it is the margin (``MARGIN_SHARE`` of
``max_tokens`` plus ``MARGIN_TOKENS``), or the largest ratio any provider of the run billed, when
larger, for every request: which provider serves a request is OpenRouter's choice. A request that
fits only with the margin, nothing else in flight, goes with it (``Books.reserve``); a batch keeps
the margin from its first line (``run.books.books``). The figures and their sources:
docs/generate.md, "Answers past ``max_tokens``".

``Overshoot`` keeps, per provider (display name), the answers past their limit, the worst ratio
and what the tokens past the limit cost (``by_provider``): the summary and ``audit`` name them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from openrouter_probe.run.send.attempt import Attempt
    from openrouter_probe.run.send.transport import Answer

__all__ = [
    "FIRST_ANSWERS",
    "MARGIN_SHARE",
    "MARGIN_TOKENS",
    "UNSEEN_SHARE",
    "UNSEEN_TOKENS",
    "Overshoot",
    "ProviderOvershoot",
    "billed_output",
    "cost_warning",
    "own_cost",
]

#: The room a reservation keeps for output past ``max_tokens`` until a larger overshoot is seen:
#: this share of ``max_tokens`` plus this many tokens.
MARGIN_SHARE = Decimal("0.05")
MARGIN_TOKENS = 16
#: The room of the first wave, before ``FIRST_ANSWERS`` answers have come back (the module).
UNSEEN_SHARE = Decimal(7)
UNSEEN_TOKENS = 256
FIRST_ANSWERS = 16
_ZERO = Decimal(0)


@dataclass
class ProviderOvershoot:
    """One provider's answers billed past their ``max_tokens`` this run."""

    answers: int = 0
    worst_ratio: float = 1.0
    over_usd: Decimal = _ZERO  # what the tokens past the limits cost (their share of the cost)


@dataclass
class Overshoot:
    """The overshoot a run has seen, and the room each reservation keeps for it (the module)."""

    ratio: Decimal = Decimal(1)  # the largest completion tokens / max_tokens seen (1: none)
    by_provider: dict[str, ProviderOvershoot] = field(default_factory=dict)
    answers: int = 0  # answers seen, up to ``FIRST_ANSWERS`` (the first wave's end)
    #: ``extra_usd`` by (max_tokens, price) at the current ratio (a reservation per request)
    _room: dict[tuple[int, Decimal], Decimal] = field(default_factory=dict, repr=False)

    def extra_tokens(self, max_tokens: int) -> int:
        """The output tokens past ``max_tokens`` a request may be billed for, at worst."""
        margin = MARGIN_SHARE * max_tokens + MARGIN_TOKENS
        learned = (self.ratio - 1) * max_tokens
        return math.ceil(max(margin, learned))

    def within(self, tokens: int) -> int:
        """The largest ``max_tokens`` whose output and room past it fit in ``tokens``."""
        low, high = 0, max(0, tokens)
        while low < high:  # extra_tokens grows with max_tokens: a bisection
            mid = (low + high + 1) // 2
            if mid + self.extra_tokens(mid) <= tokens:
                low = mid
            else:
                high = mid - 1
        return low

    def extra_usd(self, max_tokens: int, output_usd_per_token: Decimal) -> Decimal:
        """What a reservation adds for output past ``max_tokens`` at the dearest output price."""
        key = (max_tokens, output_usd_per_token)
        room = self._room.get(key)
        if room is None:
            room = self._room[key] = self.extra_tokens(max_tokens) * output_usd_per_token
        return room

    @property
    def first_wave(self) -> bool:
        """Whether the run is still before its ``FIRST_ANSWERS``-th answer."""
        return self.answers < FIRST_ANSWERS

    def first_room_usd(self, max_tokens: int, output_usd_per_token: Decimal) -> Decimal:
        """What a reservation adds for output past ``max_tokens`` now: the unseen room in the
        first wave (at least ``extra_usd``), ``extra_usd`` after."""
        room = self.extra_usd(max_tokens, output_usd_per_token)
        if self.answers >= FIRST_ANSWERS:
            return room
        unseen = math.ceil(UNSEEN_SHARE * max_tokens) + UNSEEN_TOKENS
        return max(room, unseen * output_usd_per_token)

    def see(
        self, provider: str | None, *, billed_tokens: int, max_tokens: int, cost_usd: Decimal | None
    ) -> bool:
        """An answer billed ``billed_tokens`` output tokens for ``max_tokens``: learn its
        overshoot; return whether it went past the limit."""
        if self.answers < FIRST_ANSWERS:
            self.answers += 1
        if max_tokens <= 0 or billed_tokens <= max_tokens:
            return False
        ratio = Decimal(billed_tokens) / max_tokens
        if ratio > self.ratio:
            self.ratio = ratio
            self._room.clear()
        tally = self.by_provider.setdefault(provider or "?", ProviderOvershoot())
        tally.answers += 1
        tally.worst_ratio = max(tally.worst_ratio, float(ratio))
        if cost_usd:
            tally.over_usd += cost_usd * (billed_tokens - max_tokens) / billed_tokens
        return True


def billed_output(usage: Mapping[str, object] | None) -> int:
    """The output tokens an answer was billed for: its completion tokens, plus its reasoning
    tokens when it reports more of those (2026 bodies: 19 reasoning for 16 completion)."""
    if not usage:
        return 0
    completion = usage.get("completion_tokens")
    completion = completion if type(completion) is int else 0
    details = usage.get("completion_tokens_details")
    reasoning = details.get("reasoning_tokens") if isinstance(details, dict) else None
    if type(reasoning) is int and reasoning > completion:
        return completion + reasoning
    return completion


def own_cost(usage: Mapping[str, object] | None, attempt: Attempt) -> Decimal:
    """What an answer's own token counts cost at the dearest admitted price (``attempt.prices``):
    the least an answer without a cost may have cost."""
    if not usage:
        return Decimal(0)
    prompt = usage.get("prompt_tokens")
    prompt = prompt if type(prompt) is int and prompt > 0 else 0
    return attempt.prices.worst_case_usd(
        prompt_tokens=prompt, max_tokens=billed_output(usage), shape=attempt.request.shape
    )


def cost_warning(answer: Answer, worst: Decimal) -> str:
    """What to say of a provider whose answer carried no valid ``usage.cost``."""
    raw = (answer.usage or {}).get("cost")
    what = f"usage.cost {raw!r} is not a cost" if answer.cost_invalid else "no usage.cost"
    return (
        f"{answer.provider or '?'}: {what}; its answers count at their worst case "
        f"(${worst:.6f} here) until /generation settles them"
    )


def overrun_warning(overruns: int, billed_past: bool) -> str:
    """What to say of ``overruns`` answers that cost more than their reserved worst case
    (``billed_past``: a provider billed past ``max_tokens`` in the run)."""
    why = (
        "providers billed past max_tokens: the reservations kept room for it from the first such "
        "answer on"
        if billed_past
        else "did the endpoints' prices rise during the run?"
    )
    return (
        f"{overruns} answer(s) cost more than their reserved worst case ({why}): the cap may be "
        "exceeded by the difference"
    )

"""Prompt-token agreement: whether an endpoint counts the same ``usage.prompt_tokens`` as the
reference for the same request body; a systematic difference (another chat template or tokenizer)
is a finding of its own. A failed request or a missing count is ``unreported``: unknown is not
agreement. ``docs/verify.md``, "Prompt tokens".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from statistics import median
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from openrouter_probe.verify.observation import Observation

__all__ = [
    "MIN_PAIRS",
    "MIN_SIGN_SHARE",
    "PromptTokenAgreement",
    "prompt_token_agreement",
]

#: Fewest pairs with a count on both sides before a difference can be called systematic.
MIN_PAIRS = 5
#: The share of the differing pairs that must differ in the same direction.
MIN_SIGN_SHARE = 0.9


@dataclass(frozen=True)
class PromptTokenAgreement:
    """How an endpoint's prompt-token counts compare with the reference's first run, item by item.

    ``pairs`` items had a count on both sides; ``differing`` of them differ, ``higher`` with the
    endpoint counting more, ``lower`` fewer; ``median_difference`` is the median of endpoint minus
    reference over the differing pairs (``None`` when none differ). ``floor_pairs`` and
    ``floor_differing`` are the same for the reference's second run against its first (its own
    consistency; 0 when it ran once). ``unreported`` responses had no count.
    """

    pairs: int
    differing: int
    higher: int
    lower: int
    median_difference: float | None
    floor_pairs: int = 0
    floor_differing: int = 0
    unreported: int = 0

    @property
    def differ_rate(self) -> float | None:
        """The share of the pairs whose counts differ (``None`` with no pairs)."""
        return None if not self.pairs else self.differing / self.pairs

    @property
    def floor_rate(self) -> float | None:
        """The share of the reference's own repeat whose counts differ from its first run."""
        return None if not self.floor_pairs else self.floor_differing / self.floor_pairs

    @property
    def systematic(self) -> bool:
        """At least ``MIN_PAIRS`` pairs, at least half of them differing (and more often than the
        reference differs from itself), at least ``MIN_SIGN_SHARE`` of those in one direction."""
        rate = self.differ_rate
        if rate is None or self.pairs < MIN_PAIRS or rate < 0.5:
            return False
        if self.floor_rate is not None and rate <= self.floor_rate:
            return False
        same_sign = max(self.higher, self.lower)
        return same_sign >= MIN_SIGN_SHARE * self.differing and bool(self.median_difference)

    @property
    def finding(self) -> str | None:
        """The report's sentence for a systematic difference (``None`` for none)."""
        if not self.systematic or self.median_difference is None:
            return None
        return (
            f"renders a different template: {self.median_difference:+g} tokens per request "
            f"(median; {self.differing} of {self.pairs} identical requests counted differently "
            "from the reference)"
        )


def _counts(run: Mapping[str, Observation]) -> dict[str, int]:
    return {i: o.prompt_tokens for i, o in run.items() if not o.failed and o.prompt_tokens > 0}


def _differences(mine: Mapping[str, int], theirs: Mapping[str, int]) -> list[int]:
    return [n - theirs[i] for i, n in mine.items() if i in theirs]


def prompt_token_agreement(
    run: Mapping[str, Observation],
    reference: Mapping[str, Observation],
    *,
    floor: Mapping[str, Observation] | None = None,
) -> PromptTokenAgreement:
    """Compare ``run``'s prompt-token counts with ``reference``'s (its first run) by item id, and
    the reference's ``floor`` run (its second, when it has one) with its first."""
    ref = _counts(reference)
    diffs = _differences(_counts(run), ref)
    differing = [d for d in diffs if d]
    floor_diffs = [] if floor is None else _differences(_counts(floor), ref)
    return PromptTokenAgreement(
        pairs=len(diffs),
        differing=len(differing),
        higher=sum(1 for d in differing if d > 0),
        lower=sum(1 for d in differing if d < 0),
        median_difference=median(differing) if differing else None,
        floor_pairs=len(floor_diffs),
        floor_differing=sum(1 for d in floor_diffs if d),
        unreported=sum(1 for o in run.values() if o.failed or o.prompt_tokens <= 0),
    )

"""Sampling a model card fixes: the registry of models whose makers say how to sample them.

Some model cards fix the sampling parameters their evaluations assume (Kimi K2.5: temperature 1.0
with thinking, 0.6 without, top_p 0.95). Providers default differently when a request leaves them
out, so the same prompt is sampled one way on one provider and another way on the next; sending
the card's values explicitly makes every provider sample alike. ``generate`` sends them unless
the user sets other values (the run's ``temperature=``, a row's own ``temperature`` or
``top_p``), records what each row was sampled with, and the dry run says so.

Each entry names its source. Thinking is on unless the request turns it off (``reasoning:
{"enabled": false}``, ``{"effort": "none"}``, ``reasoning_effort: "none"``): the models here
think by default (K2.5's ``reasoning.default_enabled`` is true in the models list).

``history_reasoning`` says, by model, whether its chat template reads the reasoning of earlier
assistant turns, so whether ``generate --turns all`` sends it back (``HISTORY_REASONING``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "ADVICE",
    "HISTORY_REASONING",
    "SamplingAdvice",
    "history_reasoning",
    "sampling_advice",
    "thinking_on",
]


@dataclass(frozen=True)
class SamplingAdvice:
    """What a model's card fixes: the parameters with thinking on (``thinking``) and off
    (``instant``), and where that is said (``source``)."""

    model: str
    thinking: Mapping[str, float]
    instant: Mapping[str, float]
    source: str
    names: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "names", tuple(dict.fromkeys([*self.thinking, *self.instant])))

    def values(self, *, thinking: bool) -> Mapping[str, float]:
        """The parameters to send for a request that thinks (or not)."""
        return self.thinking if thinking else self.instant

    def describe(self) -> str:
        """One line for people: the values with and without thinking, and the source."""

        def said(values: Mapping[str, float]) -> str:
            return ", ".join(f"{k}={v:g}" for k, v in values.items())

        return (
            f"sampling as the {self.model} card fixes it, sent to every provider: "
            f"{said(self.thinking)} with thinking; {said(self.instant)} without ({self.source}; "
            "temperature= or a row's own values win)"
        )


_KIMI_K25 = SamplingAdvice(
    model="moonshotai/kimi-k2.5",
    thinking={"temperature": 1.0, "top_p": 0.95},
    instant={"temperature": 0.6, "top_p": 0.95},
    source="Moonshot's K2.5 card and Kimi Vendor Verifier",
)

#: The registry: model id (or permaslug) -> what its card fixes.
ADVICE: dict[str, SamplingAdvice] = {
    "moonshotai/kimi-k2.5": _KIMI_K25,
    "moonshotai/kimi-k2.5-0127": _KIMI_K25,
}


def sampling_advice(model: str) -> SamplingAdvice | None:
    """What ``model``'s card fixes (a ``:variant`` suffix ignored), or ``None``."""
    return ADVICE.get(model.split(":", 1)[0])


def thinking_on(reasoning: Any, reasoning_effort: Any = None) -> bool:
    """Whether a request with this ``reasoning`` object (and ``reasoning_effort``) thinks."""
    if reasoning_effort == "none":
        return False
    if isinstance(reasoning, Mapping):
        return not (reasoning.get("enabled") is False or reasoning.get("effort") == "none")
    return True


#: Whether a model reads its earlier assistant turns' reasoning (``--turns all`` sends it back in
#: the history, or not), and where that is said. Kimi K2.5's chat template renders every assistant
#: turn up to the last one without tool calls as ``<think></think>`` + content (its
#: ``hist_msgs``; the K2 family's template) and has no switch to keep it (radixark/miles 31f1ca9:
#: "K2.5 has no kwarg escape hatch for the 'drop reasoning of prior assistants' behavior"): sent,
#: it would be billed and never seen.
_K25_HISTORY = (
    False,
    "Kimi K2.5's chat template drops earlier turns' reasoning (hist_msgs), with no switch to keep "
    "it",
)
HISTORY_REASONING: dict[str, tuple[bool, str]] = {
    "moonshotai/kimi-k2.5": _K25_HISTORY,
    "moonshotai/kimi-k2.5-0127": _K25_HISTORY,
}
_UNKNOWN_HISTORY = (
    False,
    "not known for this model: sent without it, as SpecForge's regenerate_train_data.py does",
)


def history_reasoning(model: str) -> tuple[bool, str]:
    """Whether ``model``'s earlier turns go back with their reasoning, and why (``HISTORY_REASONING``;
    a model not in it: not sent, as SpecForge's regeneration does)."""
    return HISTORY_REASONING.get(model.split(":", 1)[0], _UNKNOWN_HISTORY)

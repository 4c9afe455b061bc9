"""Which responses a check judges: per (endpoint, run, item) the first response, or the first
success after a failed one; leaked pins, repeats and responses outside the plan set aside and
counted; the sampled arm's answers by endpoint and prompt (``keep_samples``).
``report.build_report`` calls both."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from openrouter_probe.verify.observation import Observation
from openrouter_probe.verify.pins import pin_leaked
from openrouter_probe.verify.plan import VerifyPlan
from openrouter_probe.verify.sampled_arm import parse_sample_id

__all__ = ["Kept", "SampledCompletions", "keep_responses", "keep_samples"]


@dataclass
class Kept:
    """The responses judged, by (tag, run) and item, and what was set aside."""

    runs: dict[tuple[str, int], dict[str, Observation]]
    leaked: Counter[str]
    duplicates: int = 0
    outside: int = 0

    def floor(self, reference: str) -> list[dict[str, Observation]]:
        """The reference's runs after the first: its disagreement with itself."""
        return [run for (tag, number), run in self.runs.items() if tag == reference and number > 1]

    def notes(self) -> list[str]:
        notes = []
        if sum(self.leaked.values()):
            notes.append(
                f"{sum(self.leaked.values())} response(s) came from another provider than the "
                "pinned one (leaked pins): discarded, not scored"
            )
        if self.duplicates:
            notes.append(
                f"{self.duplicates} repeated response(s) for the same endpoint and item ignored"
            )
        if self.outside:
            notes.append(
                f"{self.outside} response(s) for endpoints or items outside the plan ignored"
            )
        return notes


def keep_responses(plan: VerifyPlan, observations: Iterable[Observation], items: set[str]) -> Kept:
    """Per (endpoint, run, item) the first response, or the first success after a failed one;
    leaked pins and responses outside the plan set aside and counted."""
    kept = Kept({}, Counter())
    for tag in plan.pinned:
        for number in range(1, (plan.repeats if tag == plan.reference else 1) + 1):
            kept.runs[(tag, number)] = {}
    for obs in observations:
        endpoint = plan.pinned.get(obs.endpoint)
        run = kept.runs.get((obs.endpoint, obs.repeat))
        if endpoint is None or run is None or obs.item_id not in items:
            kept.outside += 1
            continue
        if pin_leaked(obs.provider, endpoint):
            kept.leaked[obs.endpoint] += 1
            continue
        previous = run.get(obs.item_id)
        if previous is not None and not (previous.failed and not obs.failed):
            kept.duplicates += 1
            continue
        run[obs.item_id] = obs  # the first, or a success after a failure
    return kept


@dataclass
class SampledCompletions:
    """The sampled arm's completions by tag and prompt (each holding an answer), and what was set
    aside: ``empty`` counts, by tag, the samples that came back with no answer (reasoning that
    used up ``max_tokens``): not samples, and counted."""

    completions: dict[str, dict[str, list[str | None]]]
    empty: Counter[str] = field(default_factory=Counter)
    #: Every sampled response judged or failed, by tag: what the arm spent there.
    spent: dict[str, list[Observation]] = field(default_factory=dict)
    leaked: int = 0
    failed: int = 0
    duplicates: int = 0

    def notes(self) -> list[str]:
        notes = []
        if self.leaked:
            notes.append(
                f"{self.leaked} sampled response(s) came from another provider than the pinned "
                "one: discarded"
            )
        if self.failed:
            notes.append(f"{self.failed} sampled request(s) failed: not compared")
        if self.duplicates:
            notes.append(f"{self.duplicates} repeated sampled response(s) ignored")
        if sum(self.empty.values()):
            notes.append(
                f"{sum(self.empty.values())} sampled response(s) held no answer (the reasoning "
                "used up max_tokens): not samples, counted by endpoint (sampled_empty)"
            )
        return notes

    def answered(self, tag: str) -> int:
        """``tag``'s samples that held an answer."""
        return sum(len(texts) for texts in self.completions.get(tag, {}).values())


def keep_samples(plan: VerifyPlan, observations: Iterable[Observation]) -> SampledCompletions:
    """The sampled arm's completions of ``plan`` (a ``VerifyPlan``) among ``observations``: the
    first answer per (endpoint, sample); leaked pins and failures set aside and counted."""
    out = SampledCompletions({tag: {} for tag in plan.pinned})
    seen: set[tuple[str, str]] = set()
    for obs in observations:
        parsed = parse_sample_id(obs.item_id)
        endpoint = plan.pinned.get(obs.endpoint)
        if parsed is None or endpoint is None or plan.sampled is None:
            continue
        if pin_leaked(obs.provider, endpoint):
            out.leaked += 1
            continue
        out.spent.setdefault(obs.endpoint, []).append(obs)
        if obs.failed:
            out.failed += 1
        elif (obs.endpoint, obs.item_id) in seen:
            out.duplicates += 1
        else:
            seen.add((obs.endpoint, obs.item_id))
            if not (obs.content or "").strip():
                out.empty[obs.endpoint] += 1  # no answer: not a sample
                continue
            out.completions[obs.endpoint].setdefault(parsed[0], []).append(obs.content)
    return out

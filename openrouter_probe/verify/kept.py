"""Which responses a check judges: per (endpoint, run, item) the first response, or the first
success after a failed one; leaked pins, repeats and responses outside the plan set aside and
counted (``report.build_report`` calls it)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from openrouter_probe.verify.measures import Observation
from openrouter_probe.verify.plan import VerifyPlan, pin_leaked

__all__ = ["Kept", "keep_responses"]


@dataclass
class Kept:
    """The responses judged, by (tag, run) and item, and what was set aside."""

    runs: dict[tuple[str, int], dict[str, Observation]]
    leaked: Counter[str]
    duplicates: int = 0
    outside: int = 0

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

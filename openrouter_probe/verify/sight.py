"""What each arm of a check could see, and no ``consistent`` resting on an arm that could not.

An endpoint whose sampled arm had too little realised power (or ran no test), or whose (or the
reference's) temperature-0 answers were cut at ``max_tokens`` over ``CUT_LIMIT``, is at best
``inconclusive``; a ``differs`` stands (``docs/verify.md``, "What each arm could see").
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from openrouter_probe.verify.kept import Kept, SampledCompletions
from openrouter_probe.verify.observation import Observation
from openrouter_probe.verify.plan import VerifyPlan
from openrouter_probe.verify.sampled import SampledTest
from openrouter_probe.verify.verdict import Comparison

__all__ = [
    "CUT_LIMIT",
    "at_best_inconclusive",
    "blind_arms",
    "cut_answers",
    "seen_comparisons",
    "sight_fields",
]

#: The largest share of temperature-0 answers cut at ``max_tokens`` a ``consistent`` may rest on.
CUT_LIMIT = 0.05


def cut_answers(observations: Iterable[Observation]) -> tuple[int, int]:
    """(answers cut at ``max_tokens``, answers) among the responses that did not fail."""
    answered = [o for o in observations if not o.failed]
    return sum(1 for o in answered if o.finish_reason == "length"), len(answered)


def blind_arms(
    plan: VerifyPlan,
    sampled: SampledTest | str | None,
    *,
    answered: int,
    empty: int,
    cut: tuple[int, int],
    reference_cut: tuple[int, int],
) -> list[str]:
    """Why an endpoint of ``plan`` cannot be ``consistent``: the sampled
    arm's test (or why there is none; ``answered`` and ``empty``: its samples that held an
    answer, and not) and the temperature-0 answers cut (``cut``, ``reference_cut``: (cut,
    answers)). Empty when both arms could see."""
    reasons: list[str] = []
    if plan.sampled is not None:
        said = f"{answered} samples held an answer, {empty} none"
        if not isinstance(sampled, SampledTest):
            reasons.append(f"the sampled arm could not test it ({said}): {sampled}")
        elif sampled.power is not None and sampled.power < plan.power:
            reasons.append(
                f"the sampled arm could not see: its realised power is {sampled.power:.0%} "
                f"({said}), under the plan's {plan.power:.0%}"
            )
    for who, (count, total) in (("its", cut), ("the reference's", reference_cut)):
        if total and count / total > CUT_LIMIT:
            reasons.append(
                f"{count} of {total} of {who} temperature-0 answers were cut at max_tokens: an "
                "accuracy from cut answers is not evidence of equality"
            )
    return reasons


def at_best_inconclusive(comparison: Comparison, reasons: Sequence[str]) -> Comparison:
    """``comparison`` with the arms that could not see: ``consistent`` becomes ``inconclusive``
    and an ``inconclusive`` reason names them too; ``differs`` stands."""
    if not reasons or comparison.verdict not in ("consistent", "inconclusive"):
        return comparison
    said = "; ".join(reasons)
    if comparison.verdict == "inconclusive":
        return dataclasses.replace(comparison, reason=f"{comparison.reason}; {said}")
    return dataclasses.replace(
        comparison,
        verdict="inconclusive",
        reason=f"{said}: at best inconclusive, not consistent (on its own: {comparison.reason})",
    )


def seen_comparisons(
    plan: VerifyPlan,
    comparisons: Mapping[str, Comparison],
    sampled: Mapping[str, SampledTest | str],
    samples: SampledCompletions,
    kept: Kept,
) -> dict[str, Comparison]:
    """Each comparison at best ``inconclusive`` where an arm could not see."""
    reference_cut = cut_answers(kept.runs[(plan.reference, 1)].values())
    return {
        tag: at_best_inconclusive(
            c,
            blind_arms(
                plan,
                sampled.get(tag),
                answered=samples.answered(tag),
                empty=samples.empty[tag],
                cut=cut_answers(kept.runs[(tag, 1)].values()),
                reference_cut=reference_cut,
            ),
        )
        for tag, c in comparisons.items()
    }


def sight_fields(
    plan: VerifyPlan,
    tag: str,
    found: SampledTest | str | None,
    samples: SampledCompletions,
    kept: Kept,
) -> dict[str, Any]:
    """What an endpoint's arms saw, for its ``EndpointResult``."""
    arm = plan.sampled is not None
    return {
        "sampled_answers": samples.answered(tag) if arm else None,
        "sampled_empty": samples.empty[tag] if arm else None,
        "sampled_power": found.power if isinstance(found, SampledTest) else None,
        "cut": cut_answers(kept.runs[(tag, 1)].values())[0],
    }

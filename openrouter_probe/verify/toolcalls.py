"""Tool calls as Moonshot's K2-Vendor-Verifier (K2VV) scores them: schema accuracy, tool-call F1
and its threshold, reported beside the verdict, never deciding it.

Read from github.com/MoonshotAI/K2-Vendor-Verifier at ``K2VV_COMMIT`` (2026-02-14): ``README.md``
("Evaluation Metrics") and ``tool_calls_eval.py``; the definitions and why our own tool measures
decide instead: ``docs/verify.md``, "Tool calls as K2-Vendor-Verifier scores them".
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from openrouter_probe.verify.results import TestResult, TestVerdict
from openrouter_probe.verify.stats import clopper_pearson
from openrouter_probe.verify.suites import check_schema

if TYPE_CHECKING:
    from openrouter_probe.verify.observation import Observation, ToolCall
    from openrouter_probe.verify.suites import Item

__all__ = [
    "K2VV_COMMIT",
    "K2VV_F1_THRESHOLD",
    "K2VVScore",
    "fisher_exact",
    "k2vv_results",
    "k2vv_score",
    "k2vv_valid",
]

#: The K2-Vendor-Verifier commit these definitions were read at.
K2VV_COMMIT = "0bc5061be1a7b5667c2ec71a546a6b1c9ff5af9a"

#: K2VV's acceptable ``tool_call_f1``, by whether the model thinks (README at ``K2VV_COMMIT``).
K2VV_F1_THRESHOLD = {"thinking": 0.73, "instant": 0.80}


def k2vv_valid(call: ToolCall, tools: Sequence[Mapping[str, Any]]) -> bool:
    """K2VV's ``validate_tool_call``: a known tool with a schema, JSON arguments, valid."""
    schema = next(
        (
            t.get("function", {}).get("parameters")
            for t in tools
            if t.get("function", {}).get("name") == call.name
        ),
        None,
    )
    if not schema:
        return False
    try:
        arguments = json.loads(call.raw_arguments)
    except (json.JSONDecodeError, TypeError):
        return False
    return not check_schema(arguments, schema)


@dataclass(frozen=True)
class K2VVScore:
    """One endpoint's K2VV scores on the tool prompts answered by it and by the reference."""

    items: int
    tool_call_responses: int  # K2VV's count_finish_reason_tool_calls
    successful_tool_calls: int  # K2VV's count_successful_tool_call
    tp: int
    fp: int
    fn: int
    tn: int
    threshold: float

    @property
    def schema_accuracy(self) -> float | None:
        n = self.tool_call_responses
        return None if n == 0 else self.successful_tool_calls / n

    @property
    def f1(self) -> float | None:
        """``2TP / (2TP + FP + FN)``: the harmonic mean of precision and recall (0 when the
        endpoint and the reference never both call; ``None`` when neither ever calls)."""
        d = 2 * self.tp + self.fp + self.fn
        return None if d == 0 else 2 * self.tp / d


def _positive(obs: Observation) -> bool:
    return obs.finish_reason == "tool_calls"


def k2vv_score(
    items: Mapping[str, Item],
    run: Mapping[str, Observation],
    reference: Mapping[str, Observation],
    *,
    thinking: bool = False,
) -> K2VVScore:
    """Score ``run`` against ``reference`` on the ``items`` with tools both answered."""
    shared = [i for i in items if items[i].tools and i in run and i in reference]
    tp = fp = fn = tn = calls = valid = 0
    for i in shared:
        mine, theirs = _positive(run[i]), _positive(reference[i])
        tp += mine and theirs
        fp += mine and not theirs
        fn += theirs and not mine
        tn += not mine and not theirs
        if mine:
            calls += 1
            made = run[i].tool_calls
            valid += bool(made) and all(k2vv_valid(c, items[i].tools) for c in made)
    threshold = K2VV_F1_THRESHOLD["thinking" if thinking else "instant"]
    return K2VVScore(len(shared), calls, valid, tp, fp, fn, tn, threshold)


def fisher_exact(a: int, n: int, b: int, m: int) -> float:
    """Two-sided Fisher exact p-value of ``a`` successes in ``n`` against ``b`` in ``m``: the
    probability, given the margins, of every table no more likely than the observed one."""
    total, hits = n + m, a + b

    def pmf(k: int) -> float:
        return math.comb(n, k) * math.comb(m, hits - k) / math.comb(total, hits)

    observed = pmf(a)
    lo, hi = max(0, hits - m), min(n, hits)
    return min(
        1.0, math.fsum(q for k in range(lo, hi + 1) if (q := pmf(k)) <= observed * 1.0000001)
    )


def _schema_result(
    score: K2VVScore, reference: K2VVScore | None, *, alpha: float, tests: int, tolerance: float
) -> TestResult:
    acc = score.schema_accuracy
    ref_acc = None if reference is None else reference.schema_accuracy
    interval = (
        None
        if acc is None
        else clopper_pearson(score.successful_tool_calls, score.tool_call_responses)
    )
    p = adjusted = finding = None
    verdict: TestVerdict = "inconclusive"
    if interval is not None and reference is not None and ref_acc is not None:
        p = fisher_exact(
            score.successful_tool_calls,
            score.tool_call_responses,
            reference.successful_tool_calls,
            reference.tool_call_responses,
        )
        adjusted = min(1.0, max(1, tests) * p)
        if adjusted <= alpha:
            verdict = "differs"
            finding = (
                f"K2-Vendor-Verifier schema accuracy {acc:.1%} (95% interval {interval.low:.1%} "
                f"to {interval.high:.1%}) below the reference's"
            )
        elif interval.low >= ref_acc - tolerance:
            verdict = "consistent"
    text = (
        f"K2VV schema_accuracy: {score.successful_tool_calls} of {score.tool_call_responses} "
        "finish_reason=tool_calls responses schema-valid"
        + (
            ""
            if reference is None or ref_acc is None
            else f" against the reference's {reference.successful_tool_calls} of "
            f"{reference.tool_call_responses}; Fisher exact, Bonferroni over {max(1, tests)} "
            "endpoint(s)"
        )
        + "; K2VV publishes no threshold"
    )
    name = "k2vv_schema_accuracy"
    return TestResult(name, acc, p, interval, verdict, text, p_adjusted=adjusted, finding=finding)


def k2vv_results(
    score: K2VVScore,
    reference: K2VVScore | None = None,
    floor: K2VVScore | None = None,
    *,
    alpha: float = 0.05,
    tests: int = 1,
    tolerance: float = 0.1,
) -> tuple[TestResult, TestResult]:
    """The two K2VV scores as test results reported beside the verdict (never deciding).

    ``k2vv_tool_call_f1``: ``differs`` below K2VV's threshold, ``consistent`` at or above it,
    ``inconclusive`` when neither side ever called a tool. ``k2vv_schema_accuracy`` (with its
    95% Clopper-Pearson interval) against the reference's own (``reference``: the reference
    scored on itself): Fisher's exact test, Bonferroni over the ``tests`` endpoints compared;
    ``differs`` when it rejects at ``alpha``, ``consistent`` when it does not and the
    interval's low end is within ``tolerance`` of the reference's rate, ``inconclusive``
    otherwise (or with no tool-call response). ``floor``: the reference's second run against
    its first (the F1 it reaches against itself, shown beside K2VV's threshold)."""
    f1 = score.f1
    f1_verdict: TestVerdict = (
        "inconclusive" if f1 is None else "consistent" if f1 >= score.threshold else "differs"
    )
    f1_text = (
        f"K2VV tool_call_f1 over {score.items} tool prompts (TP {score.tp}, FP {score.fp}, "
        f"FN {score.fn}, TN {score.tn}); K2VV's threshold >= {score.threshold:.0%}"
        f" (K2-Vendor-Verifier@{K2VV_COMMIT[:7]})"
        + (
            ""
            if floor is None or floor.f1 is None
            else f"; the reference's against itself {floor.f1:.1%}"
        )
        + "; ours is the tool_trigger floor test"
    )
    return (
        TestResult(
            "k2vv_tool_call_f1",
            f1,
            None,
            None,
            f1_verdict,
            f1_text,
            threshold=score.threshold,
            finding=None
            if f1_verdict != "differs"
            else f"below K2-Vendor-Verifier's tool_call_f1 threshold: {f1:.1%} < "
            f"{score.threshold:.1%}",
        ),
        _schema_result(score, reference, alpha=alpha, tests=tests, tolerance=tolerance),
    )

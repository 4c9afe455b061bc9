"""One value object for every test a check runs, and how the report shows it.

Every test of an endpoint (the deciding measures, and those beside the verdict) is a
``TestResult``; its JSON keys are stable (``docs/verify.md``, "The JSON").
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from openrouter_probe.verify.stats import Interval
from openrouter_probe.verify.verdict import WITHIN_TOLERANCE, Comparison, MeasureTest

__all__ = [
    "TestResult",
    "TestVerdict",
    "comparison_results",
    "decided_by",
    "render_results",
]

#: What one test can say: the endpoint verdicts' words, for one test.
TestVerdict = Literal["differs", "differs, within tolerance", "consistent", "inconclusive"]


@dataclass(frozen=True)
class TestResult:
    """One test of one endpoint against the reference.

    ``statistic`` is the test's estimate in its own unit (``detail`` names it); ``p_value`` the
    raw p-value (``None`` for a test that has none, such as a threshold), ``p_adjusted`` the
    adjusted one (Holm over the family for deciding tests, Bonferroni over the endpoints for the
    logprob test); ``interval`` its interval, ``None`` where there is
    none. ``verdict`` is this test's alone; ``inconclusive`` where the data cannot tell.
    """

    __test__ = False  # not a pytest class, whatever its name

    name: str
    statistic: float | None
    p_value: float | None
    interval: Interval | None
    verdict: TestVerdict
    detail: str
    deciding: bool = False
    p_adjusted: float | None = None
    #: A published threshold the statistic is held to (K2VV's F1), where the test is one.
    threshold: float | None = None
    #: What the report says beside the verdict when a test beside it differs: a reason to look.
    finding: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The stable JSON form (keys in a fixed order, statistics and intervals to 6 decimals, p-values to 6
        significant digits)."""
        i = self.interval
        return {
            "name": self.name,
            "statistic": _round(self.statistic),
            "p_value": _significant(self.p_value),
            "p_adjusted": _significant(self.p_adjusted),
            "interval": None if i is None else [_round(i.low), _round(i.high)],
            "interval_level": None if i is None else _round(i.level),
            "threshold": self.threshold,
            "verdict": self.verdict,
            "deciding": self.deciding,
            "detail": self.detail,
        }

    def line(self, width: int = 20) -> str:
        """``  accuracy  differs stat +0.055 p 0.0012 (adjusted 0.012) [+0.031, +0.096]``"""
        parts = [f"  {self.name:<{width}} {self.verdict}"]
        if self.statistic is not None:
            parts.append(f"stat {self.statistic:+.3g}")
        if self.p_value is not None:
            held = f" (adjusted {self.p_adjusted:.2g})" if self.p_adjusted is not None else ""
            parts.append(f"p {self.p_value:.2g}{held}")
        if self.interval is not None:
            parts.append(f"[{self.interval.low:+.3g}, {self.interval.high:+.3g}]")
        if self.threshold is not None:
            parts.append(f"threshold {self.threshold:g}")
        if not self.deciding:
            parts.append("(beside the verdict)")
        return " ".join(parts)


def _round(value: float | None, digits: int = 6) -> float | None:
    return None if value is None else round(float(value), digits)


def _significant(value: float | None) -> float | None:
    """A p-value to 6 significant digits (a tiny p stays visible, not 0.0)."""
    return None if value is None else float(f"{value:.6g}")


def _verdict_of(test: MeasureTest, alpha: float) -> TestVerdict:
    rejected = test.p_adjusted <= alpha
    if rejected:
        return WITHIN_TOLERANCE if test.within else "differs"
    return "consistent" if test.within else "inconclusive"


_UNITS = {
    "accuracy": "accuracy gap, reference minus endpoint; mid-p McNemar",
    "agreement": "excess disagreement over the floor; the floor test",
    "tool_trigger": "excess tool-decision disagreement over the floor; the floor test",
    "tool_schema": "schema-valid call gap, reference minus endpoint; mid-p McNemar",
    "tool_arguments": "right-argument gap, reference minus endpoint; mid-p McNemar",
}


def comparison_results(comparison: Comparison, *, alpha: float) -> tuple[TestResult, ...]:
    """The deciding measures of ``comparison`` as test results (Holm-adjusted p against the
    family-wise ``alpha``; the interval the verdict used)."""
    return tuple(
        TestResult(
            name=t.measure.name,
            statistic=t.estimate,
            p_value=t.p_value,
            interval=t.interval,
            verdict=_verdict_of(t, alpha),
            detail=(
                f"{_UNITS.get(t.measure.name, t.measure.name)}; {t.measure.n} paired items, "
                f"margin {t.margin:g}"
            ),
            deciding=True,
            p_adjusted=t.p_adjusted,
        )
        for t in comparison.tests
    )


def decided_by(verdict: str | None, results: Sequence[TestResult]) -> str | None:
    """The name of the test that decided ``verdict`` among the deciding ``results``.

    ``differs`` (either kind): the rejecting test with the smallest Holm p. ``consistent``:
    every interval had to lie inside, so the one that came closest to the margin (the binding
    test). ``inconclusive``: the test whose interval reached furthest past the margin. ``None``
    for the reference, or when no test had data."""
    deciding = [r for r in results if r.deciding]
    if verdict is None or not deciding:
        return None
    if verdict in ("differs", WITHIN_TOLERANCE):
        rejecting = [r for r in deciding if r.verdict in ("differs", WITHIN_TOLERANCE)]
        return min(rejecting or deciding, key=lambda r: r.p_adjusted or 1.0).name
    # a test without an interval (the sampled arm's) can reject, never show equality: it
    # decides neither a consistent verdict nor an inconclusive one
    spans = [r for r in deciding if r.interval is not None] or deciding
    pool = [r for r in spans if r.verdict == "inconclusive"] or spans
    return max(pool, key=_reach).name


def _reach(result: TestResult) -> float:
    i = result.interval
    return 0.0 if i is None else max(abs(i.low), abs(i.high))


def render_results(
    tag: str, results: Iterable[TestResult], verdict: str | None = None
) -> list[str]:
    """The report's lines for one endpoint's tests: a head naming the verdict and the test that
    decided it, then one line a test, the same shape for all."""
    results = list(results)
    if not results:
        return []
    width = max(len(r.name) for r in results)
    decider = decided_by(verdict, results)
    head = f"{tag} tests" + (f" ({verdict}, decided by {decider}):" if verdict and decider else ":")
    return [head, *(r.line(width) for r in results)]

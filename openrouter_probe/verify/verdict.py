"""Each endpoint's verdict: its deciding measures as paired counts, judged against the reference
(``compare_to_reference``; ``docs/verify.md``, "Statistics and verdicts", tables how each is
reached).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from openrouter_probe.rules.precision import MeasuredVerdict
from openrouter_probe.verify.stats import (
    DEFAULT_ALPHA,
    DEFAULT_POWER,
    DEFAULT_TOLERANCE,
    PLANNING_DISCORDANCE,
    Interval,
    check_statistics,
    floor_test,
    holm,
    mcnemar_midp,
    min_detectable_gap,
    prompts_for_equivalence,
    tango_interval,
)

__all__ = [
    "WITHIN_TOLERANCE",
    "Comparison",
    "MeasureTest",
    "MeasuredVerdict",
    "PairedCounts",
    "PairedMeasure",
    "compare_to_reference",
]

#: Equality rejected and equivalence shown at once: a real difference, smaller than the tolerance.
WITHIN_TOLERANCE: MeasuredVerdict = "differs, within tolerance"


@dataclass(frozen=True)
class PairedCounts:
    """Known-answer outcomes of one endpoint paired with the reference's on the same prompts.

    ``both`` right on both, ``ref_only`` right on the reference only (b), ``endpoint_only`` right on
    the endpoint only (c), ``neither`` wrong on both. A failed request counts as wrong.
    """

    both: int = 0
    ref_only: int = 0
    endpoint_only: int = 0
    neither: int = 0

    @property
    def n(self) -> int:
        return self.both + self.ref_only + self.endpoint_only + self.neither

    @property
    def gap(self) -> float | None:
        """Reference accuracy minus endpoint accuracy on the paired prompts."""
        return None if self.n == 0 else (self.ref_only - self.endpoint_only) / self.n

    def measure(self) -> PairedMeasure:
        """These counts as the deciding ``accuracy`` measure (a two-sided gap)."""
        return PairedMeasure("accuracy", "gap", self.n, self.ref_only, self.endpoint_only)


@dataclass(frozen=True)
class PairedMeasure:
    """One deciding measure of one endpoint, as paired discordant counts.

    ``kind`` ``"gap"``: a rate the reference and the endpoint both have (accuracy, schema-valid
    calls, right arguments); ``b`` reference only, ``c`` endpoint only; tested two-sided.
    ``kind`` ``"excess"``: disagreement with the reference's first run against the reference's own
    (the floor); ``b`` and ``c`` the items where only the endpoint, or only the floor, disagrees
    (fractional with more than two runs); ``groups`` feed ``floor_test``; tested one-sided.
    """

    name: str
    kind: Literal["gap", "excess"]
    n: int
    b: float
    c: float
    groups: tuple[tuple[int, int, int], ...] = ()  # (t, items, endpoint differs)
    repeats: int = 2

    @property
    def estimate(self) -> float | None:
        return None if self.n == 0 else (self.b - self.c) / self.n

    def p_value(self) -> float:
        if self.kind == "gap":
            return mcnemar_midp(round(self.b), round(self.c))
        groups = {t: (items, hits) for t, items, hits in self.groups}
        return floor_test(groups, repeats=self.repeats)


@dataclass(frozen=True)
class MeasureTest:
    """A deciding measure judged: its estimate and interval (at ``interval.level``), the raw and
    Holm-adjusted p-values, the margin and whether the interval lies inside it."""

    measure: PairedMeasure
    estimate: float | None
    interval: Interval
    p_value: float
    p_adjusted: float
    margin: float

    @property
    def within(self) -> bool:
        """The interval lies inside the margin (``+-margin`` for a gap, below it for an excess)."""
        if self.measure.n == 0:
            return False
        if self.measure.kind == "excess":
            return self.interval.high < self.margin
        return -self.margin < self.interval.low and self.interval.high < self.margin


@dataclass(frozen=True)
class Comparison:
    """One endpoint against the reference: the tests, the power and the verdict with its reason.

    ``counts``, ``p_value``, ``p_adjusted``, ``interval`` are the accuracy measure's (``interval``:
    the gap's, reference minus endpoint); ``tests`` holds every deciding measure.
    """

    counts: PairedCounts
    p_value: float
    p_adjusted: float
    min_detectable_gap: float | None
    verdict: MeasuredVerdict
    reason: str
    interval: Interval | None = None
    tests: tuple[MeasureTest, ...] = ()
    prompts_needed: int | None = None
    #: Tests with a p-value and no interval (the sampled arm's MMD test) joined to the Holm
    #: family: ``(name, Holm-adjusted p)``; one that rejects makes the verdict ``differs``.
    extra: tuple[tuple[str, float], ...] = ()

    def test(self, name: str) -> MeasureTest | None:
        """The deciding measure ``name`` (``None`` when it had no data)."""
        return next((t for t in self.tests if t.measure.name == name), None)


def _pct(x: float) -> str:
    return f"{100 * x:.1f} pp"


def _span(interval: Interval) -> str:
    return f"[{100 * interval.low:+.1f}, {100 * interval.high:+.1f}] pp"


_DIFFERS = {
    "accuracy": ("less accurate than the reference", "more accurate than the reference"),
    "agreement": ("answers disagree with the reference more than it with itself", ""),
    "tool_trigger": ("calls a tool where the reference does not (or the reverse) more often", ""),
    "tool_schema": ("fewer schema-valid tool calls", "more schema-valid tool calls"),
    "tool_arguments": ("fewer right tool-call arguments", "more right tool-call arguments"),
}


def _differs_text(test: MeasureTest) -> str:
    estimate = test.estimate or 0.0
    worse, better = _DIFFERS.get(test.measure.name, (test.measure.name, test.measure.name))
    text = f"{worse if estimate >= 0 or not better else better} by {_pct(abs(estimate))}"
    text += (
        f" (Holm p={test.p_adjusted:.2g}, {test.interval.level:.0%} interval {_span(test.interval)}"
    )
    return text + (", inside the tolerance)" if test.within else ")")


def _measures_of(
    value: PairedCounts | Sequence[PairedMeasure],
) -> tuple[PairedCounts, list[PairedMeasure]]:
    if isinstance(value, PairedCounts):
        return value, [value.measure()]
    measures = list(value)
    accuracy = next((m for m in measures if m.name == "accuracy"), None)
    counts = PairedCounts() if accuracy is None else _counts_of(accuracy)
    return counts, measures


def _counts_of(measure: PairedMeasure) -> PairedCounts:
    b, c = round(measure.b), round(measure.c)
    return PairedCounts(both=measure.n - b - c, ref_only=b, endpoint_only=c)


def compare_to_reference(
    counts: Mapping[str, PairedCounts | Sequence[PairedMeasure]],
    *,
    alpha: float = DEFAULT_ALPHA,
    tolerance: float = DEFAULT_TOLERANCE,
    power: float = DEFAULT_POWER,
    accuracy_counts: Mapping[str, PairedCounts] | None = None,
    extra: Mapping[str, Mapping[str, float]] | None = None,
) -> dict[str, Comparison]:
    """Judge each endpoint's deciding measures against the reference, Holm over all the tests.

    ``extra`` (tag -> test name -> raw p) adds tests that can only show a difference (the
    sampled arm's MMD test) to the same Holm family; one that rejects makes the endpoint
    ``differs`` whatever the intervals say, and one that does not changes nothing.

    ``counts`` maps a tag to its accuracy ``PairedCounts`` or to its ``PairedMeasure`` list;
    ``accuracy_counts`` (optional) gives the full 2x2 of accuracy for the latter (a measure keeps
    only the discordant counts), shown as ``Comparison.counts``. The verdicts are the table of
    ``docs/verify.md`` ("Statistics and verdicts"): does some test reject at family-wise ``alpha``
    (Holm), and does every Tango interval at ``1 - 2 alpha/K`` lie inside ``+-tolerance``?

    Example::

        compare_to_reference({"chutes/int4": PairedCounts(both=180, ref_only=14, neither=6)})
        # {'chutes/int4': Comparison(..., verdict='differs', ...)}
    """
    check_statistics(alpha=alpha, power=power, tolerance=tolerance)
    k = max(1, len(counts))
    level = 1 - 2 * alpha / k
    parsed = {tag: _measures_of(value) for tag, value in counts.items()}
    if accuracy_counts:
        parsed = {tag: (accuracy_counts.get(tag, c), m) for tag, (c, m) in parsed.items()}
    raw = {(tag, m.name): m.p_value() for tag, (_, ms) in parsed.items() for m in ms if m.n > 0}
    joined = {(tag, name): p for tag, ps in (extra or {}).items() for name, p in ps.items()}
    adjusted = holm({f"{tag}\n{name}": p for (tag, name), p in {**raw, **joined}.items()})
    family = max(1, len(raw) + len(joined))
    out: dict[str, Comparison] = {}
    for tag, (acc, ms) in parsed.items():
        tests = tuple(
            MeasureTest(
                m, m.estimate, tango_interval(m.b, m.c, m.n, level=level), raw[(tag, m.name)],
                adjusted[f"{tag}\n{m.name}"], tolerance,
            )
            for m in ms
            if m.n > 0
        )  # fmt: skip
        judged = _judge(acc, tests, alpha=alpha / family, power=power, holm_alpha=alpha)
        mine = tuple((name, adjusted[f"{tag}\n{name}"]) for (t, name) in joined if t == tag)
        out[tag] = _with_extra(judged, mine, holm_alpha=alpha) if mine else judged
    return out


def _with_extra(
    judged: Comparison, extra: tuple[tuple[str, float], ...], *, holm_alpha: float
) -> Comparison:
    """``judged`` with the interval-less tests: ``differs`` when one of them rejects."""
    rejected = [(name, p) for name, p in extra if p <= holm_alpha]
    if not rejected or judged.verdict == "differs":
        reason = judged.reason + "".join(f"; {n} rejects (Holm p={p:.2g})" for n, p in rejected)
        return dataclasses.replace(judged, extra=extra, reason=reason)
    said = "; ".join(f"{name} rejects equality (Holm p={p:.2g})" for name, p in rejected)
    return dataclasses.replace(
        judged,
        extra=extra,
        verdict="differs",
        reason=f"{said}: the samples come from another distribution ({judged.reason})",
        prompts_needed=None,
    )


def _judge(
    acc: PairedCounts,
    tests: tuple[MeasureTest, ...],
    *,
    alpha: float,
    power: float,
    holm_alpha: float,
) -> Comparison:
    """One endpoint's verdict from its judged measures (``alpha``: the Bonferroni level of the
    power statement; ``holm_alpha``: the family-wise level the adjusted p-values are held to)."""
    accuracy = next((t for t in tests if t.measure.name == "accuracy"), None)
    mdg = None
    if acc.n:
        background = min(acc.endpoint_only / acc.n, 0.4999)
        mdg = min_detectable_gap(acc.n, alpha=alpha, power=power, background=background)
    p_raw = accuracy.p_value if accuracy else 1.0
    p_adj = accuracy.p_adjusted if accuracy else 1.0
    interval = accuracy.interval if accuracy else None
    if not tests:
        return Comparison(
            acc, 1.0, 1.0, mdg, "inconclusive", "no prompt scored on both sides", interval, tests
        )
    rejected = [t for t in tests if t.p_adjusted <= holm_alpha]
    level = f"{tests[0].interval.level:.0%}"
    spans = ", ".join(f"{t.measure.name} {_span(t.interval)}" for t in tests)
    if rejected and all(t.within for t in tests):
        # Equality rejected and equivalence shown at once: neither "differs" (which reads as
        # beyond the tolerance) nor "consistent" (which reads as the same) says it.
        reason = (
            "; ".join(_differs_text(t) for t in rejected)
            + f"; every {level} interval lies inside +-{_pct(tests[0].margin)}: a real difference,"
            " smaller than the tolerance"
        )
        return Comparison(acc, p_raw, p_adj, mdg, WITHIN_TOLERANCE, reason, interval, tests)
    if rejected:
        reason = "; ".join(_differs_text(t) for t in rejected)
        return Comparison(acc, p_raw, p_adj, mdg, "differs", reason, interval, tests)
    if all(t.within for t in tests):
        reason = (
            f"no test rejects (smallest Holm p={min(t.p_adjusted for t in tests):.2g}) and every "
            f"{level} interval lies inside +-{_pct(tests[0].margin)}: {spans}"
        )
        return Comparison(acc, p_raw, p_adj, mdg, "consistent", reason, interval, tests)
    wide = [t for t in tests if not t.within]
    needed = max(_prompts_needed(t, power=power) for t in wide)
    reason = (
        f"no test rejects, but the {level} interval of "
        + ", ".join(f"{t.measure.name} {_span(t.interval)}" for t in wide)
        + f" reaches past +-{_pct(wide[0].margin)}: about {needed} paired prompts would settle it"
    )
    return Comparison(acc, p_raw, p_adj, mdg, "inconclusive", reason, interval, tests, needed)


def _prompts_needed(test: MeasureTest, *, power: float) -> int:
    """The pairs the measure's equivalence needs at its observed discordance (at least the
    plan's ``PLANNING_DISCORDANCE``, so that a small run with no discordant pair does not promise
    a tiny sample)."""
    m = test.measure
    discordance = max((m.b + m.c) / m.n if m.n else 0.0, PLANNING_DISCORDANCE)
    one_sided = (1 - test.interval.level) / 2
    return prompts_for_equivalence(
        tolerance=test.margin, alpha=one_sided, power=power, discordance=min(1.0, discordance)
    )

"""The report of a precision check (``VerifyReport``: a DataFrame view, HTML in Jupyter, dated
evidence YAML), and ``build_report``, the seam between sending and judging.
"""

from __future__ import annotations

import html
import textwrap
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import yaml

from openrouter_probe.errors import Term, keyword_term, rendered
from openrouter_probe.verify.endpoint_tests import EndpointResult, endpoint_tests
from openrouter_probe.verify.kept import Kept, SampledCompletions, keep_responses, keep_samples
from openrouter_probe.verify.measures import EndpointMeasures, measure_endpoint
from openrouter_probe.verify.observation import Observation
from openrouter_probe.verify.plan import VerifyPlan
from openrouter_probe.verify.prompt_tokens import PromptTokenAgreement
from openrouter_probe.verify.results import TestResult, render_results
from openrouter_probe.verify.sampled import SampledTest
from openrouter_probe.verify.sampled_arm import parse_sample_id, sampled_results, sampled_tests
from openrouter_probe.verify.sight import seen_comparisons, sight_fields
from openrouter_probe.verify.verdict import Comparison, MeasuredVerdict, compare_to_reference

if TYPE_CHECKING:
    import pandas as pd

    from openrouter_probe.verify.suites import Item


__all__ = ["EVIDENCE_HEADER", "MEASURES", "VerifyReport", "build_report"]

#: The deciding measures, in the order the report shows them (``measures`` module docstring).
MEASURES = ("accuracy", "agreement", "tool_trigger", "tool_schema", "tool_arguments")

#: The comment at the top of an evidence file.
EVIDENCE_HEADER = (
    "# Precision evidence measured by `openrouter-probe verify` (docs/verify.md): each entry is one\n"
    "# endpoint compared with a reference endpoint on the same pinned prompts, with its statistics.\n"
)


@dataclass(frozen=True)
class VerifyReport:
    """The outcome of a precision check: one ``EndpointResult`` per endpoint, reference first."""

    model: str
    reference: str
    taken_at: datetime
    suites: tuple[str, ...]
    items: int
    alpha: float
    power: float
    tolerance: float
    results: tuple[EndpointResult, ...]
    snapshot_sha256: str | None = None
    notes: tuple[str, ...] = field(default=())
    #: What the sending run did (requests, spend, stop reason): ``verify_precision`` sets it.
    run: Any = None
    #: How often the reference was sent (its runs 2.. are the floor).
    repeats: int = 2

    @property
    def verdicts(self) -> dict[str, MeasuredVerdict]:
        """The verdict of each compared endpoint, by tag."""
        return {r.tag: r.verdict for r in self.results if r.verdict is not None}

    def result(self, tag: str) -> EndpointResult:
        """Return the result for ``tag`` (``KeyError`` naming the tags there are)."""
        for r in self.results:
            if r.tag == tag:
                return r
        raise KeyError(f"{tag!r} is not in this report ({', '.join(r.tag for r in self.results)})")

    def rows(self) -> list[dict[str, Any]]:
        """One flat dict per endpoint (rates as fractions, cost in USD)."""
        out = []
        for r in self.results:
            m, c = r.measures, r.comparison
            ci, gap_ci = m.accuracy_ci, None if c is None else c.interval
            out.append(
                {
                    "tag": r.tag,
                    "provider": r.provider_name,
                    "quantization": r.quantization,
                    "role": r.role,
                    "verdict": r.verdict,
                    "decided_by": r.decided_by,
                    "paired": None if c is None else c.counts.n,
                    "accuracy": m.accuracy,
                    "accuracy_ci_low": None if ci is None else ci.low,
                    "accuracy_ci_high": None if ci is None else ci.high,
                    "accuracy_gap": None if c is None else c.counts.gap,
                    "accuracy_gap_ci_low": None if gap_ci is None else gap_ci.low,
                    "accuracy_gap_ci_high": None if gap_ci is None else gap_ci.high,
                    "interval_level": _level(c),
                    "p_holm": None if c is None else c.p_adjusted,
                    "p_holm_min": _min_p(c),
                    "min_detectable_gap": None if c is None else c.min_detectable_gap,
                    "prompts_needed": None if c is None else c.prompts_needed,
                    **_measure_columns(c),
                    "exact_match_rate": m.exact_match_rate,
                    "floor_disagreement": m.floor_disagreement,
                    "trigger_f1": m.trigger_f1,
                    "floor_trigger_f1": m.floor_trigger_f1,
                    "arguments_rate": m.arguments_rate,
                    "similarity_mean": m.similarity_mean,
                    "strict_format_rate": m.strict_format_rate,
                    "schema_valid_rate": m.schema_valid_rate,
                    "trigger_agreement": m.trigger_agreement,
                    "first_token_tv_mean": m.first_token_tv_mean,
                    "first_token_tv_floor": m.first_token_tv_floor,
                    "first_diff_token_median": m.first_diff_token_median,
                    "models_served": ", ".join(f"{k} x{v}" for k, v in m.models.items()),
                    "scored": m.scored,
                    "failed": m.failed,
                    "cut_at_max_tokens": r.cut,
                    "sampled_answers": r.sampled_answers,
                    "sampled_empty": r.sampled_empty,
                    "sampled_empty_share": _share(r.sampled_empty, r.sampled_answers),
                    "sampled_power": r.sampled_power,
                    "leaked": r.leaked,
                    "missing": r.missing,
                    **_prompt_columns(m.prompt_agreement),
                    "findings": list(r.findings),
                    "prompt_tokens": m.prompt_tokens,
                    "completion_tokens": m.completion_tokens,
                    "reasoning_tokens": m.reasoning_tokens,
                    "cost_usd": m.cost_usd,
                    "reason": None if c is None else c.reason,
                    "tests": [t.to_json() for t in r.tests],
                }
            )
        return out

    def render(self, term: Term = keyword_term) -> str:
        """The report as text (``term`` says the library's keywords in the notes; the CLI passes
        its flags): one line per endpoint (80 columns for tags up to 16 characters; a
        longer tag widens its column rather than being cut): verdict, paired n, accuracy, the
        accuracy gap with its interval, the smallest Holm p of its measures, cost; then each
        verdict's reason (with the leaked responses discarded) and the notes, wrapped at 80."""

        width = max(8, *(len(r.tag) for r in self.results))
        level = next((_level(r.comparison) for r in self.results if _level(r.comparison)), None)
        head = (
            f"{self.model} against {self.reference}: {self.items} prompts "
            f"({', '.join(self.suites)}), {self.taken_at:%Y-%m-%d}; family-wise alpha "
            f"{self.alpha:g} (Holm), tolerance {100 * self.tolerance:.0f} pp"
            + (f", {level:.0%} intervals" if level is not None else "")
        )
        lines = [
            *textwrap.wrap(head, width=80, subsequent_indent="  "),
            f"{'endpoint':<{width}} {'verdict':<12} {'n':>4} {'acc%':>5} "
            f"{'gap pp [interval]':<19} {'p_holm':>7} {'cost':>8}",
        ]
        for r in self.results:
            m, c = r.measures, r.comparison
            # "differs, within tolerance" is wider than its column: "differs," on the row, the
            # rest on a line of its own below it (nothing else shares that line: 80 columns hold)
            verdict, _, rest = (r.verdict or r.role).partition(", ")
            verdict += "," if rest else ""
            p_min = _min_p(c)
            lines.append(
                f"{r.tag:<{width}} {verdict:<12} {(c.counts.n if c else m.known):>4} "
                f"{_pct(m.accuracy):>5} {_gap_text(c):<19} "
                f"{('-' if p_min is None else f'{p_min:.2g}'):>7} {f'${m.cost_usd:.4f}':>8}"
            )
            if rest:
                lines.append(f"{'':<{width}} {rest}")
        tail = []
        for r in self.results:  # each verdict's reason, then its findings beside the verdict
            if r.comparison:
                tail.append(
                    f"{r.tag}: {r.comparison.reason}"
                    + (f"; {r.leaked} leaked response(s) discarded" if r.leaked else "")
                )
            tail.extend(f"{r.tag}: {finding}" for finding in r.findings)
        tail.extend(rendered(n, term) for n in self.notes)
        lines.extend(textwrap.fill(t, width=80, subsequent_indent="  ") for t in tail)
        for r in self.results:  # every test, one line each, the same shape for all
            for line in render_results(r.tag, r.tests, r.verdict):
                lines.append(textwrap.fill(line, width=80, subsequent_indent=" " * 6))
        return "\n".join(lines)

    def to_frame(self) -> pd.DataFrame:
        """The report as a DataFrame, one row per endpoint (pandas imported here)."""
        import pandas as pd

        return pd.DataFrame(self.rows()).set_index("tag")

    def __repr__(self) -> str:
        verdicts = ", ".join(f"{tag} {v}" for tag, v in self.verdicts.items())
        return (
            f"<VerifyReport {self.model} vs {self.reference}, {self.items} prompts, "
            f"{self.taken_at:%Y-%m-%d}: {verdicts or 'nothing compared'}>"
        )

    def _repr_html_(self) -> str:
        head = (
            f"<p><b>{html.escape(self.model)}</b> against <b>{html.escape(self.reference)}</b>, "
            f"{self.items} prompts ({html.escape(', '.join(self.suites))}), "
            f"{self.taken_at:%Y-%m-%d}; alpha {self.alpha:g} (Holm), tolerance "
            f"{100 * self.tolerance:.0f} pp, power {self.power:.0%}</p>"
        )
        columns = [
            "provider", "role", "verdict", "paired", "accuracy", "accuracy_gap",
            "accuracy_gap_ci_low", "accuracy_gap_ci_high", "p_holm_min", "exact_match_rate",
            "floor_disagreement", "leaked", "cost_usd", "reason",
        ]  # fmt: skip
        table = self.to_frame()[columns].to_html(na_rep="", float_format=lambda v: f"{v:.4g}")
        notes = "".join(f"<p>{html.escape(n)}</p>" for n in self.notes)
        return head + table + notes

    def to_evidence(self) -> dict[str, Any]:
        """The evidence document: ``{"measured": [one entry per compared endpoint]}``."""
        k = sum(1 for r in self.results if r.comparison is not None)
        tests = sum(len(r.comparison.tests) for r in self.results if r.comparison is not None)
        entries = []
        for r in self.results:
            c = r.comparison
            if c is None:
                continue
            m = r.measures
            ref = self.result(self.reference).measures
            ci = m.accuracy_ci
            entries.append(
                {
                    "model": self.model,
                    "endpoint": r.tag,
                    "provider": r.provider_name,
                    "declared": r.quantization,
                    "reference": self.reference,
                    "verdict": c.verdict,
                    "date": f"{self.taken_at:%Y-%m-%d}",
                    "n": c.counts.n,
                    "accuracy": _round(m.accuracy),
                    "accuracy_ci95": None if ci is None else [_round(ci.low), _round(ci.high)],
                    "reference_accuracy": _round(ref.accuracy),
                    "accuracy_gap": _round(c.counts.gap),
                    "accuracy_gap_ci": None
                    if c.interval is None
                    else [_round(c.interval.low), _round(c.interval.high)],
                    "interval_level": _round(_level(c)),
                    "discordant": {
                        "reference_only": c.counts.ref_only,
                        "endpoint_only": c.counts.endpoint_only,
                    },
                    "p_value": _round(c.p_value, 6),
                    "p_holm": _round(c.p_adjusted, 6),
                    "min_detectable_gap": _round(c.min_detectable_gap),
                    "power": self.power,
                    "tolerance": self.tolerance,
                    "alpha": self.alpha,
                    "test": (
                        f"mid-p McNemar and the floor test, Tango intervals; Holm over {tests} "
                        f"test(s) ({k} endpoint(s))"
                    ),
                    "measures": {
                        t.measure.name: {
                            "estimate": _round(t.estimate),
                            "interval": [_round(t.interval.low), _round(t.interval.high)],
                            "p_holm": _round(t.p_adjusted, 6),
                        }
                        for t in c.tests
                    },
                    "repeats": self.repeats,
                    "suites": list(self.suites),
                    "exact_match_rate": _round(m.exact_match_rate),
                    "floor_disagreement": _round(m.floor_disagreement),
                    "leaked": r.leaked,
                    "reason": c.reason,
                    "prompt_tokens": {
                        k.removeprefix("prompt_tokens_"): v
                        for k, v in _prompt_columns(m.prompt_agreement).items()
                    },
                    "findings": list(r.findings),
                    "decided_by": r.decided_by,
                    "tests": [t.to_json() for t in r.tests],
                    "source": "openrouter-probe verify"
                    + (f"; snapshot {self.snapshot_sha256}" if self.snapshot_sha256 else ""),
                }
            )
        return {"measured": entries}

    def to_evidence_yaml(self) -> str:
        """The evidence as YAML (deterministic: keys in a fixed order, floats rounded)."""
        body = yaml.safe_dump(self.to_evidence(), sort_keys=False, allow_unicode=True, width=100)
        return EVIDENCE_HEADER + body


def _share(empty: int | None, answers: int | None) -> float | None:
    """Empty samples over all samples (``None``: no arm, or no sample)."""
    if empty is None or answers is None or empty + answers == 0:
        return None
    return round(empty / (empty + answers), 6)


def _round(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(float(value), digits)


def _prompt_columns(a: PromptTokenAgreement | None) -> dict[str, Any]:
    """Prompt-token agreement with the reference as flat columns (``verify.prompt_tokens``)."""
    return {
        "prompt_tokens_pairs": None if a is None else a.pairs,
        "prompt_tokens_differ_rate": None if a is None else _round(a.differ_rate),
        "prompt_tokens_diff_median": None if a is None else a.median_difference,
        "prompt_tokens_higher": None if a is None else a.higher,
        "prompt_tokens_lower": None if a is None else a.lower,
        "prompt_tokens_floor_differ_rate": None if a is None else _round(a.floor_rate),
        "prompt_tokens_unreported": None if a is None else a.unreported,
        "prompt_tokens_systematic": None if a is None else a.systematic,
    }


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}"


def _min_p(c: Comparison | None) -> float | None:
    return None if c is None or not c.tests else min(t.p_adjusted for t in c.tests)


def _level(c: Comparison | None) -> float | None:
    """The level of the endpoint's intervals (``None``: nothing compared)."""
    return None if c is None or not c.tests else c.tests[0].interval.level


def _gap_text(c: Comparison | None) -> str:
    """``+6.2 [+2.8,+12.3]``: the accuracy gap (pp) and its interval."""
    if c is None or c.counts.gap is None or c.interval is None:
        return "-"
    return f"{100 * c.counts.gap:+.1f} [{100 * c.interval.low:+.1f},{100 * c.interval.high:+.1f}]"


def _measure_columns(c: Comparison | None) -> dict[str, float | None]:
    """Each deciding measure's estimate, interval and Holm p as flat columns."""
    out: dict[str, float | None] = {}
    for name in MEASURES:
        t = None if c is None else c.test(name)
        out[f"{name}_estimate"] = None if t is None else t.estimate
        out[f"{name}_ci_low"] = None if t is None else t.interval.low
        out[f"{name}_ci_high"] = None if t is None else t.interval.high
        out[f"{name}_p_holm"] = None if t is None else t.p_adjusted
    return out


def _measures(
    plan: VerifyPlan, items: Mapping[str, Item], kept: Kept, samples: SampledCompletions
) -> dict[str, EndpointMeasures]:
    """Each endpoint's measures against the reference's first run, its cost counting every
    request the check sent it (the reference's floor, the sampled arm's)."""
    reference, floor = kept.runs[(plan.reference, 1)], kept.floor(plan.reference)
    measures = {
        tag: measure_endpoint(tag, items, kept.runs[(tag, 1)].values(), reference, floor=floor)
        for tag in plan.pinned
    }
    measures[plan.reference] = measures[plan.reference].with_spend(floor)
    for tag, spent in samples.spent.items():
        measures[tag] = measures[tag].with_spend([{o.item_id: o for o in spent}])
    return measures


def _tests(
    plan: VerifyPlan,
    comparisons: Mapping[str, Comparison],
    items: Mapping[str, Item],
    kept: Kept,
    measures: Mapping[str, EndpointMeasures],
    sampled: Mapping[str, SampledTest | str],
) -> dict[str, tuple[TestResult, ...]]:
    """Every test of each compared endpoint (``endpoint_tests``), the sampled arm's last."""
    reference, floor = kept.runs[(plan.reference, 1)], kept.floor(plan.reference)
    return {
        tag: (
            *endpoint_tests(
                c,
                alpha=plan.alpha,
                items=items,
                run=kept.runs[(tag, 1)],
                reference=reference,
                floor=floor,
                agreement=measures[tag].prompt_agreement,
                thinking=plan.thinking,
                compared=len(comparisons),
            ),
            *sampled_results(sampled.get(tag), c, plan),
        )
        for tag, c in comparisons.items()
    }


def build_report(
    plan: VerifyPlan,
    observations: Iterable[Observation],
    *,
    taken_at: datetime | None = None,
) -> VerifyReport:
    """Judge the collected ``observations`` of ``plan`` (at its tolerance) and return the report.

    A sending loop builds one ``Observation`` per response (``Observation.from_completion`` or
    ``from_output_line``) with the tag it pinned and the item id it sent; which are judged, and
    what is set aside and counted (leaked pins, repeats, outsiders), is ``verify.kept``'s.

    Example::

        plan = plan_verify(snap.endpoints, model=snap.model, tags=tags, items=arith_suite(200))
        report = build_report(plan, [Observation.from_completion(tag, item_id, body), ...])
        report.verdicts             # {'chutes/int4': 'consistent', ...}
        print(report.to_evidence_yaml())
    """
    items = {item.id: item for item in plan.items}
    observations = list(observations)
    samples = keep_samples(plan, observations)
    kept = keep_responses(
        plan, (o for o in observations if parse_sample_id(o.item_id) is None), set(items)
    )
    measures = _measures(plan, items, kept, samples)
    sampled = sampled_tests(
        plan.sampled,
        samples.completions,
        reference=plan.reference,
        compared=plan.compared,
        empty=samples.empty,
    )
    comparisons = compare_to_reference(
        {tag: measures[tag].tests for tag in plan.compared},
        accuracy_counts={tag: measures[tag].counts for tag in plan.compared},
        alpha=plan.alpha,
        tolerance=plan.tolerance,
        power=plan.power,
        extra={
            t: {"sampled_mmd": s.p_value} for t, s in sampled.items() if isinstance(s, SampledTest)
        },
    )
    comparisons = seen_comparisons(plan, comparisons, sampled, samples, kept)
    tests = _tests(plan, comparisons, items, kept, measures, sampled)
    results = tuple(
        EndpointResult(
            tag=e.tag,
            provider_name=e.provider_name,
            quantization=e.quantization,
            role=e.role,
            measures=measures[e.tag],
            comparison=comparisons.get(e.tag),
            tests=tests.get(e.tag, ()),
            leaked=kept.leaked[e.tag],
            missing=sum(len(items) - len(run) for (t, _), run in kept.runs.items() if t == e.tag),
            **sight_fields(plan, e.tag, sampled.get(e.tag), samples, kept),
        )
        for e in plan.endpoints
    )
    return VerifyReport(
        model=plan.model,
        reference=plan.reference,
        taken_at=taken_at or datetime.now(UTC).replace(microsecond=0),
        suites=tuple(dict.fromkeys(item.suite for item in plan.items)),
        items=len(items),
        alpha=plan.alpha,
        power=plan.power,
        tolerance=plan.tolerance,
        results=results,
        snapshot_sha256=plan.snapshot_sha256,
        notes=(*kept.notes(), *samples.notes()),
        repeats=plan.repeats,
    )

"""Every test of one compared endpoint as ``results.TestResult`` values (the deciding measures,
then prompt-token agreement, K2VV's tool-call scores and the logprob comparison beside them), and
``EndpointResult``: one endpoint's row of the report.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from openrouter_probe.verify.logprobs import compare_logprobs, logprob_result
from openrouter_probe.verify.measures import EndpointMeasures
from openrouter_probe.verify.prompt_tokens import MIN_PAIRS, PromptTokenAgreement
from openrouter_probe.verify.results import (
    TestResult,
    TestVerdict,
    comparison_results,
    decided_by,
)
from openrouter_probe.verify.stats import DEFAULT_TOLERANCE, clopper_pearson, mcnemar_exact
from openrouter_probe.verify.toolcalls import k2vv_results, k2vv_score
from openrouter_probe.verify.verdict import Comparison, MeasuredVerdict

if TYPE_CHECKING:
    from openrouter_probe.verify.observation import Observation
    from openrouter_probe.verify.suites import Item

__all__ = ["EndpointResult", "endpoint_tests", "prompt_token_result"]


def prompt_token_result(agreement: PromptTokenAgreement | None) -> TestResult | None:
    """Prompt-token agreement as a test result beside the verdict.

    Statistic: the share of identical requests counted differently (95% Clopper-Pearson
    interval); p-value: the two-sided exact sign test of higher against lower counts (a
    template adds or removes tokens one way). ``differs`` when the difference is systematic
    (``PromptTokenAgreement.systematic``), ``consistent`` with enough pairs and no systematic
    difference, ``inconclusive`` with fewer pairs than the rule needs."""
    if agreement is None or agreement.pairs == 0:
        return None
    rate = agreement.differ_rate
    interval = clopper_pearson(agreement.differing, agreement.pairs)
    n = agreement.higher + agreement.lower
    p = mcnemar_exact(agreement.higher, agreement.lower) if n else None
    verdict: TestVerdict = "differs" if agreement.systematic else "consistent"
    if not agreement.systematic and agreement.pairs < MIN_PAIRS:
        verdict = "inconclusive"
    median = agreement.median_difference
    detail = (
        f"usage.prompt_tokens: {agreement.differing} of {agreement.pairs} identical requests "
        f"counted differently (higher {agreement.higher}, lower {agreement.lower}"
        + ("" if median is None else f", median {median:+g}")
        + "); sign test of the direction"
    )
    return TestResult(
        "prompt_tokens", rate, p, interval, verdict, detail, finding=agreement.finding
    )


def endpoint_tests(
    comparison: Comparison,
    *,
    alpha: float,
    items: Mapping[str, Item],
    run: Mapping[str, Observation],
    reference: Mapping[str, Observation],
    floor: Sequence[Mapping[str, Observation]],
    agreement: PromptTokenAgreement | None,
    thinking: bool,
    compared: int = 1,
) -> tuple[TestResult, ...]:
    """The deciding measures first, then the tests reported beside them (where they have data).
    ``compared``: the endpoints compared, over which the logprob test and K2VV's schema
    accuracy test are Bonferroni-adjusted."""
    out = list(comparison_results(comparison, alpha=alpha))
    tokens = prompt_token_result(agreement)
    if tokens is not None:
        out.append(tokens)
    if any(item.tools for item in items.values()):
        mine = k2vv_score(items, run, reference, thinking=thinking)
        if mine.items:
            # the reference's own: its first run scored on itself (schema accuracy), and its
            # second run against its first (the F1 the first party reaches against itself)
            own = k2vv_score(items, reference, reference, thinking=thinking)
            again = k2vv_score(items, floor[0], reference, thinking=thinking) if floor else None
            out.extend(
                k2vv_results(
                    mine,
                    own,
                    again,
                    alpha=alpha,
                    tests=compared,
                    # the tolerance the deciding tests were held to (the default with none)
                    tolerance=comparison.tests[0].margin if comparison.tests else DEFAULT_TOLERANCE,
                )
            )
    found = logprob_result(
        compare_logprobs(run, reference, floor[0] if floor else None),
        alpha=alpha,
        tests=compared,
    )
    if found is not None:
        out.append(found)
    return tuple(out)


@dataclass(frozen=True)
class EndpointResult:
    """One endpoint's measures, its comparison with the reference (``None`` for the reference)
    and what was discarded: ``leaked`` responses served by another provider, ``missing`` items with
    no response."""

    tag: str
    provider_name: str
    quantization: str | None
    role: str
    measures: EndpointMeasures
    comparison: Comparison | None
    leaked: int
    missing: int
    #: Every test of the endpoint against the reference (``results.TestResult``): the deciding
    #: measures first, then those reported beside them; empty for the reference.
    tests: tuple[TestResult, ...] = ()
    #: The sampled arm's samples that held an answer, and that held none (``None``: no arm).
    sampled_answers: int | None = None
    sampled_empty: int | None = None
    #: The sampled arm's power with the samples that held an answer (``None``: no test).
    sampled_power: float | None = None
    #: Temperature-0 answers cut at ``max_tokens`` (``verify.sight``).
    cut: int = 0

    @property
    def decided_by(self) -> str | None:
        """The test that decided the verdict (``results.decided_by``)."""
        return decided_by(self.verdict, self.tests)

    @property
    def verdict(self) -> MeasuredVerdict | None:
        return None if self.comparison is None else self.comparison.verdict

    @property
    def findings(self) -> tuple[str, ...]:
        """Findings beside the verdict, whatever it is: a systematic prompt-token difference
        ("renders a different template: +N tokens per request"), a K2VV score below its
        threshold, token logprobs further from the reference than its own runs. None for the
        reference."""
        return tuple(t.finding for t in self.tests if t.finding is not None)

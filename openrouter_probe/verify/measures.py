"""Per-endpoint measures from responses already collected: nothing here sends a request.

``score`` judges an ``Observation`` against the item's known answer; ``measure_endpoint`` pairs an
endpoint's observations item by item with the reference's runs into ``EndpointMeasures``. A failed
request is an outcome, never dropped: wrong, disagreeing with everything (even another failure),
no tool call. The deciding and descriptive measures: ``docs/verify.md``, "Measures".
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from statistics import fmean, median
from typing import Any

from openrouter_probe.verify.logprobs import top_k_distance
from openrouter_probe.verify.observation import Observation
from openrouter_probe.verify.prompt_tokens import PromptTokenAgreement, prompt_token_agreement
from openrouter_probe.verify.stats import Interval, clopper_pearson
from openrouter_probe.verify.suites import Item, check_schema, extract_number, normalise_text
from openrouter_probe.verify.verdict import PairedCounts, PairedMeasure

__all__ = [
    "FAILED",
    "EndpointMeasures",
    "Score",
    "first_difference",
    "measure_endpoint",
    "score",
    "top_k_distance",
]


@dataclass(frozen=True)
class Score:
    """An observation judged against its item: ``correct`` is ``None`` when there is no known
    answer; ``strict`` whether the answer kept the strict format; ``normalised`` what agreement
    compares."""

    correct: bool | None
    strict: bool
    normalised: str
    called_tool: str | None
    schema_valid: bool | None


#: What a failed request "answered": equal to nothing, not even another failure's.
FAILED = "\x00failed"


def score(item: Item, obs: Observation) -> Score:
    """Judge ``obs`` against ``item``: its number, its text, or its tool call. A failed request is
    wrong (when the answer is known), calls no tool and answers ``FAILED``."""
    if obs.failed:
        known = item.answer_kind == "tool" or item.answer is not None
        return Score(False if known else None, False, FAILED, None, None)
    call = obs.tool_calls[0] if obs.tool_calls else None
    schema_valid = None
    if call is not None:
        schema = next(
            (t["function"]["parameters"] for t in item.tools if t["function"]["name"] == call.name),
            None,
        )
        schema_valid = (
            schema is not None
            and call.arguments is not None
            and not check_schema(call.arguments, schema)
        )
    correct: bool | None
    if item.answer_kind == "tool":
        # the decision, not the prose around it: a call and its arguments, or none
        normalised = (
            f"call {call.name} {json.dumps(call.arguments, sort_keys=True)}" if call else "no call"
        )
        if item.expect_tool is None:
            correct = call is None
        else:
            correct = (
                call is not None
                and call.name == item.expect_tool
                and bool(schema_valid)
                and _arguments_match(call.arguments or {}, item.expect_arguments)
            )
        return Score(correct, True, normalised, call.name if call else None, schema_valid)
    if item.answer_kind == "number":
        got = extract_number(obs.content)
        correct = None if item.answer is None else got.value == extract_number(item.answer).value
        normalised = got.value if got.value is not None else normalise_text(obs.content)
        return Score(correct, got.strict, normalised, call.name if call else None, schema_valid)
    normalised = normalise_text(obs.content)
    correct = None if item.answer is None else normalised == normalise_text(item.answer)
    return Score(correct, True, normalised, call.name if call else None, schema_valid)


def _arguments_match(got: Mapping[str, Any], expected: Mapping[str, Any]) -> bool:
    for key, want in expected.items():
        have = got.get(key)
        if isinstance(want, str):
            if not isinstance(have, str) or normalise_text(have) != normalise_text(want):
                return False
        elif isinstance(want, int | float) and not isinstance(want, bool):
            if (
                isinstance(have, bool)
                or not isinstance(have, int | float)
                or not math.isclose(have, want, rel_tol=1e-9)
            ):
                return False
        elif have != want:
            return False
    return True


def first_difference(a: Sequence[str], b: Sequence[str]) -> int | None:
    """Return the index of the first differing element (``None`` when equal; the shorter length
    when one is a prefix of the other)."""
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


@dataclass(frozen=True)
class EndpointMeasures:
    """What one endpoint did, and how it compares with the reference on the same items.

    Rates are fractions (0..1); ``None`` when nothing was there to measure. ``paired`` holds the
    deciding measures (empty for the reference itself); ``floor_*`` are the reference's own
    disagreement with itself on the same items.
    """

    endpoint: str
    scored: int
    failed: int
    known: int
    correct: int
    accuracy: float | None
    accuracy_ci: Interval | None
    strict_format_rate: float | None
    paired: int
    exact_match_rate: float | None
    similarity_mean: float | None
    counts: PairedCounts
    finish_reasons: dict[str, int] = field(default_factory=dict)
    models: dict[str, int] = field(default_factory=dict)
    tool_calls: int = 0
    schema_valid_rate: float | None = None
    trigger_agreement: float | None = None
    trigger_f1: float | None = None
    arguments_rate: float | None = None
    floor_disagreement: float | None = None
    floor_trigger_f1: float | None = None
    logprob_pairs: int = 0
    first_token_tv_mean: float | None = None
    first_token_tv_floor: float | None = None
    first_token_unlisted_mass_max: float | None = None
    first_diff_token_median: float | None = None
    identical_token_rate: float | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    reasoning_tokens: int = 0
    cost_usd: float = 0.0
    cost_unknown: int = 0
    tests: tuple[PairedMeasure, ...] = ()
    #: Its ``usage.prompt_tokens`` against the reference's first run's, item by item.
    prompt_agreement: PromptTokenAgreement | None = None

    def with_spend(self, runs: Sequence[Mapping[str, Observation]]) -> EndpointMeasures:
        """These measures with the tokens and cost of ``runs`` added (its own first run; the
        reference's floor, the sampled arm's): what the check spent on the endpoint."""
        extra = [o for run in runs for o in run.values()]
        costs = [o.cost_usd for o in extra]
        return dataclasses.replace(
            self,
            prompt_tokens=self.prompt_tokens + sum(o.prompt_tokens for o in extra),
            completion_tokens=self.completion_tokens + sum(o.completion_tokens for o in extra),
            reasoning_tokens=self.reasoning_tokens + sum(o.reasoning_tokens for o in extra),
            cost_usd=math.fsum([self.cost_usd, *(c for c in costs if c is not None)]),
            cost_unknown=self.cost_unknown + sum(1 for c in costs if c is None),
        )


def _is_tool(item: Item) -> bool:
    return item.answer_kind == "tool"


def _rate(values: Iterable[bool]) -> float | None:
    seq = list(values)
    return None if not seq else sum(seq) / len(seq)


def _similarity(
    item: Item, obs: Observation, mine: Score, ref: Observation, theirs: Score
) -> float:
    """``difflib`` ratio of the normalised content; for tool prompts, of the normalised decision
    (the call and its arguments, or the text), since a tool call has no content."""
    if item.answer_kind == "tool":
        a, b = mine.normalised, theirs.normalised
    else:
        a, b = normalise_text(obs.content), normalise_text(ref.content)
    return difflib.SequenceMatcher(None, a, b, autojunk=False).ratio()


def _differs(a: object, b: object) -> bool:
    return a != b or a == FAILED


def _excess(
    name: str, values: Mapping[str, object], runs: Sequence[Mapping[str, object]]
) -> PairedMeasure | None:
    """The floor comparison of one measure: on every item every run has, whether the endpoint's
    value differs from the first run's and how many of the other runs' do."""
    if len(runs) < 2:
        return None
    first, others = runs[0], runs[1:]
    common = [i for i in values if all(i in run for run in runs)]
    groups: Counter[tuple[int, int]] = Counter()
    b = c = 0.0
    for i in common:
        x = int(_differs(values[i], first[i]))
        a = sum(_differs(run[i], first[i]) for run in others)
        share = a / len(others)
        b += x * (1 - share)
        c += (1 - x) * share
        if 0 < x + a < len(runs):
            groups[(x + a, x)] += 1
    table: dict[int, list[int]] = {}
    for (t, x), count in groups.items():
        entry = table.setdefault(t, [0, 0])
        entry[0] += count
        entry[1] += count * x
    return PairedMeasure(
        name, "excess", len(common), b, c,
        tuple((t, m, s) for t, (m, s) in sorted(table.items())), len(runs),
    )  # fmt: skip


def _gap(name: str, mine: Mapping[str, bool], theirs: Mapping[str, bool]) -> PairedMeasure:
    common = [i for i in mine if i in theirs]
    b = sum(1 for i in common if theirs[i] and not mine[i])
    c = sum(1 for i in common if mine[i] and not theirs[i])
    return PairedMeasure(name, "gap", len(common), b, c)


def _f1(predicted: Mapping[str, bool], truth: Mapping[str, bool]) -> float | None:
    common = [i for i in predicted if i in truth]
    tp = sum(1 for i in common if predicted[i] and truth[i])
    fp = sum(1 for i in common if predicted[i] and not truth[i])
    fn = sum(1 for i in common if truth[i] and not predicted[i])
    return None if tp + fp + fn == 0 else 2 * tp / (2 * tp + fp + fn)


@dataclass(frozen=True)
class _Judged:
    """One run's scores and what the deciding measures read from them, by item id."""

    scores: dict[str, Score]
    answers: dict[str, str]
    triggers: dict[str, object]
    called: dict[str, bool]
    valid: dict[str, bool]
    right_call: dict[str, bool]


def _judge_run(items: Mapping[str, Item], run: Mapping[str, Observation]) -> _Judged:
    scores = {i: score(items[i], o) for i, o in run.items() if i in items}
    tool = {i for i in scores if _is_tool(items[i])}
    expected = {i for i in tool if items[i].expect_tool is not None}
    return _Judged(
        scores=scores,
        answers={i: s.normalised for i, s in scores.items() if i not in tool},
        triggers={i: FAILED if run[i].failed else scores[i].called_tool is not None for i in tool},
        called={i: scores[i].called_tool is not None for i in tool},
        valid={i: bool(scores[i].schema_valid) for i in expected},
        right_call={i: bool(scores[i].correct) for i in expected},
    )


def _deciding(
    mine: _Judged, runs: Sequence[_Judged], counts: PairedCounts
) -> tuple[PairedMeasure, ...]:
    """The deciding measures of an endpoint against the reference's runs (those with data; the
    floor measures need a second run)."""
    first = runs[0]
    found: list[PairedMeasure | None] = [
        counts.measure(),
        _excess("agreement", mine.answers, [r.answers for r in runs]),
        _excess("tool_trigger", mine.triggers, [r.triggers for r in runs]),
        _gap("tool_schema", mine.valid, first.valid),
        _gap("tool_arguments", mine.right_call, first.right_call),
    ]
    return tuple(m for m in found if m is not None and m.n > 0)


def measure_endpoint(
    tag: str,
    items: Mapping[str, Item],
    observations: Iterable[Observation],
    reference: Mapping[str, Observation],
    *,
    floor: Sequence[Mapping[str, Observation]] = (),
) -> EndpointMeasures:
    """Measure one endpoint's ``observations`` (one per item; leaked pins already removed) against
    the items, the reference's first run (``reference``) and its other runs (``floor``), by item id.
    For the reference itself, pass its first run as both: agreement is then trivially 1, and the
    floor figures are its runs' agreement with each other; ``tests`` is left empty."""
    mine = {o.item_id: o for o in observations if o.item_id in items}
    ok = {i: o for i, o in mine.items() if not o.failed}
    judged = _judge_run(items, mine)
    runs = [_judge_run(items, reference), *(_judge_run(items, f) for f in floor)]
    known = {
        i: s for i, s in judged.scores.items() if s.correct is not None and not _is_tool(items[i])
    }
    correct = sum(1 for s in known.values() if s.correct)
    first = runs[0].scores
    # the known answers on both sides by outcome pair, (reference, endpoint); a failure is wrong
    tally = Counter((first[i].correct, s.correct) for i, s in known.items() if i in first)
    counts = PairedCounts(
        tally[(True, True)], tally[(True, False)], tally[(False, True)], tally[(False, False)]
    )
    is_reference = all(reference.get(i) is o for i, o in mine.items())
    pairs = [(i, s, reference[i], first[i]) for i, s in judged.scores.items() if i in first]
    logprobs = _logprob_figures(ok, reference, floor)
    calls = [s for s in judged.scores.values() if s.called_tool is not None]
    return EndpointMeasures(
        endpoint=tag,
        scored=len(ok),
        failed=len(mine) - len(ok),
        known=len(known),
        correct=correct,
        accuracy=None if not known else correct / len(known),
        accuracy_ci=None if not known else clopper_pearson(correct, len(known)),
        strict_format_rate=_rate(
            s.strict
            for i, s in judged.scores.items()
            if items[i].answer_kind == "number" and i in ok
        ),
        paired=len(pairs),
        exact_match_rate=_rate(
            not _differs(s.normalised, r.normalised)
            for i, s, _, r in pairs
            if not _is_tool(items[i])
        ),
        similarity_mean=None
        if not pairs
        else fmean(_similarity(items[i], mine[i], s, ref, r) for i, s, ref, r in pairs),
        counts=counts,
        finish_reasons=dict(
            sorted(Counter(o.finish_reason or "none" for o in mine.values()).items())
        ),
        models=dict(sorted(Counter(o.model for o in ok.values() if o.model).items())),
        tool_calls=len(calls),
        schema_valid_rate=_rate(judged.valid.values()),
        **_agreement_figures(judged, runs),
        tests=() if is_reference else _deciding(judged, runs, counts),
        prompt_agreement=prompt_token_agreement(mine, reference, floor=floor[0] if floor else None),
        **logprobs,
    ).with_spend([mine])


def _agreement_figures(judged: _Judged, runs: Sequence[_Judged]) -> dict[str, Any]:
    """Trigger agreement and F1 against the reference's first run, the right-argument rate, and
    the floor: the reference's second run against its first."""
    first = runs[0]
    floor = runs[1] if len(runs) > 1 else None
    return {
        "trigger_agreement": _rate(
            not _differs(v, first.triggers[i])
            for i, v in judged.triggers.items()
            if i in first.triggers
        ),
        "trigger_f1": _f1(judged.called, first.called),
        "arguments_rate": _rate(judged.right_call.values()),
        "floor_disagreement": None
        if floor is None or not floor.answers
        else _rate(
            _differs(v, first.answers[i]) for i, v in floor.answers.items() if i in first.answers
        ),
        "floor_trigger_f1": None if floor is None else _f1(floor.called, first.called),
    }


def _logprob_figures(
    ok: Mapping[str, Observation],
    reference: Mapping[str, Observation],
    floor: Sequence[Mapping[str, Observation]],
) -> dict[str, Any]:
    """First-token total variation (and the reference's own, its floor) and the first differing
    generated token, where both sides carried logprobs."""

    def distances(run: Mapping[str, Observation]) -> list[tuple[float, float]]:
        return [
            top_k_distance(o.first_top_logprobs, ref.first_top_logprobs)
            for i, o in run.items()
            if (ref := reference.get(i)) is not None
            and not ref.failed
            and not o.failed
            and o.first_top_logprobs
            and ref.first_top_logprobs
        ]

    found = distances(ok)
    floor_found = distances(floor[0]) if floor else []
    diffs = [
        first_difference(o.tokens, ref.tokens)
        for i, o in ok.items()
        if (ref := reference.get(i)) is not None and not ref.failed and o.tokens and ref.tokens
    ]
    differing = [d for d in diffs if d is not None]
    return {
        "logprob_pairs": len(found),
        "first_token_tv_mean": fmean(d for d, _ in found) if found else None,
        "first_token_tv_floor": fmean(d for d, _ in floor_found) if floor_found else None,
        "first_token_unlisted_mass_max": max(r for _, r in found) if found else None,
        "first_diff_token_median": median(differing) if differing else None,
        "identical_token_rate": _rate(d is None for d in diffs),
    }

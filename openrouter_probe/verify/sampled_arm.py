"""The sampled arm of a check: what it sends, what it costs, its power, and its judging.

``SAMPLED_PROMPTS`` open prompts ``n`` times each to every endpoint at the job's own sampling
settings, one MMD test (``verify.sampled``) per compared endpoint in the Holm family; ``n`` is
the smallest of ``N_GRID`` with enough simulated power that the budget pays (``docs/verify.md``,
"The sampled arm"). Row ids: ``TAG|PROMPT~K`` (``~`` is in no built-in item id).
"""

from __future__ import annotations

import bisect
import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from openrouter_probe.api.schema import Endpoint
from openrouter_probe.errors import ConfigError
from openrouter_probe.rules.sampling import sampling_advice
from openrouter_probe.verify.costs import prompt_tokens, request_cost
from openrouter_probe.verify.results import TestResult
from openrouter_probe.verify.sampled import (
    DEFAULT_LENGTH,
    DEFAULT_PERMUTATIONS,
    SampledTest,
    mmd_test,
    simulated_power,
    units,
)
from openrouter_probe.verify.stats import clopper_pearson
from openrouter_probe.verify.suites import Item

__all__ = [
    "EMPTY_LIMIT",
    "N_GRID",
    "PLANNING_FACTOR",
    "SAMPLED_PROMPTS",
    "SAMPLINGS",
    "SampledArm",
    "parse_sample_id",
    "plan_sampled_arm",
    "realised_power",
    "sample_id",
    "sampled_prompts",
    "sampled_results",
    "sampled_tests",
]

#: ``verify --sampling``: ``greedy`` (temperature 0 only) or ``job`` (and the sampled arm).
SAMPLINGS = ("greedy", "job")
#: Open prompts in the sampled arm.
SAMPLED_PROMPTS = 10
#: Answer tokens a sampled request may spend (the test reads its first ``DEFAULT_LENGTH`` words);
#: with thinking, its ``max_tokens`` adds the reasoning room (``verify.thinking``).
SAMPLED_MAX_TOKENS = 48
#: The samples per prompt the plan may choose.
N_GRID = (4, 6, 8, 10, 12, 15, 20, 25, 30, 40, 50)
#: The fault the planned power is against: sampling at 1.3 times the asked temperature.
PLANNING_FACTOR = 1.3
#: Simulations behind a planned power (its 95% lower bound is what must reach ``power``).
POWER_SIMULATIONS = 100
#: The largest share of samples with no answer an arm is judged with (more: it could not see).
EMPTY_LIMIT = 0.05
#: OpenRouter's documented defaults, sent for a model no card registry entry covers.
_DEFAULTS = {"temperature": 1.0, "top_p": 1.0}
_SAMPLE = "~"
_TOPICS = (
    "a lighthouse keeper's morning", "how bread rises", "the first snow in a city",
    "a chess endgame", "why rivers meander", "a train station at night", "learning to swim",
    "the smell of rain", "a market in the morning", "how bees find flowers", "an old map",
    "a violin being tuned", "the tide going out", "a library after closing", "planting a tree",
)  # fmt: skip


def sample_id(prompt_id: str, k: int) -> str:
    """The item id of sample ``k`` (from 1) of ``prompt_id``: ``PROMPT~K``."""
    return f"{prompt_id}{_SAMPLE}{k}"


def parse_sample_id(item_id: str) -> tuple[str, int] | None:
    """``(prompt id, k)`` of a sample's item id, or ``None`` for any other item."""
    prompt, sep, k = item_id.rpartition(_SAMPLE)
    return (prompt, int(k)) if sep and prompt and k.isdigit() and int(k) >= 1 else None


def sampled_prompts(count: int = SAMPLED_PROMPTS, *, seed: int = 0) -> list[tuple[str, str]]:
    """``(id, text)`` of the arm's open prompts: the same for the same ``seed``."""
    start = seed % len(_TOPICS)
    picked = [_TOPICS[(start + i) % len(_TOPICS)] for i in range(count)]
    return [
        (f"sampled-{i + 1:02d}", f"Write a few sentences about {topic}.")
        for i, topic in enumerate(picked)
    ]


@dataclass(frozen=True)
class SampledArm:
    """What the sampled arm sends to each endpoint, what it may cost, and its planned power."""

    prompts: tuple[tuple[str, str], ...]
    n: int
    settings: Mapping[str, float]
    source: str
    reasoning: Mapping[str, Any]
    power: float
    chosen: str  # how n was chosen, for the plan's text
    worst_case_usd: dict[str, Decimal | None]
    expected_usd: dict[str, Decimal | None]
    length: int = DEFAULT_LENGTH
    permutations: int = DEFAULT_PERMUTATIONS
    factor: float = PLANNING_FACTOR
    warnings: tuple[str, ...] = ()
    #: Each sample's ``max_tokens``: the answer's 48 and the reasoning room.
    max_tokens: int = SAMPLED_MAX_TOKENS
    #: The level the power is planned at: Holm's first step, alpha / family.
    level: float = 0.05

    @property
    def requests_per_endpoint(self) -> int:
        return len(self.prompts) * self.n

    @property
    def requests(self) -> int:
        return self.requests_per_endpoint * len(self.worst_case_usd)

    def total(self, which: str) -> Decimal | None:
        """The arm's ``worst`` or ``expected`` cost over every endpoint (``None``: no price)."""
        found = (self.worst_case_usd if which == "worst" else self.expected_usd).values()
        values = [v for v in found if v is not None]
        return None if len(values) < len(found) else sum(values, Decimal(0))

    def bodies(self, model: str, pin: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        """``(item id, request body)`` of every sample sent to the endpoint ``pin`` selects."""
        out: list[tuple[str, dict[str, Any]]] = []
        for prompt_id, text in self.prompts:
            body = {
                "model": model,
                "messages": [{"role": "user", "content": text}],
                "provider": dict(pin),
                "max_tokens": self.max_tokens,
                "reasoning": dict(self.reasoning),
                **self.settings,
            }
            if not self.reasoning:
                del body["reasoning"]  # the model's own default
            out.extend((sample_id(prompt_id, k), dict(body)) for k in range(1, self.n + 1))
        return out

    def describe(self) -> list[str]:
        """The plan's lines for the arm."""
        said = ", ".join(f"{k}={v:g}" for k, v in self.settings.items())
        worst = self.total("worst")
        lines = [
            f"sampled arm: {len(self.prompts)} prompts x {self.n} samples per endpoint "
            f"({self.requests} requests, worst "
            + ("?" if worst is None else f"${worst:.4f}")
            + f") at {said} ({self.source}), max_tokens {self.max_tokens}; MMD test of the first "
            f"{self.length} words against the reference, {self.permutations} permutations, in "
            "the Holm family",
            f"sampled arm power: {self.power:.0%} against an endpoint sampling at "
            f"{self.factor:g}x the temperature ({self.chosen}; simulated on the fake's "
            "sampling model, docs/verify.md)",
        ]
        return lines + [f"warning: sampled arm: {w}" for w in self.warnings]


def job_settings(model: str, *, thinking: bool) -> tuple[dict[str, float], str]:
    """The sampling the job uses for ``model``: the card's, else OpenRouter's defaults."""
    advice = sampling_advice(model)
    if advice is not None:
        return dict(advice.values(thinking=thinking)), advice.source
    return dict(_DEFAULTS), f"no card values known for {model}: OpenRouter's defaults"


def _costs(
    pinned: Mapping[str, Endpoint],
    prompts: Sequence[tuple[str, str]],
    n: int,
    *,
    worst: bool,
    max_tokens: int = SAMPLED_MAX_TOKENS,
) -> dict[str, Decimal | None]:
    """Each endpoint's cost of ``n`` samples of every prompt (``costs``: counted and priced as
    the temperature-0 arm's)."""
    tokens = [
        prompt_tokens(Item(pid, "sampled", ({"role": "user", "content": text},)))
        for pid, text in prompts
    ]
    n_in = sum(t[1] if worst else t[0] for t in tokens) * n
    n_out = max_tokens * len(prompts) * n
    return {
        tag: request_cost(n_in, n_out, len(prompts) * n, endpoint, worst=worst)
        for tag, endpoint in pinned.items()
    }


def _power(n: int, *, prompts: int, settings: Mapping[str, float], level: float) -> float:
    return simulated_power(
        prompts=prompts,
        n=n,
        temperature=float(settings.get("temperature", 1.0)),
        top_p=float(settings.get("top_p", 1.0)),
        factor=PLANNING_FACTOR,
        alpha=level,
        simulations=POWER_SIMULATIONS,
        permutations=_permutations(level),
    )


def _permutations(level: float) -> int:
    """Enough relabellings that the smallest p-value is under a third of ``level``."""
    return max(DEFAULT_PERMUTATIONS, math.ceil(3 / level))


def _reaches(power: float, target: float) -> bool:
    hits = round(power * POWER_SIMULATIONS)
    return clopper_pearson(hits, POWER_SIMULATIONS).low >= target


def plan_sampled_arm(
    model: str,
    pinned: Mapping[str, Endpoint],
    *,
    reasoning: Mapping[str, Any],
    thinking: bool,
    family: int,
    alpha: float,
    power: float,
    budget_left: Decimal | None,
    n: int | None = None,
    seed: int = 0,
    room: int = 0,
) -> SampledArm:
    """Plan the arm for the ``pinned`` endpoints (the reference's included): ``family`` is the
    Holm family with the arm's tests in it (the planned power is at its first step, ``alpha /
    family``); ``budget_left`` what the budget leaves after the temperature-0 arm; ``room`` the
    reasoning room added to each sample's ``max_tokens``."""
    max_tokens = SAMPLED_MAX_TOKENS + room
    prompts = sampled_prompts(seed=seed)
    settings, source = job_settings(model, thinking=thinking)
    level = alpha / max(1, family)
    warnings: list[str] = []

    def fits(k: int) -> bool:
        found = _costs(pinned, prompts, k, worst=True, max_tokens=max_tokens).values()
        worst = [v for v in found if v is not None]
        if budget_left is None or len(worst) < len(found):
            return True
        return sum(worst, Decimal(0)) <= budget_left

    if n is not None:
        if n < 2:
            raise ConfigError(f"sampled_n={n}: the MMD test needs at least 2 samples a prompt")
        chosen, reached = n, _power(n, prompts=len(prompts), settings=settings, level=level)
        how = f"n={n} as given"
    else:
        affordable = [k for k in N_GRID if fits(k)]
        if not affordable:
            raise ConfigError(
                f"the budget left after the temperature-0 arm (${budget_left}) does not pay "
                f"{N_GRID[0]} samples of {len(prompts)} prompts on every endpoint; raise the "
                "budget or use sampling=greedy"
            )
        chosen, reached = _smallest_reaching(affordable, len(prompts), settings, level, power)
        how = f"n={chosen}, the smallest whose power's 95% lower bound reaches {power:.0%}"
        if not _reaches(reached, power):
            how = f"n={chosen}, the most the budget pays"
            warnings.append(
                f"the budget pays n={chosen}, short of {power:.0%} power; raise the budget"
            )
    return SampledArm(
        prompts=tuple(prompts),
        n=chosen,
        settings=settings,
        source=source,
        reasoning=dict(reasoning),
        power=reached,
        chosen=how,
        worst_case_usd=_costs(pinned, prompts, chosen, worst=True, max_tokens=max_tokens),
        expected_usd=_costs(pinned, prompts, chosen, worst=False, max_tokens=max_tokens),
        permutations=_permutations(level),
        warnings=tuple(warnings),
        max_tokens=max_tokens,
        level=level,
    )


def _smallest_reaching(
    grid: Sequence[int],
    prompts: int,
    settings: Mapping[str, float],
    level: float,
    target: float,
) -> tuple[int, float]:
    """Binary search of the (monotone) power over ``grid``: the smallest reaching ``target``,
    else the largest, with its power (each evaluation is a simulation, kept by
    ``simulated_power``'s cache: the fewest are run)."""

    def power_at(n: int) -> float:
        return _power(n, prompts=prompts, settings=settings, level=level)

    index = bisect.bisect_left(
        grid, True, hi=len(grid) - 1, key=lambda n: _reaches(power_at(n), target)
    )
    return grid[index], power_at(grid[index])


def realised_power(
    arm: SampledArm, reference: Mapping[str, Sequence[object]], mine: Mapping[str, Sequence[object]]
) -> float:
    """The arm's power with the samples that held an answer: the planned power when every prompt
    has its ``n`` on both sides, else simulated again at the prompts with 2 or more on each side
    and the samples they have a side (the fewer side's, averaged over them, rounded down; 0 when
    no prompt has 2)."""
    counts = [min(len(reference.get(p, ())), len(mine.get(p, ()))) for p, _ in arm.prompts]
    usable = [c for c in counts if c >= 2]
    if not usable:
        return 0.0
    if len(usable) == len(arm.prompts) and min(usable) >= arm.n:
        return arm.power
    n = sum(usable) // len(usable)
    return _power(n, prompts=len(usable), settings=arm.settings, level=arm.level)


def _too_empty(
    arm: SampledArm, who: str, count: int, answers: Mapping[str, Sequence[object]]
) -> str | None:
    """Why the arm cannot judge when over ``EMPTY_LIMIT`` of ``who``'s samples held no answer
    (``count`` of them; ``answers`` the others, by prompt)."""
    total = count + sum(map(len, answers.values()))
    if total == 0 or count / total <= EMPTY_LIMIT:
        return None
    return (
        f"{count} of {total} samples ({count / total:.0%}) of {who} held no answer (the "
        f"reasoning used up max_tokens {arm.max_tokens}): over {EMPTY_LIMIT:.0%}, the arm "
        "cannot compare them; give the reasoning more room (reasoning.max_tokens)"
    )


def sampled_tests(
    arm: SampledArm | None,
    completions: Mapping[str, Mapping[str, Sequence[str | None]]],
    *,
    reference: str,
    compared: Sequence[str],
    empty: Mapping[str, int],
) -> dict[str, SampledTest | str]:
    """The MMD test of each compared tag against ``reference`` from ``completions`` (tag ->
    prompt id -> texts that hold an answer), with its realised power, or the reason there is
    none: too few samples on a side, or over ``EMPTY_LIMIT`` of them empty (``empty``: tag ->
    samples with no answer); none without the arm."""
    if arm is None:
        return {}
    ref = {p: [units(t) for t in texts] for p, texts in completions.get(reference, {}).items()}
    out: dict[str, SampledTest | str] = {}
    for index, tag in enumerate(compared):
        mine = {p: [units(t) for t in texts] for p, texts in completions.get(tag, {}).items()}
        blind = _too_empty(arm, "the reference", empty.get(reference, 0), ref) or _too_empty(
            arm, "this endpoint", empty.get(tag, 0), mine
        )
        power = realised_power(arm, ref, mine)
        if blind is not None:
            out[tag] = f"{blind}; realised power {power:.0%}"
            continue
        try:
            found = mmd_test(
                ref, mine, length=arm.length, permutations=arm.permutations, seed=index
            )
        except ValueError as exc:
            out[tag] = f"{exc}; realised power {power:.0%}"
            continue
        out[tag] = dataclasses.replace(found, power=power)
    return out


def sampled_results(
    found: SampledTest | str | None, comparison: Any, plan: Any
) -> tuple[TestResult, ...]:
    """The sampled arm's test of one endpoint as a ``TestResult`` (deciding, its p Holm-adjusted
    in ``comparison``), or a line saying why there is none; ``()`` without the arm."""
    if found is None or plan.sampled is None:
        return ()
    arm: SampledArm = plan.sampled
    if isinstance(found, str):
        return (TestResult("sampled_mmd", None, None, None, "inconclusive", found),)
    adjusted = dict(comparison.extra).get("sampled_mmd")
    said = ", ".join(f"{k}={v:g}" for k, v in arm.settings.items())
    rejected = adjusted is not None and adjusted <= plan.alpha
    return (
        TestResult(
            "sampled_mmd",
            found.statistic,
            found.p_value,
            None,
            "differs" if rejected else "inconclusive",
            f"MMD^2 (Hamming kernel, first {arm.length} words of the answer) of "
            f"{found.samples[0]} samples holding an answer against the reference's "
            f"{found.samples[1]} over {found.prompts} prompts at {said}; "
            f"{found.permutations} within-prompt permutations; realised power "
            + ("?" if found.power is None else f"{found.power:.0%}")
            + "; shows a difference, never equality",
            deciding=True,
            p_adjusted=adjusted,
        ),
    )

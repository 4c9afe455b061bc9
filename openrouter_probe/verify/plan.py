"""The plan of a precision check, before anything is sent: pins, request bodies, cost
(``verify.costs``), power. The plan holds the run that sends it (``run.config.RunPlan``); a plan
only priced holds one without an output.
"""

from __future__ import annotations

import dataclasses
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from openrouter_probe.api.schema import Endpoint
from openrouter_probe.errors import ConfigError, OptionError
from openrouter_probe.rules.routing import RequestParams
from openrouter_probe.run.config import RunPlan
from openrouter_probe.run.tallies import Frozen
from openrouter_probe.verify.costs import EndpointPlan, endpoint_plan, tokens_of
from openrouter_probe.verify.pins import (
    DEFAULT_SEED,
    DEFAULT_TOP_LOGPROBS,
    pin_block,
    pin_tags,
    request_body,
    tag_order,
)
from openrouter_probe.verify.sampled_arm import SAMPLINGS, SampledArm, plan_sampled_arm
from openrouter_probe.verify.stats import (
    DEFAULT_ALPHA,
    DEFAULT_POWER,
    DEFAULT_REPEATS,
    DEFAULT_TOLERANCE,
    PLANNING_DISCORDANCE,
    check_statistics,
    equivalence_power,
    min_detectable_gap,
    prompts_for_equivalence,
)
from openrouter_probe.verify.suites import Item
from openrouter_probe.verify.thinking import Thinking, thinking_for

__all__ = ["DEFAULT_N", "QUANTIZATION_TOLERANCE", "VerifyPlan", "plan_verify"]

#: Arithmetic prompts per endpoint by default: enough that ``consistent`` is reachable at the
#: default tolerance of 10 pp with five endpoints against a reference (see ``docs/verify.md``).
DEFAULT_N = 200


@dataclass(frozen=True, kw_only=True)
class VerifyPlan(Frozen):
    """What a check will send and may cost, before it sends anything: the check's own inputs and
    ``run``, the plan of the run that sends it (its ``budget_usd`` is the check's cap), each field
    declared once. Build it with :func:`plan_verify`; ``pinned`` is read-only."""

    model: str
    reference: str
    items: tuple[Item, ...]
    endpoints: tuple[EndpointPlan, ...]
    pinned: Mapping[str, Endpoint]
    seed: int
    #: Whether the check thinks, the ``reasoning`` block it sends, its reasoning room and why
    #: (``verify.thinking``).
    thinking_rule: Thinking
    top_logprobs: int
    #: The run that sends the check (``out`` ``None``: a plan only priced, which no run opens).
    run: RunPlan
    alpha: float = DEFAULT_ALPHA
    power: float = DEFAULT_POWER
    notes: tuple[str, ...] = field(default=())
    snapshot_sha256: str | None = None
    tolerance: float = DEFAULT_TOLERANCE
    repeats: int = DEFAULT_REPEATS
    #: The sampled arm (``sampling="job"``; ``verify.sampled_arm``), or ``None``.
    sampled: SampledArm | None = None

    @property
    def thinking(self) -> bool:
        """Whether the requests leave reasoning on (the ``reasoning`` block does not turn it off)."""
        return self.thinking_rule.on

    @property
    def reasoning(self) -> dict[str, Any]:
        """The ``reasoning`` block every request carries (empty: none is sent)."""
        return dict(self.thinking_rule.reasoning)

    @property
    def measures(self) -> list[str]:
        """The deciding measures this plan's items feed (``verdict.compare_to_reference``)."""
        names = []
        if any(item.answer_kind != "tool" for item in self.items):
            names.append("agreement")
            if any(item.answer_kind != "tool" and item.known for item in self.items):
                names.insert(0, "accuracy")
        if any(item.answer_kind == "tool" for item in self.items):
            names.append("tool_trigger")
            if any(item.expect_tool for item in self.items):
                names += ["tool_schema", "tool_arguments"]
        return names

    @property
    def family(self) -> int:
        """The tests Holm corrects over: every compared endpoint times every deciding measure
        (the sampled arm's MMD test one of them)."""
        per_endpoint = len(self.measures) + (self.sampled is not None)
        return max(1, len(self.compared) * per_endpoint)

    @property
    def interval_level(self) -> float:
        """The level of each endpoint's intervals: ``1 - 2 alpha/K`` (Bonferroni over K)."""
        return 1 - 2 * self.alpha / max(1, len(self.compared))

    def _accuracy_items(self) -> int:
        return sum(1 for item in self.items if item.known and item.answer_kind != "tool")

    @property
    def equivalence_power(self) -> float:
        """The chance that an endpoint equal to the reference gets its accuracy interval inside
        ``+-tolerance`` at this n, with ``PLANNING_DISCORDANCE`` discordant prompts."""
        return equivalence_power(
            self._accuracy_items(),
            discordance=PLANNING_DISCORDANCE,
            tolerance=self.tolerance,
            alpha=(1 - self.interval_level) / 2,
        )

    @property
    def prompts_needed(self) -> int:
        """Known-answer prompts for ``power`` to call an equal endpoint ``consistent`` at the
        tolerance (``PLANNING_DISCORDANCE`` discordant prompts assumed)."""
        return prompts_for_equivalence(
            tolerance=self.tolerance,
            alpha=(1 - self.interval_level) / 2,
            power=self.power,
            discordance=PLANNING_DISCORDANCE,
        )

    @property
    def compared(self) -> list[str]:
        """The tags compared with the reference (the reference itself left out)."""
        return [e.tag for e in self.endpoints if e.role == "compared"]

    @property
    def requests(self) -> int:
        """Requests the check sends in all, the reference's and the sampled arm's included."""
        arm = 0 if self.sampled is None else self.sampled.requests
        return sum(e.requests for e in self.endpoints) + arm

    def _total(self, key: str) -> Decimal | None:
        values = [getattr(e, key) for e in self.endpoints]
        if self.sampled is not None:
            values.append(self.sampled.total("worst" if key == "worst_case_usd" else "expected"))
        return None if any(v is None for v in values) else sum(values, Decimal(0))

    @property
    def worst_case_usd(self) -> Decimal | None:
        """The most the check can cost (``None`` when an endpoint lists no price)."""
        return self._total("worst_case_usd")

    @property
    def expected_usd(self) -> Decimal | None:
        """What the check should cost (``None`` when an endpoint lists no price)."""
        return self._total("expected_usd")

    @property
    def fits_budget(self) -> bool | None:
        """Whether the worst case fits the run's ``budget_usd`` (``None``: no cap or no price)."""
        worst, budget = self.worst_case_usd, self.run.budget_usd
        return None if budget is None or worst is None else worst <= budget

    @property
    def min_detectable_gap_best(self) -> float | None:
        """The smallest accuracy gap the known-answer items can detect with ``power`` (mid-p
        McNemar at ``alpha``/m, m the tests in the family), if the endpoints never disagree the other
        way (the best case: the report gives the figure for the disagreements actually seen)."""
        return min_detectable_gap(
            self._accuracy_items(), alpha=self.alpha / self.family, power=self.power
        )

    def bodies(self, tag: str) -> list[tuple[str, dict[str, Any]]]:
        """Return ``(item id, request body)`` for every item pinned to ``tag``: what a sending
        loop posts, one request each, before handing the responses to ``build_report``."""
        endpoint = self.pinned.get(tag)
        if endpoint is None:
            raise ConfigError(f"{tag!r} is not in this plan ({', '.join(self.pinned)})")
        return [
            (
                item.id,
                request_body(
                    item,
                    endpoint,
                    model=self.model,
                    seed=self.seed,
                    reasoning=self.reasoning,
                    top_logprobs=self.top_logprobs,
                    room=self.thinking_rule.room,
                ),
            )
            for item in self.items
        ]

    def sampled_bodies(self, tag: str) -> list[tuple[str, dict[str, Any]]]:
        """``(item id, request body)`` of every sample the sampled arm sends to ``tag`` (none
        without the arm)."""
        if self.sampled is None:
            return []
        if tag not in self.pinned:
            raise ConfigError(f"{tag!r} is not in this plan ({', '.join(self.pinned)})")
        return self.sampled.bodies(self.model, pin_block(tag))

    def _power_lines(self) -> list[str]:
        gap = self.min_detectable_gap_best
        known = self._accuracy_items()
        deciding = ", ".join(
            [*self.measures, *(["sampled_mmd"] if self.sampled is not None else [])]
        )
        if not known:
            return [f"deciding measures: {deciding} (no known-answer prompts)"]
        return [
            f"reference sent {self.repeats} times (its disagreement with itself is the floor); "
            f"deciding measures: {deciding}; Holm over {self.family} tests at "
            f"family-wise alpha {self.alpha:g}",
            "difference: mid-p McNemar detects an accuracy gap of "
            + ("no size up to 100 pp" if gap is None else f"{100 * gap:.1f} pp")
            + f" with {self.power:.0%} power (at best: no reverse disagreements)",
            f"equivalence: an endpoint equal to the reference is called consistent within "
            f"+-{100 * self.tolerance:g} pp with {self.equivalence_power:.0%} power at n={known} "
            f"({self.interval_level:.0%} intervals, {100 * PLANNING_DISCORDANCE:g}% discordant "
            f"prompts assumed); {self.power:.0%} power needs n={self.prompts_needed}",
            _tolerance_line(self, known),
        ]

    def render(self) -> str:
        """The plan as text (80 columns for tags up to 22 characters; a longer tag widens its
        column rather than being cut), then its warnings and notes."""

        def usd(v: Decimal | None) -> str:
            return "?" if v is None else f"${v:.4f}"

        def per_m(v: Decimal | None) -> str:
            return "?" if v is None else f"{v:.2f}"

        arm = self.sampled
        width = max(8 if arm is None else 11, *(len(e.tag) for e in self.endpoints))
        lines = [
            f"verify {self.model} against {self.reference}",
            f"{len(self.items)} prompts x {len(self.endpoints)} endpoints"
            + (f" (the reference x{self.repeats})" if self.repeats > 1 else "")
            + f" = {sum(e.requests for e in self.endpoints)} requests"
            + ("" if arm is None else f" (+{arm.requests} sampled)"),
            f"{'endpoint':<{width}} {'role':<9} {'reqs':>5} {'in/M':>6} {'out/M':>6} "
            f"{'expected':>9} {'worst':>9} sends",
        ]
        for e in self.endpoints:
            sends = ",".join(
                name for name, on in (("seed", e.seed_sent), ("lp", e.logprobs_sent)) if on
            )
            lines.append(
                f"{e.tag:<{width}} {e.role:<9} {e.requests:>5} {per_m(e.price_in_per_m):>6} "
                f"{per_m(e.price_out_per_m):>6} {usd(e.expected_usd):>9} "
                f"{usd(e.worst_case_usd):>9} {sends or '-'}"
            )
        if arm is not None:
            lines.append(
                f"{'sampled arm':<{width}} {'all':<9} {arm.requests:>5} {'':>6} {'':>6} "
                f"{usd(arm.total('expected')):>9} {usd(arm.total('worst')):>9} -"
            )
        lines.append(
            f"{'total':<{width}} {'':<9} {self.requests:>5} {'':>6} {'':>6} "
            f"{usd(self.expected_usd):>9} {usd(self.worst_case_usd):>9}"
        )
        tail = [*self.thinking_rule.lines(), *self._power_lines()]
        if self.sampled is not None:
            tail.extend(self.sampled.describe())
        if self.run.budget_usd is not None:
            tail.append(
                f"budget ${self.run.budget_usd}: the worst case "
                + ("fits" if self.fits_budget else "does NOT fit (the cap will stop the run early)")
            )
        tail.extend(f"warning: {e.tag}: {w}" for e in self.endpoints for w in e.warnings)
        tail.extend(f"note: {n}" for n in self.notes)
        lines.extend(textwrap.fill(t, width=80, subsequent_indent="  ") for t in tail)
        return "\n".join(lines)


def _plan_notes(rows: Sequence[EndpointPlan], *, thinking: bool) -> tuple[str, ...]:
    notes = []
    listed = [r.role for r in rows if r.logprobs_sent]
    if "reference" not in listed or len(listed) < 2:
        notes.append(
            "first-token logprobs cannot be compared: the reference and at least one other "
            "endpoint must list logprobs and top_logprobs"
        )
    if thinking:
        notes.append(
            "reasoning is on: the first generated token is a reasoning token, so the logprob "
            "comparison and the expected cost are weaker (expected = worst-case output)"
        )
    return tuple(notes)


def plan_verify(
    endpoints: Sequence[Endpoint],
    *,
    model: str,
    tags: Sequence[str],
    items: Sequence[Item],
    reference: str | None = None,
    seed: int = DEFAULT_SEED,
    reasoning: Mapping[str, Any] | None = None,
    top_logprobs: int = DEFAULT_TOP_LOGPROBS,
    alpha: float = DEFAULT_ALPHA,
    power: float = DEFAULT_POWER,
    tolerance: float = DEFAULT_TOLERANCE,
    repeats: int = DEFAULT_REPEATS,
    budget_usd: Decimal | float | str | None = None,
    sampling: str = "greedy",
    sampled_n: int | None = None,
    thinking: str | Thinking | None = None,
    snapshot_sha256: str | None = None,
    run: RunPlan | None = None,
) -> VerifyPlan:
    """Plan a check of ``tags`` (and the ``reference``, added when missing) on ``items``.

    ``endpoints`` are the snapshot's (``snapshot_sha256`` names it; ``None``: live); each tag is
    pinned through the routing model at the largest ``max_tokens`` and the parameters the
    requests send. ``reference`` defaults to the first party (``default_reference``) and is sent
    ``repeats`` times (2..10: the floor); ``alpha``, ``power`` and ``tolerance`` (in (0, 1)) are
    checked first. ``thinking`` (``job``, ``on``, ``off``, or a ``verify.thinking.Thinking``,
    e.g. ``thinking_for(model, reasoning={"max_tokens": 4000})``: a reasoning budget, which is the
    room) sets the ``reasoning`` block of both arms and the room added to every ``max_tokens``
    (``None``: ``reasoning`` as given, default off). ``sampling="job"`` adds the sampled arm at
    the job's sampling settings (``verify.sampled_arm``: ``sampled_n`` samples a prompt, else
    chosen for ``power`` within the budget). ``run`` is the plan of the run that sends the check
    (``verify_precision``'s), whose ``budget_usd`` caps it (a ``budget_usd`` beside it is
    refused); without one the plan is only priced, against ``budget_usd`` (a positive amount, or
    ``None``: no cap).

    Example::

        snap = bundled_snapshot("moonshotai/kimi-k2.5")
        tags = [e.tag for e in snap.endpoints if e.quantization == "int4"]
        plan = plan_verify(snap.endpoints, model=snap.model, tags=tags, items=arith_suite(200))
        print(plan.render())
    """
    check_statistics(alpha=alpha, power=power, tolerance=tolerance, repeats=repeats)
    if run is None:
        run = _priced(budget_usd)
    elif budget_usd is not None:  # the run's budget is the cap, never a second one beside it
        raise OptionError("give {budget_usd} or a {run} with its budget, not both",
                          budget_usd=budget_usd, run=run)  # fmt: skip
    if not items:
        raise ConfigError("no prompts to send; give at least one suite item")
    if sampling not in SAMPLINGS:
        raise OptionError("{sampling=}: must be one of " + ", ".join(SAMPLINGS), sampling=sampling)
    order = tag_order(model, endpoints, tags, reference)
    ref = order[0]
    rule = thinking_for(model, thinking, reasoning=reasoning)
    totals = tokens_of(items, reasoning_off=not rule.on, room=rule.room)
    names = [e.provider_name for e in endpoints]
    pinned = pin_tags(order, endpoints, _params(items, rule), reference=reference)
    rows = [
        endpoint_plan(
            tag,
            pinned[tag],
            ref=ref,
            totals=totals.times(repeats) if tag == ref else totals,
            names=names,
            top=top_logprobs,
        )
        for tag in order
    ]
    greedy = VerifyPlan(
        model=model, reference=ref, items=tuple(items), endpoints=tuple(rows),
        pinned=pinned, seed=seed, top_logprobs=top_logprobs, run=run,
        alpha=alpha, power=power, notes=_plan_notes(rows, thinking=rule.on), tolerance=tolerance,
        repeats=repeats, thinking_rule=rule, snapshot_sha256=snapshot_sha256,
    )  # fmt: skip
    if sampling == "greedy":
        return greedy
    return dataclasses.replace(greedy, sampled=_sampled_arm(greedy, sampled_n))


def _priced(budget_usd: Decimal | float | str | None) -> RunPlan:
    """The run of a plan only priced: no output, the cap ``budget_usd`` (checked)."""
    from openrouter_probe.rules.quantities import positive_usd

    budget = None if budget_usd is None else positive_usd(budget_usd, "budget_usd")
    return RunPlan(command="verify", out=None, budget_usd=budget)


#: The tolerance the plan advises for quantization-sized changes (accuracy gaps of 1 to 5 pp).
QUANTIZATION_TOLERANCE = 0.03


def _tolerance_line(plan: VerifyPlan, known: int) -> str:
    """What the tolerance hides at this n: the largest true accuracy gap whose interval still lies
    inside it at least half the time (``PLANNING_DISCORDANCE`` plus the gap discordant),
    and the tolerance and n a quantization-sized change needs."""
    alpha = (1 - plan.interval_level) / 2
    hidden = 0.0
    for step in range(1, int(plan.tolerance * 200) + 1):
        gap = step / 200
        chance = equivalence_power(
            known, discordance=min(1.0, PLANNING_DISCORDANCE + gap), tolerance=plan.tolerance,
            alpha=alpha, gap=gap,
        )  # fmt: skip
        if chance < 0.5:
            break
        hidden = gap
    tight = QUANTIZATION_TOLERANCE
    needed = prompts_for_equivalence(
        tolerance=tight, alpha=alpha, power=plan.power, discordance=PLANNING_DISCORDANCE
    )
    seen = (
        "no accuracy gap gets its interval inside the tolerance half the time"
        if hidden == 0
        else f"an endpoint {100 * hidden:g} pp less accurate still gets its interval inside "
        f"+-{100 * plan.tolerance:g} pp half the time (consistent unless a test rejects)"
    )
    return (
        f"tolerance: at n={known} {seen}; for quantization-sized changes (1-5 pp) use "
        f"tolerance {tight:g}, which needs n={needed} for {plan.power:.0%} power"
    )


def _params(items: Sequence[Item], rule: Thinking) -> RequestParams:
    """What the pins are routed with: the largest ``max_tokens`` and the parameters sent."""
    sent = {"temperature", "max_tokens", *(["reasoning"] if rule.reasoning else [])}
    if any(item.tools for item in items):
        sent |= {"tools", "tool_choice"}
    return RequestParams(
        max_tokens=max(item.max_tokens for item in items) + rule.room, parameters=frozenset(sent)
    )


def _sampled_arm(plan: VerifyPlan, n: int | None) -> SampledArm:
    """The sampled arm of ``plan`` (its temperature-0 arm), in what the run's budget leaves."""
    greedy, budget = plan.worst_case_usd, plan.run.budget_usd
    left = None if budget is None or greedy is None else budget - greedy
    return plan_sampled_arm(
        plan.model,
        plan.pinned,
        reasoning=plan.reasoning,
        thinking=plan.thinking,
        family=max(1, len(plan.compared) * (len(plan.measures) + 1)),
        alpha=plan.alpha,
        power=plan.power,
        budget_left=left,
        n=n,
        seed=plan.seed,
        room=plan.thinking_rule.room,
    )

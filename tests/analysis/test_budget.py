"""The budget planner on the Kimi K2.5 scenario: the figures people read off it."""

from __future__ import annotations

import json
from datetime import UTC, datetime, time, timedelta, timezone
from decimal import Decimal
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from openrouter_probe.analysis.budget import plan_budget
from openrouter_probe.analysis.budget_plan import BudgetPlan
from openrouter_probe.api.schema import Endpoint, Percentiles
from openrouter_probe.errors import ConfigError, PolicyError, SnapshotError
from openrouter_probe.rules.pricing import effective_pricing, price_windows
from openrouter_probe.rules.provider_block import ProviderBlock
from openrouter_probe.rules.quantities import (
    format_tokens,
    parse_reasoning_share,
    parse_token_count,
)
from openrouter_probe.rules.routing import RequestParams, RouteDecision, route
from openrouter_probe.rules.snapshot import Snapshot, bundled_snapshot
from tests.conftest import ROOT

MODEL = "moonshotai/kimi-k2.5"
POLICY = ROOT / "policies" / "kimi-k2.5.yaml"
# The scenario's policy, as compiled (tests do not depend on the file's exact order list).
NATIVE_BLOCK = {
    "ignore": ["baseten", "fireworks"],
    "quantizations": ["int4"],
    "order": [
        "chutes/int4",
        "deepinfra/int4",
        "siliconflow/int4",
        "atlas-cloud/int4",
        "parasail/int4",
        "moonshotai/int4",
    ],
}


@pytest.fixture
def snap() -> Snapshot:
    return bundled_snapshot(MODEL)


@pytest.fixture
def plan(snap: Snapshot) -> BudgetPlan:
    return plan_budget(
        snap, budget_usd=100, output_tokens="60M", datasets=6, reasoning_share="0.5:0.8"
    )


# -- parsing ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("60M", 60_000_000),
        ("7.5M", 7_500_000),
        ("500k", 500_000),
        ("500K", 500_000),
        ("2B", 2_000_000_000),
        ("60000000", 60_000_000),
        ("60_000_000", 60_000_000),
        (" 10m ", 10_000_000),
        (4096, 4096),
    ],
)
def test_parse_token_count(text: str | int, tokens: int) -> None:
    assert parse_token_count(text) == tokens


@pytest.mark.parametrize("text", ["60X", "", "M", "-5M", "1.2345k", "ten", "6 0M"])
def test_parse_token_count_rejects(text: str) -> None:
    with pytest.raises(ConfigError, match="--output-tokens"):
        parse_token_count(text, what="--output-tokens")


@pytest.mark.parametrize(
    ("text", "low", "high"),
    [
        ("0.5:0.8", "0.5", "0.8"),
        ("0.5-0.8", "0.5", "0.8"),
        ("0.6", "0.6", "0.6"),
        ("0", "0", "0"),
        ((0.5, 0.8), "0.5", "0.8"),
    ],
)
def test_parse_reasoning_share(text, low: str, high: str) -> None:
    assert parse_reasoning_share(text) == (Decimal(low), Decimal(high))


@pytest.mark.parametrize("text", ["1", "1.0", "0.5:1", "-0.1", "1.5", "abc", "0.1:0.2:0.3"])
def test_parse_reasoning_share_rejects(text: str) -> None:
    with pytest.raises(ConfigError, match="reasoning share"):
        parse_reasoning_share(text)


def test_format_tokens() -> None:
    assert format_tokens(45_454_545) == "45.45M"
    assert format_tokens(7_575_757) == "7.58M"
    assert format_tokens(60_000_000) == "60M"
    assert format_tokens(500_000) == "500k"
    assert format_tokens(812) == "812"
    assert format_tokens(None) == "-"


# -- the scenario's figures -------------------------------------------------------------------------


def test_cheapest_admitted_without_policy_is_chutes(plan: BudgetPlan) -> None:
    assert plan.routing_mode == "load_balanced"
    assert plan.policy is None
    assert plan.cheapest.tag == "chutes/int4"
    assert plan.cheapest.price_out_usd_per_m == Decimal("2.2")
    assert plan.cheapest.price_in_usd_per_m == Decimal("0.45")
    assert len(plan.endpoints) == 11  # default routing admits every endpoint


def test_scenario_headline_figures(plan: BudgetPlan) -> None:
    fig = plan.cheapest.output_only
    assert fig.cost_usd == Decimal("132.00")
    assert fig.shortfall_usd == Decimal(32)
    assert fig.shortfall_pct == Decimal(32)
    assert fig.headroom_usd == 0
    assert fig.affordable_output_tokens == 45_454_545  # $100 / $2.20 per M
    assert fig.affordable_output_tokens_per_dataset == 7_575_757  # over six datasets
    assert float(fig.target_covered_pct) == pytest.approx(75.7576, abs=1e-4)
    assert plan.headline == (
        "60M output tokens at the cheapest admitted $2.20/M (Chutes) cost $132.00, 32% over the "
        "$100.00 budget; $100.00 buys 45.45M output tokens, 7.58M per dataset over 6"
    )


def test_visible_tokens_for_the_reasoning_range(plan: BudgetPlan) -> None:
    fig = plan.cheapest.output_only
    # visible = billed × (1 − share): 45.45M × 0.2 and × 0.5
    assert fig.affordable_visible_tokens_min == 9_090_909
    assert fig.affordable_visible_tokens_max == 22_727_272
    assert plan.target_visible_tokens_min == 12_000_000  # 60M at 80% reasoning
    assert plan.target_visible_tokens_max == 30_000_000  # 60M at 50% reasoning


def test_per_endpoint_figures(plan: BudgetPlan) -> None:
    by_tag = {e.tag: e for e in plan.endpoints}
    deepinfra = by_tag["deepinfra/int4"].output_only
    assert deepinfra.cost_usd == Decimal(135)
    assert deepinfra.affordable_output_tokens == 44_444_444
    assert deepinfra.affordable_output_tokens_per_dataset == 7_407_407
    moonshot = by_tag["moonshotai/int4"].output_only
    assert moonshot.cost_usd == Decimal(180)
    assert moonshot.shortfall_pct == Decimal(80)
    assert moonshot.affordable_output_tokens == 33_333_333
    assert moonshot.datasets_completed == 3
    venice = by_tag["venice"]
    assert venice.output_only.cost_usd == Decimal(225)
    assert venice.weight == 0.0 and venice.role == "fallback"  # degraded, status -2
    assert by_tag["baseten/fp4"].verdict == "requantized"
    assert by_tag["chutes/int4"].verdict == "native"


def test_run_until_the_money_runs_out(snap: Snapshot) -> None:
    plan = plan_budget(
        snap,
        budget_usd=100,
        output_tokens_per_dataset="10M",
        datasets=6,
        dataset_names=["B3", "B4", "B5", "B6", "B7", "B8"],
    )
    run = plan.cheapest.output_only.run
    assert [r.dataset for r in run] == ["B3", "B4", "B5", "B6", "B7", "B8"]
    assert [r.status for r in run] == ["complete"] * 4 + ["partial", "not started"]
    assert all(r.cost_usd == Decimal(22) for r in run[:4])
    assert run[4].funded_output_tokens == 5_454_545
    assert float(run[4].completed_pct) == pytest.approx(54.54545)
    assert run[5].funded_output_tokens == 0
    assert sum(r.cost_usd for r in run) <= Decimal(100)
    assert plan.cheapest.output_only.datasets_completed == 4


def test_budget_with_headroom(snap: Snapshot) -> None:
    plan = plan_budget(snap, budget_usd=150, output_tokens="60M", datasets=6)
    fig = plan.cheapest.output_only
    assert fig.shortfall_usd == 0 and fig.shortfall_pct == 0
    assert fig.headroom_usd == Decimal(18)
    assert fig.headroom_pct == Decimal(12)
    assert fig.datasets_completed == 6
    assert "12% under" in plan.headline


def test_all_in_adds_input_tokens(snap: Snapshot) -> None:
    plan = plan_budget(
        snap,
        budget_usd=100,
        output_tokens="60M",
        datasets=6,
        prompt_tokens_per_request=500,
        output_tokens_per_request="4k",
    )
    assert plan.requests == 15_000
    assert plan.input_tokens == 7_500_000
    assert plan.input_tokens_per_output_token == Decimal("0.125")
    all_in = plan.cheapest.all_in
    assert all_in is not None
    # 60M × $2.20/M + 7.5M × $0.45/M
    assert all_in.cost_usd == Decimal("135.375")
    assert all_in.effective_usd_per_m == Decimal("2.25625")
    assert all_in.affordable_output_tokens == 44_321_329
    # The same through a ratio.
    by_ratio = plan_budget(snap, budget_usd=100, output_tokens="60M", prompt_to_output_ratio=0.125)
    assert by_ratio.cheapest.all_in is not None
    assert by_ratio.cheapest.all_in.cost_usd == Decimal("135.375")
    assert plan_budget(snap, budget_usd=100, output_tokens="60M").cheapest.all_in is None


def test_time_to_finish_is_a_lower_bound(plan: BudgetPlan, snap: Snapshot) -> None:
    # 60M tokens / (31 tokens/s per request × 2000 requests)
    assert plan.cheapest.time_to_finish_s == pytest.approx(60e6 / (31 * 2000))
    slower = plan_budget(snap, budget_usd=100, output_tokens="60M", concurrency=100)
    assert slower.cheapest.time_to_finish_s == pytest.approx(60e6 / (31 * 100))
    assert any("capacity" in n and "lower bound" in n for n in plan.notes)


# -- under a policy ---------------------------------------------------------------------------------


def _policy_block() -> dict:
    if POLICY.exists():
        return yaml.safe_load(POLICY.read_text(encoding="utf-8"))["provider"]
    return NATIVE_BLOCK


def test_policy_admits_only_native_int4(snap: Snapshot) -> None:
    plan = plan_budget(
        snap, budget_usd=100, output_tokens="60M", datasets=6, provider=_policy_block()
    )
    tags = {e.tag for e in plan.endpoints}
    assert tags == {
        "chutes/int4",
        "deepinfra/int4",
        "siliconflow/int4",
        "atlas-cloud/int4",
        "parasail/int4",
        "moonshotai/int4",
    }
    excluded = {tag: reason for tag, reason, _ in plan.excluded}
    assert excluded["fireworks"] == "ignore"
    assert excluded["baseten/fp4"] == "ignore"
    assert excluded["together"] == "quantization"
    assert plan.routing_mode == "ordered"
    assert plan.cheapest.tag == "chutes/int4"
    assert plan.cheapest.output_only.cost_usd == Decimal(132)


def _weighted(decision: RouteDecision, value: dict[str, float]) -> float:
    """The traffic-weighted mean of a per-tag value, computed here independently of budget.py."""
    total = sum(c.weight for c in decision.candidates)
    return sum(c.weight * value[c.endpoint.tag] for c in decision.candidates) / total


def test_blended_price_is_the_route_weighted_price(snap: Snapshot) -> None:
    block = _policy_block()
    plan = plan_budget(snap, budget_usd=100, output_tokens="60M", provider=block)
    decision = route(block, snap.endpoints, RequestParams())
    prices = {
        c.endpoint.tag: float(c.endpoint.pricing.completion_usd_per_m) for c in decision.candidates
    }
    assert float(plan.blended.price_out_usd_per_m) == pytest.approx(
        _weighted(decision, prices), rel=1e-12
    )
    # Ordered: Chutes first (uptime 98.4%), DeepInfra takes most of the rest.
    weights = {e.tag: e.weight for e in plan.endpoints}
    assert weights["chutes/int4"] == pytest.approx(0.984)
    assert float(plan.blended.price_out_usd_per_m) == pytest.approx(2.2008, abs=1e-4)
    assert float(plan.blended.output_only.cost_usd) == pytest.approx(132.048, abs=1e-3)


def test_blended_under_default_load_balancing(plan: BudgetPlan, snap: Snapshot) -> None:
    decision = route(None, snap.endpoints)
    prices = {e.tag: float(e.pricing.completion_usd_per_m) for e in snap.endpoints}
    assert float(plan.blended.price_out_usd_per_m) == pytest.approx(
        _weighted(decision, prices), rel=1e-12
    )
    assert plan.blended.provider == "routing weights (load_balanced)"


def test_sorted_policy(snap: Snapshot) -> None:
    plan = plan_budget(
        snap,
        budget_usd=100,
        output_tokens="60M",
        provider={"sort": "throughput", "only": ["baseten", "fireworks"]},
    )
    assert plan.routing_mode == "sorted"
    assert [e.tag for e in plan.endpoints] == ["baseten/fp4", "fireworks"]
    assert plan.cheapest.output_only.cost_usd == Decimal(180)


# -- bad input --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"budget_usd": -5}, "budget_usd"),
        ({"budget_usd": 0}, "budget_usd"),
        ({"budget_usd": "abc"}, "budget_usd"),
        ({"reasoning_share": 1}, "reasoning_share"),
        ({"output_tokens": "60X"}, "output_tokens: '60X'"),
        ({"output_tokens": 0}, "more than 0"),
        ({"datasets": 0}, "datasets=0"),
        ({"concurrency": 0}, "concurrency=0"),
        ({"prompt_tokens_per_request": 500}, "needs output_tokens_per_request"),
        ({"output_tokens_per_dataset": "9M", "datasets": 6}, "output_tokens_per_dataset=9M"),
        ({"dataset_names": ["B3"], "datasets": 6}, "one name per dataset"),
    ],
)
def test_bad_input(snap: Snapshot, kwargs: dict, match: str) -> None:
    args = {"budget_usd": 100, "output_tokens": "60M", **kwargs}
    with pytest.raises(ConfigError, match=match):
        plan_budget(snap, **args)


def test_no_target(snap: Snapshot) -> None:
    with pytest.raises(ConfigError, match="give the target"):
        plan_budget(snap, budget_usd=100)


def test_no_priced_endpoint(snap: Snapshot) -> None:
    data = {**snap.data, "endpoints": [{**e, "pricing": {}} for e in snap.data["endpoints"]]}
    bare = Snapshot(model=MODEL, data=data, taken_at=snap.taken_at, source="file", origin="x.json")
    with pytest.raises(SnapshotError, match=r"no endpoint .* lists an output price"):
        plan_budget(bare, budget_usd=100, output_tokens="60M")


def test_policy_admitting_nothing(snap: Snapshot) -> None:
    with pytest.raises(PolicyError, match="admits no endpoint"):
        plan_budget(snap, budget_usd=100, output_tokens="60M", provider={"only": ["nobody"]})


def test_endpoints_list_and_frames(snap: Snapshot) -> None:
    plan = plan_budget(snap.endpoints, budget_usd=100, output_tokens="60M", datasets=6)
    assert plan.model is None and plan.snapshot is None
    assert plan.cheapest.verdict is None
    frame = plan.endpoints_frame()
    assert list(frame["tag"])[-1] == "blended"
    assert frame.loc[frame.tag == "chutes/int4", "cost_usd"].item() == 132.0
    run = plan.run_frame()
    assert list(run["status"]) == ["complete"] * 4 + ["partial", "not started"]


def test_to_dict_has_every_figure_by_name(plan: BudgetPlan) -> None:
    d = plan.to_dict()
    cheapest = d["cheapest"]
    assert cheapest["price_out_usd_per_m"] == 2.2
    assert cheapest["output_only"]["cost_usd"] == 132.0
    assert cheapest["output_only"]["shortfall_pct"] == 32.0
    assert cheapest["output_only"]["affordable_output_tokens"] == 45_454_545
    assert cheapest["output_only"]["affordable_output_tokens_per_dataset"] == 7_575_757
    assert d["budget_usd"] == 100.0 and d["output_tokens"] == 60_000_000
    assert len(d["endpoints"]) == 11


# -- properties -------------------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    budget=st.decimals(min_value="0.01", max_value="100000", places=2),
    tokens=st.integers(min_value=1, max_value=10**10),
    extra=st.integers(min_value=0, max_value=10**9),
)
def test_cost_monotonic_and_budget_spent_exactly(budget: Decimal, tokens: int, extra: int) -> None:
    snap = bundled_snapshot(MODEL)
    small = plan_budget(snap, budget_usd=budget, output_tokens=tokens)
    large = plan_budget(snap, budget_usd=budget, output_tokens=tokens + extra)
    assert small.cheapest.output_only.cost_usd <= large.cheapest.output_only.cost_usd
    fig = small.cheapest.output_only
    price = small.cheapest.price_out_usd_per_m
    assert fig.affordable_output_tokens is not None
    spent = Decimal(fig.affordable_output_tokens) * price / 1_000_000
    # What the budget buys costs the budget, short by less than one token's price.
    assert budget - price / 1_000_000 < spent <= budget
    # Shortfall and headroom are two sides of one difference.
    assert fig.cost_usd - fig.shortfall_usd + fig.headroom_usd == budget


@settings(max_examples=40, deadline=None)
@given(
    share_low=st.decimals(min_value=0, max_value="0.99", places=2),
    width=st.decimals(min_value=0, max_value="0.5", places=2),
)
def test_visible_tokens_shrink_with_reasoning(share_low: Decimal, width: Decimal) -> None:
    share_high = min(share_low + width, Decimal("0.99"))
    plan = plan_budget(
        bundled_snapshot(MODEL),
        budget_usd=100,
        output_tokens="60M",
        reasoning_share=(share_low, share_high),
    )
    fig = plan.cheapest.output_only
    assert fig.affordable_visible_tokens_min is not None
    assert fig.affordable_visible_tokens_max is not None
    assert fig.affordable_visible_tokens_min <= fig.affordable_visible_tokens_max
    assert fig.affordable_visible_tokens_max <= (fig.affordable_output_tokens or 0)


# -- prices the job pays: internal_reasoning and pricing overrides -----------------------------------


def _ep(tag: str, out_per_m: str, in_per_m: str = "0.5", **pricing: object) -> Endpoint:
    """An endpoint priced in USD per million (converted to OpenRouter's USD per token)."""
    per_token = {
        "prompt": str(Decimal(in_per_m) / 1_000_000),
        "completion": str(Decimal(out_per_m) / 1_000_000),
        **pricing,
    }
    return Endpoint.model_validate(
        {
            "tag": tag,
            "provider_name": tag.split("/")[0].title(),
            "quantization": "fp8",
            "pricing": per_token,
            "uptime_last_30m": 100,
            "status": 0,
        }
    )


def _m(usd_per_m: str) -> str:
    return str(Decimal(usd_per_m) / 1_000_000)


def test_effective_pricing_tiers_are_strictly_greater() -> None:
    pricing = _ep(
        "grok", "2", overrides=[{"min_prompt_tokens": 200_000, "completion": _m("4")}]
    ).pricing
    assert effective_pricing(pricing).completion_usd_per_m == Decimal(2)
    assert effective_pricing(pricing, prompt_tokens=200_000).completion_usd_per_m == Decimal(2)
    assert effective_pricing(pricing, prompt_tokens=200_001).completion_usd_per_m == Decimal(4)
    # Keys the override omits inherit the base price; the result carries no overrides.
    tier = effective_pricing(pricing, prompt_tokens=300_000)
    assert tier.prompt_usd_per_m == Decimal("0.5") and tier.overrides is None


def test_effective_pricing_windows_wrap_midnight_half_open() -> None:
    night = {"utc_start": 2230, "utc_end": 630, "completion": _m("1")}
    pricing = _ep("deepseek", "2", overrides=[night]).pricing
    at = {
        time(22, 29): 2,
        time(22, 30): 1,
        time(0, 0): 1,
        time(6, 29): 1,
        time(6, 30): 2,
        time(12, 0): 2,
    }
    for when, price in at.items():
        assert effective_pricing(pricing, at=when).completion_usd_per_m == Decimal(price), when
    # A datetime is converted to UTC first: 01:00 at +05:00 is 20:00 UTC, outside the window.
    tz = timezone(timedelta(hours=5))
    assert (
        effective_pricing(pricing, at=datetime(2026, 1, 1, 1, 0, tzinfo=tz)).completion_usd_per_m
        == 2
    )
    assert effective_pricing(pricing).completion_usd_per_m == Decimal(2)  # no time: the default


def test_effective_pricing_honours_utc_days() -> None:
    weekend = {"utc_days": ["saturday", "Sunday"], "completion": _m("1")}
    pricing = _ep("deepseek", "2", overrides=[weekend]).pricing
    saturday = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)  # a Saturday
    monday = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
    assert effective_pricing(pricing, at=saturday).completion_usd_per_m == Decimal(1)
    assert effective_pricing(pricing, at=saturday + timedelta(days=1)).completion_usd_per_m == 1
    assert effective_pricing(pricing, at=monday).completion_usd_per_m == Decimal(2)
    # Sunday 23:30 at -02:00 is Monday 01:30 UTC: the weekday is the UTC one.
    late = datetime(2026, 11, 29, 23, 30, tzinfo=timezone(timedelta(hours=-2)))
    assert effective_pricing(pricing, at=late).completion_usd_per_m == Decimal(2)
    # A bare time names no day: a day-bound entry does not apply, nor does it in the windows.
    assert effective_pricing(pricing, at=time(12, 0)).completion_usd_per_m == Decimal(2)
    assert [w.pricing.completion_usd_per_m for w in price_windows(pricing)] == [Decimal(2)]


def test_later_overrides_win_per_key() -> None:
    pricing = _ep(
        "x",
        "2",
        overrides=[
            {"min_prompt_tokens": 1000, "completion": _m("3"), "prompt": _m("1")},
            {"min_prompt_tokens": 5000, "completion": _m("5")},
        ],
    ).pricing
    both = effective_pricing(pricing, prompt_tokens=6000)
    assert both.completion_usd_per_m == Decimal(5)  # the later entry wins
    assert both.prompt_usd_per_m == Decimal(1)  # the key it omits keeps the earlier override
    first = effective_pricing(pricing, prompt_tokens=2000)
    assert (first.completion_usd_per_m, first.prompt_usd_per_m) == (Decimal(3), Decimal(1))


def test_price_windows_merge_across_midnight() -> None:
    pricing = _ep(
        "deepseek", "2", overrides=[{"utc_start": 1630, "utc_end": 30, "completion": _m("1")}]
    ).pricing
    windows = price_windows(pricing)
    assert [(w.start_hhmm, w.end_hhmm) for w in windows] == [(1630, 30), (30, 1630)]
    assert [w.pricing.completion_usd_per_m for w in windows] == [Decimal(1), Decimal(2)]
    assert windows[0].label == "16:30-00:30 UTC"
    assert len(price_windows(_ep("flat", "2").pricing)) == 1


def test_internal_reasoning_prices_the_reasoning_share() -> None:
    # 2.00 output but 4.00 per reasoning token: at 50-80% reasoning a billed token costs up to
    # 2 × 0.2 + 4 × 0.8 = 3.60, so the flat 2.50 endpoint is the cheaper one.
    dear = _ep("gemini", "2", internal_reasoning=_m("4"))
    flat = _ep("other", "2.5")
    plan = plan_budget([dear, flat], budget_usd=100, output_tokens="10M", reasoning_share="0.5:0.8")
    assert plan.cheapest.tag == "other"
    by_tag = {e.tag: e for e in plan.endpoints}
    assert by_tag["gemini"].price_out_usd_per_m == Decimal("3.6")
    assert by_tag["gemini"].price_completion_usd_per_m == Decimal(2)
    assert by_tag["gemini"].price_reasoning_usd_per_m == Decimal(4)
    assert by_tag["gemini"].output_only.cost_usd == Decimal(36)
    assert by_tag["other"].price_reasoning_usd_per_m is None
    # A cheaper reasoning price is taken at the low end of the range: 2 × 0.5 + 1 × 0.5 = 1.50.
    cheap = _ep("cheap", "2", internal_reasoning=_m("1"))
    plan = plan_budget(
        [cheap, flat], budget_usd=100, output_tokens="10M", reasoning_share="0.5:0.8"
    )
    assert plan.cheapest.tag == "cheap"
    assert plan.cheapest.price_out_usd_per_m == Decimal("1.5")
    assert any("internal_reasoning" in n for n in plan.notes)
    # Without reasoning the listed output price holds.
    plan = plan_budget([dear, flat], budget_usd=100, output_tokens="10M")
    assert plan.cheapest.tag == "gemini" and plan.cheapest.price_out_usd_per_m == Decimal(2)


def test_prompt_tier_overrides_apply_to_the_jobs_prompt_size() -> None:
    tiered = _ep(
        "grok",
        "2",
        overrides=[{"min_prompt_tokens": 200_000, "completion": _m("4"), "prompt": _m("1")}],
    )
    flat = _ep("other", "3")
    short = plan_budget(
        [tiered, flat],
        budget_usd=100,
        output_tokens="10M",
        prompt_tokens_per_request=1000,
        output_tokens_per_request=1000,
    )
    assert short.cheapest.tag == "grok" and short.cheapest.price_out_usd_per_m == Decimal(2)
    long = plan_budget(
        [tiered, flat],
        budget_usd=100,
        output_tokens="10M",
        prompt_tokens_per_request="250k",
        output_tokens_per_request=1000,
    )
    assert long.cheapest.tag == "other"
    grok = next(e for e in long.endpoints if e.tag == "grok")
    assert (grok.price_out_usd_per_m, grok.price_in_usd_per_m) == (Decimal(4), Decimal(1))
    assert grok.all_in is not None
    # 10M output × $4/M + 10k requests × 250k prompt tokens × $1/M
    assert grok.all_in.cost_usd == Decimal(40) + Decimal(2500)
    unknown = plan_budget([tiered, flat], budget_usd=100, output_tokens="10M")
    assert any(
        "grok price long prompts higher" in n and "prompt_tokens_per_request" in n
        for n in unknown.notes
    )


def test_cheapest_time_window_is_reported() -> None:
    night = _ep(
        "deepseek", "2", overrides=[{"utc_start": 1630, "utc_end": 30, "completion": _m("0.5")}]
    )
    plan = plan_budget([night, _ep("other", "3")], budget_usd=100, output_tokens="10M")
    assert plan.cheapest.price_out_usd_per_m == Decimal(2)  # the default-condition price
    window = plan.cheapest_window
    assert window is not None
    assert (window.tag, window.start_hhmm, window.end_hhmm) == ("deepseek", 1630, 30)
    assert window.price_out_usd_per_m == Decimal("0.5") and window.cost_usd == Decimal(5)
    assert window.default_price_out_usd_per_m == Decimal(2)
    assert plan.to_dict()["cheapest_window"] == {
        "tag": "deepseek",
        "utc_start": 1630,
        "utc_end": 30,
        "price_out_usd_per_m": 0.5,
        "cost_usd": 5.0,
        "default_price_out_usd_per_m": 2.0,
    }
    assert (
        "prices vary by time of day: the cheapest window is 16:30-00:30 UTC at deepseek "
        "($0.50/M output, $2.00/M otherwise): the target costs $5.00 there" in plan.notes
    )
    assert (
        plan_budget([_ep("other", "3")], budget_usd=100, output_tokens="1M").cheapest_window is None
    )


def test_stale_order_entry_is_named(snap: Snapshot) -> None:
    block = {**NATIVE_BLOCK, "order": ["gone-provider/int4", *NATIVE_BLOCK["order"]]}
    plan = plan_budget(snap, budget_usd=100, output_tokens="60M", provider=block)
    assert plan.unmatched_entries == ("gone-provider/int4",)
    assert any("'gone-provider/int4', which no endpoint" in n and "stale" in n for n in plan.notes)
    assert (
        plan_budget(
            snap, budget_usd=100, output_tokens="60M", provider=NATIVE_BLOCK
        ).unmatched_entries
        == ()
    )


def test_cli_budget_warns_about_a_stale_policy(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from openrouter_probe.cli import cli

    doc = bundled_snapshot(MODEL).to_json()
    doc["data"]["endpoints"] = [e for e in doc["data"]["endpoints"] if e["tag"] != "parasail/int4"]
    fresh = tmp_path / "fresh.json"
    fresh.write_text(json.dumps(doc))
    args = [
        "budget",
        MODEL,
        "--budget-usd",
        "100",
        "--output-tokens",
        "60M",
        "--policy",
        str(POLICY),
    ]
    stale = CliRunner().invoke(cli, [*args, "--snapshot", str(fresh)])
    assert stale.exit_code == 0, stale.output
    assert (
        f"warning: {POLICY} is stale: provider.order names parasail/int4, which no longer serves "
        f"{MODEL} (OpenRouter skips it). Re-compile it: openrouter-probe policy check {POLICY} "
        f"--snapshot {fresh} --write"
    ) in stale.stderr
    # Any other drift that matters is named too, with the same fix.
    doc = bundled_snapshot(MODEL).to_json()
    for e in doc["data"]["endpoints"]:
        if e["tag"] == "chutes/int4":
            e["pricing"]["completion"] = "0.000003"
    fresh.write_text(json.dumps(doc))
    moved = CliRunner().invoke(cli, [*args, "--snapshot", str(fresh)])
    assert (
        f"warning: {POLICY} has drifted since it was compiled (chutes/int4 output price "
        f"$2.20/M -> $3.00/M (+36.4%, threshold ±5%)). Re-compile it: openrouter-probe policy check "
        f"{POLICY} --snapshot {fresh} --write"
    ) in moved.stderr
    fine = CliRunner().invoke(cli, [*args, "--offline"])
    assert "warning" not in fine.stderr


# -- every figure of a small plan, worked out by hand -------------------------------------------------


def _small(**pricing_a: object) -> list[Endpoint]:
    a = _ep("a-prov/fp8", "2", "0.5", **pricing_a)
    b = _ep("b-prov/fp8", "4", "1")
    a.throughput_last_30m = Percentiles(p50=50)
    b.throughput_last_30m = Percentiles(p50=25)
    return [a, b]


def _approx(value: object) -> object:
    """``value`` with every float wrapped in ``pytest.approx`` (Decimal-to-float noise only)."""
    if isinstance(value, dict):
        return {k: _approx(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_approx(v) for v in value]
    if isinstance(value, float):
        return pytest.approx(value, rel=1e-12, abs=1e-12)
    return value


def _run(cost: float, pct: float, status: str, name: str, funded: int) -> dict:
    return {
        "dataset": name,
        "target_output_tokens": 1_000_000,
        "funded_output_tokens": funded,
        "cost_usd": cost,
        "completed_pct": pct,
        "status": status,
    }


def _figures(basis: str, price: float, cost: float, affordable: int, run: list) -> dict:
    over = cost - 10.0
    return {
        "basis": basis,
        "effective_usd_per_m": price,
        "cost_usd": cost,
        "affordable_output_tokens": affordable,
        "affordable_output_tokens_per_dataset": affordable // 3,
        "affordable_visible_tokens_min": affordable // 2,  # at 50% reasoning
        "affordable_visible_tokens_max": affordable * 3 // 4,  # at 25% reasoning
        "target_covered_pct": affordable / 3_000_000 * 100,
        "shortfall_usd": max(over, 0.0),
        "shortfall_pct": max(over, 0.0) * 10,
        "headroom_usd": max(-over, 0.0),
        "headroom_pct": max(-over, 0.0) * 10,
        "datasets_completed": sum(r["status"] == "complete" for r in run),
        "run": run,
    }


def test_small_plan_every_key_by_hand() -> None:
    # Two endpoints under default load balancing: request mix 1000 in / 1000 out, so the balanced
    # prices are 1.25 and 2.50 and the weights 1/1.25² : 1/2.5² = 0.8 : 0.2.
    plan = plan_budget(
        _small(),
        budget_usd=10,
        output_tokens="3M",
        datasets=3,
        dataset_names=["x", "y", "z"],
        reasoning_share="0.25:0.5",
        prompt_tokens_per_request=1000,
        output_tokens_per_request=1000,
    )
    full = [_run(2.0, 100.0, "complete", n, 1_000_000) for n in "xyz"]
    a = {
        "tag": "a-prov/fp8",
        "provider": "A-Prov",
        "verdict": None,
        "role": "balanced",
        "position": 1,
        "weight": 0.8,
        "price_in_usd_per_m": 0.5,
        "price_out_usd_per_m": 2.0,
        "price_completion_usd_per_m": 2.0,
        "price_reasoning_usd_per_m": None,
        "throughput_p50_tps": 50.0,
        "time_to_finish_s": 30.0,  # 3M / (50 tok/s × 2000)
        "time_to_finish_h": 30.0 / 3600,
        "output_only": _figures("output_only", 2.0, 6.0, 5_000_000, full),
        # all-in: 3000 requests × 1000 prompt tokens at $0.50/M on top: $2.50/M output
        "all_in": _figures(
            "all_in",
            2.5,
            7.5,
            4_000_000,
            [_run(2.5, 100.0, "complete", n, 1_000_000) for n in "xyz"],
        ),
    }
    b_run = [
        _run(4.0, 100.0, "complete", "x", 1_000_000),
        _run(4.0, 100.0, "complete", "y", 1_000_000),
        _run(2.0, 50.0, "partial", "z", 500_000),
    ]
    b_all_in_run = [
        _run(5.0, 100.0, "complete", "x", 1_000_000),
        _run(5.0, 100.0, "complete", "y", 1_000_000),
        _run(0.0, 0.0, "not started", "z", 0),
    ]
    b = {
        **a,
        "tag": "b-prov/fp8",
        "provider": "B-Prov",
        "position": 2,
        "weight": 0.2,
        "price_in_usd_per_m": 1.0,
        "price_out_usd_per_m": 4.0,
        "price_completion_usd_per_m": 4.0,
        "throughput_p50_tps": 25.0,
        "time_to_finish_s": 60.0,
        "time_to_finish_h": 60.0 / 3600,
        "output_only": _figures("output_only", 4.0, 12.0, 2_500_000, b_run),
        "all_in": _figures("all_in", 5.0, 15.0, 2_000_000, b_all_in_run),
    }
    # The blend: 0.8 × 2 + 0.2 × 4 = 2.40 output, 0.8 × 0.5 + 0.2 × 1 = 0.60 input; throughput
    # the weighted harmonic mean 1 / (0.8/50 + 0.2/25) = 41.67 tok/s, so 36 s.
    blend_run = [_run(2.4, 100.0, "complete", n, 1_000_000) for n in "xyz"]
    blend_all_in_run = [
        _run(3.0, 100.0, "complete", "x", 1_000_000),
        _run(3.0, 100.0, "complete", "y", 1_000_000),
        _run(3.0, 100.0, "complete", "z", 1_000_000),
    ]
    blended = {
        **a,
        "tag": "blended",
        "provider": "routing weights (load_balanced)",
        "role": "blend",
        "position": None,
        "weight": 1.0,
        "price_in_usd_per_m": 0.6,
        "price_out_usd_per_m": 2.4,
        "price_completion_usd_per_m": None,
        "throughput_p50_tps": 1 / (0.8 / 50 + 0.2 / 25),
        "time_to_finish_s": 36.0,
        "time_to_finish_h": 0.01,
        "output_only": _figures("output_only", 2.4, 7.2, 4_166_666, blend_run),
        "all_in": _figures("all_in", 3.0, 9.0, 3_333_333, blend_all_in_run),
    }
    d = plan.to_dict()
    assert d.pop("headline").startswith(
        "3M output tokens at the cheapest admitted $2.00/M (A-Prov)"
    )
    assert d.pop("notes") == list(plan.notes)
    assert _approx(d) == {
        "model": None,
        "snapshot": None,
        "budget_usd": 10.0,
        "output_tokens": 3_000_000,
        "datasets": 3,
        "dataset_names": ["x", "y", "z"],
        "output_tokens_per_dataset": [1_000_000] * 3,
        "reasoning_share_min": 0.25,
        "reasoning_share_max": 0.5,
        "target_visible_tokens_min": 1_500_000,
        "target_visible_tokens_max": 2_250_000,
        "prompt_tokens_per_request": 1000,
        "output_tokens_per_request": 1000,
        "input_tokens_per_output_token": 1.0,
        "input_tokens": 3_000_000,
        "requests": 3000,
        "concurrency": 2000,
        "routing_mode": "load_balanced",
        "policy": None,
        "cheapest": a,
        "blended": blended,
        "endpoints": [a, b],
        "excluded": [],
        "unmatched_entries": [],
        "cheapest_window": None,
    }
    rows = plan.endpoint_rows()
    assert [r["tag"] for r in rows] == ["a-prov/fp8", "b-prov/fp8", "blended"]
    assert _approx(rows[1]) == {
        "tag": "b-prov/fp8",
        "provider": "B-Prov",
        "verdict": None,
        "role": "balanced",
        "weight": 0.2,
        "price_in_usd_per_m": 1.0,
        "price_out_usd_per_m": 4.0,
        "price_reasoning_usd_per_m": None,
        "cost_usd": 12.0,
        "shortfall_usd": 2.0,
        "shortfall_pct": 20.0,
        "over_budget_pct": 20.0,
        "affordable_output_tokens": 2_500_000,
        "affordable_output_tokens_per_dataset": 833_333,
        "affordable_visible_tokens_min": 1_250_000,
        "affordable_visible_tokens_max": 1_875_000,
        "datasets_completed": 2,
        "all_in_cost_usd": 15.0,
        "all_in_affordable_output_tokens": 2_000_000,
        "time_to_finish_h": 60.0 / 3600,
    }
    assert rows[0]["over_budget_pct"] == pytest.approx(-40.0)  # 40% under
    frame = plan.run_frame(which="blended")
    assert list(frame["basis"]) == ["output_only"] * 3 + ["all_in"] * 3
    assert list(frame["cost_usd"]) == pytest.approx([2.4, 2.4, 2.4, 3.0, 3.0, 3.0])
    assert list(plan.endpoints_frame()["price_reasoning_usd_per_m"].isna()) == [True] * 3


def test_free_endpoint_buys_unlimited() -> None:
    free = _ep("free-prov", "0", "0")
    plan = plan_budget([free, _ep("paid", "2")], budget_usd=10, output_tokens="3M", datasets=3)
    assert plan.cheapest.tag == "free-prov"
    fig = plan.cheapest.output_only
    assert fig.cost_usd == 0
    assert fig.affordable_output_tokens is None
    assert fig.affordable_output_tokens_per_dataset is None
    assert fig.affordable_visible_tokens_min is None and fig.affordable_visible_tokens_max is None
    assert fig.target_covered_pct is None
    assert (fig.headroom_usd, fig.headroom_pct, fig.shortfall_usd) == (10, 100, 0)
    assert [(r.status, r.cost_usd, r.funded_output_tokens) for r in fig.run] == [
        ("complete", 0, 1_000_000)
    ] * 3
    # Free endpoints share the traffic evenly under load balancing: the blend is free too.
    assert plan.blended.price_out_usd_per_m == 0
    assert plan.blended.output_only.affordable_output_tokens is None
    assert plan.headline == (
        "3M output tokens at the cheapest admitted $0.00/M (Free-Prov) cost $0.00, 100% under the "
        "$10.00 budget; $10.00 buys unlimited output tokens, unlimited per dataset over 3"
    )


def test_endpoint_under_one_dollar_per_million() -> None:
    plan = plan_budget([_ep("cheap", "0.4", "0.1")], budget_usd=10, output_tokens="30M")
    fig = plan.cheapest.output_only
    assert fig.cost_usd == Decimal(12)  # 30M × $0.40/M
    assert fig.affordable_output_tokens == 25_000_000  # $10 / $0.40 per M
    assert fig.shortfall_usd == 2 and fig.shortfall_pct == 20
    assert float(fig.target_covered_pct) == pytest.approx(250 / 3)
    assert plan.cheapest.price_out_usd_per_m == Decimal("0.4")
    assert "cheapest admitted $0.40/M" in plan.headline


def test_targets_that_do_not_divide_evenly() -> None:
    plan = plan_budget([_ep("p", "1")], budget_usd=1000, output_tokens=10_000_003, datasets=3)
    # The first datasets take the remainder, one token each; they sum to the target.
    assert plan.output_tokens_per_dataset == (3_333_335, 3_333_334, 3_333_334)
    run = plan.cheapest.output_only.run
    assert [r.target_output_tokens for r in run] == [3_333_335, 3_333_334, 3_333_334]
    tiny = plan_budget([_ep("p", "1")], budget_usd=1000, output_tokens=2, datasets=3)
    assert tiny.output_tokens_per_dataset == (1, 1, 0)
    # A dataset with nothing to do is complete at 100%.
    assert [(r.status, r.completed_pct) for r in tiny.cheapest.output_only.run] == [
        ("complete", 100),
        ("complete", 100),
        ("complete", 100),
    ]
    # $4.50 at $1/M over 3 × ~3.33M: the second dataset gets the last 1,166,665 tokens.
    short = plan_budget([_ep("p", "1")], budget_usd="4.5", output_tokens=10_000_003, datasets=3)
    assert [r.funded_output_tokens for r in short.cheapest.output_only.run] == [
        3_333_335,
        1_166_665,
        0,
    ]
    assert short.cheapest.output_only.affordable_output_tokens_per_dataset == 1_500_000


def test_require_parameters_through_plan_budget() -> None:
    with_tools = _ep("tools-prov", "3")
    with_tools.supported_parameters = ["tools", "max_tokens"]
    without = _ep("plain-prov", "2")
    without.supported_parameters = ["max_tokens"]
    block = {"require_parameters": True}
    plan = plan_budget(
        [with_tools, without],
        budget_usd=10,
        output_tokens="1M",
        provider=block,
        parameters=["tools"],
    )
    assert [e.tag for e in plan.endpoints] == ["tools-prov"]
    assert plan.excluded == (("plain-prov", "require_parameters", "does not support tools"),)
    assert plan.to_dict()["excluded"] == [
        {"tag": "plain-prov", "reason": "require_parameters", "detail": "does not support tools"}
    ]
    assert plan.policy == {"require_parameters": True}
    # Without require_parameters, or without tools sent, the cheaper endpoint is admitted.
    loose = plan_budget(
        [with_tools, without], budget_usd=10, output_tokens="1M", parameters=["tools"]
    )
    assert {e.tag for e in loose.endpoints} == {"tools-prov", "plain-prov"}
    plain = plan_budget([with_tools, without], budget_usd=10, output_tokens="1M", provider=block)
    assert plain.cheapest.tag == "plain-prov"


def test_unmatched_only_entry(snap: Snapshot) -> None:
    plan = plan_budget(
        snap, budget_usd=100, output_tokens="60M", provider={"only": ["chutes", "gone-x"]}
    )
    assert plan.unmatched_entries == ("gone-x",)
    assert [e.tag for e in plan.endpoints] == ["chutes/int4"]


def _at(override: dict, when: time) -> Decimal | None:
    """The output price at ``when`` with one time override ($1/M inside, $2/M outside)."""
    pricing = _ep("p", "2", overrides=[{**override, "completion": _m("1")}]).pricing
    return effective_pricing(pricing, at=when).completion_usd_per_m


@pytest.mark.parametrize(
    ("window", "when", "inside"),
    [
        ({"utc_start": 900, "utc_end": 1700}, time(9, 0), True),  # the start is inside
        ({"utc_start": 900, "utc_end": 1700}, time(16, 59), True),
        ({"utc_start": 900, "utc_end": 1700}, time(17, 0), False),  # the end is not
        ({"utc_start": 900, "utc_end": 1700}, time(8, 59), False),
        ({"utc_start": 0, "utc_end": 600}, time(0, 0), True),  # 0000 is midnight, a clock time
        ({"utc_start": 1059, "utc_end": 1100}, time(10, 59), True),  # minute 59 is valid
        ({"utc_start": 2300, "utc_end": 2400}, time(23, 59), True),  # 2400 ends the day
        ({"utc_start": 2200}, time(23, 0), True),  # no end: until midnight
        ({"utc_start": 2200}, time(12, 0), False),
        ({"utc_end": 600}, time(0, 0), True),  # no start: from midnight
        ({"utc_end": 600}, time(5, 59), True),
        ({"utc_end": 600}, time(6, 0), False),
        ({"utc_start": 800, "utc_end": 800}, time(8, 0), False),  # start = end: an empty window
        ({"utc_start": 800, "utc_end": 800}, time(12, 0), False),
        # Not clock times: the entry never applies (at midnight or at noon).
        ({"utc_start": 1060, "utc_end": 1200}, time(11, 0), False),
        ({"utc_start": 2500, "utc_end": 100}, time(0, 30), False),
        ({"utc_start": 2430, "utc_end": 100}, time(0, 30), False),
        ({"utc_start": 1000, "utc_end": 2460}, time(12, 0), False),
        ({"utc_start": -100, "utc_end": 600}, time(0, 0), False),
        ({"utc_start": -100, "utc_end": 600}, time(12, 0), False),
    ],
)
def test_time_windows(window: dict, when: time, inside: bool) -> None:
    assert _at(window, when) == (Decimal(1) if inside else Decimal(2))


def test_window_labels_and_clock_values() -> None:
    from openrouter_probe.rules.pricing import PriceWindow, _minutes

    base = _ep("p", "2").pricing
    assert PriceWindow(2205, 605, base).label == "22:05-06:05 UTC"
    assert PriceWindow(0, 2400, base).label == "00:00-24:00 UTC"
    assert _minutes(True) is None and _minutes("1630") is None
    assert (_minutes(0), _minutes(2359), _minutes(2400)) == (0, 1439, 1440)
    late = _ep("p", "2", overrides=[{"utc_start": 2205, "utc_end": 605, "completion": _m("1")}])
    plan = plan_budget([late], budget_usd=100, output_tokens="1M")
    assert plan.cheapest_window is not None and plan.cheapest_window.label == "22:05-06:05 UTC"


def test_to_dict_nulls_and_listed_prices() -> None:
    no_input = _ep("no-input", "2")
    no_input.pricing.prompt = None
    plan = plan_budget(
        [no_input, _ep("free", "0", "0"), _ep("gem", "3", internal_reasoning=_m("4"))],
        budget_usd=10,
        output_tokens="1M",
        reasoning_share="0.5",
    )
    by_tag = {e["tag"]: e for e in plan.to_dict()["endpoints"]}
    assert by_tag["no-input"]["price_in_usd_per_m"] is None
    assert by_tag["no-input"]["all_in"] is None
    assert by_tag["free"]["output_only"]["target_covered_pct"] is None
    assert by_tag["free"]["output_only"]["affordable_output_tokens"] is None
    assert by_tag["gem"]["price_reasoning_usd_per_m"] == 4.0
    assert by_tag["gem"]["price_completion_usd_per_m"] == 3.0
    assert by_tag["gem"]["price_out_usd_per_m"] == 3.5  # 3 × 0.5 + 4 × 0.5
    rows = {r["tag"]: r for r in plan.endpoint_rows()}
    assert rows["gem"]["price_reasoning_usd_per_m"] == 4.0
    assert rows["no-input"]["price_in_usd_per_m"] is None
    frame = plan.endpoints_frame()
    text = ("tag", "provider", "verdict", "role")
    assert {c: str(frame[c].dtype) for c in frame.columns if c not in text} == {
        "weight": "float64",
        "price_in_usd_per_m": "float64",
        "price_out_usd_per_m": "float64",
        "price_reasoning_usd_per_m": "float64",
        "cost_usd": "float64",
        "shortfall_usd": "float64",
        "shortfall_pct": "float64",
        "over_budget_pct": "float64",
        "affordable_output_tokens": "Int64",
        "affordable_output_tokens_per_dataset": "Int64",
        "affordable_visible_tokens_min": "Int64",
        "affordable_visible_tokens_max": "Int64",
        "datasets_completed": "int64",
        "all_in_cost_usd": "float64",
        "all_in_affordable_output_tokens": "Int64",
        "time_to_finish_h": "float64",
    }
    assert frame.loc[frame.tag == "free", "affordable_output_tokens"].isna().all()


# -- the job's numbers and the planner's edges --------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"datasets": True}, r"datasets=True: a whole number >= 1"),
        ({"datasets": 1.5}, r"datasets=1.5: a whole number"),
        ({"concurrency": True}, r"concurrency=True: a whole number"),
        ({"prompt_to_output_ratio": -1}, r"prompt_to_output_ratio: -1 must be >= 0"),
        (
            {
                "prompt_to_output_ratio": 0.2,
                "prompt_tokens_per_request": 800,
                "output_tokens_per_request": 4000,
            },
            "give prompt_to_output_ratio or prompt_tokens_per_request with output_tokens_per_request, "
            "not both",
        ),
        ({"output_tokens_per_request": 0}, "output_tokens_per_request=0: must be more than 0"),
        ({"budget_usd": "-0.01"}, r"budget_usd='-0.01': a positive amount of USD, e.g. 100"),
    ],
)
def test_bad_job(kwargs: dict, match: str) -> None:
    args = {"budget_usd": 100, "output_tokens": "60M", **kwargs}
    with pytest.raises(ConfigError, match=match):
        plan_budget([_ep("p", "2")], **args)


def test_job_counts() -> None:
    both = plan_budget(
        [_ep("p", "2")],
        budget_usd=1,
        output_tokens="60M",
        output_tokens_per_dataset="10M",
        datasets=6,
    )
    assert both.output_tokens == 60_000_000 and both.output_tokens_per_dataset == (10_000_000,) * 6
    # 60M / 7000 per request is 8571.4: 8572 requests, each with its prompt.
    uneven = plan_budget(
        [_ep("p", "2")],
        budget_usd=1,
        output_tokens="60M",
        prompt_tokens_per_request=100,
        output_tokens_per_request=7000,
    )
    assert uneven.requests == 8572 and uneven.input_tokens == 857_200
    by_ratio = plan_budget(
        [_ep("p", "2")], budget_usd=1, output_tokens=1000, prompt_to_output_ratio="0.3333"
    )
    assert by_ratio.input_tokens == 333 and by_ratio.requests is None  # rounded down
    assert by_ratio.input_tokens_per_output_token == Decimal("0.3333")
    zero = plan_budget([_ep("p", "2")], budget_usd=1, output_tokens=1000, prompt_to_output_ratio=0)
    assert zero.input_tokens == 0 and zero.cheapest.all_in is not None


def test_run_with_exactly_the_money_for_a_dataset() -> None:
    plan = plan_budget(
        [_ep("p", "2.2")], budget_usd=22, output_tokens_per_dataset="10M", datasets=2
    )
    run = plan.cheapest.output_only.run
    assert [(r.status, r.funded_output_tokens, r.cost_usd) for r in run] == [
        ("complete", 10_000_000, Decimal(22)),
        ("not started", 0, Decimal(0)),
    ]
    assert plan.cheapest.output_only.shortfall_usd == 22
    assert plan.cheapest.output_only.shortfall_pct == 100


def test_time_needs_a_positive_throughput() -> None:
    stalled = _ep("p", "2")
    stalled.throughput_last_30m = Percentiles(p50=0)
    plan = plan_budget([stalled], budget_usd=1, output_tokens="1M")
    assert plan.cheapest.time_to_finish_s is None
    assert plan.blended.throughput_p50_tps is None and plan.blended.time_to_finish_s is None
    bare = plan_budget([_ep("p", "2")], budget_usd=1, output_tokens="1M")
    assert "some endpoints carry no throughput stats (they need an API key): no time" in bare.notes
    fast = _ep("p", "2")
    fast.throughput_last_30m = Percentiles(p50=100)
    timed = plan_budget([fast], budget_usd=1, output_tokens="1M", concurrency=10)
    assert timed.cheapest.time_to_finish_s == 1000.0  # 1M / (100 × 10)
    assert not any("throughput stats" in n for n in timed.notes)


def test_cheapest_ties_break_on_input_price_then_position() -> None:
    dear_in, cheap_in = _ep("dear-in", "2", "0.5"), _ep("cheap-in", "2", "0.3")
    plan = plan_budget([dear_in, cheap_in], budget_usd=1, output_tokens="1M")
    assert plan.cheapest.tag == "cheap-in"
    no_in = _ep("no-in", "2", "0.3")
    no_in.pricing.prompt = None  # a missing input price counts as 0 for the tie
    plan = plan_budget([cheap_in, no_in], budget_usd=1, output_tokens="1M")
    assert plan.cheapest.tag == "no-in"
    first, second = _ep("first", "2", "0.3"), _ep("second", "2", "0.3")
    ordered = plan_budget(
        [first, second], budget_usd=1, output_tokens="1M", provider={"order": ["second", "first"]}
    )
    assert ordered.cheapest.tag == "second"


def test_blend_without_input_prices_or_weights() -> None:
    a, b = _ep("a", "2"), _ep("b", "4")
    a.pricing.prompt = None
    b.pricing.prompt = None
    plan = plan_budget([a, b], budget_usd=1, output_tokens="1M")
    assert plan.blended.price_in_usd_per_m is None and plan.blended.all_in is None
    # The only stable endpoint is unpriced, the priced one is degraded: no priced endpoint carries
    # traffic in the model, so the blend spreads evenly over the priced ones.
    unpriced = _ep("unpriced", "2")
    unpriced.pricing.completion = None
    degraded = _ep("degraded", "3")
    degraded.status = -2
    even = plan_budget([unpriced, degraded], budget_usd=1, output_tokens="1M")
    assert [e.tag for e in even.endpoints] == ["degraded"]
    assert even.endpoints[0].weight == 0.0
    assert even.blended.price_out_usd_per_m == Decimal(3)


def test_plan_errors_name_where() -> None:
    unpriced = _ep("unpriced", "2")
    unpriced.pricing.completion = None
    with pytest.raises(
        SnapshotError, match=r"^the endpoints given: no endpoint of the model lists"
    ):
        plan_budget([unpriced], budget_usd=1, output_tokens="1M")
    with pytest.raises(PolicyError, match=r"admits no priced endpoint of m/x \(1 excluded\)"):
        plan_budget(
            [unpriced, _ep("priced", "2")],
            budget_usd=1,
            output_tokens="1M",
            provider={"only": ["unpriced"]},
            model="m/x",
        )
    assert plan_budget([_ep("p", "2")], budget_usd=1, output_tokens=1, provider={}).policy == {}


# -- more of what a wrong planner would change (mutation survivors) -----------------------------------


def test_defaults_and_where_the_plan_comes_from(snap: Snapshot) -> None:
    plan = plan_budget(snap, budget_usd=100, output_tokens="60M")
    assert (plan.datasets, plan.dataset_names) == (1, ("1",))
    assert plan.model == MODEL and plan.snapshot == snap.provenance and plan.snapshot
    assert plan.input_tokens is None and plan.requests is None
    three = plan_budget(snap, budget_usd=100, output_tokens="60M", datasets=3)
    assert three.dataset_names == ("1", "2", "3")
    # Notes that do not apply are not there.
    plain = plan_budget([_ep("p", "2")], budget_usd=1, output_tokens="1M", prompt_to_output_ratio=1)
    assert not any("all-in figures need the prompt size" in n for n in plain.notes)
    assert not any("price long prompts" in n or "internal_reasoning" in n for n in plain.notes)
    with pytest.raises(ConfigError, match="the target must be more than 0 tokens"):
        plan_budget(snap, budget_usd=100, output_tokens_per_dataset=0, datasets=2)
    data = {**snap.data, "endpoints": [{**e, "pricing": {}} for e in snap.data["endpoints"]]}
    bare = Snapshot(model=MODEL, data=data, taken_at=snap.taken_at, source="file", origin="x.json")
    with pytest.raises(SnapshotError, match=r"^x\.json: no endpoint of moonshotai/kimi-k2\.5"):
        plan_budget(bare, budget_usd=100, output_tokens="60M")


def test_ratio_with_output_per_request_and_a_block_object() -> None:
    plan = plan_budget(
        [_ep("p", "2")],
        budget_usd=1,
        output_tokens="60M",
        prompt_to_output_ratio="0.2",
        output_tokens_per_request=4000,
        provider=ProviderBlock(only=["p"]),
    )
    assert plan.requests == 15_000 and plan.input_tokens == 12_000_000
    assert plan.policy == {"only": ["p"]}


def test_all_in_needs_an_input_price() -> None:
    no_input = _ep("p", "2")
    no_input.pricing.prompt = None
    plan = plan_budget([no_input], budget_usd=1, output_tokens="1M", prompt_to_output_ratio=1)
    assert plan.cheapest.all_in is None and plan.input_tokens == 1_000_000


def test_slow_throughput_still_gives_a_time() -> None:
    slow = _ep("p", "2")
    slow.throughput_last_30m = Percentiles(p50=0.5)
    plan = plan_budget([slow], budget_usd=1, output_tokens=1000, concurrency=2)
    assert plan.cheapest.time_to_finish_s == 1000.0  # 1000 / (0.5 × 2)


def test_request_counts_steer_load_balancing() -> None:
    # 1:1 the blended prices are 1.50 and 2.25 (a gets more traffic); at 9 prompt tokens per
    # output token they are 1.10 and 0.85, so b gets 1/0.85² : (1/1.1² + 1/0.85²) = 62.6%.
    a, b = _ep("a", "2", "1"), _ep("b", "4", "0.5")
    plan = plan_budget(
        [a, b],
        budget_usd=1,
        output_tokens="1M",
        prompt_tokens_per_request=9000,
        output_tokens_per_request=1000,
    )
    weights = {e.tag: e.weight for e in plan.endpoints}
    expected_b = (1 / 0.85**2) / (1 / 1.1**2 + 1 / 0.85**2)
    assert weights["b"] == pytest.approx(expected_b)
    small = _ep("small", "1", "0.1")
    small.context_length = 8000
    fits = plan_budget(
        [small, a],
        budget_usd=1,
        output_tokens="1M",
        prompt_tokens_per_request=9000,
        output_tokens_per_request=1000,
    )
    assert fits.excluded == (("small", "context_length", "request exceeds its context 8000"),)


def test_blend_when_an_unpriced_endpoint_takes_traffic() -> None:
    # order: unpriced first, then a and b; each up 50% of the time, so the traffic shares are
    # 0.5, 0.25 and 0.125 (normalized); the blend weighs a and b only: 2:1.
    unpriced = _ep("unpriced", "2")
    unpriced.pricing.completion = None
    a, b = _ep("a", "2", "0.5"), _ep("b", "4", "1")
    for e in (unpriced, a, b):
        e.uptime_last_30m = 50
    a.throughput_last_30m = Percentiles(p50=50)
    b.throughput_last_30m = Percentiles(p50=25)
    plan = plan_budget(
        [unpriced, a, b],
        budget_usd=1,
        output_tokens="1M",
        provider={"order": ["unpriced", "a", "b"]},
    )
    assert float(plan.blended.price_out_usd_per_m) == pytest.approx((2 * 2 + 4) / 3)
    assert float(plan.blended.price_in_usd_per_m) == pytest.approx((2 * 0.5 + 1) / 3)
    assert plan.blended.throughput_p50_tps == pytest.approx(1 / ((2 / 3) / 50 + (1 / 3) / 25))


def test_windows_with_tiers_and_merges() -> None:
    flat = price_windows(_ep("flat", "2").pricing)
    assert [(w.start_hhmm, w.end_hhmm) for w in flat] == [(0, 2400)]
    two = _ep(
        "p",
        "2",
        overrides=[
            {"utc_start": 100, "utc_end": 300, "completion": _m("1")},
            {"utc_start": 300, "utc_end": 500, "completion": _m("1")},
        ],
    )
    windows = price_windows(two.pricing)
    assert [(w.start_hhmm, w.end_hhmm, w.pricing.completion_usd_per_m) for w in windows] == [
        (500, 100, Decimal(2)),  # 05:00-24:00 and 00:00-01:00, merged across midnight
        (100, 500, Decimal(1)),  # the two neighbouring windows at the same price, merged
    ]
    tiered = _ep(
        "p",
        "2",
        overrides=[
            {"min_prompt_tokens": 1000, "completion": _m("3")},
            {"utc_start": 0, "utc_end": 600, "prompt": _m("0.1")},
        ],
    )
    long = price_windows(tiered.pricing, prompt_tokens=2000)
    assert [w.pricing.completion_usd_per_m for w in long] == [Decimal(3), Decimal(3)]
    # Through the planner: the window prices are the long-prompt ones, and an endpoint without
    # windows before it does not stop the search.
    night = _ep(
        "night",
        "2",
        overrides=[
            {"min_prompt_tokens": 1000, "completion": _m("3")},
            {"utc_start": 0, "utc_end": 600, "completion": _m("2.5")},
        ],
    )
    plan = plan_budget(
        [_ep("flat", "4"), night],
        budget_usd=100,
        output_tokens="1M",
        prompt_tokens_per_request=2000,
        output_tokens_per_request=1000,
    )
    assert plan.cheapest_window is not None
    assert plan.cheapest_window.tag == "night"
    assert plan.cheapest_window.price_out_usd_per_m == Decimal("2.5")
    assert plan.cheapest_window.default_price_out_usd_per_m == Decimal(3)

"""Thinking in a precision check: what ``--thinking job|on|off`` sends in both arms, the reasoning
room each request's ``max_tokens`` grows by, and what the plan says of it."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import openrouter_probe as orp
from openrouter_probe.cli import cli
from openrouter_probe.errors import OptionError
from openrouter_probe.rules.snapshot import bundled_snapshot
from openrouter_probe.verify.plan import VerifyPlan, plan_verify
from openrouter_probe.verify.suites import arith_suite
from openrouter_probe.verify.thinking import DEFAULT_ROOM, room_from_pilot, thinking_for

MODEL = "moonshotai/kimi-k2.5"
SNAP = bundled_snapshot(MODEL)
TAGS = ["chutes/int4", "deepinfra/int4"]


def _plan(**kwargs: object):  # type: ignore[no-untyped-def]
    return plan_verify(
        SNAP.endpoints, model=MODEL, tags=TAGS, items=arith_suite(20), sampling="job",
        sampled_n=4, **kwargs,  # type: ignore[arg-type]
    )  # fmt: skip


def test_job_thinks_as_kimi_runs_in_both_arms_with_room_for_the_answer() -> None:
    plan = _plan(thinking="job")
    assert plan.thinking and plan.thinking_rule.room == DEFAULT_ROOM == 2048
    _, greedy = plan.bodies("chutes/int4")[0]
    assert greedy["reasoning"] == {"enabled": True} and greedy["temperature"] == 0
    assert greedy["max_tokens"] == 256 + 2048
    _, sample = plan.sampled_bodies("chutes/int4")[0]
    # the card's values with thinking: temperature 1.0, top_p 0.95 (0.6 without)
    assert (sample["temperature"], sample["top_p"]) == (1.0, 0.95)
    assert sample["reasoning"] == {"enabled": True} and sample["max_tokens"] == 48 + 2048
    text = plan.render()
    assert "thinking: on, as the job runs moonshotai/kimi-k2.5 (it thinks by default;" in text
    assert "reasoning room of 2048 tokens" in " ".join(text.split())
    assert "compared: the answer text (message content), the reasoning apart" in text
    # the worst case is priced at the grown max_tokens: 20 prompts x 2304 tokens at $3/M output
    reference = plan.endpoints[0]
    assert reference.tokens.out_worst == 2 * 20 * (256 + 2048)


def test_off_sends_effort_none_and_samples_at_the_cards_values_without_thinking() -> None:
    plan = _plan(thinking="off")
    assert not plan.thinking and plan.thinking_rule.room == 0
    _, greedy = plan.bodies("chutes/int4")[0]
    assert greedy["reasoning"] == {"effort": "none"} and greedy["max_tokens"] == 256
    _, sample = plan.sampled_bodies("chutes/int4")[0]
    assert (sample["temperature"], sample["max_tokens"]) == (0.6, 48)
    assert "thinking: off (reasoning effort=none), both arms" in plan.render()


def test_a_reasoning_budget_is_the_room_and_a_model_without_a_card_keeps_its_default() -> None:
    budget = thinking_for(MODEL, reasoning={"enabled": True, "max_tokens": 600})
    assert budget.on and budget.room == 600
    assert budget.room_said == "the reasoning budget sent, reasoning.max_tokens"
    plan = _plan(reasoning={"max_tokens": 600})
    assert plan.bodies("chutes/int4")[0][1]["max_tokens"] == 256 + 600
    own = thinking_for("someone/unknown-model", "job")
    assert own.on and own.reasoning == {} and "own default (no reasoning sent" in own.said
    on = thinking_for("someone/unknown-model", "on")
    assert on.reasoning == {"enabled": True}
    with pytest.raises(OptionError, match="thinking"):
        thinking_for(MODEL, "maybe")
    with pytest.raises(OptionError, match="not both"):
        thinking_for(MODEL, "on", reasoning={"effort": "high"})


def test_the_room_from_a_pilot_is_thrice_its_longest_reasoning_within_bounds() -> None:
    assert room_from_pilot([120, 300, 180], ceiling=8192) == 900
    assert room_from_pilot([10], ceiling=8192) == 256
    assert room_from_pilot([6000], ceiling=8192) == 8192


def test_the_command_thinks_as_the_job_by_default_and_says_so() -> None:
    args = ["verify", MODEL, "--offline", "--endpoints", "chutes", "--n", "10", "--dry-run"]
    shown = CliRunner().invoke(cli, args, env={"OPENROUTER_API_KEY": ""})
    assert shown.exit_code == 0, shown.output
    assert "thinking: on, as the job runs moonshotai/kimi-k2.5" in shown.stdout
    off = CliRunner().invoke(cli, [*args, "--thinking", "off"], env={"OPENROUTER_API_KEY": ""})
    assert "thinking: off (reasoning effort=none), both arms" in off.stdout
    assert max(len(line) for line in shown.stdout.splitlines()) <= 80


def test_a_pilot_measures_the_room_first_and_a_rerun_reuses_it(tmp_path: Path) -> None:
    out = tmp_path / "v.jsonl"
    plans: list[VerifyPlan] = []

    def check() -> tuple[orp.VerifyReport, int]:
        with orp.fake.serve(SNAP, speed=0, seed=4) as fake:
            report = asyncio.run(
                orp.verify_precision(
                    MODEL, out=out, endpoints=["chutes/int4"], n=10, snapshot=SNAP,
                    api_key="sk-fake", base_url=fake.base_url, budget_usd=2,
                    on_plan=plans.append,
                )
            )  # fmt: skip
            return report, len(fake.ledger)

    report, sent = check()
    assert sent == 6 + 3 * 10  # the pilot, then the reference twice and chutes once
    records = [json.loads(line) for line in out.read_text().splitlines()]
    pilot = [r for r in records if "|pilot:" in str(r.get("id"))]
    assert len(pilot) == 6 and {r["id"].split("|")[0] for r in pilot} == {"moonshotai/int4"}
    longest = max(r["usage"]["completion_tokens_details"]["reasoning_tokens"] for r in pilot)
    rule = plans[0].thinking_rule
    assert rule is not None and rule.room == max(256, 3 * longest)
    assert rule.room_said == (
        f"3x the longest reasoning, {longest} tokens, of a pilot of 6 requests to moonshotai/int4"
    )
    assert plans[0].bodies("chutes/int4")[0][1]["max_tokens"] == 256 + rule.room
    run = plans[0].run  # the plan holds the run that sent it, resolved once from the keywords
    assert (run.out, run.budget_usd, run.concurrency) == (out, 2, 32)
    assert any(n.startswith("the pilot sent 6 request(s)") for n in report.notes)
    assert report.result("chutes/int4").measures.scored == 10  # the pilot is not judged
    again, resent = check()
    assert resent == 0 and plans[1].thinking_rule == rule
    assert again.verdicts == report.verdicts


def test_a_reasoning_budget_sent_needs_no_pilot(tmp_path: Path) -> None:
    budget = thinking_for(MODEL, reasoning={"enabled": True, "max_tokens": 300})
    with orp.fake.serve(SNAP, speed=0, seed=4) as fake:
        report = asyncio.run(
            orp.verify_precision(
                MODEL, out=tmp_path / "v.jsonl", endpoints=["chutes/int4"], n=10,
                snapshot=SNAP, api_key="sk-fake", base_url=fake.base_url, budget_usd=2,
                thinking=budget,
            )
        )  # fmt: skip
        sent = len(fake.ledger)
        reasoning = [e.reasoning_tokens for e in fake.ledger.entries]
    assert sent == 3 * 10  # no pilot: the budget is the room
    assert max(reasoning) <= 300 and report.result("chutes/int4").cut == 0
    assert not any("pilot" in n for n in report.notes)

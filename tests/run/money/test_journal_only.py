"""The journal is the only record of money.

An output without a journal (or with records of runs the journal does not know) is read as rows:
its finished rows are never sent again, and their money is unknown: adopted into the journal at
its worst case, then settled from ``/generation`` (the record's ``generation_id``) or left at the
worst case when the record names none. These tests run on the loopback fake OpenRouter, whose
ledger is what was really billed.
"""

from __future__ import annotations

import asyncio
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

from openrouter_probe.fake import serve
from openrouter_probe.generation import generate
from openrouter_probe.generation.audit import audit
from openrouter_probe.policy.compiled import load_compiled_policy
from openrouter_probe.rules.routing import route
from openrouter_probe.rules.snapshot import bundled_snapshot
from openrouter_probe.run.books.output import load_resume_state
from openrouter_probe.run.money.replay import replay_journal
from openrouter_probe.run.money.spend import Prices
from tests._generate import POLICY, no_sleep, prompt_rows, records, write_prompts

#: a record written by hand: no generation id, no run, its own usage
HAND = {
    "id": "r4",
    "dataset": "d0",
    "status": "ok",
    "content": "written by hand",
    "usage": {"prompt_tokens": 20, "completion_tokens": 30},
    "cost_usd": 0.00001,
}


def _generate(prompts: Path, out: Path, fake: Any, **options: Any) -> Any:
    args: dict[str, Any] = {
        "policy": POLICY,
        "out": out,
        "base_url": fake.base_url,
        "api_key": "sk-fake",
        "sleep": no_sleep,
        "snapshot": "bundled",
        "max_tokens": 64,
        "budget_usd": "0.5",
    }
    args.update(options)
    return asyncio.run(generate(prompts, **args))


def _adopted(out: Path) -> list[dict[str, Any]]:
    lines = [json.loads(x) for x in Path(f"{out}.ledger").read_text().splitlines()]
    return [x for x in lines if "adopts" in x]


def test_an_output_without_a_journal_is_rows_and_its_money_is_settled_from_generation(
    tmp_path: Path,
) -> None:
    out = tmp_path / "out.jsonl"
    first_rows = write_prompts(tmp_path / "first.jsonl", prompt_rows(4))
    all_rows = write_prompts(tmp_path / "all.jsonl", prompt_rows(8))
    with serve(speed=0, seed=22, record_requests=True) as fake:
        first = _generate(first_rows, out, fake)
        assert first.ok + first.truncated == 4
        billed_first = fake.ledger.total_usd
        # the journal is lost, and a row is added by hand: the output alone, as rows
        Path(f"{out}.ledger").unlink()
        with out.open("a") as handle:
            handle.write(json.dumps(HAND) + "\n")
        state = load_resume_state(out, repair=False)
        assert state.finished == {"r0", "r1", "r2", "r3", "r4"} and len(state.unjournaled) == 5
        budget = Decimal("0.5")
        second = _generate(all_rows, out, fake, budget_usd=budget)
        sent = [b["messages"][-1]["content"].split()[1] for b in fake.fake.requests]
        billed = fake.ledger.total_usd
        entries = len(fake.ledger.entries)
    # no row sent twice: the first run's four, then only the three never recorded
    assert sorted(sent) == ["0", "1", "2", "3", "5", "6", "7"] and entries == 7
    assert second.rows_already_done == 5 and second.requests == 3
    # the four records with a generation id were settled from /generation at what was billed
    assert second.reconciled_before == 4
    # the hand-written one names no generation: it stays at its worst case, its own tokens at
    # the dearest admitted prices, more than it says it cost
    prices = Prices.worst_case(
        route(load_compiled_policy(POLICY).provider, bundled_snapshot().endpoints).admitted
    )
    hand_worst = prices.worst_case_usd(prompt_tokens=20, max_tokens=30)
    assert hand_worst > Decimal(str(HAND["cost_usd"]))
    (hand,) = [x for x in _adopted(out) if x["id"] == "r4"]
    assert hand["gen_id"] is None and Decimal(hand["reserved_usd"]) == hand_worst
    assert second.spent_before_usd == billed_first + hand_worst
    assert second.spent_total_usd == billed + hand_worst <= budget  # the cap holds
    assert replay_journal(f"{out}.ledger").spent_usd == second.spent_total_usd
    # a second resume adopts nothing again, and counts the same money
    with serve(speed=0, seed=22) as fake2:
        third = _generate(all_rows, out, fake2)
        assert len(fake2.ledger.entries) == 0
    assert len(_adopted(out)) == 5 and third.spent_before_usd == second.spent_total_usd
    assert [r["id"] for r in records(out)].count("r0") == 1
    # audit counts the money as generate does: the journal's
    report = audit([out], policy=POLICY, snapshot=bundled_snapshot())
    assert report.spent_usd == second.spent_total_usd and report.unjournaled == 0


def test_audit_says_unknown_for_records_no_journal_knows(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    out.write_text(json.dumps(HAND) + "\n")
    report = audit([out], policy=POLICY, snapshot=bundled_snapshot())
    prices = Prices.worst_case(
        route(load_compiled_policy(POLICY).provider, bundled_snapshot().endpoints).admitted
    )
    worst = prices.worst_case_usd(prompt_tokens=20, max_tokens=30)
    assert report.unjournaled == 1 and report.unjournaled_usd == report.spent_usd == worst
    assert f"${worst:,.6f} unknown for 1 record(s) no spend journal knows" in report.render_notes()


def test_adoption_torn_by_a_kill_is_done_again_and_a_whole_one_never_twice(
    tmp_path: Path,
) -> None:
    from openrouter_probe.run.money.journal import Adopted, adopt

    out = tmp_path / "out.jsonl"
    second = dict(HAND, id="r5", generation_id="gen-5", usage={"prompt_tokens": 5})
    out.write_text(json.dumps(HAND) + "\n" + json.dumps(second) + "\n")
    journal = Path(f"{out}.ledger")
    state = load_resume_state(out)
    keys = [u.key for u in state.unjournaled]
    assert [u.row_id for u in state.unjournaled] == ["r4", "r5"]
    adopt(journal, [Adopted(k, "r", "d0", Decimal("0.01"), None) for k in keys])
    # a SIGKILL in the middle of the second line: its tail is torn
    journal.write_bytes(journal.read_bytes()[:-20])
    replay = replay_journal(journal)  # cuts the torn tail
    assert replay.adopted == {keys[0]} and replay.spent_usd == Decimal("0.01")
    again = load_resume_state(out, journal_runs=replay.runs, adopted=replay.adopted)
    assert [u.key for u in again.unjournaled] == [keys[1]]  # only the torn one, adopted again
    # r5 names no prompt tokens: a whole context in and max_tokens out, at the dearest prices
    prices = Prices.worst_case(
        route(load_compiled_policy(POLICY).provider, bundled_snapshot().endpoints).admitted
    )
    assert again.unjournaled[0].generation_id == "gen-5"
    assert again.unjournaled[0].worst_usd(prices, 64) == prices.worst_case_usd(
        prompt_tokens=prices.context_tokens or 0, max_tokens=64
    )

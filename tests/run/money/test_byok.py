"""BYOK answers: what the provider billed the user's own key counts in the spend beside
OpenRouter's ``cost`` (OPENROUTER.md 19: ``is_byok: true``, ``cost: 0``,
``upstream_inference_cost`` 0.0003253, recorded 2025-12), and the summary and ``audit`` show
both parts."""

from __future__ import annotations

import asyncio
import json
from decimal import Decimal
from pathlib import Path

from openrouter_probe.api.chat import Generation, read_spend
from openrouter_probe.api.completion import read_completion
from openrouter_probe.fake import serve
from openrouter_probe.generation import generate
from openrouter_probe.generation.audit import audit
from openrouter_probe.rules.snapshot import bundled_snapshot
from openrouter_probe.run.report import render_result
from tests._generate import POLICY, no_sleep, prompt_rows, records, write_prompts

D = Decimal

#: The recorded BYOK usage (2025-12), in a 200 body of the usual shape.
BYOK_BODY = {
    "id": "gen-1765000000-byok",
    "provider": "Anthropic",
    "model": "anthropic/claude-sonnet-4.5",
    "choices": [
        {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "hi"}}
    ],
    "usage": {
        "prompt_tokens": 21,
        "completion_tokens": 18,
        "total_tokens": 39,
        "cost": 0,
        "is_byok": True,
        "cost_details": {"upstream_inference_cost": 0.0003253},
    },
}


def test_a_byok_answer_costs_what_the_provider_billed_beside_openrouters_part() -> None:
    answer = read_completion(json.dumps(BYOK_BODY))
    assert answer.cost_usd == D("0.0003253") and answer.byok_usd == D("0.0003253")
    assert not answer.cost_invalid
    fee = json.loads(json.dumps(BYOK_BODY))
    fee["usage"]["cost"] = 0.0000163  # OpenRouter's fee, past the month's free BYOK requests
    paid = read_completion(json.dumps(fee))
    assert paid.cost_usd == D("0.0003416") and paid.byok_usd == D("0.0003253")


def test_without_byok_the_upstream_cost_is_not_added() -> None:
    """2026-07: upstream 0.0000057915 against cost 0.00000585 on a non-BYOK answer (7.2)."""
    assert read_spend(0.00000585, False, 0.0000057915) == (D("0.00000585"), False, None)
    assert read_spend(0.00000585, None, 0.0000057915) == (D("0.00000585"), False, None)


def test_a_byok_answer_whose_provider_part_is_unknown_is_unknown_not_free() -> None:
    assert read_spend(0, True, None) == (None, False, None)
    assert read_spend(0, True, "n/a") == (None, True, None)
    missing = json.loads(json.dumps(BYOK_BODY))
    del missing["usage"]["cost_details"]
    answer = read_completion(json.dumps(missing))
    assert answer.cost_usd is None and answer.byok_usd is None  # counted at its worst case


def test_generation_reads_a_byok_record_as_both_parts() -> None:
    record = Generation.model_validate(
        {"id": "gen-1", "total_cost": 0, "is_byok": True, "upstream_inference_cost": 0.0003253}
    )
    assert record.cost() == (D("0.0003253"), False)
    plain = Generation.model_validate(
        {"id": "gen-2", "total_cost": 0.0000602, "is_byok": False, "upstream_inference_cost": 0}
    )
    assert plain.cost() == (D("0.0000602"), False)


def test_a_byok_run_counts_the_providers_part_and_shows_both(tmp_path: Path) -> None:
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(6))
    with serve(speed=0, seed=4, faults="byok=@2+4+5") as fake:
        summary = asyncio.run(
            generate(
                tmp_path / "prompts.jsonl",
                policy=POLICY,
                out=tmp_path / "out.jsonl",
                base_url=fake.base_url,
                budget_usd=1,
                max_tokens=100,
                sleep=no_sleep,
            )
        )
        billed = fake.ledger.total_usd
    out = records(tmp_path / "out.jsonl")
    byok = [r for r in out if r["usage"]["is_byok"]]
    assert len(byok) == 3 and summary.stop_reason == "done"
    for record in byok:
        assert record["usage"]["cost"] == 0
        provider = record["usage"]["cost_details"]["upstream_inference_cost"]
        assert provider > 0 and record["cost_usd"] == provider
        assert record["cost_parts_usd"] == {"openrouter": 0.0, "provider": provider}
    assert all("cost_parts_usd" not in r for r in out if not r["usage"]["is_byok"])
    # the spend is what the user paid in all, the fake's ledger (both parts) to the cent
    assert sum(D(str(r["cost_usd"])) for r in out) == summary.spent_usd == billed
    byok_usd = sum(D(str(r["cost_usd"])) for r in byok)
    assert sum(t.byok_usd for t in summary.providers.values()) == byok_usd
    shown = " ".join(render_result(summary).split())  # (lines wrap at 80 columns)
    assert f"${byok_usd:,.6f} BYOK: the provider's, to your own key" in shown
    report = audit([tmp_path / "out.jsonl"], policy=POLICY, snapshot=bundled_snapshot())
    assert sum(p.byok_usd for p in report.providers) == byok_usd
    assert sum(p.cost_usd for p in report.providers) == billed


def test_after_a_byok_answer_each_reservation_keeps_openrouters_fee(tmp_path: Path) -> None:
    """The provider's bill is bounded by the endpoint's prices as any answer's; OpenRouter's BYOK
    fee (5% of what the request would cost through its credits) is kept from the first BYOK
    answer on."""
    from openrouter_probe.run.books.books import BYOK_FEE_SHARE, Books
    from openrouter_probe.run.books.overshoot import FIRST_ANSWERS
    from openrouter_probe.run.money.journal import Journal
    from openrouter_probe.run.money.spend import Prices, SpendCap
    from openrouter_probe.run.rows import PromptRow
    from openrouter_probe.run.send.attempt import Attempt
    from openrouter_probe.run.send.request import RequestBuilder

    prices = Prices(D("0.0000006"), D("0.000003"))
    row = PromptRow("r1", "d", [{"role": "user", "content": "q"}], {"max_tokens": 100}, 1)
    builder = RequestBuilder(model="m", provider_json="{}")

    def attempt() -> Attempt:
        return Attempt(builder.build(row, prices), prices, '"r1"', 60.0)

    with Journal(tmp_path / "out.jsonl.ledger") as journal:
        books = Books(SpendCap(D(1)), datasets=["d"], journal=journal)
        books.overshoot.answers = FIRST_ANSWERS  # past the first wave: the margin alone
        before = attempt()
        assert books.reserve("d", before)
        number = books.sent(row, before)
        answer = read_completion(json.dumps(BYOK_BODY))
        books.settle(row, before, number, answer, answer.generation_id, journaled=False)
    assert books.cap.spent_usd == D("0.0003253")  # both parts
    after = attempt()
    assert books.reserve("d", after)
    hold = after.request.worst_usd
    assert after.overshoot_usd - before.overshoot_usd == hold * BYOK_FEE_SHARE
    assert after.worst == hold + before.overshoot_usd + hold * D("0.05")

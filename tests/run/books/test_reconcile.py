"""The reconciler: attempts counted at their worst case, settled from ``GET /generation?id=``.

Unit tests drive ``Reconciler`` with a scripted lookup and a recorded sleep (nothing waits); the
run tests use the fake server's ``/generation`` with its lag on a ``ManualClock`` that the run's
injected sleep moves forward, so the eventual consistency is real and no test sleeps.
"""

from __future__ import annotations

import asyncio
import json
import logging
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from openrouter_probe.api.backoff import Backoff
from openrouter_probe.fake import ManualClock, serve
from openrouter_probe.generation import generate
from openrouter_probe.run.books.reconcile import DEFAULT_WAITS_S, PARALLEL_LOOKUPS, Reconciler
from openrouter_probe.run.money.replay import Pending, replay_journal
from openrouter_probe.run.report import render_result
from tests._generate import POLICY, journal_reconciled, prompt_rows, records, write_prompts

D = Decimal


def _pending(n: int, reserved: str = "0.01", dataset: str | None = "d") -> Pending:
    return Pending("R", n, f"gen-{n}", D(reserved), dataset)


class Script:
    """A lookup answering from a script per generation id; records every call."""

    def __init__(self, answers: dict[str, list[Any]]) -> None:
        self.answers = answers
        self.calls: list[str] = []

    async def __call__(self, generation_id: str) -> Any:
        self.calls.append(generation_id)
        queue = self.answers[generation_id]
        return queue.pop(0) if len(queue) > 1 else queue[0]


async def _reconcile(
    items: list[Pending], lookup: Script, *, now: bool = False, waits: Any = DEFAULT_WAITS_S
) -> tuple[Reconciler, list[tuple[Pending, Decimal]], list[float], list[int]]:
    settled: list[tuple[Pending, Decimal]] = []
    slept: list[float] = []
    changes: list[int] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    reconciler = Reconciler(
        lookup,
        on_settled=lambda p, cost: settled.append((p, cost)),
        on_change=lambda: changes.append(len(settled)),
        sleep=sleep,
        waits_s=waits,
    )
    task = asyncio.ensure_future(reconciler.run())
    for item in items:
        if now:
            reconciler.add(item, now=True)
        else:
            reconciler.add(item)  # the default: after the first wait
    reconciler.finish()
    await asyncio.wait_for(task, 5)
    return reconciler, settled, slept, changes


def test_an_attempt_is_looked_up_after_the_first_wait_and_settled() -> None:
    lookup = Script({"gen-1": [D("0.0031")]})
    reconciler, settled, slept, changes = asyncio.run(_reconcile([_pending(1)], lookup))
    assert settled == [(_pending(1), D("0.0031"))] and reconciler.settled == 1
    assert slept == [1.0] and lookup.calls == ["gen-1"] and changes == [1]
    assert reconciler.outstanding == 0 and reconciler.given_up == []


def test_the_lag_is_retried_with_growing_waits_then_given_up(
    caplog: pytest.LogCaptureFixture,
) -> None:
    lookup = Script(
        {
            "gen-1": [None, None, D("0")],
            "gen-2": [None],  # never there
        }
    )
    with caplog.at_level(logging.WARNING):
        reconciler, settled, slept, changes = asyncio.run(
            _reconcile([_pending(1), _pending(2, "0.5")], lookup)
        )
    assert settled == [(_pending(1), D("0"))]
    assert lookup.calls.count("gen-1") == 3 and lookup.calls.count("gen-2") == len(DEFAULT_WAITS_S)
    assert slept == list(DEFAULT_WAITS_S)  # 1, 2, 4, 8, 16, 32: about a minute in all
    assert reconciler.given_up == [_pending(2, "0.5")] and reconciler.outstanding == 0
    assert (
        "gen-2: could not settle its cost from /generation after 6 tries (not found)" in caplog.text
    )
    assert "stays counted at its worst case, $0.5" in caplog.text
    assert changes == [1, 1]  # gen-1 settled after 1+2+4 s, gen-2 given up after 63 s


def test_an_unreadable_answer_is_given_up_at_once(caplog: pytest.LogCaptureFixture) -> None:
    lookup = Script({"gen-1": ["HTTP 401"]})
    with caplog.at_level(logging.WARNING):
        reconciler, settled, slept, _ = asyncio.run(_reconcile([_pending(1)], lookup))
    assert settled == [] and lookup.calls == ["gen-1"] and slept == [1.0]
    assert reconciler.given_up == [_pending(1)] and "after 1 tries (HTTP 401)" in caplog.text


def test_attempts_of_an_earlier_run_are_looked_up_at_once_in_batches() -> None:
    items = [_pending(n) for n in range(PARALLEL_LOOKUPS + 3)]
    lookup = Script({p.generation_id: [D("0.001")] for p in items})
    reconciler, settled, slept, changes = asyncio.run(_reconcile(items, lookup, now=True))
    assert slept == [] and len(settled) == len(items) and reconciler.settled == len(items)
    assert changes == [PARALLEL_LOOKUPS, len(items)]  # one change per batch


def test_a_reconciler_with_nothing_to_do_ends_when_finished() -> None:
    reconciler, settled, slept, changes = asyncio.run(_reconcile([], Script({})))
    assert (settled, slept, changes, reconciler.outstanding) == ([], [], [], 0)


# -- in a run, on the fake server ----------------------------------------------------------------


def _run(tmp: Path, fake: Any, clock: ManualClock, **options: Any) -> Any:
    async def sleep(seconds: float) -> None:
        clock.advance(seconds)  # the run's waits move the fake's time: its lag passes
        await asyncio.sleep(0)

    options.setdefault("max_tokens", 100)
    return asyncio.run(
        generate(
            tmp / "prompts.jsonl",
            policy=POLICY,
            out=tmp / "out.jsonl",
            base_url=fake.base_url,
            sleep=sleep,
            clock=clock.now,
            backoff=Backoff(wait_initial_s=1, wait_max_s=30, wait_jitter_s=0, attempts=6),
            **options,
        )
    )


def test_answers_without_cost_are_settled_through_the_lag(tmp_path: Path) -> None:
    """A body whose choice carries an error has no ``usage.cost``: counted at the worst case, then
    settled from /generation once its 4 s lag has passed (the fake answers 404 until then)."""
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(30))
    clock = ManualClock()
    with serve(speed=0, seed=3, clock=clock, generation_lag_s=4, faults="choice_error=0.3") as fake:
        summary = _run(tmp_path, fake, clock, budget_usd=1)
        settled = journal_reconciled(tmp_path / "out.jsonl.ledger")
        errors = fake.ledger.errors.get("choice_error", 0)
        assert errors > 0 and summary.reconciled == len(settled) == errors
        assert set(settled.values()) == {D(0)}  # an error is never billed
        assert summary.possibly_billed_usd == 0 and summary.unsettleable == 0
        assert summary.reconciled_back_usd > 0
        # what the client counts is what the fake billed, to the last digit
        assert summary.spent_usd == fake.ledger.total_usd
        out = records(tmp_path / "out.jsonl")
        assert sorted(r["id"] for r in out) == sorted(f"r{i}" for i in range(30))
    replay = replay_journal(tmp_path / "out.jsonl.ledger")
    assert replay.spent_usd == fake.ledger.total_usd and replay.reconciled == errors


def test_a_generation_never_found_stays_at_its_worst_case(tmp_path: Path) -> None:
    """A lag longer than the reconciler's minute: it gives up; the worst case stays spent, the
    summary says so, and the next start settles it."""
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(3))
    clock = ManualClock()
    with serve(
        speed=0, seed=4, clock=clock, generation_lag_s=3600, faults="choice_error=@1"
    ) as fake:
        summary = _run(tmp_path, fake, clock, budget_usd=1)
        assert summary.reconciled == 0 and summary.possibly_billed_usd > 0
        assert summary.spent_usd == fake.ledger.total_usd + summary.possibly_billed_usd
        assert "possibly billed (cost unknown, counted at the worst case)" in render_result(summary)
        # issue 30 item 5: the give-up says how much is unsettled and that a rerun settles it
        given_up = (
            f"1 attempt(s) could not be settled from /generation in this run: "
            f"${summary.possibly_billed_usd:.6f} stays counted at the worst case"
        )
        assert any(given_up in w and "rerun the same command" in w for w in summary.warnings)
        clock.advance(3600)
        again = _run(tmp_path, fake, clock, budget_usd=1)
        assert again.reconciled_before == 1 and again.possibly_billed_before_usd == 0
        assert again.reconciled_before_back_usd == summary.possibly_billed_usd
        assert again.spent_total_usd == fake.ledger.total_usd
    lines = [json.loads(x) for x in (tmp_path / "out.jsonl.ledger").read_text().splitlines()]
    assert [D(x["cost_usd"]) for x in lines if "reconciled" in x] == [0]


def test_what_generation_answers_is_read_as_a_cost_a_retry_or_a_reason() -> None:
    from openrouter_probe.run.send.transport import read_generation

    body = json.dumps({"data": {"id": "gen-1", "total_cost": 0.00045364, "usage": 0.00045364}})
    assert read_generation(200, body.encode()) == D("0.00045364")
    assert read_generation(200, b'{"data":{"total_cost":0}}') == 0
    for status in (404, 429, 500, 503):  # not there yet, or the server is busy: try again
        assert (
            read_generation(status, b'{"error":{"message":"Generation gen-1 not found"}}') is None
        )
    assert read_generation(401, b"{}") == "HTTP 401"
    assert read_generation(200, b"<html>") == "not a /generation body"
    assert read_generation(200, b'{"data":null}') == "not a /generation body"
    assert read_generation(200, b'{"data":{"id":"gen-1"}}') == "no total_cost"
    assert read_generation(200, b'{"data":{"total_cost":"n/a"}}') == "total_cost is not a cost"
    assert read_generation(200, b'{"data":{"total_cost":-1}}') == "total_cost is not a cost"

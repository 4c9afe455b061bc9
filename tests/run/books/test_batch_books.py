"""Batch mode's claims and plan journal (``run.books.batch_books``): a line an earlier run's open batch
holds is a claim on its row, whose worst case moves to this run's attempt once, through the books,
and comes back when no attempt carries it.

Each case builds the earlier run's journal with ``run.money.journal.Journal`` and reads it back with
``replay_journal``, as a resume does; the money is then checked in the cap, the counts and the
journal a second replay reads.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from openrouter_probe.run.books.batch_books import BatchClaims, BatchJournal, settlements
from openrouter_probe.run.books.books import Books
from openrouter_probe.run.money.journal import Journal
from openrouter_probe.run.money.replay import OpenBatch, replay_journal
from openrouter_probe.run.money.spend import Prices, SpendCap
from openrouter_probe.run.rows import PromptRow
from openrouter_probe.run.send.attempt import Attempt
from openrouter_probe.run.send.batch_plan import custom_id
from openrouter_probe.run.send.request import Request, dumps

WORST = Decimal("0.01")
ROW = "r1"


def _killed_batch(journal: Path) -> OpenBatch:
    """An earlier run that reserved and journaled row ``r1`` and planned its batch, then died."""
    with Journal(journal, run_id="earlier").open() as ledger:
        number = ledger.sent(dumps(ROW), WORST, dumps("A"))
        ledger.batch_plan(
            "p1", model="m", after=0, worst_usd=WORST, lines=[[custom_id(ROW), number]]
        )
        ledger.batch_id("earlier", "p1", "batch-1")
    (batch,) = replay_journal(journal).batches
    return batch


def _resumed(
    journal: Path, cap_usd: Decimal, on_change: Callable[[], None] = lambda: None
) -> tuple[Books, BatchClaims, Journal]:
    replay = replay_journal(journal)
    cap = SpendCap(cap_usd, spent_usd=replay.spent_usd, spent_by_dataset=replay.by_dataset)
    ledger = Journal(journal, run_id="now").open()
    claims = BatchClaims(ledger)
    claims.hold(replay.batches[0])
    books = Books(cap, datasets=["A"], journal=ledger, claims=claims, on_change=on_change)
    return books, claims, ledger


def _attempt(worst: Decimal) -> Attempt:
    request = Request(b"{}", 16, None, worst)  # type: ignore[arg-type]
    # no output price: no room for output past max_tokens (run.overshoot), the worst case alone
    return Attempt(request, Prices(Decimal(0), Decimal(0)), dumps(ROW), 60.0)


def _row() -> PromptRow:
    return PromptRow(ROW, "A", [{"role": "user", "content": "hi"}], {}, 1, 10)


def test_a_held_line_moves_its_worst_case_to_the_new_attempt_once(tmp_path: Path) -> None:
    journal = tmp_path / "out.jsonl.ledger"
    _killed_batch(journal)
    books, claims, ledger = _resumed(journal, cap_usd=WORST)
    cap = books.cap
    assert cap.spent_usd == WORST  # the killed batch filled the cap

    attempt = _attempt(WORST)
    assert books.reserve("A", attempt)  # it takes the line's worst case over: the cap fits it
    assert (cap.spent_usd, cap.reserved_usd) == (0, WORST)
    assert claims.claim(dumps(ROW)) is None  # held no more: taken over
    number = books.sent(_row(), attempt)
    # the move is in the OS with the attempt's own line, in one write: a kill lands before the
    # three lines or after them, never between (where the line would count twice)
    lines = journal.read_text().splitlines()
    header = next(i for i, x in enumerate(lines) if '"run":"now","started_utc"' in x)
    assert [next(iter(json.loads(x))) for x in lines[header + 1 :]] == [
        "sent",
        "reconciled",
        "batch_plan",
        "batch_id",
    ]
    move = claims.moved(ROW)
    assert move is not None and move.startswith("p1.")
    assert claims.moved(ROW) is None  # once
    assert (cap.spent_usd, cap.reserved_usd) == (0, WORST)  # the move changed no cap figure
    assert (books.counts.reconciled_before, books.counts.reconciled_before_back_usd) == (1, WORST)
    assert books.counts.possibly_billed_before_settled_usd == WORST
    ledger.close()

    replay = replay_journal(journal)
    # the earlier attempt settled to 0, the new one counts the worst case: once, not twice
    assert replay.spent_usd == WORST
    assert replay.reconciled == 1
    plans = {(b.run, b.plan): b for b in replay.batches}
    assert set(plans) == {("earlier", "p1"), ("now", move)}
    assert plans[("earlier", "p1")].lines == {}  # the line is the new attempt's alone
    moved = plans[("now", move)]
    assert moved.batch_id == "batch-1" and moved.count == 1
    assert moved.lines == {custom_id(ROW): (number, WORST, "A", ROW)}


def test_a_takeover_never_journaled_counts_the_line_again(tmp_path: Path) -> None:
    journal = tmp_path / "out.jsonl.ledger"
    _killed_batch(journal)
    books, claims, ledger = _resumed(journal, cap_usd=WORST)
    attempt = _attempt(WORST)
    assert books.reserve("A", attempt)
    books.cap.settle(WORST, None, "A")  # the attempt came back unbilled; the run stops
    (claim,) = claims.release()  # before the attempt that carries it was journaled
    assert (claim.reserved_usd, claim.dataset) == (WORST, "A")
    books.hand_back(claim.reserved_usd, claim.dataset)  # as the run does at Released
    assert (books.cap.spent_usd, books.cap.reserved_usd) == (WORST, 0)
    assert claims.moved(ROW) is None and claims.release() == []
    assert "batch_plan" not in journal.read_text().split('"run":"now"')[-1]
    ledger.close()


def test_a_takeover_fits_the_cap_even_past_its_datasets_share(tmp_path: Path) -> None:
    """The held line's answer is paid already: its row's dataset share (half a cap of 1.5 lines,
    less than the line) never locks it out; the cap does (the line fits it)."""
    journal = tmp_path / "out.jsonl.ledger"
    _killed_batch(journal)
    books, claims, ledger = _resumed(journal, cap_usd=WORST * 3 / 2)
    books.share(["A", "B"], {})
    assert books.cap.share_usd("A") is not None and books.cap.share_usd("A") < WORST
    assert books.reserve("A", _attempt(WORST))  # was: refused, a budget stop before the result
    assert (books.cap.spent_usd, books.cap.reserved_usd) == (0, WORST)
    assert claims.claim(dumps(ROW)) is None  # taken over
    ledger.close()


def test_a_takeover_that_does_not_fit_keeps_the_hold(tmp_path: Path) -> None:
    journal = tmp_path / "out.jsonl.ledger"
    _killed_batch(journal)
    books, claims, ledger = _resumed(journal, cap_usd=WORST)
    assert not books.reserve("A", _attempt(WORST * 2))  # dearer than the whole cap
    assert (books.cap.spent_usd, books.cap.reserved_usd) == (WORST, 0)
    claim = claims.claim(dumps(ROW))  # a later attempt may claim it
    assert claim is not None and (claim.reserved_usd, claim.dataset) == (WORST, "A")
    assert claim.earlier.run == "earlier" and not claim.known
    ledger.close()


def test_an_earlier_batchs_served_lines_settle_through_the_books(tmp_path: Path) -> None:
    journal = tmp_path / "out.jsonl.ledger"
    batch = _killed_batch(journal)
    changes: list[Any] = []
    books, _, ledger = _resumed(journal, cap_usd=WORST, on_change=lambda: changes.append(1))
    served = {custom_id(ROW): Decimal("0.004"), "not-a-line": WORST}
    for pending, cost in settlements(batch, served):  # as the run does at SettledEarlier
        books.reconciled(pending, cost)
    assert books.cap.spent_usd == Decimal("0.004")
    assert books.counts.reconciled_before_back_usd == Decimal("0.006") and changes == [1]
    ledger.close()
    assert replay_journal(journal).spent_usd == Decimal("0.004")


def test_the_senders_events_are_journaled_by_the_run(tmp_path: Path) -> None:
    """The batch sender reports events (``run.send.batch_plan``); ``BatchJournal.record`` journals the
    plan events as the plan journal's lines, holds the claims, and answers a claim with the plan
    of the move."""
    from openrouter_probe.run.send.batch_plan import Claimed, Closed, Held, Planned, Said, Submitted

    journal = tmp_path / "out.jsonl.ledger"
    earlier = _killed_batch(journal)
    replay = replay_journal(journal)
    cap = SpendCap(WORST, spent_usd=replay.spent_usd, spent_by_dataset=replay.by_dataset)
    ledger = Journal(journal, run_id="now").open()
    claims = BatchClaims(ledger)
    books = Books(cap, datasets=["A"], journal=ledger, claims=claims)
    record = BatchJournal(ledger, claims).record
    assert record(Held(earlier)) is None
    attempt = _attempt(WORST)
    assert books.reserve("A", attempt)  # the held line's worst case, taken over
    number = books.sent(_row(), attempt)
    move = record(Claimed(ROW))
    assert move is not None and move.startswith("p1.")
    record(Planned("p2", model="m", after=7, worst_usd=WORST, lines=[["c2", number]]))
    record(Submitted(None, "p2", "batch-2"))
    record(Closed(None, "p2", "completed"))
    record(Closed(None, move, "completed"))
    with pytest.raises(TypeError):
        record(Said("a money event is the books'"))
    ledger.close()
    plans = {(b.run, b.plan) for b in replay_journal(journal).batches}
    assert plans == {("earlier", "p1")}  # p2 and the move closed; the earlier plan stays open


def test_the_batch_sender_holds_no_books() -> None:
    """The sender seam: the batch sender's modules never name the books, and the sender itself
    not the run's side of batch mode either: it reports events, the run journals them. The books
    know the claims (``run.books.batch_books.BatchClaims``), not the sender."""
    import ast

    import openrouter_probe.run as run

    folder = Path(run.__file__).parent

    def names(module: str) -> set[str]:
        tree = ast.parse((folder / f"{module}.py").read_text())
        found = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                found |= {f"{node.module}.{alias.name}" for alias in node.names}
        return found

    for module in ("send/batch_sender", "send/batch_watch", "send/batch_plan", "books/batch_books"):
        found = names(module)
        assert "Books" not in found, module
        # a claim is batch_books' own (batch_books.Claim): nothing of the books is imported
        assert not {n for n in found if n.startswith("openrouter_probe.run.books.books.")}, module
    for module in ("send/batch_sender", "send/batch_watch", "send/batch_plan"):
        # the sender's room sits below the books' (tests/project/test_module_layout.py): no
        # reference
        assert not {n for n in names(module) if n.startswith("openrouter_probe.run.books")}, module
    of_batches = {n for n in names("books/books") if "batch" in n.lower()}
    assert of_batches == {"BatchClaims", "openrouter_probe.run.books.batch_books.BatchClaims"}

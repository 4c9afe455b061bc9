"""A reservation the dollar window refuses (``Books.reserve``): refused with nothing reserved,
and said (``window_full``) so that the queues (``RowQueues.pick``) wait at once instead of asking
the window the same question again for a loan or a second pick (a loan holds the same dollars in
flight)."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from openrouter_probe.run.books.books import Books
from openrouter_probe.run.config import RunPlan
from openrouter_probe.run.money.journal import Journal
from openrouter_probe.run.money.limit import DollarWindow
from openrouter_probe.run.money.spend import Prices, SpendCap
from openrouter_probe.run.rows import PromptRow
from openrouter_probe.run.schedule.queues import Idle, RowQueues
from openrouter_probe.run.send.attempt import Attempt
from openrouter_probe.run.send.request import RequestBuilder

_PRICES = Prices(Decimal("0.0000006"), Decimal("0.000003"))


class _Counted(DollarWindow):
    asked = 0

    def admits(self, held_usd: Decimal, held: int, worst_usd: Decimal) -> bool:
        self.asked += 1
        return super().admits(held_usd, held, worst_usd)


def test_a_reservation_the_window_refuses_asks_it_once(tmp_path: Path) -> None:
    row = PromptRow("r1", "d", [{"role": "user", "content": "q"}], {"max_tokens": 100}, 1)
    builder = RequestBuilder(model="m", provider_json="{}")

    def attempt() -> Attempt:
        return Attempt(builder.build(row, _PRICES), _PRICES, '"r1"', 60.0)

    window = _Counted(start_requests=1)  # one request's worst case: the second waits
    with Journal(tmp_path / "out.jsonl.ledger") as journal:
        books = Books(SpendCap(Decimal(1)), datasets=["d"], journal=journal, window=window)
        first, second = attempt(), attempt()
        assert books.reserve("d", first) and not books.window_full
        assert first.overshoot_usd > books.overshoot.extra_usd(100, _PRICES.output_usd_per_token)
        asked = window.asked
        for borrow in (False, True):
            assert not books.reserve("d", second, borrow=borrow)
            assert books.window_full
            assert window.asked == asked + 1  # neither the margin nor a loan asks it again
            asked = window.asked
        # refused at the margin, as the first wave's last try leaves it
        assert second.overshoot_usd == books.overshoot.extra_usd(100, _PRICES.output_usd_per_token)
        assert books.cap.in_flight == 1 and books.cap.reserved_usd == first.worst
        books.cap.settle(first.worst, Decimal(0), "d", held_usd=first.request.worst_usd)
        assert books.reserve("d", second) and not books.window_full  # alone, it goes


def _queues(books: Books, datasets: list[str], tmp_path: Path) -> RowQueues:
    rows = [
        PromptRow(f"{d}{i}", d, [{"role": "user", "content": "q"}], {"max_tokens": 100}, i)
        for d in datasets
        for i in range(2)
    ]
    return RowQueues(
        rows,
        books=books,
        builder=RequestBuilder(model="m", provider_json="{}"),
        prices=_PRICES,
        options=RunPlan(command="generate", out=tmp_path / "out.jsonl"),
        weights={},
        on_close=lambda: None,
    )


@pytest.mark.parametrize(("datasets", "most"), [(["d"], 1), (["d", "e"], 2)])
def test_a_pick_the_window_refuses_waits_without_asking_again(
    datasets: list[str], most: int, tmp_path: Path
) -> None:
    window = _Counted(start_requests=1)  # one request's worst case: the second waits
    with Journal(tmp_path / "out.jsonl.ledger") as journal:
        books = Books(SpendCap(Decimal(1)), datasets=datasets, journal=journal, window=window)
        queues = _queues(books, datasets, tmp_path)
        picked = queues.pick(10)
        assert not isinstance(picked, Idle)
        asked = window.asked
        assert queues.pick(10) is Idle.WAIT
        # before, the pick asked the window the same question three times (the row, its
        # margin, a loan): once per dataset now, nothing reserved, the row kept
        assert 1 <= window.asked - asked <= most
        assert books.cap.in_flight == 1 and books.cap.reserved_usd == picked[1].worst
        assert sum(len(q) for q in queues.queues.values()) == 2 * len(datasets) - 1

"""A reservation the dollar window refuses (``Books.reserve``): refused once, with nothing
reserved and nothing else tried (the margin in place of the first wave's room, or a loan, holds
the same dollars in flight), and said (``window_full``) so that the scheduler waits at once."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

from openrouter_probe.run.books.books import Books
from openrouter_probe.run.money.journal import Journal
from openrouter_probe.run.money.limit import DollarWindow
from openrouter_probe.run.money.spend import Prices, SpendCap
from openrouter_probe.run.rows import PromptRow
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

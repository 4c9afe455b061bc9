"""The fake account's in-flight books (``AccountLimits``): what is held over the server's clock."""

from __future__ import annotations

from decimal import Decimal

import pytest

from openrouter_probe.fake import account
from openrouter_probe.fake.account import AccountLimits


def test_the_books_integrate_what_is_held_over_time_settling_costs_leaving_at_their_time() -> None:
    limits = AccountLimits(in_flight_usd=Decimal("1.0"), settle_s=2.0)
    limits.hold(Decimal("0.4"), 100.0)  # 0.4 held from t=100
    limits.hold(Decimal("0.4"), 101.0)  # 0.8 from t=101
    assert limits.refuse(Decimal("0.4"), balance_usd=None, now=103.0) is not None
    assert limits.first_refusal_s == 103.0
    # the first finishes at 104 (cost 0.1, settling until 106): 0.4 + 0.1 held from 104
    limits.release(Decimal("0.4"), Decimal("0.1"), 104.0)
    limits.release(Decimal("0.4"), Decimal("0.3"), 105.0)  # 0.1 + 0.3 settling from 105
    limits.hold(Decimal("0.2"), 107.0)  # the 0.1 left at 106 (0.3 to 107), the 0.3 at 107
    assert limits.holding(108.0) == Decimal("0.2")
    area = 0.8 * 1 + 0.5 * 1 + 0.4 * 1 + 0.3 * 1  # 103..107
    assert limits.held_mean_usd(103.0, 107.0) == pytest.approx(area / 4)
    assert limits.held_mean_usd(100.0, 102.0) == pytest.approx((0.4 + 0.8) / 2)
    assert limits.held_mean_usd(106.5, 108.0) == pytest.approx((0.3 * 0.5 + 0.2 * 1) / 1.5)
    with pytest.raises(ValueError, match="no mean"):
        limits.held_mean_usd(99.0, 99.0)


def test_the_history_of_what_is_held_is_a_bounded_tail(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(account, "HISTORY", 4)
    limits = AccountLimits(in_flight_usd=Decimal(1))
    for second in range(6):  # twelve changes: the books keep the last four
        limits.hold(Decimal("0.5"), float(second))
        limits.release(Decimal("0.5"), Decimal(0), second + 0.5)
    assert len(limits.history) == 4 and limits.history[0][0] == 4.0
    assert limits.held_mean_usd(4.0, 6.0) == pytest.approx(0.25)  # $0.5 half of the time
    with pytest.raises(ValueError, match="last 4 changes"):
        limits.held_mean_usd(0.0, 6.0)

"""How much may be in flight: requests (``AdaptiveLimit``, learned from 429 storms) and dollars
(``DollarWindow``, learned from OpenRouter's in-flight 402s).

Since 2026 OpenRouter holds each paid request's estimated cost while it runs, and refuses a request
that would take the held total past the account's in-flight budget (a fraction of the credit
balance; OPENROUTER.md 18) with a 402 ``in_flight_budget_exhausted`` and ``Retry-After``. The budget
is not published, so the run learns it: a request starts only while the worst cases in flight plus
its own fit the dollar window. A run's window opens at ``START_REQUESTS`` requests' worst case
(``start_requests``; ``None`` keeps it open until the first refusal), growing by each
answered request's worst case until the first refusal (doubling per round trip, as TCP's slow
start), then shrinks ×0.7 on a refusal (at most once per round trip: a window's worth of answers
between two decreases, so that one burst of refusals is one decrease) and grows back by about one
request's worst case per round trip. It never grows past twice the most ever held, so a window that
does not bind (no in-flight budget; the request limit binds first) stays near what was held.
A request alone is always let go: the window binds only with something else in flight.
The window counts what OpenRouter holds: each request's input and ``max_tokens`` at the dearest
admitted prices (``Request.worst_usd``; ``SpendCap.held_usd`` in flight), not the room the cap keeps
past ``max_tokens`` (``run.books.overshoot``): that room changes as the run learns, OpenRouter's hold
does not.
"""

from __future__ import annotations

from decimal import Decimal

__all__ = ["START_REQUESTS", "AdaptiveLimit", "DollarWindow"]

#: The dollar window opens at this many requests' worst case (the first request's).
START_REQUESTS = 16
_ZERO = Decimal(0)
_SHRINK = Decimal("0.7")


class AdaptiveLimit:
    """How many requests may be in flight: ``maximum`` at first, less after 429 storms.

    Multiplicative decrease (×0.7, at most once per ``cooldown_s``) on a rate-limited answer;
    additive increase (+1 per ``limit`` successes, about one per round trip) otherwise.
    """

    def __init__(self, maximum: int, *, cooldown_s: float = 1.0) -> None:
        self.maximum = maximum
        self.limit = float(maximum)
        self.allowed = maximum  # int(limit), at least 1: read for every request
        self.cooldown_s = cooldown_s
        self._last_decrease = -1e9

    def on_rate_limited(self, now: float) -> None:
        if now - self._last_decrease >= self.cooldown_s:
            self.limit = max(1.0, self.limit * 0.7)
            self.allowed = max(1, int(self.limit))
            self._last_decrease = now

    def on_success(self) -> None:
        if self.limit < self.maximum:
            self.limit = min(float(self.maximum), self.limit + 1.0 / self.limit)
            self.allowed = max(1, int(self.limit))


class DollarWindow:
    """How many dollars of worst cases may be in flight (see the module).

    ``admits`` is asked before every reservation (``run.books.books.Books.reserve``), with what is held
    (the cap's ``reserved_usd``, its ``in_flight``); ``refused`` on an in-flight 402, with what the
    others still hold; ``on_success`` on every answer. ``most_held_usd`` and ``refusals`` are the
    summary's ("held in flight at most $X; N in-flight refusals").
    """

    def __init__(self, *, start_requests: int | None = None) -> None:
        self.start_requests = start_requests
        self.limit_usd: Decimal | None = None  # opened at the first request
        self.learned = False  # a refusal was seen: the slow start is over
        self.most_held_usd = _ZERO
        self.refusals = 0
        self.lone_in_a_row = 0  # refusals with nothing else in flight, since the last answer
        # one decrease per round trip: answers since the last one, and a window's worth of them
        self._answers = 0
        self._round_trip = 0

    def admits(self, held_usd: Decimal, held: int, worst_usd: Decimal) -> bool:
        """Whether a request of worst case ``worst_usd`` may start with ``held`` requests holding
        ``held_usd`` in flight (one alone always may)."""
        total = held_usd + worst_usd
        limit = self.limit_usd
        if limit is None:
            if self.start_requests is None:  # open until the first refusal
                if total > self.most_held_usd:
                    self.most_held_usd = total
                return True
            limit = self.limit_usd = worst_usd * self.start_requests
        if held and total > limit:
            return False
        if total > self.most_held_usd:
            self.most_held_usd = total
        return True

    def refused(self, others_usd: Decimal, others: int, worst_usd: Decimal) -> bool:
        """An in-flight 402 for a request of worst case ``worst_usd`` while ``others`` requests
        held ``others_usd``: shrink the window; return whether it was alone (nothing else held:
        one request larger than the in-flight budget, or recent costs still settling)."""
        self.refusals += 1
        self.learned = True
        if others == 0:
            self.lone_in_a_row += 1
            return True
        level = others_usd + worst_usd  # what OpenRouter would not hold
        if self.limit_usd is not None:
            level = min(level, self.limit_usd)
        if self._answers >= self._round_trip:
            self.limit_usd = max(worst_usd, level * _SHRINK)
            self._answers = 0
            self._round_trip = int(self.limit_usd / worst_usd)
        else:  # the same round trip: no second decrease, but never again above what was refused
            self.limit_usd = max(worst_usd, min(level - worst_usd, self.limit_usd or level))
        return False

    def on_success(self, worst_usd: Decimal) -> None:
        """An answer: grow by ``worst_usd`` before the first refusal, by about one request per
        round trip after; never past twice the most held."""
        self.lone_in_a_row = 0
        self._answers += 1
        limit = self.limit_usd
        if limit is None or limit <= 0:
            return
        ceiling = self.most_held_usd * 2
        if limit >= ceiling:
            return
        step = worst_usd if not self.learned else worst_usd * worst_usd / limit
        self.limit_usd = min(ceiling, limit + step)

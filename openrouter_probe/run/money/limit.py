"""How much may be in flight: requests (``AdaptiveLimit``, learned from 429 storms) and dollars
(``DollarWindow``, learned from OpenRouter's in-flight 402s).

Since 2026 OpenRouter holds each paid request's estimated cost while it runs, and refuses a request
that would take the held total past the account's in-flight budget (a fraction of the credit
balance; OPENROUTER.md 18) with a 402 ``in_flight_budget_exhausted`` and ``Retry-After``. The budget
is not published, so the run learns it: a request starts only while the worst cases in flight plus
its own fit the dollar window (a request alone always may). Where the window opens is
``WindowStart`` (``window_start``: a probe of ``START_REQUESTS`` requests, then what the account's
balance allows once OpenRouter admitted them; with the balance unread, a slow start; on a resume,
the journal's last ``window`` line); a refusal shrinks it ×0.7 at most once per round trip, and it
grows back by about one request's worst case per round trip, never past twice the most ever held.
The rules, their reasons and sources: docs/wire.md, "The dollars in flight". The window counts
what OpenRouter holds, each request's input and ``max_tokens`` at the dearest admitted prices
(``Request.worst_usd``), not the room the cap keeps past ``max_tokens`` (``run.books.overshoot``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal

from openrouter_probe.errors import Message
from openrouter_probe.run.money.journal import Journal

__all__ = ["START_REQUESTS", "AdaptiveLimit", "DollarWindow", "WindowStart", "window_start"]

#: The dollar window opens at this many requests' worst case (the first request's).
START_REQUESTS = 16
_ZERO = Decimal(0)
_SHRINK = Decimal("0.7")
_COOLDOWN_S = 1.0  # ``AdaptiveLimit``'s least time between two decreases


class AdaptiveLimit:
    """How many requests may be in flight: ``maximum`` at first, less after 429 storms.

    Multiplicative decrease (×0.7, at most once a second) on a rate-limited answer;
    additive increase (+1 per ``limit`` successes, about one per round trip) otherwise.
    """

    def __init__(self, maximum: int) -> None:
        self.maximum = maximum
        self.limit = float(maximum)
        self.allowed = maximum  # int(limit), at least 1: read for every request
        self._last_decrease = -1e9

    def on_rate_limited(self, now: float) -> None:
        if now - self._last_decrease >= _COOLDOWN_S:
            self.limit = max(1.0, self.limit * 0.7)
            self.allowed = max(1, int(self.limit))
            self._last_decrease = now

    def on_success(self) -> None:
        if self.limit < self.maximum:
            self.limit = min(float(self.maximum), self.limit + 1.0 / self.limit)
            self.allowed = max(1, int(self.limit))


class DollarWindow:
    """How many dollars of worst cases may be in flight (see the module).

    ``admits`` is asked before every reservation (``run.books.books.Books.reserve``), with what is
    held (the cap's ``reserved_usd``, its ``in_flight``); ``refused`` on an in-flight 402, with what
    the others still hold; ``on_success`` on every answer. ``most_held_usd`` and ``refusals`` are the
    summary's ("held in flight at most $X; N in-flight refusals").
    """

    def __init__(
        self,
        *,
        start_requests: int | None = None,
        start_usd: Decimal | None = None,
        learned: bool = False,
        then_usd: Decimal | None = None,
        most_usd: Decimal | None = None,
        on_learned: Callable[[Decimal], None] | None = None,
    ) -> None:
        self.on_learned = on_learned  # told the window after each decrease (the journal)
        self.start_requests = start_requests
        self.start_usd = start_usd
        self.most_usd = most_usd  # it never grows past this (the balance: more is never held)
        #: what the first answer opens the window at, when no refusal came before it
        self.then = then_usd
        self.limit_usd: Decimal | None = None  # opened at the first request
        self.learned = learned  # a refusal was seen (this run or the last): no slow start
        # the probe: requests let go while ``then`` waits, and how many of them were admitted
        self._probe = self._admitted = 0
        self._probe_usd = _ZERO  # the dearest of them
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
            if self.start_requests is None and self.start_usd is None:  # open until refused
                if total > self.most_held_usd:
                    self.most_held_usd = total
                return True
            limit = self._open(worst_usd)
        if held and total > limit:
            return False
        if total > self.most_held_usd:
            self.most_held_usd = total
        if self.then is not None:
            self._probe += 1
            self._probe_usd = max(self._probe_usd, worst_usd)
        return True

    def _open(self, worst_usd: Decimal) -> Decimal:
        """The window at the first request: the start's requests' worst case, or its dollars
        (the least of them when both are given; never below one request)."""
        limit = self.limit_usd = _least(self.start_requests, self.start_usd, worst_usd)
        if self.learned:  # a resume: a round trip's worth of answers before the next decrease
            self._round_trip = int(limit / worst_usd) if worst_usd > 0 else 0
        return limit

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
        if self.on_learned is not None:
            self.on_learned(self.limit_usd)
        return False

    def admitted(self) -> bool:
        """A request's 200 status came (before its answer): OpenRouter admitted it into the
        in-flight budget. Once every request of the probe is admitted and none was refused, the
        window opens at ``then`` (as on the first answer, for the probe's dearest request);
        whether it opened now."""
        if self.then is None or not self._probe:
            return False
        self._admitted += 1
        return self._admitted >= self._probe and self._open_then(self._probe_usd)

    def _open_then(self, worst_usd: Decimal) -> bool:
        """Open at ``then`` if the probe came back unrefused (once); whether it did."""
        then, self.then = self.then, None
        if then is None or self.learned:
            return False
        opened = max(then, worst_usd)
        if self.limit_usd is None or opened > self.limit_usd:
            self.limit_usd = opened
        return True

    def on_success(self, worst_usd: Decimal) -> None:
        """An answer: grow by ``worst_usd`` before the first refusal, by about one request per
        round trip after; never past twice the most held."""
        self.lone_in_a_row = 0
        self._answers += 1
        if self.then is not None and self._open_then(worst_usd):  # the probe, unrefused
            return
        limit = self.limit_usd
        if limit is None or limit <= 0:
            return
        ceiling = self.most_held_usd * 2
        if self.most_usd is not None:
            ceiling = min(ceiling, max(self.most_usd, worst_usd))
        if limit >= ceiling:
            return
        step = worst_usd if not self.learned else worst_usd * worst_usd / limit
        self.limit_usd = min(ceiling, limit + step)


def _least(requests: int | None, usd: Decimal | None, worst_usd: Decimal) -> Decimal:
    """The least of ``requests`` requests' worst case and ``usd`` (those given), never below one
    request."""
    starts = [] if usd is None else [usd]
    if requests is not None:
        starts.append(worst_usd * requests)
    return max([worst_usd, min(starts)] if starts else [worst_usd])


@dataclass(frozen=True)
class WindowStart:
    """Where a run's dollar window opens (``window``), and why (``why``: the dry run and the
    summary say it). ``requests``/``usd``: that many requests' worst case (the first request's),
    at most that many dollars; ``then_usd``: where it opens once the first requests are admitted
    with no in-flight 402; ``most_usd``: it never grows past (the balance);
    ``learned``: a window an earlier run learned."""

    requests: int | None = START_REQUESTS
    usd: Decimal | None = None
    then_usd: Decimal | None = None
    most_usd: Decimal | None = None
    learned: bool = False
    why: str = ""

    def window(self, journal: Journal | None = None) -> DollarWindow:
        """A run's dollar window opening here, journaled after each decrease in ``journal``
        (``Journal.window``)."""
        on_learned = None if journal is None else journal.window
        return DollarWindow(
            start_requests=self.requests,
            start_usd=self.usd,
            learned=self.learned,
            then_usd=self.then_usd,
            most_usd=self.most_usd,
            on_learned=on_learned,
        )


def window_start(
    *,
    concurrency: int,
    worst_usd: Decimal,
    balance_usd: Decimal | None,
    resumed_usd: Decimal | None = None,
    unread: str = "",
) -> WindowStart:
    """Where the window opens for ``concurrency`` requests of worst case ``worst_usd`` each:
    where the last run's ended (``resumed_usd``, from the journal); else a first round trip at
    ``START_REQUESTS`` requests, then ``concurrency`` requests when ``balance_usd`` (what the
    account has left) covers them, the balance when it covers fewer; else (the balance unread:
    ``unread`` says why) the slow start from ``START_REQUESTS``."""
    if resumed_usd is not None and resumed_usd > 0:
        return WindowStart(
            requests=None,
            usd=resumed_usd,
            learned=True,
            why=Message(
                "window-resumed",
                "in flight: starts at ${window:,.4f}, where the last run's in-flight window "
                "ended (about {requests:,d} requests)",
                window=resumed_usd,
                requests=_requests(resumed_usd, worst_usd),
            ),
        )
    if balance_usd is None:
        return WindowStart(
            why=Message(
                "window-slow-start",
                "in flight: starts at {start:d} requests' worst case and doubles per round trip "
                "until OpenRouter's first in-flight 402 ({unread:s})",
                start=START_REQUESTS,
                unread=unread or "the account's balance is not known",
            )
        )
    balance = max(balance_usd, _ZERO)
    covers = _requests(balance, worst_usd)
    if covers >= concurrency:
        return WindowStart(
            usd=balance,
            # twice: rows dearer than the first still fill it (``--concurrency`` holds the count)
            then_usd=min(balance, worst_usd * concurrency * 2),
            most_usd=balance,
            why=Message(
                "window-at-concurrency",
                "in flight: {start:d} requests, then {concurrency=} once OpenRouter admits them "
                "with no in-flight 402: the balance, ${balance:,.2f}, covers that many requests' "
                "worst case (${worst:,.6f} each)",
                start=min(START_REQUESTS, concurrency),
                concurrency=concurrency,
                balance=balance_usd,
                worst=worst_usd,
            ),
        )
    return WindowStart(
        usd=balance,
        then_usd=balance,
        most_usd=balance,
        why=Message(
            "window-at-balance",
            "in flight: {start:,d} requests, then what the balance, ${balance:,.4f}, covers "
            "once OpenRouter admits them with no in-flight 402: {covers:,d} of {concurrency=} "
            "requests' worst case (${worst:,.6f} each)",
            start=min(START_REQUESTS, covers),
            balance=balance_usd,
            covers=covers,
            concurrency=concurrency,
            worst=worst_usd,
        ),
    )


def _requests(usd: Decimal, worst_usd: Decimal) -> int:
    """How many requests of worst case ``worst_usd`` ``usd`` covers."""
    if worst_usd <= 0:
        return 1_000_000_000 if usd > 0 else 0
    return max(0, int(usd / worst_usd))

"""How many requests may be in flight (``AdaptiveLimit``): the scheduler's one knob on 429 storms."""

from __future__ import annotations

__all__ = ["AdaptiveLimit"]


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

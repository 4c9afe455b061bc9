"""Prices as OpenRouter applies them: ``overrides`` for the prompt size and the time of day.

An endpoint's top-level prices are the default-condition prices; ``pricing.overrides`` lists
conditional prices (OpenRouter's API spec; ``api.schema.PricingOverride`` says when one applies).
A missing ``utc_end`` is the end of the day, a missing ``utc_start`` its beginning; a request whose
UTC weekday is not known (``at`` a bare ``time``, or no ``at``) gets no ``utc_days`` entry. Later
entries win per key; keys an entry omits inherit the base price. ``effective_pricing`` resolves
them into a plain ``Pricing`` (no ``overrides`` left), so every price helper works on the result;
``price_windows`` cuts the day into the windows over which the prices are constant. The budget
planner, the fake server and the generator all call these two; nothing else reads ``overrides``.

Example::

    from datetime import time
    from openrouter_probe.rules.pricing import effective_pricing, price_windows

    night = effective_pricing(endpoint.pricing, prompt_tokens=500, at=time(2, 0))
    night.completion_usd_per_m
    [(w.start_hhmm, w.end_hhmm) for w in price_windows(endpoint.pricing, prompt_tokens=500)]
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, time
from itertools import pairwise
from typing import Any

from openrouter_probe.api.schema import Pricing, PricingOverride

__all__ = ["PriceWindow", "effective_pricing", "price_windows"]

_CONDITIONS = ("min_prompt_tokens", "utc_start", "utc_end", "utc_days")
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_DAY_MIN = 24 * 60


@dataclass(frozen=True)
class PriceWindow:
    """A UTC window ``[start, end)`` (HHMM; ``start > end`` wraps midnight) and its prices."""

    start_hhmm: int
    end_hhmm: int
    pricing: Pricing

    @property
    def label(self) -> str:
        """The window as ``HH:MM-HH:MM UTC``."""
        return f"{_clock(self.start_hhmm)}-{_clock(self.end_hhmm)} UTC"


def _clock(hhmm: int) -> str:
    return f"{hhmm // 100:02d}:{hhmm % 100:02d}"


def _minutes(hhmm: Any) -> int | None:
    """An HHMM clock number as minutes after midnight; ``None`` when it is not a clock time."""
    if isinstance(hhmm, bool) or not isinstance(hhmm, int):
        return None
    hours, minutes = divmod(hhmm, 100)
    if hhmm < 0 or minutes > 59 or hours > 24 or (hours == 24 and minutes):
        return None
    return hours * 60 + minutes


def _window(entry: PricingOverride) -> tuple[int, int] | None:
    """The entry's window in minutes, or ``None`` when it has no time condition."""
    if entry.utc_start is None and entry.utc_end is None:
        return None
    start = 0 if entry.utc_start is None else _minutes(entry.utc_start)
    end = _DAY_MIN if entry.utc_end is None else _minutes(entry.utc_end)
    if start is None or end is None:
        return (0, 0)  # not a clock time: an empty window, so the entry never applies
    return (start, end)


def _in_window(minute: int, window: tuple[int, int]) -> bool:
    start, end = window
    if start <= end:
        return start <= minute < end
    return minute >= start or minute < end  # wraps midnight


def _applies(
    entry: PricingOverride, prompt_tokens: int | None, minute: int | None, day: str | None
) -> bool:
    if entry.min_prompt_tokens is not None and (
        prompt_tokens is None or prompt_tokens <= entry.min_prompt_tokens
    ):
        return False
    if entry.utc_days and (day is None or day not in {str(d).lower() for d in entry.utc_days}):
        return False
    window = _window(entry)
    return window is None or (minute is not None and _in_window(minute, window))


def _prices(entry: PricingOverride) -> dict[str, Any]:
    """The price keys an override sets (everything but its conditions)."""
    return {k: v for k, v in (entry.model_extra or {}).items() if k not in _CONDITIONS}


def effective_pricing(
    pricing: Pricing, *, prompt_tokens: int | None = None, at: time | datetime | None = None
) -> Pricing:
    """Return ``pricing`` with the overrides that apply to a request resolved into its prices.

    ``prompt_tokens`` is the request's prompt size (tiers need it: without it no tier applies);
    ``at`` is the time of the request (a ``datetime`` is converted to UTC, a ``time`` is taken as
    UTC; without it no time window applies, which gives the default-condition prices; only a
    ``datetime`` names the weekday that ``utc_days`` entries need). The result has no ``overrides``.
    """
    base = pricing.to_json_dict()
    base.pop("overrides", None)
    if isinstance(at, datetime) and at.tzinfo is not None:
        at = at.astimezone(UTC)
    minute = None if at is None else at.hour * 60 + at.minute
    day = _WEEKDAYS[at.weekday()] if isinstance(at, datetime) else None
    for entry in pricing.overrides or ():
        if _applies(entry, prompt_tokens, minute, day):
            base.update(_prices(entry))
    return Pricing.model_validate(base)


def price_windows(pricing: Pricing, *, prompt_tokens: int | None = None) -> list[PriceWindow]:
    """Cut the UTC day into windows of constant prices for a request of ``prompt_tokens``.

    One window (``00:00-24:00``) when no override depends on the time of day. Neighbouring windows
    with the same prices are merged, across midnight too. Entries bound to weekdays (``utc_days``)
    are left out: the windows are those of a day no such entry names.
    """
    cuts = {0, _DAY_MIN}
    for entry in pricing.overrides or ():
        window = _window(entry)
        if window is not None:
            cuts.update(window)  # clock times: 0..1440 minutes
    bounds = sorted(cuts)
    pieces: list[list[Any]] = []
    for start, end in pairwise(bounds):
        priced = effective_pricing(
            pricing, prompt_tokens=prompt_tokens, at=time(start // 60, start % 60)
        )
        if pieces and pieces[-1][2].to_json_dict() == priced.to_json_dict():
            pieces[-1][1] = end
        else:
            pieces.append([start, end, priced])
    if len(pieces) > 1 and pieces[0][2].to_json_dict() == pieces[-1][2].to_json_dict():
        last = pieces.pop()
        pieces[0][0] = last[0]  # the last window runs on past midnight into the first
    return [PriceWindow(_hhmm(s), _hhmm(e), p) for s, e, p in pieces]


def _hhmm(minute: int) -> int:
    return (minute // 60) * 100 + minute % 60

"""The fake server's clock: real time, or a manual clock tests move by hand.

Every wait of the server (latency, throughput pacing, slow first bytes, stalls, the generation
lag) and every time it reads (``created``, price overrides' UTC windows) goes through one clock, so
a test with a ``ManualClock`` runs the whole time model without sleeping for real.
"""

from __future__ import annotations

import asyncio
import threading
import time
from datetime import UTC, datetime
from typing import Protocol

__all__ = ["Clock", "ManualClock", "SystemClock"]


class Clock(Protocol):
    """The time the fake server reads and waits on: ``SystemClock`` or ``ManualClock``."""

    def now(self) -> float:
        """Seconds since the epoch."""

    async def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` of this clock's time."""


class SystemClock:
    """Wall-clock time and real waits."""

    def now(self) -> float:
        return time.time()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


class ManualClock:
    """Virtual time that moves only when told to (``set``, ``advance``) or when the server waits:
    a wait advances the clock by its length at once, so a 30 s slow first byte takes no real time
    but shows in the generation's ``latency``."""

    def __init__(self, start: datetime | float = datetime(2026, 2, 1, 12, 0, tzinfo=UTC)) -> None:
        self._lock = threading.Lock()
        self._now = start.timestamp() if isinstance(start, datetime) else float(start)

    def now(self) -> float:
        with self._lock:
            return self._now

    def set(self, when: datetime | float) -> None:
        """Jump to ``when`` (a timezone-aware datetime or epoch seconds)."""
        with self._lock:
            self._now = when.timestamp() if isinstance(when, datetime) else float(when)

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._now += seconds

    async def sleep(self, seconds: float) -> None:
        self.advance(seconds)
        await asyncio.sleep(0)

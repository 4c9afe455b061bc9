"""A fake clock for tests that kill a client while its requests are in flight.

At ``speed=1`` on the system clock, "in flight" lasted as long as the endpoints' drawn latencies
(seconds of real time per test, and a kill that came late on a loaded machine found nothing in
flight). On a ``GatedClock`` every wait the fake makes (time to first token, generation, keep-alive
beats) holds until the test calls ``release()``, then passes at once as a ``ManualClock``'s does:
the requests stay in flight exactly until the test says, and no answer takes real time.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

from openrouter_probe.fake.clock import ManualClock


class GatedClock(ManualClock):
    """A ``ManualClock`` whose waits hold until ``release()`` (called from the test's thread).

    ``closes_when``: the gate stays open until this holds at one of the fake's waits (read on the
    fake's loop, e.g. ``lambda: len(fake.ledger) >= 100``), and only then closes: a run gets
    exactly so far, and no further, before the test acts on it."""

    def __init__(self, closes_when: Callable[[], bool] | None = None) -> None:
        super().__init__()
        self.closes_when = closes_when  # read at the fake's waits only
        self._gate = threading.Lock()
        self._closed = closes_when is None  # once closed, closed until release()
        self._released = False
        self._held: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []

    async def sleep(self, seconds: float) -> None:
        loop = asyncio.get_running_loop()
        with self._gate:
            if not self._closed and self.closes_when is not None and self.closes_when():
                self._closed = True
            held = loop.create_future() if self._closed and not self._released else None
            if held is not None:
                self._held.append((loop, held))
        if held is not None:
            await held
        await super().sleep(seconds)

    def release(self) -> None:
        """Let every held wait, and every later one, pass."""
        with self._gate:
            self._released = True
            held, self._held = self._held, []
        for loop, future in held:
            loop.call_soon_threadsafe(_open, future)


def _open(future: asyncio.Future[None]) -> None:
    if not future.done():  # a request the server cancelled is not waiting any more
        future.set_result(None)

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

from openrouter_probe.fake.clock import ManualClock


class GatedClock(ManualClock):
    """A ``ManualClock`` whose waits hold until ``release()`` (called from the test's thread)."""

    def __init__(self) -> None:
        super().__init__()
        self._gate = threading.Lock()
        self._open = False
        self._held: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []

    async def sleep(self, seconds: float) -> None:
        loop = asyncio.get_running_loop()
        with self._gate:
            held = None if self._open else loop.create_future()
            if held is not None:
                self._held.append((loop, held))
        if held is not None:
            await held
        await super().sleep(seconds)

    def release(self) -> None:
        """Let every held wait, and every later one, pass."""
        with self._gate:
            self._open = True
            held, self._held = self._held, []
        for loop, future in held:
            loop.call_soon_threadsafe(_open, future)


def _open(future: asyncio.Future[None]) -> None:
    if not future.done():  # a request the server cancelled is not waiting any more
        future.set_result(None)

"""What the workers of a run wait on: a change (money freed, a dataset closed), the pool's pause
for the key's own 429, a backoff wait, and the stop that cuts every wait short.

Workers waiting to take a request wait in a line (``turn``): a change wakes its first, which wakes
the next once it took one (``pass_turn``). What the first found when it took none, the others
would find too (taking looks at the run, not at the worker): the rest of the line sleeps on, so a
change costs a wake-up per request it lets go, not one per worker waiting.

All waits use the injected ``sleep`` (tests never wait) and end at once when the run stops; the
stop keeps why (``reason``, ``message``): the first reason given, until the run's end says another
(``why``). A run's parts made before its scheduler (a failed write's stop, the batch sender) stop
it here.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable

from openrouter_probe.run.stop import StopReason

__all__ = ["Waits"]


class Waits:
    """The waits of one run's workers (see the module)."""

    def __init__(self, sleep: Callable[[float], Awaitable[None]]) -> None:
        self.sleep = sleep
        self.stopping = False
        self.reason = StopReason.DONE  # why the run stops (``DONE``: it has not)
        self.message = ""
        self.paused: asyncio.Future[None] | None = None  # open while the pool is paused
        self._waiters: list[asyncio.Future[None]] = []
        self._line: deque[asyncio.Future[None]] = deque()  # ``turn``'s, first in line first
        self._stopped: asyncio.Future[None] | None = None
        self.waiting = 0  # workers waiting in ``change`` or ``turn`` (for money, a close)

    @property
    def stopped(self) -> asyncio.Future[None]:
        """Done once the run stops (made in the running loop on first use)."""
        if self._stopped is None:
            self._stopped = asyncio.get_running_loop().create_future()
        return self._stopped

    def stop(self, reason: StopReason | None = None, message: str = "") -> None:
        """The run stops: every wait ends; ``reason`` (and ``message``) says why unless an
        earlier stop said it."""
        if reason is not None and not self.stopping:
            self.reason, self.message = reason, message
        self.stopping = True
        if not self.stopped.done():
            self.stopped.set_result(None)
        line, self._line = self._line, deque()
        for fut in line:
            if not fut.done():
                fut.set_result(None)
        self.notify()

    def why(self, reason: StopReason, message: str | None = None) -> None:
        """Why the run stops after all (a cancel, or what its end shows: the budget, a target)."""
        self.reason = reason
        if message is not None:
            self.message = message

    def notify(self) -> None:
        """Something changed (money, datasets, flight): wake every worker waiting for it in
        ``change``, and the first in ``turn``'s line."""
        waiters, self._waiters = self._waiters, []
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)
        self.pass_turn()

    def pass_turn(self) -> None:
        """Wake the first worker in ``turn``'s line (the one woken took a request: another
        may fit too)."""
        line = self._line
        while line:
            fut = line.popleft()
            if not fut.done():
                fut.set_result(None)
                return

    async def change(self) -> None:
        """Wait for the next ``notify`` (counted in ``waiting`` meanwhile)."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        self.waiting += 1
        try:
            await fut
        finally:
            self.waiting -= 1

    async def turn(self) -> None:
        """Wait in line for a ``notify`` to take a request (the module); a worker woken calls
        ``pass_turn`` once it took one."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._line.append(fut)
        self.waiting += 1
        try:
            await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                self.pass_turn()  # woken, then cancelled before it looked: the next one looks
            raise
        finally:
            self.waiting -= 1

    async def sleep_unless_stopped(self, seconds: float) -> None:
        """Sleep (the injected sleep) unless and until the run stops."""
        if seconds <= 0 or self.stopping:
            return
        sleeper = asyncio.ensure_future(self.sleep(seconds))
        try:
            await asyncio.wait({sleeper, self.stopped}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            sleeper.cancel()

    @property
    def is_paused(self) -> bool:
        return self.paused is not None and not self.paused.done()

    def pause(self, seconds: float) -> bool:
        """Pause the pool for ``seconds`` unless it is paused already; return whether it began."""
        if self.is_paused:
            return False
        self.paused = asyncio.ensure_future(self.sleep_unless_stopped(seconds))
        return True

    async def until_resumed(self) -> None:
        """Wait while the pool is paused (the pause's own task does the sleeping)."""
        if self.paused is not None and not self.paused.done():
            await asyncio.wait({self.paused})

"""The workers' waits (``run.schedule.waits``): the line of workers waiting to take a request wakes one per
change, the one woken wakes the next, the stop wakes them all."""

from __future__ import annotations

import asyncio

from openrouter_probe.run.schedule.waits import Waits


async def _no_sleep(seconds: float) -> None:
    return None


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def test_a_change_wakes_the_first_in_line_and_it_passes_the_turn() -> None:
    async def scenario() -> list[str]:
        waits = Waits(_no_sleep)
        woke: list[str] = []

        async def worker(name: str) -> None:
            await waits.turn()
            woke.append(name)

        tasks = [asyncio.ensure_future(worker(n)) for n in "abc"]
        await _settle()
        assert waits.waiting == 3
        waits.notify()
        await _settle()
        assert woke == ["a"]  # one per change, first in line first
        assert waits.waiting == 2
        waits.pass_turn()  # "a" took a request: the next looks
        await _settle()
        assert woke == ["a", "b"]
        waits.stop()  # the stop wakes the whole line
        await asyncio.gather(*tasks)
        return woke

    assert asyncio.run(scenario()) == ["a", "b", "c"]


def test_change_still_wakes_every_worker_waiting_in_it() -> None:
    async def scenario() -> int:
        waits = Waits(_no_sleep)
        tasks = [asyncio.ensure_future(waits.change()) for _ in range(4)]
        await _settle()
        waits.notify()
        await _settle()
        return sum(t.done() for t in tasks)

    assert asyncio.run(scenario()) == 4


def test_a_worker_cancelled_after_it_was_woken_passes_its_turn_on() -> None:
    async def scenario() -> list[str]:
        waits = Waits(_no_sleep)
        woke: list[str] = []

        async def worker(name: str) -> None:
            await waits.turn()
            woke.append(name)

        first = asyncio.ensure_future(worker("a"))
        second = asyncio.ensure_future(worker("b"))
        await _settle()
        waits.notify()  # "a" is woken ...
        first.cancel()  # ... and cancelled before it ran: "b" must not wait for another change
        await _settle()
        assert first.cancelled()
        await asyncio.wait_for(second, 1)
        return woke

    assert asyncio.run(scenario()) == ["b"]

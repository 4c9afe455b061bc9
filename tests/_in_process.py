"""The fake served on the calling thread's own event loop, for tests that post many requests one
at a time and read the answers.

``orp.fake.serve`` runs the fake in a thread: each sequential request then waits twice for the OS to
switch threads, which under load costs more than the request (3,500 posts took 25 s of wall time
for 8 s of CPU). Here the test's thread drives the loop itself: the same app, the same HTTP on
loopback, the same answers in the same order, with no thread to wait for.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from aiohttp.test_utils import TestClient, TestServer

from openrouter_probe.fake.app import FakeOpenRouter
from openrouter_probe.rules.snapshot import Snapshot

Post = Callable[[dict[str, Any]], dict[str, Any]]


@contextlib.contextmanager
def posting(snapshot: Snapshot, **options: Any) -> Iterator[Post]:
    """Yield ``post(body) -> answer``: one chat completion from a ``FakeOpenRouter(snapshot,
    **options)`` (``speed=0`` for no simulated latency), awaited before it returns; an answer
    other than 200 fails the test with its body."""
    fake = FakeOpenRouter(snapshot, **options)
    loop = asyncio.new_event_loop()
    client = TestClient(TestServer(fake.app()), loop=loop)
    loop.run_until_complete(client.start_server())

    async def one(body: dict[str, Any]) -> dict[str, Any]:
        headers = {"Authorization": "Bearer sk-fake"}
        async with client.post("/api/v1/chat/completions", json=body, headers=headers) as r:
            assert r.status == 200, await r.text()
            answer: dict[str, Any] = await r.json()
            return answer

    try:
        yield lambda body: loop.run_until_complete(one(body))
    finally:
        loop.run_until_complete(fake.cancel_all())
        loop.run_until_complete(client.close())
        loop.close()

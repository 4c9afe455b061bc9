"""Run the fake OpenRouter on loopback in a background thread: ``serve`` and ``FakeServer``.

The server's event loop runs in a daemon thread (``web.AppRunner`` + ``TCPSite``), so sync code, a
notebook or a test can start it with ``with serve(...) as fake:`` and talk to ``fake.base_url`` with
any HTTP client while ``fake.ledger`` shows what it billed.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator, Sequence
from typing import Any

from aiohttp import web

from openrouter_probe.errors import ConfigError
from openrouter_probe.fake.app import FakeOpenRouter
from openrouter_probe.fake.billing import Credit
from openrouter_probe.fake.clock import Clock
from openrouter_probe.fake.ledger import Ledger
from openrouter_probe.rules.snapshot import Snapshot

__all__ = ["FakeServer", "serve"]


class FakeServer:
    """A running fake OpenRouter: ``base_url`` for clients, ``ledger`` for the truth about spend."""

    def __init__(self, fake: FakeOpenRouter, host: str, port: int) -> None:
        self.fake = fake
        self.host = host
        self.port = port
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The server's root, ``http://127.0.0.1:PORT``."""
        return f"http://{self.host}:{self.port}"

    @property
    def base_url(self) -> str:
        """What ``OPENROUTER_BASE_URL`` (or the openai SDK's ``base_url``) should be."""
        return f"{self.url}/api/v1"

    @property
    def ledger(self) -> Ledger:
        return self.fake.ledger

    @property
    def credit(self) -> Credit:
        """The key's credit: ``limit_usd``, ``spent_usd`` and what requests in flight reserved."""
        return self.fake.credit

    @property
    def clock(self) -> Clock:
        return self.fake.clock

    def start(self) -> FakeServer:
        """Start serving in a daemon thread; return once the port is bound."""
        loop = self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name="fake-openrouter", daemon=True)
        self._thread.start()
        try:
            asyncio.run_coroutine_threadsafe(self._start(), loop).result()
        except Exception as exc:
            self.stop()
            raise ConfigError(f"cannot serve on {self.host}:{self.port}: {exc}") from exc
        return self

    def _run(self) -> None:
        assert self._loop is not None
        try:
            self._loop.run_forever()
        finally:
            self._loop.close()

    async def _start(self) -> None:
        runner = web.AppRunner(self.fake.app(), access_log=None, handle_signals=False)
        await runner.setup()
        site = web.TCPSite(runner, self.host, self.port, backlog=4096, reuse_address=True)
        await site.start()
        self._runner = runner
        if self.port == 0:
            # the port the system picked: the first listening address of the runner
            self.port = int(runner.addresses[0][1])

    async def _stop(self) -> None:
        await self.fake.cancel_all()
        if self._runner is not None:
            await self._runner.cleanup()

    def stop(self) -> None:
        """Stop serving: cancel requests in flight, close the port, end the thread."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None or not thread.is_alive():
            return
        asyncio.run_coroutine_threadsafe(self._stop(), loop).result(timeout=30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=30)

    def __enter__(self) -> FakeServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


@contextlib.contextmanager
def serve(
    snapshot: Snapshot | Sequence[Snapshot] | None = None,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    **options: Any,
) -> Iterator[FakeServer]:
    """Run a fake OpenRouter on loopback for the duration of a ``with`` block.

    ``snapshot`` defaults to the bundled Kimi K2.5 one; ``port=0`` picks a free port. ``options``
    are ``FakeOpenRouter``'s (``credit_usd``, ``faults``, ``seed``, ``speed``, ``degrade``, ...).

    Example::

        import openai
        import openrouter_probe as orp

        with orp.fake.serve(speed=0, credit_usd=1.0) as fake:
            client = openai.OpenAI(base_url=fake.base_url, api_key="sk-fake")
            client.chat.completions.create(
                model="moonshotai/kimi-k2.5",
                messages=[{"role": "user", "content": "What is 37 * 41?"}],
                extra_body={"provider": {"order": ["chutes/int4"], "allow_fallbacks": False}},
            )
            print(fake.ledger.total_usd)
    """
    if snapshot is None:
        from openrouter_probe.rules.snapshot import bundled_snapshot

        snapshot = bundled_snapshot()
    server = FakeServer(FakeOpenRouter(snapshot, **options), host, port).start()
    try:
        yield server
    finally:
        server.stop()

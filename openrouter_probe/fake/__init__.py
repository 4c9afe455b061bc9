"""A fake OpenRouter on loopback: routes by the provider block, bills from the snapshot, keeps its
own ledger, injects faults.

Three ways to start it: ``openrouter-probe fake-server --offline``; ``with serve(snapshot) as
fake:`` from Python (a background thread: sync code, notebooks, tests); the ``fake_openrouter``
pytest fixture this package ships (a ``pytest11`` plugin). See ``docs/fake-server.md``.

Example::

    import openrouter_probe as orp

    with orp.fake.serve(speed=0) as fake:      # the bundled Kimi K2.5 snapshot
        print(fake.base_url)                   # http://127.0.0.1:PORT/api/v1
        ...
        print(fake.ledger.total_usd)

Modules: ``app`` (the aiohttp application: checks, credit, the handlers), ``router`` (provider
blocks and routing decisions, each parsed or asked once; the routing 404), ``reply`` (one
endpoint's answer, body or stream, and bill), ``server`` (``serve``: the background thread),
``bodies`` (response bodies as OpenRouter sends them), ``billing`` (tokens, prices, credit),
``content`` (what the model says), ``faults`` (fault plans and degraded endpoints), ``ledger``,
``clock``, ``plugin`` (the fixture), ``batches`` (the Batch API, from a snapshot's ``:batch``
endpoints: the HTTP side) and ``batch_run`` (one batch on the clock: its state, bill and body).
Importing this package imports aiohttp; ``import openrouter_probe`` does not import this package.
May import ``rules`` and ``api`` (and ``errors``, ``files``); never ``run``, ``generate`` or ``cli``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from openrouter_probe import lazy_exports

# name -> module that defines it; resolved on first use so that loading the pytest plugin (which
# lives in this package) does not import aiohttp or pydantic.
_EXPORTS: dict[str, str] = {
    "FAULT_KINDS": "openrouter_probe.fake.faults",
    "Clock": "openrouter_probe.fake.clock",
    "FakeOpenRouter": "openrouter_probe.fake.app",
    "FakeServer": "openrouter_probe.fake.server",
    "FaultPlan": "openrouter_probe.fake.faults",
    "FaultRule": "openrouter_probe.fake.faults",
    "Ledger": "openrouter_probe.fake.ledger",
    "LedgerEntry": "openrouter_probe.fake.ledger",
    "ManualClock": "openrouter_probe.fake.clock",
    "SystemClock": "openrouter_probe.fake.clock",
    "load_faults": "openrouter_probe.fake.faults",
    "parse_faults": "openrouter_probe.fake.faults",
    "serve": "openrouter_probe.fake.server",
}

__all__ = [
    "FAULT_KINDS",
    "Clock",
    "FakeOpenRouter",
    "FakeServer",
    "FaultPlan",
    "FaultRule",
    "Ledger",
    "LedgerEntry",
    "ManualClock",
    "SystemClock",
    "load_faults",
    "parse_faults",
    "serve",
]

if TYPE_CHECKING:
    from openrouter_probe.fake.app import FakeOpenRouter
    from openrouter_probe.fake.clock import Clock, ManualClock, SystemClock
    from openrouter_probe.fake.faults import (
        FAULT_KINDS,
        FaultPlan,
        FaultRule,
        load_faults,
        parse_faults,
    )
    from openrouter_probe.fake.ledger import Ledger, LedgerEntry
    from openrouter_probe.fake.server import FakeServer, serve


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

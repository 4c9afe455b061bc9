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

Importing this package imports aiohttp; ``import openrouter_probe`` does not import this package.
May import ``rules`` and ``api`` (and ``errors``, ``files``); never ``run``, ``generate`` or ``cli``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from openrouter_probe import exports_of, lazy_exports

# The public names, written once as the imports a type checker reads (``exports_of``), each
# resolved on first use so that loading the pytest plugin (which lives in this package) does not
# import aiohttp or pydantic.
if TYPE_CHECKING:
    from openrouter_probe.fake.app import FakeOpenRouter as FakeOpenRouter
    from openrouter_probe.fake.clock import Clock as Clock
    from openrouter_probe.fake.clock import ManualClock as ManualClock
    from openrouter_probe.fake.clock import SystemClock as SystemClock
    from openrouter_probe.fake.faults import FAULT_KINDS as FAULT_KINDS
    from openrouter_probe.fake.faults import FaultPlan as FaultPlan
    from openrouter_probe.fake.faults import FaultRule as FaultRule
    from openrouter_probe.fake.faults import load_faults as load_faults
    from openrouter_probe.fake.faults import parse_faults as parse_faults
    from openrouter_probe.fake.ledger import Ledger as Ledger
    from openrouter_probe.fake.ledger import LedgerEntry as LedgerEntry
    from openrouter_probe.fake.server import FakeServer as FakeServer
    from openrouter_probe.fake.server import serve as serve

_EXPORTS: dict[str, str] = exports_of(__file__)
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

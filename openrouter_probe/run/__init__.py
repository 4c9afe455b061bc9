"""The paid run that ``generate`` and ``verify`` share: options, key, journal, cap, transport,
worker pool, progress and summary; a guarantee added here holds for both.

Four rooms, each importing only those above it in this list (``tests/project/test_module_layout.py``
keeps the table):

- ``run.money``: prices and worst cases, the dollar window, the client's journal and its replay;
- ``run.send``: the request, one row's attempts, the transport, the error classes, the senders
  (sync and batch);
- ``run.books``: reserve and settle against the cap, reconciled costs, the output and turn files;
- ``run.schedule``: the worker pool, queues and fair shares, the row source, retries and waits.

Beside them, the run's values (``rows``, ``stop``, ``tallies``, ``start``, ``result``, ``counts``:
any room may import them), a result's text (``report``: it reads ``result``), its options
(``config``: ``run.schedule`` reads them) and the assembly that builds a run from them
(``paid``, ``senders``, ``checks``, ``lock``, ``progress``). May import ``rules`` and ``api`` (and
``errors``, ``files``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from openrouter_probe import exports_of, lazy_exports

# The public names, written once as the imports a type checker reads (``exports_of``).
if TYPE_CHECKING:
    from openrouter_probe.run.money.spend import SpendCap as SpendCap
    from openrouter_probe.run.report import render_result as render_result
    from openrouter_probe.run.result import RunResult as RunResult
    from openrouter_probe.run.result import RunSummary as RunSummary
    from openrouter_probe.run.rows import PromptRow as PromptRow
    from openrouter_probe.run.stop import StopReason as StopReason

_EXPORTS: dict[str, str] = exports_of(__file__)
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

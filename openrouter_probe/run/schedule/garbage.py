"""The cyclic garbage collector while a paid run's requests are in flight: less often.

A paid run allocates a few hundred objects per request (the body, the answer's JSON, aiohttp's
response, the record) and holds thousands alive at once (2,000 requests in flight, the rows still
to send, the imports). At CPython's default thresholds (700 allocations; 10, 10) the collector runs
about every 700 allocations, walks the young objects each time and now and then every tracked
object: at C=2000 it took about a fifth of the run's CPU. Nearly all of the run's objects are freed
by their reference counts, not by the collector, so while a run sends (``paced``, around
``run.paid.run_job``'s scheduler, for ``generate`` and ``verify`` alike) the first
threshold is ``FIRST`` allocations and the older generations' ``OLDER``: the same work for about a
fifth less CPU per request, the peak memory the same (``benchmarks/README.md``). The thresholds the
process had come back when the last job in it ends; a collector switched off (a first threshold of
0) stays off.

Before that, a command of the CLI that runs a job (``generate``, ``verify``) holds the collector off
altogether (``held``): its imports and setup allocate a few hundred thousand objects that live to
the end, and the collector walked them about 150 times, then once more at the interpreter's exit,
about a fifth of a one-row ``generate``'s CPU. When the job starts sending (``paced``), the objects
alive then are frozen (``gc.freeze``: no collection walks them again) and the collector runs as
above on the requests' garbage; the command's end unfreezes them, and, in the CLI's own process
only (``at_exit``: not a notebook's, nor click's ``CliRunner``'s, whose cyclic garbage and
finalizers still run at exit), the interpreter's exit freezes whatever is alive before its last
collection. A command that ends before it sends (a dry run, a refusal) lets the collector go as it
ends.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
from collections.abc import Iterator

__all__ = ["FIRST", "OLDER", "held", "paced"]

#: The first generation's threshold while a job runs (CPython's default: 700).
FIRST = 10_000
#: The older generations' thresholds meanwhile (CPython's defaults: 10, 10).
OLDER = (50, 100)

_jobs = 0  # jobs of this process running now (two may overlap in one event loop)
_before: tuple[int, int, int] | None = None
_held = False  # the collector switched off by ``held`` until a job's ``paced`` begins
_frozen = False  # the objects alive when the job began, frozen by ``_let_go``


@contextlib.contextmanager
def held(*, at_exit: bool = False) -> Iterator[None]:
    """The collector off while the block runs, up to the first job's ``paced`` (see the module);
    a collector already off is left as it was. ``at_exit``: the process ends with the block (the
    CLI's own), its exit skips the collection of what is alive then."""
    global _held, _frozen
    if _held or not gc.isenabled():
        yield
        return
    gc.disable()
    _held = True
    if at_exit:
        atexit.unregister(gc.freeze)
        atexit.register(gc.freeze)  # the exit's collection walks what the command left alive
    try:
        yield
    finally:
        _let_go()
        if _frozen:
            _frozen = False
            gc.unfreeze()


def _let_go() -> None:
    global _held, _frozen
    if _held:
        _held = False
        if gc.get_freeze_count() == 0:  # not another's freeze (a forking server's)
            gc.freeze()
            _frozen = True
        gc.enable()


@contextlib.contextmanager
def paced() -> Iterator[None]:
    """The collector at ``FIRST``/``OLDER`` (at least) while the block runs (see the module)."""
    global _jobs, _before
    _let_go()
    _jobs += 1
    if _jobs == 1:
        first, second, third = _before = gc.get_threshold()
        if first > 0:
            gc.set_threshold(max(first, FIRST), max(second, OLDER[0]), max(third, OLDER[1]))
    try:
        yield
    finally:
        _jobs -= 1
        if _jobs == 0 and _before is not None:
            gc.set_threshold(*_before)
            _before = None

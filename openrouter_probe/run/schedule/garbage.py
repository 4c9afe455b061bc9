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
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

__all__ = ["FIRST", "OLDER", "paced"]

#: The first generation's threshold while a job runs (CPython's default: 700).
FIRST = 10_000
#: The older generations' thresholds meanwhile (CPython's defaults: 10, 10).
OLDER = (50, 100)

_jobs = 0  # jobs of this process running now (two may overlap in one event loop)
_before: tuple[int, int, int] | None = None


@contextlib.contextmanager
def paced() -> Iterator[None]:
    """The collector at ``FIRST``/``OLDER`` (at least) while the block runs (see the module)."""
    global _jobs, _before
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

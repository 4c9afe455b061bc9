"""CPU the generator's spend journal adds per request, and what replaying it costs at start.

``benchmarks/generate.py`` measures ``generate`` whole against a bare aiohttp loop; on a shared
machine its run-to-run noise (±15%) is larger than the journal's share. This isolates it: N
attempts journaled as the runner does (a flushed ``sent`` line, then a buffered ``settled`` line),
then the journal replayed as a resumed run does. CPU is user + system (``getrusage``). Compare the
µs per request with ``generate``'s CPU ms per request from ``generate.py`` (~0.45 ms).

    python benchmarks/generate_ledger.py [--requests 200000]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import tempfile
from decimal import Decimal
from pathlib import Path

from openrouter_probe.run.money.journal import Journal
from openrouter_probe.run.money.replay import replay_journal


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200_000)
    args = parser.parse_args()
    n = args.requests
    reserved, cost = Decimal("0.0003792"), Decimal("0.00021456")
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "out.jsonl.ledger"
        with Journal(path) as journal:
            start = _cpu_s()
            for i in range(n):
                attempt = journal.sent(json.dumps(f"r{i}"), reserved)
                journal.settle(attempt, cost)
            write_s = _cpu_s() - start
        size = os.path.getsize(path)
        start = _cpu_s()
        replay = replay_journal(path, accounted=set())
        replay_s = _cpu_s() - start
    print(f"requests journaled: {n:,} ({size / n:.0f} bytes each; {replay.attempts:,} replayed)")
    print(f"journal CPU per request: {write_s / n * 1e6:.1f} us (sent flushed + settled buffered)")
    print(f"replay CPU per request:  {replay_s / n * 1e6:.1f} us ({replay_s:.2f} s in all)")


if __name__ == "__main__":
    main()

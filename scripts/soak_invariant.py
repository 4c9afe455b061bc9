"""Soak the money invariant: many seeded scenarios of ``tests/_invariant.py``, bigger than CI's.

Each scenario runs ``generate`` on one output under a random mix of every fault kind the fake server
has, streaming or not, with two child processes killed by SIGKILL at random points, a second run
racing each for the output, and a last resume; then checks: billed <= cap, counted >= billed, no
row recorded twice, every billed generation known to the journal. Prints one line per seed and a
total; exits 1 if any seed broke the invariant.

    python scripts/soak_invariant.py                    # seeds 1000-1199, 100-400 rows each
    python scripts/soak_invariant.py --seeds 0:50 --rows 1000
    python scripts/soak_invariant.py --batch            # generate --batch scenarios instead
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests._invariant import run_batch_scenario, run_scenario  # noqa: E402  (the repository's own test helpers)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="1000:1200", help="FIRST:END (END excluded)")
    parser.add_argument("--rows", type=int, default=None, help="rows per scenario (default 60-240)")
    parser.add_argument(
        "--batch", action="store_true", help="generate --batch scenarios (kills around the POST)"
    )
    args = parser.parse_args()
    # the runs' own lines (retries, warnings) would drown the scenarios' lines
    logging.getLogger("openrouter_probe").addHandler(logging.NullHandler())
    first, end = (int(x) for x in args.seeds.split(":"))
    started = time.monotonic()
    broken = kills = refused = 0
    for seed in range(first, end):
        with tempfile.TemporaryDirectory() as folder:
            scenario = run_batch_scenario if args.batch else run_scenario
            outcome = scenario(seed, Path(folder), rows=args.rows)
        kills += outcome.kills
        refused += outcome.refused
        print(outcome.line() + ("" if not outcome.problems else f"  PROBLEMS: {outcome.problems}"))
        broken += bool(outcome.problems)
    print(
        f"{end - first} scenarios, {kills} kills, {refused} refused races, {broken} broken, "
        f"{time.monotonic() - started:.0f} s"
    )
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())

"""Soak the money invariant: many seeded scenarios of ``tests/_invariant.py``, bigger than CI's.

Each scenario runs ``generate`` on one output under a random mix of every fault kind the fake server
has, streaming or not, with two child processes killed by SIGKILL at random points, a second run
racing each for the output, and a last resume; then checks: billed <= cap, counted >= billed, no
row recorded twice, every billed generation known to the journal. Prints one line per seed and a
total; exits 1 if any seed broke the invariant or hung.

Each seed runs in its own process group, for at most ``--timeout`` seconds: a seed that does not
finish in time is killed (its children with it), named ``HUNG``, and the soak goes on.

    python scripts/soak_invariant.py                    # seeds 1000-1199, 100-400 rows each
    python scripts/soak_invariant.py --seeds 0:50 --rows 1000
    python scripts/soak_invariant.py --batch            # generate --batch scenarios instead
    python scripts/soak_invariant.py --seeds 9113:9114 --timeout 60
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

#: The line a seed's own process prints last, for the soak to read its counts from.
_TALLY = "TALLY "


def one(seed: int, *, batch: bool, rows: int | None) -> int:
    """Run one seed in this process; print its line and its tally."""
    from tests._invariant import run_batch_scenario, run_scenario

    # the runs' own lines (retries, warnings) would drown the scenarios' lines
    logging.getLogger("openrouter_probe").addHandler(logging.NullHandler())
    with tempfile.TemporaryDirectory() as folder:
        scenario = run_batch_scenario if batch else run_scenario
        outcome = scenario(seed, Path(folder), rows=rows)
    print(outcome.line() + ("" if not outcome.problems else f"  PROBLEMS: {outcome.problems}"))
    tally = {"kills": outcome.kills, "refused": outcome.refused, "broken": bool(outcome.problems)}
    print(_TALLY + json.dumps(tally), flush=True)
    return 0


def _run_seed(seed: int, args: argparse.Namespace) -> dict[str, int] | None:
    """Run one seed in its own process group; its tally, or ``None`` when it hung."""
    command = [sys.executable, __file__, "--one", str(seed)]
    command += ["--batch"] if args.batch else []
    command += ["--rows", str(args.rows)] if args.rows is not None else []
    child = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, _ = child.communicate(timeout=args.timeout)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)  # the seed's process and every child it started
        child.communicate()
        return None
    tally = None
    for line in out.splitlines():
        if line.startswith(_TALLY):
            tally = json.loads(line[len(_TALLY) :])
        else:
            print(line)
    if tally is None:  # it died without its tally: a crash is a broken seed
        print(f"seed {seed}: CRASHED (exit {child.returncode})")
        return {"kills": 0, "refused": 0, "broken": 1}
    return tally


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="1000:1200", help="FIRST:END (END excluded)")
    parser.add_argument("--rows", type=int, default=None, help="rows per scenario (default 60-240)")
    parser.add_argument(
        "--batch", action="store_true", help="generate --batch scenarios (kills around the POST)"
    )
    parser.add_argument(
        "--timeout", type=float, default=300.0, help="seconds a seed may take before it is HUNG"
    )
    parser.add_argument("--one", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one is not None:
        return one(args.one, batch=args.batch, rows=args.rows)
    first, end = (int(x) for x in args.seeds.split(":"))
    started = time.monotonic()
    broken = kills = refused = 0
    hung: list[int] = []
    for seed in range(first, end):
        tally = _run_seed(seed, args)
        if tally is None:
            hung.append(seed)
            print(f"seed {seed}: HUNG (no end within {args.timeout:.0f} s; killed)", flush=True)
            continue
        kills += tally["kills"]
        refused += tally["refused"]
        broken += bool(tally["broken"])
    print(
        f"{end - first} scenarios, {kills} kills, {refused} refused races, {broken} broken, "
        f"{len(hung)} hung{' (seeds ' + ', '.join(map(str, hung)) + ')' if hung else ''}, "
        f"{time.monotonic() - started:.0f} s"
    )
    return 1 if broken or hung else 0


if __name__ == "__main__":
    sys.exit(main())

"""Run the test suite again and again with every core kept busy, and name each test that failed.

A test whose outcome depends on how the OS or the event loop schedules (a shared clock moved by
one thread while another reads it, a wall-clock deadline, the order of concurrent answers) passes
on an idle machine and fails on a busy one: CI's, or a laptop running a build. This recipe makes
the machine busy on purpose (one pure-Python spinning process per core, at the suite's own
priority) and runs pytest ``--runs`` times; it prints one line per run and, at the end, every test
that failed at least once with how often. Exit status 1 if any run failed.

    python scripts/suite_under_load.py                 # the whole suite, 20 runs
    python scripts/suite_under_load.py --runs 50 -- \
        tests/run/money/test_unaccounted_requests.py -k keep_alives

Arguments after ``--`` go to pytest (default: the README's test command, the whole suite).
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import subprocess
import sys
import time

_FAILED = re.compile(r"^(?:FAILED|ERROR) (\S+)", re.MULTILINE)
_SPIN = "while True:\n    pass\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20, help="how many runs (default 20)")
    parser.add_argument(
        "--busy", type=int, default=os.cpu_count() or 2, help="spinning processes (default: cores)"
    )
    parser.add_argument("--log", default=None, help="folder for each run's output (default none)")
    args, rest = parser.parse_known_args(argv)
    pytest_args = rest[1:] if rest[:1] == ["--"] else rest
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *pytest_args]
    spinners = [subprocess.Popen([sys.executable, "-c", _SPIN]) for _ in range(args.busy)]
    failures: collections.Counter[str] = collections.Counter()
    failed_runs = 0
    try:
        for run in range(1, args.runs + 1):
            started = time.monotonic()
            done = subprocess.run(command, capture_output=True, text=True, check=False)
            took = time.monotonic() - started
            names = sorted(set(_FAILED.findall(done.stdout)))
            failures.update(names)
            tail = done.stdout.strip().splitlines()[-1:] or ["(no output)"]
            verdict = "ok" if done.returncode == 0 else f"exit {done.returncode}"
            print(f"run {run:>3}/{args.runs}: {verdict:<7} {took:6.0f} s  {tail[0]}", flush=True)
            if done.returncode != 0:
                failed_runs += 1
            if args.log:
                os.makedirs(args.log, exist_ok=True)
                with open(os.path.join(args.log, f"run-{run:03}.txt"), "w") as f:
                    f.write(done.stdout + done.stderr)
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()
    print(f"{args.runs - failed_runs} of {args.runs} runs passed with {args.busy} cores kept busy")
    for name, count in failures.most_common():
        print(f"  failed {count} time(s): {name}")
    return 1 if failed_runs else 0


if __name__ == "__main__":
    sys.exit(main())

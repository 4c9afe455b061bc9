"""Measure `import openrouter_probe` and `openrouter-probe --help` against a bare interpreter.

Each command runs N times in a fresh process, interleaved with the baseline (``python -c pass``) so
that machine noise hits both alike. Prints the median wall time of each and the ratio to the baseline,
plus the time *added* over the baseline, which is what the 0.3 s target is about.

    python benchmarks/startup.py [--runs 21]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time

TARGET_S = 0.3


def _time(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=21)
    args = parser.parse_args()
    exe = shutil.which("openrouter-probe")
    cases = {
        "baseline: python -c pass": [sys.executable, "-c", "pass"],
        "import openrouter_probe": [sys.executable, "-c", "import openrouter_probe"],
        "openrouter-probe --help": [exe, "--help"]
        if exe
        else [sys.executable, "-m", "openrouter_probe", "--help"],
        "reference: import pandas": [sys.executable, "-c", "import pandas"],
    }
    samples: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(args.runs):
        for name, cmd in cases.items():
            samples[name].append(_time(cmd))
    base = statistics.median(samples["baseline: python -c pass"])
    print(f"{'case':34} {'median s':>9} {'x baseline':>11} {'added s':>8}  target")
    for name, values in samples.items():
        med = statistics.median(values)
        verdict = ""
        if not name.startswith(("baseline", "reference")):
            verdict = "ok" if med < TARGET_S else f"OVER {TARGET_S}s"
        print(f"{name:34} {med:9.3f} {med / base:11.2f} {med - base:8.3f}  {verdict}")


if __name__ == "__main__":
    main()

"""Peak memory of one datatrove rank (``GenerateStep.run``) by its rows: 5,000 against 50,000.

    python benchmarks/datatrove_step.py                    # --rows 5000,50000 --concurrency 64
    python benchmarks/datatrove_step.py --checkout OTHER   # the same with another checkout's step

The fake OpenRouter (``speed=0``) serves in this process's background thread; each rank runs in
its own child process (``python -c``, the checkout first on its path), which reads its rows as
Documents made one at a time (as a datatrove reader hands them), consumes what the step yields
(as a writer would) and reports its own peak RSS (``VmHWM``), its RSS after imports, the rows
answered and the seconds taken. Not a test: nothing here is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
POLICY = ROOT / "policies" / "kimi-k2.5.yaml"

CHILD = r"""
import json, sys, time
from collections import deque
from datatrove.data import Document
from openrouter_probe.generation.datatrove_step import GenerateStep
import openrouter_probe.generation.job, openrouter_probe.generation.audit  # imports: start-up

def status(name):
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith(name + ":"):
                return int(line.split()[1])
    return 0

rows, base_url, out, policy, concurrency = sys.argv[1:6]
def documents():
    for i in range(int(rows)):
        yield Document(text=f"question {i}: " + "word " * 40, id=f"row-{i}",
                       metadata={"dataset": "bench"})
step = GenerateStep(policy=policy, output=out, base_url=base_url, api_key="sk-bench",
                    snapshot="bundled", max_tokens=64, concurrency=int(concurrency))
after_imports = status("VmRSS")
start = time.perf_counter()
answered = sum(1 for _ in step.run(documents(), rank=0, world_size=1))
print(json.dumps({"rows": int(rows), "answered": answered, "seconds": time.perf_counter() - start,
                  "rss_after_imports_mb": after_imports / 1024, "peak_rss_mb": status("VmHWM") / 1024}))
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", default="5000,50000")
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--checkout", type=Path, default=ROOT, help="whose step to measure")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from openrouter_probe.fake import serve

    results = []
    with serve(speed=0, seed=1, median_tokens=24) as fake:
        for rows in (int(r) for r in args.rows.split(",")):
            with tempfile.TemporaryDirectory() as tmp:
                env = {**os.environ, "PYTHONPATH": str(args.checkout), "OPENROUTER_API_KEY": ""}
                command = [sys.executable, "-c", CHILD, str(rows), fake.base_url,
                           str(Path(tmp) / "out"), str(POLICY), str(args.concurrency)]  # fmt: skip
                # run from the temporary folder: `python -c` puts the working folder first on
                # the path, which would shadow --checkout when run from a checkout's root
                run = subprocess.run(
                    command, env=env, cwd=tmp, capture_output=True, text=True, check=True
                )
                results.append(json.loads(run.stdout.strip().splitlines()[-1]))
                print(json.dumps(results[-1]), flush=True)
    if len(results) > 1:
        print(f"peak RSS {results[-1]['rows']:,} rows / {results[0]['rows']:,} rows: "
              f"{results[-1]['peak_rss_mb'] / results[0]['peak_rss_mb']:.2f}x")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())

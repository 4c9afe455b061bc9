"""Instructions per request of `generate`, beside the bare aiohttp loop: a figure the machine's load
does not move.

CPU time per request (``generate.py``) swings by 20-40% between runs on a shared machine, more than
the differences worth measuring. Instructions executed do not: each client runs under valgrind's
callgrind (``valgrind`` must be installed), twice, with ``--small`` and ``--large`` requests all in
flight at once, and the difference of the two counts divided by the difference of the requests is
its instructions per request (start-up, imports and the fixed work of a run cancel out). With
streaming, ``reader`` (``generate.py``: the bare loop that also decodes every event) is the floor
of a client that keeps the answer, and ``x reader`` the ratio to it; without, the bare loop
decodes its body already and is that floor. The fake
OpenRouter (``speed=0``) serves in this process's background thread, outside valgrind.

    python benchmarks/instructions.py [--modes nonstream,stream] [--small 100 --large 300]
        [--against OTHER_CHECKOUT]

Under valgrind a client runs about 50 times slower: the default 100 and 300 requests take about
two minutes per client. A ratio is of the bare loop's instructions per request, as in
``generate.py``; it is a proxy for CPU (an instruction of the JSON decoder and of the interpreter
loop do not cost the same), so it checks a change's direction and size, and ``generate.py``'s CPU
per request stays the figure the targets name.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks" / "generate.py"


def _count(client: str, n: int, *, lib: str, stream: bool, base_url: str, tmp: Path) -> int:
    prompts = tmp / f"prompts-{n}.jsonl"
    if not prompts.exists():
        prompts.write_text(
            "".join(
                json.dumps({"id": f"r{i}", "prompt": f"question {i}: what is {i} * 41?"}) + "\n"
                for i in range(n)
            )
        )
    out = tmp / "out.jsonl"
    for leftover in (out, Path(f"{out}.ledger"), out.with_name(f".{out.name}.lock")):
        leftover.unlink(missing_ok=True)
    cmd = [
        "valgrind",
        "--tool=callgrind",
        "--callgrind-out-file=/dev/null",
        sys.executable,
        str(BENCH),
        "--child",
        client,
        "--base-url",
        base_url,
        "--requests",
        str(n),
        "--concurrency",
        str(n),
        "--max-tokens",
        "32",
        "--prompts",
        str(prompts),
        "--out",
        str(out),
    ] + (["--stream"] if stream else [])
    env = {**os.environ, "PYTHONPATH": lib}
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
    found = re.search(r"Collected : (\d+)", proc.stderr)
    if proc.returncode != 0 or found is None:
        raise SystemExit(f"{client} under valgrind failed:\n{proc.stderr[-3000:]}")
    return int(found.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modes", default="nonstream,stream")
    parser.add_argument("--small", type=int, default=100)
    parser.add_argument("--large", type=int, default=300)
    parser.add_argument("--against", help="another checkout: its generate runs as 'before'")
    parser.add_argument(
        "--slow-start",
        action="store_true",
        help="the fake refuses /credits (a management key of its own): the run cannot read the "
        "balance and opens its window at 16 requests, as before it read it; with everything in "
        "flight at once a run opens a connection per request, as the bare loop does, and the "
        "slow start reuses about a hundred",
    )
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed: apt-get install valgrind")
    if args.large <= args.small:
        raise SystemExit("--large must be above --small")

    from openrouter_probe.fake import serve

    clients = [
        ("bare", "bare", str(ROOT)),
        ("reader", "reader", str(ROOT)),
        ("generate", "generate", str(ROOT)),
    ]
    if args.against:
        clients.append(("before", "generate", args.against))
    print(f"{'mode':9} {'client':9} {'instructions/request':>21} {'x bare':>7} {'x reader':>8}")
    with tempfile.TemporaryDirectory() as folder:
        for mode in args.modes.split(","):
            stream = mode == "stream"
            per: dict[str, float] = {}
            refuse = {"management_key": "sk-only-this-one"} if args.slow_start else {}
            with serve(speed=0, seed=0, median_tokens=24, **refuse) as fake:
                for name, client, lib in clients:
                    if name == "reader" and not stream:
                        continue  # the bare loop reads a body already: the same client
                    small, large = (
                        _count(
                            client,
                            n,
                            lib=lib,
                            stream=stream,
                            base_url=fake.base_url,
                            tmp=Path(folder),
                        )
                        for n in (args.small, args.large)
                    )
                    per[name] = (large - small) / (args.large - args.small)
                    floor = per.get("reader", per["bare"])
                    print(
                        f"{mode:9} {name:9} {per[name]:>21,.0f} {per[name] / per['bare']:>7.3f}"
                        f" {per[name] / floor:>8.3f}",
                        flush=True,
                    )


if __name__ == "__main__":
    main()

"""The run alone: ``generate``'s CPU per row with an in-process sender (no HTTP), side by side with
another checkout.

What it measures is the paid run's own work per row (the scheduler, the books, the journal, the
row's body and worst case, the output line), without aiohttp and the server: the part of
``generate.py``'s figure the run owns. The sender answers each request after two turns of the event
loop, with a generation id and a cost; 2000 requests in flight.

    python benchmarks/run_alone.py [--rows 20000] [--against OTHER_CHECKOUT] [--rounds 5]

Each measurement is a child process (this checkout's ``openrouter_probe``, or ``--against``'s), which
warms its imports and the policy with a dry run first; the rounds alternate the checkouts and the
medians are printed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
POLICY = ROOT / "policies" / "kimi-k2.5.yaml"


async def _send(body: bytes, *, stream: bool, on_id: Any = None, ceiling_s: Any = None) -> Any:
    from openrouter_probe.run.send.transport import Answer

    await asyncio.sleep(0)
    if on_id is not None:
        on_id("gen-bench")
    await asyncio.sleep(0)
    return Answer(
        provider="Chutes",
        model="moonshotai/kimi-k2.5",
        finish_reason="stop",
        content="an answer",
        reasoning=None,
        usage={"prompt_tokens": 10, "completion_tokens": 20, "total_tokens": 30, "cost": 0.0001},
        generation_id="gen-bench",
    )


def child(rows: int, folder: Path) -> None:
    os.environ.setdefault("OPENROUTER_API_KEY", "sk-bench-not-real")
    from openrouter_probe.generation import generate

    prompts = folder / "prompts.jsonl"
    options: dict[str, Any] = {
        "policy": POLICY,
        "send": _send,
        "snapshot": "bundled",
        "budget_usd": 1_000_000,
        "concurrency": 2000,
        "max_tokens": 32,
    }
    asyncio.run(generate(prompts, out=folder / "warm.jsonl", dry_run=True, **options))
    start = resource.getrusage(resource.RUSAGE_SELF)
    summary = asyncio.run(generate(prompts, out=folder / "out.jsonl", **options))
    end = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (end.ru_utime - start.ru_utime) + (end.ru_stime - start.ru_stime)
    print(json.dumps({"rows": summary.ok, "us_per_row": cpu / max(1, summary.ok) * 1e6}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--against", help="another checkout: its run is measured as 'before'")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.rows, Path(args.child))
        return
    checkouts = {"this": str(ROOT)} | ({"before": args.against} if args.against else {})
    found: dict[str, list[float]] = {name: [] for name in checkouts}
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "prompts.jsonl").write_text(
            "".join(
                json.dumps({"id": f"r{i}", "prompt": f"question {i}: what is {i} * 41?"}) + "\n"
                for i in range(args.rows)
            )
        )
        for round_ in range(args.rounds):
            for name, path in checkouts.items():
                folder = Path(tmp) / f"{name}-{round_}"
                folder.mkdir()
                (folder / "prompts.jsonl").write_bytes((Path(tmp) / "prompts.jsonl").read_bytes())
                env = {**os.environ, "PYTHONPATH": path}
                cmd = [sys.executable, __file__, "--rows", str(args.rows), "--child", str(folder)]
                result = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
                found[name].append(json.loads(result.stdout.splitlines()[-1])["us_per_row"])
    for name, values in found.items():
        runs = ", ".join(f"{v:.1f}" for v in values)
        print(f"{name:7} {statistics.median(values):7.1f} us/row (median)  runs: [{runs}]")


if __name__ == "__main__":
    main()

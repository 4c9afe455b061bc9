"""Compare the fake OpenRouter's CPU per request in this checkout against another checkout's.

On a shared machine one run's figures move with the neighbours' load; rounds that alternate a bare
``aiohttp.web`` handler, the other checkout's fake and this one's, each measured exactly as
``fake_server.py`` measures (one server core, 500 clients, ``speed=0``), compare like with like.

    python benchmarks/fake_server_ab.py /path/to/other/checkout [--rounds 6] [--seconds 4]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Any

import fake_server as fb


def _run_other(port: int, ready: Any, options: dict[str, Any]) -> None:
    root = str(options.pop("root"))
    sys.path.insert(0, root)
    import openrouter_probe

    if not openrouter_probe.__file__ or not openrouter_probe.__file__.startswith(root):
        raise SystemExit(f"{root}: openrouter_probe was imported from {openrouter_probe.__file__}")
    fb._run_fake(port, ready, options)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("other", type=Path, help="the checkout to compare against (e.g. main)")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--clients", type=int, default=500)
    args = parser.parse_args()
    other = args.other.resolve()
    if not (other / "openrouter_probe" / "fake").is_dir():
        raise SystemExit(f"{other}: no openrouter_probe/fake/ there; give a checkout's root")
    fb._pin(1)
    rows: dict[str, list[float]] = {"bare": [], "other": [], "this": []}
    runs: tuple[tuple[str, Any, dict[str, Any]], ...] = (
        ("bare", fb._run_bare, {}),
        ("other", _run_other, {"speed": 0, "root": str(other)}),
        ("this", fb._run_fake, {"speed": 0}),
    )
    print(f"CPU ms per request, {args.clients} clients, one server core (other: {other})")
    for i in range(args.rounds):
        for name, target, options in runs:
            rows[name].append(
                fb._throughput(target, dict(options), args.clients, args.seconds)["cpu_ms"]
            )
        print(f"  round {i}: " + "  ".join(f"{k} {v[-1]:.3f}" for k, v in rows.items()))
    median = {k: statistics.median(v) for k, v in rows.items()}
    print("  median:  " + "  ".join(f"{k} {v:.3f}" for k, v in median.items()))
    print(f"  this / other: {median['this'] / median['other']:.2f}")


if __name__ == "__main__":
    main()

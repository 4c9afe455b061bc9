"""Issue 31's done-when for the in-flight budget, on the fake at real (scaled) latencies.

The fake holds every request's worst case while it is served and refuses, with OpenRouter's 402
``in_flight_budget_exhausted`` and ``Retry-After``, a request over a budget of ``--hold`` requests'
worst case. ``--rows`` rows at ``--concurrency`` must all finish, exit 0, with the refusals a small
share of the attempts. The fake runs at ``--speed`` (real waits, scaled: this is a scenario, not a
test). Usage::

    python scripts/in_flight_scenario.py --rows 300 --concurrency 200 --hold 10 --speed 50
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from openrouter_probe.fake import serve  # noqa: E402
from openrouter_probe.generation import generate  # noqa: E402
from tests._generate import POLICY, prompt_rows, write_prompts  # noqa: E402


def _run(tmp: Path, base_url: str, rows: int, concurrency: int) -> object:
    write_prompts(tmp / "prompts.jsonl", prompt_rows(rows))
    for name in ("out.jsonl", "out.jsonl.ledger"):
        (tmp / name).unlink(missing_ok=True)
    return asyncio.run(
        generate(
            tmp / "prompts.jsonl",
            policy=POLICY,
            out=tmp / "out.jsonl",
            base_url=base_url,
            concurrency=concurrency,
            budget_usd=50,
            max_tokens=200,
        )
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=300)
    parser.add_argument("--concurrency", type=int, default=200)
    parser.add_argument("--hold", type=float, default=10.0, help="the budget, in requests")
    parser.add_argument("--speed", type=float, default=50.0)
    parser.add_argument("--seed", type=int, default=3)
    args = parser.parse_args()
    os.environ.setdefault("OPENROUTER_API_KEY", "sk-fake-scenario")
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        with serve(speed=0, seed=args.seed, in_flight_usd=1000) as fake:
            _run(tmp, fake.base_url, 1, 1)
            one = fake.fake.limits.most_held_usd
        budget = one * int(args.hold * 1000) / 1000
        with serve(speed=args.speed, seed=args.seed, in_flight_usd=budget) as fake:
            started = time.monotonic()
            summary = _run(tmp, fake.base_url, args.rows, args.concurrency)
            limits = fake.fake.limits
            billed = len(fake.ledger)
    s = summary
    share = limits.refused / max(1, s.requests)  # type: ignore[attr-defined]
    print(
        f"rows {args.rows} at concurrency {args.concurrency}, budget {args.hold} requests "
        f"(${budget:.6f}), speed {args.speed}: stop {s.stop_reason}, exit {s.exit_code}, "  # type: ignore[attr-defined]
        f"ok {s.ok}, truncated {s.truncated}, failed {s.failed}, not sent {s.not_sent}; {s.requests} attempts, "  # type: ignore[attr-defined]
        f"{limits.refused} in-flight 402s ({share:.1%}); billed {billed} generations; the fake "
        f"held at most {limits.most_held_usd / one:.2f} requests, the run "
        f"${s.held_max_usd:.6f}; {time.monotonic() - started:.1f} s"  # type: ignore[attr-defined]
    )
    return 0 if s.exit_code == 0 and s.failed == 0 else 1  # type: ignore[attr-defined]


if __name__ == "__main__":
    raise SystemExit(main())

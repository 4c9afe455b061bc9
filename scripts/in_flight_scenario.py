"""Issue 31's done-when for the in-flight budget, on the fake at real (scaled) latencies.

The fake holds every request's worst case while it is served and refuses, with OpenRouter's 402
``in_flight_budget_exhausted`` and ``Retry-After``, a request over a budget of ``--hold`` requests'
worst case. ``--rows`` rows at ``--concurrency`` must all finish, exit 0, with the refusals a small
share of the attempts. The fake runs at ``--speed`` (real waits, scaled: this is a scenario, not a
test). Issue 47's figure is the dollars held in flight once the budget is learned: the fake's own
books' time-weighted mean of what it holds, as a share of the budget, from its first in-flight 402
to the moment the run's books let the last row go for the first time (on the same clock:
``time.time()``; after it no row is left to fill the window), and to the fake's last answer (the
drain included: fewer rows left than the budget holds; a row refused in it waits its
Retry-After).
``--runs N`` runs it N times (seeds ``--seed`` on). Usage::

    python scripts/in_flight_scenario.py --rows 300 --concurrency 200 --hold 10 --speed 50
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from openrouter_probe.fake import serve  # noqa: E402
from openrouter_probe.fake.account import AccountLimits  # noqa: E402
from openrouter_probe.generation import generate  # noqa: E402
from openrouter_probe.run.books.books import Books  # noqa: E402
from tests._generate import POLICY, prompt_rows, write_prompts  # noqa: E402

_RESERVE = Books.reserve


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


def _held_means(limits: AccountLimits, budget: Decimal, last_sent_s: float) -> str:
    """The fake's mean held from its first refusal to ``last_sent_s``, and to its last change (the
    drain included), as shares of ``budget``; with no refusal the budget was never learned, and
    there is no such mean (not 0%)."""
    first = limits.first_refusal_s
    if first is None:
        return "held in flight: the budget was never learned (no in-flight 402)"
    sent = limits.held_mean_usd(first, last_sent_s) / float(budget)
    drained = limits.held_mean_usd(first, limits.history[-1][0]) / float(budget)
    return (
        f"held in flight once learned (from the first 402), mean {sent:.1%} of the budget to "
        f"the last row sent, {drained:.1%} with the drain"
    )


def _first_sends() -> dict[str, float]:
    """When each row was first let go by the run's books (``time.time()``: the fake's clock)."""
    sent: dict[str, float] = {}

    def noted(self: Books, dataset: str, attempt: Any, *, borrow: bool = False) -> bool:
        if (
            went := _RESERVE(self, dataset, attempt, borrow=borrow)
        ) and attempt.id_json not in sent:
            sent[attempt.id_json] = time.time()
        return went

    Books.reserve = noted  # type: ignore[method-assign]
    return sent


def _scenario(args: argparse.Namespace, seed: int, tmp: Path) -> bool:
    with serve(speed=0, seed=seed, in_flight_usd=1000) as fake:
        _run(tmp, fake.base_url, 1, 1)
        one = fake.fake.limits.most_held_usd
    budget = one * int(args.hold * 1000) / 1000
    with serve(speed=args.speed, seed=seed, in_flight_usd=budget) as fake:
        started, sent = time.monotonic(), _first_sends()
        try:
            s: Any = _run(tmp, fake.base_url, args.rows, args.concurrency)
        finally:
            Books.reserve = _RESERVE  # type: ignore[method-assign]
        limits = fake.fake.limits
        billed = len(fake.ledger)
    share = limits.refused / max(1, s.requests)
    held = _held_means(limits, budget, max(sent.values()))
    print(
        f"seed {seed}: rows {args.rows} at concurrency {args.concurrency}, budget {args.hold} "
        f"requests (${budget:.6f}), speed {args.speed}: stop {s.stop_reason}, exit {s.exit_code}, "
        f"ok {s.ok}, truncated {s.truncated}, failed {s.failed}, not sent {s.not_sent}; "
        f"{limits.refused} in-flight 402s / {s.requests} attempts ({share:.1%}); billed {billed} "
        f"generations; {held}; the fake held at most "
        f"{limits.most_held_usd / one:.2f} requests, the run ${s.held_max_usd:.6f}; "
        f"{time.monotonic() - started:.1f} s"
    )
    return bool(s.exit_code == 0 and s.failed == 0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=300)
    parser.add_argument("--concurrency", type=int, default=200)
    parser.add_argument("--hold", type=float, default=10.0, help="the budget, in requests")
    parser.add_argument("--speed", type=float, default=50.0)
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--runs", type=int, default=1, help="runs, seeds --seed on")
    args = parser.parse_args()
    os.environ.setdefault("OPENROUTER_API_KEY", "sk-fake-scenario")
    ok = True
    for seed in range(args.seed, args.seed + args.runs):
        with tempfile.TemporaryDirectory() as folder:
            ok = _scenario(args, seed, Path(folder)) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())

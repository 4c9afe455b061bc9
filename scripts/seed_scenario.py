"""Issue 31's done-when for the seed job: ``C=2000, $100`` on the fake at real latencies.

The seed job (``../shared/scenarios/README.md``): Kimi K2.5 on the native-precision providers of
the bundled snapshot (``policies/kimi-k2.5.yaml``), six datasets (B3-B8), ``max_tokens`` 4096 of
which most is reasoning, 2000 requests at once on a $100 balance, a $100 cap. The 2026 account holds
each request's worst case against an in-flight budget, a share of the balance left
(``--in-flight-share``, 0.1 here: the docs give no figure; at 2000 x $0.0129 = $26 of worst cases
in flight against $10 it binds from the first wave, as the issue says it does).

What is scaled, and by how much (printed with the result):

- tokens and dollars by ``--scale`` (16): ``max_tokens`` 4096/16, the answers' median 2048/16,
  the cap, the balance and the in-flight budget /16, prompts short (a sentence of the seed text),
  so the ratio of the worst cases in flight to the budget stays what it is unscaled (printed);
  the number of requests the money buys does not change;
- time by ``--speed`` (40): the fake's latency and throughput per provider (the snapshot's
  ``latency_last_30m`` / ``throughput_last_30m`` percentiles, drawn per request) run that much
  faster, and so do the run's own waits (``Retry-After``, backoff: ``sleep`` is scaled alike) and
  the fake's settlement window (``--settle-s`` 2 s, scaled).

It must finish with no row failed, stop ``budget`` (or ``done``), exit 0. Usage::

    python scripts/seed_scenario.py            # a few minutes on two cores
    python scripts/seed_scenario.py --scale 64 --speed 80   # quicker, coarser
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import re
import sys
import tempfile
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from openrouter_probe.fake import serve  # noqa: E402
from openrouter_probe.generation import generate  # noqa: E402

SEED = Path("/work/shared/seed")
POLICY = ROOT / "policies" / "kimi-k2.5.yaml"
DATASETS = [f"B{n}" for n in range(3, 9)]
#: the unscaled seed job
CONCURRENCY, BUDGET_USD, MAX_TOKENS, MEDIAN_TOKENS = 2000, 100, 4096, 2048


def _sentences() -> list[str]:
    """Prompts: the sentences of the seed text (a fixed fallback where it is not present)."""
    text = " ".join(p.read_text(errors="replace") for p in sorted(SEED.glob("*.txt")))
    found = [s.strip() for s in re.split(r"(?<=[.?!])\s+", text) if 40 <= len(s.strip()) <= 200]
    return found or [f"Explain step {i} of training a speculative decoder." for i in range(50)]


def _write_prompts(path: Path, rows: int) -> None:
    sentences = _sentences()
    with path.open("w") as out:
        for i in range(rows):
            prompt = f"Think it through, then explain: {sentences[i % len(sentences)]} ({i})"
            row = {"id": f"s{i}", "dataset": DATASETS[i % len(DATASETS)], "prompt": prompt}
            out.write(json.dumps(row) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=16.0, help="tokens and dollars / this")
    parser.add_argument("--speed", type=float, default=40.0, help="time compression")
    parser.add_argument("--rows", type=int, default=0, help="0: enough to outlast the budget")
    parser.add_argument("--concurrency", type=int, default=CONCURRENCY)
    parser.add_argument("--in-flight-share", type=float, default=0.1)
    parser.add_argument("--settle-s", type=float, default=2.0, help="unscaled seconds")
    parser.add_argument(
        "--faults",
        default="upstream_429:chutes/int4=0.05",
        help="the fake's faults ('' for none): by default Chutes, first of the order, is "
        "rate limited upstream on 5%% of requests, so OpenRouter's fallback serves those "
        "from the next providers at their own latencies",
    )
    parser.add_argument("--seed", type=int, default=31)
    args = parser.parse_args()
    os.environ.setdefault("OPENROUTER_API_KEY", "sk-fake-seed-scenario")
    logging.basicConfig(level=logging.ERROR)
    k, speed = args.scale, args.speed
    budget = Decimal(BUDGET_USD) / Decimal(str(k))
    max_tokens, median = max(1, round(MAX_TOKENS / k)), max(2, round(MEDIAN_TOKENS / k))
    rows = args.rows or 40000  # the money buys about 20000 requests at any --scale

    async def scaled_sleep(seconds: float) -> None:
        await asyncio.sleep(seconds / speed)

    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        _write_prompts(tmp / "prompts.jsonl", 1)
        with serve(speed=0, seed=args.seed, in_flight_usd=1000) as probe:  # one request's hold
            asyncio.run(
                generate(
                    tmp / "prompts.jsonl",
                    policy=POLICY,
                    out=tmp / "one.jsonl",
                    base_url=probe.base_url,
                    budget_usd=budget,
                    max_tokens=max_tokens,
                )
            )
            one = probe.fake.limits.most_held_usd
        _write_prompts(tmp / "prompts.jsonl", rows)
        options: dict[str, Any] = {
            "speed": speed,
            "seed": args.seed,
            "credit_usd": budget,
            "in_flight_share": args.in_flight_share,
            "in_flight_settle_s": args.settle_s / speed,
            "median_tokens": median,
            "faults": args.faults or None,
        }
        with serve(**options) as fake:
            started = time.monotonic()
            s: Any = asyncio.run(
                generate(
                    tmp / "prompts.jsonl",
                    policy=POLICY,
                    out=tmp / "out.jsonl",
                    base_url=fake.base_url,
                    concurrency=args.concurrency,
                    budget_usd=budget,
                    max_tokens=max_tokens,
                    sleep=scaled_sleep,
                )
            )
            took = time.monotonic() - started
            limits = fake.fake.limits
            billed = fake.ledger.total_usd
            served: dict[str, int] = {}
            for entry in fake.ledger.entries:
                served[entry.provider] = served.get(entry.provider, 0) + 1
    refused = limits.refused
    share = refused / max(1, s.requests)
    print(
        f"seed scenario: {rows} rows in {len(DATASETS)} datasets, concurrency "
        f"{args.concurrency}, cap ${budget:.4f} (= ${BUDGET_USD} / {k:g}), max_tokens "
        f"{max_tokens} (= {MAX_TOKENS} / {k:g}), answers' median {median} tokens; the fake at "
        f"speed {speed:g} (latency, throughput and every wait {speed:g}x faster), in-flight "
        f"budget {args.in_flight_share:g} of the balance left, settling {args.settle_s:g} s, "
        f"faults {args.faults or 'none'}"
    )
    start = budget * Decimal(str(args.in_flight_share))
    print(
        f"{args.concurrency} requests' worst case ${one * args.concurrency:.4f} (the fake's hold "
        f"${one:.6f} each) against an in-flight budget of ${start:.4f} at the start: "
        f"{one * args.concurrency / start:.2f}x (unscaled: 2000 x $0.0123 = $24.6 against $10)"
    )
    print(
        f"stop {s.stop_reason} ({s.message[:120]}), exit {s.exit_code}; ok {s.ok}, truncated "
        f"{s.truncated}, failed {s.failed}, not sent {s.not_sent}"
    )
    print(
        f"attempts {s.requests}; in-flight 402s {refused} ({share:.2%}; the run counted "
        f"{s.in_flight_refusals}); billed ${billed:.4f} of the ${budget:.4f} cap "
        f"({billed / budget:.2%}; x{k:g}: ${billed * Decimal(str(k)):.2f} of ${BUDGET_USD}); "
        f"held in flight at most ${limits.most_held_usd:.4f} (the fake) / ${s.held_max_usd:.4f} "
        f"(the run); {took:.0f} s wall, {took * speed / 60:.0f} min of the job's time"
    )
    print("served: " + ", ".join(f"{p} {n}" for p, n in sorted(served.items())))
    good = s.exit_code == 0 and s.failed == 0 and s.stop_reason in ("budget", "done")
    return 0 if good and billed <= budget else 1


if __name__ == "__main__":
    raise SystemExit(main())

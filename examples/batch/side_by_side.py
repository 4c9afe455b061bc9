"""The same prompts sync and through the Batch API, on the fake OpenRouter, priced by its ledger.

Kimi K3 (examples/batch/kimi-k3.snapshot.json, reconstructed) lists a Together ``:batch`` row at
half its sync price. This script compiles the policy (its ``batch:`` block pins that row), runs the
prompts sync with the generator (``orp.generate``), then again with ``batch=True``
(``generate --batch``: the same output lines, journal and cap, sent as one batch through the
Batch API), and compares what the fake's ledger billed for each half.

The fake's clock is a manual one, and the batch run's sleep moves it: the batch's polls pass at
once, without the 7-minute wait a real batch takes.

    python examples/batch/side_by_side.py            # in a temp folder; or: ... WORKDIR
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from decimal import Decimal
from pathlib import Path

import openrouter_probe as orp
from openrouter_probe.fake import ManualClock
from openrouter_probe.rules.batch import describe_batch

HERE = Path(__file__).resolve().parent
SNAPSHOT = HERE / "kimi-k3.snapshot.json"
SPEC = HERE / "kimi-k3.spec.yaml"
PROMPTS = HERE / "prompts.jsonl"
MAX_TOKENS = 256
KEY = "sk-fake-side-by-side"


async def run(workdir: Path) -> int:
    snap = orp.load_snapshot(SNAPSHOT)
    print(f"1. snapshot: {snap!r}; {describe_batch(snap.batch, snap.model)}")
    policy = orp.compile_policy(orp.load_spec(SPEC), snap)
    policy_path = policy.save(workdir / "kimi-k3.yaml")
    batch_provider = policy.batch_provider()
    print(f"2. policy:   sync {policy.provider.to_request()}; batch {batch_provider}")

    clock = ManualClock(time.time())

    async def sleep(seconds: float) -> None:  # the batch's polls move the fake's clock
        clock.advance(seconds)
        await asyncio.sleep(0)

    with orp.fake.serve(snap, speed=0, seed=7, clock=clock) as fake:
        common = {"policy": policy_path, "max_tokens": MAX_TOKENS, "budget_usd": "5"}
        common |= {"api_key": KEY, "base_url": fake.base_url}
        sync = await orp.generate(PROMPTS, out=workdir / "sync.jsonl", **common)
        sync_usd = fake.ledger.total_usd
        answered = sync.ok + sync.truncated
        print(f"3. sync:     {answered} rows, ${sync_usd:.6f} in the fake's ledger")

        batch = await orp.generate(
            PROMPTS, out=workdir / "batch.jsonl", batch=True, sleep=sleep, clock=clock.now, **common
        )
        batch_usd = fake.ledger.total_usd - sync_usd
        (job,) = fake.fake.batches.batches.values()
        rows = batch.ok + batch.truncated
        print(
            f"4. batch:    {job.id} {job.status} on {', '.join(batch.providers)}: {rows} rows, "
            f"${batch.spent_usd:.6f} in the books, ledger ${batch_usd:.6f}"
        )
    ratio = batch_usd / sync_usd if sync_usd else Decimal(0)
    print(f"5. ratio:    batch / sync = {ratio:.3f} (the listed :batch price is half the sync one)")
    same = batch.spent_usd == batch_usd  # the rows' shares sum to the batch's usage.cost
    return 0 if same and rows == answered else 1


def main() -> int:
    if len(sys.argv) > 1:
        workdir = Path(sys.argv[1])
        workdir.mkdir(parents=True, exist_ok=True)
        return asyncio.run(run(workdir))
    with tempfile.TemporaryDirectory() as tmp:
        return asyncio.run(run(Path(tmp)))


if __name__ == "__main__":
    sys.exit(main())

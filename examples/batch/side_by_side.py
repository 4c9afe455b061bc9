"""The same prompts sync and through the Batch API, on the fake OpenRouter, priced by its ledger.

Kimi K3 (examples/batch/kimi-k3.snapshot.json, reconstructed) lists a Together ``:batch`` row at
half its sync price. This script compiles the policy (its ``batch:`` block pins that row), runs the
prompts sync with the generator (``orp.generate``), then submits them as one batch with the Batch
API client, and compares what the fake's ledger billed for each half.

The batch half drives ``openrouter_probe.api.batches.BatchClient`` directly: ``generate --batch``
(the batch sender, issue 25 part 3) will replace it. The fake's clock is a manual one moved by
hand, so the batch finishes without the 7-minute wait a real one takes.

    python examples/batch/side_by_side.py            # in a temp folder; or: ... WORKDIR
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from decimal import Decimal
from pathlib import Path

import openrouter_probe as orp
from openrouter_probe.api.batches import BatchClient
from openrouter_probe.fake import ManualClock

HERE = Path(__file__).resolve().parent
SNAPSHOT = HERE / "kimi-k3.snapshot.json"
SPEC = HERE / "kimi-k3.spec.yaml"
PROMPTS = HERE / "prompts.jsonl"
MAX_TOKENS = 256
KEY = "sk-fake-side-by-side"


async def run(workdir: Path) -> int:
    snap = orp.load_snapshot(SNAPSHOT)
    print(f"1. snapshot: {snap!r}; {snap.batch.describe() if snap.batch else 'no batch data'}")
    policy = orp.compile_policy(orp.load_spec(SPEC), snap)
    policy_path = policy.save(workdir / "kimi-k3.yaml")
    batch_provider = policy.batch_provider()
    print(f"2. policy:   sync {policy.provider.to_request()}; batch {batch_provider}")

    rows = [json.loads(line) for line in PROMPTS.read_text(encoding="utf-8").splitlines()]
    clock = ManualClock()
    with orp.fake.serve(snap, speed=0, seed=7, clock=clock) as fake:
        sync = await orp.generate(
            PROMPTS,
            policy=policy_path,
            out=workdir / "sync.jsonl",
            max_tokens=MAX_TOKENS,
            budget_usd="5",
            api_key=KEY,
            base_url=fake.base_url,
        )
        sync_usd = fake.ledger.total_usd
        answered = sync.ok + sync.truncated
        print(f"3. sync:     {answered} rows, ${sync_usd:.6f} in the fake's ledger")

        with BatchClient(api_key=KEY, base_url=fake.base_url) as batches:
            requests = [
                {
                    "custom_id": r["id"],
                    "body": {"messages": r["messages"], "max_tokens": MAX_TOKENS},
                }
                for r in rows
            ]
            job = batches.create(model=snap.model, requests=requests, provider=batch_provider)
            clock.advance(fake.fake.batches.batch_seconds + 10)
            done = batches.get(job.id)
        batch_usd = fake.ledger.total_usd - sync_usd
        print(
            f"4. batch:    {job.id} {done.status} on {done.provider}: "
            f"{done.request_counts.completed} rows, usage.cost ${done.cost_usd:.6f}, "
            f"ledger ${batch_usd:.6f}"
        )
    ratio = batch_usd / sync_usd if sync_usd else Decimal(0)
    print(f"5. ratio:    batch / sync = {ratio:.3f} (the listed :batch price is half the sync one)")
    same = abs(Decimal(str(done.cost_usd)) - batch_usd) < Decimal("0.000001")
    return 0 if same and done.request_counts.completed == len(rows) else 1


def main() -> int:
    if len(sys.argv) > 1:
        workdir = Path(sys.argv[1])
        workdir.mkdir(parents=True, exist_ok=True)
        return asyncio.run(run(workdir))
    with tempfile.TemporaryDirectory() as tmp:
        return asyncio.run(run(Path(tmp)))


if __name__ == "__main__":
    sys.exit(main())

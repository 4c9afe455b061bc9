"""The whole job as a dry run, offline: plan, compile, a capped run on the fake, resume, audit, export.

Run it from the repository root (no network, no key)::

    python examples/dry_run.py [WORKDIR]

Every step uses the public API on the bundled Kimi K2.5 snapshot (reconstructed, not a live
capture) and the fake OpenRouter on loopback, which routes each request with the same routing model
and bills at the snapshot's prices into its own ledger. The run is interrupted by its budget, then
resumed with a larger one: nothing finished is sent again, and the client's recorded spend equals
the fake's ledger. Point ``OPENROUTER_BASE_URL`` at the real API (and drop the fake) for the real job.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from decimal import Decimal
from pathlib import Path

import openrouter_probe as orp
from openrouter_probe.generation.audit import audit
from openrouter_probe.generation.export import export

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PROMPTS = HERE / "prompts.jsonl"
SPEC = ROOT / "policies" / "kimi-k2.5.spec.yaml"


async def run(workdir: Path) -> int:
    snap = orp.bundled_snapshot("moonshotai/kimi-k2.5")
    print(f"1. snapshot: {snap!r}")

    plan = orp.plan_budget(
        snap, budget_usd=100, output_tokens="60M", datasets=6, reasoning_share=(0.5, 0.8)
    )
    print(f"2. budget:   {plan.headline}")

    policy = orp.compile_policy(orp.load_spec(SPEC), snap)
    policy_path = policy.save(workdir / "kimi-k2.5.yaml")
    print(f"3. policy:   {policy_path.name} admits {', '.join(policy.admitted)}")

    out = workdir / "out.jsonl"
    with orp.fake.serve(snap, speed=0, seed=7) as fake:
        common = dict(
            policy=policy_path,
            out=out,
            max_tokens=512,
            concurrency=8,
            reasoning_effort="high",
            turns="all",  # the multi-turn rows: every assistant turn regenerated, in order
            api_key="sk-fake-dry-run",
            base_url=fake.base_url,
        )
        dry = await orp.generate(PROMPTS, dry_run=True, **common)
        print(
            f"4. dry run:  {dry.rows_to_send} rows, {dry.turns_to_send} requests (--turns all), "
            f"worst case ${dry.worst_case_usd:.4f}"
        )

        first = await orp.generate(PROMPTS, budget_usd="0.004", **common)
        print(
            f"5. run 1:    stopped by '{first.stop_reason}' after {first.ok + first.truncated} rows, "
            f"${first.spent_total_usd:.6f} of ${first.budget_usd}"
            + (f" ({first.rows_partial} stopped mid-way)" if first.rows_partial else "")
        )
        second = await orp.generate(PROMPTS, budget_usd="1", **common)
        print(
            f"6. resumed:  {second.rows_already_done} rows skipped, {second.rows_to_send} sent "
            f"({second.ok} ok, {second.truncated} cut at max_tokens), "
            f"stop '{second.stop_reason}', total ${second.spent_total_usd:.6f}"
        )
        ledger_usd = Decimal(str(fake.ledger.total_usd))

    recorded = second.spent_total_usd
    print(f"7. money:    recorded ${recorded:.6f}, fake ledger ${ledger_usd:.6f}")

    report = audit([out], policy=policy_path, snapshot=snap)
    print("8. audit:    " + report.render_notes().replace("\n", "\n            "))

    # SpecForge's regenerated-data shape: with --turns all every assistant turn is the model's
    # (docs/training-data.md); rows cut at max_tokens are left out.
    target = workdir / "drafter.specforge.jsonl"
    summary = export([out], fmt="specforge", output=target, require_reasoning=True)
    print(
        f"9. export:   {summary.written} SpecForge rows -> {target} "
        f"({sum(summary.left_out.values())} left out, {sum(summary.not_answered.values())} "
        "not answered)"
    )

    ok = abs(recorded - ledger_usd) < Decimal("0.000001") and report.exit_code == 0
    return 0 if ok else 1


def main() -> int:
    if len(sys.argv) > 1:
        workdir = Path(sys.argv[1])
        workdir.mkdir(parents=True, exist_ok=True)
        return asyncio.run(run(workdir))
    with tempfile.TemporaryDirectory(prefix="orp-dry-run-") as tmp:
        return asyncio.run(run(Path(tmp)))


if __name__ == "__main__":
    sys.exit(main())

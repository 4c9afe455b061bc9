"""Measure the sampled arm's error rates on the fake OpenRouter, with the whole check around it.

Each seed starts a fake server (``speed=0``, the bundled Kimi K2.5 snapshot, ``--noise`` on
every endpoint, the reference included) and checks the five INT4 endpoints against the first
party on ``--n`` arith prompts (the reference sent twice) with ``sampling="job"``: the plan
chooses the sampled arm's N for a ``--budget-usd`` check (temperature 0.6, top_p 0.95, Kimi
K2.5's card without thinking), and every test, the MMD test among them, is judged in one Holm
family, as ``verify`` does.

- ``null``: nothing degraded: any ``differs`` among the five is a family-wise false positive;
- ``sampling``: ``chutes/int4`` samples at ``--factor`` (1.3) times the asked temperature
  (``--degrade-sampling``: the same greedy answers) and ``deepinfra/int4`` renders another chat
  template (``--degrade-template``, 12 more prompt tokens); the other three untouched.

The requests go over HTTP to the fake from a lean aiohttp loop and the responses through the
seam (``Observation.from_completion`` -> ``build_report``); the spend journal is left out (it
changes nothing judged). Prints the table in ``docs/verify.md`` ("The sampled arm") with a 95%
Clopper-Pearson interval for each rate.

    python benchmarks/verify_sampled_rates.py --scenarios null --seeds 200
    python benchmarks/verify_sampled_rates.py --scenarios sampling --seeds 50
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import time
from collections import defaultdict
from typing import Any

import aiohttp

import openrouter_probe as orp
from openrouter_probe.rules.snapshot import bundled_snapshot
from openrouter_probe.verify.observation import Observation
from openrouter_probe.verify.plan import VerifyPlan, plan_verify
from openrouter_probe.verify.report import VerifyReport, build_report
from openrouter_probe.verify.stats import clopper_pearson
from openrouter_probe.verify.suites import arith_suite

SNAP = bundled_snapshot("moonshotai/kimi-k2.5")
INT4 = [e.tag for e in SNAP.endpoints if e.quantization == "int4" and e.slug != "moonshotai"]
HOT, TEMPLATE = "chutes/int4", "deepinfra/int4"


async def _send(base_url: str, plan: VerifyPlan, concurrency: int) -> list[Observation]:
    """Post every body of the plan (both arms) and read the answers as observations."""
    queue: asyncio.Queue[tuple[str, int, str, dict[str, Any]]] = asyncio.Queue()
    for tag in plan.pinned:
        runs = plan.repeats if tag == plan.reference else 1
        for item_id, body in plan.bodies(tag):
            for run in range(1, runs + 1):
                queue.put_nowait((tag, run, item_id, body))
        for item_id, body in plan.sampled_bodies(tag):
            queue.put_nowait((tag, 1, item_id, body))
    out: list[Observation] = []
    headers = {"Authorization": "Bearer sk-fake"}
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector, headers=headers) as session:

        async def worker() -> None:
            while not queue.empty():
                tag, run, item_id, body = queue.get_nowait()
                async with session.post(f"{base_url}/chat/completions", json=body) as response:
                    answer = await response.json(content_type=None)
                obs = Observation.from_completion(tag, item_id, answer)
                out.append(dataclasses.replace(obs, repeat=run))

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return out


def _check(seed: int, scenario: str, args: argparse.Namespace) -> tuple[VerifyPlan, VerifyReport]:
    plan = plan_verify(
        SNAP.endpoints,
        model=SNAP.model,
        tags=INT4,
        items=arith_suite(args.n, seed=seed),
        sampling="job",
        budget_usd=args.budget_usd,
    )
    faults: dict[str, Any] = {}
    if scenario == "sampling":
        faults = {"degrade_sampling": {HOT: args.factor}, "degrade_template": {TEMPLATE: 12}}
    with orp.fake.serve(SNAP, speed=0, seed=seed, noise=args.noise, **faults) as fake:
        observations = asyncio.run(_send(fake.base_url, plan, args.concurrency))
    return plan, build_report(plan, observations)


def _rate(hits: int, total: int) -> str:
    ci = clopper_pearson(hits, total)
    return f"{hits}/{total} = {hits / total:.3f} [{ci.low:.3f}, {ci.high:.3f}]"


def _tally(report: VerifyReport, scenario: str, counts: dict[str, list[int]]) -> None:
    any_differs = False
    for r in report.results:
        if r.comparison is None:
            continue
        tests = {t.name: t for t in r.tests}
        mmd = tests.get("sampled_mmd")
        differs = r.comparison.verdict.startswith("differs")
        by_mmd = mmd is not None and mmd.verdict == "differs"
        tokens = tests.get("prompt_tokens")
        named = tokens is not None and tokens.verdict == "differs"
        role = "native"
        if scenario == "sampling" and r.tag == HOT:
            role = "hot"
        elif scenario == "sampling" and r.tag == TEMPLATE:
            role = "template"
        for key, hit in (
            (f"{role}: differs", differs),
            (f"{role}: sampled_mmd differs", by_mmd),
            (f"{role}: prompt tokens named", named),
        ):
            counts[key][0] += hit
            counts[key][1] += 1
        any_differs |= differs and role == "native"
    counts[f"{scenario}: any native differs"][0] += any_differs
    counts[f"{scenario}: any native differs"][1] += 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--n", type=int, default=200, help="arith prompts per seed")
    parser.add_argument("--noise", type=float, default=0.02)
    parser.add_argument("--factor", type=float, default=1.3)
    parser.add_argument("--budget-usd", type=float, default=5.0)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--scenarios", default="null,sampling", help="null, sampling")
    args = parser.parse_args()
    scenarios = [s.strip() for s in args.scenarios.split(",") if s.strip()]
    unknown = sorted(set(scenarios) - {"null", "sampling"})
    if unknown:
        parser.error(f"--scenarios: unknown {unknown}; use null, sampling")
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    started = time.perf_counter()
    plan = None
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        for scenario in scenarios:
            plan, report = _check(seed, scenario, args)
            _tally(report, scenario, counts)
        print(f"seed {seed} done ({time.perf_counter() - started:.0f} s)", flush=True)
    assert plan is not None and plan.sampled is not None
    arm = plan.sampled
    print(
        f"\n{args.seeds} seeds from {args.first_seed}, n={args.n} arith prompts, noise "
        f"{args.noise:g}, five INT4 endpoints against moonshotai/int4, alpha 0.05; sampled arm "
        f"n={arm.n} x {len(arm.prompts)} prompts per endpoint (planned power {arm.power:.0%} "
        f"at {arm.factor:g}x), worst case ${plan.worst_case_usd:.4f} of ${args.budget_usd:g}\n"
    )
    print("| condition | rate [95% interval] |")
    print("|---|---|")
    for key in sorted(counts):
        print(f"| {key} | {_rate(*counts[key])} |")
    print(f"\n{time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()

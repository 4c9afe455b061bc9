"""Measure the precision check's error rates on the fake OpenRouter: false positives under noise,
detection of degradations, over many seeds.

Each seed starts three fake servers (``speed=0``, the bundled Kimi K2.5 snapshot, ``--noise``
on every endpoint, the reference included) and checks the five INT4 endpoints against the first
party on ``--n`` arith and ``--tools`` tool-call prompts, the reference sent twice:

- ``null``: nothing degraded: any ``differs`` is a family-wise false positive;
- ``degrade``: ``deepinfra/int4``, ``siliconflow/int4`` and ``atlas-cloud/int4`` degraded at 2, 5 and
  10% (``--degrade``: answer tokens flip at that rate, so arith accuracy drops by about as much),
  ``chutes/int4`` and ``parasail/int4`` untouched;
- ``flip_tools``: ``siliconflow/int4`` flipped 10% each way (``--degrade-flip``: the same accuracy,
  other items right), ``atlas-cloud/int4`` with 20% of its tool calls broken (``--degrade-tools``),
  the other three untouched.

The requests go over HTTP to the fake from a lean aiohttp loop and the responses through the seam
(``Observation.from_completion`` -> ``build_report``), the same judging ``verify`` does; the
generator's spend journal is left out because it changes nothing judged and would make 20 seeds
take an hour. Prints the table that ``docs/verify.md`` shows, with a 95% Clopper-Pearson interval
for each rate, and checks that no ``consistent`` verdict has an interval past the tolerance.

    python benchmarks/verify_rates.py [--seeds 20] [--n 500] [--tools 300] [--noise 0.02]
    python benchmarks/verify_rates.py --scenarios null --seeds 200   # the false-positive rate alone
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
from openrouter_probe.verify.plan import plan_verify
from openrouter_probe.verify.report import VerifyReport, build_report
from openrouter_probe.verify.stats import clopper_pearson
from openrouter_probe.verify.suites import arith_suite, tools_suite

SNAP = bundled_snapshot("moonshotai/kimi-k2.5")
INT4 = [e.tag for e in SNAP.endpoints if e.quantization == "int4" and e.slug != "moonshotai"]
SCENARIOS: dict[str, dict[str, Any]] = {
    "null": {},
    "degrade": {
        "degrade": {"deepinfra/int4": 0.02, "siliconflow/int4": 0.05, "atlas-cloud/int4": 0.10}
    },
    "flip_tools": {
        "degrade_flip": {"siliconflow/int4": 0.10},
        "degrade_tools": {"atlas-cloud/int4": 0.20},
    },
}
#: (scenario, endpoint) -> the condition it stands for; endpoints not named are undegraded
CONDITIONS = {
    ("degrade", "deepinfra/int4"): "degrade 2 pp",
    ("degrade", "siliconflow/int4"): "degrade 5 pp",
    ("degrade", "atlas-cloud/int4"): "degrade 10 pp",
    ("flip_tools", "siliconflow/int4"): "flip 10% each way",
    ("flip_tools", "atlas-cloud/int4"): "tools 20% broken",
}


async def _send(base_url: str, plan: Any, concurrency: int) -> list[Observation]:
    """Post every (endpoint, run, item) body and read the answers as observations."""
    jobs = []
    for tag in plan.pinned:
        runs = plan.repeats if tag == plan.reference else 1
        for item_id, body in plan.bodies(tag):
            jobs.extend((tag, run, item_id, body) for run in range(1, runs + 1))
    queue: asyncio.Queue[tuple[str, int, str, dict[str, Any]]] = asyncio.Queue()
    for job in jobs:
        queue.put_nowait(job)
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


def _check(seed: int, scenario: str, args: argparse.Namespace) -> VerifyReport:
    items = arith_suite(args.n, seed=seed) + tools_suite(args.tools, seed=seed)
    plan = plan_verify(SNAP.endpoints, model=SNAP.model, tags=INT4, items=items)
    options = SCENARIOS[scenario]
    with orp.fake.serve(SNAP, speed=0, seed=seed, noise=args.noise, **options) as fake:
        observations = asyncio.run(_send(fake.base_url, plan, args.concurrency))
    return build_report(plan, observations)


def _rate(hits: int, total: int) -> str:
    ci = clopper_pearson(hits, total)
    return f"{hits}/{total} = {hits / total:.2f} [{ci.low:.2f}, {ci.high:.2f}]"


def _tally(report: VerifyReport, scenario: str, counts: dict[str, list[int]]) -> int:
    """Count one report into ``counts`` (condition -> [hits, total]); return the consistent
    verdicts whose interval reaches past the tolerance (must be 0)."""
    wrong = 0
    flagged_null = False
    for r in report.results:
        c = r.comparison
        if c is None:
            continue
        if c.verdict == "consistent" and not all(t.within for t in c.tests):
            wrong += 1
        condition = CONDITIONS.get((scenario, r.tag))
        # a rejection: "differs" or "differs, within tolerance" (the table counts both)
        differs = c.verdict.startswith("differs")
        if condition is None:
            counts["undegraded endpoint: differs"][0] += differs
            counts["undegraded endpoint: differs"][1] += 1
            counts["undegraded endpoint: consistent"][0] += c.verdict == "consistent"
            counts["undegraded endpoint: consistent"][1] += 1
            flagged_null |= differs and scenario == "null"
            continue
        counts[f"{condition}: differs"][0] += differs
        counts[f"{condition}: differs"][1] += 1
        rejected = {t.measure.name for t in c.tests if t.p_adjusted <= report.alpha}
        for name in sorted(rejected):
            counts[f"{condition}: flagged by {name}"][0] += 1
        for name in {t.measure.name for t in c.tests}:
            counts[f"{condition}: flagged by {name}"][1] += 1
        gaps = counts.setdefault(f"{condition}: mean accuracy gap (x1000)", [0, 0])
        gaps[0] += round(1000 * (c.counts.gap or 0.0))
        gaps[1] += 1
    if scenario == "null":
        counts["null: any differs (family-wise)"][0] += flagged_null
        counts["null: any differs (family-wise)"][1] += 1
    return wrong


COLUMNS = ("accuracy", "agreement", "tool_trigger", "tool_schema", "tool_arguments")


def _table(counts: dict[str, list[int]]) -> list[str]:
    """One row per condition: how often it was called ``differs`` (with a 95% interval), by which
    measures, and the mean accuracy gap observed."""
    lines = [
        "| condition | differs [95% interval] | flagged by: accuracy | agreement | tool trigger "
        "| tool schema | tool arguments | mean accuracy gap |",
        "|---|---|---|---|---|---|---|---|",
    ]
    conditions = sorted({k.split(": ")[0] for k in counts if not k.startswith(("null", "undeg"))})
    for condition in conditions:
        hits, total = counts[f"{condition}: differs"]
        flagged = []
        for name in COLUMNS:
            h, t = counts.get(f"{condition}: flagged by {name}", [0, 0])
            flagged.append(f"{h}/{t}" if t else "-")
        gap = counts[f"{condition}: mean accuracy gap (x1000)"]
        lines.append(
            f"| {condition} | {_rate(hits, total)} | "
            + " | ".join(flagged)
            + f" | {gap[0] / gap[1] / 10:.1f} pp |"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--n", type=int, default=500, help="arith prompts per seed")
    parser.add_argument("--tools", type=int, default=300, help="tool-call prompts per seed")
    parser.add_argument("--noise", type=float, default=0.02)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument(
        "--scenarios",
        default=",".join(SCENARIOS),
        help="comma-separated: null, degrade, flip_tools (e.g. null alone, over more seeds)",
    )
    args = parser.parse_args()
    scenarios = [s.strip() for s in args.scenarios.split(",") if s.strip()]
    unknown = sorted(set(scenarios) - set(SCENARIOS))
    if unknown:
        parser.error(f"--scenarios: unknown {unknown}; use {', '.join(SCENARIOS)}")
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    wrong = 0
    started = time.perf_counter()
    for seed in range(args.seeds):
        for scenario in scenarios:
            wrong += _tally(_check(seed, scenario, args), scenario, counts)
        print(f"seed {seed} done ({time.perf_counter() - started:.0f} s)", flush=True)
    print(
        f"\n{args.seeds} seeds, n={args.n} arith + {args.tools} tool prompts, noise "
        f"{args.noise:g}, five INT4 endpoints against moonshotai/int4 (sent twice), alpha 0.05\n"
    )
    if "null" in scenarios:
        null = counts["null: any differs (family-wise)"]
        print(f"family-wise false positives, nothing degraded: {_rate(*null)} of the seeds")
    for key in ("undegraded endpoint: differs", "undegraded endpoint: consistent"):
        print(f"{key}: {_rate(*counts[key])} of the endpoint checks")
    if set(scenarios) - {"null"}:
        print()
        print("\n".join(_table(counts)))
    print(f"\nconsistent with an interval past the tolerance: {wrong}")


if __name__ == "__main__":
    main()

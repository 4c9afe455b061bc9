"""Measure the check with thinking on, as Kimi K2.5 runs, through the command, on the fake.

Each seed starts a fake server (``speed=0``, the bundled Kimi K2.5 snapshot, ``--noise`` on every
endpoint, the reference included) where ``chutes/int4`` samples at ``--factor`` (1.3) times the
asked temperature (the same greedy answers), ``deepinfra/int4`` flips ``--flip`` (5%) of its
answer tokens, and the other three INT4 endpoints are untouched. Then it runs the command as a
user would, in a child process with ``OPENROUTER_BASE_URL`` at the fake::

    openrouter-probe verify moonshotai/kimi-k2.5 --endpoints <the five> --sampling job
        --power 0.95 --budget-usd 40 --format json --quiet --out <tmp>

``--thinking`` is left at its default, ``job``: Kimi K2.5 thinks (``reasoning: {"enabled":
true}``), its samples at temperature 1.0, top_p 0.95, every ``max_tokens`` grown by the room
the pilot measured; the plan picks the sampled arm's N for ``--power``. It prints, over the seeds,
how often each endpoint is ``differs``, the untouched endpoints' family-wise false positives,
the share of samples with no answer (from the JSON), and the realised power, each rate with a
95% Clopper-Pearson interval.

    python benchmarks/verify_thinking_rates.py --seeds 10
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import openrouter_probe as orp
from openrouter_probe.rules.snapshot import bundled_snapshot
from openrouter_probe.verify.stats import clopper_pearson

MODEL = "moonshotai/kimi-k2.5"
SNAP = bundled_snapshot(MODEL)
INT4 = [e.tag for e in SNAP.endpoints if e.quantization == "int4" and e.slug != "moonshotai"]
HOT, FLIP = "chutes/int4", "deepinfra/int4"


def _run(seed: int, args: argparse.Namespace, folder: Path) -> tuple[list[dict[str, object]], str]:
    """One seed: the fake, then the command against it; its JSON rows and its plan (stderr)."""
    faults = {"degrade_sampling": {HOT: args.factor}, "degrade": {FLIP: args.flip}}
    command = [
        sys.executable, "-m", "openrouter_probe", "verify", MODEL, "--endpoints", ",".join(INT4),
        "--sampling", "job", "--power", str(args.power), "--budget-usd", str(args.budget_usd),
        "--n", str(args.n), "--suite-seed", str(seed), "--format", "json", "--quiet",
        "--out", str(folder / f"v{seed}.jsonl"), *args.extra,
    ]  # fmt: skip
    with orp.fake.serve(SNAP, speed=0, seed=seed, noise=args.noise, **faults) as fake:
        env = {**os.environ, "OPENROUTER_BASE_URL": fake.base_url, "OPENROUTER_API_KEY": "sk-fake"}
        done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise SystemExit(f"seed {seed}: exit {done.returncode}\n{done.stderr[-3000:]}")
    return json.loads(done.stdout), done.stderr


def _rate(hits: int, total: int) -> str:
    ci = clopper_pearson(hits, total)
    return f"{hits}/{total} = {hits / total:.2f} [{ci.low:.2f}, {ci.high:.2f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--n", type=int, default=200, help="arith prompts per seed")
    parser.add_argument("--noise", type=float, default=0.02)
    parser.add_argument("--factor", type=float, default=1.3)
    parser.add_argument("--flip", type=float, default=0.05)
    parser.add_argument("--power", type=float, default=0.95)
    parser.add_argument("--budget-usd", type=float, default=40.0)
    parser.add_argument("extra", nargs="*", help="more options for the command (after --)")
    args = parser.parse_args()
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    empty = answers = expected = 0
    powers: list[float] = []
    plan_text = ""
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            rows, plan = _run(seed, args, Path(tmp))
            plan_text = plan
            arm = re.search(r"(\d+) prompts x (\d+) samples per endpoint", plan)
            sent = 0 if arm is None else int(arm[1]) * int(arm[2]) * len(rows)
            expected += sent
            back = empty + answers
            untouched_differs = False
            for row in rows:
                if row["role"] != "compared":
                    empty += int(row["sampled_empty"] or 0)  # type: ignore[call-overload]
                    answers += int(row["sampled_answers"] or 0)  # type: ignore[call-overload]
                    continue
                tag = str(row["tag"])
                role = {HOT: "hot 1.3x", FLIP: f"{args.flip:.0%} tokens flipped"}.get(
                    tag, "untouched"
                )
                verdict = str(row["verdict"])
                counts[f"{role}: differs"][0] += verdict.startswith("differs")
                counts[f"{role}: differs"][1] += 1
                counts[f"{role}: consistent"][0] += verdict == "consistent"
                counts[f"{role}: consistent"][1] += 1
                untouched_differs |= role == "untouched" and verdict.startswith("differs")
                empty += int(row["sampled_empty"] or 0)  # type: ignore[call-overload]
                answers += int(row["sampled_answers"] or 0)  # type: ignore[call-overload]
                if row["sampled_power"] is not None:
                    powers.append(float(row["sampled_power"]))  # type: ignore[arg-type]
            counts["untouched: any differs (family-wise)"][0] += untouched_differs
            counts["untouched: any differs (family-wise)"][1] += 1
            print(
                f"seed {seed} done ({time.perf_counter() - started:.0f} s): "
                f"{empty + answers - back} of {sent} samples back, verdicts "
                + ", ".join(f"{r['tag']} {r['verdict']}" for r in rows if r["role"] == "compared"),
                flush=True,
            )
    print(f"\n{args.seeds} seeds from {args.first_seed}; n={args.n}, noise {args.noise:g}, power "
          f"{args.power:g}, thinking job (the default)")  # fmt: skip
    print(f"the last seed's plan (stderr):\n{plan_text}")
    print("\n| condition | rate [95% interval] |\n|---|---|")
    for key in sorted(counts):
        print(f"| {key} | {_rate(*counts[key])} |")
    total = empty + answers
    print(f"\nsamples with no answer: {empty} of {total} ({empty / max(1, total):.2%})")
    print(f"samples sent and not back (failed, not judged): {expected - total} of {expected}")
    if powers:
        print(f"realised power: min {min(powers):.0%}, mean {sum(powers) / len(powers):.0%}")
    print(f"{time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()

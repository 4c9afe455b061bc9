"""Measure the tests reported beside the verdict (issue 35 items 3, 4) on the fake OpenRouter:
K2-Vendor-Verifier's tool-call scores and the token-level logprob test, over many seeds.

Each seed starts one fake server (``speed=0``, the bundled Kimi K2.5 snapshot with every endpoint
made to list ``logprobs`` and ``top_logprobs``, ``--noise`` on every endpoint) with
``deepinfra/int4`` degraded at 5% (``--degrade``) and 80% of ``atlas-cloud/int4``'s tool calls
broken (``--degrade-tools``), and runs ``openrouter-probe verify --format json`` on the five INT4
endpoints (``--suite arith,tools --n N``). It counts, per degraded endpoint, the seeds in which
each test says ``differs`` and the verdict; and the seeds in which any test says ``differs`` on any
of the three native endpoints (a false positive).

    python benchmarks/verify_beside_rates.py [--seeds 20] [--n 40] [--noise 0.02]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections import Counter

from click.testing import CliRunner

import openrouter_probe as orp
from openrouter_probe.cli import cli
from openrouter_probe.rules.snapshot import Snapshot, bundled_snapshot

MODEL = "moonshotai/kimi-k2.5"
DEGRADED = ("deepinfra/int4", "atlas-cloud/int4")


def _snapshot() -> Snapshot:
    bundled = bundled_snapshot(MODEL)
    data = json.loads(json.dumps(bundled.data))
    for e in data["endpoints"]:
        e["supported_parameters"] = sorted({*e["supported_parameters"], "logprobs", "top_logprobs"})
    return Snapshot(bundled.model, data, bundled.taken_at, "file", "benchmark: logprobs listed")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--n", type=int, default=40)
    parser.add_argument("--noise", type=float, default=0.02)
    args = parser.parse_args()
    snap = _snapshot()
    tags = [e.tag for e in snap.endpoints if e.quantization == "int4" and e.slug != "moonshotai"]
    hits: Counter[tuple[str, str]] = Counter()
    for seed in range(args.seeds):
        with tempfile.TemporaryDirectory() as tmp:
            argv = ["verify", MODEL, "--endpoints", ",".join(tags), "--suite", "arith,tools"]
            argv += ["--n", str(args.n), "--seed", str(seed), "--budget-usd", "1", "--quiet"]
            argv += ["--format", "json", "--out", f"{tmp}/out.jsonl"]
            with orp.fake.serve(
                snap,
                speed=0,
                seed=seed,
                noise=args.noise,
                degrade={"deepinfra/int4": 0.05},
                degrade_tools={"atlas-cloud/int4": 0.8},
            ) as fake:
                env = {"OPENROUTER_API_KEY": "sk-fake", "OPENROUTER_BASE_URL": fake.base_url}
                result = CliRunner().invoke(cli, argv, env=env)
        if result.exit_code:
            raise SystemExit(result.output)
        native: set[str] = set()
        for row in json.loads(result.stdout):
            said = {t["name"] for t in row["tests"] if t["verdict"] == "differs"}
            if row["tag"] in DEGRADED:
                hits.update((row["tag"], name) for name in said)
                hits[(row["tag"], f"verdict {row['verdict']}")] += 1
            elif row["role"] != "reference":
                native |= said
        hits.update(("native (any of 3)", name) for name in native)
    for (tag, name), count in sorted(hits.items()):
        print(f"{tag:<18} {name:<28} {count}/{args.seeds}")


if __name__ == "__main__":
    main()

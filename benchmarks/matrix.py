"""Measure ``build_matrix`` for a whole models list against two baselines.

Synthetic snapshots in the bundled Kimi K2.5 snapshot's shape: ``--models`` models (default 400)
with ``--endpoints`` endpoints in all (default 1500), tags, quantizations and prices varied, model
ids mixing families the precision registry knows (so verdicts take every path) with unknown ones.

Cases, each the median of ``--runs`` runs:

- baseline ``parse``: validating every model's endpoints with pydantic (what any analysis pays);
- baseline ``frame``: ``pandas.DataFrame`` from the raw endpoint dicts (no units, no verdicts);
- ``build_matrix (parsed)``: the matrix from snapshots whose endpoints are already parsed;
- ``build_matrix (cold)``: the matrix from fresh snapshots, parsing included.

    python benchmarks/matrix.py [--models 400] [--endpoints 1500] [--runs 15]
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from openrouter_probe.analysis.matrix import build_matrix
from openrouter_probe.api.schema import ModelEndpoints
from openrouter_probe.rules.precision import default_registry
from openrouter_probe.rules.snapshot import Snapshot, bundled_snapshot

TARGET_S = 1.0
_FAMILIES = (
    "moonshotai/kimi-k2.5-v{i}",
    "qwen/qwen3-{i}b",
    "deepseek/deepseek-v3-{i}",
    "openai/gpt-oss-{i}b",
    "vendor{i}/model-{i}",
)
_QUANTS = ("int4", "fp8", "bf16", "fp4", "unknown", None)


def synthetic_documents(models: int, endpoints: int) -> list[tuple[str, dict[str, Any]]]:
    """``models`` endpoints payloads (model id, ``data``) holding ``endpoints`` endpoints in all."""
    template = bundled_snapshot("moonshotai/kimi-k2.5").data
    base = template["endpoints"]
    docs = []
    made = 0
    for m in range(models):
        model = _FAMILIES[m % len(_FAMILIES)].format(i=m)
        count = (endpoints - made) // (models - m)  # spread the total evenly
        items = []
        for k in range(count):
            e = copy.deepcopy(base[(m + k) % len(base)])
            quant = _QUANTS[(m + k) % len(_QUANTS)]
            slug = f"provider{(m * 7 + k) % 60}"
            e["tag"] = f"{slug}/{quant}" if quant and k % 2 == 0 else slug
            e["provider_name"] = slug.title()
            e["quantization"] = quant
            scale = Decimal(1) + Decimal((m + k) % 17) / 10
            e["pricing"] = {
                "prompt": str(Decimal(e["pricing"]["prompt"]) * scale),
                "completion": str(Decimal(e["pricing"]["completion"]) * scale),
                "discount": 0.1 if k == 3 else 0,
            }
            e["model_id"] = model
            items.append(e)
        made += count
        docs.append((model, {**template, "id": model, "endpoints": items}))
    return docs


def _snapshots(docs: list[tuple[str, dict[str, Any]]]) -> list[Snapshot]:
    taken_at = bundled_snapshot("moonshotai/kimi-k2.5").taken_at
    return [
        Snapshot(model=model, data=data, taken_at=taken_at, source="file", origin="synthetic")
        for model, data in docs
    ]


def _median(fn: Callable[[], object], runs: int) -> float:
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=400)
    parser.add_argument("--endpoints", type=int, default=1500)
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()

    import pandas as pd

    docs = synthetic_documents(args.models, args.endpoints)
    n_endpoints = sum(len(d["endpoints"]) for _, d in docs)
    parsed = _snapshots(docs)
    for snap in parsed:
        snap.endpoints  # noqa: B018  (parse once: the "parsed" case measures the matrix alone)
    default_registry()  # load the registry outside the timings
    frame = build_matrix(parsed)
    assert len(frame) == n_endpoints

    cases: dict[str, Callable[[], object]] = {
        "baseline: parse (pydantic)": lambda: [ModelEndpoints.model_validate(d) for _, d in docs],
        "baseline: frame (raw dicts)": lambda: pd.DataFrame(
            [e for _, d in docs for e in d["endpoints"]]
        ),
        "build_matrix (parsed)": lambda: build_matrix(parsed),
        "build_matrix (cold, parse included)": lambda: build_matrix(_snapshots(docs)),
    }
    medians = {name: _median(fn, args.runs) for name, fn in cases.items()}
    parse_s = medians["baseline: parse (pydantic)"]
    frame_s = medians["baseline: frame (raw dicts)"]
    verdicts = frame["verdict"].value_counts().to_dict()
    print(
        f"{args.models} models, {n_endpoints} endpoints, median of {args.runs} runs; "
        f"verdicts {verdicts}"
    )
    print(f"{'case':38} {'median s':>9} {'x parse':>8} {'x frame':>8}  target")
    for name, med in medians.items():
        verdict = "" if name.startswith("baseline") else ("ok" if med < TARGET_S else "OVER 1 s")
        print(f"{name:38} {med:9.4f} {med / parse_s:8.2f} {med / frame_s:8.2f}  {verdict}")


if __name__ == "__main__":
    main()

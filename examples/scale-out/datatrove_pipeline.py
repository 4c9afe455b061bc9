"""Run a generate job on datatrove's local executor (or Ray's: --executor ray): one task a rank,
each with its own output, journal and (with --key-file) its own key held by OpenRouter to its limit.

    pip install 'openrouter-probe[datatrove]'
    export OPENROUTER_MANAGEMENT_KEY=...          # a management key: it creates the keys
    openrouter-probe keys create --shards 4 --budget-usd 2 --name job -o keys.json
    python examples/scale-out/datatrove_pipeline.py PROMPTS OUTDIR --tasks 4 \\
        --policy POLICY --budget-usd 2 --key-file keys.json
    openrouter-probe keys status keys.json OUTDIR  # the keys' usage, the journals, which are live
    openrouter-probe audit OUTDIR --policy POLICY --key-file keys.json
    openrouter-probe keys revoke keys.json         # once done: the keys of ranks never finished

PROMPTS (a JSONL file: `prompt` or `messages`, optional `id` and `dataset`) is split into one file a
task by the hash of each row's id (datatrove hands each rank whole files); OUTDIR gets
`rank-0000i.jsonl` (+ `.ledger`) a rank and datatrove's logs and completion markers in
OUTDIR/logs. Rerun the same command after a crash or a kill: finished ranks are skipped
(datatrove's markers), the others resume from their journals and pay nothing twice. A rank that
ends short of its rows (the budget, its key's limit, SIGTERM) raises after writing what it has:
its task stays incomplete, and the command says why and exits 1 (a signal: 130); datatrove's
pool then ends the other running ranks with SIGTERM, each stopping as gracefully. Each rank's
key is disabled when the rank completes (--keep-keys keeps them; disabling needs
OPENROUTER_MANAGEMENT_KEY).

The same pipeline on a cluster (docs/scale-out.md):

    # Slurm: one array job of --tasks tasks, each a rank
    from datatrove.executor import SlurmPipelineExecutor
    SlurmPipelineExecutor(pipeline, tasks=4, time="24:00:00", partition="cpu", cpus_per_task=2,
                          job_name="generate", logging_dir=f"{outdir}/logs").run()

    # Ray (--executor ray; pip install 'ray[default]'): one Ray task a rank. ray.init() joins
    # RAY_ADDRESS's cluster or starts a local one; the Ray workers need the environment
    # (OPENROUTER_BASE_URL, OPENROUTER_MANAGEMENT_KEY) and the output folder. Ray's executor
    # does not raise when a task does: the ranks left incomplete are read from the completion
    # markers, each one's reason from its task log, and the command exits 1.
    from datatrove.executor import RayPipelineExecutor
    RayPipelineExecutor(pipeline, tasks=4, logging_dir=f"{outdir}/logs").run()

Without datatrove the same split is `generate --shard auto` under a Slurm array
(`sbatch --array=0-3`) or `--shard i/4` by hand.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


def split_prompts(prompts: Path, folder: Path, tasks: int) -> None:
    """One JSONL file a task, each row in the file its id hashes to (a row without an id gets
    one from its line number: the same on every rerun)."""
    from openrouter_probe.files import atomic_write_text
    from openrouter_probe.generation.prompts import shard_of

    parts: list[list[str]] = [[] for _ in range(tasks)]
    with prompts.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            row = json.loads(line)
            row.setdefault("id", f"{prompts.stem}-{number}")
            parts[shard_of(str(row["id"]), tasks)].append(json.dumps(row, ensure_ascii=False))
    folder.mkdir(parents=True, exist_ok=True)
    for i, lines in enumerate(parts):
        atomic_write_text(folder / f"part-{i:05d}.jsonl", "".join(f"{x}\n" for x in lines))


def _adapter(self: Any, data: dict[str, Any], path: str, id_in_file: int | str) -> dict[str, Any]:
    """A prompt row as a Document: `prompt` the text (a conversation: `messages` in metadata)."""
    ident = data.pop("id", f"{path}/{id_in_file}")
    text = data.pop("prompt", None) or json.dumps(data.get("messages"))
    return {"text": text, "id": ident, "metadata": data}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("prompts", type=Path)
    parser.add_argument("outdir", type=Path)
    parser.add_argument("--tasks", type=int, default=4)
    parser.add_argument("--workers", type=int, default=-1, help="tasks run at once (-1: all)")
    parser.add_argument("--policy", required=True)
    parser.add_argument("--budget-usd", required=True, help="the job's, shared by the ranks")
    parser.add_argument("--key-file", help="keys create's file: one key a rank")
    parser.add_argument("--max-tokens", type=int, default=4096)
    parser.add_argument("--concurrency", type=int, default=64, help="requests in flight a rank")
    parser.add_argument("--snapshot", help="price against this snapshot (bundled|PATH)")
    parser.add_argument(
        "--keep-keys", action="store_true", help="keep each rank's key live when it completes"
    )
    parser.add_argument(
        "--executor",
        choices=("local", "ray"),
        default="local",
        help="datatrove's executor: local (a process pool) or ray (one Ray task a rank; "
        "ray.init() joins RAY_ADDRESS's cluster, or starts a local one)",
    )
    parser.add_argument(
        "--ray-cpus", type=int, help="a local Ray cluster's CPUs (default: the machine's)"
    )
    args = parser.parse_args(argv)

    from datatrove.pipeline.readers import JsonlReader

    from openrouter_probe.generation.datatrove_step import GenerateStep, RankIncomplete

    inputs = args.outdir / "inputs"
    split_prompts(args.prompts, inputs, args.tasks)
    pipeline = [
        JsonlReader(str(inputs), adapter=_adapter, glob_pattern="part-*.jsonl"),
        GenerateStep(
            policy=args.policy,
            output=args.outdir,
            budget_usd=args.budget_usd,
            key_file=args.key_file,
            max_tokens=args.max_tokens,
            concurrency=args.concurrency,
            snapshot=args.snapshot,
            keep_keys=args.keep_keys,
        ),
    ]
    logs = str(args.outdir / "logs")
    if args.executor == "ray":
        return _run_on_ray(pipeline, args.tasks, args.workers, logs, args.ray_cpus)
    from datatrove.executor import LocalPipelineExecutor

    try:
        LocalPipelineExecutor(
            pipeline, tasks=args.tasks, workers=args.workers, logging_dir=logs
        ).run()
    except RankIncomplete as exc:  # the task stays incomplete: a rerun resumes it
        print(f"datatrove_pipeline: {exc}", file=sys.stderr)
        return 1
    return 0


def _run_on_ray(pipeline: list[Any], tasks: int, workers: int, logs: str, cpus: int | None) -> int:
    """One Ray task a rank. Ray's executor does not raise when a task does (it logs "Only N/M
    tasks completed"): the ranks left incomplete are read from datatrove's completion markers,
    and each one's reason from its task log (`logs/logs/task_0000i.log`)."""
    import ray
    from datatrove.executor import RayPipelineExecutor

    if not ray.is_initialized():
        ray.init(num_cpus=cpus, include_dashboard=False)
    executor = RayPipelineExecutor(pipeline, tasks=tasks, workers=workers, logging_dir=logs)
    executor.run()
    incomplete = executor.get_incomplete_ranks(range(tasks))
    for rank in incomplete:
        log = Path(logs) / "logs" / f"task_{rank:05d}.log"
        # datatrove's line: "... | ERROR | datatrove.executor.ray:...: - rank 0/4 ended short..."
        said = [x for x in _lines(log) if " | ERROR " in x and " ended short of its rows " in x]
        reason = said[0].split(" - ", 1)[-1] if said else f"no reason found: see {log}"
        print(f"datatrove_pipeline: rank {rank} incomplete: {reason}", file=sys.stderr)
    return 1 if incomplete else 0


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


if __name__ == "__main__":
    sys.exit(main())

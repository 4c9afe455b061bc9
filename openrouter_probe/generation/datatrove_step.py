"""A datatrove ``PipelineStep`` that runs our job on its rank: ``pip install 'openrouter-probe[datatrove]'``.

datatrove (Hugging Face) places the work: its Local, Slurm and Ray executors run one task a rank,
its readers (JSONL, Parquet, the Hub) hand each rank its files' Documents, and a rank that finished
leaves a completion marker so a rerun skips it. ``GenerateStep`` takes those Documents as prompt
rows (``Document.id`` the row id; ``text`` the prompt, or ``metadata["messages"]`` a
conversation; ``metadata["dataset"]`` the dataset) and runs ``generate`` on them, writing our
output and journal per rank (``OUTPUT/rank-00003.jsonl`` and its ``.ledger``; the rank's rows in
``OUTPUT/prompts/``): a rank killed
mid-run and rerun resumes from its journal and never pays twice. With ``key_file`` each rank
spends through its own key (``keys create --shards N`` with N the executor's ``tasks``), held by
OpenRouter to its limit; ``budget_usd`` is the job's budget, shared equally between the ranks (each
also capped by its key's limit).

It yields one Document per answered row (``text`` the answer; metadata: ``status``, ``provider``,
``cost_usd``, ``finish_reason``), so later steps (a writer, a filter) go on from there, and counts
rows and money in datatrove's stats.

Example (the local executor; ``examples/scale-out/datatrove_pipeline.py`` is the runnable one)::

    from datatrove.executor import LocalPipelineExecutor
    from datatrove.pipeline.readers import JsonlReader
    from openrouter_probe.generation.datatrove_step import GenerateStep

    LocalPipelineExecutor(
        [JsonlReader("prompts/", text_key="prompt"),
         GenerateStep(policy="policy.yaml", output="out/", budget_usd=2, key_file="keys.json")],
        tasks=4, logging_dir="out/logs",
    ).run()
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

try:
    from datatrove.data import Document
    from datatrove.pipeline.base import PipelineStep
except ImportError:  # pragma: no cover - the message is the test
    raise ImportError(
        "GenerateStep needs datatrove: pip install 'openrouter-probe[datatrove]'"
    ) from None

from openrouter_probe.files import atomic_write_text

__all__ = ["GenerateStep", "rank_output"]

log = logging.getLogger(__name__)


def rank_output(output: str | Path, rank: int) -> Path:
    """The output file of ``rank`` in the folder ``output`` (its journal beside it)."""
    return Path(output) / f"rank-{rank:05d}.jsonl"


def _row(doc: Any) -> dict[str, Any]:
    meta = doc.metadata or {}
    row: dict[str, Any] = {"id": str(doc.id)}
    if isinstance(meta.get("messages"), list):
        row["messages"] = meta["messages"]
    else:
        row["prompt"] = doc.text
    for key in ("dataset", "max_tokens", "temperature", "tools"):
        if meta.get(key) is not None:
            row[key] = meta[key]
    return row


class GenerateStep(PipelineStep):  # type: ignore[misc]  # datatrove is untyped
    """Answer each rank's Documents with ``generate`` into ``output`` (a folder), per rank.

    ``policy``: the compiled policy; ``budget_usd``: the job's, split equally between ranks;
    ``key_file``: ``keys create``'s file (one key a rank, the ranks as its shards); other keyword
    arguments go to ``generate`` as they are (``max_tokens=``, ``concurrency=``, ``snapshot=``...).
    """

    name = "openrouter-probe generate"
    type = "🤖 - GENERATE"

    def __init__(
        self,
        *,
        policy: str | Path,
        output: str | Path,
        budget_usd: float | str | Decimal | None = None,
        key_file: str | Path | None = None,
        **generate_options: Any,
    ) -> None:
        super().__init__()
        self.policy = str(policy)
        self.output = str(output)
        self.budget_usd = None if budget_usd is None else str(budget_usd)
        self.key_file = None if key_file is None else str(key_file)
        self.generate_options = generate_options

    def _budget(self, rank: int, world_size: int) -> Decimal | None:
        if self.budget_usd is None:
            return None
        from openrouter_probe.generation.keyfile import split_budget

        return split_budget(Decimal(self.budget_usd), world_size)[rank]

    def run(
        self, data: Iterator[Any] | None = None, rank: int = 0, world_size: int = 1
    ) -> Iterator[Any]:
        from openrouter_probe.generation import generate
        from openrouter_probe.generation.audit import merged_records

        out = rank_output(self.output, rank)
        out.parent.mkdir(parents=True, exist_ok=True)
        rows = [_row(doc) for doc in data or ()]
        prompts = out.parent / "prompts" / out.name  # beside, not among, the outputs
        prompts.parent.mkdir(exist_ok=True)
        # the rank's rows, as datatrove gave them (rewritten the same on a rerun: the ids resume)
        atomic_write_text(prompts, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
        self.stat_update("rows_in", value=len(rows))
        if not rows:
            return
        options = dict(self.generate_options)
        api_key = options.pop("api_key", None)
        if self.key_file is not None:
            from openrouter_probe.generation.keyfile import shard_secret

            api_key = shard_secret(self.key_file, (rank, world_size))
        summary = asyncio.run(
            generate(
                prompts,
                policy=self.policy,
                out=out,
                budget_usd=self._budget(rank, world_size),
                api_key=api_key,
                **options,
            )
        )
        if self.key_file is not None:
            from openrouter_probe.generation.keyfile import name_spent_key

            summary = name_spent_key(summary, self.key_file, (rank, world_size))
        if summary.exit_code:  # stopped short: said, not silent (a rerun resumes)
            log.warning("rank %d: %s: %s", rank, summary.stop_reason, summary.message)
        self.stat_update("requests", value=summary.requests)
        self.stat_update("spent_micro_usd", value=int(summary.spent_usd * 1_000_000))
        for record in merged_records([out]):
            if record.get("status") not in ("ok", "truncated"):
                self.stat_update(f"rows_{record.get('status')}")
                continue
            self.stat_update("rows_answered")
            yield Document(
                text=str(record.get("content") or ""),
                id=str(record["id"]),
                metadata={
                    "status": record.get("status"),
                    "provider": record.get("provider"),
                    "cost_usd": record.get("cost_usd"),
                    "finish_reason": record.get("finish_reason"),
                    "rank_output": str(out),
                },
            )

"""``generate``: the one line of a job: its plan (``GeneratePlan``), the job opened
(``generation.opening.open_job``: the prompts, the policy, the endpoints, the output so far), then
the run (``run.paid.run_job``) or the dry run (``generation.dry_run``). The package's docstring
shows a call.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

from openrouter_probe.api.backoff import Backoff
from openrouter_probe.generation.manifest import SourceOptions
from openrouter_probe.generation.opening import OpenedJob, open_job
from openrouter_probe.generation.plan import GeneratePlan
from openrouter_probe.run.config import Progress
from openrouter_probe.run.paid import run_job
from openrouter_probe.run.result import RunResult
from openrouter_probe.run.send.sender import Sender

if TYPE_CHECKING:
    from openrouter_probe.run.send.batch_plan import BatchOptions

__all__ = ["generate"]


async def generate(
    prompts: str | Path,
    *,
    policy: str | Path,
    out: str | Path,
    budget_usd: float | int | str | Decimal | None = None,
    concurrency: int = 256,
    max_tokens: int = 4096,
    target_tokens: int | str | None = None,
    pilot: int | None = None,
    stream: bool = False,
    temperature: float | None = None,
    reasoning_effort: str | None = None,
    reasoning_max_tokens: int | None = None,
    dry_run: bool = False,
    shard: str | tuple[int, int] | None = None,
    redo_failed: bool = False,
    redo_truncated: bool = False,
    lower_max_tokens: bool = False,
    weights: str | Mapping[str, float] | None = None,
    turns: str = "last",
    source: SourceOptions | None = None,
    max_wait_s: float = 60.0,
    snapshot: Any = None,
    offline: bool = False,
    api_key: str | None = None,
    base_url: str | None = None,
    attempts: int | None = None,
    read_timeout_s: float = 300.0,
    drain_timeout_s: float = 60.0,
    handle_signals: bool = False,
    progress: bool | Progress = False,
    send: Sender | None = None,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    clock: Callable[[], float] = time.monotonic,
    backoff: Backoff | None = None,
    batch: bool | BatchOptions = False,
    response_cache: bool = True,
    temperature_mix: str | Mapping[str, float] | None = None,
    reasoning_effort_mix: str | Mapping[str, float] | None = None,
    thinking_mix: str | Mapping[str, float] | None = None,
    mix_seed: int = 0,
    samples: int = 1,
    journal_header: Mapping[str, str] | None = None,
) -> RunResult:
    """Run ``prompts`` (a file, folder, ``hf:`` id or manifest) through ``policy`` into ``out``.

    Finished rows are skipped (resume); ``budget_usd`` caps the output's spend across runs, shared
    by ``weights`` (``"key"``: what the key's limit has left, read before sending; a key without a
    limit refuses the run; ``None``: no cap, warned); ``target_tokens`` stops each dataset;
    ``pilot=N`` sends the first N rows of each dataset and reports (``generation.pilot``);
    ``turns``: ``"last"`` or ``"all"``; ``batch`` (``True`` or ``BatchOptions``) uses the Batch
    API; ``temperature_mix``, ``reasoning_effort_mix``, ``thinking_mix`` (``"on=0.8,off=0.2"``)
    draw each row's sampling from ``mix_seed``; ``samples`` makes that many rows of each prompt
    (``id#k``); ``offline=True`` is the dry run on the bundled snapshot that touches no network
    (no key check); ``response_cache=False`` never asks OpenRouter's response cache;
    ``journal_header`` (``shard``, ``key_hash``) names in the journal who ran a run whose rows are
    a shard given whole (the datatrove step's rank); ``send``, ``sleep``, ``clock`` replace the
    transport, waits and time (docs/generate.md says every option and guarantee).
    Raises ``ConfigError``/``PolicyError`` before sending when the inputs are unusable."""
    # every keyword, by its name: the plan's fields are generate()'s keywords (a test holds them
    # equal), so the plan is built from them whole, in one place
    keywords = dict(locals())
    plan = GeneratePlan.of(keywords.pop("prompts"), **keywords)
    async with open_job(plan) as job:
        if job.builder is None:  # a dry run: nothing is sent
            return await _dry_run(job, plan)
        result = await run_job(
            job.paid,
            job.rows,
            builder=job.builder,
            prices=job.prices,
            before=job.before,
            header=job.header,
            turns=job.turns,
            learned=job.learned,
        )
        trial = job.pilot  # (pilot=N: what its answers teach)
        return result if trial is None else trial.report(result, plan.run, job.builder, job.prices)


async def _dry_run(job: OpenedJob, plan: GeneratePlan) -> RunResult:
    """The dry run of ``job`` (``generation.dry_run``, imported for a dry run only)."""
    from openrouter_probe.generation.dry_run import dry_run_job

    dry = await dry_run_job(job, plan)
    return dry if job.pilot is None else job.pilot.dry_run(dry, job.rows)

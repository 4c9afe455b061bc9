"""Shards from the launcher: ``shard="auto"`` (``--shard auto``) reads the rank and the world size
the engine that placed this process set, and splits the rows by the same row hash as ``i/n``.

The variables, first found wins (a Slurm array of multi-task steps is split by the array):

- ``SLURM_ARRAY_TASK_ID`` / ``SLURM_ARRAY_TASK_COUNT``: a Slurm job array (``sbatch --array=0-3``);
  the count is the array's size, ids are taken from ``SLURM_ARRAY_TASK_MIN`` on when it is set;
- ``SLURM_PROCID`` / ``SLURM_NTASKS``: the tasks of one Slurm step (``srun -n 4``);
- ``RANK`` / ``WORLD_SIZE``: torchrun, Ray's and datatrove's launchers, most MPI wrappers.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from openrouter_probe.errors import ConfigError, Message

__all__ = [
    "LAUNCHER_VARIABLES",
    "LauncherShard",
    "ShardShare",
    "shard_from_launcher",
    "shard_shares_note",
]

#: (rank variable, world size variable), in the order they are looked for
LAUNCHER_VARIABLES: tuple[tuple[str, str], ...] = (
    ("SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_COUNT"),
    ("SLURM_PROCID", "SLURM_NTASKS"),
    ("RANK", "WORLD_SIZE"),
)


@dataclass(frozen=True)
class LauncherShard:
    """This process's shard as the launcher set it, and the variables that said so."""

    index: int
    count: int
    source: str  # e.g. "SLURM_ARRAY_TASK_ID=1, SLURM_ARRAY_TASK_COUNT=4"

    @property
    def pair(self) -> tuple[int, int]:
        return self.index, self.count


def _whole(name: str, text: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise ConfigError(
            Message(
                "launcher-not-whole",
                "{shard=auto}: {name:s}={text:s} is not a whole number; fix the launcher's "
                "variable or give {shard=i/n}",
                name=name,
                text=repr(text),
            )
        ) from None


def shard_from_launcher(environ: Mapping[str, str] | None = None) -> LauncherShard:
    """Return the shard the launcher's variables give (``environ``: ``os.environ``).

    A ``ConfigError`` when none is set, when only half of a pair is, or when the rank is not
    below the world size."""
    env = os.environ if environ is None else environ
    for rank_name, size_name in LAUNCHER_VARIABLES:
        rank_text, size_text = env.get(rank_name), env.get(size_name)
        if rank_text is None and size_text is None:
            continue
        if rank_text is None or size_text is None:
            have, miss = (rank_name, size_name) if rank_text is not None else (size_name, rank_name)
            raise ConfigError(
                Message(
                    "launcher-half",
                    "{shard=auto}: {have:s} is set but {miss:s} is not; set both or give "
                    "{shard=i/n}",
                    have=have,
                    miss=miss,
                )
            )
        index, count = _whole(rank_name, rank_text), _whole(size_name, size_text)
        source = f"{rank_name}={rank_text.strip()}, {size_name}={size_text.strip()}"
        if rank_name == "SLURM_ARRAY_TASK_ID" and env.get("SLURM_ARRAY_TASK_MIN"):
            index -= _whole("SLURM_ARRAY_TASK_MIN", env["SLURM_ARRAY_TASK_MIN"])
            source += f", SLURM_ARRAY_TASK_MIN={env['SLURM_ARRAY_TASK_MIN'].strip()}"
        if count < 1 or not 0 <= index < count:
            raise ConfigError(
                Message(
                    "launcher-rank",
                    "{shard=auto}: {source:s} needs 0 <= rank < world size",
                    source=source,
                )
            )
        return LauncherShard(index, count, source)
    names = ", ".join(f"{r}/{s}" for r, s in LAUNCHER_VARIABLES)
    raise ConfigError(
        Message(
            "launcher-none",
            "{shard=auto}: no launcher variables found (looked for {names:s}); run under the "
            "launcher or give {shard=i/n}",
            names=names,
        )
    )


@dataclass(frozen=True)
class ShardShare:
    """One shard of a job in the dry run: its rows and their worst case (``None``: unknown)."""

    index: int
    count: int
    rows: int
    worst_usd: Decimal | None
    this: bool = False

    def to_dict(self) -> dict[str, Any]:
        worst = None if self.worst_usd is None else float(self.worst_usd)
        return {"shard": f"{self.index}/{self.count}", "rows": self.rows, "worst_usd": worst,
                "this": self.this}  # fmt: skip


def shard_shares_note(shares: Sequence[ShardShare], *, listed: int = 8) -> str:
    """The dry run's line for ``shares``: each shard (past ``listed`` shards: this one, the
    largest and the smallest), then the whole job."""
    from openrouter_probe.rules.quantities import format_usd

    def said(s: ShardShare) -> str:
        worst = "unknown" if s.worst_usd is None else format_usd(s.worst_usd)
        mark = " (this one)" if s.this else ""
        return f"{s.index}/{s.count}{mark} {s.rows} rows, worst {worst}"

    shown = list(shares)
    if len(shown) > listed:
        by_rows = sorted(shown, key=lambda s: (s.rows, s.index))
        keep = {s.index for s in shown if s.this} | {by_rows[0].index, by_rows[-1].index}
        shown = [s for s in shown if s.index in keep]
    known = [s.worst_usd for s in shares if s.worst_usd is not None]
    total = format_usd(sum(known, Decimal(0))) if len(known) == len(shares) else "unknown"
    head = f"the job's {len(shares)} shards (before resume): "
    rows = sum(s.rows for s in shares)
    return head + "; ".join(said(s) for s in shown) + f"; all {rows} rows, worst {total}"

"""One job's books across shards: every shard's output found (files, folders, globs), the money of
their journals summed, and checked against the usage OpenRouter reports for the job's keys.

The journals (``run.money.journal``) count every attempt at its real cost, or at its worst case while the
cost is unknown, so for one job the journals' total is at least what the keys were billed
(``counted >= billed``). Books that show the keys billed more than the journals count mean money no
journal knows (a shard run without its journal, a key used elsewhere): ``exit_code`` 1. The keys'
usage above the job's budget is the other failure (it cannot happen while every key keeps its
limit: their limits sum to at most the budget).
"""

from __future__ import annotations

import glob
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from openrouter_probe.api.keys import KeyRecord, KeysClient
from openrouter_probe.errors import ConfigError
from openrouter_probe.generation.keyfile import KeyFile, ShardKey, key_records, read_key_file
from openrouter_probe.generation.records import beside
from openrouter_probe.run.money.journal import journal_path
from openrouter_probe.run.money.replay import replay_journal

__all__ = [
    "JobBooks",
    "KeyLine",
    "expand_outputs",
    "job_books",
    "journals_money",
]

_ZERO = Decimal(0)


def _output(path: Path) -> bool:
    return path.is_file() and not beside(path) and not path.name.startswith(".")


def expand_outputs(paths: Iterable[str | Path]) -> list[Path]:
    """The output files ``paths`` name: a file as it is, a folder's ``*.jsonl`` (not its
    subfolders: a datatrove run keeps its inputs and logs there), a glob's matches; journals and
    turns files beside them are left out. A name that matches nothing is a ``ConfigError``."""
    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            matches = sorted(p for p in path.glob("*.jsonl") if _output(p))
        elif path.exists():
            matches = [path]
        else:
            matches = sorted(Path(p) for p in glob.glob(str(raw), recursive=True))
            matches = [p for p in matches if _output(p)]
        if not matches:
            raise ConfigError(f"{raw}: no output file there (give files, a folder or a glob)")
        found.extend(matches)
    return list(dict.fromkeys(found))


def journals_money(outputs: Sequence[Path]) -> tuple[Decimal, Decimal, dict[str | int, Decimal]]:
    """What the journals of ``outputs`` count as spent, how much of it is possibly billed (at its
    worst case), and what they count by whom: by the key their runs' header lines name
    (``key_hash``: ``generate --key-file`` and the datatrove step write it), else by the shard
    they name (its index: ``generate --shard i/n``, the step's rank); one whose runs name no
    shard, or two, counts in the total only (its key is then not matched, and
    ``JobBooks.unmatched`` says so). Each journal is read once, without repairing (a shard may
    still be writing)."""
    spent = possibly = _ZERO
    by: dict[str | int, Decimal] = {}
    for path in outputs:
        replay = replay_journal(journal_path(path), repair=False)
        spent += replay.spent_usd
        possibly += replay.possibly_billed_usd
        keys = {h["key_hash"] for h in replay.headers if isinstance(h.get("key_hash"), str)}
        named = {h["shard"] for h in replay.headers if h.get("shard") is not None}
        who: str | int | None = keys.pop() if len(keys) == 1 else None
        if who is None and len(named) == 1 and not keys:
            who = _shard_index(named.pop())
        if who is not None:
            by[who] = by.get(who, _ZERO) + replay.spent_usd
    return spent, possibly, by


def _shard_index(raw: object) -> int | None:
    if not isinstance(raw, str) or "/" not in raw:
        return None
    index = raw.split("/", 1)[0]
    return int(index) if index.isdigit() else None


@dataclass(frozen=True)
class KeyLine:
    """A shard's key as the server reports it (``record`` None: the server no longer has it)."""

    shard: int
    name: str
    hash: str
    limit_usd: Decimal
    record: KeyRecord | None
    #: what the journals of this key's shard count (``None``: no output given names the shard)
    journals_usd: Decimal | None = None

    @property
    def usage_usd(self) -> Decimal | None:
        return None if self.record is None else self.record.usage_usd

    @property
    def unknown_to_journals_usd(self) -> Decimal | None:
        """What the server billed this key beyond its shard's journals (``None``: not matched)."""
        usage = self.usage_usd
        if usage is None or self.journals_usd is None:
            return None
        return max(usage - self.journals_usd, _ZERO)

    @property
    def state(self) -> str:
        if self.record is None:
            return "gone"
        return "disabled" if self.record.disabled else "enabled"

    def to_dict(self) -> dict[str, Any]:
        usage = self.usage_usd
        remaining = None if self.record is None else self.record.limit_remaining_usd
        return {
            "shard": self.shard,
            "name": self.name,
            "hash": self.hash,
            "limit_usd": str(self.limit_usd),
            "usage_usd": None if usage is None else str(usage),
            "remaining_usd": None if remaining is None else str(remaining),
            "journals_usd": None if self.journals_usd is None else str(self.journals_usd),
            "state": self.state,
        }


@dataclass
class JobBooks:
    """A job's keys beside its shards' journals."""

    job: str
    budget_usd: Decimal
    shards: int
    keys: list[KeyLine] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    journals_usd: Decimal = _ZERO
    possibly_billed_usd: Decimal = _ZERO

    @property
    def keys_usage_usd(self) -> Decimal | None:
        """What OpenRouter reports the keys used (``None``: a key is gone, its usage unknown)."""
        if any(k.record is None for k in self.keys):
            return None
        return sum((k.record.usage_usd for k in self.keys if k.record), _ZERO)

    @property
    def problems(self) -> list[str]:
        out: list[str] = []
        usage = self.keys_usage_usd
        if usage is not None and self.outputs and usage > self.journals_usd:
            out.append(
                f"the keys used ${usage} but the journals count ${self.journals_usd}: "
                f"${usage - self.journals_usd} no journal knows (an output missing here, or a "
                "key used elsewhere)"
            )
        if usage is not None and usage > self.budget_usd:
            out.append(f"the keys used ${usage}, over the job's budget of ${self.budget_usd}")
        for key in self.keys:
            beyond = key.unknown_to_journals_usd
            if beyond:
                out.append(
                    f"shard {key.shard}/{self.shards}: key {key.name} used ${key.usage_usd} but "
                    f"its shard's journals count ${key.journals_usd}: ${beyond} no journal of "
                    "that shard knows (its output missing here, or the key used by another "
                    "shard)"
                )
        return out

    @property
    def unmatched(self) -> list[int]:
        """The shards whose key no output given here matches (its journals unread)."""
        return [k.shard for k in self.keys if k.journals_usd is None]

    @property
    def live(self) -> list[KeyLine]:
        """The keys still enabled: each can still spend up to its limit (``state``)."""
        return [k for k in self.keys if k.state == "enabled"]

    @property
    def exit_code(self) -> int:
        return 1 if self.problems else 0

    def key_rows(self) -> list[dict[str, Any]]:
        return [k.to_dict() for k in self.keys]

    def to_dict(self) -> dict[str, Any]:
        usage = self.keys_usage_usd
        return {
            "job": self.job,
            "budget_usd": str(self.budget_usd),
            "shards": self.shards,
            "keys": self.key_rows(),
            "keys_usage_usd": None if usage is None else str(usage),
            "outputs": self.outputs,
            "journals_usd": str(self.journals_usd),
            "possibly_billed_usd": str(self.possibly_billed_usd),
            "live": [k.name for k in self.live],
            "problems": self.problems,
        }

    def render(self) -> str:
        usage = self.keys_usage_usd
        said = "unknown (a key is gone)" if usage is None else f"${usage}"
        lines = [f"keys: {said} used of the ${self.budget_usd} budget"]
        if self.outputs:
            lines.append(
                f"journals of {len(self.outputs)} output(s): ${self.journals_usd} counted "
                f"(${self.possibly_billed_usd} of it possibly billed, at its worst case)"
            )
        if self.outputs and self.unmatched:
            lines.append(
                "no output here names shard(s) "
                + ", ".join(f"{i}/{self.shards}" for i in self.unmatched)
                + ": their keys are checked only in the job's total"
            )
        live = self.live
        if live:
            lines.append(
                f"{len(live)} of {len(self.keys)} keys still live (they can spend up to their "
                "limits; revoke them once their ranks are done):"
            )
            lines.extend(
                f"  shard {k.shard}/{self.shards}: {k.name} "
                + ("" if k.record is None else _left(k.record.limit_remaining_usd))
                for k in live
            )
        else:
            lines.append("no key is live (each one disabled or gone)")
        lines.extend(
            self.problems
            or (
                ["the keys' usage is within the journals' count"]
                if self.outputs and usage is not None
                else []
            )
        )
        return "\n".join(lines)


def _left(remaining: Decimal | None) -> str:
    return "(its remaining limit unknown)" if remaining is None else f"(${remaining} left)"


def _limit(created_usd: Decimal, record: KeyRecord | None) -> Decimal:
    """A key's limit as the server reports it (raised since, with a PATCH), else as created."""
    if record is None or record.limit_usd is None:
        return created_usd
    return record.limit_usd


def job_books(
    key_file: str | Path | KeyFile,
    outputs: Iterable[str | Path] = (),
    *,
    client: KeysClient | None = None,
) -> JobBooks:
    """The books of the job of ``key_file`` over its shards' ``outputs`` (files, folders, globs)."""
    keyfile = key_file if isinstance(key_file, KeyFile) else read_key_file(key_file)
    files = expand_outputs(outputs) if outputs else []
    spent, possibly, by = journals_money(files)
    records = key_records(keyfile, client=client)

    def counted(key: ShardKey) -> Decimal | None:  # its hash's journals and its shard's
        known = [by[who] for who in (key.hash, key.shard) if who in by]
        return sum(known, _ZERO) if known else None

    return JobBooks(
        job=keyfile.job,
        budget_usd=keyfile.budget_usd,
        shards=keyfile.shards,
        keys=[
            KeyLine(k.shard, k.name, k.hash, _limit(k.limit_usd, r), r, counted(k))
            for k, r in zip(keyfile.keys, records, strict=True)
        ],
        outputs=[str(f) for f in files],
        journals_usd=spent,
        possibly_billed_usd=possibly,
    )

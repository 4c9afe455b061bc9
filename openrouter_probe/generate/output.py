"""The output JSONL: one line per finished row, the run's only record, and how a rerun resumes.

A row is finished when its line is flushed (``files.append_line``). Lines are written in the order
rows finish, not the input order. On start, a torn last line from a crash is cut
(``files.repair_torn_tail``), then every line is read back: rows recorded as ``ok``, ``truncated`` or
``failed`` are finished and never sent again (``failed`` ones are with ``--redo-failed``); a
``cancelled`` line records a request that was in flight when the run was cancelled and that may
have been billed (``possibly_billed_usd``, its reservation): the row is sent again, and the money
counts as spent.

Spend survives restarts: the sum of every line's ``cost_usd``, ``failed_attempts_cost_usd`` and
``possibly_billed_usd``, plus what the spend journal beside the output (``ledger``) holds that no
line accounts for (requests in flight at a SIGKILL). Each line's ``run_id`` names the run that wrote
it: that line accounts for every attempt its run made for its row.

Record fields (``RECORD_FIELDS``): ``id``, ``dataset``, ``status``, ``provider``, ``model``,
``finish_reason``, ``content``, ``reasoning``, ``usage`` (as returned), ``cost_usd`` (``usage.cost``,
never recomputed), ``generation_id``, ``attempts``, ``error``, plus ``messages`` (the request's),
``tool_calls``, ``logprobs`` (``choices[0].logprobs`` when the request asked for them),
``policy_sha256``, ``failed_attempts_cost_usd``, ``possibly_billed_usd``, ``run_id``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import IO, Any

from openrouter_probe.errors import ConfigError
from openrouter_probe.files import append_line, repair_torn_tail

__all__ = [
    "FINISHED",
    "RECORD_FIELDS",
    "OutputLog",
    "ResumeState",
    "iter_records",
    "load_resume_state",
]

log = logging.getLogger(__name__)

RECORD_FIELDS = (
    "id",
    "dataset",
    "status",
    "provider",
    "model",
    "finish_reason",
    "content",
    "reasoning",
    "usage",
    "cost_usd",
    "generation_id",
    "attempts",
    "error",
)
#: Statuses of a finished row (never sent again; ``failed`` is with ``--redo-failed``).
FINISHED = frozenset({"ok", "truncated", "failed"})


def _money(value: Any) -> Decimal:
    if value is None or isinstance(value, bool):
        return Decimal(0)
    try:
        return Decimal(str(value))
    except ArithmeticError:
        return Decimal(0)


@dataclass
class ResumeState:
    """What an output file already holds: finished ids, money spent, tokens per dataset."""

    finished: set[str] = field(default_factory=set)
    failed: set[str] = field(default_factory=set)
    spent_usd: Decimal = Decimal(0)
    possibly_billed_usd: Decimal = Decimal(0)
    output_tokens: dict[str, int] = field(default_factory=dict)  # per dataset, finished rows
    rows: int = 0
    torn: bytes | None = None
    exists: bool = False
    accounted: set[tuple[str, str]] = field(default_factory=set)  # (run_id, id) of every record


def iter_records(path: str | Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line number, record)`` for every line of an output file.

    A line that is not a JSON object is a ``ConfigError`` naming the file and line, except a last
    line without a newline (a torn write), which is skipped with a warning.
    """
    p = Path(path)
    try:
        handle = p.open("r", encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{p}: cannot read the output file: {exc.strerror}") from exc
    with handle:
        for lineno, text in enumerate(handle, start=1):
            if not text.strip():
                continue
            try:
                record = json.loads(text)
            except ValueError as exc:
                if not text.endswith("\n"):
                    log.warning("%s:%d: torn last line skipped (%d bytes)", p, lineno, len(text))
                    continue
                raise ConfigError(
                    f"{p}:{lineno}: not a generator output line ({exc}); "
                    "is this the --out file of `openrouter-probe generate`?"
                ) from None
            if not isinstance(record, dict) or "id" not in record or "status" not in record:
                raise ConfigError(
                    f"{p}:{lineno}: not a generator output record (needs id and status)"
                )
            yield lineno, record


def output_tokens_of(record: dict[str, Any]) -> int:
    """Billed output tokens of a record (``usage.completion_tokens``, reasoning included)."""
    usage = record.get("usage")
    if isinstance(usage, dict):
        value = usage.get("completion_tokens")
        if isinstance(value, int):
            return value
    return 0


def load_resume_state(path: str | Path, *, redo_failed: bool = False) -> ResumeState:
    """Repair a torn tail, then read what an existing output file holds (empty when it is absent)."""
    state = ResumeState()
    p = Path(path)
    if not p.exists():
        return state
    state.exists = True
    state.torn = repair_torn_tail(p)
    if state.torn:
        log.warning(
            "%s: cut a torn last line (%d bytes) left by a crash; that row will be sent again",
            p,
            len(state.torn),
        )
    for _, record in iter_records(p):
        state.rows += 1
        status = record.get("status")
        cost = _money(record.get("cost_usd")) + _money(record.get("failed_attempts_cost_usd"))
        billed = _money(record.get("possibly_billed_usd"))
        state.spent_usd += cost + billed
        state.possibly_billed_usd += billed
        ident = str(record["id"])
        run_id = record.get("run_id")
        if isinstance(run_id, str):
            state.accounted.add((run_id, ident))
        if status in FINISHED and ident not in state.finished:
            if status == "failed":
                state.failed.add(ident)
                if redo_failed:
                    continue
            state.finished.add(ident)
            dataset = str(record.get("dataset") or "default")
            state.output_tokens[dataset] = state.output_tokens.get(dataset, 0) + output_tokens_of(
                record
            )
    return state


class OutputLog:
    """The output file open for appending: one flushed line per record."""

    def __init__(self, path: str | Path, *, fsync: bool = False) -> None:
        self.path = Path(path)
        self.fsync = fsync
        self._handle: IO[str] | None = None

    def open(self) -> OutputLog:
        try:
            self._handle = self.path.open("a", encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"{self.path}: cannot open the output file: {exc.strerror}") from exc
        return self

    def write(self, record: dict[str, Any]) -> None:
        """Append one record as a JSON line and flush it (the row is finished once this returns)."""
        if self._handle is None:
            raise RuntimeError("OutputLog.write before open")
        line = json.dumps(record, ensure_ascii=False, separators=(",", ":"), default=str)
        append_line(self._handle, line, fsync=self.fsync)

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None

    def __enter__(self) -> OutputLog:
        return self.open()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

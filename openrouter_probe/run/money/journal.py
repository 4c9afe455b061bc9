"""The spend journal beside the output: every attempt's money, written before the money can move.

The output records rows; the journal records money, attempt by attempt, and is what the cap counts.
Its path is the output's with ``.ledger`` added (``out.jsonl`` -> ``out.jsonl.ledger``), so
``*.jsonl`` globs given to ``audit`` and ``export`` never pick it up. Its lines (a run's header,
``sent``, ``gen``, ``settled``, ``reconciled``, an adopted record's ``sent`` with ``adopts``, the
``batch_*`` lines) and what each guarantees are in docs/generate.md, "The spend journal"; besides
them, a ``settled`` line carries ``counted_usd`` when an answer without a cost counts at more than
its reservation (docs/wire.md), and a ``window`` line holds the dollars OpenRouter's in-flight
budget let the run hold (``run.money.limit.DollarWindow``), from which the next run's window opens
(``JournalReplay.window_usd``).

An attempt's money is its reconciled cost, else its settled cost, else its whole reservation
("possibly billed"). ``sent`` and batch-plan lines are flushed as they are written, before the
request (or the POST) leaves. ``gen``, ``settled`` and ``reconciled`` lines are buffered to the next
flush, or the end of the turn: one lost to a crash only leaves an attempt counted at its
reservation. A write that fails fails the journal for good: ``writes.on_failure`` is told once
(the run stops sending), nothing more is written (a line after a lost one would damage the
file), and a ``sent`` line that cannot be flushed raises ``files.WriteFailed`` (its request never
leaves).

``run.money.replay.replay_journal`` reads it back (after ``run.lock`` is taken; a torn last line is
cut first: a torn ``sent`` line's request never left).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import json
import logging
import os
import secrets
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import IO, Any

from openrouter_probe.errors import ConfigError
from openrouter_probe.files import (
    WriteFailed,
    WriteFailures,
    append_line,
    open_append,
    write_error,
)

__all__ = [
    "JOURNAL_SUFFIX",
    "Adopted",
    "Journal",
    "adopt",
    "journal_path",
]

log = logging.getLogger(__name__)

JOURNAL_SUFFIX = ".ledger"


def journal_path(out: str | Path) -> Path:
    """The journal's path for the output file ``out`` (``out.jsonl`` -> ``out.jsonl.ledger``)."""
    p = Path(out)
    return p.with_name(p.name + JOURNAL_SUFFIX)


@dataclass(frozen=True)
class Adopted:
    """An output record's money the journal did not know, adopted: counted at ``worst_usd``
    until ``/generation`` settles it (``generation_id``; ``None``: it stays at its worst case)."""

    key: str
    row_id: str
    dataset: str
    worst_usd: Decimal
    generation_id: str | None


def adopt(path: str | Path, records: Sequence[Adopted]) -> str:
    """Journal ``records`` as the attempts of one adoption run (no header line; its id is
    returned): one line each, written in one write and flushed.

    Each line stands alone: a record whose line a crash tore (the torn tail is cut on the next
    start) is not adopted, and is adopted again by the next start; one whose line is there is
    never adopted twice (``JournalReplay.adopted``). Call it under the output's lock.
    """
    run = json.dumps(secrets.token_hex(6))
    lines = [
        f'{{"sent":{number},"run":{run},"id":{json.dumps(r.row_id)},'
        f'"ds":{json.dumps(r.dataset)},"reserved_usd":"{r.worst_usd}",'
        f'"gen_id":{json.dumps(r.generation_id)},"adopts":{json.dumps(r.key)}}}\n'
        for number, r in enumerate(records, start=1)
    ]
    try:
        with open_append(path) as handle:
            handle.write("".join(lines))
            handle.flush()
    except OSError as exc:  # a full disk: one line, nothing sent (``files.WriteFailed``)
        raise WriteFailed(write_error(path, exc)) from exc
    return str(json.loads(run))


class Journal:
    """The journal open for appending, for one run: ``sent`` before each attempt, then what
    happened to it (``generation``, ``settle``, ``settle_unknown``, ``reconciled``)."""

    def __init__(
        self,
        path: str | Path,
        *,
        run_id: str | None = None,
        header: dict[str, Any] | None = None,
        on_failure: Callable[[str], None] | None = None,
    ) -> None:
        self.path = Path(path)
        self.header = dict(header or {})
        self.run_id = run_id or secrets.token_hex(6)
        self._handle: IO[str] | None = None
        self._next = 0
        self._run_json = json.dumps(self.run_id)
        self._flush_scheduled = False
        #: the first failed write (``line``; ``on_failure`` is told it): nothing is written after it
        self.writes = WriteFailures(self.path, on_failure)

    def open(self) -> Journal:
        """Open for appending and write the run's header line (plus the ``header`` fields)."""
        try:
            self._handle = open_append(self.path)
        except OSError as exc:
            raise ConfigError(
                f"{self.path}: cannot open the spend journal: {exc.strerror}"
            ) from exc
        started = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        first = {
            "run": self.run_id,
            "started_utc": started,
            **self.header,
            "pid": os.getpid(),
            "host": socket.gethostname() or "?",
        }
        try:
            append_line(self._handle, json.dumps(first, separators=(",", ":"), default=str))
        except OSError as exc:  # nothing sent yet: one line, and the rerun starts the same
            handle, self._handle = self._handle, None
            with contextlib.suppress(OSError):  # (the line said is the header's; no run to stop)
                handle.close()
            raise WriteFailed(write_error(self.path, exc)) from exc
        return self

    def _write(self, line: str) -> None:
        """Buffer ``line`` (dropped once a write failed: see the module)."""
        handle = self._handle
        if handle is None:
            raise RuntimeError("the spend journal is not open")
        if self.writes.line is not None:
            return
        try:
            handle.write(line)
        except OSError as exc:
            self.writes.fail(exc)

    def sent(self, row_id_json: str, reserved_usd: Decimal, dataset_json: str = "null") -> int:
        """Record an attempt about to be sent and flush it; return its number.

        ``row_id_json`` and ``dataset_json`` are already JSON (quoted strings). Call it after the
        reservation and before the request leaves: once it returns, the line is in the OS.
        """
        number = self.sending(row_id_json, reserved_usd, dataset_json)
        self._flush_now()
        return number

    def sending(self, row_id_json: str, reserved_usd: Decimal, dataset_json: str = "null") -> int:
        """Record an attempt about to be sent, buffered; return its number. Flush before the
        request leaves (``sent`` does both; a batch run journals a claim taken over first)."""
        self._next += 1
        self._write(
            f'{{"sent":{self._next},"run":{self._run_json},"id":{row_id_json},'
            f'"ds":{dataset_json},"reserved_usd":"{reserved_usd}"}}\n'
        )
        if self.writes.line is not None:
            raise WriteFailed(self.writes.line)
        return self._next

    def _flush_now(self) -> None:
        """Flush what is written to the OS; raise ``WriteFailed`` when it cannot be (now or
        before): what it guards must not happen."""
        self.flush()
        if self.writes.line is not None:
            raise WriteFailed(self.writes.line)

    def generation(self, attempt: int, generation_id: str, *, run_id: str | None = None) -> None:
        """Record an attempt's generation id (flushed within this turn of the event loop); an
        earlier run's (``run_id``: a cache hit named the generation its killed attempt was)."""
        run = self._run_json if run_id is None else json.dumps(run_id)
        self._write(f'{{"gen":{attempt},"run":{run},"id":{json.dumps(generation_id)}}}\n')
        self._flush_soon()

    def settle(self, attempt: int, cost_usd: Decimal | None) -> None:
        """Record what an attempt cost (``None``: nothing billed, an error status). Buffered."""
        cost = "null" if cost_usd is None else f'"{cost_usd}"'
        self._write(f'{{"settled":{attempt},"run":{self._run_json},"cost_usd":{cost}}}\n')
        self._flush_soon()

    def settle_unknown(
        self, attempt: int, *, cancelled: bool = False, counted_usd: Decimal | None = None
    ) -> None:
        """Record that an attempt left and its cost is unknown (counted at its reservation, or
        at ``counted_usd`` when that is more: an answer whose own token counts cost more)."""
        extra = ',"cancelled":true' if cancelled else ""
        if counted_usd is not None:
            extra += f',"counted_usd":"{counted_usd}"'
        self._write(f'{{"settled":{attempt},"run":{self._run_json},"unknown":true{extra}}}\n')
        self._flush_soon()

    def reconciled(self, run_id: str, attempt: int, cost_usd: Decimal) -> None:
        """Record what ``/generation`` says an unknown attempt (of any run) cost."""
        self._write(
            f'{{"reconciled":{attempt},"run":{json.dumps(run_id)},"cost_usd":"{cost_usd}"}}\n'
        )
        self._flush_soon()

    def window(self, limit_usd: Decimal) -> None:
        """Record the dollar window learned from in-flight 402s (buffered: a lost line only makes
        the next run learn it again)."""
        self._write(f'{{"window":"{limit_usd}","run":{self._run_json}}}\n')
        self._flush_soon()

    def batch_plan(
        self,
        plan: str,
        *,
        model: str,
        after: int,
        worst_usd: Decimal,
        lines: list[list[Any]],
        count: int | None = None,
    ) -> None:
        """Record a batch about to be submitted and flush it: once this returns, the plan is in
        the OS, and a run killed after the POST finds its batch again."""
        line = {
            "batch_plan": plan,
            "run": self.run_id,
            "model": model,
            "after": after,
            "worst_usd": str(worst_usd),
            "lines": lines,
            **({"count": count} if count is not None else {}),
        }
        self._write(json.dumps(line, separators=(",", ":"), ensure_ascii=False) + "\n")
        self._flush_now()

    def batch_id(self, run_id: str, plan: str, batch_id: str) -> None:
        """Record the id a batch plan's submit was given (or its orphan was found under)."""
        self._write(
            f'{{"batch_id":{json.dumps(plan)},"run":{json.dumps(run_id)},'
            f'"id":{json.dumps(batch_id)}}}\n'
        )
        self._flush_now()

    def batch_done(self, run_id: str, plan: str, status: str) -> None:
        """Record that a batch plan is closed: its batch settled, refused, or dropped."""
        self._write(
            f'{{"batch_done":{json.dumps(plan)},"run":{json.dumps(run_id)},'
            f'"status":{json.dumps(status)}}}\n'
        )
        self._flush_soon()

    def _flush_soon(self) -> None:
        """Flush at the end of this turn of the event loop (at once outside one): lines written
        in the same turn share one write to the OS."""
        if self._flush_scheduled:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.flush()
            return
        self._flush_scheduled = True
        loop.call_soon(self.flush)

    def flush(self) -> None:
        """Flush what is buffered to the OS (a failure fails the journal: ``writes``)."""
        self._flush_scheduled = False
        if self._handle is not None and self.writes.line is None:
            try:
                self._handle.flush()
            except OSError as exc:
                self.writes.fail(exc)

    def close(self) -> None:
        """Flush and close (after a failed write, the rest of what was buffered is tried once
        more: it follows what is in the file, so the file stays whole or torn at its end)."""
        handle, self._handle = self._handle, None
        self.writes.close(handle)

    def __enter__(self) -> Journal:
        return self.open()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

"""The spend journal beside the output: every attempt's money, written before the money can move.

The output records rows; the journal records money, attempt by attempt, and is what the cap counts.
Its path is the output's with ``.ledger`` added (``out.jsonl`` -> ``out.jsonl.ledger``), so
``*.jsonl`` globs given to ``audit`` and ``export`` never pick it up. One JSON object a line::

    {"run":"3f9a0c1b2d4e","started_utc":"2026-11-30T15:20:00Z","command":"generate","model":"...",
     "job":"sha256:...","pid":4242,"host":"gpu-1","out":"out.jsonl","budget_usd":"100"}
    {"sent":17,"run":"3f9a0c1b2d4e","id":"r17","ds":"B3","reserved_usd":"0.00446"}
    {"gen":17,"run":"3f9a0c1b2d4e","id":"gen-1777319885-pLuUvaQdB3l6lRlhlKuv"}
    {"settled":17,"run":"3f9a0c1b2d4e","cost_usd":"0.00212"}
    {"settled":18,"run":"3f9a0c1b2d4e","unknown":true}
    {"reconciled":18,"run":"3f9a0c1b2d4e","cost_usd":"0.00031"}
    {"batch_plan":"p1","run":"3f9a0c1b2d4e","model":"m","after":1788697040,"worst_usd":"0.0089",
     "lines":[["r17",17],["r18",18]]}
    {"batch_id":"p1","run":"3f9a0c1b2d4e","id":"batch-1788697047-yF7D"}
    {"batch_done":"p1","run":"3f9a0c1b2d4e","status":"completed"}

- ``sent``: before each attempt leaves, its row, dataset and reserved worst case, flushed: the
  ``sent`` lines of every attempt leaving in the same turn of the event loop go out in one write
  and one flush (``Ledger.written``), and none of them is sent before that flush returned: from
  then on the line is in the OS, and a SIGKILL cannot hide it.
- ``gen``: the attempt's generation id, as soon as the response headers bring it.
- ``settled``: what the attempt cost (``cost_usd``; ``null``: an error status, never billed), or
  ``unknown`` (it left, and nothing said what it cost: a timeout, a cut connection, an answer
  without a valid ``usage.cost``, a cancellation), with ``counted_usd`` when it counts at more
  than its reservation (an answer without a cost whose own token counts, at the dearest admitted
  price, cost more: it was billed past ``max_tokens``).
- ``batch_plan`` (``generate --batch``): a batch about to be submitted, flushed before the POST:
  its custom ids with the attempt each carries (their ``sent`` lines hold the money), the worst
  case, the model and the time the batch is created after (the orphan search's bound);
  ``batch_id`` the id its 202 gave; ``batch_done`` that it is settled (or dropped). A plan
  without ``batch_done`` is open: the next run polls it by its id, or finds it by the list.
- ``reconciled``: what ``GET /generation`` later said an unknown attempt cost (this run's
  reconciler, or a later run's settling a killed one's).

An attempt's money is its reconciled cost, else its settled cost, else its whole reservation
("possibly billed": unknown, or never settled because the run was killed). The journal's money is
the sum over its attempts, and the only record of money: an output line of a run the journal does
not know (it was deleted, or the output predates it) is read as a row, never as money
(``run.output``). Its money is unknown, and the run adopts it (``adopt``)::

    {"sent":1,"run":"9c0d2e4f6a8b","id":"r4","ds":"B3","reserved_usd":"0.0031",
     "gen_id":"gen-1777319885-pLuUvaQdB3l6lRlhlKuv","adopts":"row||r4|gen-...||1|answer"}

a ``sent`` line standing alone (no header line for the adoption's run): the attempt is unknown
from the start, counted at ``reserved_usd`` (the record's worst case) until ``/generation``
settles it by ``gen_id`` (``null``: it stays there); ``adopts`` names the record
(``LedgerReplay.adopted``), so that it is never adopted twice.

``gen``, ``settled`` and ``reconciled`` lines are buffered and reach the file with the next flushed
line, or within one turn of the event loop: a line lost to a crash only leaves an attempt counted
at its reservation (more, never less), and one with a generation id is settled again on resume.

A write that fails (a full disk, a read-only file system, a quota) fails the journal for good:
``writes.on_failure`` is told once (the run stops sending), nothing more is written to it (a line after
a lost one would leave a damaged file), a ``sent`` (or batch) line that cannot be flushed raises
``files.WriteFailed`` (its request never leaves), and the lines already in the file stand: the
next run, once there is room, resumes from them.

``replay_ledger`` reads it back (after ``run.lock`` is taken; a torn last line is cut first: a torn
``sent`` line's request never left).
"""

from __future__ import annotations

import asyncio
import datetime
import json
import logging
import os
import re
import secrets
import socket
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import IO, Any

from openrouter_probe.errors import ConfigError
from openrouter_probe.files import (
    WriteFailed,
    WriteFailures,
    append_line,
    iter_jsonl,
    open_append,
    repair_torn_tail,
    write_error,
)
from openrouter_probe.rules.quantities import recorded_usd

__all__ = [
    "LEDGER_SUFFIX",
    "Adopted",
    "Ledger",
    "LedgerReplay",
    "OpenBatch",
    "Pending",
    "adopt",
    "ledger_path",
    "replay_ledger",
]

log = logging.getLogger(__name__)

LEDGER_SUFFIX = ".ledger"
_ZERO = Decimal(0)
#: What to do about a damaged journal line.
_DAMAGED = (
    "the file is damaged. Restore it, or delete it: the output's records then count at their "
    "worst case until /generation settles them"
)
#: A string that is its own JSON body once quoted.
_PLAIN = re.compile(r"[A-Za-z0-9_.:-]+")
# An attempt's state in the replay.
_SENT, _KNOWN, _UNKNOWN, _RECONCILED = 0, 1, 2, 3


def ledger_path(out: str | Path) -> Path:
    """Return the journal's path for the output file ``out`` (``out.jsonl`` -> ``out.jsonl.ledger``)."""
    p = Path(out)
    return p.with_name(p.name + LEDGER_SUFFIX)


@dataclass(frozen=True)
class Pending:
    """An attempt counted at its worst case that ``/generation`` may settle: it has an id."""

    run: str
    attempt: int
    generation_id: str
    reserved_usd: Decimal
    dataset: str | None


@dataclass
class LedgerReplay:
    """The money a journal records, attempt by attempt, summed.

    ``spent_usd`` = ``settled_usd`` (known and reconciled costs) + ``possibly_billed_usd`` (the
    reservations of attempts whose cost is unknown or that were in flight when a run died).
    """

    path: Path
    attempts: int = 0
    runs: set[str] = field(default_factory=set)
    headers: list[dict[str, Any]] = field(default_factory=list)
    settled_usd: Decimal = _ZERO
    possibly_billed_usd: Decimal = _ZERO
    in_flight: int = 0  # sent, never settled: in flight when a run was killed
    unknown: int = 0  # settled as unknown (timeouts, cut connections, cancellations, no cost)
    reconciled: int = 0  # unknown ones that /generation settled
    reconciled_back_usd: Decimal = _ZERO  # what those gave back (reservation - cost)
    by_dataset: dict[str, Decimal] = field(default_factory=dict)
    pending: list[Pending] = field(default_factory=list)
    #: batch plans without a ``batch_done`` line (``generate --batch``), in journal order
    batches: list[OpenBatch] = field(default_factory=list)
    #: every batch id the journal records, closed plans' too: plan -> id (the orphan search never
    #: adopts one of these; a moved line's plan without its id line takes its first plan's)
    batch_ids: dict[str, str] = field(default_factory=dict)
    torn: bytes | None = None
    #: the keys of the output records adopted (``adopt``): never adopted again
    adopted: set[str] = field(default_factory=set)

    @property
    def spent_usd(self) -> Decimal:
        """Everything the journal counts as spent."""
        return self.settled_usd + self.possibly_billed_usd


@dataclass
class OpenBatch:
    """A batch plan a run journaled and did not close: its batch may be running, finished, or
    (killed before the POST, or between the POST and the ``batch_id`` line) not known by id."""

    run: str
    plan: str
    model: str
    after: int
    worst_usd: Decimal
    #: custom id -> (the attempt number in ``run``, its reservation, its dataset, its row id)
    lines: dict[str, tuple[int, Decimal, str | None, str]]
    count: int = 0  # lines in the plan, settled ones included (the orphan search matches it)
    batch_id: str | None = None
    #: lines whose attempt is settled at its answer's cost (``lines`` holds that cost): the plan
    #: is open, so the run was killed before every answer's record was surely written; a row
    #: without one claims the line again (its answer is fetched again, never bought again)
    settled: set[str] = field(default_factory=set)


def _number(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{where}: attempt {value!r} is not a number; {_DAMAGED}")
    return value


def _read(
    path: Path,
    plans: dict[tuple[str, str], dict[str, Any]] | None = None,
    adopted: set[str] | None = None,
) -> tuple[dict[tuple[str, int], list[Any]], list[dict[str, Any]]]:
    """Every attempt, ``(run, number) -> [dataset, reserved, state, cost, generation id, row]``,
    and the run header lines; the batch plans go into ``plans`` (``(run, plan)`` -> the line, with
    ``batch_id`` and ``done`` added as their lines come); the keys of the records adopted go into
    ``adopted``."""
    attempts: dict[tuple[str, int], list[Any]] = {}
    headers: list[dict[str, Any]] = []
    plans = {} if plans is None else plans
    for lineno, line in iter_jsonl(
        path, what="the spend journal", line="a spend journal line", damaged=_DAMAGED
    ):
        if not isinstance(line, dict):
            continue
        where = f"{path}:{lineno}"
        run = str(line.get("run"))
        if "sent" in line:
            reserved = recorded_usd(line.get("reserved_usd"), where, damaged=_DAMAGED)
            ds = line.get("ds")
            dataset = ds if isinstance(ds, str) else None
            entry = [dataset, reserved, _SENT, None, None, line.get("id")]
            key = line.get("adopts")
            if isinstance(key, str):  # a record's money adopted: unknown, settled from its id
                if adopted is not None:
                    adopted.add(key)
                entry[2] = _UNKNOWN
                gen = line.get("gen_id")
                entry[4] = gen if isinstance(gen, str) else None
            attempts[(run, _number(line["sent"], where))] = entry
            continue
        if "batch_plan" in line or "batch_id" in line or "batch_done" in line:
            _batch_line(plans, run, line, where)
            continue
        for key in ("gen", "settled", "reconciled"):
            if key in line:
                found = attempts.get((run, _number(line[key], where)))
                if found is not None:
                    _apply(found, key, line, where)
                break
        else:
            if "started_utc" in line:
                headers.append(line)
    return attempts, headers


def _batch_line(
    plans: dict[tuple[str, str], dict[str, Any]], run: str, line: dict[str, Any], where: str
) -> None:
    if "batch_plan" in line:
        lines = line.get("lines")
        if not isinstance(lines, list) or not all(
            isinstance(x, list) and len(x) == 2 and isinstance(x[0], str) for x in lines
        ):
            raise ConfigError(f"{where}: a batch plan without its lines; {_DAMAGED}")
        plans[(run, str(line["batch_plan"]))] = dict(line)
        return
    key = "batch_id" if "batch_id" in line else "batch_done"
    plan = plans.get((run, str(line[key])))
    if plan is not None:
        plan["id" if key == "batch_id" else "done"] = line.get("id", True)


def _apply(entry: list[Any], key: str, line: dict[str, Any], where: str) -> None:
    if key == "gen":
        if isinstance(line.get("id"), str):
            entry[4] = line["id"]
    elif key == "reconciled":
        entry[2] = _RECONCILED
        entry[3] = recorded_usd(line.get("cost_usd"), where, damaged=_DAMAGED)
    elif entry[2] != _RECONCILED:  # a settle never undoes a reconciliation
        if line.get("unknown") is True:
            entry[2] = _UNKNOWN
            if "counted_usd" in line:  # more than its reservation: its own tokens at the price
                entry[1] = recorded_usd(line.get("counted_usd"), where, damaged=_DAMAGED)
        else:
            entry[2] = _KNOWN
            entry[3] = recorded_usd(line.get("cost_usd"), where, damaged=_DAMAGED)


def replay_ledger(
    path: str | Path, *, output_exists: bool = True, repair: bool = True
) -> LedgerReplay:
    """Cut a torn tail of the journal at ``path``, then total the money of every attempt.

    Call it only while holding the output's lock (``run.lock``): cutting a tail another process
    is writing would tear its line. ``repair=False`` reads without writing (``audit``, which may
    read a journal a run is appending to): a torn last line is skipped instead of cut. A journal that records attempts but whose output is gone
    (``output_exists=False``) is a ``ConfigError``: its money would count against a fresh output's
    cap, or silently vanish; the user decides. A line in the middle that is not JSON is a
    ``ConfigError`` naming the file and line.
    """
    p = Path(path)
    replay = LedgerReplay(path=p)
    if not p.exists():
        return replay
    replay.torn = repair_torn_tail(p) if repair else None
    if replay.torn:
        log.warning("%s: cut a torn last line (%d bytes) left by a crash", p, len(replay.torn))
    plans: dict[tuple[str, str], dict[str, Any]] = {}
    attempts, replay.headers = _read(p, plans, replay.adopted)
    if attempts and not output_exists:
        raise ConfigError(
            f"{p}: a spend journal without its output file {p.name[: -len(LEDGER_SUFFIX)]}: "
            "restore the output to resume, or delete the journal to start afresh (the money it "
            "records will then no longer count against budget_usd)"
        )
    replay.attempts = len(attempts)
    replay.runs = {run for run, _ in attempts} | {str(h.get("run")) for h in replay.headers}
    for (run, number), (ds, reserved, state, cost, gen, _row) in attempts.items():
        if state in (_KNOWN, _RECONCILED):
            money = cost
            replay.settled_usd += cost
            if state == _RECONCILED:
                replay.reconciled += 1
                replay.reconciled_back_usd += max(_ZERO, reserved - cost)
        else:
            money = reserved
            replay.possibly_billed_usd += reserved
            replay.in_flight += state == _SENT
            replay.unknown += state == _UNKNOWN
            if gen is not None:
                replay.pending.append(Pending(run, number, gen, reserved, ds))
        if ds is not None:
            replay.by_dataset[ds] = replay.by_dataset.get(ds, _ZERO) + money
    replay.batches = _open_batches(plans, attempts, p)
    replay.batch_ids = {
        plan: line["id"] for (_, plan), line in plans.items() if isinstance(line.get("id"), str)
    }
    return replay


def _open_batches(
    plans: dict[tuple[str, str], dict[str, Any]],
    attempts: dict[tuple[str, int], list[Any]],
    path: Path,
) -> list[OpenBatch]:
    """The plans without a ``batch_done`` line, each line with its attempt's money."""
    found = []
    for (run, plan), line in plans.items():
        if line.get("done"):
            continue
        where = f"{path}: batch plan {plan}"
        lines: dict[str, tuple[int, Decimal, str | None, str]] = {}
        settled: set[str] = set()
        for custom_id, number in line["lines"]:
            entry = attempts.get((run, _number(number, where)))
            if entry is not None and entry[2] in (_SENT, _UNKNOWN):
                lines[custom_id] = (number, entry[1], entry[0], str(entry[5]))
            elif entry is not None and entry[2] == _KNOWN:  # its answer's record may be lost
                lines[custom_id] = (number, entry[3] or _ZERO, entry[0], str(entry[5]))
                settled.add(custom_id)
        ident = line.get("id")
        found.append(
            OpenBatch(
                run=run,
                plan=plan,
                model=str(line.get("model")),
                after=int(line.get("after") or 0),
                worst_usd=recorded_usd(line.get("worst_usd"), where, damaged=_DAMAGED),
                lines=lines,
                count=int(line.get("count") or len(line["lines"])),
                batch_id=ident if isinstance(ident, str) else None,
                settled=settled,
            )
        )
    return found


@dataclass(frozen=True)
class Adopted:
    """An output record's money the journal did not know, adopted: counted at ``worst_usd``
    until ``/generation`` settles it (``generation_id``; ``None``: it stays at its worst case)."""

    key: str
    row_id: str
    dataset: str
    worst_usd: Decimal
    generation_id: str | None


def adopt(path: str | Path, records: Sequence[Adopted], *, fsync: bool = False) -> str:
    """Journal ``records`` as the attempts of one adoption run (no header line; its id is
    returned): one line each, written in one write and flushed (fsynced with ``fsync``).

    Each line stands alone: a record whose line a crash tore (the torn tail is cut on the next
    start) is not adopted, and is adopted again by the next start; one whose line is there is
    never adopted twice (``LedgerReplay.adopted``). Call it under the output's lock.
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
            if fsync:
                os.fsync(handle.fileno())
    except OSError as exc:  # a full disk: one line, nothing sent (``files.WriteFailed``)
        raise WriteFailed(write_error(path, exc)) from exc
    return str(json.loads(run))


def _host() -> str:
    return socket.gethostname() or "?"


class Ledger:
    """The journal open for appending, for one run: ``sent`` before each attempt, then what
    happened to it (``generation``, ``settle``, ``settle_unknown``, ``reconciled``)."""

    def __init__(
        self,
        path: str | Path,
        *,
        run_id: str | None = None,
        header: dict[str, Any] | None = None,
        fsync: bool = False,
    ) -> None:
        self.path = Path(path)
        self.header = dict(header or {})
        self.run_id = run_id or secrets.token_hex(6)
        self.fsync = fsync
        self._handle: IO[str] | None = None
        self._next = 0
        self._run_json = json.dumps(self.run_id)
        self._flush_scheduled = False
        self._written: asyncio.Future[None] | None = None
        #: the first failed write (``line``): nothing is written after it
        self.writes = WriteFailures(self.path)

    def open(self) -> Ledger:
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
            "host": _host(),
        }
        try:
            append_line(
                self._handle,
                json.dumps(first, separators=(",", ":"), default=str),
                fsync=self.fsync,
            )
        except OSError as exc:  # nothing sent yet: one line, and the rerun starts the same
            self.close()
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
        """Record an attempt about to be sent, buffered; return its number. Await ``written``
        before the request leaves (the run's way: many attempts leave in one turn of the loop,
        and their lines share one write and one flush)."""
        self._next += 1
        self._write(
            f'{{"sent":{self._next},"run":{self._run_json},"id":{row_id_json},'
            f'"ds":{dataset_json},"reserved_usd":"{reserved_usd}"}}\n'
        )
        if self.writes.line is not None:
            raise WriteFailed(self.writes.line)
        return self._next

    def written(self) -> asyncio.Future[None]:
        """A future done once every line written so far is in the OS (flushed; ``fsync`` too
        when asked): one flush at the end of this turn of the loop for all the ``sent`` lines
        written in it. A failed flush fails the future: none of those requests may leave."""
        waiting = self._written
        if waiting is None:
            loop = asyncio.get_running_loop()
            waiting = self._written = loop.create_future()
            loop.call_soon(self._flush_written)
        return waiting

    def _flush_now(self) -> None:
        """Flush what is written to the OS (and to the disk with ``fsync``); raise
        ``WriteFailed`` when it cannot be (now or before): what it guards must not happen."""
        self.flush()
        if self.fsync and self._handle is not None and self.writes.line is None:
            try:
                os.fsync(self._handle.fileno())
            except OSError as exc:
                self.writes.fail(exc)
        if self.writes.line is not None:
            raise WriteFailed(self.writes.line)

    def _flush_written(self) -> None:
        waiting, self._written = self._written, None
        if waiting is None:
            return
        try:
            self._flush_now()
        except WriteFailed as exc:
            if not waiting.done():
                waiting.set_exception(exc)
            return
        if not waiting.done():
            waiting.set_result(None)

    def generation(self, attempt: int, generation_id: str) -> None:
        """Record an attempt's generation id (flushed within this turn of the event loop)."""
        self._write(
            f'{{"gen":{attempt},"run":{self._run_json},"id":{json.dumps(generation_id)}}}\n'
        )
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
        if handle is not None:
            try:
                handle.close()
            except OSError as exc:
                self.writes.fail(exc)

    def __enter__(self) -> Ledger:
        return self.open()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

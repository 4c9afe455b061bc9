"""The spend journal read back: every attempt's money summed (``replay_journal``), the attempts
``/generation`` may still settle (``Pending``) and the batches still open (``OpenBatch``).

The journal's lines and the rules for reading them: docs/generate.md, "The spend journal" (and
``run.money.journal``, which writes it); this module only reads. Read it after ``run.lock`` is
taken (a torn last line is cut first: a torn ``sent`` line's request never left), or with
``repair=False`` while a run may append.
"""

from __future__ import annotations

import json
import logging
import mmap
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from openrouter_probe.errors import ConfigError, Message
from openrouter_probe.files import (
    iter_jsonl,
    repair_torn_tail,
)
from openrouter_probe.rules.quantities import recorded_usd
from openrouter_probe.run.money.journal import JOURNAL_SUFFIX

__all__ = ["JournalReplay", "OpenBatch", "Pending", "replay_journal"]

log = logging.getLogger(__name__)

_ZERO = Decimal(0)
#: What to do about a damaged journal line.
_DAMAGED = (
    "the file is damaged. Restore it, or delete it: the output's records then count at their "
    "worst case until /generation settles them"
)
# An attempt's state in the replay.
_SENT, _KNOWN, _UNKNOWN, _RECONCILED = 0, 1, 2, 3


@dataclass(frozen=True)
class Pending:
    """An attempt counted at its worst case that ``/generation`` may settle: it has an id."""

    run: str
    attempt: int
    generation_id: str
    reserved_usd: Decimal
    dataset: str | None


@dataclass
class JournalReplay:
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
    #: the same, by run: a run still going has its own in flight (``audit`` beside it)
    in_flight_by_run: dict[str, int] = field(default_factory=dict)
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
    #: row id -> its attempts counted at their worst case with no generation id (in flight when
    #: a run was killed before the headers came): a response cache hit of the row's resend
    #: names the generation one of them was (``Books.settle``; ``generation_id`` is empty)
    unidentified: dict[str, list[Pending]] = field(default_factory=dict)
    #: every generation id the journal records (a cache hit's source among them is counted)
    generation_ids: set[str] = field(default_factory=set)
    #: the last in-flight window a run learned (its last ``window`` line; ``None``: none did)
    window_usd: Decimal | None = None

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


def _kept_apart(path: Path) -> set[tuple[str, int]]:
    """The attempts a ``reconciled`` line or a batch plan names (few: unknown costs, batches):
    their entries are kept to the end of the read. The file is searched, not parsed (``mmap``),
    and only the lines found are read; a line that cannot be is left to the full read, which
    says what is wrong with it."""
    apart: set[tuple[str, int]] = set()
    if path.stat().st_size == 0:
        return apart
    with path.open("rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
        for marker in (b'"reconciled":', b'"batch_plan":'):
            at = data.find(marker)
            while at != -1:
                start = data.rfind(b"\n", 0, at) + 1
                end = data.find(b"\n", at)
                if end == -1:
                    break  # a torn last line: never a line's money
                _note_apart(apart, data[start:end])
                at = data.find(marker, end)
    return apart


def _note_apart(apart: set[tuple[str, int]], raw: bytes) -> None:
    try:
        line = json.loads(raw)
    except ValueError:
        return
    if not isinstance(line, dict):
        return
    run = str(line.get("run"))
    if "reconciled" in line:
        apart.add((run, line["reconciled"]))
    lines = line.get("lines") if "batch_plan" in line else None
    for item in lines if isinstance(lines, list) else ():
        if isinstance(item, list) and len(item) == 2:
            apart.add((run, item[1]))


def _read(
    path: Path,
    replay: JournalReplay,
    plans: dict[tuple[str, str], dict[str, Any]],
    windows: list[Decimal],
) -> tuple[dict[tuple[str, int], list[Any]], list[dict[str, Any]]]:
    """Every attempt still open, ``(run, number) -> [dataset, reserved, state, cost, generation
    id, row]``, and the run header lines; the batch plans go into ``plans`` (``(run, plan)`` ->
    the line, with ``batch_id`` and ``done`` added as their lines come); the keys of the records
    adopted go into ``replay.adopted``; the ``window`` lines' dollars into ``windows``.

    An attempt settled at a known cost that no ``reconciled`` line or batch plan
    names (``_kept_apart``: most of them) is added to its totals as its ``settled`` line comes
    and not kept (``_fold``), so the read holds the attempts still open, not every attempt: a
    journal of a million answers is read in the memory of its open ones. Its datasets are
    listed as their ``sent`` lines come (the order the whole read gives)."""
    attempts: dict[tuple[str, int], list[Any]] = {}
    headers: list[dict[str, Any]] = []
    apart = _kept_apart(path)
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
                replay.adopted.add(key)
                entry[2] = _UNKNOWN
                gen = line.get("gen_id")
                entry[4] = gen if isinstance(gen, str) else None
            attempts[(run, _number(line["sent"], where))] = entry
            if dataset is not None:
                replay.by_dataset.setdefault(dataset, _ZERO)
            continue
        if "batch_plan" in line or "batch_id" in line or "batch_done" in line:
            _batch_line(plans, run, line, where)
            continue
        for key in ("gen", "settled", "reconciled"):
            if key in line:
                number = _number(line[key], where)
                found = attempts.get((run, number))
                if found is not None:
                    _apply(found, key, line, where)
                    if found[2] == _KNOWN and (run, number) not in apart:
                        _fold(replay, run, attempts.pop((run, number)))
                elif key == "gen" and isinstance(line.get("id"), str):
                    replay.generation_ids.add(line["id"])  # an attempt folded before its id
                break
        else:
            if "started_utc" in line:
                headers.append(line)
            elif "window" in line:
                windows.append(recorded_usd(line.get("window"), where, damaged=_DAMAGED))
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


def _fold(replay: JournalReplay, run: str, entry: list[Any]) -> None:
    """An attempt settled at a known cost, added to ``replay``'s totals as the whole read would
    add it (``replay_journal``), and dropped."""
    ds, _, _, cost, gen, _ = entry
    replay.attempts += 1
    replay.runs.add(run)
    replay.settled_usd += cost
    if gen is not None:
        replay.generation_ids.add(gen)
    if ds is not None:
        replay.by_dataset[ds] = replay.by_dataset.get(ds, _ZERO) + cost


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


def replay_journal(
    path: str | Path, *, output_exists: bool = True, repair: bool = True
) -> JournalReplay:
    """Cut a torn tail of the journal at ``path``, then total the money of every attempt.

    Call it only while holding the output's lock (``run.lock``): cutting a tail another process
    is writing would tear its line. ``repair=False`` reads without writing (``audit``, which may
    read a journal a run is appending to): a torn last line is skipped instead of cut. A journal that records attempts but whose output is gone
    (``output_exists=False``) is a ``ConfigError``: its money would count against a fresh output's
    cap, or silently vanish; the user decides. A line in the middle that is not JSON is a
    ``ConfigError`` naming the file and line.
    """
    p = Path(path)
    replay = JournalReplay(path=p)
    if not p.exists():
        return replay
    replay.torn = repair_torn_tail(p) if repair else None
    if replay.torn:
        log.warning("%s: cut a torn last line (%d bytes) left by a crash", p, len(replay.torn))
    plans: dict[tuple[str, str], dict[str, Any]] = {}
    windows: list[Decimal] = []
    attempts, replay.headers = _read(p, replay, plans, windows)
    replay.window_usd = windows[-1] if windows else None
    replay.attempts += len(attempts)  # and those folded as they settled
    if replay.attempts and not output_exists:
        raise ConfigError(
            Message(
                "journal-without-output",
                "{path:s}: a spend journal without its output file {output:s}: restore the output "
                "to resume, or delete the journal to start afresh (the money it records will then "
                "no longer count against {budget_usd:bare})",
                path=str(p),
                output=p.name[: -len(JOURNAL_SUFFIX)],
            )
        )
    replay.runs |= {run for run, _ in attempts} | {str(h.get("run")) for h in replay.headers}
    for (run, number), (ds, reserved, state, cost, gen, row) in attempts.items():
        if gen is not None:
            replay.generation_ids.add(gen)
        if state in (_KNOWN, _RECONCILED):
            money = cost
            replay.settled_usd += cost
            if state == _RECONCILED:
                replay.reconciled += 1
                replay.reconciled_back_usd += max(_ZERO, reserved - cost)
        else:
            money = reserved
            replay.possibly_billed_usd += reserved
            if state == _SENT:
                replay.in_flight += 1
                replay.in_flight_by_run[run] = replay.in_flight_by_run.get(run, 0) + 1
            replay.unknown += state == _UNKNOWN
            if gen is not None:
                replay.pending.append(Pending(run, number, gen, reserved, ds))
            elif isinstance(row, str):
                unknown = Pending(run, number, "", reserved, ds)
                replay.unidentified.setdefault(row, []).append(unknown)
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

"""The output JSONL: one line per finished row, the run's only record, and how a rerun resumes.

A row is finished when its line is flushed (``files.append_line``). Lines are written in the order
rows finish, not the input order. On start, a torn last line from a crash is cut
(``files.repair_torn_tail``), then every line is read back: rows recorded as ``ok``, ``truncated`` or
``failed`` are finished and never sent again (``failed`` ones are with ``--redo-failed``, and a
``failed`` row an open batch holds a line for waits for that line's answer: ``awaited``); a
``cancelled`` line records a request that was in flight when the run was cancelled and that may
have been billed (``possibly_billed_usd``, its reservation): the row is sent again, and the money
counts as spent.

Records count no money: the spend journal beside the output (``run.money.journal``) is the only record
of it. Each line's ``run_id`` names the run that wrote it; a record (or a kept turn) of a run the
journal does not know (the journal was deleted, the output predates it, a line written by hand) is
read as a row, and its money is unknown: ``ResumeState.unjournaled`` lists it (``Unjournaled``:
its answer, with its generation id and token counts, apart from the other attempts it states), the
run adopts it into the journal at its worst case (``Unjournaled.worst_usd``, ``run.money.journal.adopt``) and
``/generation`` settles it as any unknown attempt. An adopted record is known by its key
(``JournalReplay.adopted``) and never adopted twice.

The record's fields are ``RECORD_FIELDS``; what each holds: docs/generate.md, "Output".
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from openrouter_probe.api.jsontext import dumps_record
from openrouter_probe.errors import ConfigError
from openrouter_probe.files import (
    WriteFailures,
    append_line,
    iter_jsonl,
    open_append,
    repair_torn_tail,
)
from openrouter_probe.rules.quantities import recorded_usd
from openrouter_probe.run.books.turns import read_turns, turns_path
from openrouter_probe.run.counts import AnswerLengths

if TYPE_CHECKING:
    from openrouter_probe.run.money.spend import Prices

__all__ = [
    "FINISHED",
    "RECORD_FIELDS",
    "OutputLog",
    "ResumeState",
    "Unjournaled",
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
#: What to do about a damaged output line.
_DAMAGED = (
    "is this the output file of `generate`? If it is, the line is damaged: "
    "restore the file, or remove that line (its row is then sent again)"
)


@dataclass
class ResumeState:
    """What an output file already holds: finished ids, tokens per dataset, and the records whose
    money the journal does not know (``unjournaled``: the run adopts them into the journal)."""

    finished: set[str] = field(default_factory=set)
    failed: set[str] = field(default_factory=set)
    output_tokens: dict[str, int] = field(default_factory=dict)  # per dataset: rows, kept turns
    rows_by_dataset: dict[str, int] = field(default_factory=dict)  # finished rows per dataset
    rows: int = 0
    torn: bytes | None = None
    exists: bool = False
    #: ``generate --turns all``: the turns the turns file keeps of rows not finished, by row id
    turns: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    #: rows recorded ``failed`` whose line an earlier run's open batch holds (its answer may be
    #: paid): not finished; the resume takes that answer and never sends the row again
    awaiting: set[str] = field(default_factory=set)
    #: money of records (and kept turns) of runs the journal does not know: unknown
    unjournaled: list[Unjournaled] = field(default_factory=list)
    #: how long the answers of its rows were, and how many were cut (the dry run's useful rows)
    lengths: AnswerLengths = field(default_factory=AnswerLengths)
    _keys: dict[str, int] = field(default_factory=dict, repr=False)

    def reopen(self, rows: Iterable[tuple[str, str]]) -> None:
        """``(id, dataset)`` of finished rows sent again (``--redo-truncated``): not finished
        until answered again, so this run's answer does not count the row twice."""
        for ident, dataset in rows:
            if ident in self.finished:
                self.finished.discard(ident)
                self.rows_by_dataset[dataset] = self.rows_by_dataset.get(dataset, 0) - 1


def iter_records(path: str | Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line number, record)`` for every line of an output file.

    A line that is not a JSON object with ``id`` and ``status`` is a ``ConfigError`` naming the
    file and line, except a last line without a newline (a torn write), which is skipped with a
    warning (``files.iter_jsonl``).
    """
    for lineno, record in iter_jsonl(
        path, what="the output file", line="a generator output line", damaged=_DAMAGED
    ):
        if not isinstance(record, dict) or "id" not in record or "status" not in record:
            raise ConfigError(
                f"{path}:{lineno}: not a generator output record (needs id and status); {_DAMAGED}"
            )
        yield lineno, record


def output_tokens_of(record: dict[str, Any]) -> int:
    """Billed output tokens of a record (``usage.completion_tokens``, reasoning included)."""
    return _tokens(record.get("usage"), "completion_tokens") or 0


@dataclass(frozen=True)
class Unjournaled:
    """Money an output record (or a kept turn) holds that the journal does not know: unknown.

    ``key`` names it for the journal (``adopts``: adopted once, never twice). ``generation_id``
    is the answer's (``/generation`` may settle it; ``None``: it stays at its worst case).
    ``prompt_tokens`` / ``completion_tokens`` are the record's ``usage`` (``None``: none given);
    ``recorded_usd`` is the money the record itself states.
    """

    key: str
    row_id: str
    dataset: str
    generation_id: str | None
    prompt_tokens: int | None
    completion_tokens: int | None
    recorded_usd: Decimal

    def worst_usd(self, prices: Prices, max_tokens: int) -> Decimal:
        """The most it could have cost: its own token counts at ``prices`` (the dearest admitted
        endpoints'), or without ``usage`` a whole context in and ``max_tokens`` out; never less
        than what the record itself states."""
        if self.prompt_tokens is None or self.completion_tokens is None:
            worst = prices.worst_case_usd(
                prompt_tokens=prices.context_tokens or 0, max_tokens=max_tokens
            )
        else:
            worst = prices.worst_case_usd(
                prompt_tokens=self.prompt_tokens, max_tokens=self.completion_tokens
            )
        return max(worst, self.recorded_usd)


def _tokens(usage: Any, name: str) -> int | None:
    value = usage.get(name) if isinstance(usage, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _unjournaled(
    state: ResumeState,
    record: dict[str, Any],
    where: str,
    dataset: str,
    ident: str,
    kind: str,
    *,
    answer: bool,
) -> None:
    """Note the money of ``record`` as unknown: its answer (``answer``: with its generation id
    and token counts) and, apart, the other attempts it states (``failed_attempts_cost_usd``,
    ``possibly_billed_usd``: no id, they stay as recorded)."""
    cost = recorded_usd(record.get("cost_usd"), where, damaged=_DAMAGED)
    failed = recorded_usd(record.get("failed_attempts_cost_usd"), where, damaged=_DAMAGED)
    billed = recorded_usd(record.get("possibly_billed_usd"), where, damaged=_DAMAGED)
    gen = record.get("generation_id")
    base = "|".join(
        (kind, str(record.get("run_id") or ""), ident, str(gen or ""), str(record.get("index", "")))
    )
    count = state._keys[base] = state._keys.get(base, 0) + 1
    key = f"{base}|{count}"
    usage = record.get("usage")
    if answer:
        state.unjournaled.append(
            Unjournaled(
                key=key + "|answer",
                row_id=ident,
                dataset=dataset,
                generation_id=gen if isinstance(gen, str) and gen else None,
                prompt_tokens=_tokens(usage, "prompt_tokens"),
                completion_tokens=_tokens(usage, "completion_tokens"),
                recorded_usd=cost,
            )
        )
        rest = failed + billed
    else:
        rest = cost + failed + billed
    if rest > 0:
        state.unjournaled.append(
            Unjournaled(key + "|rest", ident, dataset, None, 0, 0, recorded_usd=rest)
        )


def _count_turns(
    state: ResumeState,
    turns: list[Any],
    where: str,
    dataset: str,
    ident: str,
    journal_runs: Collection[str],
    seen: set[Any],
) -> None:
    """Note each turn the journal does not know, once per generation (a failed row sent again
    with ``--redo-failed`` records its earlier turns twice)."""
    for turn in turns:
        if not isinstance(turn, dict) or turn.get("run_id") in journal_runs:
            continue
        key = turn.get("generation_id") or id(turn)
        if key not in seen:
            seen.add(key)
            _unjournaled(state, turn, where, dataset, ident, "turn", answer=True)


def _read_turns_file(
    state: ResumeState, out: Path, journal_runs: Collection[str], repair: bool, seen: set[Any]
) -> None:
    """The turns ``generate --turns all`` kept of rows not finished (a torn tail cut first)."""
    path = turns_path(out)
    if not path.exists():
        return
    torn = repair_torn_tail(path) if repair else None
    if torn:
        log.warning("%s: cut a torn last line (%d bytes) left by a crash", path, len(torn))
    for lineno, ident, dataset, turn in read_turns(path):
        if ident in state.finished:
            continue
        state.turns.setdefault(ident, []).append(turn)
        _count_turns(state, [turn], f"{path}:{lineno}", dataset, ident, journal_runs, seen)
        # its output tokens were billed: they count toward the dataset's target and figures
        state.output_tokens[dataset] = state.output_tokens.get(dataset, 0) + output_tokens_of(turn)


def load_resume_state(
    path: str | Path,
    *,
    redo_failed: bool = False,
    journal_runs: Collection[str] = frozenset(),
    adopted: Collection[str] = frozenset(),
    repair: bool = True,
    awaited: Collection[str] = frozenset(),
) -> ResumeState:
    """Read what an existing output file holds (empty when it is absent), after cutting a torn
    tail (``repair``: only under the output's lock).

    Records count no money: the journal does. Records (and kept turns) of runs not in
    ``journal_runs`` whose keys are not in ``adopted`` (``JournalReplay.adopted``) are listed in
    ``ResumeState.unjournaled``: their money is unknown until the run adopts them.

    ``awaited``: the row ids an earlier run's open batch holds a line for; such a row recorded
    ``failed`` (and not served since) is not finished but ``awaiting`` (its line's answer).
    """
    state = ResumeState()
    p = Path(path)
    seen: set[Any] = set()  # the turns already noted
    if p.exists():
        _read_records(state, p, redo_failed, journal_runs, repair, seen, awaited)
    if not redo_failed:
        state.awaiting = {i for i in state.failed if i in awaited and i not in state.finished}
    # even without the output: the kept turns were paid, and are used (never bought again)
    _read_turns_file(state, p, journal_runs, repair, seen)
    if adopted:
        state.unjournaled = [u for u in state.unjournaled if u.key not in adopted]
    return state


def _read_records(
    state: ResumeState,
    p: Path,
    redo_failed: bool,
    journal_runs: Collection[str],
    repair: bool,
    seen: set[Any],
    awaited: Collection[str],
) -> None:
    state.exists = True
    state.torn = repair_torn_tail(p) if repair else None
    if state.torn:
        log.warning(
            "%s: cut a torn last line (%d bytes) left by a crash; that row will be sent again",
            p,
            len(state.torn),
        )
    for lineno, record in iter_records(p):
        state.rows += 1
        status = record.get("status")
        dataset = str(record.get("dataset") or "default")
        ident = str(record["id"])
        where = f"{p}:{lineno}"
        turns = record.get("turns")
        if type(turns) is list:  # each turn is its own answer; a row's totals are their sums
            _count_turns(state, turns, where, dataset, ident, journal_runs, seen)
        if record.get("run_id") not in journal_runs and (
            type(turns) is not list or status not in ("ok", "truncated")
        ):
            served = status in ("ok", "truncated") and type(turns) is not list
            _unjournaled(state, record, where, dataset, ident, "row", answer=served)
        if status in FINISHED and ident not in state.finished:
            if status == "failed":
                state.failed.add(ident)
                if redo_failed or ident in awaited:
                    continue
            state.finished.add(ident)
            state.rows_by_dataset[dataset] = state.rows_by_dataset.get(dataset, 0) + 1
        elif status not in ("ok", "truncated"):
            continue
        if status != "failed":
            state.failed.discard(ident)  # served after it failed: the answer is the row's
        # every answer's billed output tokens count (a target is of billed tokens): a truncated
        # answer and the one ``--redo-truncated`` bought after it are both paid; the row once
        tokens = output_tokens_of(record)
        if tokens:
            state.output_tokens[dataset] = state.output_tokens.get(dataset, 0) + tokens
        if type(turns) is not list:
            state.lengths.add(tokens, status == "truncated")


class OutputLog:
    """The output file open for appending: one flushed line per record.

    A write that fails (a full disk, a read-only file system, a quota) fails the output for good:
    ``writes.on_failure`` is told once (the run stops sending), and no record is written after it (a
    line after a lost one would leave a damaged file; a torn last one is cut on the next start).
    The rows whose records are lost are sent again by the next run: their answers, journaled, are
    paid twice, and only those in flight when the write failed can be.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        on_failure: Callable[[str], None] | None = None,
    ) -> None:
        self.path = Path(path)
        self._handle: IO[str] | None = None
        #: the first failed write (``line``; ``on_failure`` is told it): nothing is written after it
        self.writes = WriteFailures(self.path, on_failure)

    def open(self) -> OutputLog:
        try:
            self._handle = open_append(self.path)
        except OSError as exc:
            raise ConfigError(f"{self.path}: cannot open the output file: {exc.strerror}") from exc
        return self

    def write(self, record: dict[str, Any]) -> None:
        """Append one record as a JSON line and flush it (the row is finished once this returns;
        it is not once a write failed: ``writes``)."""
        if self._handle is None:
            raise RuntimeError("OutputLog.write before open")
        if self.writes.line is not None:
            return
        try:
            append_line(self._handle, dumps_record(record))
        except OSError as exc:
            self.writes.fail(exc)

    def close(self) -> None:
        handle, self._handle = self._handle, None
        self.writes.close(handle)

    def __enter__(self) -> OutputLog:
        return self.open()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

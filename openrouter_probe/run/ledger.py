"""The spend journal beside the output: what was sent, before it was sent, so a SIGKILL loses no money.

The output file records a row once it finishes; a process killed with SIGKILL (or a power cut, an OOM
kill) has requests in flight that the provider may bill and that no record holds. The journal closes
that gap: before each request leaves, a ``sent`` line naming the run, the attempt, the row id and the
attempt's reserved worst case is appended and flushed (``files.append_line``: in the OS once it
returns, so it survives the process being killed); when the attempt settles (an answer, a final
failure, a failure that will be retried, a cancellation) a ``settled`` line records what it really
cost. Its path is the output's with ``.ledger`` added (``out.jsonl`` -> ``out.jsonl.ledger``), so
``*.jsonl`` globs given to ``audit`` and ``export`` never pick it up.

Lines (one JSON object each; unknown keys and other lines are ignored, so later versions can add)::

    {"run":"3f9a0c1b2d4e","started_utc":"2026-11-30T15:20:00Z","out":"out.jsonl","budget_usd":"100"}
    {"sent":17,"run":"3f9a0c1b2d4e","id":"r17","reserved_usd":"0.00446"}
    {"settled":17,"run":"3f9a0c1b2d4e","cost_usd":"0.00212"}

Replay (on every start, before the cap is set): a torn last line is cut (a torn ``sent`` line's
request never left: it is sent only after the line is written). Each output record carries the
``run_id`` of the run that wrote it, and accounts for every attempt its run made for its row
(``cost_usd``, ``failed_attempts_cost_usd``, ``possibly_billed_usd``). Every other attempt in the
journal is money no record holds: a settled one counts its ``cost_usd`` (a billed failure of a row
that never finished), an unsettled one counts its whole reservation as possibly billed (it was in
flight when the run died; whether the provider billed it is unknowable from here). Their sum is added
to the output's spend, so the cap holds across a ``kill -9`` and a restart.

Settled lines are buffered and reach the file with the next ``sent`` line (or at close): a settle
lost to a crash only makes replay count the reservation instead of the cost, never less.
"""

from __future__ import annotations

import datetime
import json
import logging
import secrets
from collections.abc import Collection
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import IO, Any

from openrouter_probe.errors import ConfigError
from openrouter_probe.files import append_line, iter_jsonl, repair_torn_tail
from openrouter_probe.rules.quantities import recorded_usd

__all__ = ["LEDGER_SUFFIX", "Ledger", "LedgerReplay", "ledger_path", "replay_ledger"]

log = logging.getLogger(__name__)

LEDGER_SUFFIX = ".ledger"
_ZERO = Decimal(0)
#: What to do about a damaged journal line.
_DAMAGED = (
    "the file is damaged. Restore it, or delete it to stop counting the requests it records "
    "against --budget-usd"
)


def ledger_path(out: str | Path) -> Path:
    """Return the journal's path for the output file ``out`` (``out.jsonl`` -> ``out.jsonl.ledger``)."""
    p = Path(out)
    return p.with_name(p.name + LEDGER_SUFFIX)


@dataclass
class LedgerReplay:
    """What a journal holds that the output does not: money of attempts no record accounts for."""

    path: Path
    attempts: int = 0  # sent lines read
    runs: int = 0  # distinct runs seen in sent lines
    in_flight: int = 0  # sent, never settled, no record: in flight when a run died
    possibly_billed_usd: Decimal = _ZERO  # their reservations
    unrecorded: int = 0  # settled, no record (billed retries of rows that never finished)
    unrecorded_usd: Decimal = _ZERO  # their costs
    torn: bytes | None = None

    @property
    def extra_usd(self) -> Decimal:
        """Money to add to the output's spend: possibly billed plus billed but unrecorded."""
        return self.possibly_billed_usd + self.unrecorded_usd


def _number(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{where}: attempt {value!r} is not a number; {_DAMAGED}")
    return value


def replay_ledger(
    path: str | Path,
    *,
    accounted: Collection[tuple[str, str]],
    output_exists: bool = True,
    repair: bool = True,
) -> LedgerReplay:
    """Repair a torn tail of the journal at ``path``, then total what no output record accounts for.

    ``accounted`` holds ``(run_id, row id)`` for every record of the output. A journal whose output
    is gone (``output_exists=False``) is a ``ConfigError``: its money would count against a fresh
    output's cap, or silently vanish; the user decides. A line in the middle that is not JSON is a
    ``ConfigError`` naming the file and line. ``repair=False`` reads without writing (``audit``):
    a torn last line is skipped instead of cut.
    """
    p = Path(path)
    replay = LedgerReplay(path=p)
    if not p.exists():
        return replay
    if not output_exists:
        raise ConfigError(
            f"{p}: a spend journal without its output file {p.name[: -len(LEDGER_SUFFIX)]}: "
            "restore the output to resume, or delete the journal to start afresh (the money it "
            "records will then no longer count against --budget-usd)"
        )
    replay.torn = repair_torn_tail(p) if repair else None
    if replay.torn:
        log.warning("%s: cut a torn last line (%d bytes) left by a crash", p, len(replay.torn))
    # (run, attempt) -> [row id, reserved, settled cost or None]
    attempts: dict[tuple[str, int], list[Any]] = {}
    runs: set[str] = set()
    for lineno, line in iter_jsonl(
        p, what="the spend journal", line="a spend journal line", damaged=_DAMAGED
    ):
        if not isinstance(line, dict):
            continue
        where = f"{p}:{lineno}"
        run = str(line.get("run"))
        if "sent" in line:
            reserved = recorded_usd(line.get("reserved_usd"), where, damaged=_DAMAGED)
            attempts[(run, _number(line["sent"], where))] = [str(line.get("id")), reserved, None]
            runs.add(run)
        elif "settled" in line:
            entry = attempts.get((run, _number(line["settled"], where)))
            if entry is not None:
                entry[2] = recorded_usd(line.get("cost_usd"), where, damaged=_DAMAGED)
    replay.attempts = len(attempts)
    replay.runs = len(runs)
    for (run, _), (ident, reserved, cost) in attempts.items():
        if (run, ident) in accounted:
            continue
        if cost is None:
            replay.in_flight += 1
            replay.possibly_billed_usd += reserved
        elif cost:
            replay.unrecorded += 1
            replay.unrecorded_usd += cost
    return replay


class Ledger:
    """The journal open for appending, for one run: ``sent`` before each request, ``settle`` after."""

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

    def open(self) -> Ledger:
        """Open for appending and write the run's header line (plus the ``header`` fields)."""
        try:
            self._handle = self.path.open("a", encoding="utf-8")
        except OSError as exc:
            raise ConfigError(
                f"{self.path}: cannot open the spend journal: {exc.strerror}"
            ) from exc
        started = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        first = {"run": self.run_id, "started_utc": started, **self.header}
        append_line(
            self._handle, json.dumps(first, separators=(",", ":"), default=str), fsync=self.fsync
        )
        return self

    def sent(self, row_id_json: str, reserved_usd: Decimal) -> int:
        """Record an attempt about to be sent and flush it; return its number for ``settle``.

        ``row_id_json`` is the row id already as JSON (a quoted string). Call it after the
        reservation and before the request leaves: once it returns, the line is in the OS.
        """
        handle = self._handle
        if handle is None:
            raise RuntimeError("Ledger.sent before open")
        self._next += 1
        append_line(
            handle,
            f'{{"sent":{self._next},"run":{self._run_json},"id":{row_id_json},'
            f'"reserved_usd":"{reserved_usd}"}}\n',
            fsync=self.fsync,
        )
        return self._next

    def settle(self, attempt: int, cost_usd: Decimal | None, *, cancelled: bool = False) -> None:
        """Record what an attempt cost (``None``: nothing billed). Buffered: see the module doc."""
        handle = self._handle
        if handle is None:
            raise RuntimeError("Ledger.settle before open")
        cost = "null" if cost_usd is None else f'"{cost_usd}"'
        extra = ',"cancelled":true' if cancelled else ""
        handle.write(f'{{"settled":{attempt},"run":{self._run_json},"cost_usd":{cost}{extra}}}\n')

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None

    def __enter__(self) -> Ledger:
        return self.open()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

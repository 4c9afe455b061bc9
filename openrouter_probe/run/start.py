"""What a job learned before its first request (``RunStart``), a deep-frozen value: what it was
given, the rows read, the datasets, the money the output held before, its notes and warnings. The
steps before sending each return what they found to say (``Said``); the job adds them up and
makes its ``RunStart`` once; the run's ``run.result.RunResult`` is that start and what the run
counted.

Example::

    said = Said(notes=("endpoints and prices from a snapshot: ...",)) + Said(warnings=("...",))
    start = RunStart(out="out.jsonl", policy="p.yaml", model="m", rows_total=4).saying(said)
    with open_run(options) as paid:  # what the output held before, and the job's own fields
        start = RunStart.opened(paid.held, policy="p.yaml", model="m", rows_total=4, said=said)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from types import MappingProxyType
from typing import Any

from openrouter_probe.run.tallies import DatasetTally, Frozen

__all__ = ["Held", "RunStart", "Said"]

_ZERO = Decimal(0)
_NONE: Mapping[str, Any] = MappingProxyType({})


def empty() -> Mapping[str, Any]:
    """The empty read-only mapping (a default of a mapping field: one for all)."""
    return _NONE


@dataclass(frozen=True)
class Said:
    """What a step before sending found to say: ``notes`` (besides warnings: where the rows and
    prices came from, the sampling sent) and ``warnings``, each in the order said; parts add."""

    notes: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()

    def __add__(self, other: Said) -> Said:
        return Said(self.notes + other.notes, self.warnings + other.warnings)


@dataclass(frozen=True)
class Held:
    """What an output opened for a run held before it (``run.paid.PaidRun.held``): its path and
    its journal's, the cap, the money its journal holds (in all, of it possibly billed, by
    dataset), the requests killed in flight, the rows finished and their output tokens by
    dataset, and what opening it warned."""

    out: str
    journal: str
    budget_usd: Decimal | None
    spent_usd: Decimal
    possibly_billed_usd: Decimal
    killed_in_flight: int
    done_by_dataset: Mapping[str, int]
    tokens_by_dataset: Mapping[str, int]
    spent_by_dataset: Mapping[str, Decimal]
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class RunStart(Frozen):
    """What a job learned before its first request: what it was given, the rows read (skipped,
    ending on an assistant turn, already done), the datasets with what earlier runs finished and
    spent, the money the output held before, the turns to send, its notes and warnings. Each
    field is the ``RunResult``'s of that name (a ``RunResult`` is a ``RunStart`` and what the run
    counted)."""

    out: str
    policy: str
    model: str
    rows_total: int = 0
    rows_already_done: int = 0
    rows_to_send: int = 0
    duplicates: int = 0
    #: rows of the prompts skipped (unreadable, not a valid conversation: never sent), and rows whose
    #: conversation ends on an assistant turn (``--turns last`` regenerates that turn)
    rows_skipped: int = 0
    #: every skipped row, ``"FILE:LINE: why"`` (the warnings name the first few)
    skipped_rows: tuple[str, ...] = ()
    rows_ending_on_assistant: int = 0
    spent_before_usd: Decimal = _ZERO
    possibly_billed_before_usd: Decimal = _ZERO
    killed_in_flight_before: int = 0
    #: ``--turns all``: turns the rows to send need, one request each (``None``: ``--turns
    #: last``), turns the turns file already held for them
    turns_to_send: int | None = None
    turns_resumed: int = 0
    turns_file: str = ""
    journal: str = ""  # the spend journal's path (``OUT.ledger``)
    budget_usd: Decimal | None = None
    shards: int | None = None
    #: ``shard="auto"``: the shard and the launcher's variables that gave it, e.g.
    #: "shard 1/4 from the launcher (RANK=1, WORLD_SIZE=4)"
    shard_from: str = ""
    datasets: Mapping[str, DatasetTally] = field(default_factory=empty)
    #: what the run says besides warnings (the sampling a model card fixes, sent explicitly)
    notes: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()

    @classmethod
    def opened(
        cls,
        held: Held,
        *,
        datasets: Mapping[str, int] | None = None,
        said: Said | None = None,
        **fields: Any,
    ) -> RunStart:
        """What a run starts from: ``fields`` (``budget_usd``: the cap learned), what its output
        ``held`` before, ``datasets`` (rows per dataset of the prompts), ``said`` after the
        output's warnings."""
        said = said or Said()
        tallies = {  # every dataset of the prompts, 0 included
            name: DatasetTally(
                rows=count,
                done=held.done_by_dataset.get(name, 0),
                output_tokens=held.tokens_by_dataset.get(name, 0),
                spent_usd=held.spent_by_dataset.get(name, _ZERO),
            )
            for name, count in (datasets or {}).items()
        }
        return cls(
            out=held.out,
            spent_before_usd=held.spent_usd,
            possibly_billed_before_usd=held.possibly_billed_usd,
            killed_in_flight_before=held.killed_in_flight,
            journal=held.journal,
            datasets=tallies,
            notes=said.notes,
            warnings=(*held.warnings, *said.warnings),
            **{"budget_usd": held.budget_usd, **fields},
        )

    def saying(self, said: Said) -> RunStart:
        """This start with ``said``'s notes and warnings after its own."""
        return dataclasses.replace(
            self, notes=self.notes + said.notes, warnings=self.warnings + said.warnings
        )

    def with_money_before(
        self, spent_usd: Decimal, possibly_billed_usd: Decimal, by_dataset: Mapping[str, Decimal]
    ) -> RunStart:
        """This start with the money the output held before: in all, of it possibly billed, and
        each dataset's (``by_dataset``; a dataset it does not name: 0)."""
        return dataclasses.replace(
            self,
            spent_before_usd=spent_usd,
            possibly_billed_before_usd=possibly_billed_usd,
            datasets={
                name: dataclasses.replace(tally, spent_usd=by_dataset.get(name, _ZERO))
                for name, tally in self.datasets.items()
            },
        )

    def values(self) -> dict[str, Any]:
        """Its fields by name (the values themselves, not copies)."""
        return {f.name: getattr(self, f.name) for f in _START_FIELDS}


_START_FIELDS = dataclasses.fields(RunStart)

"""What a run did: rows, tokens, money and why it stopped (``RunResult``), a deep-frozen value.

``run.start.RunStart`` is what a job learned before its first request (the rows read and
skipped, the datasets, what the output held before, its notes and warnings). The books make the
``RunResult`` once, at the end, from the ``RunStart`` and what they counted
(``run.books.books.Books.summarize``; a run that sends nothing: ``RunResult.of``). Every list in
either is a tuple, every mapping a read-only ``types.MappingProxyType``, every tally frozen
(``run.tallies``). Results of a job's shards add (``a + b``); ``run.report.render_result`` writes
one for people.

Example::

    start = RunStart(out="out.jsonl", policy="p.yaml", model="m", rows_total=4)
    result = RunResult.of(start, stop_reason=StopReason.DRY_RUN, not_sent=4)
    both = result + result  # rows_total 8, not_sent 8
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from openrouter_probe.run.counts import Figures
from openrouter_probe.run.start import RunStart, empty
from openrouter_probe.run.stop import StopReason
from openrouter_probe.run.tallies import DatasetTally, ProviderTally, joined, plus, summed

__all__ = ["RunResult", "RunSummary"]

_ZERO = Decimal(0)


@dataclass(frozen=True)
class RunResult(Figures, RunStart):
    """The outcome of a paid run: what its rows, requests and money came to (``Figures``, as
    the books counted them), spend against the cap, and the stop reason. A value: the books make
    it once, when the run ends (``run.books.books.Books.summarize``), from the job's
    ``RunStart``; what is said of it afterwards is a new one (``dataclasses.replace``).

    Money: ``spent_usd`` is this run's (known costs, plus what attempts whose cost is unknown may
    have cost, ``possibly_billed_usd``, at their worst case until ``/generation`` settled them:
    ``reconciled`` of them, giving back ``reconciled_back_usd``). ``spent_before_usd`` is what the
    output's journal and records held before (of it ``possibly_billed_before_usd``, less what this
    run settled: ``reconciled_before``, ``reconciled_before_back_usd``). ``stop_reason`` is a
    ``run.stop.StopReason`` (each reason says when it is given).
    """

    retries: int = 0
    pauses: int = 0
    #: providers that billed past ``max_tokens``: (answers, worst ratio, USD past the limits)
    overshoot: Mapping[str, tuple[int, float, Decimal]] = field(default_factory=empty)
    #: the dry run of a sharded job: each shard's ``{"shard", "rows", "worst_usd", "this"}``
    shard_shares: tuple[Mapping[str, Any], ...] = ()
    output_tokens: Mapping[str, int] = field(default_factory=empty)
    providers: Mapping[str, ProviderTally] = field(default_factory=empty)
    stop_reason: StopReason = StopReason.DONE
    message: str = ""
    elapsed_s: float = 0.0
    peak_committed_usd: Decimal = _ZERO
    #: the most the run's requests in flight held at once (their worst cases), and the in-flight
    #: 402s OpenRouter answered (its in-flight budget full: ``run.money.limit.DollarWindow``)
    held_max_usd: Decimal = _ZERO
    in_flight_refusals: int = 0
    #: ``pilot=N``: each dataset's figures (``generation.pilot.PilotFigures.to_dict``)
    pilot: tuple[Mapping[str, Any], ...] = ()
    worst_case_usd: Decimal | None = None  # dry run: every row at its worst case
    expected_usd: Decimal | None = None  # dry run: the budget planner's blended figure

    @classmethod
    def of(cls, start: RunStart, **counted: Any) -> RunResult:
        """The result of a run that began at ``start`` and ``counted`` what the keywords say (a
        field of ``start`` given again is the one given: what the run learned of it since)."""
        return cls(**{**start.values(), **counted})

    def __add__(self, other: RunResult) -> RunResult:
        """Two shards' results as one job's, as datatrove adds its stats. Counts, tokens and money
        sum (a figure unknown in either, ``None``, stays unknown); the stop reason is the worse
        one, with its message (the one that did not end as asked; of two, the one with the
        higher exit code; ties keep ``self``'s); ``elapsed_s`` is the longer (shards run side by
        side); per dataset and per provider the tallies add, per overshooting provider the
        answers and dollars add and the worst ratio is the larger; notes, warnings, skipped rows
        and shard shares are ``self``'s then those of ``other`` not already said. ``out``,
        ``journal``, ``turns_file``, ``shard_from`` are joined by ``", "`` when they differ;
        ``policy``, ``model`` and ``shards`` are one job's (``ValueError`` when they differ)."""
        if (self.policy, self.model, self.shards) != (other.policy, other.model, other.shards):
            raise ValueError(
                f"results of different jobs do not add: {self.model} via {self.policy} "
                f"({self.shards} shards) and {other.model} via {other.policy} "
                f"({other.shards} shards)"
            )
        worse = self if _worse_or_same(self.stop_reason, other.stop_reason) else other
        overshoot = dict(self.overshoot)
        for name, (answers, ratio, usd) in other.overshoot.items():
            mine = overshoot.get(name, (0, 0.0, _ZERO))
            overshoot[name] = (mine[0] + answers, max(mine[1], ratio), mine[2] + usd)
        figures = {
            f.name: plus(getattr(self, f.name), getattr(other, f.name))
            for f in dataclasses.fields(self)
            if f.name in _SUMMED
        }
        return RunResult(
            **figures,
            out=_either(self.out, other.out),
            journal=_either(self.journal, other.journal),
            turns_file=_either(self.turns_file, other.turns_file),
            shard_from=_either(self.shard_from, other.shard_from),
            policy=self.policy,
            model=self.model,
            shards=self.shards,
            skipped_rows=joined(self.skipped_rows, other.skipped_rows),
            notes=joined(self.notes, other.notes),
            warnings=joined(self.warnings, other.warnings),
            shard_shares=joined(self.shard_shares, other.shard_shares),
            pilot=joined(self.pilot, other.pilot),
            overshoot=overshoot,
            output_tokens=summed(self.output_tokens, other.output_tokens),
            datasets=summed(self.datasets, other.datasets),
            providers=summed(self.providers, other.providers),
            stop_reason=worse.stop_reason,
            message=worse.message,
            elapsed_s=max(self.elapsed_s, other.elapsed_s),
        )

    @property
    def ledger(self) -> str:
        """Deprecated (goes in 0.4.0): ``journal``, the spend journal's path."""
        warnings.warn(
            "RunResult.ledger is now RunResult.journal (the spend journal's path); "
            "ledger goes in 0.4.0",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.journal

    @property
    def spent_total_usd(self) -> Decimal:
        """This run's spend plus what earlier runs on the same output spent (journal, records)."""
        return self.spent_before_usd + self.spent_usd

    @property
    def remaining_usd(self) -> Decimal | None:
        """What is left of the budget after ``spent_total_usd`` (never below 0; ``None``: no
        budget)."""
        if self.budget_usd is None:
            return None
        return max(_ZERO, self.budget_usd - self.spent_total_usd)

    @property
    def exit_code(self) -> int:
        """The stop reason's (``StopReason.exit_code``): 0 as asked, 130 a signal, else 1."""
        return StopReason(self.stop_reason).exit_code

    def to_dict(self) -> dict[str, Any]:
        """Every field by name as JSON holds it (money as floats, tallies as dicts; where the run
        ended first, datasets and providers by name), then ``spent_total_usd``,
        ``remaining_usd`` and ``ledger`` (``journal``'s old key, until 0.4.0)."""
        said: dict[str, Any] = dict.fromkeys(("out", "policy", "model", "stop_reason", "message"))
        said.update((f.name, _json(getattr(self, f.name))) for f in dataclasses.fields(self))
        said.update(
            stop_reason=str(self.stop_reason),
            datasets=dict(sorted(said["datasets"].items())),
            providers=dict(sorted(said["providers"].items())),
            overshoot={
                k: {"answers": n, "worst_ratio": round(r, 3), "over_usd": float(usd)}
                for k, (n, r, usd) in sorted(self.overshoot.items())
            },
            elapsed_s=round(self.elapsed_s, 3),
            spent_total_usd=float(self.spent_total_usd),
            remaining_usd=_json(self.remaining_usd),
            ledger=self.journal,
        )
        return said


#: The figures ``RunResult.__add__`` sums (every count, token and dollar figure).
_SUMMED = {
    f.name
    for f in dataclasses.fields(RunResult)
    if f.type in ("int", "Decimal", "int | None", "Decimal | None") and f.name != "shards"
}

#: Deprecated name of ``RunResult`` (documented as ``openrouter_probe.RunSummary``; goes in 0.4.0).
RunSummary = RunResult


def _worse_or_same(a: StopReason, b: StopReason) -> bool:
    """Whether stop reason ``a`` is at least as bad as ``b``: not as asked over as asked, then
    the higher exit code (a signal's 130 over 1); ``done`` is the mildest of the as-asked ones."""

    def rank(reason: StopReason) -> tuple[int, int, int]:
        reason = StopReason(reason)
        return (not reason.as_asked, reason.exit_code, reason != StopReason.DONE)

    return rank(a) >= rank(b)


def _json(value: Any) -> Any:
    """``value`` as JSON holds it: money as floats, tuples as lists, mappings as dicts, tallies
    by their ``to_dict``."""
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, tuple):
        return [_json(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _json(v) for k, v in value.items()}
    return value.to_dict() if isinstance(value, ProviderTally | DatasetTally) else value


def _either(a: str, b: str) -> str:
    """``a``, or ``"a, b"`` when they differ (``""`` left out)."""
    return ", ".join(dict.fromkeys(x for x in (a, b) if x)) if a != b else a

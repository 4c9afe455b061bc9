"""``generate(pilot=N)``: send the first N rows of each dataset, then say what their answers teach.

A pilot is a run like any other, of fewer rows (``Pilot.of``: the first ``N`` of each dataset),
built by the full run's request builder into the same output and journal, so that the same
command without ``pilot`` resumes from it and never pays for those rows twice. ``report`` reads
the pilot's answers back and says, per dataset, their lengths, the ``max_tokens`` that would have
kept 95% and 99% whole (``run.counts.AnswerLengths.keeps``) and what a request at it holds in
flight (``Request.worst_usd``), and the useful rows per dollar; it never changes ``max_tokens``.
``docs/generate.md`` ("A pilot first") shows the report and each rule.

Example::

    summary = await orp.generate("prompts.jsonl", policy=POLICY, out="out.jsonl", pilot=20,
                                 budget_usd=5)
    print(orp.render_result(summary))  # per dataset: lengths, the max_tokens keeping 95% whole
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from openrouter_probe.errors import Message
from openrouter_probe.generation.records import reasoning_tokens_of
from openrouter_probe.run.books.output import iter_records, output_tokens_of
from openrouter_probe.run.config import RunPlan
from openrouter_probe.run.counts import AnswerLengths
from openrouter_probe.run.money.spend import Prices
from openrouter_probe.run.result import RunResult
from openrouter_probe.run.rows import PromptRow
from openrouter_probe.run.send.request import RequestBuilder
from openrouter_probe.run.stop import StopReason

__all__ = ["PERCENTILES", "Pilot", "PilotFigures", "percentile"]

#: The answer-length percentiles the report gives (``max`` besides them).
PERCENTILES = (50, 90, 95)
#: The shares of whole answers the report names a ``max_tokens`` for.
SHARES = (0.95, 0.99)


def percentile(values: Iterable[int], p: float) -> int | None:
    """The ``p``-th percentile of ``values``, nearest rank (a value that occurred; ``None``: no
    value): the least value with at least ``p``% of them at or under it."""
    ordered = sorted(values)
    if not ordered:
        return None
    return ordered[max(1, math.ceil(p / 100 * len(ordered))) - 1]


@dataclass(frozen=True)
class PilotFigures:
    """What one dataset's pilot answers say (see the module). Lengths are billed output tokens
    (``output``, reasoning included) and reasoning tokens (``reasoning``), each ``{"p50": ...,
    "max": ...}``; ``keeps`` maps a share (0.95, 0.99) to the ``max_tokens`` that keeps it whole
    (``None``: too many were cut to say); ``hold_usd`` the most one request at that
    ``max_tokens`` holds in flight; ``cost_per_answer_usd`` the pilot's mean (``None``: an answer
    states no cost); ``rows`` the dataset's rows in the prompts; ``by_turn`` the pilot rows
    answered turn by turn (``turns="all"``: not measured)."""

    dataset: str
    answers: int
    cut: int
    output: Mapping[str, int | None]
    reasoning: Mapping[str, int | None]
    keeps: Mapping[float, int | None]
    hold_usd: Mapping[float, Decimal | None]
    cost_per_answer_usd: Decimal | None
    rows: int
    by_turn: int = 0

    @property
    def whole_share(self) -> Decimal | None:
        """The share of the pilot's answers not cut (``None``: no answer)."""
        return Decimal(self.answers - self.cut) / self.answers if self.answers else None

    @property
    def projected_usd(self) -> Decimal | None:
        """The dataset's rows at the pilot's mean cost per answer (``None``: unknown)."""
        if self.cost_per_answer_usd is None:
            return None
        return self.cost_per_answer_usd * self.rows

    def to_dict(self) -> dict[str, Any]:
        """The figures by name, as the summary's JSON holds them (``RunResult.pilot``)."""

        def usd(value: Decimal | None) -> float | None:
            return None if value is None else float(value)

        return {
            "dataset": self.dataset,
            "answers": self.answers,
            "cut": self.cut,
            "output_tokens": dict(self.output),
            "reasoning_tokens": dict(self.reasoning),
            "max_tokens_keeps": {f"{s:.0%}": k for s, k in self.keeps.items()},
            "hold_usd": {f"{s:.0%}": usd(h) for s, h in self.hold_usd.items()},
            "cost_per_answer_usd": usd(self.cost_per_answer_usd),
            "rows": self.rows,
            "projected_usd": usd(self.projected_usd),
        }

    def lines(self, max_tokens: int, concurrency: int) -> list[str]:
        """What the summary says of this dataset (``Message`` lines; see the module)."""
        name = self.dataset
        if not self.answers and self.by_turn:
            return [
                Message(
                    "pilot-turns-unmeasured",
                    "pilot {dataset:s}: {rows:,d} rows answered turn by turn ({turns=all}): a "
                    "turn-by-turn row's answers are not measured (its record is a row, not one "
                    "answer): nothing to learn of its lengths",
                    dataset=name,
                    rows=self.by_turn,
                )
            ]
        if not self.answers:
            return [
                Message(
                    "pilot-no-answers",
                    "pilot {dataset:s}: no answer came back: nothing to learn of its lengths",
                    dataset=name,
                )
            ]
        said: list[str] = [
            Message(
                "pilot-lengths",
                "pilot {dataset:s}: {answers:,d} answers, {cut:,d} cut at {max_tokens=} "
                "({share:.1%}); output tokens {output:s}; reasoning tokens {reasoning:s}",
                dataset=name,
                answers=self.answers,
                cut=self.cut,
                max_tokens=max_tokens,
                share=self.cut / self.answers,
                output=_spread(self.output),
                reasoning=_spread(self.reasoning),
            )
        ]
        unknown = [share for share, keep in self.keeps.items() if keep is None]
        for share, keep in self.keeps.items():
            hold = self.hold_usd[share]
            if keep is None or hold is None:
                continue
            said.append(
                Message(
                    "pilot-keeps",
                    "pilot {dataset:s}: {max_tokens=} would have kept {share:.0%} whole; a "
                    "request at it holds up to ${hold:.6f} in flight (${total:,.4f} at "
                    "{concurrency=})",
                    dataset=name,
                    max_tokens=keep,
                    share=share,
                    hold=hold,
                    total=hold * concurrency,
                    concurrency=concurrency,
                )
            )
        if unknown:
            said.append(
                Message(
                    "pilot-keeps-unknown",
                    "pilot {dataset:s}: keeping {shares:s} whole needs a higher "
                    "{max_tokens:bare}, by how much these answers cannot say (a cut answer's "
                    "length is unknown)",
                    dataset=name,
                    shares=" or ".join(f"{share:.0%}" for share in unknown),
                )
            )
        said.append(self._useful())
        return said

    def _useful(self) -> str:
        whole, cost, projected = self.whole_share, self.cost_per_answer_usd, self.projected_usd
        if cost is None or projected is None or whole is None or cost <= 0:
            return Message(
                "pilot-useful-unknown",
                "pilot {dataset:s}: useful rows per dollar unknown: an answer states no cost",
                dataset=self.dataset,
            )
        per = 1 / cost
        return Message(
            "pilot-useful",
            "pilot {dataset:s}: useful rows per dollar {useful:,.1f} of {per:,.1f} ({whole:.1%} "
            "whole), at ${cost:.6f} an answer: its {rows:,d} rows about ${projected:,.2f}",
            dataset=self.dataset,
            useful=per * whole,
            per=per,
            whole=whole,
            cost=cost,
            rows=self.rows,
            projected=projected,
        )


def _spread(figures: Mapping[str, int | None]) -> str:
    return ", ".join(f"{name} {'?' if v is None else f'{v:,d}'}" for name, v in figures.items())


@dataclass(frozen=True)
class Pilot:
    """The first ``size`` rows of each dataset (``first``, in the prompts' order) and every
    dataset's rows (``rows``): what a pilot sends and what it projects over; ``left`` the rows
    still to send that are not the pilot's (what the same command without it sends besides)."""

    size: int
    first: Mapping[str, tuple[PromptRow, ...]]
    rows: Mapping[str, int]
    left: int = 0

    @classmethod
    def of(
        cls, rows: Iterable[PromptRow], size: int, todo: list[PromptRow]
    ) -> tuple[Pilot, list[PromptRow]]:
        """The pilot of ``rows`` (the prompts', in their order): the first ``size`` of each
        dataset; and of ``todo``, the rows still to send, the pilot's (an earlier pilot's answers
        stay done; the others are ``left``)."""
        first: dict[str, list[PromptRow]] = {}
        counted: Counter[str] = Counter()
        for row in rows:
            counted[row.dataset] += 1
            taken = first.setdefault(row.dataset, [])
            if len(taken) < size:
                taken.append(row)
        pilot = cls(size, {d: tuple(taken) for d, taken in first.items()}, dict(counted))
        ids = pilot.ids
        sending = [row for row in todo if row.id in ids]
        return dataclasses.replace(pilot, left=len(todo) - len(sending)), sending

    @property
    def ids(self) -> set[str]:
        """The ids of the pilot's rows, every dataset's."""
        return {row.id for taken in self.first.values() for row in taken}

    def dry_run(self, result: RunResult, todo: list[PromptRow]) -> RunResult:
        """The dry run's result (of the pilot's rows ``todo``) with what the pilot would send
        and cost at most."""
        sending = Counter(row.dataset for row in todo)
        said = Message(
            "pilot-dry-run",
            "a pilot of the first {pilot=} rows of each dataset: {count:,d} to send ({per:s}), "
            "${worst:,.4f} at most (their worst case); it then reports their answer lengths and "
            "the {max_tokens:bare} that keeps 95% and 99% whole",
            pilot=self.size,
            count=len(todo),
            per=", ".join(f"{d} {sending[d]:,d}" for d in sorted(self.first)),
            worst=result.worst_case_usd or Decimal(0),
        )
        return dataclasses.replace(result, notes=(*result.notes, said))

    def figures(self, out: Path, builder: RequestBuilder, prices: Prices) -> list[PilotFigures]:
        """Each dataset's figures, from the pilot rows' answers in ``out`` (the last answer of a
        row is its own: a redo supersedes a cut one)."""
        answers, turned = _answers(out, self.ids) if out.exists() else ({}, set())
        figures = []
        for dataset, rows in sorted(self.first.items()):
            records = [answers[row.id] for row in rows if row.id in answers]
            lengths = AnswerLengths()
            for record in records:
                lengths.add(output_tokens_of(record), record["status"] == "truncated")
            keeps = {share: lengths.keeps(share) for share in SHARES}
            hold = {
                share: None if keep is None else _hold(rows, builder, prices, keep)
                for share, keep in keeps.items()
            }
            figures.append(
                PilotFigures(
                    dataset=dataset,
                    answers=lengths.answers,
                    cut=lengths.cut,
                    output=_lengths([output_tokens_of(r) for r in records]),
                    reasoning=_lengths([reasoning_tokens_of(r) for r in records]),
                    keeps=keeps,
                    hold_usd=hold,
                    cost_per_answer_usd=_mean_cost(records),
                    rows=self.rows[dataset],
                    by_turn=sum(row.id in turned for row in rows),
                )
            )
        return figures

    def report(
        self, result: RunResult, options: RunPlan, builder: RequestBuilder, prices: Prices
    ) -> RunResult:
        """``result`` with the pilot's report said (see the module), read from the run's output
        (``options.out``); a run that sent every pilot row stops at ``pilot``, saying what to run
        next, unless no other row is left to send (then at ``done``)."""
        figures = self.figures(options.output, builder, prices)
        lines: list[str] = []
        for dataset in figures:
            lines.extend(dataset.lines(builder.max_tokens, options.concurrency))
        said = dataclasses.replace(
            result,
            notes=(*result.notes, *lines),
            pilot=tuple(dataset.to_dict() for dataset in figures),
        )
        if result.stop_reason != StopReason.DONE or not self.left:
            return said  # stopped short (the reason says why) or nothing else to send: done
        return dataclasses.replace(
            said,
            stop_reason=StopReason.PILOT,
            message=Message(
                "pilot-next",
                "a pilot of the first {pilot=} rows of each dataset; rerun without {pilot:bare} "
                "to send the other {left:,d} rows of the prompts (the pilot's answers are kept: "
                "not sent or paid again); {max_tokens:bare} is not changed: give it to change it",
                pilot=self.size,
                left=self.left,
            ),
        )


def _answers(out: Path, ids: set[str]) -> tuple[dict[str, dict[str, Any]], set[str]]:
    """The last answer (``ok`` or ``truncated``, not turn by turn) of each of ``ids`` in ``out``,
    and those of ``ids`` answered turn by turn (not measured)."""
    found: dict[str, dict[str, Any]] = {}
    turned: set[str] = set()
    for _, record in iter_records(out):
        ident = str(record["id"])
        if ident not in ids or record.get("status") not in ("ok", "truncated"):
            continue
        if type(record.get("turns")) is list:
            turned.add(ident)
            found.pop(ident, None)
        else:
            turned.discard(ident)
            found[ident] = record
    return found, turned


def _lengths(values: list[int]) -> dict[str, int | None]:
    figures: dict[str, int | None] = {f"p{p}": percentile(values, p) for p in PERCENTILES}
    figures["max"] = max(values) if values else None
    return figures


def _mean_cost(records: list[dict[str, Any]]) -> Decimal | None:
    """The mean ``cost_usd`` of ``records`` (``None``: one states none, or no record)."""
    total = Decimal(0)
    for record in records:
        cost = record.get("cost_usd")
        if isinstance(cost, bool) or not isinstance(cost, int | float | str):
            return None
        try:
            total += Decimal(str(cost))
        except InvalidOperation:
            return None
    return total / len(records) if records else None


def _hold(
    rows: tuple[PromptRow, ...], builder: RequestBuilder, prices: Prices, max_tokens: int
) -> Decimal:
    """What one of ``rows``' requests at ``max_tokens`` holds in flight at most: its worst case
    at the endpoints' prices (the row's own when pinned), as the dollar window counts it."""
    return max(
        builder.build(
            row, prices if row.prices is None else row.prices, max_tokens=max_tokens
        ).worst_usd
        for row in rows
    )

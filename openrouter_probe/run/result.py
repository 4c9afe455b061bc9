"""What a run did: rows, tokens, money and why it stopped (``RunResult``), a deep-frozen value.

``run.start.RunStart`` is what a job learned before its first request (the rows read and
skipped, the datasets, what the output held before, its notes and warnings). The books make the
``RunResult`` once, at the end, from the ``RunStart`` and what they counted
(``run.books.books.Books.summarize``; a run that sends nothing: ``RunResult.of``). Every list in
either is a tuple, every mapping a read-only ``types.MappingProxyType``, every tally frozen
(``run.tallies``). Results of a job's shards add
(``a + b``); ``render`` writes one for people (the functions at the end of the module).

Example::

    start = RunStart(out="out.jsonl", policy="p.yaml", model="m", rows_total=4)
    result = RunResult.of(start, stop_reason=StopReason.DRY_RUN, not_sent=4)
    both = result + result  # rows_total 8, not_sent 8
"""

from __future__ import annotations

import dataclasses
import textwrap
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from openrouter_probe.errors import Term, keyword_term, render_template, rendered
from openrouter_probe.rules.quantities import format_usd
from openrouter_probe.run.counts import Figures
from openrouter_probe.run.start import RunStart, empty
from openrouter_probe.run.stop import StopReason
from openrouter_probe.run.tallies import (
    ProviderTally,
    joined,
    plus,
    summed,
)

__all__ = ["WIDTH", "RunResult", "RunSummary"]

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

    def render(self, term: Term = keyword_term) -> str:
        """The result for people, in lines of at most 80 columns (wrapped between words: a figure
        is never cut; every dataset listed, 0 included; money never shown negative); ``term``
        says the library's keywords (``errors.keyword_term``; the CLI passes its flags)."""
        return _render(self, term)

    def to_dict(self) -> dict[str, Any]:
        def money(value: Decimal | None) -> float | None:
            return None if value is None else float(value)

        return {
            "out": self.out,
            "policy": self.policy,
            "model": self.model,
            "stop_reason": str(self.stop_reason),
            "message": self.message,
            "rows_total": self.rows_total,
            "rows_already_done": self.rows_already_done,
            "rows_to_send": self.rows_to_send,
            "duplicates": self.duplicates,
            "rows_skipped": self.rows_skipped,
            "skipped_rows": list(self.skipped_rows),
            "rows_ending_on_assistant": self.rows_ending_on_assistant,
            "ok": self.ok,
            "truncated": self.truncated,
            "failed": self.failed,
            "cancelled": self.cancelled,
            "not_sent": self.not_sent,
            "requests": self.requests,
            "retries": self.retries,
            "pauses": self.pauses,
            "spent_usd": money(self.spent_usd),
            "spent_total_usd": money(self.spent_total_usd),
            "possibly_billed_usd": money(self.possibly_billed_usd),
            "possibly_billed_before_usd": money(self.possibly_billed_before_usd),
            "reconciled": self.reconciled,
            "reconciled_back_usd": money(self.reconciled_back_usd),
            "reconciled_before": self.reconciled_before,
            "reconciled_before_back_usd": money(self.reconciled_before_back_usd),
            "unsettleable": self.unsettleable,
            "cache_hits": self.cache_hits,
            "overshoot": {
                k: {"answers": n, "worst_ratio": round(r, 3), "over_usd": float(usd)}
                for k, (n, r, usd) in sorted(self.overshoot.items())
            },
            "notes": list(self.notes),
            "shard_shares": [dict(s) for s in self.shard_shares],
            "pilot": [{k: _plain(v) for k, v in p.items()} for p in self.pilot],
            "killed_in_flight_before": self.killed_in_flight_before,
            "turns_to_send": self.turns_to_send,
            "turns_resumed": self.turns_resumed,
            "turns_done": self.turns_done,
            "rows_partial": self.rows_partial,
            "journal": self.journal,
            "ledger": self.journal,  # the old key, until 0.4.0
            "budget_usd": money(self.budget_usd),
            "shards": self.shards,
            "shard_from": self.shard_from,
            "remaining_usd": money(self.remaining_usd),
            "peak_committed_usd": money(self.peak_committed_usd),
            "held_max_usd": money(self.held_max_usd),
            "in_flight_refusals": self.in_flight_refusals,
            "worst_case_usd": money(self.worst_case_usd),
            "expected_usd": money(self.expected_usd),
            "output_tokens": dict(self.output_tokens),
            "datasets": {k: v.to_dict() for k, v in sorted(self.datasets.items())},
            "providers": {k: v.to_dict() for k, v in sorted(self.providers.items())},
            "elapsed_s": round(self.elapsed_s, 3),
            "warnings": list(self.warnings),
        }


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


def _plain(value: Any) -> Any:
    """A read-only mapping as a dict (JSON), anything else as it is."""
    return dict(value) if isinstance(value, Mapping) else value


def _either(a: str, b: str) -> str:
    """``a``, or ``"a, b"`` when they differ (``""`` left out)."""
    return ", ".join(dict.fromkeys(x for x in (a, b) if x)) if a != b else a


# -- the result for people ---------------------------------------------------------------------

#: The width ``render`` fits its lines to.
WIDTH = 80


def _render(result: RunResult, term: Term) -> str:
    """``RunResult.render``."""
    lines = StopReason(result.stop_reason).why()  # the first line says why, when not as asked
    lines.append(f"{result.model} via {result.policy} -> {result.out}")
    if result.stop_reason == StopReason.DRY_RUN:
        lines.append(
            f"dry run: {result.rows_to_send:,} row{'' if result.rows_to_send == 1 else 's'} to "
            f"send ({result.rows_already_done:,} already "
            f"done, {result.duplicates:,} duplicate ids skipped); nothing sent"
        )
        if result.shard_from:
            lines.append(result.shard_from)
    else:
        lines.append(
            f"rows: {result.ok:,} ok, {result.truncated:,} truncated, {result.failed:,} failed, "
            f"{result.cancelled:,} cancelled, {result.not_sent:,} not sent"
            + (f", {result.rows_partial:,} stopped mid-way" if result.rows_partial else "")
            + f" ({result.rows_already_done:,} already done, {result.duplicates:,} duplicate ids "
            f"skipped); {result.requests:,} requests, {result.retries:,} retried"
        )
    if result.rows_skipped:
        lines.append(
            f"skipped {result.rows_skipped:,} rows of the prompts: not a row to send "
            "(never sent; the warnings name them)"
        )
    if result.stop_reason == StopReason.DRY_RUN and result.rows_ending_on_assistant:
        lines.append(
            f"{result.rows_ending_on_assistant:,} rows end on an assistant turn: that answer "
            "is regenerated ("
            + render_template("{turns=last}", {}, term)
            + " keeps it as `original`)"
        )
    lines.extend(_turn_lines(result, term))
    lines.extend(_money_lines(result, term))
    if result.in_flight_refusals:
        lines.append(
            f"held in flight at most ${result.held_max_usd:,.4f}; {result.in_flight_refusals:,} "
            "in-flight refusals (OpenRouter's in-flight budget: each waited and went again)"
        )
    lines.extend(_dataset_lines(result))
    for name, tally in sorted(result.providers.items()):
        turns = f", {tally.turns:,} turns" if tally.turns else ""
        byok = f" ({_usd(tally.byok_usd)} BYOK: the provider's, to your own key)"
        lines.append(
            f"  {name}: {tally.rows:,} rows{turns}, {tally.completion_tokens:,} output "
            f"tokens, {_usd(tally.cost_usd)}" + (byok if tally.byok_usd else "")
        )
    if result.worst_case_usd is not None:
        what = "rows" if result.turns_to_send is None else "turns"
        lines.append(f"worst case of the {what} to send: ${result.worst_case_usd:,.4f}")
    if result.expected_usd is not None:
        lines.append(f"expected (budget planner, blended): ${result.expected_usd:,.4f}")
    lines.extend(rendered(n, term) for n in result.notes)
    message = rendered(result.message, term)
    lines.append(f"stopped: {result.stop_reason}" + (f": {message}" if message else ""))
    return "\n".join(_fit(line) for line in lines)


def _money_lines(result: RunResult, term: Term) -> list[str]:
    cap = f" of {format_usd(result.budget_usd)}" if result.budget_usd is not None else ""
    remaining = result.remaining_usd
    lines = [
        f"spent: {_usd(result.spent_usd)} this run, {_usd(result.spent_total_usd)} in all{cap}"
        + (f"; {_usd(remaining)} remains" if remaining is not None else "")
    ]
    if result.budget_usd is not None and result.spent_total_usd > result.budget_usd:
        over = result.spent_total_usd - result.budget_usd
        lines.append(f"over the cap by {_usd(over)} (answers cost more than their worst case)")
    if result.shards and result.budget_usd is not None:
        total = result.budget_usd * result.shards
        lines.append(
            render_template("{budget_usd:bare}", {}, term)
            + f" is per shard: {format_usd(result.budget_usd)} x {result.shards} "
            f"shards = {format_usd(total)} on the key in all"
        )
    if result.possibly_billed_usd or result.reconciled:
        lines.append(
            f"possibly billed (cost unknown, counted at the worst case): "
            f"{_usd(result.possibly_billed_usd)}; settled from /generation: "
            f"{result.reconciled} attempt(s), {_usd(result.reconciled_back_usd)} given back"
        )
    if result.possibly_billed_before_usd or result.reconciled_before:
        killed = (
            f", {result.killed_in_flight_before} in flight when a run was killed"
            if result.killed_in_flight_before
            else ""
        )
        settled = (
            "a real run settles what it can from /generation"
            if result.stop_reason == StopReason.DRY_RUN  # a dry run settles nothing
            else f"settled from /generation this run: {result.reconciled_before} attempt(s), "
            f"{_usd(result.reconciled_before_back_usd)} given back"
        )
        lines.append(
            f"possibly billed by earlier runs{killed}: "
            f"{_usd(result.possibly_billed_before_usd)} at the worst case; {settled} "
            f"({result.journal})"
        )
    if result.cache_hits:
        lines.append(
            f"{result.cache_hits:,} answer(s) from OpenRouter's response cache: billed nothing, "
            "counted $0 (rows resent after a lost answer)"
        )
    for name, (answers, ratio, usd) in sorted(result.overshoot.items()):
        lines.append(
            f"{name} billed past max_tokens: {answers:,} answer(s), up to {ratio:.2f}x, "
            f"{_usd(usd)} for the tokens past the limit (reserved for from then on)"
        )
    if result.unsettleable:
        lines.append(
            f"{result.unsettleable} attempt(s) left with no generation id: they stay at their worst case"
        )
    return lines


def _dataset_lines(result: RunResult) -> list[str]:
    if not result.datasets:
        if not result.output_tokens:
            return []
        items = [f"{k} {v:,}" for k, v in sorted(result.output_tokens.items())]
        return _pack("output tokens (reasoning included):", items)
    lines = ["datasets: rows done/total, output tokens (reasoning included), spent"]
    for name, t in sorted(result.datasets.items()):
        share = f" of {_usd(t.share_usd)}" if t.share_usd is not None else ""
        unsent = f", {t.not_sent:,} not sent" if t.not_sent else ""
        lines.append(
            f"  {name}: {t.done:,}/{t.rows:,} rows, {t.output_tokens:,} tok, "
            f"{_usd(t.spent_usd)}{share}{unsent}"
        )
    return lines


def _turn_lines(result: RunResult, term: Term) -> list[str]:
    """``--turns all``: turns, in one unit with the rows line's requests (every request sends
    one turn: a row's last turn finishes it; a row without turns of its own is one turn)."""
    if result.turns_to_send is None:
        return []
    kept = (
        f" ({result.turns_resumed:,} more kept by earlier runs, not sent again)"
        if result.turns_resumed
        else ""
    )
    asked = render_template("{turns=all}", {}, term)
    line = f"turns ({asked}): {result.turns_to_send:,} to send for the rows to send{kept}"
    if result.stop_reason != StopReason.DRY_RUN:
        line += f"; {result.turns_done:,} answered"
    lines = [line]
    if result.rows_partial:
        lines.append(
            f"{result.rows_partial:,} row(s) stopped mid-way: their finished turns are kept in "
            f"{result.turns_file or 'the turns file'}; rerun the same command to finish them"
        )
    return lines


def _usd(value: Decimal) -> str:
    """Money for people, never negative (``$0.00 remains``), six decimals below a dollar."""
    value = max(_ZERO, value)
    return f"${value:,.2f}" if value >= 1 or value == 0 else f"${value:,.6f}"


def _pack(label: str, items: list[str]) -> list[str]:
    """``label`` then ``items`` joined by ", ", in lines of at most ``WIDTH``, never inside an
    item."""
    lines: list[str] = []
    line = label
    for i, item in enumerate(items):
        piece = item + ("," if i < len(items) - 1 else "")
        if len(line) + 1 + len(piece) > WIDTH and line.strip():
            lines.append(line)
            line = "  " + piece
        else:
            line = f"{line} {piece}" if line else piece
    lines.append(line)
    return lines


def _fit(line: str) -> str:
    """``line`` wrapped at ``WIDTH`` between words (never inside a figure), continued indented."""
    if len(line) <= WIDTH:
        return line
    indent = "  " + " " * (len(line) - len(line.lstrip(" ")))
    return "\n".join(
        textwrap.wrap(
            line,
            width=WIDTH,
            subsequent_indent=indent,
            break_long_words=False,
            break_on_hyphens=False,
        )
    )

"""What a run did: rows, tokens, money and why it stopped (``RunSummary``, a frozen value), and
its draft while the run is set up (``SummaryDraft``: the books make the summary from it at the end).

``render`` writes it for people in lines of at most 80 columns, wrapped between words (a figure
is never cut), every dataset listed (0 included), money never shown negative.
"""

from __future__ import annotations

import dataclasses
import textwrap
import warnings
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from openrouter_probe.errors import Term, keyword_term, render_template, rendered
from openrouter_probe.rules.quantities import format_usd
from openrouter_probe.run.stop import StopReason

__all__ = ["DatasetTally", "ProviderTally", "RunSummary", "SummaryDraft"]

#: The width ``render`` fits its lines to.
WIDTH = 80
_ZERO = Decimal(0)


@dataclass
class ProviderTally:
    """Rows, tokens and cost of the rows one provider (display name) served in this run."""

    rows: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    reasoning_tokens: int = 0
    cost_usd: Decimal = _ZERO
    byok_usd: Decimal = _ZERO  # of ``cost_usd``: billed by the provider to the user's own key
    truncated: int = 0
    turns: int = 0  # answers to turns of rows regenerated turn by turn (``--turns all``)

    def to_dict(self) -> dict[str, Any]:
        return {
            "rows": self.rows,
            "turns": self.turns,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "reasoning_tokens": self.reasoning_tokens,
            "cost_usd": float(self.cost_usd),
            "byok_usd": float(self.byok_usd),
            "truncated": self.truncated,
        }


@dataclass
class DatasetTally:
    """One dataset's rows and money: ``rows`` in the prompts, ``done`` finished (earlier runs
    included), ``not_sent`` this run, ``spent_usd`` counted against the cap (earlier runs too),
    ``share_usd`` its sub-cap when the cap was shared."""

    rows: int = 0
    done: int = 0
    not_sent: int = 0
    output_tokens: int = 0
    spent_usd: Decimal = _ZERO
    share_usd: Decimal | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "rows": self.rows,
            "done": self.done,
            "not_sent": self.not_sent,
            "output_tokens": self.output_tokens,
            "spent_usd": float(self.spent_usd),
            "share_usd": None if self.share_usd is None else float(self.share_usd),
        }


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


@dataclass(frozen=True)
class RunSummary:
    """The outcome of a paid run: counts, spend against the cap, and the stop reason. A value:
    the books make it once, when the run ends (``run.books.books.Books.summarize``), from its
    ``SummaryDraft``; what is said of it afterwards is a new one (``dataclasses.replace``).

    Money: ``spent_usd`` is this run's (known costs, plus what attempts whose cost is unknown may
    have cost, ``possibly_billed_usd``, at their worst case until ``/generation`` settled them:
    ``reconciled`` of them, giving back ``reconciled_back_usd``). ``spent_before_usd`` is what the
    output's journal and records held before (of it ``possibly_billed_before_usd``, less what this
    run settled: ``reconciled_before``, ``reconciled_before_back_usd``). ``stop_reason`` is a
    ``run.stop.StopReason`` (each reason says when it is given).
    """

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
    skipped_rows: list[str] = field(default_factory=list)
    rows_ending_on_assistant: int = 0
    ok: int = 0
    truncated: int = 0
    failed: int = 0
    cancelled: int = 0
    not_sent: int = 0
    requests: int = 0
    retries: int = 0
    pauses: int = 0
    spent_usd: Decimal = _ZERO
    spent_before_usd: Decimal = _ZERO
    possibly_billed_usd: Decimal = _ZERO
    possibly_billed_before_usd: Decimal = _ZERO
    reconciled: int = 0
    reconciled_back_usd: Decimal = _ZERO
    reconciled_before: int = 0
    reconciled_before_back_usd: Decimal = _ZERO
    unsettleable: int = 0  # unknown costs with no generation id: they stay at their worst case
    cache_hits: int = 0  # answers of OpenRouter's response cache: billed nothing, counted $0
    #: providers that billed past ``max_tokens``: (answers, worst ratio, USD past the limits)
    overshoot: dict[str, tuple[int, float, Decimal]] = field(default_factory=dict)
    #: what the run says besides warnings (the sampling a model card fixes, sent explicitly)
    notes: list[str] = field(default_factory=list)
    #: the dry run of a sharded job: each shard's ``{"shard", "rows", "worst_usd", "this"}``
    shard_shares: list[dict[str, Any]] = field(default_factory=list)
    killed_in_flight_before: int = 0
    #: ``--turns all``: turns the rows to send need, one request each (``None``: ``--turns
    #: last``), turns the turns file already held for them, turns answered this run (every
    #: answer: a row without turns of its own is one turn), rows stopped mid-way
    turns_to_send: int | None = None
    turns_resumed: int = 0
    turns_done: int = 0
    rows_partial: int = 0
    turns_file: str = ""
    journal: str = ""  # the spend journal's path (``OUT.ledger``)
    budget_usd: Decimal | None = None
    shards: int | None = None
    #: ``shard="auto"``: the shard and the launcher's variables that gave it, e.g.
    #: "shard 1/4 from the launcher (RANK=1, WORLD_SIZE=4)"
    shard_from: str = ""
    output_tokens: dict[str, int] = field(default_factory=dict)
    datasets: dict[str, DatasetTally] = field(default_factory=dict)
    providers: dict[str, ProviderTally] = field(default_factory=dict)
    stop_reason: StopReason = StopReason.DONE
    message: str = ""
    elapsed_s: float = 0.0
    peak_committed_usd: Decimal = _ZERO
    #: the most the run's requests in flight held at once (their worst cases), and the in-flight
    #: 402s OpenRouter answered (its in-flight budget full: ``run.money.limit.DollarWindow``)
    held_max_usd: Decimal = _ZERO
    in_flight_refusals: int = 0
    worst_case_usd: Decimal | None = None  # dry run: every row at its worst case
    expected_usd: Decimal | None = None  # dry run: the budget planner's blended figure
    warnings: list[str] = field(default_factory=list)

    @property
    def ledger(self) -> str:
        """Deprecated (goes in 0.4.0): ``journal``, the spend journal's path."""
        warnings.warn(
            "RunSummary.ledger is now RunSummary.journal (the spend journal's path); "
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
            "shard_shares": list(self.shard_shares),
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

    def _money_lines(self, term: Term) -> list[str]:
        cap = f" of {format_usd(self.budget_usd)}" if self.budget_usd is not None else ""
        remaining = self.remaining_usd
        lines = [
            f"spent: {_usd(self.spent_usd)} this run, {_usd(self.spent_total_usd)} in all{cap}"
            + (f"; {_usd(remaining)} remains" if remaining is not None else "")
        ]
        if self.budget_usd is not None and self.spent_total_usd > self.budget_usd:
            over = self.spent_total_usd - self.budget_usd
            lines.append(f"over the cap by {_usd(over)} (answers cost more than their worst case)")
        if self.shards and self.budget_usd is not None:
            total = self.budget_usd * self.shards
            lines.append(
                render_template("{budget_usd:bare}", {}, term)
                + f" is per shard: {format_usd(self.budget_usd)} x {self.shards} "
                f"shards = {format_usd(total)} on the key in all"
            )
        if self.possibly_billed_usd or self.reconciled:
            lines.append(
                f"possibly billed (cost unknown, counted at the worst case): "
                f"{_usd(self.possibly_billed_usd)}; settled from /generation: "
                f"{self.reconciled} attempt(s), {_usd(self.reconciled_back_usd)} given back"
            )
        if self.possibly_billed_before_usd or self.reconciled_before:
            killed = (
                f", {self.killed_in_flight_before} in flight when a run was killed"
                if self.killed_in_flight_before
                else ""
            )
            settled = (
                "a real run settles what it can from /generation"
                if self.stop_reason == StopReason.DRY_RUN  # a dry run settles nothing
                else f"settled from /generation this run: {self.reconciled_before} attempt(s), "
                f"{_usd(self.reconciled_before_back_usd)} given back"
            )
            lines.append(
                f"possibly billed by earlier runs{killed}: "
                f"{_usd(self.possibly_billed_before_usd)} at the worst case; {settled} "
                f"({self.journal})"
            )
        if self.cache_hits:
            lines.append(
                f"{self.cache_hits:,} answer(s) from OpenRouter's response cache: billed nothing, "
                "counted $0 (rows resent after a lost answer)"
            )
        for name, (answers, ratio, usd) in sorted(self.overshoot.items()):
            lines.append(
                f"{name} billed past max_tokens: {answers:,} answer(s), up to {ratio:.2f}x, "
                f"{_usd(usd)} for the tokens past the limit (reserved for from then on)"
            )
        if self.unsettleable:
            lines.append(
                f"{self.unsettleable} attempt(s) left with no generation id: they stay at "
                "their worst case"
            )
        return lines

    def _dataset_lines(self) -> list[str]:
        if not self.datasets:
            if not self.output_tokens:
                return []
            items = [f"{k} {v:,}" for k, v in sorted(self.output_tokens.items())]
            return _pack("output tokens (reasoning included):", items)
        lines = ["datasets: rows done/total, output tokens (reasoning included), spent"]
        for name, t in sorted(self.datasets.items()):
            share = f" of {_usd(t.share_usd)}" if t.share_usd is not None else ""
            unsent = f", {t.not_sent:,} not sent" if t.not_sent else ""
            lines.append(
                f"  {name}: {t.done:,}/{t.rows:,} rows, {t.output_tokens:,} tok, "
                f"{_usd(t.spent_usd)}{share}{unsent}"
            )
        return lines

    def _turn_lines(self, term: Term) -> list[str]:
        """``--turns all``: turns, in one unit with the rows line's requests (every request sends
        one turn: a row's last turn finishes it; a row without turns of its own is one turn)."""
        if self.turns_to_send is None:
            return []
        kept = (
            f" ({self.turns_resumed:,} more kept by earlier runs, not sent again)"
            if self.turns_resumed
            else ""
        )
        asked = render_template("{turns=all}", {}, term)
        line = f"turns ({asked}): {self.turns_to_send:,} to send for the rows to send{kept}"
        if self.stop_reason != StopReason.DRY_RUN:
            line += f"; {self.turns_done:,} answered"
        lines = [line]
        if self.rows_partial:
            lines.append(
                f"{self.rows_partial:,} row(s) stopped mid-way: their finished turns are kept in "
                f"{self.turns_file or 'the turns file'}; rerun the same command to finish them"
            )
        return lines

    def render(self, term: Term = keyword_term) -> str:
        """The summary for people, in lines of at most 80 columns; ``term`` says the library's
        keywords (``errors.keyword_term``; the CLI passes its flags)."""
        lines = StopReason(self.stop_reason).why()  # the first line says why, when not as asked
        lines.append(f"{self.model} via {self.policy} -> {self.out}")
        if self.stop_reason == StopReason.DRY_RUN:
            lines.append(
                f"dry run: {self.rows_to_send:,} row{'' if self.rows_to_send == 1 else 's'} to "
                f"send ({self.rows_already_done:,} already "
                f"done, {self.duplicates:,} duplicate ids skipped); nothing sent"
            )
            if self.shard_from:
                lines.append(self.shard_from)
        else:
            lines.append(
                f"rows: {self.ok:,} ok, {self.truncated:,} truncated, {self.failed:,} failed, "
                f"{self.cancelled:,} cancelled, {self.not_sent:,} not sent"
                + (f", {self.rows_partial:,} stopped mid-way" if self.rows_partial else "")
                + f" ({self.rows_already_done:,} already done, {self.duplicates:,} duplicate ids "
                f"skipped); {self.requests:,} requests, {self.retries:,} retried"
            )
        if self.rows_skipped:
            lines.append(
                f"skipped {self.rows_skipped:,} rows of the prompts: not a row to send "
                "(never sent; the warnings name them)"
            )
        if self.stop_reason == StopReason.DRY_RUN and self.rows_ending_on_assistant:
            lines.append(
                f"{self.rows_ending_on_assistant:,} rows end on an assistant turn: that answer "
                "is regenerated ("
                + render_template("{turns=last}", {}, term)
                + " keeps it as `original`)"
            )
        lines.extend(self._turn_lines(term))
        lines.extend(self._money_lines(term))
        if self.in_flight_refusals:
            lines.append(
                f"held in flight at most ${self.held_max_usd:,.4f}; {self.in_flight_refusals:,} "
                "in-flight refusals (OpenRouter's in-flight budget: each waited and went again)"
            )
        lines.extend(self._dataset_lines())
        for name, tally in sorted(self.providers.items()):
            turns = f", {tally.turns:,} turns" if tally.turns else ""
            byok = f" ({_usd(tally.byok_usd)} BYOK: the provider's, to your own key)"
            lines.append(
                f"  {name}: {tally.rows:,} rows{turns}, {tally.completion_tokens:,} output "
                f"tokens, {_usd(tally.cost_usd)}" + (byok if tally.byok_usd else "")
            )
        if self.worst_case_usd is not None:
            what = "rows" if self.turns_to_send is None else "turns"
            lines.append(f"worst case of the {what} to send: ${self.worst_case_usd:,.4f}")
        if self.expected_usd is not None:
            lines.append(f"expected (budget planner, blended): ${self.expected_usd:,.4f}")
        lines.extend(rendered(n, term) for n in self.notes)
        message = rendered(self.message, term)
        lines.append(f"stopped: {self.stop_reason}" + (f": {message}" if message else ""))
        return "\n".join(_fit(line) for line in lines)


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


#: ``RunSummary``'s fields by name, for ``SummaryDraft``.
_FIELDS = {f.name: f for f in dataclasses.fields(RunSummary)}


class SummaryDraft:
    """A run's summary while the run is set up and runs: what it was given and what the output
    held before, written by the steps before the first request (the rows read, the warnings, the
    money earlier runs spent). The books make the ``RunSummary`` from it once, at the end
    (``run.books.books.Books.summarize``; a dry run or a run that sends nothing: ``build``), and
    that value is frozen.

    Its fields are ``RunSummary``'s, declared once there: a name ``RunSummary`` has not is an
    ``AttributeError``, as on the dataclass::

        draft = SummaryDraft(out="out.jsonl", policy="p.yaml", model="m")
        draft.warnings.append("...")
        summary = draft.build()          # summary.warnings == ["..."]; summary.ok = 1 raises
    """

    __slots__ = ("_values",)

    def __init__(self, **values: Any) -> None:
        unknown = sorted(set(values) - set(_FIELDS))
        if unknown:
            raise TypeError(f"RunSummary has no field {', '.join(unknown)}")
        filled = {}
        for name, f in _FIELDS.items():
            if name in values:
                filled[name] = values[name]
            elif f.default_factory is not dataclasses.MISSING:
                filled[name] = f.default_factory()
            elif f.default is not dataclasses.MISSING:
                filled[name] = f.default
            else:
                raise TypeError(f"SummaryDraft needs {name}=")
        object.__setattr__(self, "_values", filled)

    def __getattr__(self, name: str) -> Any:
        if name == "_values":  # not set yet (a copy being made)
            raise AttributeError(name)
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(f"RunSummary has no field {name!r}") from None

    def __setattr__(self, name: str, value: Any) -> None:
        if name not in _FIELDS:
            raise AttributeError(f"RunSummary has no field {name!r}")
        self._values[name] = value

    def __repr__(self) -> str:
        return f"SummaryDraft(out={self._values['out']!r}, model={self._values['model']!r})"

    def build(self) -> RunSummary:
        """The frozen ``RunSummary`` of what the draft holds now."""
        return RunSummary(**self._values)

"""What a run did: rows, tokens, money and why it stopped (``RunSummary``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from openrouter_probe.rules.quantities import format_usd

__all__ = ["ProviderTally", "RunSummary"]


@dataclass
class ProviderTally:
    """Rows, tokens and cost of the rows one provider (display name) served in this run."""

    rows: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    reasoning_tokens: int = 0
    cost_usd: Decimal = Decimal(0)
    truncated: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "rows": self.rows,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "reasoning_tokens": self.reasoning_tokens,
            "cost_usd": float(self.cost_usd),
            "truncated": self.truncated,
        }


@dataclass
class RunSummary:
    """The outcome of ``generate``: counts, spend against the cap, and the stop reason.

    ``spent_usd`` is this run's settled spend (``usage.cost`` summed, plus billed failed attempts
    and what cancelled requests may have cost); ``spent_total_usd`` adds what the output file held
    before: the output's records, plus what the spend journal (``OUT.ledger``) holds that no record
    does. ``possibly_billed_before_usd`` is the part of it that may or may not have been billed:
    requests cancelled in flight by earlier runs (``cancelled_before``) or in flight when one was
    killed (``killed_in_flight_before``), each at its reservation. ``stop_reason`` is ``done``, ``budget``, ``target``, ``interrupted``, ``cancelled``, ``unreachable`` (no answer at all),
    ``credits`` (402), ``key`` (401), ``no-route`` (404) or ``dry-run``.
    """

    out: str
    policy: str
    model: str
    rows_total: int = 0
    rows_already_done: int = 0
    rows_to_send: int = 0
    duplicates: int = 0
    ok: int = 0
    truncated: int = 0
    failed: int = 0
    cancelled: int = 0
    not_sent: int = 0
    requests: int = 0
    retries: int = 0
    spent_usd: Decimal = Decimal(0)
    spent_before_usd: Decimal = Decimal(0)
    possibly_billed_usd: Decimal = Decimal(0)
    possibly_billed_before_usd: Decimal = Decimal(0)
    cancelled_before_usd: Decimal = Decimal(0)
    killed_in_flight_before: int = 0
    unrecorded_before_usd: Decimal = Decimal(0)  # billed attempts only the journal records
    ledger: str = ""
    budget_usd: Decimal | None = None
    output_tokens: dict[str, int] = field(default_factory=dict)
    providers: dict[str, ProviderTally] = field(default_factory=dict)
    stop_reason: str = "done"
    message: str = ""
    elapsed_s: float = 0.0
    peak_committed_usd: Decimal = Decimal(0)
    worst_case_usd: Decimal | None = None  # dry run: every row at its worst case
    expected_usd: Decimal | None = None  # dry run: the budget planner's blended figure
    warnings: list[str] = field(default_factory=list)

    @property
    def spent_total_usd(self) -> Decimal:
        """This run's spend plus what earlier runs on the same output spent (records and journal)."""
        return self.spent_before_usd + self.spent_usd

    @property
    def remaining_usd(self) -> Decimal | None:
        """What is left of the budget after ``spent_total_usd`` (``None`` without a budget)."""
        return None if self.budget_usd is None else self.budget_usd - self.spent_total_usd

    @property
    def exit_code(self) -> int:
        """0 when the run ended as asked (done, budget, target, dry run), 1 otherwise."""
        return 0 if self.stop_reason in ("done", "budget", "target", "dry-run") else 1

    def to_dict(self) -> dict[str, Any]:
        def money(value: Decimal | None) -> float | None:
            return None if value is None else float(value)

        return {
            "out": self.out,
            "policy": self.policy,
            "model": self.model,
            "stop_reason": self.stop_reason,
            "message": self.message,
            "rows_total": self.rows_total,
            "rows_already_done": self.rows_already_done,
            "rows_to_send": self.rows_to_send,
            "duplicates": self.duplicates,
            "ok": self.ok,
            "truncated": self.truncated,
            "failed": self.failed,
            "cancelled": self.cancelled,
            "not_sent": self.not_sent,
            "requests": self.requests,
            "retries": self.retries,
            "spent_usd": money(self.spent_usd),
            "spent_total_usd": money(self.spent_total_usd),
            "possibly_billed_usd": money(self.possibly_billed_usd),
            "possibly_billed_before_usd": money(self.possibly_billed_before_usd),
            "killed_in_flight_before": self.killed_in_flight_before,
            "unrecorded_before_usd": money(self.unrecorded_before_usd),
            "ledger": self.ledger,
            "budget_usd": money(self.budget_usd),
            "remaining_usd": money(self.remaining_usd),
            "peak_committed_usd": money(self.peak_committed_usd),
            "worst_case_usd": money(self.worst_case_usd),
            "expected_usd": money(self.expected_usd),
            "output_tokens": dict(self.output_tokens),
            "providers": {k: v.to_dict() for k, v in sorted(self.providers.items())},
            "elapsed_s": round(self.elapsed_s, 3),
            "warnings": list(self.warnings),
        }

    def _before_lines(self) -> list[str]:
        """Why earlier runs count for more than their records: possibly billed, unrecorded."""
        lines = []
        journal = self.ledger or "the spend journal"
        if self.possibly_billed_before_usd:
            why = []
            if self.killed_in_flight_before:
                killed = self.possibly_billed_before_usd - self.cancelled_before_usd
                why.append(
                    f"${killed:,.6f} for {self.killed_in_flight_before} request(s) in flight when "
                    f"a run was killed, never answered ({journal})"
                )
            if self.cancelled_before_usd:
                why.append(f"${self.cancelled_before_usd:,.6f} cancelled in flight")
            lines.append(
                f"possibly billed by earlier runs, counted as spent at the worst case: "
                f"${self.possibly_billed_before_usd:,.6f}: " + "; ".join(why)
            )
        if self.unrecorded_before_usd:
            lines.append(
                f"billed to earlier attempts of rows not finished, counted as spent: "
                f"${self.unrecorded_before_usd:,.6f} ({journal})"
            )
        return lines

    def render(self) -> str:
        """A few lines for people: what was done, spent and what remains."""
        cap = f" of {format_usd(self.budget_usd)}" if self.budget_usd is not None else ""
        remaining = self.remaining_usd
        lines = [f"{self.model} via {self.policy} -> {self.out}"]
        if self.stop_reason == "dry-run":
            lines.append(
                f"dry run: {self.rows_to_send} rows to send ({self.rows_already_done} already done, "
                f"{self.duplicates} duplicate ids skipped); nothing sent"
            )
        else:
            lines.append(
                f"rows: {self.ok} ok, {self.truncated} truncated, {self.failed} failed, "
                f"{self.cancelled} cancelled, {self.not_sent} not sent "
                f"({self.rows_already_done} already done, {self.duplicates} duplicate ids skipped)"
            )
        lines.append(
            f"spent: ${self.spent_usd:,.6f} this run, ${self.spent_total_usd:,.6f} in all{cap}"
            + (f"; ${remaining:,.6f} remains" if remaining is not None else "")
        )
        if self.possibly_billed_usd:
            lines.append(
                f"possibly billed (cancelled in flight, counted as spent): "
                f"${self.possibly_billed_usd:,.6f}"
            )
        lines.extend(self._before_lines())
        if self.output_tokens:
            per = ", ".join(f"{k} {v:,}" for k, v in sorted(self.output_tokens.items()))
            lines.append(f"output tokens (reasoning included): {per}")
        for name, tally in sorted(self.providers.items()):
            lines.append(
                f"  {name}: {tally.rows} rows, {tally.completion_tokens:,} output tokens, "
                f"${tally.cost_usd:,.6f}"
            )
        if self.worst_case_usd is not None:
            lines.append(f"worst case of the rows to send: ${self.worst_case_usd:,.4f}")
        if self.expected_usd is not None:
            lines.append(f"expected (budget planner, blended): ${self.expected_usd:,.4f}")
        lines.append(f"stopped: {self.stop_reason}" + (f": {self.message}" if self.message else ""))
        return "\n".join(lines)

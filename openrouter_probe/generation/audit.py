"""Audit generator output: who served each row, at what cost, and whether the policy allowed it.

``docs/generate.md`` ("Audit and export") says what the report holds. Each row's served
``provider`` (a display name) is mapped to the snapshot's endpoints of that name and the routing
model asked whether the policy admits one; a row regenerated turn by turn counts each turn at its
own provider. The money that served no row counts as ``generate`` counts it against its cap
(``run.books.output.load_resume_state`` and ``run.money.replay.replay_journal``, read without
repairing anything: a run may still be appending).

Example::

    from openrouter_probe.generation.audit import audit
    from openrouter_probe.rules.snapshot import bundled_snapshot

    report = audit(["out.jsonl"], policy="policies/kimi-k2.5.yaml", snapshot=bundled_snapshot())
    print(report.render_notes()); report.exit_code   # 1: a row was served outside the policy
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from openrouter_probe.api.chat import read_cost, usage_spend
from openrouter_probe.errors import Term, keyword_term, render_template
from openrouter_probe.generation.records import beside, merged_records, records
from openrouter_probe.rules.sampling_mix import Shares, count_sampling
from openrouter_probe.run.books.output import load_resume_state
from openrouter_probe.run.books.overshoot import Overshoot, ProviderOvershoot, billed_output
from openrouter_probe.run.lock import running_holder
from openrouter_probe.run.money.journal import journal_path
from openrouter_probe.run.money.replay import replay_journal
from openrouter_probe.run.money.spend import Prices
from openrouter_probe.run.tallies import Frozen, ProviderTally, count_answer

if TYPE_CHECKING:
    from openrouter_probe.rules.snapshot import Snapshot

__all__ = ["AuditReport", "ProviderAudit", "audit"]

_MILLION = Decimal(1_000_000)


@dataclass(frozen=True, kw_only=True)
class ProviderAudit(ProviderTally, Frozen):
    """One served provider (display name): what it served and cost, as a run's summary tallies
    it, whether the policy admits it, and its answers billed past their ``max_tokens``."""

    provider: str
    tags: tuple[str, ...]
    admitted: bool
    answers: int = 0  # requests answered: one per row, one per turn of a row regenerated so
    past_limit: int = 0  # answers billed past their max_tokens
    worst_ratio: float = 0.0  # the largest billed output tokens / max_tokens among them
    past_limit_usd: Decimal = Decimal(0)  # what the tokens past the limits cost (their share)
    #: answers whose record holds no cost it can read (``cost_usd`` null or not a cost): not in
    #: ``cost_usd``, which is then a lower bound (the journal counts them at their worst case)
    cost_unknown: int = 0

    def __add__(self, other: object) -> NoReturn:
        raise TypeError("a provider's audit does not add: audit the outputs together")

    @property
    def effective_usd_per_m(self) -> Decimal | None:
        """Cost per million billed output tokens, the prompts included (what the output cost)."""
        if not self.completion_tokens:
            return None
        return self.cost_usd / self.completion_tokens * _MILLION

    def to_dict(self) -> dict[str, Any]:
        eff = self.effective_usd_per_m
        return {
            "provider": self.provider,
            "tags": ", ".join(self.tags) or "-",
            "admitted": "yes" if self.admitted else "NO",
            "rows": self.rows,
            "turns": self.turns,
            "prompt_tokens": self.prompt_tokens,
            "output_tokens": self.completion_tokens,
            "reasoning_tokens": self.reasoning_tokens,
            "cost_usd": round(float(self.cost_usd), 6),
            "byok_usd": round(float(self.byok_usd), 6),
            "effective_usd_per_m": None if eff is None else round(float(eff), 4),
            "truncated": self.truncated,
            "past_max_tokens": self.past_limit,
            "worst_ratio": round(self.worst_ratio, 2) if self.past_limit else None,
            "past_max_tokens_usd": round(float(self.past_limit_usd), 6),
            "cost_unknown": self.cost_unknown,
        }


@dataclass(frozen=True)
class AuditReport(Frozen):
    """Everything ``audit`` found, a value (tuples and read-only mappings inside); ``exit_code``
    is 1 when any row was served outside the policy."""

    files: tuple[str, ...]
    policy: str
    model: str
    providers: tuple[ProviderAudit, ...] = ()
    outside: tuple[tuple[str, str], ...] = ()  # (row id, provider)
    failed: int = 0
    failed_by_kind: Mapping[str, int] = field(default_factory=dict)
    cancelled: int = 0  # rows cancelled in flight and never finished afterwards
    cancelled_requests: int = 0  # ``cancelled`` lines: requests cancelled in flight
    killed_in_flight: int = 0  # requests in flight when a run was killed (the journals)
    #: requests in flight in a run still writing a file (not killed: its figures will settle),
    #: and the files being written, each with the run that writes it
    running_in_flight: int = 0
    running: tuple[str, ...] = ()
    realised_usd: Decimal = Decimal(0)  # the served rows' cost
    possibly_billed_usd: Decimal = Decimal(0)  # cancelled or killed in flight, at the worst case
    spent_usd: Decimal = Decimal(0)  # what generate counts as spent on these files
    kept_turns: int = 0  # finished turns of rows not finished yet (``OUT.jsonl.turns``)
    kept_turns_usd: Decimal = Decimal(0)  # what they cost (known costs)
    superseded: int = 0  # truncated answers a --redo-truncated answer replaced
    #: records (and kept turns) no spend journal knows: their money is unknown, at its worst case
    unjournaled: int = 0
    unjournaled_usd: Decimal = Decimal(0)
    predicted_usd: Decimal | None = None
    prediction_note: str = ""
    #: what the served rows were sampled with, per dataset (their ``sampling_params``)
    sampling: Shares = field(default_factory=Shares)

    @property
    def other_billed_usd(self) -> Decimal:
        """Billed to no served row: failed attempts, retries, failed rows (``spent_usd`` less the
        realised and the possibly billed)."""
        rest = self.spent_usd - self.realised_usd - self.possibly_billed_usd - self.kept_turns_usd
        return max(Decimal(0), rest - self.unjournaled_usd)

    @property
    def exit_code(self) -> int:
        return 1 if self.outside else 0

    @property
    def rows(self) -> int:
        return sum(p.rows for p in self.providers)

    def provider_rows(self) -> list[dict[str, Any]]:
        """The table: one row per provider (``turns`` only when a row went turn by turn)."""
        rows = [p.to_dict() for p in self.providers]
        if not any(p.turns for p in self.providers):
            for row in rows:
                del row["turns"]
        if not any(p.past_limit for p in self.providers):
            for row in rows:
                for name in ("past_max_tokens", "worst_ratio", "past_max_tokens_usd"):
                    del row[name]
        if not any(p.cost_unknown for p in self.providers):
            for row in rows:
                del row["cost_unknown"]
        return rows

    def to_dict(self) -> dict[str, Any]:
        return {
            "files": list(self.files),
            "policy": self.policy,
            "model": self.model,
            "providers": self.provider_rows(),
            "outside_policy": [{"id": i, "provider": p} for i, p in self.outside],
            "failed": self.failed,
            "failed_by_kind": dict(self.failed_by_kind),
            "cancelled": self.cancelled,
            "cancelled_requests": self.cancelled_requests,
            "killed_in_flight": self.killed_in_flight,
            "running_in_flight": self.running_in_flight,
            "running": list(self.running),
            "realised_usd": float(self.realised_usd),
            "possibly_billed_usd": float(self.possibly_billed_usd),
            "other_billed_usd": float(self.other_billed_usd),
            "kept_turns": self.kept_turns,
            "kept_turns_usd": float(self.kept_turns_usd),
            "unjournaled": self.unjournaled,
            "unjournaled_usd": float(self.unjournaled_usd),
            "superseded": self.superseded,
            "spent_usd": float(self.spent_usd),
            "predicted_usd": None if self.predicted_usd is None else float(self.predicted_usd),
            "prediction_note": self.prediction_note,
            "sampling_shares": self.sampling.to_dict(),
        }

    def _spent_line(self, term: Term) -> str:
        why = []
        if self.possibly_billed_usd:
            stopped = [
                f"{n} {what}"
                for n, what in (
                    (self.cancelled_requests, "cancelled in flight"),
                    (self.killed_in_flight, "in flight when a run was killed"),
                    (self.running_in_flight, "in flight in a run still going"),
                )
                if n
            ]
            why.append(
                f"${self.possibly_billed_usd:,.6f} possibly billed ({', '.join(stopped)}; "
                "each at its worst case: the provider may have billed it)"
            )
        if self.kept_turns:
            why.append(
                f"${self.kept_turns_usd:,.6f} for {self.kept_turns} finished turn(s) of rows "
                "not finished yet (kept for the resume)"
            )
        if self.unjournaled:
            why.append(
                f"${self.unjournaled_usd:,.6f} unknown for {self.unjournaled} record(s) no spend "
                "journal knows (each at its worst case; the next generate settles them from "
                "/generation)"
            )
        if self.other_billed_usd:
            why.append(f"${self.other_billed_usd:,.6f} billed to failed attempts and retries")
        return (
            "spent, as generate counts it against "
            + render_template("{budget_usd:bare}", {}, term)
            + f": ${self.spent_usd:,.6f} = "
            f"${self.realised_usd:,.6f} realised + " + " + ".join(why)
        )

    def render_notes(self, term: Term = keyword_term) -> str:
        """The audit's notes for people (``term`` says the library's keywords)."""
        unknown = sum(p.cost_unknown for p in self.providers)
        lines = [
            f"{self.rows} rows served, {self.failed} failed, {self.cancelled} cancelled; "
            f"realised {'at least ' if unknown else ''}${self.realised_usd:,.6f}"
        ]
        lines.extend(
            f"{p.provider}: {p.cost_unknown} answer(s) with no known cost in the output: its cost "
            "is at least what is shown (the spend journal counts them at their worst case)"
            for p in self.providers
            if p.cost_unknown
        )
        lines.extend(
            f"{running}: the figures are what it has recorded so far" for running in self.running
        )
        if self.spent_usd != self.realised_usd:
            lines.append(self._spent_line(term))
        for p in self.providers:
            if p.past_limit:
                lines.append(
                    f"{p.provider} billed past max_tokens: {p.past_limit} answer(s), up to "
                    f"{p.worst_ratio:.2f}x the limit, ${p.past_limit_usd:,.6f} for the tokens "
                    "past it (a worst case of max_tokens x price does not bound its answers)"
                )
        if self.superseded:
            lines.append(
                f"{self.superseded} truncated answer(s) superseded by "
                + render_template("{redo_truncated=True}", {}, term)
                + ": the later answer is the row's (the cut one's cost counts as billed to "
                "retries)"
            )
        if self.predicted_usd is not None:
            delta = (
                (self.realised_usd - self.predicted_usd) / self.predicted_usd * 100
                if self.predicted_usd
                else Decimal(0)
            )
            lines.append(
                f"the budget planner predicts ${self.predicted_usd:,.6f} for the same tokens "
                f"({delta:+.1f}%): {self.prediction_note}"
            )
        if any(set(by) - {"recorded"} for by in self.sampling.counts.values()):
            lines.extend(f"sampled with, {line}" for line in self.sampling.lines())
        if self.outside:
            shown = ", ".join(f"{i} ({p})" for i, p in self.outside[:10])
            more = f" and {len(self.outside) - 10} more" if len(self.outside) > 10 else ""
            lines.append(
                f"OUTSIDE THE POLICY: {len(self.outside)} row(s) served by providers "
                f"{self.policy} does not admit: {shown}{more}"
            )
        elif self.rows == 0:
            lines.append("no row was served: nothing to check against the policy")
        else:
            lines.append(f"every row was served by an endpoint {self.policy} admits")
        return "\n".join(lines)


def _spent(paths: Iterable[str | Path], prices: Prices | None) -> tuple[dict[str, Any], set[str]]:
    """The report's money and counts as generate counts them (its figures by name), and the
    cancelled row ids.

    Reads each output and its journal without repairing them (a run may still be appending).
    The journal is the only record of money; a record no journal knows is unknown and counts
    at its worst case at ``prices`` (the policy's dearest admitted endpoints; its output at
    most a whole context when it states no ``usage``), never less than the record states."""
    cancelled: set[str] = set()
    report: defaultdict[str, Any] = defaultdict(int)  # counts, and dollars (Decimal sums)
    running: list[str] = []
    for path in dict.fromkeys(str(p) for p in paths if not beside(p)):
        replay = replay_journal(journal_path(path), repair=False)
        state = load_resume_state(
            path, journal_runs=replay.runs, adopted=replay.adopted, repair=False
        )
        report["spent_usd"] += replay.spent_usd
        report["possibly_billed_usd"] += replay.possibly_billed_usd
        for unknown in state.unjournaled:
            worst = (
                unknown.recorded_usd
                if prices is None
                else unknown.worst_usd(prices, prices.context_tokens or 0)
            )
            report["unjournaled"] += 1
            report["unjournaled_usd"] += worst
            report["spent_usd"] += worst
        holder = running_holder(path)
        # the run going now is the journal's last; earlier runs' attempts in flight were a kill's
        last = str(replay.headers[-1].get("run")) if holder and replay.headers else None
        going = replay.in_flight_by_run.get(last, 0) if last is not None else 0
        report["killed_in_flight"] += replay.in_flight - going
        report["running_in_flight"] += going
        if holder is not None:
            running.append(f"{path} is being written by {holder}")
        for turns in state.turns.values():
            report["kept_turns"] += len(turns)
            report["kept_turns_usd"] += sum(
                (Decimal(str(t.get("cost_usd") or 0)) for t in turns), Decimal(0)
            )
    for record in records(paths):
        if record.get("status") == "cancelled":
            report["cancelled_requests"] += 1
            cancelled.add(str(record["id"]))
    return {**report, "running": running}, cancelled


def _prices(compiled: Any, snapshot: Snapshot) -> Prices | None:
    """The worst-case prices of the endpoints ``compiled`` admits (``None``: unknowable)."""
    from openrouter_probe.rules.routing import route

    try:
        return Prices.worst_case(route(compiled.provider, snapshot.endpoints).admitted)
    except ValueError:
        return None


def audit(paths: Iterable[str | Path], *, policy: str | Path, snapshot: Snapshot) -> AuditReport:
    """Audit the output files ``paths`` against ``policy`` (a compiled policy file) and the
    endpoints of ``snapshot``."""
    from openrouter_probe.policy.compiled import load_compiled_policy
    from openrouter_probe.rules.routing import route

    files = [str(p) for p in paths]
    compiled = load_compiled_policy(policy)
    admitted_tags = set(route(compiled.provider, snapshot.endpoints).admitted_tags)
    by_name: dict[str, list[str]] = {}
    for e in snapshot.endpoints:
        by_name.setdefault(e.provider_name, []).append(e.tag)
    admits = {name: not admitted_tags.isdisjoint(tags) for name, tags in by_name.items()}
    tallies: dict[str, dict[str, Any]] = {}  # per provider, ``ProviderTally``'s figures
    answered: Counter[str] = Counter()
    unknown_cost: Counter[str] = Counter()
    overshoot = Overshoot()
    finished: set[str] = set()
    superseded: list[str] = []
    failed_by_kind: dict[str, int] = {}
    outside_rows: list[tuple[str, str]] = []
    sampling: dict[str, dict[str, dict[str, int]]] = {}
    for record in merged_records(files, superseded=superseded):
        finished.add(str(record["id"]))
        if record.get("status") == "failed":
            kind = str((record.get("error") or {}).get("status") or "other")
            failed_by_kind[kind] = failed_by_kind.get(kind, 0) + 1
            continue
        dataset = str(record.get("dataset") or "default")
        count_sampling(sampling, dataset, record.get("sampling_params"))
        turns = record.get("turns")
        answers = turns if isinstance(turns, list) and turns else [record]
        cut = record.get("status") == "truncated"
        outside: list[str] = []
        for i, answer in enumerate(answers):
            name = str(answer.get("provider") or "?")
            usage = answer.get("usage") if isinstance(answer.get("usage"), dict) else {}
            cost, _ = read_cost(answer.get("cost_usd"))  # unknown: counted apart, never as $0
            unknown_cost[name] += cost is None
            last = i == len(answers) - 1
            byok = None if answer.get("response_cache") == "hit" else usage_spend(usage)[2]
            count_answer(tallies, name, usage, cost, byok, answers is turns, last, cut)
            limit = answer.get("max_tokens") or (record.get("max_tokens") if last else None)
            limit = limit if type(limit) is int else 0
            overshoot.see(name, billed_tokens=billed_output(usage), max_tokens=limit, cost_usd=cost)
            answered[name] += 1
            if not admits.get(name) and name not in outside:
                outside.append(name)
        outside_rows.extend((str(record["id"]), name) for name in outside)
    providers = []
    for name, tally in tallies.items():
        past = overshoot.by_provider.get(name, ProviderOvershoot())
        providers.append(
            ProviderAudit(
                **tally,
                provider=name,
                tags=tuple(sorted(by_name.get(name, ()))),
                admitted=admits.get(name, False),
                answers=answered[name],
                past_limit=past.answers,
                worst_ratio=past.worst_ratio if past.answers else 0.0,
                past_limit_usd=past.over_usd,
                cost_unknown=unknown_cost[name],
            )
        )
    providers.sort(key=lambda t: (-t.rows, t.provider))
    realised = sum((p.cost_usd for p in providers), Decimal(0))  # the served rows' cost
    spent, cancelled = _spent(files, _prices(compiled, snapshot))
    return AuditReport(
        files=tuple(files),
        policy=str(policy),
        model=compiled.model,
        providers=tuple(providers),
        outside=tuple(outside_rows),
        failed=sum(failed_by_kind.values()),
        failed_by_kind=failed_by_kind,
        cancelled=len(cancelled - finished),
        realised_usd=realised,
        superseded=len(superseded),
        sampling=Shares(sampling),
        **spent,
        **_predict(providers, realised, snapshot, compiled),
    )


def _predict(
    providers: list[ProviderAudit], realised: Decimal, snapshot: Snapshot, compiled: Any
) -> dict[str, Any]:
    """What the budget planner predicts for the served tokens, beside the realised cost
    (``predicted_usd``, ``prediction_note``; nothing when no token was served)."""
    from openrouter_probe.analysis.budget import plan_budget
    from openrouter_probe.errors import ProbeError

    output_total = sum(t.completion_tokens for t in providers)
    prompt_total = sum(t.prompt_tokens for t in providers)
    rows = sum(t.answers for t in providers)  # requests: a row's turns each count
    if not (output_total and rows):
        return {}
    try:
        plan = plan_budget(
            snapshot,
            budget_usd=max(realised, Decimal("0.000001")),
            output_tokens=output_total,
            prompt_tokens_per_request=max(1, prompt_total // rows),
            output_tokens_per_request=max(1, output_total // rows),
            provider=compiled.provider,
            model=compiled.model,
        )
    except ProbeError as exc:
        return {"prediction_note": f"no prediction: {exc}"}
    figures = plan.blended.all_in or plan.blended.output_only
    note = (
        f"{output_total:,} output and {prompt_total:,} prompt tokens at the blended "
        f"price of the policy's routing ({plan.routing_mode})"
    )
    return {"predicted_usd": figures.cost_usd, "prediction_note": note}

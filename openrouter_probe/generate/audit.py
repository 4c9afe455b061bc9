"""Audit generator output: who served each row, at what cost, and whether the policy allowed it.

``audit`` reads one or more output files (shards are merged by row id), maps each row's served
``provider`` (a display name) to the snapshot's endpoints of that name, and asks the routing model
whether the policy's ``provider`` block admits one of them. It reports, per provider: rows, tokens,
cost, effective USD per million output tokens, truncations and errors; every row served outside the
policy; and the realised spend beside what the budget planner predicts for the same tokens.

Example::

    from openrouter_probe.generate.audit import audit
    from openrouter_probe.rules.snapshot import bundled_snapshot

    report = audit(["out.jsonl"], policy="policies/kimi-k2.5.yaml", snapshot=bundled_snapshot())
    print(report.render()); report.exit_code   # 1 when a row was served outside the policy
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

from openrouter_probe.run.ledger import LEDGER_SUFFIX
from openrouter_probe.run.output import FINISHED, iter_records, output_tokens_of

if TYPE_CHECKING:
    from openrouter_probe.rules.snapshot import Snapshot

__all__ = ["AuditReport", "ProviderAudit", "audit", "merged_records"]

_MILLION = Decimal(1_000_000)


@dataclass
class ProviderAudit:
    """One served provider (display name): what it served, cost and whether the policy admits it."""

    provider: str
    tags: list[str]
    admitted: bool
    rows: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    reasoning_tokens: int = 0
    cost_usd: Decimal = Decimal(0)
    truncated: int = 0

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
            "prompt_tokens": self.prompt_tokens,
            "output_tokens": self.completion_tokens,
            "reasoning_tokens": self.reasoning_tokens,
            "cost_usd": round(float(self.cost_usd), 6),
            "effective_usd_per_m": None if eff is None else round(float(eff), 4),
            "truncated": self.truncated,
        }


@dataclass
class AuditReport:
    """Everything ``audit`` found; ``exit_code`` is 1 when any row was served outside the policy."""

    files: list[str]
    policy: str
    model: str
    providers: list[ProviderAudit] = field(default_factory=list)
    outside: list[tuple[str, str]] = field(default_factory=list)  # (row id, provider)
    failed: int = 0
    failed_by_kind: dict[str, int] = field(default_factory=dict)
    realised_usd: Decimal = Decimal(0)
    predicted_usd: Decimal | None = None
    prediction_note: str = ""

    @property
    def exit_code(self) -> int:
        return 1 if self.outside else 0

    @property
    def rows(self) -> int:
        return sum(p.rows for p in self.providers)

    def provider_rows(self) -> list[dict[str, Any]]:
        return [p.to_dict() for p in self.providers]

    def to_dict(self) -> dict[str, Any]:
        return {
            "files": self.files,
            "policy": self.policy,
            "model": self.model,
            "providers": self.provider_rows(),
            "outside_policy": [{"id": i, "provider": p} for i, p in self.outside],
            "failed": self.failed,
            "failed_by_kind": dict(self.failed_by_kind),
            "realised_usd": float(self.realised_usd),
            "predicted_usd": None if self.predicted_usd is None else float(self.predicted_usd),
            "prediction_note": self.prediction_note,
        }

    def render_notes(self) -> str:
        lines = [
            f"{self.rows} rows served, {self.failed} failed; realised ${self.realised_usd:,.6f}"
        ]
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


def merged_records(paths: Iterable[str | Path]) -> Iterator[dict[str, Any]]:
    """Yield one record per row id over several output files (shards): its finished record, the
    first one found (a row is recorded as finished once). Spend journals (``OUT.jsonl.ledger``,
    given by a glob such as ``out/*``) are skipped."""
    seen: set[str] = set()
    for path in paths:
        if str(path).endswith(LEDGER_SUFFIX):
            logging.getLogger(__name__).warning(
                "%s: skipped: the spend journal of `generate`, not an output file", path
            )
            continue
        for _, record in iter_records(path):
            ident = str(record["id"])
            if record.get("status") in FINISHED and ident not in seen:
                seen.add(ident)
                yield record


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def audit(paths: Iterable[str | Path], *, policy: str | Path, snapshot: Snapshot) -> AuditReport:
    """Audit the output files ``paths`` against ``policy`` (a compiled policy file) and the
    endpoints of ``snapshot``."""
    from openrouter_probe.analysis.budget import plan_budget
    from openrouter_probe.errors import ProbeError
    from openrouter_probe.policy.compiled import load_compiled_policy
    from openrouter_probe.rules.routing import route

    files = [str(p) for p in paths]
    compiled = load_compiled_policy(policy)
    decision = route(compiled.provider, snapshot.endpoints)
    admitted_tags = set(decision.admitted_tags)
    by_name: dict[str, list[str]] = {}
    for e in snapshot.endpoints:
        by_name.setdefault(e.provider_name, []).append(e.tag)
    report = AuditReport(files=files, policy=str(policy), model=compiled.model)
    tallies: dict[str, ProviderAudit] = {}
    prompt_total = 0
    for record in merged_records(files):
        if record.get("status") == "failed":
            report.failed += 1
            kind = str((record.get("error") or {}).get("status") or "other")
            report.failed_by_kind[kind] = report.failed_by_kind.get(kind, 0) + 1
            continue
        name = str(record.get("provider") or "?")
        tally = tallies.get(name)
        if tally is None:
            tags = sorted(by_name.get(name, []))
            tally = tallies[name] = ProviderAudit(
                name, tags, admitted=any(t in admitted_tags for t in tags)
            )
        usage = record.get("usage") if isinstance(record.get("usage"), dict) else {}
        assert isinstance(usage, dict)
        tally.rows += 1
        tally.prompt_tokens += _int(usage.get("prompt_tokens"))
        prompt_total += _int(usage.get("prompt_tokens"))
        tally.completion_tokens += output_tokens_of(record)
        details = usage.get("completion_tokens_details") or {}
        tally.reasoning_tokens += _int(details.get("reasoning_tokens"))
        cost = Decimal(str(record.get("cost_usd") or 0))
        tally.cost_usd += cost
        report.realised_usd += cost
        tally.truncated += record.get("status") == "truncated"
        if not tally.admitted:
            report.outside.append((str(record["id"]), name))
    report.providers = sorted(tallies.values(), key=lambda t: (-t.rows, t.provider))
    output_total = sum(t.completion_tokens for t in report.providers)
    rows = report.rows
    if output_total and rows:
        try:
            plan = plan_budget(
                snapshot,
                budget_usd=max(report.realised_usd, Decimal("0.000001")),
                output_tokens=output_total,
                prompt_tokens_per_request=max(1, prompt_total // rows),
                output_tokens_per_request=max(1, output_total // rows),
                provider=compiled.provider,
                model=compiled.model,
            )
        except ProbeError as exc:
            report.prediction_note = f"no prediction: {exc}"
        else:
            figures = plan.blended.all_in or plan.blended.output_only
            report.predicted_usd = figures.cost_usd
            report.prediction_note = (
                f"{output_total:,} output and {prompt_total:,} prompt tokens at the blended "
                f"price of the policy's routing ({plan.routing_mode})"
            )
    return report

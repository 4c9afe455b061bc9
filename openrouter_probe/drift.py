"""Drift: what moved between a compiled policy's snapshot and a fresh one.

For other repos' CI: ``check_policy`` compares the decisions recorded in a compiled policy with a new
snapshot (endpoints added or gone, quantization tags changed, prices moved beyond a threshold, an
ordered endpoint gone) and re-routes the policy's ``provider`` block on the new snapshot to see whether
the admitted set or its order changed. ``openrouter-probe policy check`` exits 0 when nothing that
matters moved, 1 on drift, 2 on error.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from openrouter_probe.errors import PolicyError
from openrouter_probe.policy import CompiledPolicy
from openrouter_probe.routing import route
from openrouter_probe.snapshot import Snapshot

__all__ = ["Change", "DriftReport", "check_policy"]


@dataclass(frozen=True)
class Change:
    """One thing that moved; ``matters`` is false for changes that are reported but not drift."""

    kind: str  # added, gone, ordered-gone, quantization, price, admitted, order, status
    tag: str | None
    message: str
    matters: bool = True

    def __str__(self) -> str:
        return f"{'DRIFT' if self.matters else 'info '} {self.kind}: {self.message}"


@dataclass
class DriftReport:
    """What moved between a compiled policy's snapshot and a fresh one (``check_policy``)."""

    model: str
    compiled_snapshot: str
    new_snapshot: str
    changes: list[Change] = field(default_factory=list)

    @property
    def drifted(self) -> bool:
        """Whether any change matters (the policy should be re-compiled)."""
        return any(c.matters for c in self.changes)

    @property
    def exit_code(self) -> int:
        """1 on drift, else 0 (``policy check`` exits 2 on an error)."""
        return 1 if self.drifted else 0

    def render(self) -> str:
        """Return the report as text: the two snapshots, one line per change, the conclusion."""
        head = (
            f"{self.model}: policy compiled on snapshot {self.compiled_snapshot[:19]}, "
            f"checked against {self.new_snapshot[:19]}"
        )
        if not self.changes:
            return f"{head}\nno drift"
        lines = [head, *(str(c) for c in self.changes)]
        lines.append("drift: re-compile the policy" if self.drifted else "no drift that matters")
        return "\n".join(lines)


def _signed_pct(old: float, new: float) -> float:
    """The move from ``old`` to ``new`` in percent of ``old`` (100 when a free price appears)."""
    if old == new:
        return 0.0
    return (new - old) / old * 100 if old else 100.0


def check_policy(
    policy: CompiledPolicy, snapshot: Snapshot, *, price_threshold_pct: float = 5.0
) -> DriftReport:
    """Compare ``policy`` (compiled earlier) with ``snapshot`` (fresh)."""
    if policy.model not in (snapshot.model, snapshot.data.get("id")):
        raise PolicyError(f"policy is for {policy.model} but the snapshot holds {snapshot.model}")
    if not policy.decisions:
        raise PolicyError("the compiled policy has no decisions to compare; re-compile it")
    report = DriftReport(
        model=policy.model,
        compiled_snapshot=str(policy.provenance.get("snapshot", {}).get("sha256", "?")),
        new_snapshot=snapshot.sha256,
    )
    add = report.changes.append
    old = {d.tag: d for d in policy.decisions}
    new = {e.tag: e for e in snapshot.endpoints}
    ordered = set(policy.provider.order or [])
    decision = route(policy.provider, snapshot.endpoints)

    for tag in sorted(new.keys() - old.keys()):
        admitted = decision.candidate(tag) is not None
        add(
            Change(
                "added",
                tag,
                f"new endpoint {tag} ({new[tag].provider_name}, quantization "
                f"{new[tag].quantization}); the block {'ADMITS' if admitted else 'excludes'} it",
            )
        )
    for tag in sorted(old.keys() - new.keys()):
        if tag in ordered:
            add(
                Change(
                    "ordered-gone",
                    tag,
                    f"{tag} is in provider.order but no longer serves the model",
                )
            )
        else:
            add(Change("gone", tag, f"{tag} ({old[tag].provider}) no longer serves the model"))
    for tag in sorted(old.keys() & new.keys()):
        was, now = old[tag], new[tag]
        if was.declared != now.quantization:
            add(
                Change(
                    "quantization",
                    tag,
                    f"{tag} quantization tag changed {was.declared!r} -> {now.quantization!r}",
                )
            )
        for label, before, after in (
            ("input", was.input_usd_per_m, now.pricing.prompt_usd_per_m),
            ("output", was.output_usd_per_m, now.pricing.completion_usd_per_m),
        ):
            if before is None or after is None:
                continue
            moved = _signed_pct(float(before), float(after))
            if abs(moved) > price_threshold_pct:
                add(
                    Change(
                        "price",
                        tag,
                        f"{tag} {label} price ${before:g}/M -> ${float(after):g}/M "
                        f"({moved:+.1f}%, threshold ±{price_threshold_pct:g}%)",
                    )
                )
        if was.status != now.status:
            add(Change("status", tag, f"{tag} status {was.status} -> {now.status}", matters=False))

    was_admitted = policy.admitted
    now_admitted = decision.admitted_tags
    if set(was_admitted) != set(now_admitted):
        lost = sorted(set(was_admitted) - set(now_admitted))
        gained = sorted(set(now_admitted) - set(was_admitted))
        parts = ([f"no longer admitted: {', '.join(lost)}"] if lost else []) + (
            [f"newly admitted: {', '.join(gained)}"] if gained else []
        )
        add(Change("admitted", None, "admitted set changed: " + "; ".join(parts)))
    elif was_admitted != now_admitted:
        add(Change("order", None, f"routing order changed: {was_admitted} -> {now_admitted}"))
    return report

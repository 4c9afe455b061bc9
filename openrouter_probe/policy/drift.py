"""Drift: what moved between a compiled policy's snapshot and a fresh one, and what to do about it.

``check_policy`` says what changed (``policy.changes``), what it does to the policy as it stands
(its ``provider`` block re-routed on the new snapshot), what a re-compile would change when the
spec is at hand, and the fix: docs/policy.md ("Drift check for CI") shows each part and the exit
codes of ``openrouter-probe policy check``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from openrouter_probe.errors import Message, PolicyError, Term, keyword_term, rendered
from openrouter_probe.policy.changes import (
    Change,
    batch_changes,
    blended_route,
    compiled_blend,
    endpoint_changes,
    policy_effects,
    price_moved,
    recompile_effects,
    routing_changes,
)
from openrouter_probe.policy.compiled import CompiledPolicy
from openrouter_probe.policy.compiler import compile_policy
from openrouter_probe.policy.spec import PolicySpec, ignored_snapshot_args, load_spec
from openrouter_probe.rules.precision import PrecisionRegistry
from openrouter_probe.rules.routing import route
from openrouter_probe.rules.snapshot import Snapshot, model_mismatch

__all__ = ["DriftReport", "check_policy", "find_spec"]


@dataclass
class DriftReport:
    """What moved, what it does to the policy, what a re-compile would change, and the fix.

    Blended prices are the routing-weighted output price in USD per million tokens: as compiled
    (from the recorded shares), of the policy as it stands on the new snapshot, and re-compiled.
    """

    model: str
    compiled_snapshot: str
    new_snapshot: str
    changes: list[Change] = field(default_factory=list)
    effects: list[str] = field(default_factory=list)
    blended_compiled_usd_per_m: float | None = None
    blended_now_usd_per_m: float | None = None
    blended_recompiled_usd_per_m: float | None = None
    recompiled: CompiledPolicy | None = None
    #: the step that fixes it, said by each interface its own way (``render``'s ``term``)
    fix: str = ""

    @property
    def drifted(self) -> bool:
        """Whether any change matters (the policy should be re-compiled)."""
        return any(c.matters for c in self.changes)

    @property
    def exit_code(self) -> int:
        """1 on drift, else 0 (``policy check`` exits 2 on an error)."""
        return 1 if self.drifted else 0

    def render(self, term: Term = keyword_term) -> str:
        """The report as text: a head line, one line per change and effect, the fix last (its
        advice said with ``term``: a Python call by default, the CLI's command lines)."""
        fix = rendered(self.fix, term)
        head = (
            f"{self.model}: policy compiled on snapshot {self.compiled_snapshot[:19]}, "
            f"checked against {self.new_snapshot[:19]}"
        )
        if not self.changes:
            return f"{head}\nno drift\n{fix}"
        lines = [
            head,
            *(str(c) for c in self.changes),
            *(f"=> {rendered(e, term)}" for e in self.effects),
        ]
        lines.append("drift" if self.drifted else "no drift that matters")
        lines.append(fix)
        return "\n".join(lines)

    def to_dict(self, term: Term = keyword_term) -> dict[str, Any]:
        """Every part by name; ``recompiled`` is ``{"provider": {...}}`` as ``policy compile``
        writes it, or ``None`` when the spec is not at hand (or the re-compile fails); ``fix``
        said with ``term`` (``render``)."""
        return {
            "model": self.model,
            "drift": self.drifted,
            "compiled_snapshot": self.compiled_snapshot,
            "new_snapshot": self.new_snapshot,
            "changes": [c.to_dict() for c in self.changes],
            "effects": [rendered(e, term) for e in self.effects],
            "blended_output_usd_per_m": {
                "compiled": self.blended_compiled_usd_per_m,
                "now": self.blended_now_usd_per_m,
                "recompiled": self.blended_recompiled_usd_per_m,
            },
            "recompiled": None
            if self.recompiled is None
            else {"provider": self.recompiled.provider.to_request()},
            "fix": rendered(self.fix, term),
        }


def find_spec(
    policy: CompiledPolicy, policy_file: str | Path | None
) -> tuple[PolicySpec | None, Path | None, str | None]:
    """The spec ``policy`` was compiled from: the file ``provenance.spec.file`` names, beside
    ``policy_file``. Returns the spec, its path and a note (why none was found, or that the spec
    was edited since the compile); ``(None, None, note)`` when it is not there."""
    name = _spec_name(policy)
    if name is None:
        return None, None, "the policy's provenance names no spec file"
    if policy_file is None:
        return None, None, f"the policy was compiled from {name}; its folder is not known"
    path = Path(policy_file).parent / name
    if not path.is_file():
        return None, None, f"provenance.spec.file names {name}, which is not beside {policy_file}"
    spec = load_spec(path)
    edited = spec.sha256() != policy.provenance["spec"].get("sha256")
    return spec, path, f"{path} was edited since the compile" if edited else None


# -- the check --------------------------------------------------------------------------------------


def _fix(
    report: DriftReport,
    policy_file: str | None,
    spec_file: str | None,
    spec_name: str | None,
    failed: str | None,
) -> Message:
    """The step that fixes the drift: advice each interface says its own way (``policy check
    POLICY --write`` on the command line, ``report.recompiled.save(POLICY)`` in Python)."""
    if not report.changes:
        return Message("no-drift", "nothing to do")
    if not report.drifted:
        return Message(
            "no-drift", "nothing to do: no change touches what the policy admits, orders or pays"
        )
    where = policy_file or "POLICY"
    if failed is not None:
        return Message(
            "drift-recompile-fails",
            "fix: edit {spec_file:s} ({failed:s}), then {@recheck_after_edit}",
            spec_file=spec_file or "the spec",
            failed=failed,
            policy=where,
        )
    if spec_file is None:
        named = f"provenance names {spec_name}" if spec_name else "provenance names no spec"
        return Message(
            "drift-no-spec",
            "fix: re-compile from the spec it came from ({named:s}): {@recheck_with_spec}",
            named=named,
            policy=where,
        )
    return Message(
        "drift",
        "fix: re-compile it in place: {@recheck_write} (from {spec_file:s})",
        spec_file=spec_file,
        policy=where,
    )


def check_policy(
    policy: CompiledPolicy,
    snapshot: Snapshot,
    *,
    price_threshold_pct: float = 5.0,
    spec: PolicySpec | None = None,
    spec_file: str | None = None,
    policy_file: str | None = None,
    registry: PrecisionRegistry | None = None,
    snapshot_args: Sequence[str] = (),
) -> DriftReport:
    """Compare ``policy`` (compiled earlier) with ``snapshot`` (fresh) and say what to do.

    With ``spec`` (the spec the policy was compiled from; ``find_spec`` finds it beside
    ``policy_file``), the report carries the re-compiled policy and what it would change.
    ``policy_file`` and ``spec_file`` only shape the step the fix names (``snapshot_args`` is
    ignored: see ``policy.spec.ignored_snapshot_args``).

    Example::

        report = check_policy(load_compiled_policy(path), fetch_snapshot(model))
        print(report.render()); sys.exit(report.exit_code)
    """
    ignored_snapshot_args(snapshot_args)
    mismatch = model_mismatch(
        snapshot,
        policy.model,
        fix=f"the policy is for {policy.model}: check it against a snapshot of that model",
    )
    if mismatch:
        raise PolicyError(mismatch)
    if not policy.decisions:
        raise PolicyError("the compiled policy has no decisions to compare; re-compile it")
    now = route(policy.provider, snapshot.endpoints)
    report = DriftReport(
        model=policy.model,
        compiled_snapshot=str(policy.provenance.get("snapshot", {}).get("sha256", "?")),
        new_snapshot=snapshot.sha256,
        changes=[
            *endpoint_changes(policy, snapshot, now, price_threshold_pct),
            *routing_changes(policy, now),
            *batch_changes(policy, snapshot, price_threshold_pct),
        ],
        effects=policy_effects(policy, snapshot, now),
        blended_compiled_usd_per_m=compiled_blend(policy.decisions),
        blended_now_usd_per_m=blended_route(now),
    )
    b, c = report.blended_compiled_usd_per_m, report.blended_now_usd_per_m
    if price_moved(b, c):
        report.effects.append(f"blended output price ${b:.2f}/M -> ${c:.2f}/M")
    failed = None
    if spec is not None:
        try:
            report.recompiled = compile_policy(
                spec, snapshot, registry=registry, spec_file=spec_file
            )
        except PolicyError as exc:
            failed = exc.reason
            report.effects.append(
                Message("recompile-fails", "a re-compile fails: {reason:s}", reason=exc.reason)
            )
        else:
            report.blended_recompiled_usd_per_m = compiled_blend(report.recompiled.decisions)
            report.effects.extend(recompile_effects(policy, report.recompiled, c))
    report.fix = _fix(report, policy_file, spec_file, _spec_name(policy), failed)
    return report


def _spec_name(policy: CompiledPolicy) -> str | None:
    info = policy.provenance.get("spec")
    name = info.get("file") if isinstance(info, dict) else None
    return str(name) if name else None

"""Drift: what moved between a compiled policy's snapshot and a fresh one, and what to do about it.

For other repos' CI: ``check_policy`` compares the decisions recorded in a compiled policy with a new
snapshot and says three things:

- **what changed**: endpoints added or gone (an ordered one gone), a provider's quantization (its tag
  ``chutes/int4`` becoming ``chutes/fp4`` is one change of that provider, not one endpoint gone and
  another added), prices moved beyond a threshold or appearing/disappearing, status. A change *matters*
  when it touches an endpoint the policy admits (then or now); the others are info lines;
- **what it does to the policy as it stands**, by re-routing its ``provider`` block on the new
  snapshot (``routing.route``): "order now starts with X (the first entry is gone)", "new endpoint Y
  is admitted at $a/M but ranks 6th behind 4 dearer ones", "blended output price $b/M -> $c/M";
- **what a re-compile would change**, when the spec is at hand (the file ``provenance.spec.file``
  names, beside the policy, or one given): the re-compiled block and its blended price.

The report ends with the step that fixes it. ``openrouter-probe policy check`` exits 0 when nothing
that matters moved, 1 on drift, 2 on error, and re-compiles the policy in place when asked to.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from openrouter_probe.api.schema import Endpoint
from openrouter_probe.errors import Message, PolicyError, Term, keyword_term, rendered
from openrouter_probe.policy.compiled import CompiledPolicy, Decision
from openrouter_probe.policy.compiler import compile_policy
from openrouter_probe.policy.spec import PolicySpec, ignored_snapshot_args, load_spec
from openrouter_probe.rules.precision import PrecisionRegistry
from openrouter_probe.rules.quantities import format_usd_per_m
from openrouter_probe.rules.routing import RouteDecision, route
from openrouter_probe.rules.snapshot import Snapshot, model_mismatch

__all__ = [
    "Change",
    "DriftReport",
    "check_policy",
    "find_spec",
    "provenance_diff",
    "recompile_diff",
]


@dataclass(frozen=True)
class Change:
    """One change between the compiled snapshot and the new one (``matters`` False: info only)."""

    kind: str  # added, gone, ordered-gone, quantization, price, admitted, order, status
    tag: str | None
    message: str
    matters: bool = True

    def __str__(self) -> str:
        return f"{'DRIFT' if self.matters else 'info '} {self.kind}: {self.message}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "tag": self.tag,
            "message": self.message,
            "matters": self.matters,
        }


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
    info = policy.provenance.get("spec")
    name = info.get("file") if isinstance(info, dict) else None
    if not isinstance(info, dict) or not name:
        return None, None, "the policy's provenance names no spec file"
    if policy_file is None:
        return None, None, f"the policy was compiled from {name}; its folder is not known"
    path = Path(policy_file).parent / str(name)
    if not path.is_file():
        return None, None, f"provenance.spec.file names {name}, which is not beside {policy_file}"
    spec = load_spec(path)
    edited = spec.sha256() != info.get("sha256")
    return spec, path, f"{path} was edited since the compile" if edited else None


# -- what changed -----------------------------------------------------------------------------------


def _signed_pct(old: float, new: float) -> float:
    """The move from ``old`` to ``new`` in percent of ``old`` (100 when a free price appears)."""
    if old == new:
        return 0.0
    return (new - old) / old * 100 if old else 100.0


def _slug(tag: str) -> str:
    return tag.partition("/")[0]


def _retags(
    old: dict[str, Decision], new: dict[str, Endpoint], gone: set[str], added: set[str]
) -> list[tuple[str, str]]:
    """Pairs (old tag, new tag) where one provider's only gone endpoint became its only new one."""
    pairs = []
    for tag in sorted(gone):
        mates = [
            a for a in added if _slug(a) == _slug(tag) and new[a].provider_name == old[tag].provider
        ]
        if len(mates) == 1 and [_slug(g) for g in gone].count(_slug(tag)) == 1:
            pairs.append((tag, mates[0]))
    return pairs


def _price_changes(
    tag: str, was: Decision, now: Endpoint, threshold_pct: float, matters: bool
) -> list[Change]:
    out = []
    for label, before, after in (
        ("input", was.input_usd_per_m, now.pricing.prompt_usd_per_m),
        ("output", was.output_usd_per_m, now.pricing.completion_usd_per_m),
    ):
        if before is None and after is None:
            continue
        if after is None:
            out.append(
                Change(
                    "price",
                    tag,
                    f"{tag} {label} price ({format_usd_per_m(before)}) is gone",
                    matters,
                )
            )
            continue
        if before is None:
            out.append(
                Change(
                    "price", tag, f"{tag} {label} price appears: {format_usd_per_m(after)}", matters
                )
            )
            continue
        moved = _signed_pct(float(before), float(after))
        if abs(moved) > threshold_pct:
            out.append(
                Change(
                    "price",
                    tag,
                    f"{tag} {label} price {format_usd_per_m(before)} -> {format_usd_per_m(after)} "
                    f"({moved:+.1f}%, threshold ±{threshold_pct:g}%)",
                    matters,
                )
            )
    return out


def _endpoint_changes(
    policy: CompiledPolicy, snapshot: Snapshot, now: RouteDecision, threshold_pct: float
) -> list[Change]:
    old = {d.tag: d for d in policy.decisions}
    new = {e.tag: e for e in snapshot.endpoints}
    ordered = set(policy.provider.order or [])

    def relevant(tag: str) -> bool:
        return (tag in old and old[tag].kept) or now.candidate(tag) is not None

    gone, added = set(old) - set(new), set(new) - set(old)
    changes = []
    for was_tag, now_tag in _retags(old, new, gone, added):
        gone.discard(was_tag)
        added.discard(now_tag)
        e = new[now_tag]
        changes.append(
            Change(
                "quantization",
                was_tag,
                f"{e.provider_name}: {was_tag} is now {now_tag} (quantization "
                f"{old[was_tag].declared!r} -> {e.quantization!r}); the block "
                f"{'ADMITS' if now.candidate(now_tag) else 'excludes'} it",
                relevant(was_tag) or relevant(now_tag),
            )
        )
    for tag in sorted(added):
        admitted = now.candidate(tag) is not None
        changes.append(
            Change(
                "added",
                tag,
                f"new endpoint {tag} ({new[tag].provider_name}, quantization "
                f"{new[tag].quantization}); the block {'ADMITS' if admitted else 'excludes'} it",
                admitted,
            )
        )
    for tag in sorted(gone):
        if tag in ordered:
            message = f"{tag} is in provider.order but no longer serves the model"
            changes.append(Change("ordered-gone", tag, message))
        else:
            was = "admitted" if old[tag].kept else "already excluded"
            message = f"{tag} ({old[tag].provider}, {was}) no longer serves the model"
            changes.append(Change("gone", tag, message, old[tag].kept))
    for tag in sorted(set(old) & set(new)):
        changes.extend(_same_tag_changes(tag, old[tag], new[tag], threshold_pct, relevant(tag)))
    return changes


def _same_tag_changes(
    tag: str, was: Decision, now: Endpoint, threshold_pct: float, matters: bool
) -> list[Change]:
    changes = []
    if was.declared != now.quantization:
        changes.append(
            Change(
                "quantization",
                tag,
                f"{tag} quantization tag changed {was.declared!r} -> {now.quantization!r}",
                matters,
            )
        )
    changes.extend(_price_changes(tag, was, now, threshold_pct, matters))
    if was.status != now.status:
        changes.append(Change("status", tag, f"{tag} status {was.status} -> {now.status}", False))
    return changes


def _routing_changes(policy: CompiledPolicy, now: RouteDecision) -> list[Change]:
    was_admitted, now_admitted = policy.admitted, now.admitted_tags
    if set(was_admitted) != set(now_admitted):
        lost = sorted(set(was_admitted) - set(now_admitted))
        gained = sorted(set(now_admitted) - set(was_admitted))
        parts = ([f"no longer admitted: {', '.join(lost)}"] if lost else []) + (
            [f"newly admitted: {', '.join(gained)}"] if gained else []
        )
        return [Change("admitted", None, "admitted set changed: " + "; ".join(parts))]
    if was_admitted != now_admitted:
        return [Change("order", None, f"routing order changed: {was_admitted} -> {now_admitted}")]
    return []


# -- what it does -----------------------------------------------------------------------------------


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _blended(decision: RouteDecision) -> float | None:
    """The routing-weighted output price (USD per million) of a decision's priced candidates."""
    priced = [
        (c.weight, p) for c in decision.candidates if (p := c.endpoint.pricing.completion_usd_per_m)
    ]
    total = sum(w for w, _ in priced)
    if not priced or total <= 0:
        return None
    return round(float(sum(Decimal(repr(w)) * p for w, p in priced)) / total, 4)


def _compiled_blend(decisions: Sequence[Decision]) -> float | None:
    kept = [(d.share or 0.0, d.output_usd_per_m) for d in decisions if d.kept]
    priced = [(w, p) for w, p in kept if p is not None]
    total = sum(w for w, _ in priced)
    return round(sum(w * p for w, p in priced) / total, 4) if total > 0 else None


def _ranked(what: str, endpoint: Endpoint, position: int, now: RouteDecision) -> str:
    """``what`` is admitted at its price, and where it ranks (behind how many dearer ones)."""
    price = endpoint.pricing.completion_usd_per_m
    if price is None:
        return f"{what} is admitted, with no output price"
    dearer = sum(
        1
        for d in now.candidates[: position - 1]
        if (p := d.endpoint.pricing.completion_usd_per_m) is not None and p > price
    )
    rank = f"ranks {_ordinal(position)}"
    if not dearer:
        return f"{what} is admitted at ${price:.2f}/M and {rank}"
    return f"{what} is admitted at ${price:.2f}/M but {rank} behind {dearer} dearer " + (
        "one" if dearer == 1 else "ones"
    )


def _effects(policy: CompiledPolicy, snapshot: Snapshot, now: RouteDecision) -> list[str]:
    """What the changes do to the policy as it stands (its block re-routed on the new snapshot)."""
    effects = []
    was, present = policy.admitted, {e.tag for e in snapshot.endpoints}
    if was and now.admitted_tags and was[0] != now.admitted_tags[0]:
        first = now.candidate(was[0])
        why = (
            "is gone"
            if was[0] not in present
            else "is no longer admitted"
            if first is None
            else f"is now {_ordinal(first.position)}"
        )
        effects.append(
            f"order now starts with {now.admitted_tags[0]} (the first entry, {was[0]}, {why})"
        )
    if not now.candidates:
        effects.append("the policy admits no endpoint any more: every request would fail")
    known = {d.tag for d in policy.decisions}
    for c in now.candidates:
        if c.endpoint.tag in was:
            continue
        tag = c.endpoint.tag
        what = f"{tag}, excluded before," if tag in known else f"new endpoint {tag}"
        effects.append(_ranked(what, c.endpoint, c.position, now))
    return effects


def _shown(value: Any) -> str:
    if value is None:
        return "unset"
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    return json.dumps(value) if isinstance(value, dict) else str(value)


def _described(d: Decision) -> str:
    """An endpoint as a reviewer wants it: provider, precision and verdict, prices."""
    precision = f"{d.effective or d.declared or 'undeclared'} {d.verdict}"
    return (
        f"{d.provider}, {precision}, {format_usd_per_m(d.input_usd_per_m)} in, "
        f"{format_usd_per_m(d.output_usd_per_m)} out"
    )


def _flat(mapping: dict[str, Any], prefix: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in mapping.items():
        if isinstance(value, dict):
            out |= _flat(value, f"{prefix}{key}.")
        else:
            out[f"{prefix}{key}"] = value
    return out


def recompile_diff(policy: CompiledPolicy | None, recompiled: CompiledPolicy) -> list[str]:
    """What re-compiling ``policy`` into ``recompiled`` changes in what it admits, one line each.

    The ``provider`` keys it sets, then every endpoint it admits or drops with its provider,
    precision verdict and prices (``policy`` ``None``: the compiled file is missing, so every
    admitted one is new). Empty when the block stays the same: ``provenance_diff`` then says why
    the file changes at all.
    """
    before = {} if policy is None else policy.provider.to_request()
    after = recompiled.provider.to_request()
    lines = [
        f"a re-compile sets provider.{key} to {_shown(after.get(key))} "
        f"(now {_shown(before.get(key))})"
        for key in sorted(set(before) | set(after))
        if before.get(key) != after.get(key)
    ]
    was = [] if policy is None else policy.admitted
    old = {} if policy is None else {d.tag: d for d in policy.decisions}
    new = {d.tag: d for d in recompiled.decisions}
    lines += [
        f"a re-compile admits {tag} ({_described(new[tag])})"
        for tag in recompiled.admitted
        if tag not in was
    ]
    lines += [
        f"a re-compile drops {tag} ({_described(new.get(tag) or old[tag])}"
        + ("" if tag in new else "; gone from the snapshot")
        + ")"
        for tag in was
        if tag not in recompiled.admitted
    ]
    return lines


def provenance_diff(policy: CompiledPolicy, recompiled: CompiledPolicy) -> list[str]:
    """The provenance a re-compile records differently (the compiler version, the snapshot's
    hash, the spec's hash), one line each: why a file whose block is unchanged is stale."""
    before, after = (
        _flat(policy.provenance, "provenance."),
        _flat(recompiled.provenance, "provenance."),
    )
    return [
        f"a re-compile records {key} {_shown(after.get(key))} (now {_shown(before.get(key))})"
        for key in sorted(set(before) | set(after))
        if before.get(key) != after.get(key)
    ]


def _recompile_effects(
    policy: CompiledPolicy, recompiled: CompiledPolicy, blended_now: float | None
) -> list[str]:
    lines = recompile_diff(policy, recompiled)
    if not lines:
        return ["a re-compile gives the same provider block (its recorded decisions are refreshed)"]
    blended = _compiled_blend(recompiled.decisions)
    if _moved(blended_now, blended):
        lines.append(
            f"blended output price after a re-compile ${blended_now:.2f}/M -> ${blended:.2f}/M"
        )
    return lines


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
            *_endpoint_changes(policy, snapshot, now, price_threshold_pct),
            *_routing_changes(policy, now),
            *_batch_changes(policy, snapshot, price_threshold_pct),
        ],
        effects=_effects(policy, snapshot, now),
        blended_compiled_usd_per_m=_compiled_blend(policy.decisions),
        blended_now_usd_per_m=_blended(now),
    )
    b, c = report.blended_compiled_usd_per_m, report.blended_now_usd_per_m
    if _moved(b, c):
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
            report.blended_recompiled_usd_per_m = _compiled_blend(report.recompiled.decisions)
            report.effects.extend(_recompile_effects(policy, report.recompiled, c))
    report.fix = _fix(report, policy_file, spec_file, _spec_name(policy), failed)
    return report


def _batch_changes(
    policy: CompiledPolicy, snapshot: Snapshot, threshold_pct: float
) -> list[Change]:
    """What moved under the batch block: its pinned ``:batch`` endpoint gone or re-priced, or
    ``:batch`` endpoints listed for a policy compiled before they were known (info only)."""
    if snapshot.batch is None:
        return []
    rows = {e.tag: e for e in snapshot.batch.endpoints}
    if policy.batch is None:
        if not rows:
            return []
        listed = ", ".join(rows)
        message = f"{policy.model} lists :batch endpoints ({listed}); re-compile for a batch block"
        return [Change("batch-listed", None, message, matters=False)]
    provider = policy.batch.get("provider") or {}
    changes = []
    for tag in provider.get("only") or []:
        row = rows.get(tag)
        if row is None:
            message = f"batch.provider pins {tag}, which has no :batch endpoint now"
            changes.append(Change("batch-gone", tag, message + " (a submit is refused)"))
            continue
        before = next(
            (d.get("output_usd_per_m") for d in policy.batch.get("decisions") or []
             if d.get("tag") == tag),
            None,
        )  # fmt: skip
        after = row.pricing.completion_usd_per_m
        if before and after is not None:
            moved = (float(after) - before) / before * 100
            if abs(moved) > threshold_pct:
                changes.append(
                    Change(
                        "batch-price",
                        tag,
                        f"{tag} :batch output {format_usd_per_m(before)} -> "
                        f"{format_usd_per_m(after)} ({moved:+.0f}%)",
                    )
                )
    return changes


def _spec_name(policy: CompiledPolicy) -> str | None:
    info = policy.provenance.get("spec")
    name = info.get("file") if isinstance(info, dict) else None
    return str(name) if name else None


def _moved(before: float | None, after: float | None) -> bool:
    """Whether a blended price moved by a cent or more (recorded shares are rounded)."""
    return before is not None and after is not None and f"{before:.2f}" != f"{after:.2f}"

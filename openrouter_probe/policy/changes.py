"""What moved between a compiled policy's snapshot and a fresh one, and what it does to the policy.

The parts of a drift report (``policy.drift``): the ``Change`` lines (endpoints added or gone, a
provider's quantization, prices, status, the batch block), the effects of re-routing the policy's
``provider`` block on the new snapshot, and what a re-compile would change
(``recompile_diff``, ``provenance_diff``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from decimal import Decimal
from typing import Any

from openrouter_probe.api.schema import Endpoint
from openrouter_probe.policy.compiled import CompiledPolicy, Decision
from openrouter_probe.rules.quantities import format_usd_per_m
from openrouter_probe.rules.routing import RouteDecision
from openrouter_probe.rules.snapshot import Snapshot

__all__ = [
    "Change",
    "batch_changes",
    "blended_route",
    "compiled_blend",
    "endpoint_changes",
    "policy_effects",
    "price_moved",
    "provenance_diff",
    "recompile_diff",
    "recompile_effects",
    "routing_changes",
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
        return asdict(self)


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
            message = f"{tag} {label} price ({format_usd_per_m(before)}) is gone"
        elif before is None:
            message = f"{tag} {label} price appears: {format_usd_per_m(after)}"
        else:
            moved = _signed_pct(float(before), float(after))
            if abs(moved) <= threshold_pct:
                continue
            message = (
                f"{tag} {label} price {format_usd_per_m(before)} -> {format_usd_per_m(after)} "
                f"({moved:+.1f}%, threshold ±{threshold_pct:g}%)"
            )
        out.append(Change("price", tag, message, matters))
    return out


def endpoint_changes(
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


def routing_changes(policy: CompiledPolicy, now: RouteDecision) -> list[Change]:
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


def blended_route(decision: RouteDecision) -> float | None:
    """The routing-weighted output price (USD per million) of a decision's priced candidates."""
    priced = [
        (c.weight, p) for c in decision.candidates if (p := c.endpoint.pricing.completion_usd_per_m)
    ]
    total = sum(w for w, _ in priced)
    if not priced or total <= 0:
        return None
    return round(float(sum(Decimal(repr(w)) * p for w, p in priced)) / total, 4)


def compiled_blend(decisions: Sequence[Decision]) -> float | None:
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


def policy_effects(policy: CompiledPolicy, snapshot: Snapshot, now: RouteDecision) -> list[str]:
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


def recompile_effects(
    policy: CompiledPolicy, recompiled: CompiledPolicy, blended_now: float | None
) -> list[str]:
    lines = recompile_diff(policy, recompiled)
    if not lines:
        return ["a re-compile gives the same provider block (its recorded decisions are refreshed)"]
    blended = compiled_blend(recompiled.decisions)
    if price_moved(blended_now, blended):
        lines.append(
            f"blended output price after a re-compile ${blended_now:.2f}/M -> ${blended:.2f}/M"
        )
    return lines


def batch_changes(policy: CompiledPolicy, snapshot: Snapshot, threshold_pct: float) -> list[Change]:
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


def price_moved(before: float | None, after: float | None) -> bool:
    """Whether a blended price moved by a cent or more (recorded shares are rounded)."""
    return before is not None and after is not None and f"{before:.2f}" != f"{after:.2f}"

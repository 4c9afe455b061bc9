"""``compile_policy``: a policy spec read against a snapshot into a ``CompiledPolicy``.

What it writes (the ``provider`` block as OpenRouter's request field wants it, the batch block,
the provenance, a decision for every endpoint) is docs/policy.md's "The compiled file"; the same
inputs give byte-identical YAML. Which endpoints a block admits is ``rules.routing``'s alone.

Example::

    compiled = compile_policy(load_spec("policies/kimi-k2.5.spec.yaml"), bundled_snapshot())
    compiled.save("policies/kimi-k2.5.yaml")
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from openrouter_probe import __version__
from openrouter_probe.api.schema import Endpoint
from openrouter_probe.errors import Message, PolicyError
from openrouter_probe.policy.compiled import CompiledPolicy, Decision
from openrouter_probe.policy.spec import PolicySpec
from openrouter_probe.rules.batch import batch_pairs
from openrouter_probe.rules.precision import PrecisionRegistry, PrecisionVerdict, default_registry
from openrouter_probe.rules.provider_block import MaxPrice, ProviderBlock
from openrouter_probe.rules.ranking import blended_price_usd_per_m, tool_routing
from openrouter_probe.rules.routing import RequestParams, RouteDecision, matches, route
from openrouter_probe.rules.snapshot import Snapshot, model_mismatch

__all__ = ["compile_policy"]


def _allowed_formats(
    spec: PolicySpec, native: str | None, registry: PrecisionRegistry
) -> list[str] | None:
    if spec.precision == "any":
        return None
    if isinstance(spec.precision, list):
        return list(spec.precision)
    if native is None:
        raise PolicyError(
            f"precision: {spec.precision}: the native precision of {spec.model} is not in the "
            "registry; list formats instead (precision: [int4]) or add the model to a precision file",
        )
    if spec.precision == "native":
        return [native]
    bits = registry.formats[native].bits
    wider = [n for n, info in registry.formats.items() if info.bits > bits]
    return [native, *sorted(wider, key=lambda n: (registry.formats[n].bits, n))]


def _score(e: Endpoint, order_by: Any, endpoints: Sequence[Endpoint]) -> tuple[float, str]:
    """Lower is better. Weighted scores normalize each metric to 0..1 over ``endpoints``."""

    def price(x: Endpoint) -> float | None:
        p = blended_price_usd_per_m(x)
        return None if p is None else float(p)

    def p50(stats: Any) -> float | None:
        return None if stats is None or stats.p50 is None else float(stats.p50)

    metrics = {
        "price": (price, 1.0),
        "throughput": (lambda x: p50(x.throughput_last_30m), -1.0),
        "latency": (lambda x: p50(x.latency_last_30m), 1.0),
    }
    weights = {order_by: 1.0} if isinstance(order_by, str) else dict(order_by)
    total = 0.0
    for name, weight in sorted(weights.items()):
        fn, sign = metrics[name]
        values = [v for v in (fn(x) for x in endpoints) if v is not None]
        v = fn(e)
        if v is None or not values:
            total += weight  # missing figures rank last on this metric
            continue
        lo, hi = min(values), max(values)
        norm = 0.0 if hi == lo else (v - lo) / (hi - lo)
        total += weight * (norm if sign > 0 else 1.0 - norm)
    return (total, e.tag)


def _check_auto_ignores(
    ignore_why: Mapping[str, str], spec: PolicySpec, endpoints: Sequence[Endpoint]
) -> None:
    """Refuse an automatic ignore entry that would also hit endpoints it was not meant for.

    A tag without a variant (``together``) is a base slug to OpenRouter: ignoring it ignores
    ``together/turbo`` too. The compiler cannot say "this endpoint only" then, so it says so.
    """
    for entry, why in ignore_why.items():
        if entry in spec.ignore or "/" in entry:
            continue
        others = [e.tag for e in endpoints if e.tag != entry and matches(entry, e)]
        if others:
            raise PolicyError(
                f"the compiler would ignore {entry!r} ({why}), but OpenRouter reads {entry!r} as a "
                f"base slug that also ignores {', '.join(others)}; decide by hand: add {entry!r} "
                "to ignore: (all of them) or name the endpoints you want in allow:"
            )


def _ignores(
    spec: PolicySpec,
    endpoints: Sequence[Endpoint],
    verdicts: Mapping[str, PrecisionVerdict],
    allowed: list[str] | None,
    quantizations: list[str] | None,
) -> dict[str, str]:
    """Return the ignore entries the spec and the known facts call for, each with its reason."""
    ignore_why: dict[str, str] = {entry: f"spec ignores {entry!r}" for entry in spec.ignore}
    for e in endpoints:
        v = verdicts[e.tag]
        if any(matches(entry, e) for entry in ignore_why):
            continue
        tag_passes = quantizations is None or e.quantization in quantizations
        if allowed is not None and tag_passes and v.effective not in (None, *allowed):
            # The tag would pass the quantizations filter, but a known fact says otherwise.
            ignore_why[e.tag] = f"serves {v.effective} ({v.effective_from})"
    for e in endpoints:
        m = verdicts[e.tag].measured
        if m is not None and m.verdict in spec.exclude_measured and e.tag not in ignore_why:
            ref = m.extra.get("reference")
            ignore_why[e.tag] = (
                f"measured {m}"
                + (f" against {ref}" if ref else "")
                + (f", and the spec's exclude_measured lists {m.verdict}")
            )
    return ignore_why


def _build(
    spec: PolicySpec,
    snap: Snapshot,
    registry: PrecisionRegistry,
    rows: Sequence[Endpoint] | None = None,
) -> tuple[ProviderBlock, dict[str, str], dict[str, PrecisionVerdict]]:
    """Return the block, why the compiler added each ignore entry, and every verdict (over
    ``rows`` when given: the snapshot's ``:batch`` endpoints, under the same rules)."""
    endpoints = snap.endpoints if rows is None else list(rows)
    verdicts = {e.tag: registry.verdict(snap.model, e) for e in endpoints}
    native = registry.native_for(snap.model)
    allowed = _allowed_formats(spec, native.native if native else None, registry)
    quantizations: list[str] | None = None
    if allowed is not None:
        quantizations = list(allowed) + (["unknown"] if spec.undeclared == "admit" else [])

    ignore_why = _ignores(spec, endpoints, verdicts, allowed, quantizations)

    max_price = None
    if spec.max_price is not None:
        max_price = MaxPrice(
            prompt=spec.max_price.input_usd_per_m, completion=spec.max_price.output_usd_per_m
        )
    base = ProviderBlock(
        allow_fallbacks=None if spec.fallbacks else False,
        require_parameters=spec.require_parameters,
        data_collection=spec.data_collection,
        zdr=spec.zdr,
        only=spec.allow,
        ignore=sorted(ignore_why) or None,
        quantizations=quantizations,
        max_price=max_price,
        options=spec.options,
    )
    if spec.min_uptime_30m_pct is not None:
        # Only endpoints the block would otherwise admit need an uptime ignore.
        floor = spec.min_uptime_30m_pct
        for e in route(base, endpoints).admitted:
            if e.uptime_last_30m is None or e.uptime_last_30m < floor:
                ignore_why[e.tag] = f"uptime {e.uptime_last_30m}% < min_uptime_30m_pct {floor:g}%"
        base = base.model_copy(update={"ignore": sorted(ignore_why) or None})
    _check_auto_ignores(ignore_why, spec, endpoints)
    if spec.strategy == "sort":
        if not isinstance(spec.order_by, str):
            raise PolicyError(
                "strategy: sort needs order_by: price, throughput or latency (not weights)"
            )
        return base.model_copy(update={"sort": spec.order_by}), ignore_why, verdicts
    if spec.strategy == "balance":
        return base, ignore_why, verdicts
    admitted = route(base, endpoints).admitted
    ranked = sorted(admitted, key=lambda e: _score(e, spec.order_by, admitted))
    order = [e.tag for e in ranked]
    return base.model_copy(update={"order": order or None}), ignore_why, verdicts


def _dropped(decision: RouteDecision, e: Endpoint, ignore_why: Mapping[str, str]) -> str:
    """Why ``decision`` left ``e`` out: the ignore entry's reason, or the exclusion's."""
    x = decision.exclusion(e.tag)
    assert x is not None
    if x.reason == "ignore":
        entry = next(k for k in ignore_why if matches(k, e))
        return f"dropped: ignored ({ignore_why[entry]})"
    return f"dropped: {x.reason}: {x.detail}"


def _decisions(
    decision: RouteDecision,
    endpoints: Sequence[Endpoint],
    ignore_why: Mapping[str, str],
    verdicts: Mapping[str, PrecisionVerdict],
    loose: RouteDecision | None,
) -> list[Decision]:
    rows = []
    for e in endpoints:
        v = verdicts[e.tag]
        cand = decision.candidate(e.tag)
        if cand is not None:
            how = f"position {cand.position}" + (
                f", matched by {cand.matched_by!r}" if cand.matched_by else ""
            )
            reason = f"admitted ({how}); precision {v.verdict}: {v.reason}"
        else:
            reason = _dropped(decision, e, ignore_why)
            quantization = reason.startswith("dropped: quantization:")
            if quantization and loose is not None and loose.candidate(e.tag):
                reason += " (an ignore-list alone would admit it)"
        price_in, price_out = e.pricing.prompt_usd_per_m, e.pricing.completion_usd_per_m
        rows.append(
            Decision(
                tag=e.tag,
                provider=e.provider_name,
                declared=e.quantization,
                effective=v.effective,
                verdict=v.verdict,
                input_usd_per_m=None if price_in is None else float(price_in),
                output_usd_per_m=None if price_out is None else float(price_out),
                uptime_30m_pct=None if e.uptime_last_30m is None else float(e.uptime_last_30m),
                status=e.status,
                kept=cand is not None,
                position=cand.position if cand else None,
                share=round(cand.weight, 4) if cand else None,
                reason=reason,
            )
        )
    return rows


def _capacity(decision: RouteDecision) -> dict[str, Any]:
    prices = [
        float(p) for e in decision.admitted if (p := e.pricing.completion_usd_per_m) is not None
    ]
    expected = sum(
        c.weight * float(c.endpoint.pricing.completion_usd_per_m or 0) for c in decision.candidates
    )
    tps = [
        float(e.throughput_last_30m.p50)
        for e in decision.admitted
        if e.throughput_last_30m is not None and e.throughput_last_30m.p50 is not None
    ]
    return {
        "endpoints": len(decision.candidates),
        "cheapest_output_usd_per_m": min(prices) if prices else None,
        "expected_output_usd_per_m": round(expected, 4),
        "throughput_p50_sum_tps": sum(tps),
    }


def compile_policy(
    spec: PolicySpec,
    snapshot: Snapshot,
    *,
    registry: PrecisionRegistry | None = None,
    spec_file: str | None = None,
    allow_empty: bool = False,
) -> CompiledPolicy:
    """Compile ``spec`` against ``snapshot`` into a ``CompiledPolicy`` (deterministic).

    Raises ``PolicyError`` (naming ``spec_file``) when the spec is for another model, cannot be
    expressed, or admits nothing. With ``allow_empty=True`` a policy that admits nothing is
    returned instead (its ``decisions`` say why each endpoint was dropped): what ``policy
    explain`` shows before it exits nonzero.
    """
    try:
        return _compile(
            spec, snapshot, registry or default_registry(), spec_file, allow_empty=allow_empty
        )
    except PolicyError as exc:
        if exc.source is not None or spec_file is None:
            raise
        raise PolicyError(exc.reason, source=spec_file, errors=exc.errors) from exc


def _compile(
    spec: PolicySpec,
    snapshot: Snapshot,
    reg: PrecisionRegistry,
    spec_file: str | None,
    *,
    allow_empty: bool = False,
) -> CompiledPolicy:
    mismatch = model_mismatch(
        snapshot, spec.model, fix=f"the spec is for {spec.model}: probe it, or fix model:"
    )
    if mismatch:
        raise PolicyError(mismatch)
    native = reg.native_for(snapshot.model)
    block, ignore_why, verdicts = _build(spec, snapshot, reg)
    decision = route(block, snapshot.endpoints, RequestParams())
    if not decision.candidates and not allow_empty:
        raise PolicyError(
            Message(
                "admits-none",
                "the policy admits none of the {count:d} endpoints of {model:s}; relax precision, "
                "ignore or max_price ({@explain_spec} shows why each one is dropped)",
                count=len(snapshot.endpoints),
                model=spec.model,
                spec=spec_file or "SPEC",
            )
        )
    loose = None
    tradeoff = None
    if spec.undeclared == "exclude" and block.quantizations:
        loose_spec = spec.model_copy(update={"undeclared": "admit"})
        loose_block, _, _ = _build(loose_spec, snapshot, reg)
        loose = route(loose_block, snapshot.endpoints)
        extra = [t for t in loose.admitted_tags if decision.candidate(t) is None]
        if extra:
            tradeoff = {
                "strict_precision_drops": extra,
                "why": "quantizations admits only declared tags: endpoints tagged unknown or "
                "untagged are dropped even when not known to be requantized",
                "strict": _capacity(decision),
                "ignore_list_alone": _capacity(loose),
            }
    provenance = {
        "model": spec.model,
        "compiler": f"openrouter-probe {__version__}",
        "spec": {"file": Path(spec_file).name if spec_file else None, "sha256": spec.sha256()},
        "snapshot": {
            "source": snapshot.captured_from or snapshot.source,
            "origin": snapshot.origin,
            "taken_at": None
            if snapshot.taken_at is None
            else snapshot.taken_at.isoformat().replace("+00:00", "Z"),
            "sha256": snapshot.sha256,
            "note": snapshot.note,
        },
        "precision": {
            "native": native.native if native else None,
            "source": native.source if native else None,
        },
    }
    return CompiledPolicy(
        model=spec.model,
        provider=block,
        provenance=provenance,
        decisions=_decisions(decision, snapshot.endpoints, ignore_why, verdicts, loose),
        routing={
            "mode": decision.mode,
            "assumptions": list(decision.notes),
            "tools": tool_routing(block),
        },
        tradeoff=tradeoff,
        batch=_compile_batch(spec, snapshot, reg),
    )


# -- the Batch API block ----------------------------------------------------------------------------


def _compile_batch(
    spec: PolicySpec, snapshot: Snapshot, reg: PrecisionRegistry
) -> dict[str, Any] | None:
    """The ``batch:`` block: the ``:batch`` endpoints the spec admits, under the same precision,
    ignore and uptime rules as the sync block, in the order the compiler would use them, and the
    ``provider`` a batch request carries (one endpoint: a batch runs on one provider, and only
    ``only`` and ``allow_fallbacks`` apply). ``None`` when the snapshot has no batch listing."""
    if snapshot.batch is None:
        return None
    pairs = batch_pairs(snapshot.batch, snapshot.endpoints)
    # A :batch row carries no uptime of its own: the sync endpoint of the same deployment's does.
    rows = [
        p.batch
        if p.batch.uptime_last_30m is not None or p.sync is None
        else p.batch.model_copy(
            update={"uptime_last_30m": p.sync.uptime_last_30m, "status": p.sync.status}
        )
        for p in pairs
    ]
    twins = {p.batch.tag: p for p in pairs}
    decision = None
    ignore_why: dict[str, str] = {}
    if rows:
        block, ignore_why, verdicts = _build(spec, snapshot, reg, rows)
        decision = route(block, rows, RequestParams())
    order = [] if decision is None else decision.admitted_tags
    decisions = []
    for e in rows:
        pair = twins[e.tag]
        cand = None if decision is None else decision.candidate(e.tag)
        if cand is not None:
            v = verdicts[e.tag]
            reason = (
                f"admitted (batch position {cand.position}, {pair.status}); "
                f"precision {v.verdict}: {v.reason}"
            )
        else:
            assert decision is not None
            reason = _dropped(decision, e, ignore_why)
        price_in, price_out = e.pricing.prompt_usd_per_m, e.pricing.completion_usd_per_m
        sync_out = None if pair.sync is None else pair.sync.pricing.completion_usd_per_m
        decisions.append(
            {
                "tag": e.tag,
                "provider": e.provider_name,
                "status": pair.status,
                "input_usd_per_m": None if price_in is None else float(price_in),
                "output_usd_per_m": None if price_out is None else float(price_out),
                "sync_output_usd_per_m": None if sync_out is None else float(sync_out),
                "kept": cand is not None,
                "position": None if cand is None else cand.position,
                "reason": reason,
            }
        )
    provider = {"only": [order[0]], "allow_fallbacks": False} if order else None
    return {
        "provider": provider,
        "order": order,
        "note": _batch_note(snapshot, order, decisions),
        "origin": snapshot.batch.origin,
        "decisions": decisions,
    }


def _batch_note(snapshot: Snapshot, order: list[str], decisions: list[dict[str, Any]]) -> str:
    """One line on what the batch block does, or why it admits nothing."""
    if not decisions:
        return f"no :batch endpoint is listed for {snapshot.model}"
    if not order:
        precision = all(
            "quantization" in d["reason"] or "serves " in d["reason"] for d in decisions
        )
        why = "none native" if precision else "none admitted; see decisions"
        return f"no :batch endpoint admitted by this policy ({len(decisions)} listed, {why})"
    first = next(d for d in decisions if d["tag"] == order[0])
    rest = f"; then {', '.join(order[1:])} in a later batch if it refuses" if order[1:] else ""
    status = (
        "a submit was accepted"
        if first["status"] == "accepted"
        else "listed; no submit accepted yet"
    )
    return f"batches run on {order[0]} ({status}){rest}"

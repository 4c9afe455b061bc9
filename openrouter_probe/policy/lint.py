"""Lint a ``provider`` block (compiled or hand-written) against a snapshot.

Each finding names the key, what is wrong and the fix; schema errors do not stop the lint (the keys
that fail validation are reported and left out, the rest is still checked). The codes and the trap
each catches are the table in docs/policy.md ("Lint"); ``lint_batch_block`` lints the
``batch.provider`` block against the model's ``:batch`` endpoints (docs/batch.md).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from openrouter_probe.api.schema import KNOWN_QUANTIZATIONS, Endpoint
from openrouter_probe.errors import PolicyError
from openrouter_probe.rules.provider_block import ProviderBlock
from openrouter_probe.rules.routing import BATCH_PROVIDER_KEYS, RouteDecision, matches, route

if TYPE_CHECKING:
    from openrouter_probe.rules.precision import PrecisionRegistry

__all__ = ["LintFinding", "lint_batch_block", "lint_block"]

#: A max_price below this (USD per million) is taken for a per-token value.
_PER_TOKEN_SUSPECT = 0.01


Severity = Literal["error", "warning"]


@dataclass(frozen=True)
class LintFinding:
    code: str
    severity: Severity
    loc: str
    message: str

    def __str__(self) -> str:
        return f"{self.severity}: {self.loc}: {self.message} [{self.code}]"


def lint_block(
    block: ProviderBlock | Mapping[str, Any],
    endpoints: Sequence[Endpoint],
    *,
    model: str | None = None,
    registry: PrecisionRegistry | None = None,
) -> list[LintFinding]:
    """Return every finding for ``block`` against ``endpoints`` (empty when clean).

    Schema errors come first; the rest of the block is linted as if the invalid keys were absent.
    With ``model`` (the endpoints' model), every admitted endpoint whose precision verdict is not
    ``native`` is a ``not-native`` warning (``registry``: the precision facts, default the
    bundled ones).
    """
    if not isinstance(block, ProviderBlock | Mapping):
        return [
            LintFinding(
                "schema",
                "error",
                "provider",
                "a provider block must be a mapping (or a file with provider: at top level)",
            )
        ]
    raw = block.to_request() if isinstance(block, ProviderBlock) else block
    blk, found = (block, []) if isinstance(block, ProviderBlock) else _valid_part(block)
    found += _slug_findings(raw, endpoints)
    found += _quantization_findings(raw)
    found += _max_price_findings(blk)
    found += _latency_findings(blk)
    found += _exacto_findings(blk)
    found += _options_findings(raw, endpoints)
    decision = route(blk, endpoints)
    found += _admits_nothing(decision, endpoints)
    found += _order_findings(raw, blk, decision, endpoints)
    if model is not None:
        from openrouter_probe.rules.precision import default_registry

        found += _precision_findings(decision, model, registry or default_registry())
    return found


# -- schema ---------------------------------------------------------------------------------------

_LOC_PART = re.compile(r"\.([^.\[]+)|\[(\d+)\]")


def _valid_part(data: Mapping[str, Any]) -> tuple[ProviderBlock, list[LintFinding]]:
    """The block without the keys that fail validation, and a ``schema`` finding for each error.

    Dropping a key never makes a block admit fewer endpoints, so ``admits-nothing`` on what is
    left still holds for the whole block.
    """
    try:
        return ProviderBlock.parse(data), []
    except PolicyError as exc:
        errors = exc.errors
    found = [LintFinding("schema", "error", loc, msg) for loc, msg in errors]
    pruned = copy.deepcopy(dict(data))
    for loc, _ in errors:
        _drop(pruned, [a or int(b) for a, b in _LOC_PART.findall(loc.removeprefix("provider"))])
    try:
        return ProviderBlock.parse(pruned), found
    except PolicyError:  # an error located where pruning cannot reach: lint the lists alone
        return ProviderBlock(), found


def _drop(data: dict[str, Any], path: list[str | int]) -> None:
    """Remove the value at ``path``; an error inside a list drops the whole list (its entries are
    linted from the raw block, so their indices must not shift)."""
    if not path or path[0] not in data:
        return
    if len(path) > 1 and isinstance(data[path[0]], dict) and isinstance(path[1], str):
        _drop(data[path[0]], path[1:])
        if data[path[0]]:
            return
    data.pop(path[0], None)


# -- slugs and tags -------------------------------------------------------------------------------


def _strings(raw: Mapping[str, Any], key: str) -> Iterator[tuple[int, str]]:
    """The string entries of a list-valued key with their indices (others are schema errors)."""
    value = raw.get(key)
    if isinstance(value, list):
        yield from ((i, v) for i, v in enumerate(value) if isinstance(v, str) and v)


def _suggest(entry: str, endpoints: Sequence[Endpoint]) -> str | None:
    low = entry.lower()
    for e in endpoints:
        name = e.provider_name.lower()
        if low in (name, e.tag, e.slug) or low.replace(" ", "") == name.replace(" ", ""):
            return e.tag if "/" in low else e.slug
    return None


def _slug_findings(raw: Mapping[str, Any], endpoints: Sequence[Endpoint]) -> list[LintFinding]:
    names = {e.provider_name for e in endpoints}
    found = []
    for key in ("order", "only", "ignore"):
        for i, entry in _strings(raw, key):
            loc = f"provider.{key}[{i}]"
            if entry != entry.lower() or entry in names:
                found.append(_display_name(entry, loc, names, endpoints))
                continue
            hits = [e for e in endpoints if matches(entry, e)]
            if not hits:
                found.append(
                    LintFinding(
                        "no-match",
                        "warning" if key == "ignore" else "error",
                        loc,
                        f"{entry!r} matches no endpoint of this model (tags: "
                        f"{', '.join(sorted(e.tag for e in endpoints))})",
                    )
                )
            elif key != "ignore" and "/" not in entry and len(hits) > 1:
                found.append(
                    LintFinding(
                        "base-slug-variants",
                        "warning",
                        loc,
                        f"base slug {entry!r} admits {len(hits)} endpoints "
                        f"({', '.join(e.tag for e in hits)}); name the full tag of the one you mean",
                    )
                )
    return found


def _display_name(
    entry: str, loc: str, names: set[str], endpoints: Sequence[Endpoint]
) -> LintFinding:
    fix = _suggest(entry, endpoints) or entry.lower().replace(" ", "-")
    kind = "a display name" if entry in names else "not lowercase"
    return LintFinding(
        "display-name",
        "error",
        loc,
        f"{entry!r} is {kind}: OpenRouter matches lowercase slugs and silently drops it; "
        f"use {fix!r}",
    )


def _options_findings(raw: Mapping[str, Any], endpoints: Sequence[Endpoint]) -> list[LintFinding]:
    """``options`` keys are provider slugs (a few are tags, ``anthropic/2``): check each one."""
    options = raw.get("options")
    if not isinstance(options, Mapping):
        return []
    known = sorted({e.slug for e in endpoints} | {e.tag for e in endpoints})
    found = []
    for key in options:
        if not isinstance(key, str) or key in known:
            continue
        loc = f"provider.options.{key}"
        import difflib  # a key that is no slug: rare, and a run lints every policy

        fix = _suggest(key, endpoints) or next(
            iter(difflib.get_close_matches(key.lower(), known, n=1, cutoff=0.6)), None
        )
        hint = (
            f"; use {fix!r}"
            if fix
            else f" (slugs: {', '.join(sorted({e.slug for e in endpoints}))})"
        )
        error = key != key.lower() or " " in key
        said = (
            "is not a provider slug: OpenRouter silently drops these options"
            if error
            else "is no provider of this model: these options are never sent"
        )
        severity: Severity = "error" if error else "warning"
        found.append(LintFinding("options-slug", severity, loc, f"{key!r} {said}{hint}"))
    return found


# -- values ---------------------------------------------------------------------------------------


def _quantization_findings(raw: Mapping[str, Any]) -> list[LintFinding]:
    return [
        LintFinding(
            "unknown-quantization",
            "error",
            f"provider.quantizations[{i}]",
            f"{q!r} is not a quantization OpenRouter knows ({', '.join(KNOWN_QUANTIZATIONS)})",
        )
        for i, q in _strings(raw, "quantizations")
        if q not in KNOWN_QUANTIZATIONS
    ]


def _max_price_findings(blk: ProviderBlock) -> list[LintFinding]:
    found = []
    for key in ("prompt", "completion"):
        limit = blk.max_price.limit(key) if blk.max_price is not None else None
        if limit is not None and 0 < limit < _PER_TOKEN_SUSPECT:
            found.append(
                LintFinding(
                    "max-price-per-token",
                    "error",
                    f"provider.max_price.{key}",
                    f"{limit:f} looks like USD per token; max_price is USD per million "
                    f"tokens: use {limit * 1_000_000:f}".rstrip("0").rstrip("."),
                )
            )
    return found


def _latency_findings(blk: ProviderBlock) -> list[LintFinding]:
    lat = blk.preferred_max_latency
    if lat is None:
        return []
    bare = not isinstance(lat, dict)
    cutoffs = {"p50": lat} if not isinstance(lat, dict) else lat
    return [
        LintFinding(
            "latency-in-ms",
            "warning",
            "provider.preferred_max_latency" + ("" if bare else f".{pct}"),
            f"{seconds:g} looks like milliseconds; preferred_max_latency is in seconds "
            f"(use {seconds / 1000:g})",
        )
        for pct, seconds in cutoffs.items()
        if seconds > 100
    ]


def _exacto_findings(blk: ProviderBlock) -> list[LintFinding]:
    if blk.sort_key != "exacto":
        return []
    return [
        LintFinding(
            "exacto",
            "warning",
            "provider.sort",
            "'exacto' orders every request by throughput, tool-call error rate and benchmark "
            "scores, not by price: traffic goes to dearer endpoints and a blended price is an "
            "estimate (use 'price' to keep price order; requests with tools get Auto Exacto "
            "anyway unless sort is 'price')",
        )
    ]


# -- what the routing model says about the block --------------------------------------------------


def _admits_nothing(decision: RouteDecision, endpoints: Sequence[Endpoint]) -> list[LintFinding]:
    if decision.candidates:
        return []
    reasons = sorted({x.reason for x in decision.excluded})
    return [
        LintFinding(
            "admits-nothing",
            "error",
            "provider",
            f"admits none of the {len(endpoints)} endpoints (excluded by: "
            f"{', '.join(reasons)}): every request would fail with 404",
        )
    ]


def _order_findings(
    raw: Mapping[str, Any],
    blk: ProviderBlock,
    decision: RouteDecision,
    endpoints: Sequence[Endpoint],
) -> list[LintFinding]:
    """Why an ordered entry reaches nothing comes from the routing model, not a second copy of it.

    Entries are read from the raw block, so they are checked even when another entry of ``order``
    is a schema error (``order`` does not decide which endpoints are admitted)."""
    found = []
    for i, entry in _strings(raw, "order"):
        hits = [e for e in endpoints if matches(entry, e)]
        excluded = [x for e in hits if (x := decision.exclusion(e.tag)) is not None]
        ignored_by = [
            x.detail.removeprefix("ignored by ") for x in excluded if x.reason == "ignore"
        ]
        loc = f"provider.order[{i}]"
        if entry in (blk.ignore or []) or (hits and len(ignored_by) == len(hits)):
            by = ignored_by[0] if ignored_by else repr(entry)
            found.append(
                LintFinding(
                    "order-ignored",
                    "error",
                    loc,
                    f"{entry!r} is also ignored by {by}: remove one of them",
                )
            )
        elif hits and len(excluded) == len(hits) and decision.candidates:
            why = "; ".join(f"{x.endpoint.tag}: {x.detail}" for x in excluded)
            found.append(
                LintFinding(
                    "order-excluded",
                    "warning",
                    loc,
                    f"{entry!r} is excluded by the block's filters ({why})",
                )
            )
    return found


def _precision_findings(
    decision: RouteDecision, model: str, registry: PrecisionRegistry
) -> list[LintFinding]:
    """Every admitted endpoint whose verdict is not native, named with why (the registry's
    reason). Nothing when the registry does not know the model's native precision."""
    native = registry.native_for(model)
    if native is None:
        return []
    found = []
    for candidate in decision.candidates:
        endpoint = candidate.endpoint
        verdict = registry.verdict(model, endpoint)
        if verdict.verdict == "native":
            continue
        fix = f"ignore: [{endpoint.slug}]"
        if endpoint.quantization != native.native:  # a tag that says native hides a fact
            fix += f" or quantizations: [{native.native}]"
        found.append(
            LintFinding(
                "not-native",
                "warning",
                "provider",
                f"admits {endpoint.tag} ({endpoint.provider_name}), {verdict.verdict}: "
                f"{verdict.reason}; {model} is released in {native.native}. Exclude it "
                f"({fix}) unless you mean it",
            )
        )
    return found


# -- the Batch API block --------------------------------------------------------------------------


def lint_batch_block(block: Any, batch_endpoints: Sequence[Endpoint]) -> list[LintFinding]:
    """Return every finding for a ``batch.provider`` block against the ``:batch`` endpoints."""
    where = "batch.provider"
    if not isinstance(block, Mapping):
        return [LintFinding("schema", "error", where, "a batch provider block must be a mapping")]
    found = [
        LintFinding(
            "batch-unsupported-key",
            "error",
            f"{where}.{key}",
            f"a batch honours only provider.only and allow_fallbacks; drop {key}",
        )
        for key in block
        if key not in BATCH_PROVIDER_KEYS
    ]
    only = block.get("only")
    entries = [str(x) for x in only] if isinstance(only, list) else []
    if not batch_endpoints:
        found.append(
            LintFinding(
                "batch-no-endpoint",
                "error",
                where,
                "the model lists no :batch endpoint: a submit is refused (400); run it sync",
            )
        )
        return found
    listed = ", ".join(e.tag for e in batch_endpoints)
    for index, entry in enumerate(entries):
        if not any(matches(entry, e) for e in batch_endpoints):
            found.append(
                LintFinding(
                    "batch-no-endpoint",
                    "error",
                    f"{where}.only[{index}]",
                    f"{entry!r} matches no :batch endpoint (the submit is refused with 404); "
                    f"listed: {listed}",
                )
            )
    if len(entries) > 1:
        found.append(
            LintFinding(
                "batch-not-pinned",
                "warning",
                f"{where}.only",
                "a batch runs on one provider and OpenRouter picks the cheapest of these; "
                "pin one: only: [TAG]",
            )
        )
    return found

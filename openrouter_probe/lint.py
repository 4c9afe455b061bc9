"""Lint a ``provider`` block (compiled or hand-written) against a snapshot.

Each finding names the key, what is wrong and the fix. The traps it knows:

- ``display-name``: a display name or mixed case where a lowercase slug belongs (OpenRouter matches
  slugs and silently drops what does not match);
- ``no-match``: a slug or tag that matches no endpoint of the model;
- ``base-slug-variants``: a base slug in ``order``/``only`` that also admits other variants
  (``deepinfra`` admits ``deepinfra/fp4`` too);
- ``admits-nothing``: the block admits no endpoint (every request would fail with 404);
- ``max-price-per-token``: ``max_price`` values that look like USD per token (it is per million);
- ``order-ignored``: an ``order`` entry that ``ignore`` also matches;
- ``order-excluded``: an ``order`` entry whose endpoints other filters exclude;
- ``unknown-quantization``: a ``quantizations`` value OpenRouter does not know;
- ``latency-in-ms``: ``preferred_max_latency`` that looks like milliseconds (it is seconds);
- ``schema``: a key OpenRouter does not accept, or a value of the wrong type.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from openrouter_probe.errors import PolicyError
from openrouter_probe.routing import ProviderBlock, matches, route
from openrouter_probe.schema import KNOWN_QUANTIZATIONS, Endpoint

__all__ = ["LintFinding", "lint_block"]

#: A max_price below this (USD per million) is taken for a per-token value.
_PER_TOKEN_SUSPECT = 0.01


@dataclass(frozen=True)
class LintFinding:
    code: str
    severity: Literal["error", "warning"]
    loc: str
    message: str

    def __str__(self) -> str:
        return f"{self.severity}: {self.loc}: {self.message} [{self.code}]"


def _suggest(entry: str, endpoints: Sequence[Endpoint]) -> str | None:
    low = entry.lower()
    for e in endpoints:
        if low in (e.provider_name.lower(), e.tag, e.slug) or low.replace(
            " ", ""
        ) == e.provider_name.lower().replace(" ", ""):
            return e.tag if "/" in low else e.slug
    return None


def lint_block(
    block: ProviderBlock | Mapping[str, Any], endpoints: Sequence[Endpoint]
) -> list[LintFinding]:
    """Return every finding for ``block`` against ``endpoints`` (empty when clean)."""
    if isinstance(block, ProviderBlock):
        blk = block
    else:
        try:
            blk = ProviderBlock.parse(block)
        except PolicyError as exc:
            return [LintFinding("schema", "error", loc, msg) for loc, msg in exc.errors] or [
                LintFinding("schema", "error", "provider", str(exc))
            ]
    found: list[LintFinding] = []
    add = found.append
    names = {e.provider_name for e in endpoints}
    for key in ("order", "only", "ignore"):
        for i, entry in enumerate(getattr(blk, key) or []):
            loc = f"provider.{key}[{i}]"
            if entry != entry.lower() or entry in names:
                fix = _suggest(entry, endpoints) or entry.lower().replace(" ", "-")
                kind = "a display name" if entry in names else "not lowercase"
                add(
                    LintFinding(
                        "display-name",
                        "error",
                        loc,
                        f"{entry!r} is {kind}: OpenRouter matches lowercase slugs and silently "
                        f"drops it; use {fix!r}",
                    )
                )
                continue
            hits = [e for e in endpoints if matches(entry, e)]
            if not hits:
                add(
                    LintFinding(
                        "no-match",
                        "warning" if key == "ignore" else "error",
                        loc,
                        f"{entry!r} matches no endpoint of this model (tags: "
                        f"{', '.join(sorted(e.tag for e in endpoints))})",
                    )
                )
            elif key != "ignore" and "/" not in entry and len(hits) > 1:
                tags = ", ".join(e.tag for e in hits)
                add(
                    LintFinding(
                        "base-slug-variants",
                        "warning",
                        loc,
                        f"base slug {entry!r} admits {len(hits)} endpoints ({tags}); name the "
                        "full tag of the one you mean",
                    )
                )
    for i, q in enumerate(blk.quantizations or []):
        if q not in KNOWN_QUANTIZATIONS:
            add(
                LintFinding(
                    "unknown-quantization",
                    "error",
                    f"provider.quantizations[{i}]",
                    f"{q!r} is not a quantization OpenRouter knows "
                    f"({', '.join(KNOWN_QUANTIZATIONS)})",
                )
            )
    if blk.max_price is not None:
        for key in ("prompt", "completion"):
            limit = blk.max_price.limit(key)
            if limit is not None and 0 < limit < _PER_TOKEN_SUSPECT:
                add(
                    LintFinding(
                        "max-price-per-token",
                        "error",
                        f"provider.max_price.{key}",
                        f"{limit:f} looks like USD per token; max_price is USD per million "
                        f"tokens: use {limit * 1_000_000:f}".rstrip("0").rstrip("."),
                    )
                )
    lat = blk.preferred_max_latency
    cutoffs = {"p50": lat} if isinstance(lat, float | int) else dict(lat or {})
    for pct, seconds in cutoffs.items():
        if seconds > 100:
            where = "provider.preferred_max_latency" + (
                "" if isinstance(lat, float | int) else f".{pct}"
            )
            add(
                LintFinding(
                    "latency-in-ms",
                    "warning",
                    where,
                    f"{seconds:g} looks like milliseconds; preferred_max_latency is in seconds "
                    f"(use {seconds / 1000:g})",
                )
            )
    decision = route(blk, endpoints)
    if not decision.candidates:
        reasons = sorted({x.reason for x in decision.excluded})
        add(
            LintFinding(
                "admits-nothing",
                "error",
                "provider",
                f"admits none of the {len(endpoints)} endpoints (excluded by: "
                f"{', '.join(reasons)}): every request would fail with 404",
            )
        )
    # Why an ordered entry reaches nothing comes from the routing model, not a second copy of it.
    for i, entry in enumerate(blk.order or []):
        hits = [e for e in endpoints if matches(entry, e)]
        excluded = [x for e in hits if (x := decision.exclusion(e.tag)) is not None]
        ignored_by = [
            x.detail.removeprefix("ignored by ") for x in excluded if x.reason == "ignore"
        ]
        if entry in (blk.ignore or []) or (hits and len(ignored_by) == len(hits)):
            by = ignored_by[0] if ignored_by else repr(entry)
            add(
                LintFinding(
                    "order-ignored",
                    "error",
                    f"provider.order[{i}]",
                    f"{entry!r} is also ignored by {by}: remove one of them",
                )
            )
        elif hits and len(excluded) == len(hits) and decision.candidates:
            why = "; ".join(f"{x.endpoint.tag}: {x.detail}" for x in excluded)
            add(
                LintFinding(
                    "order-excluded",
                    "warning",
                    f"provider.order[{i}]",
                    f"{entry!r} is excluded by the block's filters ({why})",
                )
            )
    return found

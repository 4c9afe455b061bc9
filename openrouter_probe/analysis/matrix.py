"""The matrix: one tidy pandas row per endpoint (``MATRIX_COLUMNS``, units in the names), and a
history view across snapshots of one model saying what changed (``HISTORY_COLUMNS``);
``docs/analysis.md``, "The matrix". pandas is imported inside the functions: importing this module
stays cheap.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from itertools import pairwise
from typing import TYPE_CHECKING, Any

from openrouter_probe.errors import Message, SnapshotError
from openrouter_probe.rules.batch import BatchPair, batch_pairs
from openrouter_probe.rules.precision import PrecisionRegistry, default_registry

if TYPE_CHECKING:
    import pandas as pd

    from openrouter_probe.rules.snapshot import Snapshot

__all__ = [
    "HISTORY_COLUMNS",
    "MATRIX_COLUMNS",
    "build_matrix",
    "matrix_history",
]

#: The matrix's columns, in order, with their meaning and unit.
MATRIX_COLUMNS: dict[str, str] = {
    "model": "the model id the snapshot was taken for",
    "taken_at": "when the snapshot was taken (UTC timestamp)",
    "provider": "the provider's display name (provider_name)",
    "slug": "the provider's base routing slug (the tag before '/')",
    "tag": "the exact routing tag, slug[/variant]",
    "quantization_declared": "the quantization the provider declares (null: none declared)",
    "precision_effective": "what the endpoint serves: a registry fact, else the declared tag",
    "precision_native": "the model's native release precision (null: not in the registry)",
    "verdict": "native | upcast | requantized | undeclared | unassessed",
    "verdict_reason": "one sentence saying why",
    "measured": "the latest measured verdict from `verify` evidence in the precision registry: "
    "consistent | differs | inconclusive (n=paired prompts, date); null: never measured",
    "input_usd_per_m": "input (prompt) price, USD per million tokens, discount applied",
    "output_usd_per_m": "output price, USD per million tokens (reasoning included), discount applied",
    "reasoning_usd_per_m": "reasoning-token price, USD per million: internal_reasoning where "
    "listed and not zero, otherwise the output price (reasoning is billed as output; a listed 0 "
    "is not free reasoning)",
    "reasoning_price_listed": "whether the endpoint lists its own non-zero internal_reasoning price",
    "reasoning_price_rule": "which rule priced reasoning: 'listed', 'listed 0: completion rate' or "
    "'not listed: completion rate'",
    "cache_read_usd_per_m": "cached-input read price, USD per million tokens (null: not listed)",
    "discount_fraction": "the discount already applied to every price (0..1)",
    "batch_input_usd_per_m": "input price of the endpoint's :batch row (the Batch API), USD per "
    "million tokens (null: no :batch row, or the snapshot was not probed for them)",
    "batch_output_usd_per_m": "output price of the endpoint's :batch row, USD per million tokens",
    "batch_status": "listed (a :batch row) | accepted (a submit to it was accepted) | null",
    "uptime_5m_pct": "uptime over the last 5 minutes, percent",
    "uptime_30m_pct": "uptime over the last 30 minutes, percent",
    "uptime_1d_pct": "uptime over the last day, percent",
    "status": "OpenRouter's status code (0 ok; negative: degraded or worse)",
    "latency_p50_ms": "time to first token, median over 30 minutes, milliseconds",
    "latency_p90_ms": "time to first token, 90th percentile over 30 minutes, milliseconds",
    "throughput_p50_tps": "output tokens per second per request, median over 30 minutes",
    "throughput_p90_tps": "output tokens per second per request, 90th percentile over 30 minutes",
    "requests_30m": "requests behind the 30-minute uptime and speed figures "
    "(perf_last_30m_by_workload request_count, summed over workloads; null: not given)",
    "context_tokens": "context length, tokens",
    "max_output_tokens": "largest max_tokens the endpoint accepts, tokens",
    "supports_reasoning": "'reasoning' is in supported_parameters",
    "supports_tools": "'tools' is in supported_parameters",
    "supports_response_format": "'response_format' is in supported_parameters",
}

#: The history view's columns: the matrix's identity and tracked fields, then what changed.
HISTORY_COLUMNS: dict[str, str] = {
    "taken_at": "when the snapshot was taken (UTC timestamp)",
    "provider": "the provider's display name",
    "slug": "the provider's base routing slug",
    "tag": "the exact routing tag at that time",
    "quantization_declared": "the declared quantization at that time",
    "verdict": "the precision verdict at that time",
    "input_usd_per_m": "input price, USD per million tokens",
    "output_usd_per_m": "output price, USD per million tokens",
    "status": "OpenRouter's status code",
    "uptime_30m_pct": "uptime over the last 30 minutes, percent",
    "change": "first (earliest snapshot), new, gone, changed or unchanged",
    "changes": "what changed since the previous snapshot, e.g. 'output_usd_per_m $2.20 -> $2.50'",
}

# Fields whose change the history reports, in the order it reports them.
_TRACKED = (
    "tag",
    "quantization_declared",
    "input_usd_per_m",
    "output_usd_per_m",
    "cache_read_usd_per_m",
    "status",
)

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

_FLOAT_COLUMNS = (
    "input_usd_per_m",
    "output_usd_per_m",
    "reasoning_usd_per_m",
    "cache_read_usd_per_m",
    "discount_fraction",
    "batch_input_usd_per_m",
    "batch_output_usd_per_m",
    "uptime_5m_pct",
    "uptime_30m_pct",
    "uptime_1d_pct",
    "latency_p50_ms",
    "latency_p90_ms",
    "throughput_p50_tps",
    "throughput_p90_tps",
)
_INT_COLUMNS = ("status", "context_tokens", "max_output_tokens", "requests_30m")
_BOOL_COLUMNS = (
    "reasoning_price_listed",
    "supports_reasoning",
    "supports_tools",
    "supports_response_format",
)
_PRICE_KEYS = {
    "input_usd_per_m": "prompt",
    "output_usd_per_m": "completion",
    "cache_read_usd_per_m": "input_cache_read",
}


def _as_snapshots(snapshots: Snapshot | Iterable[Snapshot]) -> list[Snapshot]:
    from openrouter_probe.rules.snapshot import Snapshot

    return [snapshots] if isinstance(snapshots, Snapshot) else list(snapshots)


def _num(value: Any) -> float:
    """A figure as a float; NaN when absent."""
    return float("nan") if value is None else float(value)


def _add_batch_cells(cols: dict[str, list[Any]], twin: BatchPair | None) -> None:
    """The ``batch_*`` cells of one row: its ``:batch`` row's prices and status, or none."""
    pricing = None if twin is None else twin.batch.pricing
    cols["batch_input_usd_per_m"].append(
        _num(None if pricing is None else pricing.prompt_usd_per_m)
    )
    cols["batch_output_usd_per_m"].append(
        _num(None if pricing is None else pricing.completion_usd_per_m)
    )
    cols["batch_status"].append(None if twin is None else twin.status)


def build_matrix(
    snapshots: Snapshot | Iterable[Snapshot], *, registry: PrecisionRegistry | None = None
) -> pd.DataFrame:
    """Return one row per endpoint of ``snapshots`` with the columns of ``MATRIX_COLUMNS``.

    ``snapshots`` is one snapshot or several (of one model or many: a whole models list); rows keep
    each snapshot's endpoint order. ``registry`` judges precision (the default registry when
    omitted). Missing numbers are NaN (nullable integers for ``status`` and the token limits).

    Example::

        frame = build_matrix(bundled_snapshot("moonshotai/kimi-k2.5"))
        frame.loc[frame.verdict == "native", ["tag", "output_usd_per_m"]]
    """
    import pandas as pd

    reg = registry if registry is not None else default_registry()
    # Built column by column (no per-row frames or appends): one DataFrame constructor at the end.
    cols: dict[str, list[Any]] = {name: [] for name in MATRIX_COLUMNS}
    for snap in _as_snapshots(snapshots):
        model = snap.model
        taken_at = snap.taken_at
        twins = {p.sync.tag: p for p in batch_pairs(snap.batch, snap.endpoints) if p.sync}
        for e in snap.endpoints:
            verdict = reg.verdict(model, e)
            pricing = e.pricing
            lat, thr = e.latency_last_30m, e.throughput_last_30m
            params = e.supported_parameters
            cols["model"].append(model)
            cols["taken_at"].append(taken_at)
            cols["provider"].append(e.provider_name)
            cols["slug"].append(e.slug)
            cols["tag"].append(e.tag)
            cols["quantization_declared"].append(e.quantization)
            cols["precision_effective"].append(verdict.effective)
            cols["precision_native"].append(verdict.native)
            cols["verdict"].append(verdict.verdict)
            cols["verdict_reason"].append(verdict.reason)
            cols["measured"].append(None if verdict.measured is None else str(verdict.measured))
            for column, key in _PRICE_KEYS.items():
                cols[column].append(_num(pricing.usd_per_m(key)))
            reasoning = _num(pricing.listed_reasoning_usd_per_m)
            listed = reasoning == reasoning  # NaN != NaN: listed means a usable, non-zero number
            cols["reasoning_usd_per_m"].append(
                reasoning if listed else cols["output_usd_per_m"][-1]
            )
            cols["reasoning_price_listed"].append(listed)
            cols["reasoning_price_rule"].append(pricing.reasoning_price_rule)
            cols["discount_fraction"].append(float(pricing.discount or 0))
            _add_batch_cells(cols, twins.get(e.tag))
            cols["uptime_5m_pct"].append(_num(e.uptime_last_5m))
            cols["uptime_30m_pct"].append(_num(e.uptime_last_30m))
            cols["uptime_1d_pct"].append(_num(e.uptime_last_1d))
            cols["status"].append(e.status)
            cols["latency_p50_ms"].append(_num(lat.p50 if lat else None))
            cols["latency_p90_ms"].append(_num(lat.p90 if lat else None))
            cols["throughput_p50_tps"].append(_num(thr.p50 if thr else None))
            cols["throughput_p90_tps"].append(_num(thr.p90 if thr else None))
            cols["requests_30m"].append(e.request_count_30m)
            cols["context_tokens"].append(e.context_length)
            cols["max_output_tokens"].append(e.max_completion_tokens)
            cols["supports_reasoning"].append("reasoning" in params)
            cols["supports_tools"].append("tools" in params)
            cols["supports_response_format"].append("response_format" in params)

    data: dict[str, Any] = {}
    for name, values in cols.items():
        if name in _FLOAT_COLUMNS:
            data[name] = pd.array(values, dtype="float64")
        elif name in _INT_COLUMNS:
            data[name] = pd.array(values, dtype="Int64")
        elif name in _BOOL_COLUMNS:
            data[name] = pd.array(values, dtype="bool")
        elif name == "taken_at":
            data[name] = pd.to_datetime(values, utc=True)
        else:
            data[name] = pd.array(values, dtype="object")
    return pd.DataFrame(data, columns=list(MATRIX_COLUMNS))


def _history_keys(frame: pd.DataFrame) -> pd.Series[str]:
    """Identify an endpoint across snapshots: its slug when the provider has one endpoint in that
    snapshot (so a tag change such as ``deepinfra/int4`` -> ``deepinfra/fp8`` reads as a change,
    not as one endpoint gone and another new), otherwise its full tag."""
    per_slug = frame.groupby(["taken_at", "slug"])["tag"].transform("size")
    return frame["slug"].where(per_slug == 1, frame["tag"]).astype(object)


def _describe(before: Any, after: Any, field: str = "") -> str | None:
    def same(a: Any, b: Any) -> bool:
        import pandas as pd

        a_na, b_na = pd.isna(a), pd.isna(b)
        return bool(a_na and b_na) or (not a_na and not b_na and a == b)

    return None if same(before, after) else f"{_show(before, field)} -> {_show(after, field)}"


def _show(value: Any, field: str = "") -> str:
    import pandas as pd

    from openrouter_probe.rules.quantities import format_usd

    if value is None or (not isinstance(value, str) and pd.isna(value)):
        return "null"
    if field.endswith("_usd_per_m"):
        return format_usd(value)
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def _iso(when: datetime | None) -> str:
    return "no time" if when is None else when.isoformat().replace("+00:00", "Z")


def _history_points(given: list[Snapshot]) -> list[Snapshot]:
    """The snapshots of a history in time order, neighbours with equal data merged; checked to be
    of one model, dated, and not two different ones at the same time."""
    if not given:
        raise SnapshotError("matrix_history needs at least one snapshot")
    models = sorted({s.model for s in given})
    if len(models) > 1:
        raise SnapshotError(
            f"model mismatch: a history is of one model, these snapshots hold {', '.join(models)}; "
            "pass snapshots of one model"
        )
    for snap in given:
        if snap.taken_at is None:
            raise SnapshotError(
                Message(
                    "history-undated",
                    "{origin:s} has no capture time (a raw /endpoints body), so it has no place in "
                    "a history; save dated snapshots with {@save_snapshot}",
                    origin=str(snap.origin),
                )
            )
    snaps: list[Snapshot] = []
    for snap in sorted(given, key=lambda s: s.taken_at or _EPOCH):
        # Equal data next to each other in time is one point; equal data later (a price that
        # goes A -> B -> A) is a change back, and is kept.
        if snaps and snaps[-1].sha256 == snap.sha256:
            continue
        snaps.append(snap)
    for a, b in pairwise(snaps):
        if a.taken_at == b.taken_at:
            raise SnapshotError(
                Message(
                    "history-same-time",
                    "{a:s} and {b:s} differ but carry the same time ({at:s}); a history needs "
                    "dated snapshots: save them with {@save_snapshot}",
                    a=str(a.origin),
                    b=str(b.origin),
                    at=_iso(a.taken_at),
                )
            )
    return snaps


def _compared(current: pd.DataFrame, previous: pd.DataFrame, when: Any) -> pd.DataFrame:
    """``current`` with ``change``/``changes`` against ``previous``, plus rows for endpoints gone."""
    import pandas as pd

    # Plain dicts: a row lookup per endpoint, fine at the size of one model's endpoints.
    before: dict[Any, dict[str, Any]] = {
        key: dict(zip(previous.columns, values, strict=True))
        for key, values in zip(previous.index, previous.itertuples(index=False), strict=True)
    }
    change: list[str] = []
    detail: list[str | None] = []
    for key, values in zip(current.index, current.itertuples(index=False), strict=True):
        row = dict(zip(current.columns, values, strict=True))
        old = before.get(key)
        if old is None:
            change.append("new")
            detail.append(None)
            continue
        moved = [
            f"{name} {text}"
            for name in _TRACKED
            if (text := _describe(old[name], row[name], name)) is not None
        ]
        change.append("changed" if moved else "unchanged")
        detail.append("; ".join(moved) or None)
    current["change"] = change
    current["changes"] = detail
    gone = previous.loc[~previous.index.isin(current.index)].copy()
    if len(gone):
        for column in ("input_usd_per_m", "output_usd_per_m", "uptime_30m_pct"):
            gone[column] = float("nan")
        gone["status"] = pd.NA
        gone["taken_at"] = when
        gone["change"] = "gone"
        gone["changes"] = "no longer listed"
        current = pd.concat([current, gone])
    return current


def matrix_history(
    snapshots: Iterable[Snapshot], *, registry: PrecisionRegistry | None = None
) -> pd.DataFrame:
    """Line up several snapshots of one model and say what changed, endpoint by endpoint.

    Rows are sorted by ``taken_at`` then ``provider`` and ``tag``; the columns are
    ``HISTORY_COLUMNS``. ``change`` is ``first`` in the earliest snapshot, then ``new``, ``gone``
    (a row with the endpoint's last known identity and no figures), ``changed`` or ``unchanged``;
    ``changes`` lists each tracked field that moved (tag, declared quantization, input, output and
    cache-read prices, status) as ``field old -> new``.

    Every dated snapshot is a point in time; only neighbours in time with equal data are merged,
    so a price that goes A -> B -> A shows A as current. Raises ``SnapshotError`` when the
    snapshots are of different models, none is given, one has no capture time, or two with
    different data carry the same time.
    """
    import pandas as pd

    snaps = _history_points(_as_snapshots(snapshots))
    frame = build_matrix(snaps, registry=registry)
    frame["key"] = _history_keys(frame)
    times = list(pd.to_datetime([s.taken_at or _EPOCH for s in snaps], utc=True).unique())
    by_time = {t: grp.set_index("key") for t, grp in frame.groupby("taken_at", sort=True)}
    pieces: list[pd.DataFrame] = []
    previous: pd.DataFrame | None = None
    for when in times:
        current = by_time.get(when, frame.iloc[0:0].set_index("key"))
        current = current.copy()
        if previous is None:
            current["change"] = "first"
            current["changes"] = None
        else:
            current = _compared(current, previous, when)
        pieces.append(current)
        previous = current.loc[current["change"] != "gone"]
    out = pd.concat(pieces).reset_index(drop=True)
    out["changes"] = out["changes"].astype(object)
    out = out.sort_values(["taken_at", "provider", "tag"], kind="stable").reset_index(drop=True)
    return out[list(HISTORY_COLUMNS)]

"""``openrouter-probe endpoints`` and ``models``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from openrouter_probe.cli._common import cli, load_snapshot_for, note
from openrouter_probe.cli.options import format_option, snapshot_options
from openrouter_probe.cli.tables import render_rows

if TYPE_CHECKING:
    from openrouter_probe.api.listings import ModelsList


def _f(value: Any) -> float | None:
    return None if value is None else float(value)


def _endpoint_row(e: Any, twins: dict[str, Any] | None) -> dict[str, Any]:
    """A flat row for the endpoints table/CSV, with units in the column names; ``twins`` (each
    sync tag's ``:batch`` endpoint) adds the batch price beside the sync one."""
    lat = e.latency_last_30m
    thr = e.throughput_last_30m
    twin = None if twins is None else twins.get(e.tag)
    batch = None if twin is None else _f(twin.pricing.completion_usd_per_m)
    return {
        "provider": e.provider_name,
        "tag": e.tag,
        "quantization": e.quantization,
        "status": e.status,
        "input_usd_per_m": _f(e.pricing.prompt_usd_per_m),
        "output_usd_per_m": _f(e.pricing.completion_usd_per_m),
        **({} if twins is None else {"batch_output_usd_per_m": batch}),
        "cache_read_usd_per_m": _f(e.pricing.cache_read_usd_per_m),
        "uptime_30m_pct": e.uptime_last_30m,
        "latency_p50_ms": lat.p50 if lat else None,
        "throughput_p50_tps": thr.p50 if thr else None,
        "context_tokens": e.context_length,
        "max_output_tokens": e.max_completion_tokens,
    }


# What a short terminal loses first: limits, cache price, status codes, then speed and uptime.
_ENDPOINTS_DROP_ORDER = (
    "max_output_tokens",
    "context_tokens",
    "cache_read_usd_per_m",
    "status",
    "latency_p50_ms",
    "quantization",
    "throughput_p50_tps",
    "provider",
)


@cli.command()
@click.argument("model")
@snapshot_options
@click.option(
    "--save",
    type=click.Path(dir_okay=False, writable=True),
    help="Save the snapshot (atomically; never over the --snapshot it was read from).",
)
@format_option("csv")
def endpoints(model: str, offline: bool, snapshot: str | None, save: str | None, fmt: str) -> None:
    """Show MODEL's endpoints: provider, tag, quantization, prices per million, uptime, speed.

    MODEL is an OpenRouter id (moonshotai/kimi-k2.5) or canonical slug. --format json prints the
    endpoints with OpenRouter's own field names.
    """
    snap = load_snapshot_for(model, offline, snapshot)
    if save:
        read_from = (snapshot,) if snapshot and snapshot != "bundled" else ()
        note(f"saved {snap.save(save, inputs=read_from)}")
    twins = None
    if snap.batch is not None:  # the :batch price beside the sync one (older snapshots: none)
        from openrouter_probe.rules.batch import batch_pairs, describe_batch

        twins = {p.sync.tag: p.batch for p in batch_pairs(snap.batch, snap.endpoints) if p.sync}
        note(describe_batch(snap.batch, snap.model))
    rows = [_endpoint_row(e, twins) for e in snap.endpoints]
    render_rows(
        rows,
        fmt,
        title=f"{snap.model} endpoints (prices USD per 1M tokens)",
        json_rows=[e.to_json_dict() for e in snap.endpoints],
        drop_order=_ENDPOINTS_DROP_ORDER,
    )


@cli.command()
@click.option(
    "--input",
    "input_path",
    type=click.Path(exists=True, dir_okay=False),
    help="Read a saved GET /models body (plain or .gz) instead of calling the API.",
)
@click.option(
    "--offline",
    is_flag=True,
    help="Use the models list bundled with the package (taken 2026-01-28): no network, no key.",
)
@format_option("csv")
def models(input_path: str | None, offline: bool, fmt: str) -> None:
    """List the models OpenRouter serves, with list prices per million tokens.

    Model-level prices track one endpoint, not the cheapest: use `endpoints` before spending.
    Models that cannot be read are skipped, with one line on stderr.
    """
    from openrouter_probe.api import catalog

    if offline and input_path:
        raise click.UsageError("--offline and --input FILE exclude each other")
    if offline:
        listing = catalog.bundled_models_list()
        note(
            f"models: the bundled list of {catalog.BUNDLED_MODELS_LIST_DATE}, "
            f"{catalog.BUNDLED_MODELS_LIST_ORIGIN}; prices and models have changed since"
        )
    elif input_path:
        listing = catalog.load_models_list(input_path)
    else:
        listing = _fetch_models()
    rows = [
        {
            "id": m.id,
            "name": m.name,
            "context_tokens": m.context_length,
            "input_usd_per_m": _f(m.pricing.prompt_usd_per_m),
            "output_usd_per_m": _f(m.pricing.completion_usd_per_m),
        }
        for m in listing.data
    ]
    render_rows(
        rows, fmt, title=f"{len(rows)} models", json_rows=[m.to_json_dict() for m in listing.data]
    )


def _fetch_models() -> ModelsList:
    """``GET /models``; a failure the network may cause names the offline sources."""
    from openrouter_probe.api.catalog import BUNDLED_MODELS_LIST_DATE
    from openrouter_probe.api.client import Client
    from openrouter_probe.errors import APIConnectionError, APIError, APIStatusError

    try:
        with Client() as client:
            return client.models()
    except (APIConnectionError, APIStatusError) as exc:
        if isinstance(exc, APIStatusError) and exc.status_code < 429:
            raise
        raise APIError(
            f"{exc}. Use --offline for the bundled list of {BUNDLED_MODELS_LIST_DATE}, "
            "or --input FILE for a saved GET /models body",
            url=exc.url,
        ) from exc

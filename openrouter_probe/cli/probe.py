"""``openrouter-probe endpoints`` and ``models``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from openrouter_probe.cli._common import (
    _load,
    _note,
    _render_rows,
    cli,
    format_option,
    snapshot_options,
)


def _endpoint_row(e: Any) -> dict[str, Any]:
    """A flat row for the endpoints table/CSV, with units in the column names."""

    def _f(value: Any) -> float | None:
        return None if value is None else float(value)

    lat = e.latency_last_30m
    thr = e.throughput_last_30m
    return {
        "provider": e.provider_name,
        "tag": e.tag,
        "quantization": e.quantization,
        "status": e.status,
        "input_usd_per_m": _f(e.pricing.prompt_usd_per_m),
        "output_usd_per_m": _f(e.pricing.completion_usd_per_m),
        "cache_read_usd_per_m": _f(e.pricing.cache_read_usd_per_m),
        "uptime_30m_pct": e.uptime_last_30m,
        "latency_p50_ms": lat.p50 if lat else None,
        "throughput_p50_tps": thr.p50 if thr else None,
        "context_tokens": e.context_length,
        "max_output_tokens": e.max_completion_tokens,
    }


@cli.command()
@click.argument("model")
@snapshot_options
@click.option("--save", type=click.Path(dir_okay=False, writable=True), help="Save the snapshot.")
@format_option("table", "json", "csv")
def endpoints(model: str, offline: bool, snapshot: str | None, save: str | None, fmt: str) -> None:
    """Show MODEL's endpoints: provider, tag, quantization, prices per million, uptime, speed.

    MODEL is an OpenRouter id (moonshotai/kimi-k2.5) or canonical slug. --format json prints the
    endpoints with OpenRouter's own field names.
    """
    snap = _load(model, offline, snapshot)
    if save:
        _note(f"saved {snap.save(save)}")
    rows = [_endpoint_row(e) for e in snap.endpoints]
    _render_rows(
        rows,
        fmt,
        title=f"{snap.model} endpoints (prices USD per 1M tokens)",
        json_rows=[e.to_json_dict() for e in snap.endpoints],
    )


@cli.command()
@click.option(
    "--input",
    "input_path",
    type=click.Path(exists=True, dir_okay=False),
    help="Read a saved GET /models body instead of calling the API.",
)
@format_option("table", "json", "csv")
def models(input_path: str | None, fmt: str) -> None:
    """List the models OpenRouter serves, with list prices per million tokens.

    Model-level prices track one endpoint, not the cheapest: use `endpoints` before spending.
    """
    from openrouter_probe.client import Client
    from openrouter_probe.schema import ModelsList

    if input_path:
        from pydantic import ValidationError

        from openrouter_probe.errors import SnapshotError, first_validation_error

        try:
            listing = ModelsList.model_validate_json(Path(input_path).read_bytes())
        except ValidationError as exc:
            raise SnapshotError(
                f"{input_path}: not a GET /models body ({first_validation_error(exc)})"
            ) from exc
    else:
        with Client() as client:
            listing = client.models()

    def _f(value: Any) -> float | None:
        return None if value is None else float(value)

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
    _render_rows(
        rows, fmt, title=f"{len(rows)} models", json_rows=[m.to_json_dict() for m in listing.data]
    )

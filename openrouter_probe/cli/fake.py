"""``openrouter-probe fake-server``: a fake OpenRouter on loopback for tests and dry runs."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from typing import Any

import click

from openrouter_probe.cli._common import checked_by, cli, load_snapshot_for, note
from openrouter_probe.cli.options import snapshot_options


def _tag_rate(option: str) -> Callable[[str], object]:
    def check(spec: str) -> object:
        from openrouter_probe.fake.degrade import parse_degrade

        return parse_degrade([spec], option=option)

    return check


def _tag_tokens(spec: str) -> object:
    from openrouter_probe.fake.degrade import parse_template

    return parse_template([spec])


def _tag_factor(spec: str) -> object:
    from openrouter_probe.fake.degrade import parse_sampling

    return parse_sampling([spec])


def _faults(spec: str) -> object:
    from openrouter_probe.fake import parse_faults

    return parse_faults(spec)


@cli.command("fake-server")
@click.argument("model", required=False)
@snapshot_options
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option(
    "--port",
    type=click.IntRange(min=0, max=65535),
    default=8080,
    show_default=True,
    help="Port (0: any free one).",
)
@click.option(
    "--credit-usd",
    type=click.FloatRange(min=0),
    help="The key's credit limit in USD (default: none).",
)
@click.option(
    "--in-flight-share",
    type=float,
    help="OpenRouter's in-flight budget (2026): requests in flight may hold at most this share "
    "of the credit left (with --credit-usd); over it, its 402 with Retry-After.",
)
@click.option(
    "--in-flight-usd",
    type=float,
    help="The in-flight budget's fixed ceiling in USD (alone, or with --in-flight-share).",
)
@click.option(
    "--key-limit-usd",
    type=float,
    help="The key's own limit in USD: once billed, every request gets the key-limit 402.",
)
@click.option(
    "--faults",
    metavar="SPEC|FILE.yaml",
    callback=checked_by(_faults),
    help="Faults to inject, e.g. 'upstream_429=0.05,drop=0.01' (see docs/fake-server.md).",
)
@click.option(
    "--degrade",
    multiple=True,
    metavar="TAG=RATE",
    callback=checked_by(_tag_rate("degrade")),
    help="Make an endpoint less accurate: answer tokens flip at RATE (repeatable).",
)
@click.option(
    "--degrade-flip",
    multiple=True,
    metavar="TAG=RATE",
    callback=checked_by(_tag_rate("degrade_flip")),
    help="Make an endpoint wrong on RATE of the items and right on as many others "
    "(same accuracy, other answers; repeatable).",
)
@click.option(
    "--degrade-tools",
    multiple=True,
    metavar="TAG=RATE",
    callback=checked_by(_tag_rate("degrade_tools")),
    help="Break an endpoint's tool calls at RATE: invalid arguments or no call (repeatable).",
)
@click.option(
    "--degrade-template",
    multiple=True,
    metavar="TAG=N",
    callback=checked_by(_tag_tokens),
    help="Make an endpoint render another chat template: it counts and bills N "
    "more prompt tokens per request (repeatable).",
)
@click.option(
    "--degrade-sampling",
    multiple=True,
    metavar="TAG=FACTOR",
    callback=checked_by(_tag_factor),
    help="Make an endpoint sample at FACTOR times the asked temperature: the same "
    "greedy answers, another distribution (repeatable).",
)
@click.option(
    "--noise",
    type=click.FloatRange(0, 1),
    default=0.0,
    show_default=True,
    metavar="RATE",
    help="Every endpoint (reference included) changes an answer at RATE: "
    "nondeterminism at temperature 0.",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of every draw.")
@click.option(
    "--speed",
    type=click.FloatRange(min=0),
    default=1.0,
    show_default=True,
    help="Latency scale: 1 = the endpoints' own stats, 10 = ten times faster, 0 = no waits.",
)
@click.option(
    "--generation-lag",
    "generation_lag_s",
    type=click.FloatRange(min=0),
    default=0.0,
    show_default=True,
    help="Seconds before /generation?id= knows a generation (404 before).",
)
@click.option(
    "--batch-seconds",
    "batch_seconds",
    type=click.FloatRange(min=0),
    default=420.0,
    show_default=True,
    help="Seconds a batch stays in_progress (the Batch API; OpenRouter's median is 7 minutes).",
)
@click.option(
    "--management-key",
    metavar="KEY",
    help="Serve the key management API (/api/v1/keys, /api/v1/activity) to this key; the keys it "
    "creates are accepted, each held to its own limit.",
)
def fake_server(
    model: str | None,
    offline: bool,
    snapshot: str | None,
    host: str,
    faults: str | None,
    seed: int,
    **options: Any,
) -> None:
    """Serve a fake OpenRouter from a snapshot until Ctrl-C (or SIGTERM), and print its base URL.

    It routes every request by its provider block, bills at the serving endpoint's prices, keeps a
    ledger at /_fake/ledger and injects the faults asked for. Point a client at it with
    OPENROUTER_BASE_URL=<printed URL> and any non-empty OPENROUTER_API_KEY. A fault or a
    degradation whose TAG matches no endpoint is refused before it starts. A snapshot with
    :batch endpoints is also served through the Batch API (/api/v1/batches).
    """
    if host not in ("127.0.0.1", "localhost", "::1"):
        note(f"warning: serving on {host}; the fake accepts any key, keep it off shared networks")
    from openrouter_probe.fake import parse_faults, serve

    plan = parse_faults(faults or "", seed=seed)  # its syntax was checked by the option
    if not (offline or snapshot or model):
        offline = True
    snap = load_snapshot_for(model, offline, snapshot)
    # ``options``: the others, named as ``serve``'s keywords
    with serve(snap, host=host, faults=plan, seed=seed, **options) as fake:
        _stop_on_signals()  # before the URL: a script may signal as soon as it reads it
        try:
            click.echo(fake.base_url)
            note(f"ledger: {fake.url}/_fake/ledger; Ctrl-C to stop")
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            note(
                f"stopped; billed ${float(fake.ledger.total_usd):.6f} in {len(fake.ledger)} generations"
            )


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _stop_on_signals() -> None:
    """SIGINT and SIGTERM stop the server, even where its parent ignored them (a shell's
    background job starts with SIGINT ignored, and Python then keeps it so): the server says
    Ctrl-C stops it, and a ``kill -INT`` from a script must."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _interrupt)

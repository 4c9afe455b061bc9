"""``openrouter-probe fake-server``: a fake OpenRouter on loopback for tests and dry runs."""

from __future__ import annotations

import time

import click

from openrouter_probe.cli._common import cli, load_snapshot_for, note


@cli.command("fake-server")
@click.argument("model", required=False)
@click.option("--offline", is_flag=True, help="Serve the snapshot bundled with the package.")
@click.option("--snapshot", metavar="bundled|PATH", help="Serve a saved snapshot.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--port", type=int, default=8080, show_default=True, help="Port (0: any free one).")
@click.option("--credit-usd", type=float, help="The key's credit limit in USD (default: none).")
@click.option(
    "--faults",
    metavar="SPEC|FILE.yaml",
    help="Faults to inject, e.g. 'upstream_429=0.05,drop=0.01' (see docs/fake-server.md).",
)
@click.option(
    "--degrade",
    multiple=True,
    metavar="TAG=RATE",
    help="Make an endpoint perturb its answers at RATE (repeatable).",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of every draw.")
@click.option(
    "--speed",
    type=float,
    default=1.0,
    show_default=True,
    help="Latency scale: 1 = the endpoints' own stats, 10 = ten times faster, 0 = no waits.",
)
@click.option(
    "--generation-lag",
    "generation_lag_s",
    type=float,
    default=0.0,
    show_default=True,
    help="Seconds before /generation?id= knows a generation (404 before).",
)
def fake_server(
    model: str | None,
    offline: bool,
    snapshot: str | None,
    host: str,
    port: int,
    credit_usd: float | None,
    faults: str | None,
    degrade: tuple[str, ...],
    seed: int,
    speed: float,
    generation_lag_s: float,
) -> None:
    """Serve a fake OpenRouter from a snapshot until Ctrl-C, and print its base URL.

    It routes every request by its provider block, bills at the serving endpoint's prices, keeps a
    ledger at /_fake/ledger and injects the faults asked for. Point a client at it with
    OPENROUTER_BASE_URL=<printed URL> and any non-empty OPENROUTER_API_KEY.
    """
    if host not in ("127.0.0.1", "localhost", "::1"):
        note(f"warning: serving on {host}; the fake accepts any key, keep it off shared networks")
    from openrouter_probe.fake import parse_faults, serve

    plan = parse_faults(faults or "", seed=seed)  # a bad spec is one line, before anything else
    if not (offline or snapshot or model):
        offline = True
    snap = load_snapshot_for(model, offline, snapshot)
    with serve(
        snap,
        host=host,
        port=port,
        credit_usd=credit_usd,
        faults=plan,
        seed=seed,
        speed=speed,
        degrade=list(degrade),
        generation_lag_s=generation_lag_s,
    ) as fake:
        click.echo(fake.base_url)
        note(f"ledger: {fake.url}/_fake/ledger; Ctrl-C to stop")
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            note(
                f"stopped; billed ${float(fake.ledger.total_usd):.6f} in {len(fake.ledger)} generations"
            )

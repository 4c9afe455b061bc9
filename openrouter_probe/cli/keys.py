"""``openrouter-probe keys create|status|revoke``: a key per shard, each with its own limit
(``generation.keyfile``). The key file is the only place the secrets are written: these commands
print hashes, never a secret.
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import click

from openrouter_probe.cli._common import budget_option, checked_by, cli, note
from openrouter_probe.cli.options import format_option, out_option
from openrouter_probe.cli.tables import render_rows


def _weights(text: str) -> object:
    from openrouter_probe.errors import ConfigError

    try:
        values = [float(part) for part in text.split(",")]
    except ValueError:
        raise ConfigError(
            f"--shard-weights {text}: give one number a shard, e.g. 2,1,1,1"
        ) from None
    if any(not v > 0 for v in values):
        raise ConfigError(f"--shard-weights {text}: every weight is a number above 0")
    return values


@cli.group("keys")
def keys_group() -> None:
    """A key per shard, each with its own limit (needs OPENROUTER_MANAGEMENT_KEY)."""


@keys_group.command("create")
@click.option("--shards", type=click.IntRange(min=1), required=True, help="How many keys.")
@budget_option("The job's budget: the keys' limits share it and never sum above it.", required=True)
@click.option("--name", "job", required=True, metavar="JOB", help="Keys are named JOB-IofN.")
@out_option("The key file to write (mode 0600); must not exist.", required=True)
@click.option(
    "--shard-weights",
    "weights",
    metavar="W,W,...",
    callback=checked_by(_weights),
    help="Share the budget between shards by weight, one a shard (default: equal).",
)
@click.option("--expires-at", metavar="ISO8601", help="When the keys stop working.")
@click.option(
    "--include-byok-in-limit", is_flag=True, help="Count BYOK usage against the keys' limits."
)
def keys_create(job: str, weights: str | None, **options: Any) -> None:
    """Create --shards keys whose limits share --budget-usd and write them to --out."""
    from openrouter_probe.generation.keyfile import create_shard_keys

    # ``options``: the others, named as create_shard_keys' keywords
    parsed = _weights(weights) if weights else None
    made = create_shard_keys(job, weights=parsed, **options)  # type: ignore[arg-type]
    for key in made.keys:
        click.echo(f"shard {key.shard}/{made.shards}: {key.name} limit ${key.limit_usd} {key.hash}")
    total = sum((k.limit_usd for k in made.keys), Decimal(0))
    note(
        f"wrote {len(made.keys)} keys to {made.path} (mode 0600; their limits sum to ${total} of "
        f"${made.budget_usd}); run each shard with --key-file {made.path} --shard i/{made.shards}"
    )


@keys_group.command("status")
@click.argument("key_file", type=click.Path(exists=True, dir_okay=False), metavar="KEYS.json")
@click.argument("outputs", nargs=-1, metavar="[OUTPUTS|DIR|GLOB]...")
@format_option()
def keys_status(key_file: str, outputs: tuple[str, ...], fmt: str) -> None:
    """Each key's limit and usage as OpenRouter reports them, and what the shards' journals
    (OUTPUTS: files, folders or globs) count: exit 1 when OpenRouter reports more than the
    journals (money the journals do not know)."""
    import sys

    from openrouter_probe.generation.books import job_books

    books = job_books(key_file, outputs)
    if fmt == "json":
        click.echo(json.dumps(books.to_dict(), indent=2))
    else:
        rows: list[dict[str, Any]] = books.key_rows()
        render_rows(rows, "table", title=f"{books.job}: keys (${books.budget_usd} budget)")
        note(books.render())
    sys.exit(books.exit_code)


@keys_group.command("revoke")
@click.argument("key_file", type=click.Path(exists=True, dir_okay=False), metavar="KEYS.json")
@click.option("--delete", is_flag=True, help="Delete the keys instead of disabling them.")
def keys_revoke(key_file: str, delete: bool) -> None:
    """Disable (or --delete) every key of KEYS.json."""
    from openrouter_probe.generation.keyfile import read_key_file, revoke_shard_keys

    keyfile = read_key_file(key_file)
    for key, done in revoke_shard_keys(keyfile, delete=delete):
        click.echo(f"shard {key.shard}/{keyfile.shards}: {key.name} {done} {key.hash}")

"""``python -m openrouter_probe`` runs the CLI."""

from openrouter_probe.cli import cli

cli()

"""Write docs/cli.md: the ``--help`` of every openrouter-probe command and subcommand.

Run ``python docs/make_cli_reference.py`` after changing a command; ``tests/project/test_docs.py`` fails when
the committed page differs from what this script produces. The page is built by walking the click
group ``openrouter_probe.cli.cli`` recursively, so commands registered later appear by themselves.
The output does not depend on the terminal: the width is fixed at 80 columns and click writes no
colour into help text.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import click

PROG = "openrouter-probe"
WIDTH = 80
OUTPUT = Path(__file__).resolve().parent / "cli.md"

_INTRO = """\
# CLI reference

Generated from `--help` by `python docs/make_cli_reference.py`; do not edit by hand
(`tests/project/test_docs.py` fails when this page is out of date). Every command accepts `-h` / `--help`.
Data goes to stdout, provenance and diagnostics to stderr; errors are one line (set
`OPENROUTER_PROBE_DEBUG=1` for a traceback).

## Exit codes

| code | meaning |
|---|---|
| 0 | the command did what was asked (a run that stopped at its budget or its target included) |
| 1 | the job failed: a file that cannot be read as what it should be, a 401/402/404 stop, a policy that admits nothing, `audit` finding rows served outside the policy |
| 2 | a usage error, before anything is read or sent: an unknown option, a missing argument, or a value the tool itself refuses (`--budget-usd -5`, `--shard 3/2`, `--weights B3:2`, `--target-tokens 10Q` or `0`, `--offline` with `--snapshot PATH`, `--limit` with `--sample`, `--reasoning-effort` with `--reasoning-max-tokens`, `--reasoning-max-tokens` not below `--max-tokens`, `--temperature` outside 0-2 or `nan`, `--stream` with `--batch`, `--split`/`--config` on a file, a source flag on a manifest, `--read-timeout`/`--drain-timeout` not above 0, `verify --endpoints` with `--policy`, `fake-server --port 99999` or `--speed -1`, `export --push-to-hub` without `--format hf`, `export --prompts` whose ids match no row, `export` of a spend journal alone) |
| 130 | interrupted (Ctrl-C) |

The library refuses a keyword's value with `OptionError` (a `ConfigError`): `.values` holds each
keyword and the value given, `str()` says them as a Python caller passes them (`temperature=nan`);
the CLI says the same message with the command's own flags, looked up in its click options
(`--temperature nan`), and exits 2. An option given that does nothing where it is is a warning on
stderr (`--seed` without `--sample`, `--no-preserve-thinking` outside `--format specforge`,
`verify --evidence` or `--out` when nothing is sent, `verify --n`/`--seed` without a generated
suite). `generate --format json` names every skipped row (`skipped_rows`); the text names 10.

`policy check` is made for CI: 0 when nothing that matters moved, 1 on drift, 2 on any error.
`tests/cli/test_exit_codes.py` runs every command below with a bad option and checks 2.

Commands:

{index}
"""


def _walk(
    command: click.Command, ctx: click.Context, path: tuple[str, ...]
) -> Iterator[tuple[tuple[str, ...], str]]:
    """Yield (command path, help text) for ``command`` and, depth first, every subcommand."""
    yield path, command.get_help(ctx)
    if isinstance(command, click.Group):
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is None or sub.hidden:
                continue
            sub_ctx = click.Context(
                sub, info_name=name, parent=ctx, terminal_width=WIDTH, max_content_width=WIDTH
            )
            yield from _walk(sub, sub_ctx, (*path, name))


def render() -> str:
    """Return the Markdown page for the commands registered in ``openrouter_probe.cli.cli`` now."""
    from openrouter_probe.cli import cli

    settings = {**cli.context_settings, "terminal_width": WIDTH, "max_content_width": WIDTH}
    root = click.Context(cli, info_name=PROG, **settings)
    sections = list(_walk(cli, root, (PROG,)))
    names = [" ".join(path) for path, _ in sections]
    index = "\n".join(f"- `{name}`" for name in names[1:])
    parts = [_INTRO.format(index=index)]
    for name, (path, text) in zip(names, sections, strict=True):
        level = "#" * min(len(path) + 1, 4)
        parts.append(f"{level} `{name}`\n\n```text\n{text.rstrip()}\n```\n")
    return "\n".join(parts)


def main() -> int:
    """Write the page and say whether it changed."""
    text = render()
    old = OUTPUT.read_text(encoding="utf-8") if OUTPUT.exists() else None
    if old == text:
        print(f"{OUTPUT.name} is up to date", file=sys.stderr)
        return 0
    from openrouter_probe.files import atomic_write_text

    atomic_write_text(OUTPUT, text)
    print(f"wrote {OUTPUT}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

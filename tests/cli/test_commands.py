"""The group's commands, each imported from its module when first looked up (``COMMANDS``)."""

from __future__ import annotations

import json
import subprocess
import sys

from openrouter_probe.cli._common import COMMANDS

_REGISTERED = """
import importlib, json, pkgutil, sys
import openrouter_probe.cli
from openrouter_probe.cli import cli
before = sorted(m for m in sys.modules if m.startswith("openrouter_probe.cli."))
listed = cli.list_commands(None)
after_listing = sorted(m for m in sys.modules if m.startswith("openrouter_probe.cli."))
# every module of the package, not only the table's: one that registers a command the table
# does not name would be missed by --help
modules = [m.name for m in pkgutil.iter_modules(openrouter_probe.cli.__path__, "openrouter_probe.cli.")]
for module in modules:
    importlib.import_module(module)
found = {name: cmd.callback.__module__ for name, cmd in cli.commands.loaded.items()}
print(json.dumps({"before": before, "after_listing": after_listing, "listed": listed,
                  "found": found}))
"""


def _registered() -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", _REGISTERED],
        capture_output=True,
        text=True,
        check=True,
    )
    said: dict[str, object] = json.loads(done.stdout)
    return said


def test_the_table_names_each_command_its_module_registers() -> None:
    said = _registered()
    # a command missing from the table would not be listed until its module came in
    assert said["found"] == COMMANDS
    assert said["listed"] == sorted(COMMANDS)


def test_listing_the_commands_imports_no_command_module() -> None:
    said = _registered()
    shared = ["openrouter_probe.cli._common", "openrouter_probe.cli.options"]
    assert said["before"] == said["after_listing"] == shared


def test_a_command_looked_up_is_its_modules_own() -> None:
    from openrouter_probe.cli import cli

    for name, module in COMMANDS.items():
        command = cli.commands[name]
        assert command.callback is not None
        assert command.callback.__module__ == module
    assert "nope" not in cli.commands
    assert cli.commands.get("nope") is None

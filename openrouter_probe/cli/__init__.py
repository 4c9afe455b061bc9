"""The ``openrouter-probe`` command line: thin click commands over the library.

A command parses options, calls one library function and renders. Data goes to stdout, provenance
and diagnostics to stderr. Any ``ProbeError`` becomes one line and exit code 1 (a traceback only with
``OPENROUTER_PROBE_DEBUG=1``); usage errors exit 2. This package is the only one that imports click;
library modules are imported inside commands so ``openrouter-probe --help`` stays fast, but for the
plans (``run.config``, ``generation.plan``, kept light), whose fields' metadata make the options.
Each module holds the commands its docstring names, imported when one of them is first looked up
(``_common.COMMANDS``: a ``generate`` imports no other command's module); ``_common`` the group
and its error handling.
"""

from __future__ import annotations

from openrouter_probe.cli._common import cli

__all__ = ["cli"]

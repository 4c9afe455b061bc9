"""The ``openrouter-probe`` command line: thin click commands over the library.

A command parses options, calls one library function and renders. Data goes to stdout, provenance
and diagnostics to stderr. Any ``ProbeError`` becomes one line and exit code 1 (a traceback only with
``OPENROUTER_PROBE_DEBUG=1``); usage errors exit 2. This package is the only one that imports click;
library modules are imported inside commands so ``openrouter-probe --help`` stays fast, but for the
plans (``run.config``, ``generation.plan``, kept light), whose fields' metadata make the options.
Each module holds the commands its docstring names; ``_common`` the group and its error handling.
"""

from __future__ import annotations

from openrouter_probe.cli import analysis as _analysis  # noqa: F401
from openrouter_probe.cli import fake as _fake  # noqa: F401
from openrouter_probe.cli import generate as _generate  # noqa: F401
from openrouter_probe.cli import keys as _keys  # noqa: F401
from openrouter_probe.cli import matrix as _matrix  # noqa: F401
from openrouter_probe.cli import outputs as _outputs  # noqa: F401
from openrouter_probe.cli import policy as _policy  # noqa: F401  (registers its commands)
from openrouter_probe.cli import probe as _probe  # noqa: F401
from openrouter_probe.cli import verify as _verify  # noqa: F401
from openrouter_probe.cli._common import cli

__all__ = ["cli"]

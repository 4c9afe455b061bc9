"""A ``generate`` run in a child process, for tests that kill it (``python -m tests._child JSON``).

The waits are injected away (retries, pauses, the reconciler's tries) as in-process tests do, so
a child runs at full speed; everything else is the library's own path: the HTTP transport, the
lock, the journal, the signals. Prints the summary as JSON on stdout; a ``ProbeError`` (a refused
lock) is one line on stderr and exit 3.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any


async def _no_sleep(seconds: float) -> None:
    await asyncio.sleep(0)


def batch_options(options: dict[str, Any]) -> dict[str, Any]:
    """``options`` as ``generate`` takes them: a ``batch`` given as JSON (``{"size": 4}``) becomes
    the ``BatchOptions`` it stands for."""
    from openrouter_probe.run.batch_plan import BatchOptions

    if isinstance(options.get("batch"), dict):
        options["batch"] = BatchOptions(**options["batch"])
    return options


def main(argv: list[str]) -> int:
    from openrouter_probe.errors import ProbeError
    from openrouter_probe.generation import generate

    options: dict[str, Any] = batch_options(json.loads(argv[0]))
    prompts = options.pop("prompts")
    try:
        summary = asyncio.run(generate(prompts, sleep=_no_sleep, handle_signals=True, **options))
    except ProbeError as exc:
        print(str(exc), file=sys.stderr)
        return 3
    print(json.dumps(summary.to_dict()))
    return summary.exit_code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

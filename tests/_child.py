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
    the ``BatchOptions`` it stands for, a ``source`` (``{"row_params": "max_tokens"}``) the
    ``SourceOptions``."""
    from openrouter_probe.generation.manifest import SourceOptions
    from openrouter_probe.run.send.batch_plan import BatchOptions

    if isinstance(options.get("batch"), dict):
        options["batch"] = BatchOptions(**options["batch"])
    if isinstance(options.get("source"), dict):
        options["source"] = SourceOptions.of(**options["source"])
    return options


def kill_points(spec: str) -> None:
    """Die (``os._exit(9)``: no cleanup, as a SIGKILL) at the named points, ``;``-separated:
    ``write:N`` once the N-th output record is written (a batch's results being written);
    ``plan:N`` right after the N-th ``batch_plan`` journal line; ``create:N`` once the N-th
    ``POST /batches`` made its batch, before its answer is read; ``poll:N`` after the N-th
    ``GET /batches/{id}``; ``answer:N`` once the N-th request sent over HTTP came back (an answer
    billed and not yet journaled, or a failure that may have been billed). (``CHILD_KILL`` in the environment: the batch tests' and the invariant
    harness's kill points. A process that dies at its own point dies there whatever the
    machine's load: a parent watching from outside may see it finish first.)"""
    import os

    from openrouter_probe.api.batches import BatchClient
    from openrouter_probe.run.books.output import OutputLog
    from openrouter_probe.run.money.journal import Journal
    from openrouter_probe.run.send.transport import HttpTransport

    def dying(cls: Any, name: str, after: int) -> None:
        real = getattr(cls, name)
        seen = [0]

        def call(self: Any, *args: Any, **kw: Any) -> Any:
            done = real(self, *args, **kw)
            seen[0] += 1
            if seen[0] >= after:
                os._exit(9)
            return done

        setattr(cls, name, call)

    def dying_on_answer(after: int) -> None:
        real = HttpTransport.send
        seen = [0]

        async def send(self: Any, *args: Any, **kw: Any) -> Any:
            done = await real(self, *args, **kw)
            seen[0] += 1  # an answer, or a failure that may have been billed all the same
            if seen[0] >= after:
                os._exit(9)
            return done

        HttpTransport.send = send  # type: ignore[method-assign]

    for point in filter(None, spec.split(";")):
        what, _, count = point.partition(":")
        if what == "answer":
            dying_on_answer(int(count or 1))
            continue
        target = {
            "write": (OutputLog, "write"),
            "plan": (Journal, "batch_plan"),
            "create": (BatchClient, "create"),
            "poll": (BatchClient, "get"),
        }[what]
        dying(*target, int(count or 1))


def main(argv: list[str]) -> int:
    import os

    from openrouter_probe.errors import ProbeError
    from openrouter_probe.generation import generate

    kill_points(os.environ.get("CHILD_KILL", ""))
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

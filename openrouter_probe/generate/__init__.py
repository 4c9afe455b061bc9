"""The thin async generator: prompts in, one JSON line per finished row out, within a spend cap.

Every request carries the compiled policy's model and ``provider`` block byte for byte; the cap
reserves each request's worst case before sending and settles to ``usage.cost``; a rerun of the same
command skips every finished row (resume never pays twice); the first SIGINT drains, the second
cancels. ``docs/generate.md`` states the guarantees and how each is tested.

Modules: ``prompts`` (input rows and ids), ``job`` (``generate``: the policy, start-up checks,
dry run, then the run through ``openrouter_probe.run``), ``audit`` (who served each row),
``export`` (training formats) and ``conversation`` (a row as the conversation it exports: which
turns the model wrote, the SpecForge shape). The paid run itself (transport, cap, journal, output,
worker pool) lives in ``openrouter_probe.run``, shared with ``verify``.
May import ``run``, ``policy``, ``analysis``, ``rules`` and ``api``; never ``cli``.

The package itself is callable, so ``await openrouter_probe.generate(...)`` works whether the name
resolves to this package or to the function.

Example::

    import openrouter_probe as orp

    summary = await orp.generate("prompts.jsonl", policy="policies/kimi-k2.5.yaml",
                                 out="out.jsonl", budget_usd=100, concurrency=2000)
"""

from __future__ import annotations

import sys
import types
from typing import Any

from openrouter_probe.generate.job import generate
from openrouter_probe.run.summary import RunSummary

__all__ = ["RunSummary", "generate"]


class _CallableModule(types.ModuleType):
    """``openrouter_probe.generate`` is both this package and the ``generate`` coroutine function."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return generate(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule

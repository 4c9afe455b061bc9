"""The generation job: prompts in, one JSON line per finished row out, within a spend cap.

Every request carries the compiled policy's model and ``provider`` block byte for byte; the cap
reserves each request's worst case before sending and settles to ``usage.cost``; a rerun of the same
command skips every finished row (resume never pays twice); the first SIGINT drains, the second
cancels. ``docs/generate.md`` states the guarantees and how each is tested.

Modules: ``prompts`` (input rows and ids), ``plan`` (``GeneratePlan``: ``generate``'s keywords,
checked once), ``job`` (``generate``: the policy, then the run through ``openrouter_probe.run``),
``admission`` (the policy against the endpoints now), ``dry_run``, ``pilot`` (``pilot=N``: the
first rows of each dataset, then their answer lengths), ``audit`` (who served each
row), ``export`` and ``formats`` (the training formats) and ``conversation`` (a row as the
conversation it exports: which turns the model wrote, the SpecForge shape). The paid run itself (transport, cap, journal, output,
worker pool) lives in ``openrouter_probe.run``, shared with ``verify``.
May import ``run``, ``policy``, ``analysis``, ``rules`` and ``api``; never ``cli``. (Not named
``generate``: a package named like the function ``openrouter_probe.generate`` hid one behind the
other.)

Example::

    import openrouter_probe as orp

    summary = await orp.generate("prompts.jsonl", policy="policies/kimi-k2.5.yaml",
                                 out="out.jsonl", budget_usd=100, concurrency=2000)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from openrouter_probe import exports_of, lazy_exports

# The public names, written once as the imports a type checker reads (``exports_of``).
if TYPE_CHECKING:
    from openrouter_probe.generation.job import generate as generate
    from openrouter_probe.run.result import RunResult as RunResult
    from openrouter_probe.run.result import RunSummary as RunSummary

_EXPORTS: dict[str, str] = exports_of(__file__)
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

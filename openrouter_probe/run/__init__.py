"""The paid run that ``generate`` and ``verify`` share: options, key, journal, cap, transport,
worker pool, progress and summary; a guarantee added here holds for both.
May import ``rules`` and ``api`` (and ``errors``, ``files``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from openrouter_probe import exports_of, lazy_exports

# The public names, written once as the imports a type checker reads (``exports_of``).
if TYPE_CHECKING:
    from openrouter_probe.run.rows import PromptRow as PromptRow
    from openrouter_probe.run.spend import SpendCap as SpendCap
    from openrouter_probe.run.stop import StopReason as StopReason
    from openrouter_probe.run.summary import RunSummary as RunSummary

_EXPORTS: dict[str, str] = exports_of(__file__)
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

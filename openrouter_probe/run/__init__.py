"""The paid run that ``generate`` and ``verify`` share: options, key, journal, cap, transport,
worker pool, progress and summary; a guarantee added here holds for both.
May import ``rules`` and ``api`` (and ``errors``, ``files``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from openrouter_probe import lazy_exports

# name -> module that defines it, imported on first use
_EXPORTS: dict[str, str] = {
    "PromptRow": "openrouter_probe.run.rows",
    "RunSummary": "openrouter_probe.run.summary",
    "SpendCap": "openrouter_probe.run.spend",
    "StopReason": "openrouter_probe.run.stop",
}

__all__ = [
    "PromptRow",
    "RunSummary",
    "SpendCap",
    "StopReason",
]

if TYPE_CHECKING:
    from openrouter_probe.run.rows import PromptRow
    from openrouter_probe.run.spend import SpendCap
    from openrouter_probe.run.stop import StopReason
    from openrouter_probe.run.summary import RunSummary

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

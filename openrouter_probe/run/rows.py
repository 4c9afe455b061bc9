"""The row a run sends: its id, dataset, messages and per-row request parameters.

``generate`` reads rows from a prompts file (``openrouter_probe.generation.prompts``); ``verify``
builds them from its plan, one per (endpoint, item) pair, each with its own pinned block.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from openrouter_probe.run.money.spend import Prices

__all__ = ["PromptRow"]


@dataclass(frozen=True)
class PromptRow:
    """One input row: its id, dataset, chat messages and per-row request parameters."""

    id: str
    dataset: str
    messages: list[dict[str, Any]]
    params: dict[str, Any]
    line: int
    #: The bytes of its prompt as JSON (``None``: its messages', measured when asked: ``prompt_size``).
    prompt_bytes: int | None = None
    #: The row's own ``provider`` block, serialized JSON sent byte for byte (``None``: the run's).
    #: Set by callers that pin each row to its own endpoint (``verify``); never read from a file.
    provider_json: str | None = None
    #: The row's own worst-case prices (``None``: the run's): those of the endpoint it is pinned to.
    prices: Prices | None = None
    #: Fields the output record carries as they are, never sent (``original``: the source's last
    #: assistant answer, which ``--turns last`` regenerates). Set by ``generation.prompts``.
    extra: Mapping[str, Any] | None = None
    #: What kind of attempt its request is, for the response cache's identity
    #: (``run.send.request.row_session``): ``""`` the row's own answer (a resend after a kill
    #: is the same request), ``redo:<generation>`` a redo of that cut answer; a retry after a bad
    #: answer adds ``/retry-N``.
    cache_kind: str = ""

    @property
    def prompt_size(self) -> int:
        """The bytes of the row's prompt as JSON: ``prompt_bytes``, else its messages' (measured
        here, not for every row read: only the dry run's estimate asks)."""
        if self.prompt_bytes is not None:
            return self.prompt_bytes
        return len(json.dumps(self.messages, ensure_ascii=False).encode())

"""The request a row sends: its body, byte for byte, and the worst case it may cost, in one place.

One builder for the run, the dry run and the benchmarks: the body is the run's fixed prefix (model,
the policy's ``provider`` block serialized once, ``stream``) spliced with the row's own part
(messages, ``max_tokens``, the run's sampling parameters unless the row sets them, the row's
parameters). The worst case (``run.spend``) bounds the prompt by every byte of the row's own part.
``RequestBuilder.build`` makes both at once (``Request``): the run reserves what it sends.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from openrouter_probe.run.rows import PromptRow
from openrouter_probe.run.spend import Prices, RequestShape, request_shape

__all__ = ["Request", "RequestBuilder", "dumps"]


#: One encoder (``json.dumps`` with options builds a new one per call: a step per request).
_ENCODE = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def dumps(value: Any) -> str:
    """Compact JSON, non-ASCII kept: the form every body and journal line uses."""
    return _ENCODE(value)


@dataclass(frozen=True, slots=True)
class Request:
    """One request of a row: the body it sends, its ``max_tokens``, what it may be billed for
    besides its output (``shape``) and the most it may cost (``worst_usd``)."""

    body: bytes
    max_tokens: int
    shape: RequestShape
    worst_usd: Decimal


@dataclass(frozen=True)
class RequestBuilder:
    """Builds the bodies of a run: ``model``, its ``provider`` block (JSON), ``max_tokens`` unless a
    row sets its own, ``stream`` and the sampling parameters every row gets unless it sets its own."""

    model: str
    provider_json: str
    max_tokens: int = 4096
    stream: bool = False
    temperature: float | None = None
    reasoning: dict[str, Any] | None = None
    _prefix: bytes = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_prefix", self.prefix().encode())

    def prefix(self, provider_json: str | None = None) -> str:
        return (
            '{"model":'
            + dumps(self.model)
            + ',"provider":'
            + (self.provider_json if provider_json is None else provider_json)
            + ',"stream":'
            + ("true" if self.stream else "false")
        )

    def own_part(self, row: PromptRow, max_tokens: int) -> str:
        """Everything the row adds to the prefix, closing brace included."""
        parts = [',"messages":', dumps(row.messages), ',"max_tokens":', str(max_tokens)]
        if self.temperature is not None and "temperature" not in row.params:
            parts += [',"temperature":', dumps(self.temperature)]
        if self.reasoning is not None and "reasoning" not in row.params:
            parts += [',"reasoning":', dumps(self.reasoning)]
        for key, value in row.params.items():
            if key != "max_tokens":
                parts += [",", dumps(key), ":", dumps(value)]
        parts.append("}")
        return "".join(parts)

    def shape(self, row: PromptRow, own_part: str) -> RequestShape:
        """What ``row`` may be billed for besides its output (see ``spend.request_shape``)."""
        return request_shape(len(own_part.encode()), row.messages, row.params)

    def worst_case_usd(
        self, row: PromptRow, prices: Prices, max_tokens: int, *, extra_prompt_tokens: int = 0
    ) -> Decimal:
        """The most ``row`` may cost at ``max_tokens`` (``build``'s worst case)."""
        return self.build(
            row, prices, max_tokens=max_tokens, extra_prompt_tokens=extra_prompt_tokens
        ).worst_usd

    def max_tokens_of(self, row: PromptRow) -> int:
        """The ``max_tokens`` ``row`` asks for: its own, else the run's."""
        return int(row.params.get("max_tokens", self.max_tokens))

    def build(
        self,
        row: PromptRow,
        prices: Prices,
        *,
        max_tokens: int | None = None,
        extra_prompt_tokens: int = 0,
    ) -> Request:
        """``row``'s request at ``max_tokens`` (default: the row's own, else the run's) and its
        worst case at ``prices``, its prompt ``extra_prompt_tokens`` longer than its messages
        (answers it will carry: the dry run of ``--turns all``)."""
        tokens = self.max_tokens_of(row) if max_tokens is None else max_tokens
        prefix = (
            self._prefix if row.provider_json is None else self.prefix(row.provider_json).encode()
        )
        own = self.own_part(row, tokens).encode()
        # the bytes the row adds to the prefix: what its prompt may be made of
        shape = request_shape(len(own), row.messages, row.params)
        worst = prices.worst_case_usd(
            prompt_tokens=shape.prompt_tokens + extra_prompt_tokens, max_tokens=tokens, shape=shape
        )
        return Request(prefix + own, tokens, shape, worst)

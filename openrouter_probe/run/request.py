"""The request a row sends: its body, byte for byte, and the worst case it may cost.

One builder for the run, the dry run and the benchmarks: the body is the run's fixed prefix (model,
the policy's ``provider`` block serialized once, ``stream``) spliced with the row's own part
(messages, ``max_tokens``, the run's sampling parameters unless the row sets them, the row's
parameters). The worst case (``run.spend``) bounds the prompt by every byte of the row's own part.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from openrouter_probe.run.rows import PromptRow
from openrouter_probe.run.spend import Prices, RequestShape, request_shape

__all__ = ["RequestBuilder", "dumps"]


def dumps(value: Any) -> str:
    """Compact JSON, non-ASCII kept: the form every body and journal line uses."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


@dataclass(frozen=True)
class RequestBuilder:
    """Builds the bodies of a run: ``model``, its ``provider`` block (JSON), ``stream`` and the
    sampling parameters every row gets unless it sets its own."""

    model: str
    provider_json: str
    stream: bool = False
    temperature: float | None = None
    reasoning: dict[str, Any] | None = None

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
        """The most ``row`` may cost at ``max_tokens`` (the dry run's figure, the cap's), its
        prompt ``extra_prompt_tokens`` longer than its messages (answers it will carry)."""
        shape = self.shape(row, self.own_part(row, max_tokens))
        return prices.worst_case_usd(
            prompt_tokens=shape.prompt_tokens + extra_prompt_tokens,
            max_tokens=max_tokens,
            shape=shape,
        )

"""The request a row sends: its body, byte for byte, and the worst case it may cost, in one place.

One builder for the run, the dry run and the benchmarks: the body is the run's fixed prefix (model,
the policy's ``provider`` block serialized once, ``stream``) spliced with the row's own part
(messages, ``max_tokens``, the row's ``session_id``, the run's sampling parameters unless the row
sets them, the sampling its model card fixes unless the run or the row sets other values, the
row's parameters). The worst case (``run.money.spend``) bounds the prompt by every byte of the row's own
part. ``RequestBuilder.build`` makes both at once (``Request``): the run reserves what it sends.

The body is a pure function of the run's settings and the row (compact JSON, keys in the order the
row and the run give them; nothing drawn, timed or counted goes in it): the same row gives the same
bytes in any process, so a row resent after a kill -9 is the very request OpenRouter's response
cache keyed (``identity``). With ``identity`` each row carries ``session_id`` (``row_session``: a
hash of its id): OpenRouter's own field for grouping requests in its logs, which no model reads,
and which the response cache hashes with the rest of the body, so two rows with one prompt are two
requests, never one cached answer.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from openrouter_probe.rules.sampling import SamplingAdvice, thinking_on
from openrouter_probe.run.money.spend import Prices, RequestShape, request_shape
from openrouter_probe.run.rows import PromptRow

__all__ = ["Request", "RequestBuilder", "dumps", "row_session"]


#: One encoder (``json.dumps`` with options builds a new one per call: a step per request).
_ENCODE = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def dumps(value: Any) -> str:
    """Compact JSON, non-ASCII kept: the form every body and journal line uses."""
    return _ENCODE(value)


#: Row parameters that change the sampling a row is sent with (``sampling_of``).
_SAMPLED = frozenset({"temperature", "top_p", "reasoning", "reasoning_effort"})


def row_session(row_id: str) -> str:
    """The ``session_id`` of row ``row_id``: ``orp-`` and 32 hex digits of its SHA-256 (stable
    across processes and runs; within OpenRouter's 128 characters whatever the id)."""
    return "orp-" + hashlib.sha256(row_id.encode()).hexdigest()[:32]


@dataclass(frozen=True, slots=True)
class Request:
    """One request of a row: the body it sends, its ``max_tokens``, what it may be billed for
    besides its output (``shape``) and the most it may cost (``worst_usd``)."""

    body: bytes
    max_tokens: int
    shape: RequestShape
    worst_usd: Decimal
    #: the sampling it was sent with (``temperature``, ``top_p``: the row's, the run's, or its
    #: model card's), for its record (``None``: none said)
    sampling: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class RequestBuilder:
    """Builds the bodies of a run: ``model``, its ``provider`` block (JSON), ``max_tokens`` unless a
    row sets its own, ``stream`` and the sampling parameters every row gets unless it sets its own;
    ``advice``: what the model card fixes (``rules.sampling``), sent where neither the run nor the
    row sets the parameter; ``identity``: each row's ``session_id`` (see the module)."""

    model: str
    provider_json: str
    max_tokens: int = 4096
    stream: bool = False
    temperature: float | None = None
    reasoning: dict[str, Any] | None = None
    advice: SamplingAdvice | None = None
    identity: bool = False
    _prefix: bytes = field(init=False, repr=False, compare=False)
    _plain_sampling: dict[str, Any] | None = field(init=False, repr=False, compare=False)
    _plain_sampling_json: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_prefix", self.prefix().encode())
        # the sampling of a row that sets none of its own (the common row: computed once),
        # and its part of the body (``_own``: the same bytes, not encoded again per row)
        plain = PromptRow("", "", [], {}, 0)
        sampling = self._sampling(plain)
        object.__setattr__(self, "_plain_sampling", sampling)
        said = "".join(f",{dumps(k)}:{dumps(v)}" for k, v in (sampling or {}).items())
        object.__setattr__(self, "_plain_sampling_json", said)

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
        return self._own(row, max_tokens)[0]

    def sampling_of(self, row: PromptRow) -> dict[str, Any] | None:
        """The sampling ``row`` is sent with: the run's ``temperature`` or its card's advice
        where the row sets none, and the row's own (``None``: none said)."""
        if not row.params.keys() & _SAMPLED:
            return self._plain_sampling  # (shared: records serialize it, nobody changes it)
        return self._sampling(row)

    def _sampling(self, row: PromptRow) -> dict[str, Any] | None:
        params = row.params
        said: dict[str, Any] = {}
        advice = self.advice
        if advice is not None:
            thinking = thinking_on(
                params.get("reasoning", self.reasoning), params.get("reasoning_effort")
            )
            said.update(advice.values(thinking=thinking))
        if self.temperature is not None:
            said["temperature"] = self.temperature
        for name in ("temperature", "top_p"):
            if name in params:
                said[name] = params[name]
        return said or None

    def _own(self, row: PromptRow, max_tokens: int) -> tuple[str, dict[str, Any] | None]:
        params = row.params
        parts = [',"messages":', dumps(row.messages), ',"max_tokens":', str(max_tokens)]
        if self.identity and "session_id" not in params:
            parts += [',"session_id":"', row_session(row.id), '"']
        sampling = None
        if self.advice is not None:
            sampling = self.sampling_of(row)
            if not params and sampling is self._plain_sampling:
                parts.append(self._plain_sampling_json)  # (the common row)
            else:
                for name, value in (sampling or {}).items():
                    if name not in params:
                        parts += [",", dumps(name), ":", dumps(value)]
        elif self.temperature is not None and "temperature" not in params:
            parts += [',"temperature":', dumps(self.temperature)]
        if self.reasoning is not None and "reasoning" not in params:
            parts += [',"reasoning":', dumps(self.reasoning)]
        for key, value in params.items():
            if key != "max_tokens":
                parts += [",", dumps(key), ":", dumps(value)]
        parts.append("}")
        if sampling is None and (self.temperature is not None or params):
            sampling = self.sampling_of(row)
        return "".join(parts), sampling

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
        text, sampling = self._own(row, tokens)
        own = text.encode()
        # the bytes the row adds to the prefix: what its prompt may be made of
        shape = request_shape(len(own), row.messages, row.params)
        worst = prices.worst_case_usd(
            prompt_tokens=shape.prompt_tokens + extra_prompt_tokens, max_tokens=tokens, shape=shape
        )
        return Request(prefix + own, tokens, shape, worst, sampling)

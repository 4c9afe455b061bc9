"""The request a row sends: its body, byte for byte, and the worst case it may cost, in one place.

One builder for the run, the dry run and the benchmarks: the body is the run's fixed prefix (model,
the policy's ``provider`` block serialized once, ``stream``) spliced with the row's own part
(messages, ``max_tokens``, the row's ``session_id``, the run's sampling parameters unless the row
sets them, the sampling its model card fixes unless the run or the row sets other values, the
row's parameters). The worst case (``run.money.spend``) bounds the prompt by every byte of the row's own
part. ``RequestBuilder.build`` makes both at once (``Request``): the run reserves what it sends.

The body is a pure function of the run's settings and the row (compact JSON, keys in the order the
row and the run give them; nothing timed or counted goes in it, and a mix's draw is a hash of the
row id): the same row gives the same bytes in any process, so a row resent after a kill -9 is the
very request OpenRouter's response cache keyed (``identity``). With ``identity`` each row carries
``session_id`` (``row_session``: a hash of its job, its id, ``row#k`` for a sample, and its
attempt kind, ``PromptRow.cache_kind``): OpenRouter's own field for grouping requests in its logs, which no model
reads, and which the response cache hashes with the rest of the body (the documented key: body,
model, key, stream mode), so two rows with one prompt, two samples of one row, a redo of a cut
answer and a retry after a bad answer are each a request of their own, never a cached answer; a
resend of the same attempt is the same request, answered free.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from json.encoder import encode_basestring
from typing import TYPE_CHECKING, Any

from openrouter_probe.rules.sampling import SamplingAdvice, thinking_on
from openrouter_probe.run.money.spend import Prices, RequestShape, request_shape
from openrouter_probe.run.rows import PromptRow

if TYPE_CHECKING:
    from openrouter_probe.rules.sampling_mix import SamplingMix

__all__ = ["SAMPLING_KEYS", "Request", "RequestBuilder", "dumps", "row_session"]


#: One encoder (``json.dumps`` with options builds a new one per call: a step per request).
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
#: Its C loop, made once: ``JSONEncoder.encode`` makes one per call (half the cost of a row's
#: messages). The same arguments but the circular check's (a row read from JSON has no cycle).
#: (None where there is no C loop: PyPy's ``json.encoder`` has no ``c_make_encoder``.)
_C_LOOP = getattr(json.encoder, "c_make_encoder", None)
_ITERENCODE = (
    None
    if _C_LOOP is None
    else _C_LOOP(None, _ENCODER.default, encode_basestring, None, ":", ",", False, False, True)
)


def dumps(value: Any) -> str:
    """Compact JSON, non-ASCII kept: the form every body and journal line uses (the text of
    ``json.dumps(value, ensure_ascii=False, separators=(",", ":"))``)."""
    if isinstance(value, str):
        return encode_basestring(value)
    if _ITERENCODE is None:
        return _ENCODER.encode(value)
    return "".join(_ITERENCODE(value, 0))


#: Row parameters that change the sampling a row is sent with (``sampling_of``).
_SAMPLED = frozenset({"temperature", "top_p", "reasoning", "reasoning_effort"})
#: The body keys a record's ``sampling_params`` holds (what the request was sampled with, as
#: speculators' ``regenerate-responses`` records it: the keys as sent, flat), in this order.
SAMPLING_KEYS = (
    "temperature", "top_p", "top_k", "min_p", "top_a", "frequency_penalty", "presence_penalty",
    "repetition_penalty", "seed", "reasoning", "reasoning_effort",
)  # fmt: skip
_SAMPLING = frozenset(SAMPLING_KEYS)


def row_session(row_id: str, kind: str = "", job: str = "") -> str:
    """The ``session_id`` of row ``row_id`` (``row#k`` for a sample), its attempt ``kind``
    (``PromptRow.cache_kind``; ``""``: the row's own answer) and its ``job`` (the salt the
    output's first run drew; ``""``: an output written before it): ``orp-`` and 32 hex digits of
    their SHA-256 (stable across processes and runs; within OpenRouter's 128 characters)."""
    key = row_id if not (kind or job) else f"{row_id}\0{kind}\0{job}"
    return "orp-" + hashlib.sha256(key.encode()).hexdigest()[:32]


@dataclass(slots=True)
class Request:
    """One request of a row: the body it sends, its ``max_tokens``, what it may be billed for
    besides its output (``shape``) and the most it may cost (``worst_usd``). Never changed once
    built (a retry builds another); not frozen: one is built per request, and a frozen
    dataclass pays an ``object.__setattr__`` per field."""

    body: bytes
    max_tokens: int
    shape: RequestShape
    worst_usd: Decimal
    #: what it was sampled with (``SAMPLING_KEYS`` as sent: the row's own, the run's, its draw of
    #: the run's mix, its model card's), the record's ``sampling_params`` (``{}``: none sent)
    sampling: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class RequestBuilder:
    """Builds the bodies of a run: ``model``, its ``provider`` block (JSON), ``max_tokens`` unless a
    row sets its own, ``stream`` and the sampling parameters every row gets unless it sets its own;
    ``mix``: each row's draw of the run's sampling mix (``rules.sampling_mix``), which wins over
    the run's ``temperature`` and ``reasoning``; ``advice``: what the model card fixes
    (``rules.sampling``), sent where neither the run nor the row sets the parameter, for the
    thinking the row is sent with; ``identity``: each row's ``session_id`` (see the module)."""

    model: str
    provider_json: str
    max_tokens: int = 4096
    stream: bool = False
    temperature: float | None = None
    reasoning: dict[str, Any] | None = None
    advice: SamplingAdvice | None = None
    identity: bool = False
    mix: SamplingMix | None = None
    #: the job part of each row's identity (``row_session``)
    job: str = ""
    _prefix: bytes = field(init=False, repr=False, compare=False)
    #: the run's sampling part of a row that sets none of its own, by its draw (the common row:
    #: computed once per draw) and its JSON
    _parts: dict[Any, tuple[dict[str, Any], str]] = field(
        init=False, repr=False, compare=False, default_factory=dict
    )

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

    def sampling_of(self, row: PromptRow) -> dict[str, Any]:
        """What ``row`` is sent with (``SAMPLING_KEYS``): the run's part (its mix's draw, its
        ``temperature`` and ``reasoning``, its card's advice) where the row sets none, and the
        row's own (``{}``: nothing said, the provider's defaults)."""
        return self._sampling(row, self._run_part(row)[0])

    def _sampling(self, row: PromptRow, run: dict[str, Any]) -> dict[str, Any]:
        """``sampling_of``, given the run's part."""
        params = row.params
        if not params.keys() & _SAMPLING:
            return run  # (shared: records serialize it, nobody changes it)
        said = {**run, **{k: params[k] for k in SAMPLING_KEYS if k in params}}
        return {k: said[k] for k in SAMPLING_KEYS if k in said}

    def _run_part(self, row: PromptRow) -> tuple[dict[str, Any], str]:
        """The sampling parameters the run adds to ``row``'s body (none the row sets itself), in
        body order (``temperature``, ``top_p``, ``reasoning``), and their JSON."""
        params = row.params
        draw = self.mix.draw(row.id) if self.mix is not None else None
        common = not params.keys() & _SAMPLED
        key = draw if common else None
        if common and key in self._parts:
            return self._parts[key]
        reasoning, temperature = self.reasoning, self.temperature
        if draw is not None:
            reasoning = draw.reasoning(reasoning)
            if draw.temperature is not None:
                temperature = draw.temperature
        said: dict[str, Any] = {}
        if self.advice is not None:
            thinking = thinking_on(
                params.get("reasoning", reasoning), params.get("reasoning_effort")
            )
            said.update(self.advice.values(thinking=thinking))
        if temperature is not None:
            said["temperature"] = temperature
        if reasoning is not None:
            said["reasoning"] = reasoning
        part = {k: v for k, v in said.items() if k not in params}
        text = "".join(f",{dumps(k)}:{dumps(v)}" for k, v in part.items())
        if common:
            self._parts[key] = (part, text)
        return part, text

    def _own(self, row: PromptRow, max_tokens: int) -> tuple[str, dict[str, Any]]:
        params = row.params
        parts = [',"messages":', dumps(row.messages), ',"max_tokens":', str(max_tokens)]
        if self.identity and "session_id" not in params:
            parts += [',"session_id":"', row_session(row.id, row.cache_kind, self.job), '"']
        run, text = self._run_part(row)
        parts.append(text)
        for key, value in params.items():
            if key != "max_tokens":
                parts += [",", dumps(key), ":", dumps(value)]
        parts.append("}")
        return "".join(parts), self._sampling(row, run)

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

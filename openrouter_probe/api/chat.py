"""Typed views of what a request returns and costs: chat completions, usage, generations, the key.

``ChatCompletion`` is a ``POST /chat/completions`` reply, one body or one whole stream, read by
``read_completion`` and ``read_stream``: the one model of a completion, used by the generator's
transport and the tests alike (plain dict reads: it is the hot path; ``Usage`` types its usage).
``Generation`` (with ``ProviderResponse``, one routing attempt) is ``GET /generation``, read by
``read_generation`` for the client and the run alike; ``KeyInfo`` (with ``KeyBudget``) is
``GET /key``. The pydantic ones read tolerantly like every payload in
``openrouter_probe.api.schema``: unknown keys are kept, and only the fields the library computes from
are validated strictly.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any, ClassVar

from openrouter_probe.api.schema import Number, _Payload
from openrouter_probe.api.sse import parse_sse_events
from openrouter_probe.errors import APIError

__all__ = [
    "ChatCompletion",
    "CompletionTokensDetails",
    "Generation",
    "GenerationFound",
    "KeyBudget",
    "KeyInfo",
    "PromptTokensDetails",
    "ProviderResponse",
    "Usage",
    "merge_reasoning_details",
    "read_completion",
    "read_cost",
    "read_generation",
    "read_stream",
    "reasoning_text",
]


_SCOPES = {
    "key_limit": "key's own limit",
    "api_key": "key's budget",
    "workspace": "workspace budget",
    "member": "member budget",
    "workspace_default_member": "workspace's default member budget",
    "workspace_default_key": "workspace's default key budget",
}


def _usd(amount: Decimal) -> str:
    """Dollars as a budget line shows them: cents, or the digits a sub-cent amount needs."""
    if amount == 0 or abs(amount) >= Decimal("0.01"):
        return f"${amount:,.2f}"
    return f"${amount.quantize(Decimal('0.000001')).normalize():f}"


class KeyBudget(_Payload):
    """One budget layer that ``GET /key`` lists (SDK 1.3.84 ``KeyBudget``; OPENROUTER.md 15).

    ``scope`` is ``workspace_default_member``, ``workspace_default_key``, ``member``, ``api_key``,
    ``workspace``, ``key_limit`` or a newer value; ``remaining_usd`` (``limit_usd - spend_usd``)
    zero or below means this layer answers every request with a 403 until ``resets_at``.
    """

    core_fields: ClassVar[frozenset[str] | None] = frozenset()

    scope: str | None = None
    limit_usd: Number | None = None
    spend_usd: Number | None = None
    remaining_usd: Number | None = None
    reset_interval: str | None = None
    resets_at: str | None = None
    include_byok: bool | None = None
    budget_id: str | None = None
    guardrail_id: str | None = None

    @property
    def remaining(self) -> Decimal | None:
        """What is left in USD (``remaining_usd``, else ``limit_usd - spend_usd``)."""
        if self.remaining_usd is not None:
            return Decimal(str(self.remaining_usd))
        if self.limit_usd is not None and self.spend_usd is not None:
            return Decimal(str(self.limit_usd)) - Decimal(str(self.spend_usd))
        return None

    def describe(self) -> str:
        """``"the workspace budget ($0.40 of $500.00 left, resets monthly)"``, for one line."""
        scope = _SCOPES.get(
            self.scope or "", f"{(self.scope or 'unknown').replace('_', ' ')} budget"
        )
        if self.guardrail_id:
            scope = "guardrail budget"
        left = self.remaining
        have = "" if left is None else f"{_usd(max(left, Decimal(0)))} of "
        limit = "?" if self.limit_usd is None else _usd(Decimal(str(self.limit_usd)))
        reset = f"resets {self.reset_interval}" if self.reset_interval else "never resets"
        return f"the {scope} ({have}{limit} left, {reset})"


class KeyInfo(_Payload):
    """``GET /key``: the calling key's limits and usage, in USD.

    ``limit`` and ``limit_remaining`` are the key's own limit only; ``budgets`` every layer that
    enforcement checks (guardrail, workspace, the key's limit) and ``effective_budget`` the one
    that blocks first (``blocking_budget`` falls back on the key's limit for older answers).
    """

    label: str | None = None
    limit: Number | None = None
    limit_remaining: Number | None = None
    limit_reset: str | None = None
    include_byok_in_limit: bool | None = None
    usage: Number | None = None
    usage_daily: Number | None = None
    usage_weekly: Number | None = None
    usage_monthly: Number | None = None
    byok_usage: Number | None = None
    byok_usage_daily: Number | None = None
    byok_usage_weekly: Number | None = None
    byok_usage_monthly: Number | None = None
    is_free_tier: bool | None = None
    is_management_key: bool | None = None
    is_provisioning_key: bool | None = None
    creator_user_id: str | None = None
    expires_at: str | None = None
    rate_limit: Any = None
    budgets: list[KeyBudget] | None = None
    effective_budget: KeyBudget | None = None
    workspace_id: str | None = None

    @property
    def blocking_budget(self) -> KeyBudget | None:
        """The budget that blocks requests first: ``effective_budget``; else the spent or least
        remaining of ``budgets``; else, for an answer without them, the key's own limit."""
        if self.effective_budget is not None:
            return self.effective_budget
        layers = [b for b in self.budgets or () if b.remaining is not None]
        if layers:
            return min(layers, key=lambda b: b.remaining or Decimal(0))
        if self.limit is None:
            return None
        return KeyBudget(
            scope="key_limit",
            limit_usd=self.limit,
            remaining_usd=self.limit_remaining,
            reset_interval=self.limit_reset,
        )


class ProviderResponse(_Payload):
    """One routing attempt inside a generation (fallbacks included)."""

    endpoint_id: str | None = None
    id: str | None = None
    is_byok: bool | None = None
    latency: Number | None = None
    model_permaslug: str | None = None
    provider_name: str | None = None
    routed_service_tier: str | None = None
    status: int | None = None


class Generation(_Payload):
    """``GET /generation?id=``: what a request cost and who served it. ``total_cost`` is USD.

    Nothing in it fails the record: a field of an odd shape (``total_cost: "n/a"``) is kept in
    ``raw_fields``, so ``cost`` can say it is not a cost rather than "no record".
    """

    core_fields: ClassVar[frozenset[str] | None] = frozenset()

    id: str | None = None
    request_id: str | None = None
    upstream_id: str | None = None
    created_at: str | None = None
    model: str | None = None
    origin: str | None = None
    api_type: str | None = None
    streamed: bool | None = None
    cancelled: bool | None = None
    latency: Number | None = None
    moderation_latency: Number | None = None
    generation_time: Number | None = None
    total_cost: Number | None = None
    usage: Number | None = None
    upstream_inference_cost: Number | None = None
    cache_discount: Number | None = None
    is_byok: bool | None = None
    tokens_prompt: int | None = None
    tokens_completion: int | None = None
    native_tokens_prompt: int | None = None
    native_tokens_completion: int | None = None
    native_tokens_reasoning: int | None = None
    native_tokens_cached: int | None = None
    finish_reason: str | None = None
    native_finish_reason: str | None = None
    provider_name: str | None = None
    provider_responses: list[ProviderResponse] | None = None
    service_tier: str | None = None
    router: str | None = None
    data_region: str | None = None

    def cost(self) -> tuple[Decimal | None, bool]:
        """``total_cost`` read as ``read_cost`` reads ``usage.cost``: ``(cost, invalid)``."""
        return read_cost(self.raw_fields.get("total_cost", self.total_cost))


#: What ``read_generation`` found: the record, ``None`` (not there yet: ``/generation`` is
#: eventually consistent; 429 and 5xx too: ask again), or why it cannot be read (``str``).
GenerationFound = Generation | str | None


def read_generation(status: int, data: bytes | str) -> GenerationFound:
    """Read a ``GET /generation`` answer, for the sync client and the run alike: a 200 gives the
    record (``data``); 404 (not visible yet), 429 and 5xx are ``None``; anything else says why
    it is unreadable (``"HTTP 401"``, ``"not a /generation body"``)."""
    if status == 404 or status == 429 or status >= 500:
        return None
    if status != 200:
        return f"HTTP {status}"
    try:
        payload = json.loads(data)
    except ValueError:
        return "not a /generation body"
    record = payload.get("data") if isinstance(payload, dict) else None
    if not isinstance(record, dict):
        return "not a /generation body"
    return Generation.model_validate(record)


class CompletionTokensDetails(_Payload):
    reasoning_tokens: int | None = None
    image_tokens: int | None = None
    audio_tokens: int | None = None


class PromptTokensDetails(_Payload):
    cached_tokens: int | None = None
    cache_write_tokens: int | None = None
    audio_tokens: int | None = None


class Usage(_Payload):
    """Token counts and cost of one chat request.

    ``completion_tokens`` *includes* ``completion_tokens_details.reasoning_tokens`` (reasoning is
    billed as output); ``cost`` is the USD actually charged.
    """

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int | None = None
    cost: Number | None = None
    is_byok: bool | None = None
    prompt_tokens_details: PromptTokensDetails | None = None
    completion_tokens_details: CompletionTokensDetails | None = None
    cost_details: dict[str, Any] | None = None

    @property
    def reasoning_tokens(self) -> int:
        """Reasoning tokens billed (part of ``completion_tokens``); 0 when not reported."""
        details = self.completion_tokens_details
        return (details.reasoning_tokens or 0) if details else 0


def read_cost(value: Any) -> tuple[Decimal | None, bool]:
    """Read ``usage.cost``: ``(cost, invalid)``. A cost is a finite number >= 0; anything else
    (``"n/a"``, ``NaN``, a negative number, ``true``) is invalid, never zero."""
    kind = type(value)
    if kind is float or kind is int:  # what OpenRouter sends: a plain number (NaN fails >= 0)
        if value >= 0 and value != math.inf:
            return Decimal(str(value)), False
        return None, True
    if value is None:
        return None, False
    if kind is not str:
        return None, True  # true, a list, an object
    try:
        cost = Decimal(value.strip())
    except InvalidOperation:
        return None, True
    if not cost.is_finite() or cost < 0:
        return None, True
    return cost, False


@dataclass(slots=True)
class ChatCompletion:
    """A chat completion as a paid run and its tests read it: one body, or one whole stream.

    Read by ``read_completion`` (a non-streaming body) and ``read_stream`` (a whole SSE body): plain
    dict reads, no validation per request (the generator's hot path). ``provider`` is the display
    name of who served it (not in the spec, present in every real capture); ``model`` the permaslug
    used; ``usage`` the object as returned (``Usage.model_validate`` types it);
    ``reasoning_details`` the list as sent (merged by index for a stream), kept verbatim for
    whoever sends the turn back (signatures, encrypted blocks); ``reasoning`` its text, from
    ``message.reasoning`` or, when that is null, from the details' ``reasoning.text`` and
    ``reasoning.summary`` entries.

    ``error`` is the error the answer reports (a top-level ``error``, a ``choices[].error`` or a
    ``finish_reason`` of ``"error"``: all three occur with HTTP 200; a stream's mid-stream error
    event), with what came before it kept in ``content`` and ``reasoning``; ``broken`` says why the
    body is not a whole answer (not JSON, no choices, a stream cut before its finish).
    """

    provider: str | None
    model: str | None
    finish_reason: str | None
    content: str | None
    reasoning: str | None
    usage: dict[str, Any] | None
    generation_id: str | None
    tool_calls: list[dict[str, Any]] | None = None
    logprobs: dict[str, Any] | None = None  # choices[0].logprobs (non-streaming), when sent
    reasoning_details: list[dict[str, Any]] | None = None
    native_finish_reason: str | None = None
    error: dict[str, Any] | None = None
    broken: str | None = None

    @property
    def failed(self) -> bool:
        """True when the answer reports an error (``error``) or is not a whole one (``broken``)."""
        return self.error is not None or self.broken is not None

    @property
    def cost_usd(self) -> Decimal | None:
        """``usage.cost``: what OpenRouter charged, never recomputed (``None``: absent or invalid)."""
        return read_cost((self.usage or {}).get("cost"))[0]

    @property
    def cost_invalid(self) -> bool:
        """Whether ``usage.cost`` is there but not a cost (``"n/a"``, negative, NaN)."""
        return read_cost((self.usage or {}).get("cost"))[1]

    @property
    def completion_tokens(self) -> int:
        value = (self.usage or {}).get("completion_tokens")
        return value if isinstance(value, int) and not isinstance(value, bool) else 0

    @property
    def typed_usage(self) -> Usage | None:
        """``usage`` validated (token details, ``reasoning_tokens``), or ``None``."""
        return None if self.usage is None else Usage.model_validate(self.usage)


def reasoning_text(details: Any) -> str | None:
    """The readable text of ``reasoning_details``: its ``reasoning.text`` entries' ``text`` and
    its ``reasoning.summary`` entries' ``summary``, in order (encrypted entries have none)."""
    if not isinstance(details, list):
        return None
    parts = []
    for entry in details:
        if not isinstance(entry, dict):
            continue
        kind = entry.get("type")
        value = entry.get("summary") if kind == "reasoning.summary" else entry.get("text")
        if kind in ("reasoning.text", "reasoning.summary") and isinstance(value, str):
            parts.append(value)
    return "\n\n".join(p for p in parts if p) or None


def _body_error(obj: dict[str, Any]) -> dict[str, Any] | None:
    """The error a 200 body or chunk reports, if any (top-level error, choice error, finish)."""
    error = obj.get("error")
    if isinstance(error, dict):
        return error
    for choice in obj.get("choices") or ():
        if not isinstance(choice, dict):
            continue
        inner = choice.get("error")
        if isinstance(inner, dict):
            return inner
        if choice.get("finish_reason") == "error":
            native = choice.get("native_finish_reason")
            return {"message": f"the provider ended the answer with an error ({native})"}
    return None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def read_completion(body: bytes | str, *, generation_id: str | None = None) -> ChatCompletion:
    """Read a non-streaming 200 body (whitespace keep-alive padding allowed).

    ``generation_id`` (the ``X-Generation-Id`` header) stands in for a body without an ``id``.
    """
    try:
        obj = json.loads(body)
    except ValueError:
        text = body.decode(errors="replace") if isinstance(body, bytes) else body
        snippet = " ".join(text.split())[:120]
        return _broken(f"the answer is not JSON: {snippet!r}", generation_id)
    if not isinstance(obj, dict):
        return _broken("the answer is not a JSON object", generation_id)
    ident = obj.get("id") if isinstance(obj.get("id"), str) else generation_id
    usage = obj.get("usage")
    usage = usage if isinstance(usage, dict) else None
    choices = obj.get("choices") or []
    choice = choices[0] if choices and isinstance(choices[0], dict) else {}
    message = choice.get("message") or {}
    if not isinstance(message, dict):
        message = {}
    details = message.get("reasoning_details")
    details = details if isinstance(details, list) and details else None
    reasoning = message.get("reasoning")
    if reasoning is None and details is not None:
        reasoning = reasoning_text(details)
    completion = ChatCompletion(
        provider=obj.get("provider"),
        model=obj.get("model"),
        finish_reason=choice.get("finish_reason"),
        content=message.get("content"),
        reasoning=reasoning,
        usage=usage,
        generation_id=ident,
        tool_calls=message.get("tool_calls") or None,
        logprobs=choice.get("logprobs") if isinstance(choice.get("logprobs"), dict) else None,
        reasoning_details=details,
        native_finish_reason=_text(choice.get("native_finish_reason")),
        error=_body_error(obj),
    )
    if completion.error is None and not choice:
        completion.broken = "the answer has no choices"
    return completion


def _broken(why: str, generation_id: str | None) -> ChatCompletion:
    return ChatCompletion(None, None, None, None, None, None, generation_id, broken=why)


def _merge_tool_calls(calls: dict[int, dict[str, Any]], deltas: list[Any]) -> None:
    for delta in deltas:
        if not isinstance(delta, dict):
            continue
        index = delta.get("index", len(calls))
        call = calls.setdefault(index, {"type": "function", "function": {"arguments": ""}})
        if delta.get("id"):
            call["id"] = delta["id"]
        if delta.get("type"):
            call["type"] = delta["type"]
        fn = delta.get("function") or {}
        if fn.get("name"):
            call["function"]["name"] = fn["name"]
        if fn.get("arguments"):
            call["function"]["arguments"] += fn["arguments"]


#: The keys of a plain streamed ``reasoning.text`` piece: only its text needs joining.
_PLAIN_DETAIL = frozenset({"type", "text", "format", "index"})
_JOINED = ("text", "summary", "data")


def merge_reasoning_details(pieces: list[list[Any]]) -> list[dict[str, Any]] | None:
    """A stream's ``delta.reasoning_details`` lists as one: entries of the same ``index`` and
    ``type`` joined (their ``text``, ``summary`` and ``data`` strings concatenated; any other key,
    a ``signature``, an ``id``, ``format``, taken from the last piece that has it)."""
    plain = _plain_text_details(pieces)
    if plain is not None:
        return plain
    merged: dict[tuple[Any, Any], dict[str, Any]] = {}
    joined: dict[tuple[Any, Any], dict[str, list[str]]] = {}
    for piece in pieces:
        for entry in piece:
            if type(entry) is not dict:
                continue
            key = (entry.get("index"), entry.get("type"))
            into = merged.get(key)
            if into is None:
                merged[key] = dict(entry)
                joined[key] = {n: [v] for n in _JOINED if isinstance(v := entry.get(n), str)}
                continue
            parts = joined[key]
            if entry.keys() == _PLAIN_DETAIL and entry["format"] == into["format"]:
                text = entry["text"]
                if type(text) is str:  # the hot case: one more piece of text
                    if "text" in parts:
                        parts["text"].append(text)
                    else:
                        parts["text"] = [text]
                    continue
            for name, value in entry.items():
                if name in _JOINED and isinstance(value, str):
                    parts.setdefault(name, []).append(value)
                elif value is not None:
                    into[name] = value
    for key, parts in joined.items():
        for name, values in parts.items():
            merged[key][name] = "".join(values)
    return list(merged.values()) or None


def _plain_text_details(pieces: list[list[Any]]) -> list[dict[str, Any]] | None:
    """The common stream, merged fast: every piece one ``reasoning.text`` entry of the same index
    and format holding only its text (a 500-chunk answer has 400 of them). ``None`` otherwise."""
    firsts = [p[0] for p in pieces if len(p) == 1]
    if len(firsts) != len(pieces):
        return None
    try:
        shapes = {(e["type"], e["index"], e["format"], len(e)) for e in firsts}
        if len(shapes) != 1 or next(iter(shapes))[::3] != ("reasoning.text", 4):
            return None
        text = "".join([e["text"] for e in firsts])
    except (KeyError, TypeError):  # another shape (a signature piece, not a dict): merge slowly
        return None
    return [{**firsts[0], "text": text}]


def read_stream(body: bytes | str, *, generation_id: str | None = None) -> ChatCompletion:
    """Read a whole SSE body: content and reasoning deltas joined, tool-call deltas merged by
    index, reasoning details merged, the usage chunk taken wherever it comes.

    A mid-stream error event ends it (``error``, with what came before kept); a stream that stops
    before a finish reason and ``[DONE]`` (a dropped connection) is ``broken``. The loop is the hot
    path of long streams (a 500-chunk answer is 500 events): it reads each event's fields once
    and calls out only for what is rare (errors, tool calls).
    """
    text = body.decode("utf-8", errors="replace") if isinstance(body, bytes) else body
    content: list[str] = []
    reasoning: list[str] = []
    details: list[list[Any]] = []
    calls: dict[int, dict[str, Any]] = {}
    finish: str | None = None
    native: str | None = None
    usage: dict[str, Any] | None = None
    head: dict[str, Any] = {}
    error: dict[str, Any] | None = None
    broken: str | None = None
    # Any error (a key, or a finish_reason) shows as this string: one scan of the whole text
    # spares looking for one in each of 500 events of a stream that has none.
    may_fail = '"error"' in text
    try:
        for event in parse_sse_events(text):
            if not head:
                head = event
            choices = event.get("choices")
            if may_fail and ("error" in event or (choices and _has_error(choices))):
                error = _body_error(event)
                if error is not None:
                    found = event.get("usage")
                    if isinstance(found, dict):
                        usage = found
                    break
            found = event.get("usage")
            if found is not None and isinstance(found, dict):
                usage = found
            for choice in choices or ():
                if not isinstance(choice, dict):
                    continue
                delta = choice.get("delta")
                if delta:
                    piece = delta.get("content")
                    if piece:
                        content.append(piece)
                    piece = delta.get("reasoning")
                    if piece:
                        reasoning.append(piece)
                    more = delta.get("reasoning_details")
                    if more:
                        details.append(more)
                    if delta.get("tool_calls"):
                        _merge_tool_calls(calls, delta["tool_calls"])
                if choice.get("finish_reason"):
                    finish = choice["finish_reason"]
                    native = choice.get("native_finish_reason")
    except APIError as exc:
        broken = f"broken stream: {exc}"
    ident = head.get("id") if isinstance(head.get("id"), str) else generation_id
    merged = merge_reasoning_details(details) if details else None
    said = "".join(reasoning) or None
    if said is None and merged is not None:
        said = reasoning_text(merged)
    if error is None and broken is None and (finish is None or "data: [DONE]" not in text):
        broken = "the stream ended before its finish (connection dropped?)"
    return ChatCompletion(
        provider=head.get("provider"),
        model=head.get("model"),
        finish_reason=finish,
        content="".join(content),
        reasoning=said,
        usage=usage,
        generation_id=ident,
        tool_calls=[calls[i] for i in sorted(calls)] or None,
        reasoning_details=merged,
        native_finish_reason=_text(native),
        error=error,
        broken=broken,
    )


def _has_error(choices: Any) -> bool:
    """Whether a choice carries an error or ends with one (then ``_body_error`` reads it)."""
    return any(
        isinstance(c, dict) and ("error" in c or c.get("finish_reason") == "error") for c in choices
    )

"""Response bodies as OpenRouter sends them (the real captures in ``tests/data/captures/``).

The catalogue bodies (``/models``, ``/models/{id}/endpoints``) and the account's (``fake.account``:
``/key``, ``/credits``; ``fake.generation``: ``/generation``) carry every field the official
``openrouter`` SDK (1.3.84) requires, with the values a plain pay-as-you-go account sees
(``tests/fake/test_sdk.py`` parses each with the SDK's own models).

Non-streaming bodies start with whitespace keep-alive padding; streams open with
``: OPENROUTER PROCESSING``, send reasoning deltas, then content deltas, a chunk with the
``finish_reason``, the usage chunk with the ``finish_reason`` repeated, and ``data: [DONE]``. Errors use
the envelope ``{"error": {"message", "code", "metadata"?}}`` with the real messages where known.
Builders return ``bytes`` (or ``str`` pieces joined by the caller); they are on the hot path, so the
repeated part of every stream chunk is serialized once.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from decimal import Decimal
from email.utils import format_datetime
from typing import Any

from aiohttp import web

from openrouter_probe.api.schema import Endpoint
from openrouter_probe.fake.billing import Charge
from openrouter_probe.fake.content import Answer
from openrouter_probe.rules.routing import service_tier

__all__ = [
    "DONE",
    "PADDING",
    "PROCESSING",
    "ChunkWriter",
    "choices_json",
    "completion_body",
    "endpoint_entry",
    "error_body",
    "error_response",
    "frame_count",
    "json_response",
    "logprobs_object",
    "model_entry",
    "provider_entry",
    "usage_json",
]

#: Keep-alive whitespace before a non-streaming body (the K2.5 Inceptron capture has this much).
PADDING = b"\n         " * 8 + b"\n"
PROCESSING = b": OPENROUTER PROCESSING\n\n"
DONE = b"data: [DONE]\n\n"

_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def usage_json(charge: Charge) -> str:
    """``usage`` in OpenRouter's full shape, from a template (the hot path of every answer).
    ``cost`` is OpenRouter's part, ``cost_details.upstream_inference_cost`` the provider's
    (equal to ``cost`` unless the answer is BYOK: OPENROUTER.md 7.2, 19)."""
    cost = repr(float(charge.cost_usd))
    upstream = repr(float(charge.upstream_usd))
    tools = (
        f',"server_tool_use_details":{{"web_search_requests":{charge.searches}}}'
        if charge.searches
        else ""
    )
    return (
        f'{{"prompt_tokens":{charge.prompt_tokens},"completion_tokens":{charge.completion_tokens},'
        f'"total_tokens":{charge.prompt_tokens + charge.completion_tokens},"cost":{cost},'
        f'"is_byok":{"true" if charge.byok else "false"},'
        '"prompt_tokens_details":{"cached_tokens":0,"cache_write_tokens":0,'
        '"audio_tokens":0,"video_tokens":0},'
        f'"cost_details":{{"upstream_inference_cost":{upstream},'
        f'"upstream_inference_prompt_cost":{float(charge.prompt_usd)!r},'
        f'"upstream_inference_completions_cost":{float(charge.completion_usd)!r}}},'
        f'"completion_tokens_details":{{"reasoning_tokens":{charge.reasoning_tokens},'
        f'"image_tokens":0,"audio_tokens":0}}{tools}}}'
    )


def _token_logprob(
    token: str, logprob: float, alternatives: Sequence[str], top: int
) -> dict[str, Any]:
    tops = [{"token": token, "logprob": logprob, "bytes": list(token.encode())}]
    for i, alt in enumerate(alternatives[: max(0, top - 1)]):
        lp = round(logprob - 2.0 - i, 6)
        tops.append({"token": alt, "logprob": lp, "bytes": list(alt.encode())})
    return {**tops[0], "top_logprobs": tops[:top]}


def logprobs_object(
    tokens: Sequence[str],
    logprobs: Sequence[float],
    alternatives: Sequence[Sequence[str]],
    top: int,
) -> dict[str, Any]:
    """``choices[].logprobs`` in OpenAI's shape: ``{"content": [...], "refusal": None}``."""
    return {
        "content": [
            _token_logprob(t, lp, alts, top)
            for t, lp, alts in zip(tokens, logprobs, alternatives, strict=True)
        ],
        "refusal": None,
    }


def choices_json(
    answer: Answer,
    *,
    show_reasoning: bool,
    top: int | None = None,
    choice_error: dict[str, Any] | None = None,
) -> str:
    """The ``choices`` array of a non-streaming body, serialized (callers cache it per answer),
    with ``top`` logprobs when asked for; a ``choice_error`` shows neither them nor reasoning."""
    logprobs = None
    if top is not None and choice_error is None:
        logprobs = logprobs_object(answer.content, answer.logprobs, answer.alternatives, top)
    message: dict[str, Any] = {
        "role": "assistant",
        "content": "".join(answer.content),
        "refusal": None,
        "reasoning": None,
    }
    if answer.tool_calls:
        message["tool_calls"] = [
            {
                "id": call_id,
                "type": "function",
                "index": i,
                "function": {"name": name, "arguments": arguments},
            }
            for i, (call_id, name, arguments) in enumerate(answer.tool_calls)
        ]
    if show_reasoning and answer.reasoning and choice_error is None:
        text = "".join(answer.reasoning)
        message["reasoning"] = text
        message["reasoning_details"] = [
            {"type": "reasoning.text", "text": text, "format": "unknown", "index": 0}
        ]
    choice: dict[str, Any] = {
        "index": 0,
        "logprobs": logprobs,
        "finish_reason": answer.finish_reason,
        "native_finish_reason": answer.finish_reason,
        "message": message,
    }
    if choice_error is not None:
        choice["finish_reason"] = "error"
        choice["native_finish_reason"] = "error"
        choice["error"] = choice_error
        message["content"] = ""
    return _dumps([choice])


@functools.lru_cache(maxsize=1024)
def _model_provider(model: str, provider: str) -> str:
    return f'"model":{_dumps(model)},"provider":{_dumps(provider)}'


def completion_body(
    *,
    generation_id: str,
    created: int,
    model: str,
    provider: str,
    choices: str,
    usage: str | None,
) -> bytes:
    """A non-streaming ``chat.completion`` body, padding included (the Inceptron capture's shape);
    ``choices`` comes from ``choices_json``."""
    text = (
        f'{{"id":"{generation_id}","object":"chat.completion","created":{created},'
        + _model_provider(model, provider)
        + ',"system_fingerprint":null,"choices":'
        + choices
    )
    if usage is not None:
        text += ',"usage":' + usage
    return PADDING + (text + "}").encode()


class ChunkWriter:
    """Serializes the frames of one stream; the part every chunk repeats is encoded once."""

    def __init__(self, *, generation_id: str, created: int, model: str, provider: str) -> None:
        head = {
            "id": generation_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "provider": provider,
        }
        self._head = "data: " + _dumps(head)[:-1] + ',"choices":[{"index":0,"delta":'
        self._open = ',"finish_reason":null,"native_finish_reason":null}]}\n\n'

    def reasoning(self, text: str) -> str:
        delta = {
            "content": "",
            "role": "assistant",
            "reasoning": text,
            "reasoning_details": [
                {"type": "reasoning.text", "text": text, "format": "unknown", "index": 0}
            ],
        }
        return self._head + _dumps(delta) + self._open

    def content(self, text: str, *, logprobs: dict[str, Any] | None = None) -> str:
        tail = self._open
        if logprobs is not None:
            tail = ',"logprobs":' + _dumps(logprobs) + tail
        return self._head + _dumps({"content": text, "role": "assistant"}) + tail

    def tool_call(
        self, index: int, arguments: str, *, call_id: str | None = None, name: str | None = None
    ) -> str:
        """A tool-call delta in OpenAI's shape: the first of a call carries its ``id``, ``type`` and
        ``name``; the rest carry only ``index`` and a piece of ``arguments`` (clients join them by
        ``index``)."""
        call: dict[str, Any] = {"index": index}
        if call_id is not None:
            call |= {"id": call_id, "type": "function"}
        function: dict[str, Any] = {"arguments": arguments}
        if name is not None:
            function = {"name": name, **function}
        call["function"] = function
        delta = {"content": "", "role": "assistant", "tool_calls": [call]}
        return self._head + _dumps(delta) + self._open

    def finish(self, finish_reason: str | None, *, usage: str | None = None) -> str:
        """The finishing chunk; with ``usage`` (``usage_json``) it is the last one, with the
        ``finish_reason`` repeated."""
        delta = '{"content":"","role":"assistant"' + ("}" if usage else ',"reasoning":null}')
        said = "null" if finish_reason is None else f'"{finish_reason}"'
        tail = f',"finish_reason":{said},"native_finish_reason":{said}}}]'
        if usage is not None:
            tail += ',"usage":' + usage
        return self._head + delta + tail + "}\n\n"

    def error(self, error: dict[str, Any]) -> str:
        """A mid-stream error event (HTTP stays 200): top-level ``error``, ``finish_reason: error``."""
        start = self._head[: -len(',"choices":[{"index":0,"delta":')] + ',"error":' + _dumps(error)
        ending = '"finish_reason":"error","native_finish_reason":"error"}]}\n\n'
        return start + ',"choices":[{"index":0,"delta":{"content":""},' + ending

    def frames(
        self, answer: Answer, *, show: bool, n: int, top: int | None
    ) -> Iterator[tuple[str, int, int]]:
        """(frame, reasoning tokens, content tokens) in the order they go out, ``n`` tokens a
        delta: reasoning deltas, content deltas, then each tool call's first delta (id, type,
        name) and its arguments in pieces, the call's tokens spread over them (they count as
        content), so a stream cut short bills what it sent. Excluded reasoning (``show`` false) is
        billed but never sent (an empty frame). Frames are made as they are sent, so an open
        stream holds one batch, not its answer."""
        for i in range(0, len(answer.reasoning), n):
            piece = answer.reasoning[i : i + n]
            yield (self.reasoning("".join(piece)) if show else "", len(piece), 0)
        for i in range(0, len(answer.content), n):
            piece = answer.content[i : i + n]
            lp = None
            if top is not None:
                lp = logprobs_object(
                    piece, answer.logprobs[i : i + n], answer.alternatives[i : i + n], top
                )
            yield (self.content("".join(piece), logprobs=lp), 0, len(piece))
        for index, (call_id, name, arguments) in enumerate(answer.tool_calls):
            yield (self.tool_call(index, "", call_id=call_id, name=name), 0, 0)
            pieces = _pieces(arguments)
            share = answer.tool_tokens // max(1, len(answer.tool_calls))
            sent = 0
            for j, part in enumerate(pieces, start=1):
                upto = round(share * j / len(pieces))
                yield (self.tool_call(index, part), 0, upto - sent)
                sent = upto


#: Characters of a tool call's arguments per stream delta.
_ARGUMENT_PIECE = 16


def _pieces(arguments: str) -> list[str]:
    return [arguments[i : i + _ARGUMENT_PIECE] for i in range(0, len(arguments), _ARGUMENT_PIECE)]


def frame_count(answer: Answer, n: int) -> int:
    """How many frames ``ChunkWriter.frames`` makes of ``answer``, ``n`` tokens a delta."""
    count = -(-len(answer.reasoning) // n) + -(-len(answer.content) // n)
    return count + sum(1 + len(_pieces(arguments)) for _, _, arguments in answer.tool_calls)


def error_body(code: int, message: str, metadata: dict[str, Any] | None = None) -> bytes:
    """OpenRouter's error envelope; the HTTP status equals ``code``."""
    error: dict[str, Any] = {"message": message, "code": code}
    if metadata is not None:
        error["metadata"] = metadata
    return _dumps({"error": error, "user_id": "user_fake"}).encode()


def json_response(
    status: int, body: bytes, headers: Mapping[str, str] | None = None
) -> web.Response:
    return web.Response(status=status, body=body, content_type="application/json", headers=headers)


def error_response(
    status: int, message: str, metadata: dict[str, Any] | None = None
) -> web.Response:
    return json_response(status, error_body(status, message, metadata))


def upstream_error_body(kind: str, *, model: str, provider: str) -> tuple[int, bytes]:
    """A provider's failure as OpenRouter relays it: ``Provider returned error`` with
    ``metadata.raw`` and ``provider_name`` (the 429 is the real Groq capture's wording)."""
    if kind == "upstream_429":
        raw = (
            f"{model} is temporarily rate-limited upstream. Please retry shortly, or add your own "
            "key to accumulate your rate limits: https://openrouter.ai/settings/integrations"
        )
        status = 429
    elif kind == "upstream_502":
        raw, status = "upstream connect error or disconnect/reset before headers", 502
    elif kind == "upstream_503":
        raw, status = f"{provider} is overloaded: no instances available", 503
    else:  # wrapped_400: a 400 whose raw body is a transient 429
        raw = _dumps({"error": {"message": "Rate limit reached, retry shortly", "code": 429}})
        status = 400
    said = {"raw": raw, "provider_name": provider}
    return status, error_body(status, "Provider returned error", said)


def platform_429(*, model: str, reset_ms: int, retry_after_s: int) -> tuple[bytes, dict[str, str]]:
    """OpenRouter's own 429: the body and its ``Retry-After`` and ``X-RateLimit-*`` headers."""
    headers = {
        "Retry-After": str(retry_after_s),
        "X-RateLimit-Limit": "20",
        "X-RateLimit-Remaining": "0",
        "X-RateLimit-Reset": str(reset_ms),
    }
    body = error_body(
        429,
        f"Rate limit exceeded: limit_rpm/{model}. High demand for {model}; please retry shortly.",
        {"headers": {k: v for k, v in headers.items() if k.startswith("X-")}},
    )
    return body, headers


def key_429(*, retry_at: datetime, now: datetime) -> tuple[bytes, dict[str, str]]:
    """A 429 that does not say where it came from (issue 23, a 2026 recording): no
    ``metadata``, no ``X-RateLimit-*`` headers; ``Retry-After`` as an HTTP date, beside the
    ``Date`` it is measured from."""
    headers = {"Retry-After": format_datetime(retry_at, usegmt=True)}
    headers["Date"] = format_datetime(now, usegmt=True)
    return error_body(429, "Rate limit exceeded"), headers


def workspace_budget_403(limit_usd: float) -> bytes:
    """A workspace budget spent: OpenRouter's 403 (its docs' wording, OPENROUTER.md 15)."""
    return error_body(403, f"Workspace monthly budget of ${limit_usd:,.2f} exceeded")


def _tool_choice_support(parameters: Sequence[str]) -> dict[str, bool]:
    """Which ``tool_choice`` values pass: all with ``tool_choice``, ``auto`` (the default) with
    ``tools`` alone, none without tools."""
    full = "tool_choice" in parameters
    tools = full or "tools" in parameters
    return {"auto": tools, "none": full, "required": full, "function": full}


def endpoint_entry(raw: dict[str, Any], endpoint: Endpoint, *, stats: bool) -> dict[str, Any]:
    """One ``/endpoints`` entry: the snapshot's, plus what the API sends today that older
    snapshots lack (``service_tier`` as the routing model reads the endpoint, no native tools, no
    diarization, ``supports_tool_choice`` from its parameters). Without a key (``stats=False``)
    the performance stats are null, as OpenRouter sends them (its API spec, ``PublicEndpoint``)."""
    entry = {
        "native_tools": {},
        "service_tier": service_tier(endpoint),
        "supports_diarization": False,
        "supports_implicit_caching": False,
        "supports_tool_choice": _tool_choice_support(endpoint.supported_parameters),
        **raw,
    }
    if not stats:
        entry["latency_last_30m"] = entry["throughput_last_30m"] = None
        entry.pop("perf_last_30m_by_workload", None)
    return entry


def model_entry(
    model_id: str, permaslug: str, endpoints: Sequence[Endpoint], data: dict[str, Any]
) -> dict[str, Any]:
    """A ``GET /models`` entry built from a snapshot (pricing: the cheapest endpoint's)."""
    first = endpoints[0]
    cheapest = min(endpoints, key=lambda e: e.pricing.completion_usd_per_m or Decimal("Infinity"))
    supported = sorted({p for e in endpoints for p in e.supported_parameters})
    return {
        "id": model_id,
        "canonical_slug": permaslug,
        "hugging_face_id": None,
        "name": data.get("name") or first.model_name,
        "created": data.get("created"),
        "description": data.get("description"),
        "context_length": max(e.context_length or 0 for e in endpoints) or None,
        "architecture": data.get("architecture"),
        "pricing": cheapest.pricing.to_json_dict(),
        "top_provider": {
            "context_length": first.context_length,
            "max_completion_tokens": first.max_completion_tokens,
            "is_moderated": False,
        },
        "per_request_limits": None,
        "supported_parameters": supported,
        "default_parameters": None,
        "supported_voices": None,
        "knowledge_cutoff": None,
        "expiration_date": None,
        "links": {"details": f"/api/v1/models/{permaslug}/endpoints"},
        "reasoning": {"mandatory": False, "default_enabled": True}
        if "reasoning" in supported
        else None,
    }


def provider_entry(name: str, slug: str) -> dict[str, Any]:
    """One ``GET /providers`` entry (the fake knows names and slugs, not policies)."""
    return {
        "name": name,
        "slug": slug,
        "privacy_policy_url": f"https://example.invalid/{slug}/privacy",
        "terms_of_service_url": None,
        "status_page_url": None,
        "headquarters": None,
        "datacenters": None,
    }


#: The in-flight 402's message, as other projects logged it in 2026-09/10 (OPENROUTER.md 18).
IN_FLIGHT_MESSAGE = (
    "This request would exceed your available credits given your current in-flight requests. "
    "Retry after in-flight requests settle, or add credits."
)


def in_flight_402() -> bytes:
    """The account's in-flight budget full: OpenRouter's 402 (sent with ``Retry-After``)."""
    return error_body(
        402,
        IN_FLIGHT_MESSAGE,
        {"reason": "in_flight_budget_exhausted", "limit_source": "openrouter_in_flight_budget"},
    )

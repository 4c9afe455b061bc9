"""One reading of OpenRouter's error envelope, and of every 402 and 403: ``read_error``, ``refusal``.

The envelope is ``{"error": {"code", "message", "metadata"}, "user_id"?}`` (OPENROUTER.md 9.1); a
402 can nest it (``{"error": {"error": {"message": ...}}}``, recorded 2025), and an error event in
a 200 stream can hold nothing but ``error`` and ``user_id``. ``read_error`` finds the innermost
error object, keeps its ``metadata`` (``reason`` and ``limit_source`` among it, 2026), and cleans
the message for a person (whitespace joined, a message that is itself JSON read for its own
message, never cut raw JSON).

``refusal`` names what a 402 or 403 says (``in_flight``, ``key_limit``, ``too_large``,
``credits``, ``budget``, ``attestation``, ``flagged``), one case each, the same for the sync
client, the batch client and the run; the action is the caller's (docs/wire.md has the table,
each case's bodies and sources).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "ErrorEnvelope",
    "FailureKind",
    "Refusal",
    "clean_message",
    "error_message",
    "find_error",
    "int_code",
    "read_error",
    "refusal",
]

#: What an error is to whoever sends again (``api.error_rules`` decides which, from the table):
#: named here, beside the envelope, so that a module that names a kind needs not the table.
FailureKind = Literal["transient", "pause", "held", "row", "run"]

Refusal = Literal[
    "in_flight", "key_limit", "too_large", "credits", "budget", "attestation", "flagged"
]

#: The longest message kept for a person (an upstream ``raw`` is cut separately).
MESSAGE_CHARS = 500
_NESTING = 4  # how deep ``error.error...`` is followed


@dataclass(frozen=True)
class ErrorEnvelope:
    """What an error body says: the innermost error object's ``code``, its message cleaned for a
    person (``""``: none) and its ``metadata`` (``{}``: none). ``error`` is the error object
    itself, nesting resolved (for the error table)."""

    code: int | str | None = None
    message: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)
    error: dict[str, Any] = field(default_factory=dict)


def find_error(payload: Any) -> dict[str, Any] | None:
    """The error object of a parsed body (``payload["error"]``, following ``error.error``). The
    outer object's ``code`` and ``metadata`` fill what the inner one lacks."""
    error = payload.get("error") if isinstance(payload, Mapping) else None
    if not isinstance(error, dict):
        return None
    merged = dict(error)
    for _ in range(_NESTING):
        inner = merged.get("error")
        if not isinstance(inner, dict):
            break
        outer = {k: v for k, v in merged.items() if k != "error"}
        merged = {**outer, **{k: v for k, v in inner.items() if v is not None}}
        if isinstance(outer.get("metadata"), dict) and isinstance(inner.get("metadata"), dict):
            merged["metadata"] = {**outer["metadata"], **inner["metadata"]}
    return merged


def clean_message(text: Any) -> str:
    """A message for a person: whitespace joined, a message that is itself a JSON error body read
    for its own message, at most ``MESSAGE_CHARS`` characters."""
    if not isinstance(text, str):
        return "" if text is None else str(text)
    message = " ".join(text.split())
    if message[:1] in "{[":
        try:
            parsed = json.loads(message)
        except ValueError:
            parsed = None
        inner = find_error(parsed)
        if inner is None and isinstance(parsed, dict) and isinstance(parsed.get("message"), str):
            inner = parsed
        if inner is not None and isinstance(inner.get("message"), str):
            return clean_message(inner["message"])
    if len(message) > MESSAGE_CHARS:
        message = message[: MESSAGE_CHARS - 1].rstrip() + "…"
    return message


def read_error(body: Any) -> ErrorEnvelope:
    """Read an error body (bytes, text, or a parsed payload); an unreadable one reads as empty."""
    payload = body
    if isinstance(body, bytes | bytearray):
        body = body.decode(errors="replace")
    if isinstance(body, str):
        try:
            payload = json.loads(body)
        except ValueError:
            return ErrorEnvelope()
    error = find_error(payload)
    if error is None:
        return ErrorEnvelope()
    raw_metadata = error.get("metadata")
    metadata: dict[str, Any] = raw_metadata if isinstance(raw_metadata, dict) else {}
    return ErrorEnvelope(
        code=error.get("code"),
        message=clean_message(error.get("message")),
        metadata=metadata,
        error=error,
    )


def int_code(value: Any) -> int | None:
    """A status code given as a number or as digits (``"402"``); ``None`` for anything else."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    return None


def refusal(status: int | None, error: Mapping[str, Any] | None) -> Refusal | None:
    """Which 402 or 403 case ``error`` (an error object, as ``find_error`` gives it) is; ``None``
    for any other status. ``status`` is the HTTP status, or ``None``/200 for an error inside a 200
    body (its own ``code`` decides)."""
    err = error or {}
    code = int_code(err.get("code")) if status in (None, 200) else status
    if code not in (402, 403):
        return None
    raw = err.get("metadata")
    metadata: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    reason = str(metadata.get("reason") or "").lower()
    source = str(metadata.get("limit_source") or "").lower()
    message = clean_message(err.get("message")).lower()
    if code == 402:
        if reason == "in_flight_budget_exhausted" or source == "openrouter_in_flight_budget":
            return "in_flight"
        if source == "openrouter_key_limit":
            return "key_limit"
        if (
            reason == "weight_exceeds_budget"
            or source == "openrouter_credits"
            or "can only afford" in message
        ):
            return "too_large"
        if "in-flight requests" in message:  # the 2026 message, should its metadata be lost
            return "in_flight"
        return "credits"
    if "key limit" in message or source == "openrouter_key_limit":
        return "key_limit"
    if (
        metadata.get("missing_attestation_types")
        or "attestation" in str(metadata.get("failed_routing_step") or "").lower()
        or "complete the following before use" in message
    ):
        return "attestation"
    if "budget" in message or "limit exceeded" in message:
        return "budget"
    return "flagged"


def error_message(
    status: int | None, error: Mapping[str, Any] | None, body: str, *, reason: str = ""
) -> str:
    """What an error says to a person, one rule for every client and the run: the envelope's
    message cleaned (else ``HTTP <status> <reason>`` and the start of the body), the upstream's
    ``metadata.raw`` after it (cut at 300 characters, named by ``provider_name``), and for a 401
    where to fix the key."""
    err = error or {}
    message = clean_message(err.get("message"))
    if not message:
        snippet = " ".join(body.split())[:200]
        message = f"HTTP {status} {reason}".strip() + (f": {snippet}" if snippet else "")
    raw_metadata = err.get("metadata")
    metadata: Mapping[str, Any] = raw_metadata if isinstance(raw_metadata, Mapping) else {}
    raw = metadata.get("raw")
    if isinstance(raw, str) and raw and raw not in message:
        message = f"{message} ({metadata.get('provider_name') or 'provider'}: {raw[:300]})"
    code = int_code(err.get("code")) if status in (None, 200) else status
    if code == 401:
        message = f"{message} OpenRouter rejected the API key: check OPENROUTER_API_KEY."
    return message

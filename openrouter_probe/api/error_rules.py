"""Final versus transient, from OpenRouter's own words: ``ERROR_RULES`` and ``error_kind``.

OpenRouter tells a final error from a transient one only in its wording and codes, so the decision
is a table, ``ERROR_RULES``: one line per error message or code seen in real traffic or in
OpenRouter's documentation, each naming its source, first match wins, each tested
(``tests/api/test_error_rules.py``). Its kinds are ``transient`` (retry), ``pause`` (the whole pool
waits), ``held`` (the in-flight budget: wait and go again), ``row`` (this row fails) and ``run`` (no
row can succeed); docs/wire.md ("The failure table") says which errors are which and why, the
mid-stream error rule among them. One table for every client: the sync and batch clients retry
``RETRIED`` (``api.translate``, on ``APIStatusError.kind``), the run does what
``run.schedule.attempts.ON_FAILURE`` says (``run.send.failure.classify_error``, on
``Failure.kind``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from openrouter_probe.api.backoff import TRANSIENT_STATUSES
from openrouter_probe.api.envelope import FailureKind, find_error, int_code, refusal

__all__ = [
    "ERROR_RULES",
    "RETRIED",
    "ErrorRule",
    "error_kind",
    "error_object",
    "rule_for",
    "upstream_code",
]

#: The kinds a client sends again after a wait (``Retry-After`` honoured): the others are final.
RETRIED: frozenset[str] = frozenset({"transient", "pause", "held"})

#: A raw upstream body that starts with a status line ("429 Too Many Requests", "503 ...").
_STATUS_LINE_RE = re.compile(r"^\s*(?:HTTP/\S+\s+)?(408|429|5\d\d)\b")


@dataclass(frozen=True)
class ErrorRule:
    """One line of the table: which errors it matches and the kind they are.

    ``status`` is the HTTP status (or the error's own code inside a 200 body; ``None``: any);
    ``message`` a lowercase substring of ``error.message``; ``detail`` a lowercase substring of
    ``metadata.raw``, ``metadata.error_type``, ``metadata.provider_error_code`` or
    ``error.availability.code``; ``wraps`` matches a 400 whose upstream code is transient;
    ``platform`` an answer with ``X-RateLimit-*`` headers; ``unattributed`` an HTTP error (not one
    inside a 200) that names no provider; ``refusal`` a 402/403 case (``api.envelope.refusal``).
    """

    status: int | None
    kind: FailureKind
    source: str
    message: str = ""
    detail: str = ""
    wraps: bool = False
    platform: bool = False
    unattributed: bool = False
    refusal: str = ""

    def matches(self, status: int | None, facts: _Facts) -> bool:
        if self.status is not None and status != self.status:
            return False
        if self.refusal and self.refusal != facts.refusal:
            return False
        if self.platform and not facts.platform:
            return False
        if self.unattributed and not facts.unattributed:
            return False
        if self.message and self.message not in facts.message:
            return False
        if self.detail and not any(self.detail in d for d in facts.details):
            return False
        return not self.wraps or facts.wraps_transient


#: The table: first match wins; statuses it does not name fall back on their class (see
#: ``error_kind``). Sources: [real] a body recorded from the live API, [3p] a body recorded by a
#: third party, [docs] OpenRouter's documentation (the numbers are sections of the project's notes
#: on the API; the tests name the recording of each line).
ERROR_RULES: tuple[ErrorRule, ...] = (
    ErrorRule(401, "run", "[real] 'User not found.': the key is wrong"),
    ErrorRule(
        402,
        "held",
        "[docs, 3p] reason in_flight_budget_exhausted, limit_source openrouter_in_flight_budget"
        " (18): the account's in-flight budget is full; wait Retry-After, hold fewer dollars",
        refusal="in_flight",
    ),
    ErrorRule(
        402,
        "run",
        "[docs] limit_source openrouter_key_limit (18): the key's own limit is spent",
        refusal="key_limit",
    ),
    ErrorRule(
        402,
        "run",
        "[docs, 3p] reason weight_exceeds_budget, limit_source openrouter_credits, 'can only"
        " afford N' (18, 9.1): one request larger than the account can hold",
        refusal="too_large",
    ),
    ErrorRule(402, "run", "[real] 'Insufficient credits. Add more using ...' (9.1)"),
    ErrorRule(
        404, "run", "[3p] provider.only admits nothing (9.3)", message="no allowed providers"
    ),
    ErrorRule(
        404,
        "run",
        "[3p] require_parameters unmet (9.3)",
        message="no endpoints found that can handle",
    ),
    ErrorRule(
        404, "run", "[3p] data policy (9.3)", message="no endpoints found matching your data policy"
    ),
    ErrorRule(
        404,
        "run",
        "[3p] '0 endpoints out of 1 requested are available matching your guardrail restrictions"
        " and data policy', ineligibility_reasons[].configure_url (19): the account's settings",
        message="guardrail restrictions",
    ),
    ErrorRule(
        403,
        "run",
        "[3p] 'This model requires you to complete the following before use: 18+ age"
        " confirmation', missing_attestation_types (19): every request until the account"
        " confirms it",
        refusal="attestation",
    ),
    ErrorRule(
        403,
        "run",
        "[docs] 'Workspace monthly budget of $500.00 exceeded', [3p] 'Budget limit exceeded"
        " (monthly limit). Contact your org admin.': a budget layer is spent (15, 19)",
        message="budget",
    ),
    ErrorRule(
        403,
        "run",
        "[3p] 'Key limit exceeded (weekly limit). Manage it using ...': the key's budget (15)",
        refusal="key_limit",
    ),
    ErrorRule(
        403, "run", "[3p] '... limit exceeded': a budget layer is spent (15)", refusal="budget"
    ),
    ErrorRule(
        None,
        "row",
        "[3p] mid-stream 'Token limit reached' after content and finish_reason length (8): a"
        " retry pays for the same cut",
        message="token limit reached",
    ),
    ErrorRule(
        None, "row", "[docs] error_type token_limit_exceeded (9.2)", detail="token_limit_exceeded"
    ),
    ErrorRule(
        None, "row", "[docs] error_type max_tokens_exceeded (9.2)", detail="max_tokens_exceeded"
    ),
    ErrorRule(
        None, "transient", "[docs] availability.retryable (9.2)", detail="capacity_exhausted"
    ),
    ErrorRule(
        None, "transient", "[docs] availability.retryable (9.2)", detail="temporarily_unavailable"
    ),
    ErrorRule(404, "run", "[docs] no routable endpoint (9.1)"),
    ErrorRule(400, "run", "[docs] an invalid model id (9.1)", message="is not a valid model id"),
    ErrorRule(
        400,
        "row",
        "[3p] provider_error_code context_length_exceeded (9.2)",
        detail="context_length_exceeded",
    ),
    ErrorRule(
        400,
        "row",
        "a final upstream 400 with a number in it ('... less than or equal to 512')",
        detail="must be less than or equal to",
    ),
    ErrorRule(400, "transient", "[docs] error_type rate_limit_exceeded (9.2)", detail="rate_limit"),
    ErrorRule(400, "transient", "[docs] error_type provider_overloaded (9.2)", detail="overloaded"),
    ErrorRule(
        400, "transient", "[docs] error_type provider_unavailable (9.2)", detail="unavailable"
    ),
    ErrorRule(
        400, "transient", "[real] raw 'temporarily rate-limited' (Groq)", detail="rate-limit"
    ),
    ErrorRule(400, "transient", "raw 'Rate limit reached, retry shortly'", detail="rate limit"),
    ErrorRule(
        400, "transient", "a 400 wrapping an upstream 429/5xx (provider_code, raw)", wraps=True
    ),
    ErrorRule(400, "row", "[docs] bad request (9.1): this request is wrong, not the run"),
    ErrorRule(403, "row", "[docs] moderation or guardrail flag (9.1)"),
    ErrorRule(413, "row", "[docs] payload too large (9.1)"),
    ErrorRule(422, "row", "[docs] unprocessable (9.1)"),
    ErrorRule(
        429,
        "pause",
        "[3p] OpenRouter's own 429 with X-RateLimit-* headers (9.4; openclaude#936)",
        platform=True,
    ),
    ErrorRule(
        429,
        "pause",
        "[3p] a 429 'Rate limit exceeded' naming no provider, no X-RateLimit-* (issue 23): the"
        " key's own until shown otherwise",
        unattributed=True,
    ),
    ErrorRule(429, "transient", "[real] upstream 429 'Provider returned error' (Groq, 9.2)"),
    ErrorRule(
        503,
        "transient",
        "[docs] 'no available model provider that meets your routing requirements' (9.1):"
        " real routing failures are 404s; a 503 is retried",
        message="meets your routing requirements",
    ),
)


def upstream_code(metadata: Mapping[str, Any]) -> int | None:
    """The upstream's own status: ``metadata.provider_code``, else the code inside ``raw`` when it
    is a JSON error body or starts with a status line (never any number found in its text)."""
    code = int_code(metadata.get("provider_code"))
    if code is not None:
        return code
    raw = metadata.get("raw")
    if not isinstance(raw, str):
        return None
    try:
        parsed = json.loads(raw)
    except ValueError:
        match = _STATUS_LINE_RE.match(raw)
        return int(match.group(1)) if match else None
    if isinstance(parsed, dict):
        error = parsed.get("error")
        inner: dict[str, Any] = error if isinstance(error, dict) else parsed
        for key in ("code", "status", "status_code"):
            value = int_code(inner.get(key))
            if value is not None:
                return value
    return None


@dataclass
class _Facts:
    """What the table matches on, read once from an error object (``status`` as ``rule_for``
    takes it)."""

    message: str
    details: tuple[str, ...]
    wraps_transient: bool
    platform: bool
    unattributed: bool
    refusal: str | None

    @classmethod
    def of(cls, error: Mapping[str, Any], status: int | None, platform: bool) -> _Facts:
        raw_metadata = error.get("metadata")
        metadata: Mapping[str, Any] = raw_metadata if isinstance(raw_metadata, dict) else {}
        details = [
            str(metadata.get(k) or "").lower() for k in ("raw", "error_type", "provider_error_code")
        ]
        availability = error.get("availability")
        if isinstance(availability, dict) and availability.get("retryable") is True:
            # only a retryable availability decides; a final one leaves the status to decide
            details.append(str(availability.get("code") or "temporarily_unavailable").lower())
        upstream = upstream_code(metadata)
        headers = metadata.get("headers")
        in_body = isinstance(headers, dict) and any(
            str(k).lower().startswith("x-ratelimit") for k in headers
        )
        return cls(
            message=str(error.get("message") or "").lower(),
            details=tuple(d for d in details if d),
            wraps_transient=upstream is not None
            and (upstream in TRANSIENT_STATUSES or upstream >= 500),
            platform=platform or in_body,
            unattributed=status not in (None, 200)
            and not any(metadata.get(k) for k in ("provider_name", "provider_code", "raw")),
            refusal=refusal(status, error),
        )


def rule_for(
    status: int | None, error: Mapping[str, Any] | None, *, platform: bool = False
) -> ErrorRule | None:
    """The table's line that decides this error (``None``: its status class decides)."""
    err = error_object(error)
    effective = int_code(err.get("code")) if status in (None, 200) else status
    facts = _Facts.of(err, status, platform)
    return next((r for r in ERROR_RULES if r.matches(effective, facts)), None)


def error_object(error: Mapping[str, Any] | None) -> dict[str, Any]:
    """The error object, a nested ``error.error`` read through (``api.envelope.find_error``)."""
    if not error:
        return {}
    if "error" not in error:
        return dict(error)
    found = find_error({"error": error})
    return found or {}


def error_kind(
    status: int | None, error: Mapping[str, Any] | None, *, platform: bool = False
) -> FailureKind:
    """The kind of an HTTP error status, or of an error object inside a 200 body (``status``
    ``None`` or 200: the error's own code decides). ``platform``: the answer carried
    ``X-RateLimit-*`` headers (OpenRouter's own limit, not a provider's)."""
    err = error_object(error)
    rule = rule_for(status, err, platform=platform)
    if rule is not None:
        return rule.kind
    # no line names it: no code (an error inside a 200 body without one) and 408/429/5xx are
    # transient; other 4xx fail the row
    code = int_code(err.get("code")) if status in (None, 200) else status
    return "transient" if code is None or code in TRANSIENT_STATUSES or code >= 500 else "row"

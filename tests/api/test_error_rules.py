"""Final versus transient, from real bodies: every line of ``run.send.failure.ERROR_RULES`` is tested.

Each case is a body OpenRouter sent (``../shared/captures``: Groq's 429) or one recorded and quoted in
``../shared/OPENROUTER.md`` (sections 8-9: 401 "User not found.", the two 402s, the routing 404s, the
2026-09 ``provider_error_code`` 400, the mid-stream error event), or documented there (the typed
``error_type`` values, ``error.availability``), or a platform 429 recorded by a third party
(Gitlawb/openclaude issue 936: ``metadata.headers`` with ``X-RateLimit-*``). A case whose wording the
project made up says so.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from openrouter_probe.api.error_rules import ERROR_RULES, rule_for
from openrouter_probe.run.send.failure import classify_error
from tests.conftest import CAPTURES

GROQ_429 = json.loads(
    yaml.safe_load((CAPTURES / "kimi-k2-0905" / "simple_kimi-k2_groq.yaml").read_text())[
        "interactions"
    ][0]["response"]["body"]
)["error"]

ONLY_404 = {
    "message": "No allowed providers are available for the selected model. Providers serving "
    "anthropic/claude-3-haiku: amazon-bedrock, but your request's provider.only preference "
    "permits only: anthropic.",
    "code": 404,
    "metadata": {
        "available_providers": ["amazon-bedrock"],
        "requested_providers": ["anthropic"],
        "routing_funnel": [{"step": "Initial Endpoints", "endpoint_count": 1}],
        "failed_routing_step": "Filter by Allowed Providers",
    },
}
PLATFORM_429 = {  # Gitlawb/openclaude#936, 2026-04-28
    "message": "Rate limit exceeded: free-models-per-day. Add 10 credits to unlock 1000 free "
    "model requests per day",
    "code": 429,
    "metadata": {"headers": {"X-RateLimit-Limit": "50", "X-RateLimit-Remaining": "0"}},
}


def _err(code: int, message: str, **metadata: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"code": code, "message": message}
    if metadata:
        body["metadata"] = metadata
    return body


#: The in-flight 402 as other projects logged it, 2026-09/10 (OPENROUTER.md 18).
IN_FLIGHT_402 = _err(
    402,
    "This request would exceed your available credits given your current in-flight requests. "
    "Retry after in-flight requests settle, or add credits.",
    reason="in_flight_budget_exhausted",
    limit_source="openrouter_in_flight_budget",
)
#: The key's own limit as a 402 (docs api_reference/limits, 2026; the wording is the project's).
KEY_LIMIT_402 = _err(
    402, "Key limit exceeded (monthly limit).", limit_source="openrouter_key_limit"
)
#: One request larger than the account can hold (OPENROUTER.md 18; message as recorded).
WEIGHT_402 = _err(
    402,
    "This request requires more credits, or fewer max_tokens. You requested up to 393216 "
    "tokens, but can only afford 369211",
    reason="weight_exceeds_budget",
    limit_source="openrouter_credits",
    provider_name=None,
)


#: (id, HTTP status, error object, platform headers, expected kind)
CASES: list[tuple[str, int, dict[str, Any], bool, str]] = [
    ("401 User not found", 401, _err(401, "User not found."), False, "run"),
    (
        "402 can only afford",
        402,
        _err(
            402,
            "This request requires more credits, or fewer max_tokens. You requested up to 16384 "
            "tokens, but can only afford 1056.",
        ),
        False,
        "run",
    ),
    (
        "402 insufficient credits",
        402,
        _err(402, "Insufficient credits. Add more using https://openrouter.ai/settings/credits"),
        False,
        "run",
    ),
    ("404 provider.only", 404, ONLY_404, False, "run"),
    (
        "404 require_parameters",
        404,
        _err(
            404,
            "No endpoints found that can handle the requested parameters. To learn more about "
            "provider routing, visit: https://openrouter.ai/docs/guides/routing/provider-selection",
            failed_routing_step="Filter by Parameters",
        ),
        False,
        "run",
    ),
    (
        "404 data policy",
        404,
        _err(404, "No endpoints found matching your data policy (Zero data retention)."),
        False,
        "run",
    ),
    (
        "429 availability capacity_exhausted",
        429,
        {
            "code": 429,
            "message": "All providers are at capacity",  # wording: the project's
            "availability": {"code": "capacity_exhausted", "retryable": True, "retry_after": 5},
        },
        False,
        "transient",
    ),
    (
        "404 availability temporarily_unavailable (retryable)",
        404,
        {
            "code": 404,
            "message": "No endpoints available right now",  # wording: the project's
            "availability": {"code": "temporarily_unavailable", "retryable": True},
        },
        False,
        "transient",
    ),
    ("404 no endpoints found for", 404, _err(404, "No endpoints found for x/y."), False, "run"),
    (
        "404 guardrail and data policy (3p, 2026)",
        404,
        _err(
            404,
            "0 endpoints out of 1 requested are available matching your guardrail restrictions "
            "and data policy",
            ineligibility_reasons=[
                {"reason": "data_policy", "configure_url": "https://openrouter.ai/settings/privacy"}
            ],
            routing_funnel=[{"step": "Initial Endpoints", "endpoint_count": 1}],
            failed_routing_step="Filter by Guardrails",
        ),
        False,
        "run",
    ),
    (
        "403 attestation gate (3p, 2026)",
        403,
        _err(
            403,
            "This model requires you to complete the following before use: 18+ age "
            "confirmation. Confirm at https://openrouter.ai/settings/preferences.",
            missing_attestation_types=["age_18plus"],
            failed_routing_step="Gate Endpoints with Attestations",
        ),
        False,
        "run",
    ),
    (
        "403 organisation budget (3p, 2026)",
        403,
        _err(403, "Budget limit exceeded (monthly limit). Contact your org admin."),
        False,
        "run",
    ),
    (
        "400 invalid model id",
        400,
        _err(400, "moonshotai/kimi-k9 is not a valid model ID"),
        False,
        "run",
    ),
    (
        "400 context_length_exceeded (2026-09)",
        400,
        _err(
            400,
            "Provider returned error",
            raw="This model's maximum context length is 128000 tokens.",
            provider_name="OpenAI",
            is_byok=False,
            provider_error_code="context_length_exceeded",
        ),
        False,
        "row",
    ),
    (
        "400 max_tokens must be <= 512 (issue 15: was retried as transient)",
        400,
        _err(
            400,
            "Provider returned error",
            raw="max_tokens must be less than or equal to 512",
            provider_name="Groq",
        ),
        False,
        "row",
    ),
    (
        "400 error_type rate_limit_exceeded",
        400,
        _err(400, "Provider returned error", error_type="rate_limit_exceeded"),
        False,
        "transient",
    ),
    (
        "400 error_type provider_overloaded",
        400,
        _err(400, "Provider returned error", error_type="provider_overloaded"),
        False,
        "transient",
    ),
    (
        "400 error_type provider_unavailable",
        400,
        _err(400, "Provider returned error", error_type="provider_unavailable"),
        False,
        "transient",
    ),
    (
        "400 wrapping Groq's rate-limited raw",
        400,
        {**GROQ_429, "code": 400},
        False,
        "transient",
    ),
    (
        "400 raw 'Rate limit reached' (the fake's wrapped_400 wording)",
        400,
        _err(400, "Provider returned error", raw="Rate limit reached, retry shortly"),
        False,
        "transient",
    ),
    (
        "400 provider_code 503",
        400,
        _err(400, "Provider returned error", provider_code=503, raw="upstream said no"),
        False,
        "transient",
    ),
    (
        "400 raw JSON with code 429",
        400,
        _err(400, "Provider returned error", raw='{"error":{"code":429,"message":"slow down"}}'),
        False,
        "transient",
    ),
    (
        "400 raw status line 502",
        400,
        _err(400, "Provider returned error", raw="502 Bad Gateway"),
        False,
        "transient",
    ),
    (
        "400 invalid request",
        400,
        _err(400, "Invalid request: messages[0].content is required"),
        False,
        "row",
    ),
    (
        "403 moderation",
        403,
        _err(
            403,
            "Your chosen model requires moderation and your input was flagged",
            reasons=["violence"],
            flagged_input="...",
            provider_name="OpenAI",
            model_slug="openai/gpt-4o",
        ),
        False,
        "row",
    ),
    ("413 payload too large", 413, _err(413, "Payload too large"), False, "row"),
    ("422 unprocessable", 422, _err(422, "Unprocessable entity"), False, "row"),
    ("429 platform (metadata.headers)", 429, PLATFORM_429, False, "pause"),
    (
        "429 platform (response headers)",
        429,
        _err(429, "Rate limit exceeded: limit_rpm/moonshotai/kimi-k2.5"),
        True,
        "pause",
    ),
    ("429 upstream Groq (real capture)", 429, GROQ_429, False, "transient"),
    (
        "503 no provider meets your routing requirements",
        503,
        _err(503, "There is no available model provider that meets your routing requirements"),
        False,
        "transient",
    ),
    ("408", 408, _err(408, "Request timed out"), False, "transient"),
    ("500 masked", 500, _err(500, "Internal Server Error"), False, "transient"),
    ("502 provider returned error", 502, _err(502, "Provider returned error"), False, "transient"),
    ("524 edge timeout", 524, _err(524, "timeout"), False, "transient"),
    ("529 overloaded", 529, _err(529, "Provider overloaded"), False, "transient"),
    ("418 an unknown 4xx", 418, _err(418, "I'm a teapot"), False, "row"),
    (
        "200 mid-stream error event 429 (docs)",
        200,
        _err(429, "Rate limit exceeded", error_type="rate_limit_exceeded"),
        False,
        "transient",
    ),
    ("200 choice error 502", 200, _err(502, "Provider returned error"), False, "transient"),
    # issue 23: a 429 that does not say it came from a provider is the key's own (a 2026
    # recording: Retry-After: 61, no metadata, no X-RateLimit-* headers)
    ("429 naming no provider", 429, _err(429, "Rate limit exceeded"), False, "pause"),
    # issue 23, 403 split (OPENROUTER.md 15): a budget layer spent stops the run; a moderation
    # or guardrail flag fails the row
    (
        "403 workspace budget (docs)",
        403,
        _err(403, "Workspace monthly budget of $500.00 exceeded"),
        False,
        "run",
    ),
    (
        "403 key limit (3p)",
        403,
        _err(
            403,
            "Key limit exceeded (weekly limit). Manage it using "
            "https://openrouter.ai/workspaces/default/keys",
        ),
        False,
        "run",
    ),
    # issue 23, the mid-stream error rule: content, finish_reason length, then this event
    ("200 mid-stream token limit (3p)", 200, _err(400, "Token limit reached"), False, "row"),
    (
        "200 error_type token_limit_exceeded (docs)",
        200,
        _err(400, "Provider returned error", error_type="token_limit_exceeded"),
        False,
        "row",
    ),
    (
        "400 error_type max_tokens_exceeded (docs)",
        400,
        _err(400, "Provider returned error", error_type="max_tokens_exceeded"),
        False,
        "row",
    ),
    ("200 mid-stream 400 (generic)", 200, _err(400, "Provider returned error"), False, "row"),
    ("200 mid-stream 500", 200, _err(500, "Internal Server Error"), False, "transient"),
    ("200 finish_reason error, no code", 200, {"message": "ended"}, False, "transient"),
    # issue 31 (OPENROUTER.md 18): the 2026 402s, branched on metadata.limit_source / reason
    ("402 in-flight budget (docs, 3p)", 402, IN_FLIGHT_402, False, "held"),
    ("402 key limit (docs)", 402, KEY_LIMIT_402, False, "run"),
    ("402 weight_exceeds_budget (docs, 3p)", 402, WEIGHT_402, False, "run"),
    (
        "403 a limit exceeded that names no key (project's wording)",
        403,
        _err(403, "Guardrail daily limit exceeded"),
        False,
        "run",
    ),
]


@pytest.mark.parametrize(
    ("status", "error", "platform", "kind"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_each_error_is_final_or_transient_as_the_table_says(
    status: int, error: dict[str, Any], platform: bool, kind: str
) -> None:
    failure = classify_error(status, error, platform=platform)
    assert failure.kind == kind
    assert failure.message.startswith(str(error.get("message") or "")[:40])


def test_every_line_of_the_table_is_tested() -> None:
    hit = {
        id(rule_for(status, error, platform=platform)) for _, status, error, platform, _ in CASES
    }
    untested = [rule.source for rule in ERROR_RULES if id(rule) not in hit]
    assert untested == []


def test_the_facts_a_failure_carries() -> None:
    afford = classify_error(402, CASES[1][2])
    assert afford.afford_tokens == 1056 and not afford.rate_limited
    assert afford.refusal == "too_large"
    weight = classify_error(402, WEIGHT_402)
    assert weight.refusal == "too_large" and weight.afford_tokens == 369211
    held = classify_error(402, IN_FLIGHT_402, retry_after_s=3.0)
    assert held.refusal == "in_flight" and held.retry_after_s == 3.0
    assert classify_error(402, KEY_LIMIT_402).refusal == "key_limit"
    key_403 = next(c[2] for c in CASES if c[0] == "403 key limit (3p)")
    assert classify_error(403, key_403).refusal == "key_limit"
    groq = classify_error(429, GROQ_429, retry_after_s=2.0)
    assert groq.rate_limited and groq.retry_after_s == 2.0
    assert "Groq: moonshotai/kimi-k2-0905 is temporarily rate-limited" in groq.message
    wrapped = classify_error(
        400, _err(400, "Provider returned error", raw='{"error":{"code":429}}')
    )
    assert wrapped.rate_limited  # a 400 wrapping a 429 slows the pool down too
    key = classify_error(401, CASES[0][2])
    # one wording for the run and the sync client (api.envelope.error_message)
    assert (
        key.message == "User not found. OpenRouter rejected the API key: check OPENROUTER_API_KEY."
    )
    empty = classify_error(502, None, body="<html>bad gateway</html>")
    assert empty.kind == "transient" and empty.message == "HTTP 502: <html>bad gateway</html>"
    # an HTTP error status is never billed: its cost is known (nothing), not unknown
    assert not empty.cost_unknown and empty.cost_usd is None

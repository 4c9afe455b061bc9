"""The account's refusals as 2026 recordings show them (OPENROUTER.md 19), for the fake's
request-phase faults (``fake.faults``): every request of the key gets the same answer, until the
account's settings, its budget or its in-flight holds change. Each body is in ``docs/fake-server.md``
(the fault table: ``in_flight_402_body``, ``attestation_403``, ``guardrail_404``,
``org_budget_403``); ``refuse_request`` answers them, the workspace budget and the key-wide 429s.
"""

from __future__ import annotations

import json
import math
from datetime import timedelta
from decimal import Decimal
from typing import Any

from aiohttp import web

from openrouter_probe.fake import bodies
from openrouter_probe.fake.bodies import IN_FLIGHT_MESSAGE

__all__ = ["ACCOUNT_REFUSALS", "PRIVACY_URL", "refusal_body", "refuse_request"]

#: Where a guardrail's data policy is configured (the recorded ``configure_url``).
PRIVACY_URL = "https://openrouter.ai/settings/privacy"
ATTESTATION_MESSAGE = (
    "This model requires you to complete the following before use: 18+ age confirmation. "
    "Confirm at https://openrouter.ai/settings/preferences."
)
GUARDRAIL_MESSAGE = (
    "0 endpoints out of 1 requested are available matching your guardrail restrictions and "
    "data policy"
)
ORG_BUDGET_MESSAGE = "Budget limit exceeded (monthly limit). Contact your org admin."


def refusal_body(kind: str, *, wait_s: int, model: str) -> tuple[int, bytes]:
    """The status and body of the refusal ``kind`` (one of ``ACCOUNT_REFUSALS``); ``wait_s`` is
    the in-flight 402's wait, said in its body."""
    metadata: dict[str, object] | None = None
    if kind == "in_flight_402_body":
        status, message = 402, IN_FLIGHT_MESSAGE
        metadata = {
            "reason": "in_flight_budget_exhausted",
            "headers": {"Retry-After": str(wait_s)},
            "remedy_hint": "Wait for in-flight requests to settle.",
        }
    elif kind == "attestation_403":
        status, message = 403, ATTESTATION_MESSAGE
        metadata = {
            "missing_attestation_types": ["age_18plus"],
            "failed_routing_step": "Gate Endpoints with Attestations",
        }
    elif kind == "guardrail_404":
        status, message = 404, GUARDRAIL_MESSAGE
        metadata = {
            "ineligibility_reasons": [{"reason": "data_policy", "configure_url": PRIVACY_URL}],
            "routing_funnel": [{"step": "Initial Endpoints", "endpoint_count": 1}],
            "failed_routing_step": "Filter by Guardrails",
            "requested_model": model,
        }
    elif kind == "org_budget_403":
        status, message = 403, ORG_BUDGET_MESSAGE
    else:
        raise ValueError(f"not an account refusal: {kind}")
    error: dict[str, object] = {"message": message, "code": status}
    if metadata is not None:
        error["metadata"] = metadata
    if kind == "in_flight_402_body":
        error["provider_name"] = None
    return status, json.dumps({"error": error, "user_id": "user_fake"}).encode()


#: The request-phase faults this module answers, each with what it says.
ACCOUNT_REFUSALS: dict[str, str] = {
    "in_flight_402_body": "the in-flight 402 with its wait only in the body "
    "(error.metadata.headers Retry-After SECONDS, default 120), no limit_source, no header",
    "attestation_403": "403 'This model requires ... 18+ age confirmation' "
    "(missing_attestation_types)",
    "guardrail_404": "404 '0 endpoints out of 1 requested are available matching your guardrail "
    "restrictions and data policy' (ineligibility_reasons with configure_url)",
    "org_budget_403": "403 'Budget limit exceeded (monthly limit). Contact your org admin.'",
}


def refuse_request(fake: Any, request_no: int, model_id: str, stream: bool) -> web.Response | None:
    """What answers before any endpoint is tried: a spent workspace budget (403), a key-wide
    429 (the ``platform_429`` and ``key_429`` faults), the in-flight 402 (``in_flight_402``), an
    account refusal (``ACCOUNT_REFUSALS``); ``None`` when the request goes on."""
    budget = fake.workspace_budget_usd
    if budget is not None and fake.ledger.total_usd >= Decimal(str(budget)):
        fake.ledger.count_error("workspace_budget")
        return bodies.json_response(403, bodies.workspace_budget_403(budget))
    limited = fake.faults.draw("request", request_no, stream) if fake.faults else None
    if limited is None:
        return None
    fake.ledger.count_error(limited.kind)
    wait = math.ceil(limited.wait_s)
    if limited.kind == "in_flight_402":
        fake.limits.refused += 1
        headers = {"Retry-After": str(wait), "X-Fake-Fault": limited.kind}
        return bodies.json_response(402, bodies.in_flight_402(), headers)
    if limited.kind in ACCOUNT_REFUSALS:  # the wait, if any, only in the body
        fake.limits.refused += limited.kind == "in_flight_402_body"
        status, said = refusal_body(limited.kind, wait_s=wait, model=model_id)
        return bodies.json_response(status, said, {"X-Fake-Fault": limited.kind})
    if limited.kind == "key_429":
        now = fake.now()
        payload, headers = bodies.key_429(retry_at=now + timedelta(seconds=wait), now=now)
    else:
        reset_ms = int((fake.clock.now() + wait) * 1000)
        payload, headers = bodies.platform_429(
            model=model_id, reset_ms=reset_ms, retry_after_s=wait
        )
    return bodies.json_response(429, payload, {**headers, "X-Fake-Fault": limited.kind})

"""What went wrong with one attempt, and what to do about it: ``Failure`` and ``classify_error``.

Whether an error is final or transient is the error table's (``api.error_rules.ERROR_RULES``, one
line per error seen in real traffic or documented, the same table the sync and batch clients
read); ``classify_error`` makes its verdict a ``Failure`` with what the run needs beside the kind.
What each kind leads to is decided in one other place, ``run.schedule.attempts.ON_FAILURE``.

A stream that sent content, ended with ``finish_reason: "length"`` and then a "Token limit
reached" error fails the row (the table's line), and what came before the error is kept in the
failure record (``Failure.partial``: content, reasoning, finish).

Money is a separate question from the kind: ``Failure.cost_unknown`` marks an attempt that left and
whose cost the answer did not tell (a timeout, a cut connection, a 200 without ``usage.cost``): it
counts at its worst case until ``/generation`` settles it. An HTTP error status is never billed
(OpenRouter returns it before any generation).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from openrouter_probe.api.envelope import FailureKind, error_message, int_code, refusal

__all__ = ["Failure", "FailureKind", "classify_error"]

_AFFORD_RE = re.compile(r"can only afford (\d+)")


@dataclass(frozen=True)
class Failure:
    """An attempt that did not produce a completion, and what to do about it: a value, made whole
    by ``classify_error`` (or one constructor call) and never changed afterwards.

    ``cost_unknown``: the request left and nothing said what it cost (count it at its worst case
    until ``/generation`` settles it); ``generation_id``: the id the headers or the body gave, if any.
    """

    kind: FailureKind
    message: str
    status: int | None = None
    code: int | str | None = None
    retry_after_s: float | None = None
    cost_usd: Decimal | None = None  # when the error body still carried a valid usage.cost
    afford_tokens: int | None = None  # 402 "can only afford N"
    rate_limited: bool = False
    metadata: dict[str, Any] = field(default_factory=dict)
    cost_unknown: bool = False
    generation_id: str | None = None
    reset_epoch_s: float | None = None  # a platform 429's X-RateLimit-Reset, in epoch seconds
    #: What an answer sent before its error (``content``, ``reasoning``, ``finish_reason``).
    partial: dict[str, Any] | None = None
    #: What a 402 or 403 says (``api.envelope.refusal``): ``in_flight``, ``key_limit``, ...
    refusal: str | None = None

    @property
    def budget(self) -> bool:
        """Whether this is a budget layer that is spent (a 403 the table files under ``run``):
        every request of the key fails until it resets or is raised."""
        return (
            self.kind == "run"
            and self.refusal != "attestation"
            and (self.status == 403 or int_code(self.code) == 403)
        )

    def to_record(self) -> dict[str, Any]:
        record: dict[str, Any] = {
            "kind": self.kind,
            "status": self.status,
            "code": self.code,
            "message": self.message,
        }
        if self.partial is not None:
            record["partial"] = self.partial
        return record


def classify_error(
    status: int | None,
    error: dict[str, Any] | None,
    *,
    retry_after_s: float | None = None,
    body: str = "",
    platform: bool = False,
    reset_epoch_s: float | None = None,
    cost_usd: Decimal | None = None,
    cost_unknown: bool = False,
    generation_id: str | None = None,
    partial: dict[str, Any] | None = None,
) -> Failure:
    """Classify an HTTP error status, or an error object inside a 200 body (``status`` 200): the
    finished ``Failure``, made once (nothing sets a field of it afterwards).

    ``error`` is OpenRouter's ``{"code", "message", "metadata"}``; inside a 200 body the error's own
    code decides. ``platform``: the answer carried ``X-RateLimit-*`` headers (OpenRouter's own
    limit, not a provider's). The rest is what the answer said beside the error, kept as given:
    a platform 429's reset, a 200's cost (or that it is unknown), its generation id and what it
    sent before the error (``partial``).
    """
    # the error table, read on the first failure: a run whose answers all come back needs it not
    from openrouter_probe.api.error_rules import error_kind, error_object, upstream_code

    err = error_object(error)
    raw_metadata = err.get("metadata")
    metadata: dict[str, Any] = raw_metadata if isinstance(raw_metadata, dict) else {}
    code = err.get("code")
    effective = int_code(code) if status in (None, 200) else status
    kind = error_kind(status, err, platform=platform)
    message = error_message(status, err, body)
    afford = None
    if effective == 402:
        match = _AFFORD_RE.search(message)
        afford = int(match.group(1)) if match else None
    rate_limited = effective == 429 or metadata.get("error_type") == "rate_limit_exceeded"
    if effective == 400 and kind == "transient" and upstream_code(metadata) == 429:
        rate_limited = True
    return Failure(
        kind,
        message,
        status=status,
        code=code,
        retry_after_s=retry_after_s,
        afford_tokens=afford,
        rate_limited=rate_limited,
        metadata=metadata,
        refusal=refusal(status, err),
        reset_epoch_s=reset_epoch_s,
        cost_usd=cost_usd,
        cost_unknown=cost_unknown,
        generation_id=generation_id,
        partial=partial,
    )

"""One batch of the fake's Batch API: its lines, its state on the clock, its bill and its body.

``BatchRun.tick`` moves a batch to where the fake's clock says it is (``validating`` for
``VALIDATING_S``, ``in_progress`` for the service's ``batch_seconds``, ``finalizing`` for
``FINALIZING_S``, then ``completed``; or ``failed``, ``expired``, or stuck, as its fault says), and
bills it at finalize: one ledger entry per successful line at the ``:batch`` endpoint's price, once
the credit covers the whole charge (the 402 gate, ``settle``). ``to_object`` is the
``BatchObject`` body. The HTTP side is ``fake.batches``.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from openrouter_probe.api.schema import Endpoint
from openrouter_probe.fake import bodies
from openrouter_probe.fake.billing import charge
from openrouter_probe.fake.content import answer_for
from openrouter_probe.fake.ledger import LedgerEntry
from openrouter_probe.fake.reply import Server
from openrouter_probe.fake.router import ServedModel
from openrouter_probe.rules.batch import batch_model_id

__all__ = [
    "FINALIZING_S",
    "TERMINAL",
    "VALIDATING_S",
    "WINDOW_S",
    "BatchLine",
    "BatchRun",
]

VALIDATING_S = 2.0
FINALIZING_S = 3.0
#: Seconds a batch may run before its provider stops (OpenRouter's 24 h window).
WINDOW_S = 24 * 3600.0
TERMINAL = frozenset({"completed", "failed", "expired", "cancelled"})
_PROVIDER_FAILED = 'The provider ended this batch as "failed" without reporting a reason.'


@dataclass
class BatchLine:
    """One request of a batch and what became of it (decided at acceptance, revealed over time)."""

    custom_id: str
    body: dict[str, Any]
    failed: bool = False
    prompt_tokens: int = 0
    max_tokens: int = 0


@dataclass
class BatchRun:
    """One batch: its lines, its state, and how the clock moves it (``tick``), bills it and shows it."""

    number: int
    id: str
    model: ServedModel
    endpoint: str
    runs_on: Endpoint
    lines: list[BatchLine]
    created_at: int
    status: str = "validating"
    fault: str | None = None
    error: str | None = None
    hidden_until: float = 0.0
    finalized_at: int | None = None
    results: list[dict[str, Any]] | None = None
    usage: dict[str, Any] | None = None
    cost_usd: Decimal = Decimal(0)
    billed: bool = False
    gated: bool = False
    done: int = 0
    failed: int = 0
    rows: list[dict[str, Any]] = field(default_factory=list)
    #: the answered lines' ledger entries, added once the credit covers them (``settle``)
    unbilled: list[LedgerEntry] = field(default_factory=list)

    @property
    def expires_at(self) -> int:
        return int(self.created_at + WINDOW_S)

    def tick(self, host: Server, batch_seconds: float) -> None:
        """Move the batch to where the clock says it is; finalize (and bill) on the way."""
        if self.status in TERMINAL:
            if self.gated:
                self.settle(host)
            return
        elapsed = host.clock.now() - self.created_at
        total = len(self.lines)
        if elapsed < VALIDATING_S:
            return
        if self.error is not None or self.fault == "batch_failed":
            self.status = "failed"
            self.error = self.error or _PROVIDER_FAILED
            self.failed = total
            self.finalized_at = int(self.created_at + VALIDATING_S)
            return
        run = elapsed - VALIDATING_S
        if self.fault in ("batch_expire", "stuck"):
            if elapsed < WINDOW_S:
                self.status = "in_progress"
                share = 0.0 if self.fault == "stuck" else min(0.5, run / WINDOW_S)
                self.reveal(math.floor(total * share))
                return
            self.status = "expired"
            self.finalized_at = self.expires_at
            if self.fault == "batch_expire":
                self.reveal(total // 2)
                self.bill(host, self.lines[: total // 2], serve=False)
            return
        if batch_seconds == 0 or run >= batch_seconds:
            self.reveal(total)
            if run < batch_seconds + FINALIZING_S:
                self.status = "finalizing"
                return
            self.status = "completed"
            self.finalized_at = int(self.created_at + VALIDATING_S + batch_seconds + FINALIZING_S)
            self.bill(host, self.lines, serve=True)
            return
        self.status = "in_progress"
        self.reveal(math.floor(total * run / batch_seconds))

    def reveal(self, upto: int) -> None:
        shown = self.lines[:upto]
        self.failed = sum(line.failed for line in shown)
        self.done = len(shown) - self.failed

    def bill(self, host: Server, lines: Sequence[BatchLine], *, serve: bool) -> None:
        """Price every successful line of ``lines`` at the ``:batch`` price; bill them once the
        credit covers the whole charge (the 402 gate)."""
        chosen = {id(line) for line in lines}
        rows: list[dict[str, Any]] = []
        # observed: results come in reverse order of the requests
        for i, line in reversed(list(enumerate(self.lines, start=1))):
            if line.failed:
                rows.append(self.failed_row(line))
            elif id(line) in chosen:
                rows.append(self.answered_row(host, i, line))
        self.rows = rows
        entries = self.unbilled
        prompt = sum(e.prompt_tokens for e in entries)
        completion = sum(e.completion_tokens for e in entries)
        cost = self.cost_usd = sum((e.cost_usd for e in entries), Decimal(0))
        self.usage = {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "completion_tokens_details": {
                "reasoning_tokens": sum(e.reasoning_tokens for e in entries)
            },
            "cost": float(cost),
            "is_byok": False,
        }
        if serve and lines and self.failed == len(self.lines):
            self.error = (
                f"All {len(self.lines)} request(s) in this batch failed upstream; inspect each "
                "result's error field."
            )
        self.gated = True
        self.settle(host)

    def failed_row(self, line: BatchLine) -> dict[str, Any]:
        runs_on = self.runs_on
        return {
            "id": f"{runs_on.slug}-{line.custom_id}",
            "custom_id": line.custom_id,
            "response": None,
            "error": {
                "message": f"{runs_on.provider_name} rate limited this request; retry it later",
                "type": "rate_limit_error",
                "param": None,
                "error_type": "rate_limit_exceeded",
            },
        }

    def answered_row(self, fake: Server, i: int, line: BatchLine) -> dict[str, Any]:
        """A success line (the sync ``chat.completion`` body, usage without cost); its ledger
        entry waits in ``unbilled``."""
        runs_on = self.runs_on
        messages = line.body.get("messages")
        answer = answer_for(
            messages if isinstance(messages, list) else [],
            seed=fake.seed,
            nonce=None,
            max_tokens=max(line.max_tokens, 1),
            reasoning=True,
            reasoning_share=fake.reasoning_share,
            median_tokens=fake.median_tokens,
        )
        finished = int(self.finalized_at or self.created_at)
        billed = charge(
            runs_on,
            prompt_tokens=line.prompt_tokens,
            completion_tokens=answer.completion_tokens,
            reasoning_tokens=len(answer.reasoning),
            at=datetime.fromtimestamp(finished, UTC),
        )
        rid = f"batch_req_{self.id.rsplit('-', 1)[-1]}_{i:06d}"
        digest = hashlib.sha256(f"{self.id}:{i}".encode()).hexdigest()
        gen_id = f"gen-batch-{self.created_at}-{digest[:20]}"
        usage = json.loads(bodies.usage_json(billed))
        usage.pop("cost", None)
        usage.pop("cost_details", None)
        body = {
            "id": gen_id,
            "object": "chat.completion",
            "created": finished,
            "model": batch_model_id(self.model.model_id),
            "provider": runs_on.provider_name,
            "service_tier": "batch",
            "system_fingerprint": None,
            "choices": json.loads(bodies.choices_json(answer, show_reasoning=True)),
            "usage": usage,
        }
        self.unbilled.append(
            LedgerEntry(
                generation_id=gen_id,
                model=self.model.model_id,
                provider=runs_on.provider_name,
                tag=runs_on.tag,
                prompt_tokens=billed.prompt_tokens,
                completion_tokens=billed.completion_tokens,
                reasoning_tokens=billed.reasoning_tokens,
                cost_usd=billed.total_usd,
                streamed=False,
                cancelled=False,
                created=finished,
            )
        )
        request = {"status_code": 200, "request_id": f"req_batch_{digest[20:36]}", "body": body}
        return {"id": rid, "custom_id": line.custom_id, "response": request, "error": None}

    def settle(self, fake: Server) -> None:
        """Bill a finished batch when the credit covers it (then its results are served)."""
        available = fake.credit.available_usd
        if available is not None and self.cost_usd > available:
            return  # the 402 gate: results withheld until the charge is covered
        for entry in self.unbilled:
            fake.ledger.add(entry)
        self.unbilled = []
        if fake.credit.limit_usd is not None:
            fake.credit.settle(Decimal(0), self.cost_usd)
        self.gated = False
        self.billed = True
        if self.status == "completed":
            self.results = self.rows

    # -- bodies ----------------------------------------------------------------------------------

    def to_object(self, *, results: bool) -> dict[str, Any]:
        """A ``BatchObject`` (the list's items omit ``results``)."""
        error = None if self.error is None else {"message": self.error}
        running = self.status != "validating"
        return {
            "id": self.id,
            "object": "batch",
            "endpoint": self.endpoint,
            "model": self.model.permaslug,
            "completion_window": "24h",
            "status": self.status,
            "created_at": self.created_at,
            "finalized_at": self.finalized_at,
            "expires_at": self.expires_at if running else None,
            "provider": self.runs_on.provider_name if running else None,
            "request_counts": {
                "total": len(self.lines),
                "completed": self.done,
                "failed": self.failed,
            },
            "usage": self.usage if self.billed and self.status == "completed" else None,
            "results": self.results if results and self.status == "completed" else None,
            "error": error,
        }

"""Where a run's requests come from: a row source, and the output records its answers make.

``RowSource`` is one request per row (``--turns last``): the row's answer is its record.
``TurnSource`` (``--turns all``) yields the next request of each conversation: the first missing
turn of each row to begin with, then, as each turn is answered, the request of the row's next turn
(its history the model's own answers so far), until its last turn makes the row's record; a turn
before the last is kept in the turns file (``run.books.turns``). The scheduler takes the requests in the
same way in both, never asking which mode it runs in.
"""

from __future__ import annotations

from typing import Any

from openrouter_probe.run.books.output import RECORD_FIELDS
from openrouter_probe.run.books.turns import TurnBook, TurnLog, new_turn, row_totals
from openrouter_probe.run.rows import PromptRow
from openrouter_probe.run.send.attempt import Attempt
from openrouter_probe.run.send.failure import Failure
from openrouter_probe.run.send.transport import Answer

__all__ = ["RowSource", "TurnSource"]

#: Every record's fields, in their order, blank until a record says them.
_BLANK: dict[str, Any] = dict.fromkeys(RECORD_FIELDS)
#: The fields an answer gives its record (``RowSource.answered``).
_ANSWERED = (
    "status", "provider", "model", "finish_reason", "content", "reasoning", "usage", "cost_usd",
    "generation_id", "attempts",
)  # fmt: skip


class RowSource:
    """One request per row: ``answered`` returns the row's record and no next request."""

    #: whether every answer is one turn of a row that goes turn by turn
    turn_by_turn = False

    def __init__(self, rows: list[PromptRow], *, job_sha256: str, run_id: str | None) -> None:
        self.rows = rows
        self.job_sha256 = job_sha256
        self.run_id = run_id

    def requests(self) -> list[PromptRow]:
        """The first request of every row, in the order they are to be sent."""
        return self.rows

    def started(self, row: PromptRow) -> bool:
        """Whether ``row`` has finished turns (it stopped mid-way if it stops now)."""
        return False

    def _messages(self, row: PromptRow) -> list[dict[str, Any]]:
        return row.messages

    def record(self, row: PromptRow, **fields: Any) -> dict[str, Any]:
        """``row``'s output record with ``fields`` (``run.books.output`` lists them)."""
        record: dict[str, Any] = {
            **_BLANK,
            "id": row.id,
            "dataset": row.dataset,
            "attempts": 0,
            "messages": self._messages(row),
            "policy_sha256": self.job_sha256,
            "run_id": self.run_id,  # the journal holds this run's money, attempt by attempt
        }
        record.update(row.extra or {})
        record.update(fields)
        return record

    def answered(
        self, row: PromptRow, answer: Answer, attempt: Attempt
    ) -> tuple[PromptRow | None, dict[str, Any] | None]:
        """An answer came: the request that follows it, or the row's record (one of the two)."""
        cost = attempt.cost
        # ``record``'s dict, made at once (one per request): the same keys in the same order
        record: dict[str, Any] = {
            "id": row.id,
            "dataset": row.dataset,
            "status": "truncated" if answer.truncated else "ok",
            "provider": answer.provider,
            "model": answer.model,
            "finish_reason": answer.finish_reason,
            "content": answer.content,
            "reasoning": answer.reasoning,
            "usage": answer.usage,
            "cost_usd": float(cost) if cost is not None else None,
            "generation_id": answer.generation_id,
            "attempts": attempt.number,
            "error": None,
            "messages": self._messages(row),
            "policy_sha256": self.job_sha256,
            "run_id": self.run_id,
        }
        if row.extra:  # the row's own fields, under the answer's (as ``record`` orders them)
            said = {key: record[key] for key in _ANSWERED}
            record.update(row.extra)
            record.update(said)
        request = attempt.request
        record["max_tokens"] = request.max_tokens  # what an overshoot is measured against
        record["sampling_params"] = request.sampling or {}  # as sent (speculators' field)
        if answer.cache_hit:
            record["response_cache"] = "hit"  # a replay of an earlier answer, billed nothing
        elif answer.byok_usd is not None and cost is not None:
            # cost_usd is both parts: what OpenRouter charged, what the provider billed the key
            record["cost_parts_usd"] = {
                "openrouter": float(cost - answer.byok_usd),
                "provider": float(answer.byok_usd),
            }
        if answer.tool_calls:
            record["tool_calls"] = answer.tool_calls
        if answer.reasoning_details:
            record["reasoning_details"] = answer.reasoning_details  # verbatim: signatures
        if answer.logprobs is not None:
            record["logprobs"] = answer.logprobs
        if cost is None:
            record["possibly_billed_usd"] = float(attempt.worst)
        if attempt.extra_cost:
            record["failed_attempts_cost_usd"] = float(attempt.extra_cost)
        return None, record

    def failed(
        self, row: PromptRow, failure: Failure, attempt: Attempt, why: str
    ) -> dict[str, Any]:
        """The record of a row that failed (``why`` is added to the failure's message)."""
        error = failure.to_record()
        if why:
            error["message"] = f"{failure.message}; {why}"
        record = self.record(row, status="failed", attempts=attempt.number, error=error)
        record["sampling_params"] = attempt.request.sampling or {}
        if attempt.extra_cost:
            record["failed_attempts_cost_usd"] = float(attempt.extra_cost)
        return record

    def cancelled(self, row: PromptRow, attempt: Attempt, gen: str | None) -> dict[str, Any]:
        """The record of a request cancelled in flight (counted at its worst case)."""
        record = self.record(
            row,
            status="cancelled",
            attempts=attempt.number,
            error={"kind": "cancelled", "message": "cancelled in flight"},
            possibly_billed_usd=float(attempt.worst),
            generation_id=gen,
            sampling_params=attempt.request.sampling or {},
        )
        if attempt.extra_cost:
            record["failed_attempts_cost_usd"] = float(attempt.extra_cost)
        return record

    def close(self) -> None:
        """Close what the source keeps open (the turns file)."""


class TurnSource(RowSource):
    """Turn by turn (``--turns all``): the next request of each conversation (see the module)."""

    turn_by_turn = True

    def __init__(
        self,
        rows: list[PromptRow],
        book: TurnBook,
        *,
        log: TurnLog,
        job_sha256: str,
        run_id: str | None,
    ) -> None:
        super().__init__(rows, job_sha256=job_sha256, run_id=run_id)
        self.book = book
        self.log = log  # the turns file, where each turn before a row's last is kept

    def requests(self) -> list[PromptRow]:
        return self.book.requests(self.rows)

    def started(self, row: PromptRow) -> bool:
        return self.book.started(row.id)

    def _messages(self, row: PromptRow) -> list[dict[str, Any]]:
        return self.book.prompt(row)

    def answered(
        self, row: PromptRow, answer: Answer, attempt: Attempt
    ) -> tuple[PromptRow | None, dict[str, Any] | None]:
        """A turn is answered: keep it (flushed to the turns file) and return the next turn's
        request; or, at the row's last turn (or a truncated one: the next turns would carry an
        answer the model never finished), return the row's record."""
        progress = self.book.rows.get(row.id)
        if progress is None:  # a row with no turns of its own (tool messages): one request
            return super().answered(row, answer, attempt)
        turn = new_turn(
            progress.next_index,
            answer,
            attempts=attempt.number,
            cost=attempt.cost,
            worst=attempt.worst,
            extra_cost=attempt.extra_cost,
            run_id=self.run_id,
            max_tokens=attempt.request.max_tokens,
        )
        truncated = answer.truncated
        if not (progress.last or truncated):
            # what the next turns' requests carry of it (the model reads it or not)
            turn["reasoning_in_history"] = self.book.reasoning_back and bool(
                turn.get("reasoning") or turn.get("reasoning_details")
            )
            self.log.keep(progress.row, turn)
            progress.done.append(turn)
            return progress.request(), None
        progress.done.append(turn)
        fields = row_totals(progress.done)
        fields["sampling_params"] = attempt.request.sampling or {}  # every turn's: one draw a row
        return None, self.record(row, status="truncated" if truncated else "ok", **fields)

    def failed(
        self, row: PromptRow, failure: Failure, attempt: Attempt, why: str
    ) -> dict[str, Any]:
        record = super().failed(row, failure, attempt, why)
        if self.book.started(row.id):
            record["turns"] = list(self.book.rows[row.id].done)  # the turns it finished
        return record

    def close(self) -> None:
        self.log.close()

"""A row's output record (``run.schedule.source.RowSource``): the record's fields in their order,
then the row's own fields, never over what the answer says."""

from __future__ import annotations

from decimal import Decimal

from openrouter_probe.api.completion import ChatCompletion
from openrouter_probe.run.books.output import RECORD_FIELDS
from openrouter_probe.run.money.spend import Prices
from openrouter_probe.run.rows import PromptRow
from openrouter_probe.run.schedule.source import RowSource
from openrouter_probe.run.send.attempt import Attempt
from openrouter_probe.run.send.request import RequestBuilder

_PRICES = Prices(Decimal("0.0000006"), Decimal("0.000003"))


def _answered(extra: dict[str, object] | None) -> dict[str, object]:
    row = PromptRow("r1", "d", [{"role": "user", "content": "q"}], {}, 1, extra=extra)
    attempt = Attempt(
        RequestBuilder(model="m", provider_json="{}").build(row, _PRICES), _PRICES, '"r1"', 60.0
    )
    attempt.number, attempt.cost = 2, Decimal("0.00007")
    answer = ChatCompletion("P", "m-1", "stop", "hi", None, {"cost": 0.00007}, "gen-1")
    following, record = RowSource([row], job_sha256="sha256:x", run_id="run1").answered(
        row, answer, attempt
    )
    assert following is None and record is not None
    return record


def test_a_record_holds_its_fields_in_order_then_the_rows_own() -> None:
    plain = _answered(None)
    head = (*RECORD_FIELDS, "messages", "policy_sha256", "run_id")
    assert tuple(plain)[: len(head)] == head
    assert plain["status"] == "ok" and plain["attempts"] == 2 and plain["cost_usd"] == 0.00007
    assert plain["error"] is None and plain["run_id"] == "run1"
    extra = {"original": {"role": "assistant", "content": "a"}, "content": "x", "run_id": "r0"}
    record = _answered(extra)
    keys = list(plain)
    assert list(record) == [*keys[: len(head)], "original", *keys[len(head) :]]
    assert record["original"] == extra["original"]
    assert record["content"] == "hi"  # the answer's, never the row's
    assert record["run_id"] == "r0"  # a field the answer does not give: the row's

"""The fake's Batch API and the Batch API client, against each other.

The fake serves the example snapshot (examples/batch/kimi-k3.snapshot.json: a Together ``:batch``
row at $1.50/$7.50 per M beside its $3/$15 sync row) on a manual clock, so a batch moves from
``validating`` to ``completed`` without a real wait. Every body is also read by the official SDK's
batch types (``openrouter.components``), as the sync bodies are in tests/fake/test_sdk.py.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest
import requests

from openrouter_probe.api.batches import BatchClient
from openrouter_probe.errors import APIStatusError, InsufficientCreditsError, NoRouteError
from openrouter_probe.fake import ManualClock, serve
from openrouter_probe.fake.batches import FINALIZING_S, VALIDATING_S
from openrouter_probe.fake.server import FakeServer
from openrouter_probe.rules.snapshot import bundled_snapshot, load_snapshot
from tests.conftest import PYTEST_OPENROUTER_KEY, ROOT

openrouter = pytest.importorskip("openrouter", reason="the openrouter SDK is a dev extra")
components = openrouter.components

K3 = load_snapshot(ROOT / "examples" / "batch" / "kimi-k3.snapshot.json")
MODEL = "moonshotai/kimi-k3"
RUN_S = 60.0
DONE_S = VALIDATING_S + RUN_S + FINALIZING_S


def _lines(n: int, *, max_tokens: int = 64) -> list[dict[str, Any]]:
    return [
        {
            "custom_id": f"row-{i}",
            "body": {
                "messages": [{"role": "user", "content": f"Question {i}: what is {i} + {i}?"}],
                "max_tokens": max_tokens,
            },
        }
        for i in range(1, n + 1)
    ]


@pytest.fixture
def fake(request: pytest.FixtureRequest) -> Iterator[FakeServer]:
    options = dict(getattr(request, "param", {}))
    with serve(K3, speed=0, clock=ManualClock(1_790_000_000), batch_seconds=RUN_S, **options) as f:
        yield f


@pytest.fixture
def client(fake: FakeServer) -> Iterator[BatchClient]:
    with BatchClient(api_key=PYTEST_OPENROUTER_KEY, base_url=fake.base_url) as c:
        yield c


def _raw(fake: FakeServer, method: str, path: str, body: Any = None) -> requests.Response:
    data = (
        None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    )
    return requests.request(
        method,
        f"{fake.base_url}{path}",
        data=data,
        headers={"Authorization": f"Bearer {PYTEST_OPENROUTER_KEY}"},
        timeout=10,
    )


def _advance(fake: FakeServer, seconds: float) -> None:
    clock = fake.clock
    assert isinstance(clock, ManualClock)
    clock.advance(seconds)


# -- the lifecycle ---------------------------------------------------------------------------------


def test_a_batch_runs_to_completed_and_bills_the_batch_price(
    fake: FakeServer, client: BatchClient
) -> None:
    job = client.create(
        model=MODEL, requests=_lines(4), provider={"only": ["together"], "allow_fallbacks": False}
    )
    assert job.status == "validating" and job.request_counts.total == 4
    assert job.provider is None and job.results is None and job.usage is None
    _advance(fake, VALIDATING_S + RUN_S / 2)
    half = client.get(job.id)
    assert half.status == "in_progress" and half.provider == "Together"
    assert half.request_counts.completed == 2 and half.results is None
    assert len(fake.ledger) == 0  # billed at finalize, not before
    _advance(fake, RUN_S / 2)
    assert client.get(job.id).status == "finalizing"
    _advance(fake, FINALIZING_S)
    done = client.get(job.id)
    assert done.status == "completed" and done.request_counts.completed == 4
    assert done.results is not None
    # Reverse order, as recorded; match on custom_id.
    assert [r.custom_id for r in done.results] == ["row-4", "row-3", "row-2", "row-1"]
    entries = fake.ledger.entries
    assert len(entries) == 4 and {e.tag for e in entries} == {"together"}
    for e in entries:  # every line at the :batch price: $1.50/M in, $7.50/M out
        expected = Decimal("0.0000015") * e.prompt_tokens + Decimal("0.0000075") * (
            e.completion_tokens
        )
        assert e.cost_usd == expected
    assert done.cost_usd == pytest.approx(float(fake.ledger.total_usd))
    body = done.results[0].body
    assert body is not None and "cost" not in body["usage"]  # per-line usage has no cost
    assert body["id"].startswith("gen-batch-") and body["provider"] == "Together"
    assert body["model"] == "moonshotai/kimi-k3:batch"
    assert done.model == "moonshotai/kimi-k3-20260715"  # the dated slug, as observed
    assert {e.generation_id for e in entries} == {r.body["id"] for r in done.results if r.body}


def test_bodies_validate_with_the_sdk_batch_types(fake: FakeServer) -> None:
    created = _raw(
        fake,
        "POST",
        "/batches",
        {"endpoint": "/v1/chat/completions", "model": MODEL, "requests": _lines(2)},
    )
    assert created.status_code == 202
    components.BatchObject.model_validate(created.json())
    batch_id = created.json()["id"]
    _advance(fake, DONE_S)
    done = components.BatchObject.model_validate(_raw(fake, "GET", f"/batches/{batch_id}").json())
    assert done.status == "completed" and done.usage is not None and done.usage.cost
    assert done.results is not None and len(done.results) == 2
    listing = components.BatchListResponse.model_validate(_raw(fake, "GET", "/batches").json())
    assert [item.id for item in listing.data] == [batch_id]
    deleted = components.BatchDeletedObject.model_validate(
        _raw(fake, "DELETE", f"/batches/{batch_id}").json()
    )
    assert deleted.deletion.openrouter == "deleted"
    refused = _raw(
        fake,
        "POST",
        "/batches",
        {"endpoint": "/v1/chat/completions", "model": MODEL, "requests": []},
    )
    from openrouter.errors.batcherrorresponse import BatchErrorResponseData

    error = BatchErrorResponseData.model_validate(refused.json()).error
    assert (error.code, error.message) == (400, "requests must contain at least one item.")


# -- validation at submit --------------------------------------------------------------------------


def _post(fake: FakeServer, body: dict[str, Any]) -> tuple[int, str]:
    reply = _raw(fake, "POST", "/batches", body)
    return reply.status_code, reply.json()["error"]["message"]


def test_submit_refusals_are_the_documented_ones(fake: FakeServer) -> None:
    chat = "/v1/chat/completions"
    assert _post(fake, {"requests": _lines(1), "endpoint": chat, "model": MODEL}) == (
        400,
        "endpoint and model are required and must appear before requests in the request body",
    )
    dup = [*_lines(1), {"custom_id": "row-1", "body": {"messages": []}}]
    assert _post(fake, {"endpoint": chat, "model": MODEL, "requests": dup}) == (
        422,
        "Request at line 2 has a duplicate custom_id 'row-1'.",
    )
    assert _post(fake, {"endpoint": chat, "model": MODEL, "requests": []}) == (
        400,
        "requests must contain at least one item.",
    )
    other = [{"custom_id": "a", "body": {"model": "openai/gpt-4o", "messages": []}}]
    assert _post(fake, {"endpoint": chat, "model": MODEL, "requests": other})[1] == (
        "Each batch request body model must match the top-level model."
    )
    pinned = {"endpoint": chat, "model": MODEL, "provider": {"only": ["fireworks"]}}
    assert _post(fake, {**pinned, "requests": _lines(1)}) == (
        404,
        "Model 'moonshotai/kimi-k3' does not have an eligible :batch endpoint matching "
        "provider.only: fireworks.",
    )
    ordered = {"endpoint": chat, "model": MODEL, "provider": {"order": ["together"]}}
    status, message = _post(fake, {**ordered, "requests": _lines(1)})
    assert status == 400 and "only provider.only and provider.allow_fallbacks" in message


def test_a_model_without_a_batch_endpoint_is_refused() -> None:
    with serve(bundled_snapshot(), speed=0) as fake:
        body = {"endpoint": "/v1/chat/completions", "model": "moonshotai/kimi-k2.5"}
        assert _post(fake, {**body, "requests": _lines(1)}) == (
            400,
            "Model 'moonshotai/kimi-k2.5' does not have a :batch endpoint.",
        )
        listing = _raw(fake, "GET", "/models/moonshotai/kimi-k2.5:batch/endpoints")
        assert listing.status_code == 404


def test_the_batch_variant_lists_its_endpoints(fake: FakeServer) -> None:
    reply = _raw(fake, "GET", "/models/moonshotai/kimi-k3:batch/endpoints")
    assert reply.status_code == 200
    (row,) = reply.json()["data"]["endpoints"]
    assert (row["tag"], row["pricing"]["completion"]) == ("together", "0.0000075")
    assert _raw(fake, "GET", "/models/moonshotai/kimi-k3/endpoints").status_code == 200


def test_stream_true_fails_the_batch_after_acceptance(
    fake: FakeServer, client: BatchClient
) -> None:
    lines = _lines(2)
    lines[1]["body"]["stream"] = True
    job = client.create(model=MODEL, requests=lines)
    assert job.status == "validating"
    _advance(fake, VALIDATING_S)
    failed = client.get(job.id)
    assert failed.status == "failed" and failed.results is None
    assert failed.error == {"message": "Batch requests do not support stream: true."}
    assert failed.request_counts.failed == 2
    _advance(fake, DONE_S)
    assert len(fake.ledger) == 0


# -- faults ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("fake", [{"faults": "line_fail=@2+3"}], indirect=True)
def test_failed_lines_are_billed_nothing(fake: FakeServer, client: BatchClient) -> None:
    job = client.create(model=MODEL, requests=_lines(4))
    _advance(fake, DONE_S)
    done = client.get(job.id)
    assert done.status == "completed"
    assert (done.request_counts.completed, done.request_counts.failed) == (2, 2)
    assert done.results is not None
    errors = {r.custom_id: r.error for r in done.results if r.error}
    assert set(errors) == {"row-2", "row-3"}
    assert errors["row-2"]["error_type"] == "rate_limit_exceeded"
    assert len(fake.ledger) == 2
    assert done.cost_usd == pytest.approx(float(fake.ledger.total_usd))


@pytest.mark.parametrize("fake", [{"faults": "batch_failed=@1"}], indirect=True)
def test_batch_failed_bills_nothing(fake: FakeServer, client: BatchClient) -> None:
    first = client.create(model=MODEL, requests=_lines(3))
    second = client.create(model=MODEL, requests=_lines(3))
    _advance(fake, DONE_S)
    failed = client.get(first.id)
    assert failed.status == "failed" and failed.usage is None and failed.results is None
    assert failed.error == {
        "message": 'The provider ended this batch as "failed" without reporting a reason.'
    }
    assert client.get(second.id).status == "completed"
    assert len(fake.ledger) == 3  # the second batch only


@pytest.mark.parametrize("fake", [{"faults": "batch_expire=1"}], indirect=True)
def test_an_expired_batch_serves_nothing_and_bills_what_ran(
    fake: FakeServer, client: BatchClient
) -> None:
    job = client.create(model=MODEL, requests=_lines(4))
    _advance(fake, 3600)
    assert client.get(job.id).status == "in_progress"
    _advance(fake, 24 * 3600)
    expired = client.get(job.id)
    assert expired.status == "expired" and expired.results is None
    assert expired.finalized_at == expired.expires_at
    assert len(fake.ledger) == 2  # the harsher reading of an open question: what ran is billed


@pytest.mark.parametrize("fake", [{"faults": "stuck=1"}], indirect=True)
def test_a_stuck_batch_stays_in_progress(fake: FakeServer, client: BatchClient) -> None:
    job = client.create(model=MODEL, requests=_lines(2))
    _advance(fake, 3 * 3600)
    stuck = client.get(job.id)
    assert stuck.status == "in_progress" and stuck.request_counts.completed == 0
    refused = _raw(fake, "DELETE", f"/batches/{job.id}")
    assert refused.status_code == 409
    _advance(fake, 24 * 3600)
    assert client.get(job.id).status == "expired" and len(fake.ledger) == 0


@pytest.mark.parametrize("fake", [{"faults": "batch_404=1/5"}], indirect=True)
def test_a_fresh_batch_answers_404_json_for_a_while(fake: FakeServer, client: BatchClient) -> None:
    job = client.create(model=MODEL, requests=_lines(1))
    with pytest.raises(NoRouteError, match=f"Batch job {job.id} not found."):
        client.get(job.id)
    assert client.list().data == []  # not listed yet either
    _advance(fake, 5)
    assert client.get(job.id).id == job.id


# -- money -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("fake", [{"credit_usd": 0.002}], indirect=True)
def test_the_402_gate_withholds_results_until_the_charge_is_covered(
    fake: FakeServer, client: BatchClient
) -> None:
    lines = _lines(2, max_tokens=100)
    first = client.create(model=MODEL, requests=lines)
    second = client.create(model=MODEL, requests=lines)  # no credit is held at submit
    _advance(fake, DONE_S)
    assert client.get(first.id).status == "completed"
    billed = fake.ledger.total_usd
    assert billed > 0
    with pytest.raises(InsufficientCreditsError) as gated:
        client.get(second.id)
    payload = json.loads(gated.value.body or "{}")
    from openrouter.errors.batchpaymentrequiredresponse_error import (
        BatchPaymentRequiredResponseErrorData,
    )

    typed = BatchPaymentRequiredResponseErrorData.model_validate(payload)
    assert typed.results is None and typed.error.code == 402
    assert payload["results"] is None and payload["status"] == "completed"
    assert "results withheld until the batch charge" in payload["error"]["message"].lower()
    assert fake.ledger.total_usd == billed  # not billed while gated
    fake.credit.limit_usd = Decimal("1")
    paid = client.get(second.id)
    assert paid.results is not None and len(paid.results) == 2
    assert fake.ledger.total_usd > billed
    assert float(fake.credit.spent_usd) == pytest.approx(float(fake.ledger.total_usd))


@pytest.mark.parametrize("fake", [{"credit_usd": 0.0001}], indirect=True)
def test_a_batch_whose_estimate_is_above_the_credit_is_refused(client: BatchClient) -> None:
    with pytest.raises(InsufficientCreditsError, match="estimated cost"):
        client.create(model=MODEL, requests=_lines(3, max_tokens=1000))


# -- reads -----------------------------------------------------------------------------------------


def test_results_pages_follow_the_cursor(fake: FakeServer, client: BatchClient) -> None:
    job = client.create(model=MODEL, requests=_lines(5))
    with pytest.raises(APIStatusError) as early:
        client.results_page(job.id)
    assert early.value.status_code == 409
    _advance(fake, DONE_S)
    first = client.results_page(job.id, limit=2)
    assert len(first.data) == 2 and first.has_more and first.next_cursor
    everything = list(client.results(job.id, limit=2))
    assert sorted(r.custom_id for r in everything) == [f"row-{i}" for i in range(1, 6)]


def test_list_is_newest_first_and_filters_by_creation_time(
    fake: FakeServer, client: BatchClient
) -> None:
    a = client.create(model=MODEL, requests=_lines(1))
    _advance(fake, 10)
    b = client.create(model=MODEL, requests=_lines(1))
    _advance(fake, 10)
    c = client.create(model=MODEL, requests=_lines(1))
    assert [x.id for x in client.list().data] == [c.id, b.id, a.id]
    assert [x.id for x in client.list(created_after=a.created_at).data] == [c.id, b.id]
    page = client.list(limit=2)
    assert page.has_more and page.last_id == b.id
    assert [x.id for x in client.list(after=page.last_id).data] == [a.id]
    assert [x.id for x in client.list_all(created_after=a.created_at - 1)] == [c.id, b.id, a.id]
    assert all(x.results is None for x in client.list().data)
    # its Date is the server's clock, the one created_at is on (not this machine's)
    assert client.list().served_at == int(fake.fake.clock.now()) == c.created_at


def test_delete_is_refused_while_live_and_then_forgets(
    fake: FakeServer, client: BatchClient
) -> None:
    job = client.create(model=MODEL, requests=_lines(1))
    with pytest.raises(APIStatusError) as live:
        client.delete(job.id)
    assert live.value.status_code == 409
    _advance(fake, DONE_S)
    deleted = client.delete(job.id)
    assert deleted["deletion"]["upstream"] == {"provider": "Together", "status": "unsupported"}
    with pytest.raises(NoRouteError):
        client.get(job.id)
    assert len(fake.ledger) == 1  # billing is kept


def test_create_writes_endpoint_and_model_before_requests(fake: FakeServer) -> None:
    fake.fake.requests = None
    seen: list[bytes] = []
    session = requests.Session()
    original = session.request

    def record(method: str, url: str, **kwargs: Any) -> requests.Response:
        if kwargs.get("data"):
            seen.append(kwargs["data"])
        return original(method, url, **kwargs)

    session.request = record  # type: ignore[method-assign]
    with BatchClient(api_key="k", base_url=fake.base_url, session=session) as c:
        c.create(model=MODEL, requests=_lines(1), provider={"only": ["together"]})
    assert list(json.loads(seen[0])) == ["endpoint", "model", "provider", "requests"]


def test_the_client_falls_back_to_beta_on_a_non_json_404(caplog: pytest.LogCaptureFixture) -> None:
    with serve(K3, speed=0, batch_api="beta") as fake:
        assert _raw(fake, "GET", "/batches").status_code == 404  # plain text: no v1 Batch API
        with BatchClient(api_key="k", base_url=fake.base_url) as c:
            with caplog.at_level(logging.WARNING, logger="openrouter_probe.api.batches"):
                job = c.create(model=MODEL, requests=_lines(1))
            assert c.path == f"{fake.url}/api/beta/batches"
            assert c.get(job.id).id == job.id
    assert "answered a 404 that is not JSON" in caplog.text and "/api/beta/batches" in caplog.text


def test_the_client_needs_a_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENROUTER_API_KEY", raising=False)
    with pytest.raises(Exception, match="the Batch API needs an API key"):
        BatchClient()

"""One wire: one ``Connection``, one error table for every client, one ``requests`` translation.

The cases are the failure table's (``tests/api/test_error_rules.py``: real, recorded or documented
bodies, each naming its source); here each is sent through the sync client's translation as the
HTTP answer it was, and must come out with the kind the run gives it. The two rules that used to
disagree are tested through ``Client`` itself, on a scripted session: a 402
"in-flight budget" and a 400 wrapping an upstream 503 are retried after their wait, as the run
retries them.
"""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Any

import pytest
import requests

from openrouter_probe.api import batches, client, keys, wire
from openrouter_probe.api.batches import BatchClient
from openrouter_probe.api.client import Client
from openrouter_probe.api.connection import DEFAULT_BASE_URL, Connection
from openrouter_probe.api.error_rules import RETRIED
from openrouter_probe.api.keys import KeysClient
from openrouter_probe.api.translate import retryable, translate_exception, translate_status
from openrouter_probe.errors import (
    APIConnectionError,
    APIError,
    APIStatusError,
    ConfigError,
    NoRouteError,
)
from openrouter_probe.run.config import RunPlan
from openrouter_probe.run.send.failure import classify_error
from tests.api.test_error_rules import CASES, IN_FLIGHT_402


def _response(status: int, body: Any, headers: dict[str, str] | None = None) -> requests.Response:
    response = requests.Response()
    response.status_code = status
    response._content = (body if isinstance(body, str) else json.dumps(body)).encode()
    response.headers.update(headers or {})
    response.url = "https://openrouter.ai/api/v1/models"
    return response


HTTP_CASES = [c for c in CASES if c[1] not in (200,)]


@pytest.mark.parametrize(
    ("status", "error", "platform", "kind"),
    [c[1:] for c in HTTP_CASES],
    ids=[c[0] for c in HTTP_CASES],
)
def test_the_clients_and_the_run_read_every_case_alike(
    status: int, error: dict[str, Any], platform: bool, kind: str
) -> None:
    headers = {"X-RateLimit-Limit": "20", "X-RateLimit-Remaining": "0"} if platform else {}
    exc = translate_status(_response(status, {"error": error}, headers))
    run = classify_error(status, error, platform=platform)
    assert exc.kind == run.kind == kind
    assert retryable(exc) is (kind in RETRIED)
    assert exc.refusal == run.refusal
    assert str(exc).startswith(run.message)  # a 402's advice is the client's addition


def test_no_requests_exception_goes_unmapped() -> None:
    """httpx's test, adapted: every ``requests`` exception becomes an ``APIConnectionError``."""
    found = [
        cls
        for cls in vars(requests.exceptions).values()
        if inspect.isclass(cls) and issubclass(cls, requests.RequestException)
    ]
    assert len(found) >= 20
    url = "https://openrouter.ai/api/v1/batches"
    for cls in found:
        made = cls("boom", "{", 0) if cls is requests.JSONDecodeError else cls("boom")
        exc = translate_exception(made, url=url, method="POST")
        assert isinstance(exc, APIConnectionError) and exc.url == url, cls
    refused = requests.ConnectionError(ConnectionRefusedError(111, "refused"))
    said = translate_exception(refused, url=url)
    assert str(said) == "cannot reach https://openrouter.ai: connection refused"
    assert not retryable(_chained(said, refused))
    timeout = translate_exception(requests.ReadTimeout("slow"), url=url, method="POST")
    assert str(timeout) == f"POST {url}: timed out" and retryable(_chained(timeout, None))


def _chained(exc: APIConnectionError, cause: BaseException | None) -> APIConnectionError:
    exc.__cause__ = cause
    return exc


def test_each_client_sends_through_the_one_request_loop() -> None:
    """The sync client, the batch client and the key client each hold an ``api.wire.Wire``:
    one place sends a request, translates what failed and retries; none of them does it
    again. The key's ``Authorization`` header is built in one place in the whole package."""
    for module in (client, batches, keys):
        source = inspect.getsource(module)
        assert "except requests.Timeout" not in source, module.__name__
        assert "translate_exception" not in source, module.__name__
        assert "translate_status" not in source, module.__name__
        assert "_session.request(" not in source and "_session.get(" not in source
        assert "Wire(" in source, module.__name__
        assert 'os.environ.get("OPENROUTER_BASE_URL")' not in source, module.__name__
        assert "next_wait(" not in source, module.__name__  # retries: in the one loop only
        assert "json.loads(response" not in source and ".json()" not in source  # read_body
    assert "translate_exception(exc" in inspect.getsource(wire)
    package = Path(client.__file__).parents[1]
    built = [
        str(path.relative_to(package))
        for path in sorted(package.rglob("*.py"))
        if 'f"Bearer {' in path.read_text(encoding="utf-8")
    ]
    assert built == ["api/connection.py"]


class _Script:
    """A ``requests.Session`` that answers from a list, and records what it was asked."""

    def __init__(self, *answers: requests.Response) -> None:
        self.answers = list(answers)
        self.asked: list[dict[str, Any]] = []
        self.headers: dict[str, str] = {}

    def request(self, method: str, url: str, **kwargs: Any) -> requests.Response:
        self.asked.append({"method": method, "url": url, **kwargs})
        return self.answers.pop(0)

    def close(self) -> None:
        pass


PROVIDERS = {"data": [{"name": "Groq", "slug": "groq"}]}
NOT_YET = {"error": {"code": 404, "message": "Generation not found"}}


def test_every_client_says_a_body_that_is_not_json_the_same_way() -> None:
    """The same words from each client; the key client's never quote the body, which may hold a
    new key's secret (a create's answer cut short)."""
    quoted = "'<html>Bad gateway</html>'"
    for call, shown in (
        (lambda session: Client(session=session).providers(), quoted),
        (lambda session: BatchClient(api_key="k", session=session).get("batch-1"), quoted),
        (
            lambda session: KeysClient(management_key="m", session=session).get("abc"),
            "not shown (it may hold a key's secret)",
        ),
    ):
        with pytest.raises(APIError) as info:
            call(_Script(_response(200, "<html>Bad gateway</html>")))
        assert type(info.value) is APIError
        assert str(info.value).startswith(
            "https://openrouter.ai/api/v1/models returned a body that is not JSON (Expecting value"
        )
        assert str(info.value).endswith(
            f"): {shown}; is OPENROUTER_BASE_URL an OpenRouter API URL?"
        )


def test_a_key_created_but_answered_cut_short_keeps_its_secret_out_of_the_error() -> None:
    secret = "sk-or-v1-" + "5e" * 32
    session = _Script(_response(200, '{"key": "' + secret + '", "data": {"hash": "ab'))
    with pytest.raises(APIError) as info:
        KeysClient(management_key="m", session=session).create("shard-0")  # type: ignore[arg-type]
    assert secret not in str(info.value) and "5e5e" not in str(info.value)
    assert "not JSON" in str(info.value)


def test_an_answer_the_key_client_cannot_read_is_an_api_error() -> None:
    session = _Script(_response(200, {"data": {"name": "no hash"}}))
    with pytest.raises(APIError, match=r"^/api/v1/keys answered a key without a hash: "):
        KeysClient(management_key="m", session=session).get("abc")  # type: ignore[arg-type]


def test_a_generation_not_yet_written_is_asked_again_in_the_one_loop(
    retry_waits: list[float],
) -> None:
    """``/generation`` answers 404 until the record is written: the one loop asks again on the
    lookup's own schedule (waits from 1 s), a 503 between on the transient one (from 0.5 s)."""
    record = {"data": {"id": "gen-1", "total_cost": 0.5, "provider_name": "Groq"}}
    session = _Script(
        _response(404, NOT_YET),
        _response(503, "busy"),
        _response(404, NOT_YET),
        _response(200, record),
    )
    with Client(api_key="sk-test", session=session) as api:  # type: ignore[arg-type]
        found = api.generation("gen-1")
    assert (found.total_cost, found.provider_name) == (0.5, "Groq")
    assert [a["params"] for a in session.asked] == [{"id": "gen-1"}] * 4
    assert len(retry_waits) == 3
    assert 1.0 <= retry_waits[0] <= 2.0 and 0.5 <= retry_waits[1] <= 1.5
    assert 2.0 <= retry_waits[2] <= 3.0  # the lookup's second wait: its own count


def test_each_lookup_after_a_404_has_its_transient_tries_afresh(
    retry_waits: list[float],
) -> None:
    """A 503 after each 404, more of them in all than one schedule's tries: each ask after a
    404 has its own transient tries, as each lookup had before the loops were one."""
    record = {"data": {"id": "gen-1", "total_cost": 0.5, "provider_name": "Groq"}}
    answers = [_response(404, NOT_YET), _response(503, "busy")] * 6
    session = _Script(*answers, _response(200, record))
    with Client(api_key="sk-test", session=session, attempts=3) as api:  # type: ignore[arg-type]
        assert api.generation("gen-1", wait_seconds=300).total_cost == 0.5
    assert len(session.asked) == 13 and len(retry_waits) == 12
    assert all(0.5 <= wait <= 1.5 for wait in retry_waits[1::2])  # each 503: a first retry


def test_a_generation_never_written_gives_up_when_its_wait_is_spent(
    retry_waits: list[float],
) -> None:
    session = _Script(*[_response(404, NOT_YET)] * 20)
    with pytest.raises(NoRouteError) as info, Client(api_key="k", session=session) as api:  # type: ignore[arg-type]
        api.generation("gen-1", wait_seconds=20)
    assert str(info.value).endswith("; still not visible, gave up after 20 s of retries")
    assert sum(retry_waits) == pytest.approx(20.0) and len(session.asked) == len(retry_waits) + 1


def test_the_sync_client_waits_out_an_in_flight_402_as_the_run_does() -> None:
    """The client raised a 402 in-flight refusal at once; the run waited ``Retry-After`` and
    sent again (kind ``held``). One table now: the client waits too."""
    waits: list[float] = []
    session = _Script(
        _response(402, {"error": IN_FLIGHT_402}, {"Retry-After": "7"}),
        _response(200, PROVIDERS),
    )
    with Client(api_key="sk-test", session=session, sleep=waits.append) as api:  # type: ignore[arg-type]
        listed = api.providers()
    assert [p.slug for p in listed.data] == ["groq"]
    assert waits == [7.0] and len(session.asked) == 2


def test_the_sync_client_retries_a_400_that_wraps_an_upstream_503() -> None:
    wrapped = {
        "code": 400,
        "message": "Provider returned error",
        "metadata": {"provider_name": "Groq", "raw": '{"error":{"code":503}}'},
    }
    waits: list[float] = []
    session = _Script(_response(400, {"error": wrapped}), _response(200, PROVIDERS))
    with Client(session=session, sleep=waits.append) as api:  # type: ignore[arg-type]
        assert [p.slug for p in api.providers().data] == ["groq"]
    assert len(waits) == 1 and len(session.asked) == 2
    # a plain 400 is still final: one request, no wait
    plain = _Script(_response(400, {"error": {"code": 400, "message": "bad"}}))
    api = Client(session=plain, sleep=waits.append)  # type: ignore[arg-type]
    with pytest.raises(APIStatusError, match=r"^bad$"):
        api.providers()
    assert len(plain.asked) == 1 and len(waits) == 1


def test_one_connection_resolves_the_key_and_the_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENROUTER_API_KEY", "  sk-or-v1-" + "x" * 8 + "  ")
    monkeypatch.setenv("OPENROUTER_BASE_URL", "http://127.0.0.1:9/api/v1/")
    conn = Connection.resolve()
    assert conn.api_key == "sk-or-v1-xxxxxxxx" and conn.base_url == "http://127.0.0.1:9/api/v1"
    assert conn.site == "http://127.0.0.1:9" and "sk-or" not in repr(conn)
    assert conn.headers()["Authorization"] == "Bearer sk-or-v1-xxxxxxxx"
    assert "Authorization" not in conn.headers(accept="text/html")
    # every client and the run's options resolve the same way
    options = RunPlan.resolve(command="generate", out="out.jsonl")
    assert options.connection == conn  # resolved once, held whole
    batch = BatchClient()
    assert batch.connection.api_key == conn.api_key and batch.base_url == conn.base_url
    assert Client().connection.base_url == conn.base_url
    # an argument wins over the environment
    assert Connection.resolve(api_key="", base_url=DEFAULT_BASE_URL + "/").has_key is False
    assert Connection.resolve(base_url=DEFAULT_BASE_URL + "/").base_url == DEFAULT_BASE_URL


def test_a_blank_key_and_a_bad_url_say_what_to_do(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENROUTER_API_KEY", " ")
    monkeypatch.delenv("OPENROUTER_BASE_URL", raising=False)
    conn = Connection.resolve()
    assert conn.key_is_blank and not conn.has_key
    with pytest.raises(ConfigError) as info:
        conn.require_key("generate", "; or pass dry_run=True")
    assert str(info.value) == (
        "generate needs an API key: OPENROUTER_API_KEY is set but empty; export "
        "OPENROUTER_API_KEY=... (create one at https://openrouter.ai/settings/keys); or pass "
        "dry_run=True"
    )
    with pytest.raises(ConfigError, match=r"^the Batch API needs an API key: "):
        BatchClient()
    monkeypatch.setenv("OPENROUTER_BASE_URL", "openrouter.ai/api/v1")
    for make in (Connection.resolve, Client, lambda: RunPlan.resolve(command="x", out="o")):
        with pytest.raises(ConfigError, match="is not an http\\(s\\) URL; unset it"):
            make()

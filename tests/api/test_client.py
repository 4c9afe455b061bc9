"""The sync client through pytest-recording cassettes.

The cassettes in tests/cassettes/api/test_client/ are built by tests/cassettes/build_cassettes.py
from the real bodies in tests/data/captures (named per cassette there); none was recorded live
here.
"""

from __future__ import annotations

import json
import logging
import re
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
import requests

from openrouter_probe.api.client import Client, page_url
from openrouter_probe.api.translate import translate_status
from openrouter_probe.errors import (
    APIConnectionError,
    APIError,
    APIStatusError,
    ConfigError,
    InsufficientCreditsError,
    NoRouteError,
    RateLimitError,
)
from tests.conftest import CAPTURES


@pytest.mark.vcr
def test_endpoints_real_k3_body() -> None:  # capture: kimi-k3-endpoints-2026-08-25-reduced.json
    data = Client().endpoints("moonshotai/kimi-k3")
    assert [e.provider_name for e in data.endpoints] == [
        "Fireworks",
        "Alibaba",
        "Fireworks",
        "Morph",
    ]
    assert data.endpoints[3].tag == "morph/fast"
    assert data.endpoints[3].quantization == "fp4"
    assert data.endpoints[0].pricing.completion_usd_per_m == Decimal("15")
    assert not data.stats_missing


@pytest.mark.vcr
def test_models_real_list() -> None:  # capture: models-list-2026-01-28.json
    listing = Client().models()
    assert len(listing.data) == 347
    ids = {m.id for m in listing.data}
    assert "moonshotai/kimi-k2.5" in ids
    body = json.loads((CAPTURES / "models-list-2026-01-28.json").read_text())
    assert listing.to_json_dict() == body  # one page: no paging keys added


@pytest.mark.vcr
def test_unknown_model_is_no_route_error() -> None:
    with pytest.raises(NoRouteError) as info:
        Client().endpoints("x/y")
    assert info.value.status_code == 404
    assert info.value.code == 404
    assert "No endpoints found for x/y." in str(info.value)
    assert "openrouter-probe models" in str(info.value)


@pytest.mark.vcr
def test_bad_key_is_401() -> None:
    with pytest.raises(APIStatusError) as info:
        Client(api_key="not-a-key").endpoints("moonshotai/kimi-k3")
    assert info.value.status_code == 401
    assert "User not found." in str(info.value)
    assert "OPENROUTER_API_KEY" in str(info.value)


@pytest.mark.vcr
def test_retries_429_then_succeeds(vcr: object) -> None:
    data = Client().endpoints("moonshotai/kimi-k3")
    assert len(data.endpoints) == 4
    assert vcr.play_count == 2  # type: ignore[attr-defined]


@pytest.mark.vcr
def test_retries_5xx_then_succeeds(vcr: object) -> None:
    assert len(Client().endpoints("moonshotai/kimi-k3").endpoints) == 4
    assert vcr.play_count == 3  # type: ignore[attr-defined]


@pytest.mark.vcr
def test_malformed_json_body() -> None:
    with pytest.raises(APIError, match="not JSON"):
        Client().endpoints("moonshotai/kimi-k3")


@pytest.mark.vcr
def test_providers_slugs() -> None:
    providers = {p.name: p.slug for p in Client().providers().data}
    assert providers == {"AtlasCloud": "atlas-cloud", "Moonshot AI": "moonshotai", "Z.AI": "z-ai"}


@pytest.mark.vcr
def test_key_limits() -> None:
    info = Client().key()
    assert info.limit == 100
    assert info.limit_remaining == pytest.approx(61.25)
    assert info.is_free_tier is False


@pytest.mark.vcr
def test_generation_retries_404(vcr: object) -> None:
    gen = Client().generation("gen-1777319885-pLuUvaQdB3l6lRlhlKuv")
    assert vcr.play_count == 3  # type: ignore[attr-defined]
    assert gen.provider_name == "Inceptron"
    assert gen.total_cost == pytest.approx(0.00045364)
    assert gen.native_tokens_reasoning == 166


def test_a_key_answer_is_read_from_its_data_member(replay_server) -> None:
    """``GET /key`` answers ``{"data": record}``: the record is read, and a body without it, or
    holding a record of the wrong shape, is an ``APIError`` naming the URL, the shape and where."""
    base, routes, _ = replay_server
    client = Client(api_key="sk-test", base_url=f"{base}/api/v1", attempts=1)
    routes["/api/v1/key"] = (200, '{"data": {"limit": 5, "usage": 1.5}}', "application/json")
    assert client.key().limit == 5
    routes["/api/v1/key"] = (200, '{"limit": 5}', "application/json")
    with pytest.raises(APIError, match=r"/key returned JSON that is not a \{data: KeyInfo\}: data"):
        client.key()
    routes["/api/v1/key"] = (200, "[]", "application/json")
    with pytest.raises(APIError, match=r"not a \{data: KeyInfo\}: <root>: not an object"):
        client.key()
    routes["/api/v1/credits"] = (200, '{"data": 7}', "application/json")
    with pytest.raises(APIError, match=r"not a \{data: Credits\}: data: "):
        client.credits()


def test_key_is_required_for_key_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENROUTER_API_KEY")
    client = Client()
    assert not client.has_key
    with pytest.raises(ConfigError, match="export OPENROUTER_API_KEY"):
        client.key()


def test_repr_hides_key() -> None:
    client = Client(api_key="fake-secret-for-repr-test")
    assert "secret" not in repr(client)
    assert "has_key=True" in repr(client)


def test_base_url_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENROUTER_BASE_URL", "http://127.0.0.1:8123/api/v1/")
    assert Client().base_url == "http://127.0.0.1:8123/api/v1"
    assert (
        page_url("moonshotai/kimi-k2.5") == "http://127.0.0.1:8123/moonshotai/kimi-k2.5/providers"
    )
    monkeypatch.setenv("OPENROUTER_BASE_URL", "openrouter.ai")
    with pytest.raises(ConfigError, match="OPENROUTER_BASE_URL"):
        Client()


def test_bad_model_id_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="author/slug"):
        Client().endpoints("kimi k2.5")


def test_connection_error_is_mapped() -> None:
    # Port 9 (discard) on loopback refuses the connection: allowed by --allowed-hosts.
    client = Client(base_url="http://127.0.0.1:9/api/v1", attempts=2)
    with pytest.raises(
        APIConnectionError, match=r"^cannot reach http://127\.0\.0\.1:9: connection refused$"
    ):
        client.models()


def _response(status: int, body: str, headers: dict[str, str] | None = None) -> requests.Response:
    response = requests.Response()
    response.status_code = status
    response._content = body.encode()
    response.headers.update(headers or {})
    response.url = "https://openrouter.ai/api/v1/chat/completions"
    return response


@pytest.mark.parametrize(
    ("status", "cls"),
    [
        (429, RateLimitError),
        (402, InsufficientCreditsError),
        (404, NoRouteError),
        (500, APIStatusError),
        (403, APIStatusError),
    ],
)
def test_every_status_maps_into_the_tree(status: int, cls: type[APIStatusError]) -> None:
    exc = translate_status(_response(status, f'{{"error":{{"message":"m","code":{status}}}}}'))
    assert type(exc) is cls
    assert exc.status_code == status and exc.code == status


def test_groq_429_metadata_and_retry_after() -> None:
    body = (
        '{"error":{"message":"Provider returned error","code":429,"metadata":{"raw":"moonshotai/'
        'kimi-k2-0905 is temporarily rate-limited upstream.","provider_name":"Groq"}},'
        '"user_id":"user_redacted"}'
    )  # captures/kimi-k2-0905/simple_kimi-k2_groq.yaml
    exc = translate_status(_response(429, body, {"Retry-After": "7"}))
    assert isinstance(exc, RateLimitError)
    assert exc.retry_after == 7.0
    assert exc.metadata["provider_name"] == "Groq"
    assert "Groq: moonshotai/kimi-k2-0905 is temporarily rate-limited" in str(exc)


def test_402_names_the_fix() -> None:
    body = (
        '{"error":{"message":"This request requires more credits, or fewer max_tokens. You '
        'requested up to 16384 tokens, but can only afford 1056.","code":402}}'
    )
    exc = translate_status(_response(402, body))
    assert isinstance(exc, InsufficientCreditsError)
    assert "can only afford 1056" in str(exc) and "settings/credits" in str(exc)


def test_non_json_error_body() -> None:
    exc = translate_status(_response(503, "<html>upstream connect error</html>"))
    assert exc.status_code == 503 and exc.code is None
    assert "upstream connect error" in str(exc)


# -- bounded, visible retries -----------------------------------------------------------------------


class _FakeSession:
    """A session whose GETs answer from a script: exceptions are raised, responses returned
    (``requests.Session.request``, the one method ``api.wire`` calls)."""

    def __init__(self, script: list[object]) -> None:
        self.script = list(script)
        self.headers: dict[str, str] = {}
        self.calls = 0

    def request(self, method: str, url: str, **kwargs: object) -> requests.Response:
        assert method == "GET"
        self.calls += 1
        step = self.script.pop(0) if len(self.script) > 1 else self.script[0]
        if isinstance(step, BaseException):
            raise step
        assert isinstance(step, requests.Response)
        step.url = url
        return step

    def close(self) -> None:
        pass


def _ok_models() -> requests.Response:
    return _response(
        200, '{"data": [{"id": "a/b", "pricing": {"prompt": "0", "completion": "0"}}]}'
    )


@pytest.mark.vcr
def test_retry_after_longer_than_wait_max_fails_at_once(
    vcr: object, retry_waits: list[float]
) -> None:
    with pytest.raises(RateLimitError) as info:
        Client().endpoints("moonshotai/kimi-k3")
    message = str(info.value)
    assert retry_waits == []  # no hour of sleep, no wait at all
    assert vcr.play_count == 1  # type: ignore[attr-defined]
    assert "asked to retry after 60 min, longer than the 20 s this call may wait" in message
    assert re.search(r"retry after \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", message)
    assert info.value.retry_after == 3600.0 and info.value.status_code == 429


@pytest.mark.vcr
def test_retry_after_within_the_cap_is_waited(
    vcr: object, retry_waits: list[float], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="openrouter_probe")
    assert len(Client().endpoints("moonshotai/kimi-k3").endpoints) == 4
    assert retry_waits == [3.0]
    assert vcr.play_count == 2  # type: ignore[attr-defined]
    (line,) = [r.getMessage() for r in caplog.records if r.name == "openrouter_probe.api.wire"]
    assert line == (
        "https://openrouter.ai/api/v1/models/moonshotai/kimi-k3/endpoints: HTTP 429 (rate limited);"
        " retry 1 of 4 in 3.0 s"
    )


def test_retry_after_zero_retries_at_once(retry_waits: list[float]) -> None:
    # stamina 24.3 stopped retrying on Retry-After: 0; it means "now".
    session = _FakeSession([_response(429, "{}", {"Retry-After": "0"}), _ok_models()])
    assert [m.id for m in Client(session=session).models().data] == ["a/b"]  # type: ignore[arg-type]
    assert retry_waits == [0.0] and session.calls == 2


def test_wait_max_also_caps_retry_after(retry_waits: list[float]) -> None:
    session = _FakeSession([_response(503, "busy", {"Retry-After": "9"}), _ok_models()])
    with pytest.raises(APIStatusError, match=r"longer than the 5\.0 s this call may wait"):
        Client(session=session, wait_max=5.0).models()  # type: ignore[arg-type]
    assert retry_waits == [] and session.calls == 1


def test_retries_stop_at_the_deadline(retry_waits: list[float]) -> None:
    session = _FakeSession([_response(502, '{"error":{"message":"Bad gateway","code":502}}')])
    client = Client(session=session, attempts=50, retry_timeout=10.0)  # type: ignore[arg-type]
    with pytest.raises(APIStatusError) as info:
        client.models()
    assert "Bad gateway" in str(info.value) and "gave up after" in str(info.value)
    assert sum(retry_waits) <= 10.0 + 1e-9  # every wait fits in the time left
    assert len(retry_waits) == session.calls - 1 < 50


def test_timeouts_are_retried_and_said(
    retry_waits: list[float], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="openrouter_probe")
    session = _FakeSession(
        [requests.ConnectTimeout("slow"), requests.ReadTimeout("slow"), _ok_models()]
    )
    listing = Client(session=session).models()  # type: ignore[arg-type]
    assert [m.id for m in listing.data] == ["a/b"]
    assert session.calls == 3 and len(retry_waits) == 2
    lines = [r.getMessage() for r in caplog.records if r.name == "openrouter_probe.api.wire"]
    assert len(lines) == 2
    assert lines[0].startswith("https://openrouter.ai/api/v1/models: timed out; retry 1 of 4 in ")


def test_connection_refused_gives_up_at_once(retry_waits: list[float]) -> None:
    # Port 9 (discard) on loopback refuses the connection: allowed by --allowed-hosts.
    client = Client(base_url="http://127.0.0.1:9/api/v1", attempts=5)
    with pytest.raises(APIConnectionError) as info:
        client.models()
    assert str(info.value) == "cannot reach http://127.0.0.1:9: connection refused"
    assert info.value.url == "http://127.0.0.1:9/api/v1/models"
    assert retry_waits == []  # no retry storm: the server is not there


def test_unknown_host_gives_up_at_once(retry_waits: list[float]) -> None:
    import socket

    from urllib3.exceptions import MaxRetryError, NameResolutionError

    cause = NameResolutionError("nohost.invalid", None, socket.gaierror(-2, "not known"))  # type: ignore[arg-type]
    cause.__cause__ = socket.gaierror(-2, "Name or service not known")
    error = requests.ConnectionError(MaxRetryError(None, "/models", cause))  # type: ignore[arg-type]
    session = _FakeSession([error, _ok_models()])
    with pytest.raises(APIConnectionError, match=r"host name not found$"):
        Client(session=session).models()  # type: ignore[arg-type]
    assert session.calls == 1 and retry_waits == []


def test_retry_after_as_an_http_date() -> None:
    from email.utils import format_datetime

    later = datetime.now(UTC) + timedelta(seconds=120)
    exc = translate_status(_response(429, "{}", {"Retry-After": format_datetime(later)}))
    assert exc.retry_after is not None and 100 < exc.retry_after <= 120
    assert translate_status(_response(429, "{}", {"Retry-After": "inf"})).retry_after is None
    assert translate_status(_response(429, "{}", {"Retry-After": "soon"})).retry_after is None


# -- the key ----------------------------------------------------------------------------------------


def test_empty_key_is_said(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("OPENROUTER_API_KEY", "  ")
    client = Client()
    assert not client.has_key and client.key_is_blank
    assert "OPENROUTER_API_KEY is set but empty" in caplog.text
    with pytest.raises(ConfigError, match="OPENROUTER_API_KEY is set but empty; export"):
        client.key()
    monkeypatch.delenv("OPENROUTER_API_KEY")
    caplog.clear()
    assert not Client().key_is_blank and "set but empty" not in caplog.text


# -- paging -----------------------------------------------------------------------------------------


@pytest.mark.vcr
def test_models_follows_links_next(vcr: object) -> None:  # capture: models-list-2026-01-28.json
    listing = Client().models()
    assert vcr.play_count == 2  # type: ignore[attr-defined]
    assert len(listing.data) == 347 == listing.total_count
    assert listing.data[0].id == "arcee-ai/trinity-large-preview:free"
    ids = [m.id for m in listing.data]
    assert ids[199:201] == ["tngtech/deepseek-r1t-chimera", "openai/o4-mini-high"]  # the seam
    assert ids[-1] == "openai/gpt-3.5-turbo" and len(set(ids)) == 347
    assert listing.links == {"next": None} and listing.skipped == []


def _page(ids: list[str], **extra: object) -> str:
    models = [{"id": i, "pricing": {"prompt": "0.000001", "completion": "0.000002"}} for i in ids]
    return json.dumps({"data": models, **extra})


def test_models_offset_paging_and_next_on_own_host(replay_server) -> None:
    base, routes, seen = replay_server
    # Page 1 names page 2 on the real host: the client asks its own host (the key stays here).
    routes["/api/v1/models"] = (
        200,
        _page(
            ["a/one", "a/two"],
            total_count=5,
            links={"next": "https://evil.example/api/v1/models?p=2"},
        ),
        "application/json",
    )
    # Page 2 has no next link but total_count says more: offset paging.
    routes["/api/v1/models?p=2"] = (200, _page(["a/three"], total_count=5), "application/json")
    routes["/api/v1/models?offset=3"] = (
        200,
        _page(["a/four", "a/five"], total_count=5),
        "application/json",
    )
    listing = Client(base_url=f"{base}/api/v1").models()
    assert [m.id for m in listing.data] == ["a/one", "a/two", "a/three", "a/four", "a/five"]
    assert [s["path"] for s in seen] == [
        "/api/v1/models",
        "/api/v1/models?p=2",
        "/api/v1/models?offset=3",
    ]


def test_models_paging_stops_on_a_loop(replay_server) -> None:
    base, routes, seen = replay_server
    body = _page(["a/one"], links={"next": "/api/v1/models?again=1"})
    routes["/api/v1/models"] = (200, body, "application/json")
    routes["/api/v1/models?again=1"] = (200, body, "application/json")
    listing = Client(base_url=f"{base}/api/v1").models()
    assert len(seen) == 2  # the second page names itself: not asked again
    assert [m.id for m in listing.data] == ["a/one"]  # and it repeated page 1: left out


def test_an_explicit_next_null_ends_paging(replay_server) -> None:
    """Issue 23: links.next null, total_count 338, 4 models a page, a server that ignores
    offset: the client paged on with ?offset=N, 85 GETs and each id 85 times."""
    base, routes, seen = replay_server
    page = _page(["a/one", "a/two", "a/three", "a/four"], total_count=338, links={"next": None})
    routes["/api/v1/models"] = (200, page, "application/json")
    for offset in range(4, 338, 4):  # a server that ignores offset
        routes[f"/api/v1/models?offset={offset}"] = (200, page, "application/json")
    listing = Client(base_url=f"{base}/api/v1").models()
    assert [s["path"] for s in seen] == ["/api/v1/models"]
    assert [m.id for m in listing.data] == ["a/one", "a/two", "a/three", "a/four"]


def test_a_page_of_models_already_seen_ends_paging_with_a_warning(
    replay_server, caplog: pytest.LogCaptureFixture
) -> None:
    base, routes, seen = replay_server
    page = _page(["a/one", "a/two"], total_count=6)  # no links: offset paging
    routes["/api/v1/models"] = (200, page, "application/json")
    routes["/api/v1/models?offset=2"] = (200, page, "application/json")  # offset ignored
    routes["/api/v1/models?offset=4"] = (200, page, "application/json")
    listing = Client(base_url=f"{base}/api/v1").models()
    assert [s["path"] for s in seen] == ["/api/v1/models", "/api/v1/models?offset=2"]
    assert [m.id for m in listing.data] == ["a/one", "a/two"]
    assert "repeats models already listed (does the server ignore offset?)" in caplog.text


def test_the_models_command_prints_each_model_once(replay_server, monkeypatch) -> None:
    """Issue 23: `openrouter-probe models --format json` printed 340 rows for 4 models."""
    from click.testing import CliRunner

    from openrouter_probe.cli import cli

    base, routes, seen = replay_server
    page = _page(["a/one", "a/two", "a/three", "a/four"], total_count=338, links={"next": None})
    routes["/api/v1/models"] = (200, page, "application/json")
    for offset in range(4, 338, 4):
        routes[f"/api/v1/models?offset={offset}"] = (200, page, "application/json")
    monkeypatch.setenv("OPENROUTER_BASE_URL", f"{base}/api/v1")
    result = CliRunner().invoke(cli, ["models", "--format", "json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    assert [r["id"] for r in rows] == ["a/one", "a/two", "a/three", "a/four"]
    assert len(seen) == 1


def test_models_pages_skip_unreadable_models_and_say_so_once(
    replay_server, caplog: pytest.LogCaptureFixture
) -> None:
    base, routes, _ = replay_server
    broken = {"id": "x/broken", "pricing": {"prompt": {"usd": 1}}}
    page1 = json.loads(_page(["a/one"], links={"next": "/api/v1/models?offset=2"}))
    page1["data"].append(broken)
    page2 = json.loads(_page(["a/two"]))
    page2["data"].insert(0, {**broken, "id": "x/broken-too"})
    routes["/api/v1/models"] = (200, json.dumps(page1), "application/json")
    routes["/api/v1/models?offset=2"] = (200, json.dumps(page2), "application/json")
    listing = Client(base_url=f"{base}/api/v1").models()
    assert [m.id for m in listing.data] == ["a/one", "a/two"]
    assert [(s.index, s.key) for s in listing.skipped] == [(1, "x/broken"), (2, "x/broken-too")]
    warnings = [r.getMessage() for r in caplog.records if r.name.startswith("openrouter_probe")]
    assert warnings == [
        "skipped 2 of 4 models that could not be read; "
        "first: data[1] (x/broken): pricing.prompt: Input should be a valid string"
    ]

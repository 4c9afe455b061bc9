"""The sync client through pytest-recording cassettes.

The cassettes in tests/cassettes/test_client/ are built by tests/cassettes/build_cassettes.py from
the real bodies in tests/data/captures (named per cassette there); none was recorded live here.
"""

from __future__ import annotations

from decimal import Decimal

import pytest
import requests

from openrouter_probe.client import Client, _translate_status, page_url
from openrouter_probe.errors import (
    APIConnectionError,
    APIError,
    APIStatusError,
    ConfigError,
    InsufficientCreditsError,
    NoRouteError,
    RateLimitError,
)


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
    with pytest.raises(APIConnectionError, match=r"cannot reach http://127\.0\.0\.1:9"):
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
    exc = _translate_status(_response(status, f'{{"error":{{"message":"m","code":{status}}}}}'))
    assert type(exc) is cls
    assert exc.status_code == status and exc.code == status


def test_groq_429_metadata_and_retry_after() -> None:
    body = (
        '{"error":{"message":"Provider returned error","code":429,"metadata":{"raw":"moonshotai/'
        'kimi-k2-0905 is temporarily rate-limited upstream.","provider_name":"Groq"}},'
        '"user_id":"user_redacted"}'
    )  # captures/kimi-k2-0905/simple_kimi-k2_groq.yaml
    exc = _translate_status(_response(429, body, {"Retry-After": "7"}))
    assert isinstance(exc, RateLimitError)
    assert exc.retry_after == 7.0
    assert exc.metadata["provider_name"] == "Groq"
    assert "Groq: moonshotai/kimi-k2-0905 is temporarily rate-limited" in str(exc)


def test_402_names_the_fix() -> None:
    body = (
        '{"error":{"message":"This request requires more credits, or fewer max_tokens. You '
        'requested up to 16384 tokens, but can only afford 1056.","code":402}}'
    )
    exc = _translate_status(_response(402, body))
    assert isinstance(exc, InsufficientCreditsError)
    assert "can only afford 1056" in str(exc) and "settings/credits" in str(exc)


def test_non_json_error_body() -> None:
    exc = _translate_status(_response(503, "<html>upstream connect error</html>"))
    assert exc.status_code == 503 and exc.code is None
    assert "upstream connect error" in str(exc)

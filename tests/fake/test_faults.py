"""Every fault the fake injects, seen by a client over loopback HTTP; fault specs and their errors."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
import requests

from openrouter_probe.api.sse import iter_sse_events
from openrouter_probe.errors import ConfigError
from openrouter_probe.fake import ManualClock, load_faults, parse_faults, serve
from openrouter_probe.fake.degrade import parse_degrade

MODEL = "moonshotai/kimi-k2.5"
KEY = {"Authorization": "Bearer sk-fake-test"}
CHUTES_ONLY = {"order": ["chutes/int4"], "allow_fallbacks": False}


def _chat(fake, *, stream=False, provider=CHUTES_ONLY, text="What is 37 * 41?", **extra):
    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": text}],
        "max_tokens": 400,
        "stream": stream,
        "provider": provider,
        **extra,
    }
    return requests.post(
        f"{fake.base_url}/chat/completions", json=body, headers=KEY, stream=stream, timeout=30
    )


def _events(response):
    return list(iter_sse_events(response.iter_lines(decode_unicode=True)))


# -- specs ----------------------------------------------------------------------------------------


def test_spec_parses_rates_schedules_tags_and_seconds() -> None:
    plan = parse_faults("upstream_429:chutes/int4=1, drop=@3+7, stall=0.25/60s", seed=5)
    first, second, third = plan.rules
    assert (first.kind, first.tag, first.rate) == ("upstream_429", "chutes/int4", 1.0)
    assert (second.kind, sorted(second.requests)) == ("drop", [3, 7])
    assert (third.kind, third.rate, third.wait_s) == ("stall", 0.25, 60.0)
    assert plan.seed == 5


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            "upstream_428=0.1",
            "unknown fault 'upstream_428' (known: attestation_403, batch_404, batch_expire, batch_failed,",
        ),
        ("drop", "expected KIND=RATE or KIND=@N"),
        ("drop=2", "rate 2.0 must be between 0 and 1"),
        ("drop=often", "rate 'often' is not a number between 0 and 1"),
        ("drop=@x", "'@x' is not @N or @N+M"),
        ("drop=@0", "request numbers count from 1"),
        ("stall=0.1/soon", "'soon' is not a number of seconds"),
    ],
)
def test_a_bad_spec_is_one_clear_line(spec: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_faults(spec)
    assert message in str(info.value)
    assert f"faults entry {spec!r}" in str(info.value)
    assert "\n" not in str(info.value)


def test_yaml_fault_file(tmp_path: Path) -> None:
    path = tmp_path / "faults.yaml"
    path.write_text(
        "faults:\n"
        "  - {kind: upstream_429, rate: 1, tag: chutes/int4}\n"
        "  - {kind: drop, requests: [2]}\n"
        "  - {kind: stall, rate: 0.5, seconds: 9}\n"
    )
    plan = parse_faults(str(path), seed=3)
    assert [r.kind for r in plan.rules] == ["upstream_429", "drop", "stall"]
    assert plan.rules[2].wait_s == 9.0
    bad = tmp_path / "bad.yaml"
    bad.write_text("faults:\n  - {kind: drop, rate: 0.1, when: later}\n")
    with pytest.raises(ConfigError, match=r"bad.yaml: faults\[0\]: unknown key 'when'"):
        load_faults(bad)


def test_degrade_options() -> None:
    assert parse_degrade(["fireworks=0.2", "baseten/fp4=1"]) == {
        "fireworks": 0.2,
        "baseten/fp4": 1.0,
    }
    with pytest.raises(ConfigError, match="expected TAG=RATE"):
        parse_degrade(["fireworks"])


def test_a_bad_spec_fails_before_serving() -> None:
    with pytest.raises(ConfigError, match="unknown fault"), serve(speed=0, faults="nope=1"):
        pass  # pragma: no cover


# -- upstream faults, fallbacks -------------------------------------------------------------------


def test_upstream_429_is_the_real_provider_error_and_is_not_billed() -> None:
    with serve(speed=0, faults="upstream_429=1") as fake:
        r = _chat(fake)
        assert r.status_code == 429
        assert r.headers["X-Fake-Fault"] == "upstream_429"
        error = r.json()["error"]
        assert error["message"] == "Provider returned error"
        assert error["metadata"]["provider_name"] == "Chutes"
        assert error["metadata"]["raw"].startswith(
            "moonshotai/kimi-k2.5 is temporarily rate-limited upstream. Please retry shortly"
        )
        assert len(fake.ledger) == 0 and fake.ledger.total_usd == 0
        assert fake.ledger.errors == {"upstream_429": 1}


def test_order_falls_back_to_the_next_endpoint_on_an_upstream_fault() -> None:
    with serve(speed=0, faults="upstream_429:chutes/int4=1") as fake:
        r = _chat(fake, provider={"order": ["chutes/int4", "deepinfra/int4"]})
        assert r.status_code == 200
        body = r.json()
        assert body["provider"] == "DeepInfra"
        gen = requests.get(
            f"{fake.base_url}/generation", params={"id": body["id"]}, headers=KEY, timeout=5
        ).json()["data"]
        assert [(a["provider_name"], a["status"]) for a in gen["provider_responses"]] == [
            ("Chutes", 429),
            ("DeepInfra", 200),
        ]
        assert fake.ledger.get(body["id"]).tag == "deepinfra/int4"


def test_no_fallback_when_fallbacks_are_off() -> None:
    with serve(speed=0, faults="upstream_503:chutes/int4=1") as fake:
        r = _chat(fake, provider={"order": ["chutes/int4"], "allow_fallbacks": False})
        assert r.status_code == 503
        assert r.json()["error"]["metadata"]["provider_name"] == "Chutes"
        # sort: the cheapest first, then the next one on a fault
        r = _chat(fake, provider={"sort": "price"})
        assert r.status_code == 200 and r.json()["provider"] != "Chutes"
        r = _chat(fake, provider={"sort": "price", "allow_fallbacks": False})
        assert r.status_code == 503


def test_load_balancing_falls_back_too() -> None:
    with serve(speed=0, faults="upstream_502:chutes=1") as fake:
        providers = {
            _chat(fake, provider={}, text=f"{i} + 2").json()["provider"] for i in range(40)
        }
    assert "Chutes" not in providers and len(providers) >= 4


def test_upstream_502_and_wrapped_400() -> None:
    with serve(speed=0, faults="upstream_502=@1,wrapped_400=@2") as fake:
        first, second, third = _chat(fake), _chat(fake), _chat(fake)
    assert first.status_code == 502
    assert first.json()["error"]["message"] == "Provider returned error"
    assert second.status_code == 400
    raw = second.json()["error"]["metadata"]["raw"]
    assert '"code":429' in raw  # a transient error wrapped in a 400
    assert third.status_code == 200


def test_platform_429_has_retry_after_and_rate_limit_headers() -> None:
    with serve(speed=0, faults="platform_429=@1") as fake:
        r = _chat(fake)
        assert r.status_code == 429
        assert r.headers["Retry-After"] == "10"
        assert r.headers["X-RateLimit-Limit"] == "20"
        assert r.headers["X-RateLimit-Remaining"] == "0"
        assert int(r.headers["X-RateLimit-Reset"]) > 0
        assert "Rate limit exceeded" in r.json()["error"]["message"]
        assert _chat(fake).status_code == 200  # scheduled: the first request only


def test_rates_are_seeded() -> None:
    def failing(seed: int) -> list[int]:
        with serve(speed=0, seed=seed, faults="upstream_429=0.3") as fake:
            return [i for i in range(60) if _chat(fake, text=f"{i} * 3").status_code == 429]

    once, again, other = failing(11), failing(11), failing(12)
    assert once == again
    assert once != other
    assert 8 <= len(once) <= 30


# -- response faults ------------------------------------------------------------------------------


def test_mid_stream_error_chunk_with_http_200() -> None:
    with serve(speed=0, faults="stream_error=1") as fake:
        r = _chat(fake, stream=True)
        assert r.status_code == 200
        text = r.text
        events = list(iter_sse_events(text.splitlines(keepends=True)))
        last = events[-1]
        assert last["error"]["code"] == 502
        assert last["choices"][0]["finish_reason"] == "error"
        assert "usage" not in last and "[DONE]" not in text
        assert len(events) > 2  # some tokens went out first
        assert len(fake.ledger) == 0


def test_choice_error_in_a_200_body() -> None:
    with serve(speed=0, faults="choice_error=1") as fake:
        r = _chat(fake)
        assert r.status_code == 200
        choice = r.json()["choices"][0]
        assert choice["finish_reason"] == "error"
        assert choice["error"]["code"] == 502
        assert "usage" not in r.json()
        assert len(fake.ledger) == 0


def test_connection_dropped_mid_body() -> None:
    with serve(speed=0, faults="drop=@1") as fake:
        with pytest.raises(requests.exceptions.RequestException):
            _chat(fake).json()
        assert _chat(fake).status_code == 200  # the server keeps serving
        assert len(fake.ledger) == 1


def test_connection_dropped_mid_stream() -> None:
    with serve(speed=0, faults="drop=1") as fake:
        r = _chat(fake, stream=True)
        chunks = []
        with pytest.raises(requests.exceptions.RequestException):  # noqa: PT012
            for line in r.iter_lines(decode_unicode=True):
                chunks.append(line)
        assert any(c.startswith("data: {") for c in chunks)
        assert "data: [DONE]" not in chunks
        assert len(fake.ledger) == 0


def test_slow_first_byte_shows_in_the_generation_latency() -> None:
    clock = ManualClock(datetime(2026, 3, 1, 12, 0, tzinfo=UTC))
    with serve(speed=0, clock=clock, faults="slow_first_byte=1/45") as fake:
        start = clock.now()
        r = _chat(fake)
        assert r.status_code == 200 and r.headers["X-Fake-Fault"] == "slow_first_byte"
        assert clock.now() - start == 45  # the server waited 45 s of its clock, none of ours
        gen = requests.get(
            f"{fake.base_url}/generation", params={"id": r.json()["id"]}, headers=KEY, timeout=5
        ).json()["data"]
        assert gen["latency"] == 45000


def test_stalled_stream_stops_then_closes() -> None:
    clock = ManualClock()
    with serve(speed=0, clock=clock, faults="stall=1/300") as fake:
        start = clock.now()
        r = _chat(fake, stream=True)
        lines = []
        with pytest.raises(requests.exceptions.RequestException):  # noqa: PT012
            for line in r.iter_lines(decode_unicode=True):
                lines.append(line)
        assert clock.now() - start == 300
        data = [x for x in lines if x.startswith("data: ")]
        assert data and "data: [DONE]" not in data
        assert len(fake.ledger) == 0


# -- degraded endpoints ---------------------------------------------------------------------------


def test_a_degraded_endpoint_gets_arithmetic_wrong() -> None:
    with serve(speed=0, degrade={"fireworks": 1.0}) as fake:
        good = _chat(fake, provider={"only": ["chutes"]}).json()["choices"][0]["message"]
        bad = _chat(fake, provider={"only": ["fireworks"]}).json()["choices"][0]["message"]
    assert good["content"] == " 37 * 41 = 1517"
    assert "1517" not in bad["content"]
    assert bad["reasoning"] == good["reasoning"]  # only answer tokens flip


def test_stopping_the_server_ends_a_stalled_stream_at_once() -> None:
    """A stall on the real clock lasts an hour; leaving ``serve`` cancels it instead of waiting
    (``stop`` would raise after its 30 s bound otherwise)."""
    with serve(speed=0, faults="stall=1/3600") as fake:
        r = _chat(fake, stream=True)
        lines = r.iter_lines(decode_unicode=True)
        assert next(lines) == ": OPENROUTER PROCESSING"
    with pytest.raises(requests.exceptions.RequestException):
        for _ in lines:
            pass

"""The fake's other paths and knobs over loopback HTTP: catalogue paths, /generation with its lag,
bad input, logprobs, price overrides, reasoning options, abandoned streams, the credit under load."""

from __future__ import annotations

import copy
import json
import threading
from datetime import UTC, datetime
from decimal import Decimal

import pytest
import requests

from openrouter_probe.api.sse import iter_sse_events
from openrouter_probe.fake import ManualClock, serve
from openrouter_probe.rules.snapshot import Snapshot, bundled_snapshot

MODEL = "moonshotai/kimi-k2.5"
KEY = {"Authorization": "Bearer sk-fake-test"}


def _chat(fake, body, *, headers=KEY, stream=False):
    return requests.post(
        f"{fake.base_url}/chat/completions", json=body, headers=headers, stream=stream, timeout=30
    )


def _ask(text="What is 37 * 41?", **extra):
    return {"model": MODEL, "messages": [{"role": "user", "content": text}], **extra}


def _snapshot_with(change) -> Snapshot:
    """The bundled snapshot with its endpoints edited by ``change(endpoints_by_tag)``."""
    snap = bundled_snapshot()
    data = copy.deepcopy(snap.data)
    change({e["tag"]: e for e in data["endpoints"]})
    return Snapshot(
        model=snap.model, data=data, taken_at=snap.taken_at, source="file", origin="test"
    )


@pytest.fixture(scope="module")
def fake():
    with serve(speed=0) as server:
        yield server


# -- catalogue paths ------------------------------------------------------------------------------


def test_endpoints_by_id_and_permaslug_and_stats_only_with_a_key(fake) -> None:
    for path in ("moonshotai/kimi-k2.5", "moonshotai/kimi-k2.5-0127"):
        r = requests.get(f"{fake.base_url}/models/{path}/endpoints", headers=KEY, timeout=5)
        data = r.json()["data"]
        assert data["id"] == MODEL and len(data["endpoints"]) == 11
        assert data["endpoints"][0]["latency_last_30m"]["p50"] == 1850
    anonymous = requests.get(f"{fake.base_url}/models/{MODEL}/endpoints", timeout=5).json()
    assert anonymous["data"]["endpoints"][0]["latency_last_30m"] is None
    missing = requests.get(f"{fake.base_url}/models/nobody/nothing/endpoints", timeout=5)
    assert missing.status_code == 404
    assert missing.json()["error"] == {
        "message": "No endpoints found for nobody/nothing.",
        "code": 404,
    }


def test_models_and_providers(fake) -> None:
    models = requests.get(f"{fake.base_url}/models", timeout=5).json()
    assert models["total_count"] == 1
    entry = models["data"][0]
    assert entry["id"] == MODEL and entry["canonical_slug"] == "moonshotai/kimi-k2.5-0127"
    assert entry["pricing"]["completion"] == "0.0000022"  # the cheapest endpoint's (Chutes)
    providers = requests.get(f"{fake.base_url}/providers", timeout=5).json()["data"]
    slugs = {p["slug"]: p["name"] for p in providers}
    assert slugs["atlas-cloud"] == "AtlasCloud" and slugs["moonshotai"] == "Moonshot AI"
    assert len(slugs) == 11


def test_generation_appears_after_the_lag() -> None:
    clock = ManualClock(datetime(2026, 3, 1, 9, 0, tzinfo=UTC))
    with serve(speed=0, clock=clock, generation_lag_s=8) as fake:
        body = _chat(fake, _ask(max_tokens=300)).json()
        url = f"{fake.base_url}/generation"
        early = requests.get(url, params={"id": body["id"]}, headers=KEY, timeout=5)
        assert early.status_code == 404
        assert early.json()["error"]["message"] == f"Generation {body['id']} not found"
        clock.advance(8)
        gen = requests.get(url, params={"id": body["id"]}, headers=KEY, timeout=5).json()["data"]
    assert gen["total_cost"] == body["usage"]["cost"]
    assert gen["provider_name"] == body["provider"]
    assert gen["tokens_completion"] == body["usage"]["completion_tokens"]
    assert (
        gen["native_tokens_reasoning"]
        == body["usage"]["completion_tokens_details"]["reasoning_tokens"]
    )
    assert gen["created_at"].startswith("2026-03-01T09:00")


def test_key_needs_a_key(fake) -> None:
    assert requests.get(f"{fake.base_url}/key", timeout=5).status_code == 401
    data = requests.get(f"{fake.base_url}/key", headers=KEY, timeout=5).json()["data"]
    assert data["limit"] is None and data["limit_remaining"] is None


def test_a_configured_key_rejects_others() -> None:
    with serve(speed=0, api_key="sk-right") as fake:
        wrong = _chat(fake, _ask(), headers={"Authorization": "Bearer sk-wrong"})
        right = _chat(fake, _ask(), headers={"Authorization": "Bearer sk-right"})
    assert wrong.status_code == 401
    assert wrong.json()["error"] == {"message": "User not found.", "code": 401}
    assert right.status_code == 200


# -- bad input ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"{not json", "Invalid JSON in request body"),
        (b"[1, 2]", "Invalid request body: expected a JSON object"),
        (
            json.dumps({"messages": [{"role": "user", "content": "hi"}]}).encode(),
            "No models provided",
        ),
        (json.dumps({"model": MODEL}).encode(), 'Input required: specify "messages"'),
        (json.dumps(_ask(max_tokens=0)).encode(), "max_tokens must be a positive integer, got 0"),
        (
            json.dumps({**_ask(), "model": "moonshotai/kimi-k9"}).encode(),
            "moonshotai/kimi-k9 is not a valid model ID",
        ),
        (
            json.dumps(_ask(provider={"order": ["chutes"], "prefer": ["x"]})).encode(),
            "provider.prefer: not a key OpenRouter accepts in provider",
        ),
        (
            json.dumps(_ask(provider={"sort": "cheapest"})).encode(),
            "Invalid provider preferences",
        ),
    ],
)
def test_bad_input_gets_400_and_the_server_keeps_serving(fake, body: bytes, message: str) -> None:
    r = requests.post(f"{fake.base_url}/chat/completions", data=body, headers=KEY, timeout=5)
    assert r.status_code == 400
    error = r.json()["error"]
    assert error["code"] == 400 and message in error["message"]
    assert _chat(fake, _ask(max_tokens=50)).status_code == 200


def test_require_parameters_404_names_the_parameters_step(fake) -> None:
    r = _chat(fake, _ask(provider={"require_parameters": True}, logprobs=True))
    assert r.status_code == 404
    error = r.json()["error"]
    assert error["message"].startswith(
        "No endpoints found that can handle the requested parameters."
    )
    assert error["metadata"]["failed_routing_step"] == "Filter by Parameters"


# -- content --------------------------------------------------------------------------------------


def test_logprobs_where_the_endpoint_lists_them() -> None:
    def add_logprobs(endpoints):
        endpoints["deepinfra/int4"]["supported_parameters"] += ["logprobs", "top_logprobs"]

    with serve(_snapshot_with(add_logprobs), speed=0) as fake:
        body = _ask(logprobs=True, top_logprobs=3, max_tokens=400)
        listed = _chat(fake, {**body, "provider": {"only": ["deepinfra"]}}).json()
        unlisted = _chat(fake, {**body, "provider": {"only": ["chutes"]}}).json()
        stream = _chat(fake, {**body, "provider": {"only": ["deepinfra"]}, "stream": True})
        events = list(iter_sse_events(stream.text.splitlines(keepends=True)))
    content = listed["choices"][0]["logprobs"]["content"]
    assert [t["token"] for t in content] == [" 37", " *", " 41", " =", " 1517"]
    first = content[0]
    assert first["logprob"] <= 0 and first["bytes"] == list(b" 37")
    assert len(first["top_logprobs"]) == 3 and first["top_logprobs"][0]["token"] == " 37"
    assert unlisted["choices"][0]["logprobs"] is None
    streamed = [
        t
        for e in events
        if e["choices"][0].get("logprobs")
        for t in e["choices"][0]["logprobs"]["content"]
    ]
    assert [t["token"] for t in streamed] == [t["token"] for t in content]


def test_degraded_logprobs_are_shifted() -> None:
    def add_logprobs(endpoints):
        for tag in ("deepinfra/int4", "baseten/fp4"):
            endpoints[tag]["supported_parameters"] += ["logprobs"]

    with serve(_snapshot_with(add_logprobs), speed=0, degrade=["baseten=0.3"]) as fake:

        def logprobs(slug):
            body = _ask(
                "tell me about rivers", logprobs=True, max_tokens=400, provider={"only": [slug]}
            )
            return [
                t["logprob"] for t in _chat(fake, body).json()["choices"][0]["logprobs"]["content"]
            ]

        clean, shifted = logprobs("deepinfra"), logprobs("baseten")
    assert len(clean) == len(shifted)
    assert all(s <= c - 0.3 + 1e-9 for c, s in zip(clean, shifted, strict=True))


def test_temperature_zero_is_deterministic_and_above_zero_varies(fake) -> None:
    cold = {
        _chat(fake, _ask("describe a tree", temperature=0, max_tokens=9000)).json()["choices"][0][
            "message"
        ]["content"]
        for _ in range(3)
    }
    hot = {
        _chat(fake, _ask("describe a tree", temperature=0.9, max_tokens=9000)).json()["choices"][0][
            "message"
        ]["content"]
        for _ in range(3)
    }
    assert len(cold) == 1 and len(hot) == 3


def test_max_tokens_cuts_the_answer_with_finish_reason_length(fake) -> None:
    body = _chat(fake, _ask("describe a tree", max_tokens=5)).json()
    assert body["choices"][0]["finish_reason"] == "length"
    assert body["usage"]["completion_tokens"] == 5


def test_reasoning_excluded_is_billed_but_not_returned(fake) -> None:
    body = _chat(fake, _ask(reasoning={"exclude": True}, max_tokens=500)).json()
    message = body["choices"][0]["message"]
    assert message["reasoning"] is None and "reasoning_details" not in message
    assert body["usage"]["completion_tokens_details"]["reasoning_tokens"] > 0
    off = _chat(fake, _ask(reasoning={"enabled": False}, max_tokens=500)).json()
    assert off["usage"]["completion_tokens_details"]["reasoning_tokens"] == 0
    assert off["usage"]["completion_tokens"] == 5  # " 37 * 41 = 1517"


def test_a_reasoning_budget_caps_the_reasoning_and_leaves_the_answer(fake) -> None:
    # reasoning.max_tokens (OpenRouter's reasoning budget) stops the reasoning there; the answer
    # keeps its length, so max_tokens = budget + the answer's room holds a whole answer
    free = _chat(fake, _ask("describe a tree", max_tokens=5000)).json()
    capped = _chat(fake, _ask("describe a tree", max_tokens=5000, reasoning={"max_tokens": 20}))
    body = capped.json()
    free_reasoning = free["usage"]["completion_tokens_details"]["reasoning_tokens"]
    assert free_reasoning > 20
    assert body["usage"]["completion_tokens_details"]["reasoning_tokens"] == 20
    answer = free["usage"]["completion_tokens"] - free_reasoning
    assert body["usage"]["completion_tokens"] == 20 + answer
    assert body["choices"][0]["message"]["content"] == free["choices"][0]["message"]["content"]


# -- billing --------------------------------------------------------------------------------------


def test_price_overrides_by_prompt_size_and_time_window() -> None:
    def overrides(endpoints):
        endpoints["chutes/int4"]["pricing"]["overrides"] = [
            {"min_prompt_tokens": 100, "prompt": "0.000001"},
            {"utc_start": 2200, "utc_end": 600, "completion": "0.000001"},  # wraps midnight
        ]

    clock = ManualClock(datetime(2026, 3, 1, 12, 0, tzinfo=UTC))
    with serve(_snapshot_with(overrides), speed=0, clock=clock) as fake:

        def cost(text):
            usage = _chat(fake, _ask(text, max_tokens=300, provider={"only": ["chutes"]})).json()[
                "usage"
            ]
            return usage, Decimal(str(usage["cost"]))

        usage, paid = cost("short question 1 + 1")
        assert (
            paid
            == Decimal("0.00000045") * usage["prompt_tokens"]
            + Decimal("0.0000022") * usage["completion_tokens"]
        )
        long_text = "word " * 120 + "3 + 4"  # more than 100 prompt tokens: the dearer prompt price
        usage, paid = cost(long_text)
        assert usage["prompt_tokens"] > 100
        assert (
            paid
            == Decimal("0.000001") * usage["prompt_tokens"]
            + Decimal("0.0000022") * usage["completion_tokens"]
        )
        clock.set(datetime(2026, 3, 1, 23, 30, tzinfo=UTC))  # inside the night window
        usage, paid = cost("short question 1 + 1")
        assert (
            paid
            == Decimal("0.00000045") * usage["prompt_tokens"]
            + Decimal("0.000001") * usage["completion_tokens"]
        )
        clock.set(datetime(2026, 3, 2, 6, 0, tzinfo=UTC))  # the window is half-open: 06:00 is out
        usage, paid = cost("short question 1 + 1")
        assert (
            paid
            == Decimal("0.00000045") * usage["prompt_tokens"]
            + Decimal("0.0000022") * usage["completion_tokens"]
        )


def test_discount_is_applied() -> None:
    def discount(endpoints):
        endpoints["chutes/int4"]["pricing"]["discount"] = 0.1

    with serve(_snapshot_with(discount), speed=0) as fake:
        usage = _chat(fake, _ask(max_tokens=300, provider={"only": ["chutes"]})).json()["usage"]
    full = (
        Decimal("0.00000045") * usage["prompt_tokens"]
        + Decimal("0.0000022") * usage["completion_tokens"]
    )
    assert Decimal(str(usage["cost"])) == full * Decimal("0.9")


def test_an_abandoned_stream_is_billed_for_what_was_sent() -> None:
    with serve(speed=0, median_tokens=60000) as fake:
        body = _ask(
            "write a very long story", stream=True, max_tokens=60000, provider={"only": ["chutes"]}
        )
        r = _chat(fake, body, stream=True)
        for i, _ in enumerate(r.iter_lines()):
            if i > 20:
                break
        r.close()  # the client goes away mid-stream
        # Wait for the server to notice, through the ledger (no sleeping).
        entry = None
        for _ in range(10000):
            entries = fake.ledger.entries
            if entries:
                entry = entries[0]
                break
            threading.Event().wait(0.001)
    assert entry is not None and entry.cancelled and entry.streamed
    assert 0 < entry.completion_tokens < 50000
    expected = (
        Decimal("0.00000045") * entry.prompt_tokens + Decimal("0.0000022") * entry.completion_tokens
    )
    assert entry.cost_usd == expected


def test_the_credit_holds_under_concurrent_requests() -> None:
    with serve(speed=0, credit_usd=0.01) as fake:
        statuses: list[int] = []
        lock = threading.Lock()

        def worker(i):
            with requests.Session() as s:
                for j in range(15):
                    r = s.post(
                        f"{fake.base_url}/chat/completions",
                        json=_ask(f"{i} * {j}", max_tokens=1000, provider={"only": ["chutes"]}),
                        headers=KEY,
                        timeout=30,
                    )
                    with lock:
                        statuses.append(r.status_code)

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert 402 in statuses and 200 in statuses
        assert fake.ledger.total_usd <= Decimal("0.01")
        assert fake.credit.reserved_usd == 0
        key = requests.get(f"{fake.base_url}/key", headers=KEY, timeout=5).json()["data"]
    assert Decimal(str(key["usage"])) == fake.ledger.total_usd


# -- the time model -------------------------------------------------------------------------------


@pytest.mark.parametrize("speed", [1.0, 10.0])
def test_latency_and_throughput_follow_the_endpoint_scaled_by_speed(speed: float) -> None:
    clock = ManualClock()
    with serve(speed=speed, clock=clock) as fake:
        for stream in (False, True):
            r = _chat(
                fake,
                _ask(
                    "describe a lake", max_tokens=3000, stream=stream, provider={"only": ["chutes"]}
                ),
            )
            gen_id = r.headers["X-Generation-Id"]
            assert r.content  # the whole answer
            gen = requests.get(
                f"{fake.base_url}/generation", params={"id": gen_id}, headers=KEY, timeout=5
            ).json()["data"]
            # Chutes: latency p50 1850 ms .. p99 13875 ms; throughput 31..50 tokens/s (p50..p99).
            assert 925 / speed <= gen["latency"] <= 13875 / speed + 1
            seconds = gen["tokens_completion"] / (gen["generation_time"] / 1000) / speed
            assert 15 <= seconds <= 51  # tokens per second of the endpoint's own clock


def test_importing_the_library_the_cli_and_the_plugin_does_not_import_aiohttp() -> None:
    import subprocess
    import sys

    code = (
        "import sys, openrouter_probe, openrouter_probe.fake, openrouter_probe.fake.plugin;"
        "from openrouter_probe.cli import cli;"
        "print(','.join(m for m in ('aiohttp', 'pydantic') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_the_package_reaches_fake_lazily() -> None:
    import openrouter_probe as orp

    assert orp.fake.serve is serve


def test_keep_alives_fill_a_long_wait() -> None:
    """At speed 1 Chutes takes seconds to answer; meanwhile a body gets whitespace and a stream
    ': OPENROUTER PROCESSING' every 5 s of the server's clock, as OpenRouter sends them."""
    clock = ManualClock()
    with serve(speed=1, clock=clock) as fake:
        body = _ask("describe a lake", max_tokens=3000, provider={"only": ["chutes"]})
        start = clock.now()
        text = _chat(fake, body).text
        waited = clock.now() - start
        padding = text[: len(text) - len(text.lstrip())]
        assert waited > 10
        assert (
            padding.count("\n         ") >= 8 + int(waited // 5) - 2
        )  # two waits, each cut in 5 s steps
        assert json.loads(text)["provider"] == "Chutes"
        stream = _chat(fake, {**body, "stream": True}).text
    head = stream.split("data: ", 1)[0]
    assert head.count(": OPENROUTER PROCESSING") >= 1
    assert set(head.replace(": OPENROUTER PROCESSING\n\n", "")) == set()

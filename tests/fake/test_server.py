"""The fake OpenRouter over real loopback HTTP: routing, billing, bodies, the ledger, 401/402/404.

Every test talks HTTP to a server on 127.0.0.1 (``speed=0``: no waits). Prices asserted here are the
bundled K2.5 snapshot's (``openrouter_probe/data/kimi-k2.5.snapshot.json``).
"""

from __future__ import annotations

import json
from collections import Counter
from decimal import Decimal

import pytest
import requests

from openrouter_probe.api.sse import iter_sse_events
from openrouter_probe.fake import serve

MODEL = "moonshotai/kimi-k2.5"
KEY = {"Authorization": "Bearer sk-fake-test"}


def _chat(fake, body, *, headers=KEY, stream=False):
    return requests.post(
        f"{fake.base_url}/chat/completions", json=body, headers=headers, stream=stream, timeout=30
    )


def _ask(text="What is 37 * 41?", **extra):
    return {"model": MODEL, "messages": [{"role": "user", "content": text}], **extra}


@pytest.fixture(scope="module")
def fake():
    with serve(speed=0, seed=1) as server:
        yield server


def test_order_without_fallbacks_is_served_by_chutes_at_chutes_prices(fake) -> None:
    r = _chat(fake, _ask(provider={"order": ["chutes/int4"], "allow_fallbacks": False}))
    assert r.status_code == 200
    assert r.text.startswith("\n")  # keep-alive padding before the JSON, as OpenRouter sends it
    body = r.json()
    assert body["provider"] == "Chutes"
    assert body["model"] == "moonshotai/kimi-k2.5-0127"
    assert r.headers["X-Generation-Id"] == body["id"]
    usage = body["usage"]
    # Chutes in the bundled snapshot: $0.45/M in, $2.20/M out.
    expected = (
        Decimal("0.00000045") * usage["prompt_tokens"]
        + Decimal("0.0000022") * usage["completion_tokens"]
    )
    assert Decimal(str(usage["cost"])) == expected
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert usage["completion_tokens_details"]["reasoning_tokens"] > 0
    assert usage["cost_details"]["upstream_inference_prompt_cost"] == float(
        Decimal("0.00000045") * usage["prompt_tokens"]
    )
    entry = fake.ledger.get(body["id"])
    assert entry is not None and entry.tag == "chutes/int4" and entry.cost_usd == expected


def test_arithmetic_is_answered_correctly_and_identically_everywhere(fake) -> None:
    answers = set()
    for tag in ("chutes/int4", "deepinfra/int4", "fireworks"):
        r = _chat(fake, _ask(provider={"only": [tag]}, temperature=0))
        message = r.json()["choices"][0]["message"]
        assert "1517" in message["content"]
        answers.add((message["content"], message["reasoning"]))
    assert len(answers) == 1


def test_a_block_that_admits_nothing_gets_the_real_404(fake) -> None:
    r = _chat(fake, _ask(provider={"only": ["anthropic"]}))
    assert r.status_code == 404
    error = r.json()["error"]
    assert error["code"] == 404
    assert error["message"].startswith(
        "No allowed providers are available for the selected model. Providers serving "
        "moonshotai/kimi-k2.5-0127: chutes, deepinfra,"
    )
    assert error["message"].endswith(
        "your request's provider.only preference permits only: anthropic."
    )
    meta = error["metadata"]
    assert meta["requested_providers"] == ["anthropic"]
    assert "fireworks" in meta["available_providers"] and len(meta["available_providers"]) == 11
    assert meta["failed_routing_step"] == "Filter by Allowed Providers"


def test_ignore_spreads_over_several_providers_and_never_the_ignored(fake) -> None:
    seen: Counter[str] = Counter()
    for i in range(120):
        r = _chat(
            fake,
            _ask(f"question {i}", provider={"ignore": ["fireworks", "baseten"]}, max_tokens=50),
        )
        seen[r.json()["provider"]] += 1
    assert "Fireworks" not in seen and "BaseTen" not in seen
    assert len(seen) >= 5
    # The cheapest (Chutes, 1/price² weight 0.17) is served more often than Moonshot AI (0.09).
    assert seen["Chutes"] > seen["Moonshot AI"]
    assert "Venice" not in seen  # degraded (status -2): a fallback only


def test_stream_has_the_real_shape_and_ends_with_usage_and_done(fake) -> None:
    r = _chat(fake, _ask(stream=True, provider={"only": ["deepinfra"]}), stream=True)
    assert r.status_code == 200
    assert r.headers["Content-Type"].startswith("text/event-stream")
    text = r.text
    assert text.startswith(": OPENROUTER PROCESSING\n\n")
    assert text.endswith("data: [DONE]\n\n")
    events = list(iter_sse_events(text.splitlines(keepends=True)))
    kinds = [
        "reasoning" if e["choices"][0]["delta"].get("reasoning") else "content" for e in events[:-2]
    ]
    assert kinds == sorted(kinds, key=lambda k: k == "content")  # reasoning deltas, then content
    last, before = events[-1], events[-2]
    assert before["choices"][0]["finish_reason"] == "stop" and "usage" not in before
    assert last["choices"][0]["finish_reason"] == "stop"  # repeated on the usage chunk
    assert all(
        e["provider"] == "DeepInfra" and e["model"] == "moonshotai/kimi-k2.5-0127" for e in events
    )
    content = "".join(e["choices"][0]["delta"]["content"] for e in events)
    assert "1517" in content
    usage = last["usage"]
    reasoning = sum(1 for e in events for _ in e["choices"][0]["delta"].get("reasoning") or "") > 0
    assert reasoning and usage["completion_tokens_details"]["reasoning_tokens"] > 0
    assert fake.ledger.get(events[0]["id"]).cost_usd == Decimal(str(usage["cost"]))


def test_ledger_endpoint_totals_what_was_billed() -> None:
    with serve(speed=0) as fake:
        costs = []
        for i in range(5):
            r = _chat(fake, _ask(f"{i} + 1", max_tokens=100, stream=bool(i % 2)))
            if i % 2:
                costs.append(list(iter_sse_events(r.text.splitlines(True)))[-1]["usage"]["cost"])
            else:
                costs.append(r.json()["usage"]["cost"])
        _chat(fake, _ask(provider={"only": ["nobody"]}))  # an error: not billed
        ledger = requests.get(f"{fake.url}/_fake/ledger", timeout=5).json()
    assert ledger["count"] == 5 and len(ledger["entries"]) == 5
    assert Decimal(str(ledger["total_usd"])) == sum(Decimal(str(c)) for c in costs)
    assert ledger["errors"] == {"no_route": 1}


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer "}, {"Authorization": "sk-x"}])
def test_a_missing_or_empty_key_gets_401(fake, headers) -> None:
    r = _chat(fake, _ask(), headers=headers)
    assert r.status_code == 401
    assert r.json()["error"] == {"message": "No auth credentials found", "code": 401}


def test_402_can_only_afford_n_then_insufficient_credits() -> None:
    # Chutes only: worst case of 1000 output tokens is 1000 × $2.20/M = $0.0022 plus the prompt.
    block = {"only": ["chutes/int4"]}
    with serve(speed=0, credit_usd=0.001) as fake:
        r = _chat(fake, _ask(max_tokens=1000, provider=block))
        assert r.status_code == 402
        message = r.json()["error"]["message"]
        prompt_usd = Decimal("0.00000045") * 10  # "What is 37 * 41?" is 10 prompt tokens
        affordable = int((Decimal("0.001") - prompt_usd) / Decimal("0.0000022"))
        assert message.startswith(
            "This request requires more credits, or fewer max_tokens. You requested up to 1000 "
            f"tokens, but can only afford {affordable}."
        )
        ok = _chat(fake, _ask(max_tokens=affordable, provider=block))
        assert ok.status_code == 200
        # Spend the rest, then nothing is affordable at all.
        while True:
            r = _chat(fake, _ask(max_tokens=200, provider=block))
            if r.status_code != 200:
                break
        assert r.status_code == 402
        assert fake.ledger.total_usd <= Decimal("0.001")
        key = requests.get(f"{fake.base_url}/key", headers=KEY, timeout=5).json()["data"]
        assert key["limit"] == 0.001
        assert Decimal(str(key["usage"])) == fake.ledger.total_usd
        assert key["limit_remaining"] == pytest.approx(0.001 - key["usage"])


def test_insufficient_credits_when_nothing_is_left() -> None:
    with serve(speed=0, credit_usd=0) as fake:
        r = _chat(fake, _ask(max_tokens=10))
    assert r.status_code == 402
    assert r.json()["error"] == {
        "message": "Insufficient credits. Add more using https://openrouter.ai/settings/credits",
        "code": 402,
    }


def test_speed_zero_stream_of_many_tokens_is_complete() -> None:
    with serve(speed=0, median_tokens=5000) as fake:
        r = _chat(fake, _ask("write a long essay", stream=True, max_tokens=20000), stream=True)
        events = list(iter_sse_events(r.iter_lines(decode_unicode=True)))
    usage = events[-1]["usage"]
    deltas = sum(
        len((e["choices"][0]["delta"].get("reasoning") or "").split())
        + len(e["choices"][0]["delta"]["content"].split())
        for e in events
    )
    assert deltas == usage["completion_tokens"]


def test_bad_json_is_400_and_the_server_keeps_serving(fake) -> None:
    r = requests.post(
        f"{fake.base_url}/chat/completions", data=b"{not json", headers=KEY, timeout=5
    )
    assert r.status_code == 400
    assert json.loads(r.text)["error"]["code"] == 400
    assert _chat(fake, _ask()).status_code == 200


def _shape(value):
    """The key structure of a JSON value (keys of objects, recursively; the first list item)."""
    if isinstance(value, dict):
        return {k: _shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_shape(value[0])] if value else []
    return None


def _capture_body(name: str) -> str:
    import yaml

    from tests.conftest import CAPTURES

    doc = yaml.safe_load((CAPTURES / name).read_text(encoding="utf-8"))
    return doc["interactions"][0]["response"]["body"]


def test_a_body_has_the_captured_shape(fake) -> None:
    """Every key of the real K2.5 body (captures/kimi-k2.5-chat-inceptron.yaml) is in the fake's,
    at the same place, and the padding comes first as in the capture."""
    real = _capture_body("kimi-k2.5-chat-inceptron.yaml")
    ours = _chat(fake, _ask(max_tokens=4000)).text
    for body in (real, ours):
        padding = body[: len(body) - len(body.lstrip())]
        assert body.startswith("\n") and len(padding) > 10 and body.lstrip().startswith("{")
    assert _shape(json.loads(ours)) == _shape(json.loads(real))


def test_a_stream_has_the_captured_shape(fake) -> None:
    """Same for the real K2.5 stream (captures/kimi-k2.5-stream-modelrun.yaml): the comment, the
    first reasoning delta, the content deltas, the finish chunk, the usage chunk, [DONE]."""
    real_text = _capture_body("kimi-k2.5-stream-modelrun.yaml")
    ours_text = _chat(fake, _ask(stream=True, max_tokens=4000)).text
    real = list(iter_sse_events(real_text.splitlines(keepends=True)))
    ours = list(iter_sse_events(ours_text.splitlines(keepends=True)))
    assert ours_text.split("\n", 1)[0] == real_text.split("\n", 1)[0] == ": OPENROUTER PROCESSING"
    assert real_text.rstrip().endswith("data: [DONE]") and ours_text.rstrip().endswith(
        "data: [DONE]"
    )
    assert _shape(ours[0]) == _shape(real[0])  # a reasoning delta
    content = [e for e in ours if e["choices"][0]["delta"].get("content")]
    real_content = [e for e in real if e["choices"][0]["delta"].get("content")]
    assert _shape(content[0]) == _shape(real_content[0])
    assert _shape(ours[-2]) == _shape(real[-2])  # the finish chunk
    assert _shape(ours[-1]) == _shape(real[-1])  # the usage chunk, finish_reason repeated


def test_the_usage_template_is_the_captures_usage() -> None:
    """The Inceptron capture's charge, through the usage template, is the capture's ``usage``."""
    from openrouter_probe.fake import bodies
    from openrouter_probe.fake.billing import Charge

    charge = Charge(21, 202, 166, Decimal("0.00000924"), Decimal("0.0004444"))
    real = json.loads(_capture_body("kimi-k2.5-chat-inceptron.yaml"))["usage"]
    assert json.loads(bodies.usage_json(charge)) == real


def test_load_balancing_follows_the_routing_models_weights() -> None:
    """Shares served under default load balancing match ``route()``'s weights for the same block."""
    from openrouter_probe.rules.routing import route
    from openrouter_probe.rules.snapshot import bundled_snapshot

    block = {"ignore": ["fireworks", "baseten"]}
    n = 600
    with serve(speed=0, seed=3) as fake, requests.Session() as session:
        for i in range(n):
            session.post(
                f"{fake.base_url}/chat/completions",
                json=_ask(f"{i} - 1", max_tokens=50, provider=block),
                headers=KEY,
                timeout=30,
            )
        served = Counter(e.tag for e in fake.ledger.entries)
    weights = route(block, bundled_snapshot().endpoints).weights
    assert set(served) == {tag for tag, w in weights.items() if w > 0}
    for tag, weight in weights.items():
        # 3.5 standard deviations of a binomial share at n = 600
        tolerance = 3.5 * (weight * (1 - weight) / n) ** 0.5 + 1e-9
        assert abs(served[tag] / n - weight) <= tolerance, (tag, served[tag] / n, weight)

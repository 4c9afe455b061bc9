"""The fake OpenRouter's non-streaming hot path: what its speed rests on, checked as facts.

The speed itself is measured by ``benchmarks/fake_server.py``, never asserted here. These tests pin
the properties it relies on: one routing decision per distinct block and parameters, load balancing
drawn from chains computed once per decision at the decision's weights, and a request history (the
ledger and ``/generation`` records) the garbage collector does not have to walk.
"""

from __future__ import annotations

import gc
from collections import Counter
from decimal import Decimal

import requests

import openrouter_probe.fake.router as fake_router
from openrouter_probe.fake import serve
from openrouter_probe.fake.generation import GenerationRecord
from openrouter_probe.rules.provider_block import ProviderBlock
from openrouter_probe.rules.routing import RequestParams, route
from openrouter_probe.rules.snapshot import bundled_snapshot

MODEL = "moonshotai/kimi-k2.5"
KEY = {"Authorization": "Bearer sk-fake-test"}


def _ask(provider: dict[str, object], *, text: str = "What is 37 * 41?", **extra: object) -> dict:
    return {
        "model": MODEL,
        "messages": [{"role": "user", "content": text}],
        "provider": provider,
        **extra,
    }


def test_routing_is_asked_once_per_distinct_block_and_parameters(monkeypatch) -> None:
    calls: list[ProviderBlock] = []

    def counting_route(block, endpoints, params):
        calls.append(block)
        return route(block, endpoints, params)

    monkeypatch.setattr(fake_router, "route", counting_route)
    ignore = {"ignore": ["fireworks", "baseten"]}
    with serve(speed=0) as fake:
        url = f"{fake.base_url}/chat/completions"
        for _ in range(5):
            r = requests.post(url, json=_ask(ignore, max_tokens=200), headers=KEY, timeout=30)
            assert r.status_code == 200
        assert len(calls) == 1  # the same block and parameters: the cached decision
        r = requests.post(url, json=_ask(ignore, max_tokens=300), headers=KEY, timeout=30)
        assert r.status_code == 200 and len(calls) == 2  # another max_tokens: another decision
        order = {"order": ["chutes/int4"], "allow_fallbacks": False}
        r = requests.post(url, json=_ask(order, max_tokens=200), headers=KEY, timeout=30)
        assert r.json()["provider"] == "Chutes" and len(calls) == 3
        assert calls[2].order == ["chutes/int4"]


def test_load_balanced_chains_follow_the_decision_weights() -> None:
    snapshot = bundled_snapshot()
    block = ProviderBlock.parse({"ignore": ["fireworks", "baseten"]}, source="provider")
    decision = route(block, snapshot.endpoints, RequestParams(max_tokens=200, prompt_tokens=21))
    plan = fake_router.Plan(decision, block)
    n = 20000
    firsts = Counter(plan.chain((i + 0.5) / n)[0].tag for i in range(n))
    total = sum(c.weight for c in decision.candidates)
    for c in decision.candidates:
        assert abs(firsts[c.endpoint.tag] / n - c.weight / total) < 2 / n, c.endpoint.tag
    served = {c.endpoint.tag for c in decision.candidates if c.weight > 0}
    assert set(firsts) == served and len(served) >= 3
    # every chain: the drawn endpoint first, then every other admitted one in the decision's order
    tags = [c.endpoint.tag for c in decision.candidates]
    for u in (0.0, 0.5, 0.999999):
        chain = [e.tag for e in plan.chain(u)]
        assert chain[1:] == [t for t in tags if t != chain[0]]


def test_ordered_chain_without_fallbacks_keeps_the_order_list_only() -> None:
    snapshot = bundled_snapshot()
    block = ProviderBlock.parse(
        {"order": ["chutes/int4", "deepinfra"], "allow_fallbacks": False}, source="provider"
    )
    plan = fake_router.Plan(route(block, snapshot.endpoints, RequestParams()), block)
    assert [e.slug for e in plan.chain(0.3)] == ["chutes", "deepinfra"]
    sort = ProviderBlock.parse({"sort": "price", "allow_fallbacks": False}, source="provider")
    decision = route(sort, snapshot.endpoints, RequestParams())
    plan = fake_router.Plan(decision, sort)
    assert [e.tag for e in plan.chain(0.9)] == [decision.candidates[0].endpoint.tag]


def test_history_is_exact_and_not_walked_by_the_garbage_collector() -> None:
    with serve(speed=0) as fake:
        url = f"{fake.base_url}/chat/completions"
        bodies = [
            requests.post(
                url, json=_ask({}, text=f"What is {i} * 7?"), headers=KEY, timeout=30
            ).json()
            for i in range(3)
        ]
        for _ in range(3):  # a collection untracks a tuple once the tuples in it are: 3 levels
            gc.collect()
        for body in bodies:
            entry = fake.ledger.get(body["id"])
            assert entry is not None and entry.cost_usd == Decimal(str(body["usage"]["cost"]))
            assert entry.prompt_tokens == body["usage"]["prompt_tokens"]
            assert entry.provider == body["provider"]
            row = fake.fake.generations[body["id"]]
            assert GenerationRecord(*row).cost_usd == body["usage"]["cost"]
            assert not gc.is_tracked(row)  # plain values only: the collector skips it
        assert fake.ledger.entries == [fake.ledger.get(b["id"]) for b in bodies]
        assert fake.ledger.total_usd == sum(e.cost_usd for e in fake.ledger.entries)
        assert not any(gc.is_tracked(row) for row in fake.ledger._entries.values())

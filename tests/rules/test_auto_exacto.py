"""Auto Exacto (OPENROUTER.md 16; docs ``guides/routing/auto-exacto``, 2026): requests that carry
``tools`` are ordered by OpenRouter on throughput, tool-call error rate and benchmarks, not by
price, unless the block says ``sort: "price"``; ``sort: "exacto"`` asks for that order on every
request. The routing model, the budget's blend, the fake, ``policy explain`` and ``policy lint``
all know it."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import requests
import yaml
from click.testing import CliRunner

from openrouter_probe.analysis.budget import plan_budget
from openrouter_probe.cli import cli
from openrouter_probe.fake import serve
from openrouter_probe.rules.routing import RequestParams, route
from openrouter_probe.rules.snapshot import bundled_snapshot
from tests.conftest import ROOT

SNAP = bundled_snapshot()
KEY = {"Authorization": "Bearer sk-fake-test"}
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "multiply",
            "parameters": {"type": "object", "properties": {"a": {"type": "number"}}},
        },
    }
]


def _providers(fake: object, n: int, **extra: object) -> Counter[str]:
    seen: Counter[str] = Counter()
    for i in range(n):
        body = {
            "model": "moonshotai/kimi-k2.5",
            "messages": [{"role": "user", "content": f"What is 37 * {i}?"}],
            "max_tokens": 50,
            **extra,
        }
        r = requests.post(
            f"{fake.base_url}/chat/completions",  # type: ignore[attr-defined]
            json=body,
            headers=KEY,
            timeout=30,
        )
        assert r.status_code == 200, r.text
        seen[r.json()["provider"]] += 1
    return seen


def test_the_fake_serves_tool_rows_in_auto_exacto_order() -> None:
    exacto = route({}, SNAP.endpoints, RequestParams(parameters=frozenset({"tools"})))
    first = exacto.candidates[0].endpoint.provider_name
    with serve(speed=0, seed=3) as fake:
        with_tools = _providers(fake, 30, tools=TOOLS)
        plain = _providers(fake, 30)
        priced = _providers(fake, 10, tools=TOOLS, provider={"sort": "price"})
    assert with_tools == Counter({first: 30})  # ordered by OpenRouter, not drawn by 1/price²
    assert len(plain) > 1  # load balancing spreads requests without tools
    cheapest = route({"sort": "price"}, SNAP.endpoints).candidates[0].endpoint.provider_name
    assert priced == Counter({cheapest: 10}) and cheapest != first


def test_the_budget_blend_follows_auto_exacto_for_tool_rows() -> None:
    plain = plan_budget(SNAP, budget_usd=100, output_tokens="10M")
    tools = plan_budget(SNAP, budget_usd=100, output_tokens="10M", parameters=["tools"])
    assert plain.routing_mode == "load_balanced" and tools.routing_mode == "exacto"
    # the blend is no longer the 1/price² mix: traffic goes down the throughput chain
    assert tools.blended.price_out_usd_per_m != plain.blended.price_out_usd_per_m


def test_policy_explain_says_what_tool_rows_get(tmp_path: Path) -> None:
    spec = tmp_path / "balanced.spec.yaml"
    spec.write_text(
        yaml.safe_dump({"model": "moonshotai/kimi-k2.5", "strategy": "balance", "precision": "any"})
    )
    result = CliRunner().invoke(cli, ["policy", "explain", str(spec), "--offline"])
    assert result.exit_code == 0, result.output
    assert (
        "tools: requests with tools are ordered by Auto Exacto (throughput, tool-call error rate, "
        "benchmarks), not by price: add sort: price to keep price order"
        in result.output.replace("\n  ", " ")  # explain's prose wraps to the table's width
    )
    ordered = CliRunner().invoke(
        cli, ["policy", "explain", str(ROOT / "policies" / "kimi-k2.5.yaml")]
    )
    assert "tools: requests with tools follow the order list like any other" in ordered.output


def test_policy_lint_knows_exacto(tmp_path: Path) -> None:
    block = tmp_path / "block.yaml"
    block.write_text(yaml.safe_dump({"provider": {"sort": "exacto"}}))
    result = CliRunner().invoke(
        cli, ["policy", "lint", str(block), "--model", "moonshotai/kimi-k2.5", "--offline"]
    )
    assert "provider.sort: 'exacto' orders every request by throughput" in result.output
    assert "[exacto]" in result.output
    assert "schema" not in result.output  # a value OpenRouter accepts

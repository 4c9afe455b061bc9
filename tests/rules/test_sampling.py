"""The sampling a model card fixes: Kimi K2.5 at temperature 1.0 with thinking,
0.6 without, top_p 0.95 (Moonshot's card and vendor verifier), sent explicitly unless the user
sets other values, recorded per row, said by the dry run."""

from __future__ import annotations

import asyncio
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

from openrouter_probe.fake import serve
from openrouter_probe.generation import generate
from openrouter_probe.generation.manifest import SourceOptions
from openrouter_probe.rules.sampling import sampling_advice, thinking_on
from openrouter_probe.run.money.spend import Prices
from openrouter_probe.run.report import render_result
from openrouter_probe.run.rows import PromptRow
from openrouter_probe.run.send.request import RequestBuilder
from tests._generate import POLICY, no_sleep, records, write_prompts

PRICES = Prices(Decimal(0), Decimal(0))


def _body(builder: RequestBuilder, params: dict[str, Any]) -> dict[str, Any]:
    row = PromptRow("r", "d", [{"role": "user", "content": "q"}], params, 1)
    return json.loads(builder.build(row, PRICES).body)


def test_the_registry_and_the_thinking_switch() -> None:
    advice = sampling_advice("moonshotai/kimi-k2.5")
    assert advice is not None and sampling_advice("moonshotai/kimi-k2.5:exacto") is advice
    assert advice.values(thinking=True) == {"temperature": 1.0, "top_p": 0.95}
    assert advice.values(thinking=False) == {"temperature": 0.6, "top_p": 0.95}
    assert sampling_advice("moonshotai/kimi-k2") is None
    assert thinking_on(None) and thinking_on({"effort": "high"})
    assert not thinking_on({"enabled": False}) and not thinking_on({"effort": "none"})
    assert not thinking_on(None, "none")


def test_sent_unless_the_user_sets_other_values() -> None:
    advice = sampling_advice("moonshotai/kimi-k2.5")
    builder = RequestBuilder(model="moonshotai/kimi-k2.5", provider_json="{}", advice=advice)
    thinking = _body(builder, {})
    assert (thinking["temperature"], thinking["top_p"]) == (1.0, 0.95)
    instant = _body(builder, {"reasoning": {"enabled": False}})
    assert (instant["temperature"], instant["top_p"]) == (0.6, 0.95)
    own = _body(builder, {"temperature": 0.2})  # the row's own value wins, sent once
    assert own["temperature"] == 0.2 and own["top_p"] == 0.95
    assert list(json.loads(builder.build(
        PromptRow("r", "d", [{"role": "user", "content": "q"}], {"temperature": 0.2}, 1), PRICES
    ).body)).count("temperature") == 1  # fmt: skip
    run_set = RequestBuilder(
        model="moonshotai/kimi-k2.5", provider_json="{}", advice=advice, temperature=0.0
    )
    assert _body(run_set, {})["temperature"] == 0.0  # the run's temperature= wins
    plain = RequestBuilder(model="moonshotai/kimi-k2", provider_json="{}")
    assert "temperature" not in _body(plain, {}) and "top_p" not in _body(plain, {})


def _gen(tmp: Path, base_url: str, **options: Any) -> Any:
    return asyncio.run(
        generate(
            tmp / "prompts.jsonl",
            policy=POLICY,
            out=tmp / "out.jsonl",
            base_url=base_url,
            api_key="sk-sample",
            sleep=no_sleep,
            max_tokens=50,
            **options,
        )
    )


def test_generate_sends_records_and_the_dry_run_says_it(tmp_path: Path) -> None:
    rows = [
        {"id": "a", "prompt": "think"},
        {"id": "b", "prompt": "quick", "reasoning": {"enabled": False}},
        {"id": "c", "prompt": "mine", "temperature": 0.3},
    ]
    write_prompts(tmp_path / "prompts.jsonl", rows)
    dry = _gen(tmp_path, "http://127.0.0.1:9", dry_run=True, snapshot="bundled")
    said = "temperature=1, top_p=0.95 with thinking; temperature=0.6, top_p=0.95 without"
    assert any(said in n for n in dry.notes)
    assert "Kimi Vendor Verifier" in render_result(dry)
    with serve(speed=0, seed=1, record_requests=True) as fake:
        named = SourceOptions.of(row_params="reasoning,temperature")  # columns sent: named
        summary = _gen(tmp_path, fake.base_url, budget_usd=1, source=named)
        sent = {b["messages"][-1]["content"]: b for b in fake.fake.requests or []}
    assert summary.stop_reason == "done"
    assert (sent["think"]["temperature"], sent["think"]["top_p"]) == (1.0, 0.95)
    assert (sent["quick"]["temperature"], sent["quick"]["top_p"]) == (0.6, 0.95)
    assert (sent["mine"]["temperature"], sent["mine"]["top_p"]) == (0.3, 0.95)
    out = {r["id"]: r for r in records(tmp_path / "out.jsonl")}
    assert out["a"]["sampling_params"] == {"temperature": 1.0, "top_p": 0.95}
    assert out["b"]["sampling_params"] == {
        "temperature": 0.6,
        "top_p": 0.95,
        "reasoning": {"enabled": False},
    }
    assert out["c"]["sampling_params"] == {"temperature": 0.3, "top_p": 0.95}

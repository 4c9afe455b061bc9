"""A sampling mix per row: thinking, temperature and reasoning effort drawn from a seed and the row
id, sent within what the model card fixes, recorded as ``sampling_params``, the same draw on a
resume and on every shard, counted per dataset by the dry run and ``audit``."""

from __future__ import annotations

import asyncio
import json
import pickle
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from openrouter_probe.cli import cli
from openrouter_probe.errors import ConfigError, OptionError
from openrouter_probe.generation import generate
from openrouter_probe.generation.audit import audit
from openrouter_probe.generation.manifest import SourceOptions
from openrouter_probe.rules.sampling import sampling_advice
from openrouter_probe.rules.sampling_mix import SamplingMix, parse_mix
from openrouter_probe.rules.snapshot import bundled_snapshot
from openrouter_probe.run.money.spend import Prices
from openrouter_probe.run.rows import PromptRow
from openrouter_probe.run.send.request import RequestBuilder
from tests._generate import POLICY, LedgerSender, no_sleep, prompt_rows, records, write_prompts

KIMI = "moonshotai/kimi-k2.5"
ON = {"enabled": True}
OFF = {"enabled": False}


def _gen(prompts: Path, out: Path, **options: Any) -> Any:
    options.setdefault("send", LedgerSender(seed=3))
    options.setdefault("max_tokens", 32)
    return asyncio.run(
        generate(
            prompts,
            policy=POLICY,
            out=out,
            snapshot="bundled",
            sleep=no_sleep,
            budget_usd=100,
            **options,
        )
    )


def _thinking(out: Path) -> dict[str, bool]:
    return {r["id"]: r["sampling_params"]["reasoning"] == ON for r in records(out)}


def test_a_mix_is_a_cycle_or_weighted_shares() -> None:
    cycle = parse_mix("temperature", "0.6, 0.8,1.0")
    assert cycle.values == (0.6, 0.8, 1.0) and cycle.shares == pytest.approx((1 / 3,) * 3)
    weighted = parse_mix("thinking", "on=0.8,off=0.2")
    assert weighted.values == (True, False) and weighted.shares == pytest.approx((0.8, 0.2))
    assert parse_mix("reasoning_effort", {"low": 1, "high": 3}).shares == (0.25, 0.75)
    refused = {
        ("thinking", "on=0.8,maybe=0.2"): "'maybe' is not on or off",
        ("temperature", "0.6,2.5"): "'2.5' is not a temperature from 0 to 2",
        ("reasoning_effort", "low,huge"): "'huge' is not one of max, xhigh, high",
        ("thinking", "on=0.8,off"): "off=?: a weight is a number above 0",
        ("thinking", "on,on"): "on is given twice",
        ("thinking", ""): "give at least one value",
    }
    for (name, spec), said in refused.items():
        with pytest.raises(OptionError) as caught:
            parse_mix(name, spec)
        assert said in str(caught.value) and f"{name}_mix=" in str(caught.value)


def test_a_draw_is_the_seed_and_the_row_id_alone() -> None:
    mix = SamplingMix.of(thinking="on=0.7,off=0.3", seed=11)
    assert mix is not None
    ids = [f"r{i}" for i in range(1000)]
    one_go = {i: mix.draw(i).thinking for i in ids}
    # any order, any subset (a shard, a resume): the same draw for the same row
    again = {i: mix.draw(i).thinking for i in reversed(ids[::3])}
    assert all(one_go[i] == again[i] for i in again)
    on = sum(one_go.values())
    assert abs(on - 700) <= 45, on
    other = SamplingMix.of(thinking="on=0.7,off=0.3", seed=12)
    assert other is not None and any(other.draw(i).thinking != one_go[i] for i in ids)


def test_the_mix_sets_thinking_and_the_card_sets_the_temperature() -> None:
    mix = SamplingMix.of(thinking="on=0.5,off=0.5", seed=1)
    builder = RequestBuilder(model=KIMI, provider_json="{}", advice=sampling_advice(KIMI), mix=mix)
    seen = Counter()
    for i in range(40):
        row = PromptRow(f"r{i}", "d", [{"role": "user", "content": "q"}], {}, 1)
        body = json.loads(builder.build(row, Prices(0, 0)).body)
        on = body["reasoning"] == ON
        assert body["reasoning"] == (ON if on else OFF)
        assert (body["temperature"], body["top_p"]) == ((1.0, 0.95) if on else (0.6, 0.95))
        assert builder.sampling_of(row) == {k: body[k] for k in ("temperature", "top_p",
                                                                 "reasoning")}  # fmt: skip
        seen[on] += 1
    assert seen[True] and seen[False]
    own = PromptRow("x", "d", [{"role": "user", "content": "q"}], {"reasoning": OFF}, 1)
    assert json.loads(builder.build(own, Prices(0, 0)).body)["temperature"] == 0.6  # row's wins


def test_a_temperature_mix_against_the_card_is_refused_naming_the_rule() -> None:
    mix = SamplingMix.of(temperature="0.6,1.0", thinking="on=1,off=1")
    assert mix is not None
    with pytest.raises(ConfigError) as caught:
        mix.check(KIMI, sampling_advice(KIMI), None)
    said = str(caught.value)
    assert "fixes temperature 1 with thinking" in said and "Kimi Vendor Verifier" in said
    assert "may draw 0.6" in said
    # what the card allows: thinking always on (the default) at its own temperature
    allowed = SamplingMix.of(temperature="1.0")
    assert allowed is not None
    allowed.check(KIMI, sampling_advice(KIMI), None)
    allowed.check("moonshotai/kimi-k2", sampling_advice("moonshotai/kimi-k2"), None)  # no card


def test_the_cli_exits_2_naming_the_rule(tmp_path: Path) -> None:
    write_prompts(tmp_path / "p.jsonl", prompt_rows(3))
    result = CliRunner().invoke(
        cli,
        ["generate", str(tmp_path / "p.jsonl"), "--policy", str(POLICY), "-o",
         str(tmp_path / "out.jsonl"), "--offline", "--dry-run", "--temperature-mix", "0.6,0.8",
         "--thinking-mix", "on=0.8,off=0.2"],
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    assert "--temperature-mix 0.6,0.8" in result.output
    assert "moonshotai/kimi-k2.5's card fixes temperature" in result.output
    both = CliRunner().invoke(
        cli,
        ["generate", str(tmp_path / "p.jsonl"), "--policy", str(POLICY), "-o",
         str(tmp_path / "out.jsonl"), "--offline", "--temperature-mix", "0.6",
         "--temperature", "0.6"],
    )  # fmt: skip
    assert both.exit_code == 2
    assert "give --temperature-mix or --temperature, not both" in both.output


def test_1000_rows_the_same_draws_on_one_machine_a_resume_and_two_shards(tmp_path: Path) -> None:
    prompts = write_prompts(tmp_path / "p.jsonl", prompt_rows(1000, datasets=2, size=4))
    mix = {"thinking_mix": "on=0.7,off=0.3", "mix_seed": 5}
    _gen(prompts, tmp_path / "one.jsonl", **mix)
    one = _thinking(tmp_path / "one.jsonl")
    assert len(one) == 1000 and abs(sum(one.values()) - 700) <= 45, sum(one.values())
    # a resume: 300 rows first, then the rest
    _gen(prompts, tmp_path / "resumed.jsonl", source=SourceOptions.of(limit=300), **mix)
    _gen(prompts, tmp_path / "resumed.jsonl", **mix)
    assert _thinking(tmp_path / "resumed.jsonl") == one
    # two shards, each its own file
    for i in range(2):
        _gen(prompts, tmp_path / f"shard{i}.jsonl", shard=(i, 2), **mix)
    shards = {**_thinking(tmp_path / "shard0.jsonl"), **_thinking(tmp_path / "shard1.jsonl")}
    assert shards == one
    # every row records what it was sent with, the card's temperature for its thinking
    for r in records(tmp_path / "one.jsonl"):
        on = r["sampling_params"]["reasoning"] == ON
        assert r["sampling_params"] == {
            "temperature": 1.0 if on else 0.6, "top_p": 0.95, "reasoning": ON if on else OFF
        }  # fmt: skip
    # audit counts the realised shares per dataset
    report = audit([tmp_path / "one.jsonl"], policy=POLICY, snapshot=bundled_snapshot())
    shares = report.to_dict()["sampling_shares"]
    by = {d: Counter(r["sampling_params"]["reasoning"] == ON for r in records(
        tmp_path / "one.jsonl") if r["dataset"] == d) for d in ("d0", "d1")}  # fmt: skip
    for d in ("d0", "d1"):
        assert shares[d]["thinking"] == {"on": by[d][True], "off": by[d][False]}
        assert shares[d]["temperature"] == {"1": by[d][True], "0.6": by[d][False]}
    notes = report.render_notes()
    assert f"sampled with, d0: thinking on {by['d0'][True]:,}" in notes


def test_the_dry_run_says_the_mix_and_its_shares_per_dataset(tmp_path: Path) -> None:
    prompts = write_prompts(tmp_path / "p.jsonl", prompt_rows(200, datasets=2, size=4))
    summary = _gen(prompts, tmp_path / "out.jsonl", dry_run=True, thinking_mix="on=0.7,off=0.3",
                   reasoning_effort_mix="low,high", mix_seed=2)  # fmt: skip
    mix = SamplingMix.of(thinking="on=0.7,off=0.3", reasoning_effort="low,high", seed=2)
    assert mix is not None
    assert mix.describe() in summary.notes
    on = Counter(r["dataset"] for r in prompt_rows(200, datasets=2) if mix.draw(r["id"]).thinking)
    line = next(n for n in summary.notes if n.startswith("drawn for the rows to send, d0:"))
    assert f"thinking on {on['d0']:,} ({on['d0'] / 100:.1%})" in line
    assert "reasoning effort" in line  # the effort of the rows that think


def test_an_effort_mix_sends_each_rows_effort(tmp_path: Path) -> None:
    prompts = write_prompts(tmp_path / "p.jsonl", prompt_rows(30, size=4))
    sender = LedgerSender(seed=1)
    _gen(prompts, tmp_path / "out.jsonl", reasoning_effort_mix="low,high,max", send=sender)
    mix = SamplingMix.of(reasoning_effort="low,high,max")
    assert mix is not None
    sent = {"r" + json.loads(b)["messages"][-1]["content"].split()[1]: json.loads(b)
            for b in sender.bodies}  # fmt: skip
    efforts = set()
    for r in records(tmp_path / "out.jsonl"):
        effort = mix.draw(r["id"]).effort
        assert sent[r["id"]]["reasoning"] == {"effort": effort}
        assert r["sampling_params"]["reasoning"] == {"effort": effort}
        efforts.add(effort)
    assert efforts == {"low", "high", "max"}


def test_the_exports_keep_sampling_params_for_each_consumer(tmp_path: Path) -> None:
    """SpecForge's rows (its validator's contract, loaded by ``datasets`` as its scripts do),
    speculators' ``metadata.sampling_params`` (ShareGPT), and the ``hf`` folder's column."""
    from openrouter_probe.generation.export import export
    from tests._specforge import assert_specforge_row

    datasets = pytest.importorskip("datasets")
    prompts = write_prompts(tmp_path / "p.jsonl", prompt_rows(12, size=4))
    out = tmp_path / "out.jsonl"
    _gen(prompts, out, thinking_mix="on=0.5,off=0.5", mix_seed=4, max_tokens=4000)
    sent = {r["id"]: r["sampling_params"] for r in records(out)}
    assert len(set(json.dumps(v) for v in sent.values())) == 2  # both modes drawn
    cache = str(tmp_path / "cache")
    export([out], fmt="specforge", output=tmp_path / "sf.jsonl")
    for row in records(tmp_path / "sf.jsonl"):
        assert_specforge_row(row, expect_reasoning=False)
        assert row["sampling_params"] == sent[row["id"]]
    loaded = datasets.load_dataset(
        "json", data_files=str(tmp_path / "sf.jsonl"), split="train", cache_dir=cache
    )
    for row in loaded:
        # Arrow fills a struct's missing keys with null: the values sent are all there
        got = {k: v for k, v in row["sampling_params"].items() if v is not None}
        assert got == sent[row["id"]]
    export([out], fmt="sharegpt", output=tmp_path / "sg.jsonl")
    for row in records(tmp_path / "sg.jsonl"):
        assert row["metadata"] == {"sampling_params": sent[row["id"]]}
    export([out], fmt="hf", output=tmp_path / "hub")
    hub = datasets.load_dataset(str(tmp_path / "hub"), split="train", cache_dir=cache)
    assert len(hub) == 12
    assert {r["id"]: json.loads(r["sampling_params"]) for r in hub} == sent


def test_a_mix_seed_without_a_mix_is_named_unused(tmp_path: Path) -> None:
    write_prompts(tmp_path / "p.jsonl", prompt_rows(2))
    result = CliRunner().invoke(
        cli,
        ["generate", str(tmp_path / "p.jsonl"), "--policy", str(POLICY), "-o",
         str(tmp_path / "out.jsonl"), "--offline", "--mix-seed", "3"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "warning: --mix-seed 3 draws the --*-mix values, and no mix is given: ignored" in (
        result.output
    )


def test_shares_say_a_default_and_an_unrecorded_row_as_such() -> None:
    from openrouter_probe.rules.sampling_mix import Shares, count_sampling

    counts: dict[str, dict[str, dict[str, int]]] = {}
    count_sampling(counts, "d", {})  # nothing sent: the defaults, not a guess at them
    count_sampling(counts, "d", {"temperature": 0.6, "reasoning": {"effort": "low"}})
    count_sampling(counts, "d", None)  # a record of before sampling_params
    shares = Shares(counts)
    counts["d"]["thinking"]["on"] = 99  # the value is a copy: its counter is not
    with pytest.raises(TypeError):
        shares.counts["d"]["thinking"]["on"] = 2  # type: ignore[index]
    assert pickle.loads(pickle.dumps(shares)) == shares
    assert shares.to_dict() == {
        "d": {
            "thinking": {"model's default": 1, "on": 1},
            "temperature": {"provider's default": 1, "0.6": 1},
            "reasoning_effort": {"low": 1},
            "recorded": {"unknown": 1},
        }
    }


def test_a_failed_row_records_what_it_was_sent_with(tmp_path: Path) -> None:
    from tests._generate import http_failure

    prompts = write_prompts(tmp_path / "p.jsonl", prompt_rows(6, size=4))

    def refuse_r1(request: dict[str, Any], attempt: int) -> Any:
        said = request["messages"][-1]["content"]
        return http_failure(400, "Bad request") if said.startswith("question 1 ") else None

    _gen(prompts, tmp_path / "out.jsonl", thinking_mix="on=0.5,off=0.5",
         send=LedgerSender(seed=2, fail=refuse_r1))  # fmt: skip
    mix = SamplingMix.of(thinking="on=0.5,off=0.5")
    assert mix is not None
    out = {r["id"]: r for r in records(tmp_path / "out.jsonl")}
    assert out["r1"]["status"] == "failed"
    for ident, r in out.items():
        on = mix.draw(ident).thinking
        assert r["sampling_params"]["reasoning"] == (ON if on else OFF)
        assert r["sampling_params"]["temperature"] == (1.0 if on else 0.6)

"""Tool calls as K2-Vendor-Verifier scores them: schema accuracy over the
``finish_reason == "tool_calls"`` responses, tool-call F1 against the first party, and K2VV's
threshold beside our own tool tests; on the fake, the endpoint that breaks tool calls is the one
below the threshold, and our tool tests decide its verdict."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from scipy import stats as scipy_stats

import openrouter_probe as orp
from openrouter_probe.cli import cli
from openrouter_probe.rules.snapshot import bundled_snapshot
from openrouter_probe.verify.observation import Observation, ToolCall
from openrouter_probe.verify.results import decided_by
from openrouter_probe.verify.suites import Item
from openrouter_probe.verify.toolcalls import (
    K2VV_COMMIT,
    K2VV_F1_THRESHOLD,
    K2VVScore,
    fisher_exact,
    k2vv_results,
    k2vv_score,
    k2vv_valid,
)

MODEL = "moonshotai/kimi-k2.5"
SNAP = bundled_snapshot(MODEL)
INT4 = [e.tag for e in SNAP.endpoints if e.quantization == "int4" and e.slug != "moonshotai"]

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}
BARE = {"type": "function", "function": {"name": "ping"}}  # no parameters schema
TOOLS = (WEATHER, BARE)


def _call(name: str, arguments: str) -> ToolCall:
    return ToolCall(name, None, arguments)


def test_schema_validity_is_k2vvs_validate_tool_call() -> None:
    assert k2vv_valid(_call("get_weather", '{"city": "Paris"}'), TOOLS)
    assert not k2vv_valid(_call("get_weather", '{"town": "Paris"}'), TOOLS)  # required key
    assert not k2vv_valid(_call("get_weather", '{"city": 3}'), TOOLS)  # wrong type
    assert not k2vv_valid(_call("get_weather", '{"city": "Par'), TOOLS)  # not JSON
    assert not k2vv_valid(_call("get_time", "{}"), TOOLS)  # no such tool
    assert not k2vv_valid(_call("ping", "{}"), TOOLS)  # a tool without a schema: K2VV refuses


def _obs(item: str, finish: str | None, *calls: ToolCall) -> Observation:
    return Observation("x", item, finish_reason=finish, tool_calls=calls)


def test_f1_counts_finish_reasons_and_schema_accuracy_counts_tool_call_finishes() -> None:
    items = {
        f"t{i}": Item(f"t{i}", "tools", (), answer_kind="tool", tools=TOOLS) for i in range(10)
    }
    items["plain"] = Item("plain", "arith", ())  # no tools: not scored
    good = _call("get_weather", '{"city": "Oslo"}')
    bad = _call("get_weather", "{}")
    reference = {i: _obs(i, "tool_calls", good) for i in list(items)[:8]}
    reference |= {"t8": _obs("t8", "stop"), "t9": _obs("t9", "stop"), "plain": _obs("x", "stop")}
    run = {f"t{i}": _obs(f"t{i}", "tool_calls", good) for i in range(5)}  # TP 5, all valid
    run["t5"] = _obs("t5", "tool_calls", bad)  # TP, invalid
    run["t6"] = _obs("t6", "tool_calls")  # TP, a tool_calls finish without calls: invalid
    run["t7"] = _obs("t7", None)  # FN: a failed request is negative ("others")
    run["t8"] = _obs("t8", "tool_calls", good, bad)  # FP; one bad call makes it invalid
    run["t9"] = _obs("t9", "length")  # TN
    score = k2vv_score(items, run, reference)
    assert (score.items, score.tp, score.fp, score.fn, score.tn) == (10, 7, 1, 1, 1)
    assert (score.tool_call_responses, score.successful_tool_calls) == (8, 5)
    assert score.schema_accuracy == 5 / 8
    assert score.f1 == pytest.approx(7 / 8)  # 2TP / (2TP + FP + FN) = 14/16
    assert score.threshold == 0.80  # reasoning off: K2VV's non-thinking threshold
    assert k2vv_score(items, run, reference, thinking=True).threshold == 0.73
    assert K2VV_F1_THRESHOLD == {"thinking": 0.73, "instant": 0.80}


def test_the_threshold_is_beside_the_verdict_never_deciding_it() -> None:
    at = K2VVScore(20, 10, 10, tp=8, fp=2, fn=2, tn=8, threshold=0.8)  # F1 exactly 0.8
    f1, schema = k2vv_results(at, reference=K2VVScore(20, 10, 10, 10, 0, 0, 10, 0.8))
    assert (f1.name, f1.statistic, f1.verdict, f1.deciding) == (
        "k2vv_tool_call_f1",
        0.8,
        "consistent",  # K2VV: "above 80% is acceptable"; at it counts as meeting it
        False,
    )
    assert f1.p_value is None and f1.interval is None  # a threshold, not a test
    assert f"K2-Vendor-Verifier@{K2VV_COMMIT[:7]}" in f1.detail
    # 10 of 10 against 10 of 10: no difference, but 10 calls cannot show one within 10 pp
    assert (schema.statistic, schema.p_value, schema.verdict) == (1.0, 1.0, "inconclusive")
    many = K2VVScore(200, 100, 99, 90, 10, 10, 90, 0.8)
    ref = K2VVScore(200, 100, 100, 100, 0, 0, 100, 0.8)
    assert k2vv_results(many, reference=ref)[1].verdict == "consistent"  # 99/100, [0.946, 1]
    below = K2VVScore(20, 10, 2, tp=7, fp=3, fn=3, tn=7, threshold=0.8)
    f1, schema = k2vv_results(
        below, reference=K2VVScore(20, 10, 10, 10, 0, 0, 10, 0.8), alpha=0.05, tests=5
    )
    assert (f1.verdict, schema.verdict) == ("differs", "differs")
    exact = fisher_exact(2, 10, 10, 10)
    assert exact == pytest.approx(scipy_stats.fisher_exact([[2, 8], [10, 0]]).pvalue, rel=1e-9)
    assert (schema.p_value, schema.p_adjusted) == (exact, pytest.approx(5 * exact))
    never = K2VVScore(5, 0, 0, 0, 0, 0, 5, 0.8)
    assert [r.verdict for r in k2vv_results(never)] == ["inconclusive", "inconclusive"]
    # decided_by ignores results that are not deciding, whatever they say
    assert decided_by("differs", [f1, schema]) is None


@pytest.mark.parametrize("seed", [0, 1])
def test_on_the_fake_the_tool_breaking_endpoint_is_below_k2vvs_threshold(
    seed: int, tmp_path: Path
) -> None:
    args = ["verify", MODEL, "--endpoints", ",".join(INT4), "--suite", "tools", "--n", "40"]
    args += ["--seed", str(seed), "--budget-usd", "1", "--quiet", "--format", "json"]
    args += ["--out", str(tmp_path / "o.jsonl"), "--thinking", "off"]
    with orp.fake.serve(
        SNAP, speed=0, seed=seed, noise=0.02, degrade_tools={"atlas-cloud/int4": 0.8}
    ) as fake:
        env = {"OPENROUTER_API_KEY": "sk-fake", "OPENROUTER_BASE_URL": fake.base_url}
        shown = CliRunner().invoke(cli, args, env=env)
    assert shown.exit_code == 0, shown.output
    rows = {r["tag"]: r for r in json.loads(shown.stdout)}
    assert rows.pop("moonshotai/int4")["tests"] == []  # the reference is not tested
    broken = rows.pop("atlas-cloud/int4")
    tests = {t["name"]: t for t in broken["tests"]}
    assert broken["verdict"] == "differs"
    assert broken["decided_by"] in {"tool_trigger", "tool_schema", "tool_arguments"}
    assert tests[broken["decided_by"]]["deciding"] is True
    assert tests[broken["decided_by"]]["p_adjusted"] <= 0.05
    f1 = tests["k2vv_tool_call_f1"]
    assert f1["verdict"] == "differs" and f1["statistic"] < 0.80 and f1["deciding"] is False
    assert "threshold >= 80%" in f1["detail"] and f1["threshold"] == 0.8
    assert (
        f"below K2-Vendor-Verifier's tool_call_f1 threshold: {f1['statistic']:.1%} < 80.0%"
        in (broken["findings"])
    )
    schema = tests["k2vv_schema_accuracy"]
    assert schema["verdict"] == "differs" and schema["p_adjusted"] <= 0.05
    for tag, row in rows.items():  # the native endpoints meet K2VV's threshold
        tests = {t["name"]: t for t in row["tests"]}
        assert row["verdict"] != "differs", tag
        assert tests["k2vv_tool_call_f1"]["statistic"] >= 0.80, tag
        assert tests["k2vv_tool_call_f1"]["verdict"] == "consistent", tag
        assert tests["k2vv_schema_accuracy"]["verdict"] != "differs", tag
        assert row["findings"] == [], tag
        # every test carries the same keys, in the same order
        assert all(
            list(t)
            == [
                "name",
                "statistic",
                "p_value",
                "p_adjusted",
                "interval",
                "interval_level",
                "threshold",
                "verdict",
                "deciding",
                "detail",
            ]
            for t in row["tests"]
        )

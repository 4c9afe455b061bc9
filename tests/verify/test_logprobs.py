"""The token-level logprob comparison: top-k logprobs at the positions of the
reference's own completion that the endpoint shares, against the reference's second run, by a
one-sided sign test; reported beside the verdict, never deciding it. The fake serves logprobs in
OpenAI's shape only where the endpoint lists them."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import requests
from click.testing import CliRunner

import openrouter_probe as orp
from openrouter_probe.cli import cli
from openrouter_probe.rules.snapshot import Snapshot, bundled_snapshot
from openrouter_probe.verify.logprobs import (
    compare_logprobs,
    logprob_result,
    top_k_distance,
)
from openrouter_probe.verify.observation import Observation, positions_of
from openrouter_probe.verify.pins import pin_block

MODEL = "moonshotai/kimi-k2.5"
BUNDLED = bundled_snapshot(MODEL)


def _with_logprobs() -> Snapshot:
    """The bundled K2.5 snapshot with every endpoint listing ``logprobs`` and ``top_logprobs``
    (none does in the bundled one)."""
    data = json.loads(json.dumps(BUNDLED.data))
    for e in data["endpoints"]:
        e["supported_parameters"] = sorted({*e["supported_parameters"], "logprobs", "top_logprobs"})
    return Snapshot(BUNDLED.model, data, BUNDLED.taken_at, "file", "test: logprobs listed")


SNAP = _with_logprobs()
INT4 = [e.tag for e in SNAP.endpoints if e.quantization == "int4" and e.slug != "moonshotai"]


def _entry(token: str, logprob: float, *alts: tuple[str, float]) -> dict[str, Any]:
    tops = [{"token": token, "logprob": logprob}] + [{"token": t, "logprob": v} for t, v in alts]
    return {"token": token, "logprob": logprob, "bytes": list(token.encode()), "top_logprobs": tops}


def test_positions_are_read_from_openais_shape() -> None:
    logprobs = {
        "content": [_entry("4", -0.1, ("5", -2.5)), _entry("2", -0.01), {"token": "x"}],
        "refusal": None,
    }
    assert positions_of(logprobs) == ({"4": -0.1, "5": -2.5}, {"2": -0.01}, {})
    assert positions_of(None) is None and positions_of({"content": []}) is None
    body = {
        "provider": "Chutes",
        "choices": [{"message": {"content": "42"}, "finish_reason": "stop", "logprobs": logprobs}],
    }
    obs = Observation.from_completion("chutes/int4", "q", body)
    assert obs.tokens == ("4", "2", "x")
    assert obs.top_logprobs == ({"4": -0.1, "5": -2.5}, {"2": -0.01}, {})


def _obs(tokens: str, lps: list[float]) -> Observation:
    tops = tuple({t: lp} for t, lp in zip(tokens, lps, strict=True))
    return Observation("x", "q", tokens=tuple(tokens), top_logprobs=tops)


def test_shared_positions_against_the_floor_and_the_sign_test() -> None:
    ref = {f"q{i}": _obs("abc", [-0.1, -0.2, -0.3]) for i in range(6)}
    floor = dict(ref)  # the reference's second run: identical
    # the endpoint: the same tokens on every prompt, its first logprob lower by 0.5 nats
    shifted = {k: _obs("abc", [-0.6, -0.2, -0.3]) for k in ref}
    found = compare_logprobs(shifted, ref, floor)
    tv = top_k_distance({"a": -0.6}, {"a": -0.1})[0]  # the "other" bucket holds the rest
    assert tv == pytest.approx(math.exp(-0.1) - math.exp(-0.6))
    assert (found.pairs, found.positions, found.higher, found.lower) == (6, 18, 6, 0)
    assert found.statistic == pytest.approx(tv / 3)  # one position in three differs
    assert found.p_value == pytest.approx(0.5**6)  # six of six further than the floor
    result = logprob_result(found, alpha=0.05)
    assert result is not None
    assert (result.name, result.verdict, result.deciding) == ("logprobs", "differs", False)
    # the endpoint parts from the reference at the second token: positions 0 and 1 compared
    parted = {k: _obs("axy", [-0.1, -0.9, -0.3]) for k in ref}
    assert compare_logprobs(parted, ref, floor).positions == 12
    # identical to the reference: every prompt ties with the floor, no p-value, no verdict
    same = compare_logprobs(dict(ref), ref, floor)
    assert (same.higher, same.lower, same.p_value) == (0, 0, None)
    assert logprob_result(same, alpha=0.05).verdict == "inconclusive"  # type: ignore[union-attr]
    # without the reference's second run, or without logprobs, nothing to compare
    assert compare_logprobs(shifted, ref, None).pairs == 0
    assert logprob_result(compare_logprobs(shifted, ref, None), alpha=0.05) is None


def test_the_fake_serves_logprobs_only_where_listed() -> None:
    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": "What is 2 + 2? Answer with the number."}],
        "temperature": 0,
        "max_tokens": 64,
        "reasoning": {"effort": "none"},  # as verify sends: logprobs cover the answer
        "logprobs": True,
        "top_logprobs": 3,
        "provider": pin_block("chutes/int4"),
    }
    for snap, listed in ((SNAP, True), (BUNDLED, False)):
        with orp.fake.serve(snap, speed=0) as fake:
            got = requests.post(
                f"{fake.base_url}/chat/completions",
                json=body,
                headers={"Authorization": "Bearer sk-fake"},
                timeout=30,
            ).json()
        logprobs = got["choices"][0].get("logprobs")
        if not listed:
            assert logprobs is None
            continue
        content = logprobs["content"]
        assert content and all(set(e) >= {"token", "logprob", "top_logprobs"} for e in content)
        assert all(len(e["top_logprobs"]) == 3 for e in content)
        assert "".join(e["token"] for e in content) == got["choices"][0]["message"]["content"]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_on_the_fake_logprobs_see_a_degradation_but_do_not_decide(
    seed: int, tmp_path: Path
) -> None:
    args = ["verify", MODEL, "--endpoints", ",".join(INT4), "--n", "40", "--seed", str(seed)]
    args += ["--budget-usd", "1", "--quiet", "--format", "json", "--out", str(tmp_path / "o")]
    with orp.fake.serve(
        SNAP, speed=0, seed=seed, noise=0.02, degrade={"deepinfra/int4": 0.05}
    ) as fake:
        env = {"OPENROUTER_API_KEY": "sk-fake", "OPENROUTER_BASE_URL": fake.base_url}
        shown = CliRunner().invoke(cli, args, env=env)
    assert shown.exit_code == 0, shown.output
    rows = {r["tag"]: r for r in json.loads(shown.stdout)}
    del rows["moonshotai/int4"]
    degraded = rows.pop("deepinfra/int4")
    tests = {t["name"]: t for t in degraded["tests"]}
    lp = tests["logprobs"]
    assert (lp["verdict"], lp["deciding"], lp["interval"]) == ("differs", False, None)
    assert lp["p_value"] < 1e-6 and lp["statistic"] > 0
    assert lp["p_adjusted"] == pytest.approx(min(1.0, 5 * lp["p_value"]), rel=1e-5)  # 5 compared
    assert "supporting evidence only" in lp["detail"]
    assert degraded["findings"] == [
        "token logprobs differ from the reference's more than its own second run's (sign test, "
        f"adjusted p={lp['p_adjusted']:.2g}; supporting evidence, not the verdict)"
    ]
    # at n = 40 the deciding tests cannot see a 5% degradation reliably: the verdict is theirs
    deciding = [t for t in degraded["tests"] if t["deciding"]]
    if all(t["verdict"] not in ("differs", "differs, within tolerance") for t in deciding):
        assert degraded["verdict"] not in ("differs", "differs, within tolerance")
    assert degraded["decided_by"] in {t["name"] for t in deciding}
    for tag, row in rows.items():  # no native endpoint is called differs by any test
        assert row["findings"] == [], tag
        for t in row["tests"]:
            assert t["verdict"] != "differs", (tag, t)

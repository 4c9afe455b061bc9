"""The whole job as a new user runs it, offline, through the public API and the CLI.

Bundled Kimi K2.5 snapshot -> matrix and verdicts -> budget -> compiled policy -> the fake OpenRouter
in its own process -> ``generate`` under a small cap (stopped by the budget) and resumed under a
larger one -> ``audit`` -> ``export``; then ``verify`` on the fake with one degraded endpoint. Each
step asserts its figures: the $132 / 45.45M / 7.58M plan, the served providers (joined with the
fake's ledger by generation id), and the fake's ledger equal to the spend the client records.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

import openrouter_probe as orp
from openrouter_probe.cli import cli
from tests.conftest import ROOT

MODEL = "moonshotai/kimi-k2.5"
PROMPTS = ROOT / "examples" / "prompts.jsonl"
SPEC = Path("policies") / "kimi-k2.5.spec.yaml"  # relative: as a user types it from the root
CHECKED_IN = ROOT / "policies" / "kimi-k2.5.yaml"
INT4 = {
    "chutes/int4",
    "deepinfra/int4",
    "siliconflow/int4",
    "atlas-cloud/int4",
    "parasail/int4",
    "moonshotai/int4",
}
FAKE_KEY = "sk-fake-end-to-end"


def _run(args: list[str], **env: str) -> Result:
    result = CliRunner().invoke(cli, args, env=env or None)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


@pytest.fixture
def fake_server() -> Iterator[str]:
    """``openrouter-probe fake-server`` in its own process; yields the base URL it prints."""
    command = [
        sys.executable, "-m", "openrouter_probe", "fake-server",
        "--offline", "--port", "0", "--speed", "0", "--seed", "11",
    ]  # fmt: skip
    proc = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "OPENROUTER_API_KEY": ""},
    )
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 30  # process startup: import, load the snapshot, bind
        ready, _, _ = select.select([proc.stdout], [], [], max(deadline - time.monotonic(), 0))
        assert ready, "fake-server printed no base URL within 30 s"
        base_url = proc.stdout.readline().strip()
        assert base_url.startswith("http://127.0.0.1:") and base_url.endswith("/api/v1"), base_url
        yield base_url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _ledger(base_url: str) -> dict[str, Any]:
    root = base_url.removesuffix("/api/v1")
    with urllib.request.urlopen(f"{root}/_fake/ledger", timeout=10) as reply:
        doc: dict[str, Any] = json.load(reply)
    return doc


def test_the_whole_job_offline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_server: str
) -> None:
    monkeypatch.chdir(ROOT)

    # 1. Matrix and verdicts, library and CLI agree.
    snap = orp.bundled_snapshot(MODEL)
    matrix = orp.build_matrix(snap)
    verdicts = dict(zip(matrix["tag"], matrix["verdict"], strict=True))
    assert verdicts["baseten/fp4"] == verdicts["fireworks"] == "requantized"
    assert {t for t, v in verdicts.items() if v == "native"} == INT4
    assert {verdicts[t] for t in ("together", "novita", "venice")} == {"undeclared"}
    listed = json.loads(_run(["matrix", MODEL, "--offline", "--format", "json"]).stdout)
    assert {r["tag"]: r["verdict"] for r in listed} == verdicts

    # 2. The budget: $100 does not buy 60M output tokens at $2.20/M.
    result = _run(
        [
            "budget", MODEL, "--offline", "--budget-usd", "100", "--output-tokens", "60M",
            "--datasets", "6", "--format", "json",
        ]
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    cheapest = json.loads(result.stdout)["cheapest"]
    assert (cheapest["tag"], cheapest["price_out_usd_per_m"]) == ("chutes/int4", 2.2)
    only = cheapest["output_only"]
    assert only["cost_usd"] == 132.0 and only["shortfall_usd"] == 32.0
    assert only["affordable_output_tokens"] == 45_454_545
    assert only["affordable_output_tokens_per_dataset"] == 7_575_757
    plan = orp.plan_budget(snap, budget_usd=100, output_tokens="60M", datasets=6)
    assert plan.cheapest.output_only.cost_usd == Decimal("132.00")

    # 3. The compiled policy is the checked-in one, byte for byte, and admits the six INT4 tags.
    policy = tmp_path / "kimi-k2.5.yaml"
    result = _run(["policy", "compile", str(SPEC), "--offline", "-o", str(policy)])
    assert result.exit_code == 0, result.output
    assert policy.read_bytes() == CHECKED_IN.read_bytes()
    assert set(orp.compile_policy(orp.load_spec(SPEC), snap).admitted) == INT4

    # 4. generate on the fake server, stopped by a small cap.
    env = {"OPENROUTER_BASE_URL": fake_server, "OPENROUTER_API_KEY": FAKE_KEY}
    out = tmp_path / "out.jsonl"
    job = [
        "generate", str(PROMPTS), "--policy", str(policy), "--out", str(out),
        "--max-tokens", "512", "--quiet", "--format", "json",
    ]  # fmt: skip
    result = _run([*job, "--budget-usd", "0.004"], **env)
    assert result.exit_code == 0, result.output
    first = json.loads(result.stdout)
    prompts = len(PROMPTS.read_text(encoding="utf-8").splitlines())
    assert first["rows_total"] == prompts == 18
    assert first["stop_reason"] == "budget" and first["not_sent"] > 0
    assert 0 < first["spent_total_usd"] <= 0.004
    done_first = {r["id"] for r in _rows(out)}
    assert len(done_first) == first["ok"] + first["truncated"] > 0

    # 5. Resumed with a larger cap: only the rest is sent.
    result = _run([*job, "--budget-usd", "1"], **env)
    assert result.exit_code == 0, result.output
    second = json.loads(result.stdout)
    assert second["stop_reason"] == "done"
    assert second["rows_already_done"] == len(done_first)
    assert second["requests"] == second["rows_to_send"] == prompts - len(done_first)
    rows = _rows(out)
    assert sorted(r["id"] for r in rows) == sorted({r["id"] for r in rows})  # none sent twice
    assert len(rows) == prompts and all(r["status"] in ("ok", "truncated") for r in rows)

    # The fake billed each generation once, each by an admitted endpoint, and its ledger is the
    # recorded spend to the cent (exactly, in fact: both are decimals of the same prices).
    ledger = _ledger(fake_server)
    entries = {e["generation_id"]: e for e in ledger["entries"]}
    assert ledger["count"] == len(entries) == len(rows)  # nothing finished was sent again
    for r in rows:
        entry = entries[r["generation_id"]]
        assert entry["tag"] in INT4 and entry["provider"] == r["provider"]
        assert Decimal(str(entry["cost_usd"])) == Decimal(str(r["cost_usd"]))
    recorded = sum(Decimal(str(r["cost_usd"])) for r in rows) + Decimal(
        str(first["possibly_billed_usd"] + second["possibly_billed_usd"])
    )
    total = Decimal(str(ledger["total_usd"]))
    assert round(total, 2) == round(recorded, 2) and total == recorded
    assert Decimal(str(second["spent_total_usd"])) == total

    # 6. audit: every row served inside the policy, costs as recorded.
    result = _run(["audit", str(out), "--policy", str(policy), "--offline", "--format", "json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["outside_policy"] == [] and report["failed"] == 0
    assert {p["admitted"] for p in report["providers"]} == {"yes"}
    assert sum(p["rows"] for p in report["providers"]) == prompts
    assert Decimal(str(report["realised_usd"])) == total
    served = Counter(r["provider"] for r in rows)
    assert {p["provider"]: p["rows"] for p in report["providers"]} == dict(served)

    # 7. export: the answered rows (not those cut at max_tokens) as ShareGPT conversations.
    sharegpt = tmp_path / "drafter.sharegpt.jsonl"
    result = _run(["export", str(out), "--format", "sharegpt", "-o", str(sharegpt)])
    assert result.exit_code == 0, result.output
    exported = _rows(sharegpt)
    ok = {r["id"]: r for r in rows if r["status"] == "ok"}
    assert {c["id"] for c in exported} == set(ok) and len(exported) == len(ok) > 0
    for conv in exported:
        turns = conv["conversations"]
        answer = ok[conv["id"]]
        assert turns[-1] == {
            "from": "gpt",
            "value": answer["content"],
            "reasoning_content": answer["reasoning"],
            "generated": True,
        }
        assert turns[-2]["from"] == "human"


def test_verify_on_the_fake_flags_the_degraded_endpoint(tmp_path: Path) -> None:
    out = tmp_path / "verify.jsonl"
    snap = orp.bundled_snapshot(MODEL)
    with orp.fake.serve(snap, speed=0, degrade=["deepinfra/int4=0.2"]) as fake:
        result = _run(
            [
                "verify", MODEL,
                "--endpoints", "chutes/int4,deepinfra/int4", "--n", "200",
                "--out", str(out), "--quiet", "--format", "json", "--thinking", "off",
            ],
            OPENROUTER_BASE_URL=fake.base_url,
            OPENROUTER_API_KEY="sk-fake",
        )  # fmt: skip
    assert result.exit_code == 0, result.output
    report = {r["tag"]: r for r in json.loads(result.stdout)}  # stdout is only the JSON
    assert report["moonshotai/int4"]["role"] == "reference"
    assert (report["chutes/int4"]["verdict"], report["chutes/int4"]["accuracy"]) == (
        "consistent",
        1.0,
    )
    deepinfra = report["deepinfra/int4"]
    assert deepinfra["verdict"] == "differs" and deepinfra["p_holm"] < 0.05
    assert 0.1 < deepinfra["accuracy_gap"] <= 0.3  # degraded at 20%
    assert all(r["scored"] == 200 and r["failed"] == 0 for r in report.values())
    recorded = _rows(out)
    # the reference twice (its second run, TAG#2, is the floor of the agreement test)
    assert Counter(r["id"].split("|")[0] for r in recorded) == {
        **{t: 200 for t in report},
        "moonshotai/int4#2": 200,
    }
    # Sent with the fake key only: the user's key never leaves the process.
    assert os.environ["OPENROUTER_API_KEY"] not in out.read_text(encoding="utf-8")

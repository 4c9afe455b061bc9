"""`openrouter-probe matrix` and `budget` on the bundled snapshot: the Done-when commands."""

from __future__ import annotations

import copy
import csv
import io
import json
from datetime import timedelta
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from openrouter_probe.cli import cli
from openrouter_probe.rules.snapshot import Snapshot, bundled_snapshot
from tests.conftest import ROOT

MODEL = "moonshotai/kimi-k2.5"
SCENARIO = [
    "budget",
    MODEL,
    "--offline",
    "--budget-usd",
    "100",
    "--output-tokens",
    "60M",
    "--datasets",
    "6",
]


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def _policy(tmp_path: Path, *, model: str, provider: dict) -> Path:
    path = tmp_path / "policy.yaml"
    path.write_text(yaml.safe_dump({"provider": provider, "provenance": {"model": model}}))
    return path


# -- matrix -----------------------------------------------------------------------------------------


def test_matrix_csv_carries_the_verdicts(runner: CliRunner) -> None:
    result = runner.invoke(cli, ["matrix", MODEL, "--offline", "--format", "csv"])
    assert result.exit_code == 0, result.output
    rows = {r["tag"]: r for r in csv.DictReader(io.StringIO(result.stdout))}
    assert len(rows) == 11
    assert rows["baseten/fp4"]["verdict"] == "requantized"
    assert rows["fireworks"]["verdict"] == "requantized"
    assert rows["fireworks"]["precision_effective"] == "nvfp4"
    for tag in ("chutes/int4", "deepinfra/int4", "siliconflow/int4", "atlas-cloud/int4"):
        assert rows[tag]["verdict"] == "native"
    for tag in ("parasail/int4", "moonshotai/int4"):
        assert rows[tag]["verdict"] == "native"
    for tag in ("together", "novita", "venice"):
        assert rows[tag]["verdict"] == "undeclared"
    assert rows["chutes/int4"]["output_usd_per_m"] == "2.2"
    assert rows["chutes/int4"]["cache_read_usd_per_m"] == ""
    assert rows["venice"]["status"] == "-2"
    assert rows["venice"]["supports_tools"] == "False"
    assert "Reconstructed, not a live capture" in result.stderr


def test_matrix_json_has_every_column(runner: CliRunner) -> None:
    from openrouter_probe.analysis.matrix import MATRIX_COLUMNS

    result = runner.invoke(cli, ["matrix", MODEL, "--offline", "--format", "json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert list(rows[0]) == list(MATRIX_COLUMNS)
    chutes = rows[0]
    assert chutes["tag"] == "chutes/int4"
    assert chutes["taken_at"] == "2026-02-01T00:00:00Z"
    assert chutes["cache_read_usd_per_m"] is None
    assert chutes["context_tokens"] == 262144


def test_matrix_table_and_plot(runner: CliRunner, tmp_path: Path) -> None:
    plot = tmp_path / "price-uptime.png"
    result = runner.invoke(cli, ["matrix", MODEL, "--offline", "--plot", str(plot)])
    assert result.exit_code == 0, result.output
    assert "requantized" in result.stdout and "chutes/int4" in result.stdout
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"plot: {plot}" in result.stderr


def test_matrix_history(runner: CliRunner, tmp_path: Path) -> None:
    snap = bundled_snapshot(MODEL)
    data = copy.deepcopy(snap.data)
    data["endpoints"][0]["pricing"]["completion"] = "0.0000025"
    later = Snapshot(
        model=MODEL,
        data=data,
        taken_at=snap.taken_at + timedelta(days=7),
        source="file",
        origin="later",
    ).save(tmp_path / "later.json")
    result = runner.invoke(
        cli, ["matrix", MODEL, "--offline", "--history", str(later), "--format", "csv"]
    )
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    changed = [r for r in rows if r["change"] == "changed"]
    assert [(r["tag"], r["changes"]) for r in changed] == [
        ("chutes/int4", "output_usd_per_m $2.20 -> $2.50")
    ]


# -- budget -----------------------------------------------------------------------------------------


def test_budget_json_done_when(runner: CliRunner) -> None:
    result = runner.invoke(cli, [*SCENARIO, "--format", "json"])
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)
    cheapest = plan["cheapest"]
    assert cheapest["tag"] == "chutes/int4"
    assert cheapest["price_out_usd_per_m"] == 2.2
    assert cheapest["output_only"]["cost_usd"] == 132.0
    assert cheapest["output_only"]["shortfall_pct"] == 32.0
    assert cheapest["output_only"]["affordable_output_tokens"] == 45_454_545  # ~45.45M
    assert cheapest["output_only"]["affordable_output_tokens_per_dataset"] == 7_575_757  # ~7.58M
    assert "$132.00" in plan["headline"] and "45.45M" in plan["headline"]
    assert "7.58M per dataset" in plan["headline"]
    assert plan["output_tokens_per_dataset"] == [10_000_000] * 6
    assert plan["concurrency"] == 2000


def test_budget_json_reasoning_range(runner: CliRunner) -> None:
    result = runner.invoke(cli, [*SCENARIO, "--reasoning-share", "0.5:0.8", "--format", "json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)["cheapest"]["output_only"]
    assert out["affordable_visible_tokens_min"] == 9_090_909
    assert out["affordable_visible_tokens_max"] == 22_727_272


def test_budget_table(runner: CliRunner, tmp_path: Path) -> None:
    plot = tmp_path / "budget.png"
    result = runner.invoke(
        cli,
        [
            *SCENARIO,
            "--reasoning-share",
            "0.5:0.8",
            "--dataset-names",
            "B3,B4,B5,B6,B7,B8",
            "--prompt-tokens",
            "500",
            "--output-tokens-per-request",
            "4k",
            "--plot",
            str(plot),
        ],
    )
    assert result.exit_code == 0, result.output
    out = result.stdout.replace("\n  ", " ")  # the prose wraps to the table's width
    assert "cost $132.00, 32% over the $100.00 budget" in out
    assert "45.45M" in out and "7.58M" in out
    assert "B7" in out and "partial" in out and "not started" in out
    assert "lower bound" in result.stderr  # the capacity caveat
    assert plot.read_bytes()[:4] == b"\x89PNG"


def test_budget_under_the_scenario_policy(runner: CliRunner) -> None:
    path = ROOT / "policies" / "kimi-k2.5.yaml"
    if not path.exists():
        pytest.skip("policies/kimi-k2.5.yaml is not compiled yet")
    result = runner.invoke(cli, [*SCENARIO, "--policy", str(path), "--format", "json"])
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)
    assert plan["routing_mode"] == "ordered"
    tags = [e["tag"] for e in plan["endpoints"]]
    assert "fireworks" not in tags and "baseten/fp4" not in tags and "together" not in tags
    assert tags[0] == "chutes/int4"
    assert plan["cheapest"]["output_only"]["cost_usd"] == 132.0
    assert plan["blended"]["price_out_usd_per_m"] == pytest.approx(2.2008, abs=1e-4)
    assert {x["tag"] for x in plan["excluded"]} == {
        "together",
        "novita",
        "fireworks",
        "baseten/fp4",
        "venice",
    }


def test_budget_with_a_small_policy_file(runner: CliRunner, tmp_path: Path) -> None:
    path = _policy(tmp_path, model=MODEL, provider={"only": ["deepinfra", "moonshotai"]})
    result = runner.invoke(cli, [*SCENARIO, "--policy", str(path), "--format", "json"])
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)
    assert plan["cheapest"]["tag"] == "deepinfra/int4"
    assert plan["cheapest"]["output_only"]["cost_usd"] == 135.0
    assert plan["policy"] == {"only": ["deepinfra", "moonshotai"]}


# -- bad input: one line, exit 2 for a bad option (issue 26), 1 for a bad file --------------------------------------------------------------------


def _error_line(result) -> str:
    lines = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    assert len(lines) == 1, result.stderr
    return lines[0]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--reasoning-share", "1"], "--reasoning-share: 1 is outside [0, 1)"),
        (["--reasoning-share", "0.5:1.2"], "--reasoning-share: 1.2 is outside [0, 1)"),
        (["--reasoning-share", "-0.1"], "--reasoning-share: -0.1 is outside [0, 1)"),
        (["--budget-usd", "-5"], "--budget-usd -5: a positive amount of USD, e.g. 100"),
        (["--output-tokens", "60X"], "--output-tokens: '60X' is not a token count"),
        (["--prompt-tokens", "5q"], "--prompt-tokens: '5q' is not a token count"),
    ],
)
def test_a_bad_option_exits_2_with_one_line(
    runner: CliRunner, extra: list[str], message: str
) -> None:
    result = runner.invoke(cli, [*SCENARIO, *extra])
    assert result.exit_code == 2, result.output
    assert message in _error_line(result)
    assert "Traceback" not in result.output


def test_policy_for_another_model(runner: CliRunner, tmp_path: Path) -> None:
    path = _policy(tmp_path, model="moonshotai/kimi-k2", provider={"ignore": ["fireworks"]})
    result = runner.invoke(cli, [*SCENARIO, "--policy", str(path)])
    assert result.exit_code == 1
    line = _error_line(result)
    assert "is for moonshotai/kimi-k2, not moonshotai/kimi-k2.5" in line
    assert str(path) in line


def test_snapshot_without_prices(runner: CliRunner, tmp_path: Path) -> None:
    snap = bundled_snapshot(MODEL)
    data = copy.deepcopy(snap.data)
    for endpoint in data["endpoints"]:
        endpoint["pricing"] = {}
    path = Snapshot(
        model=MODEL, data=data, taken_at=snap.taken_at, source="file", origin="unpriced"
    ).save(tmp_path / "unpriced.json")
    args = [a for a in SCENARIO if a != "--offline"]
    result = runner.invoke(cli, [*args, "--snapshot", str(path)])
    assert result.exit_code == 1
    assert "no endpoint of moonshotai/kimi-k2.5 lists an output price" in _error_line(result)


def test_policy_admitting_nothing(runner: CliRunner, tmp_path: Path) -> None:
    path = _policy(tmp_path, model=MODEL, provider={"only": ["nobody"]})
    result = runner.invoke(cli, [*SCENARIO, "--policy", str(path)])
    assert result.exit_code == 1
    assert "admits no endpoint" in _error_line(result)


def test_missing_target(runner: CliRunner) -> None:
    result = runner.invoke(cli, ["budget", MODEL, "--offline", "--budget-usd", "100"])
    assert result.exit_code == 2
    assert "give the target" in _error_line(result)


def test_a_target_given_twice_that_disagrees_is_a_usage_error(runner: CliRunner) -> None:
    """Review of 0.3: the README says a refused pair of options exits 2; this one exited 1."""
    result = runner.invoke(
        cli,
        ["budget", MODEL, "--offline", "--budget-usd", "100", "--output-tokens", "1M",
         "--target-tokens", "7M"],
    )  # fmt: skip
    assert result.exit_code == 2
    assert _error_line(result) == (
        "Error: --output-tokens 1M is not --target-tokens 7M × --datasets 1; give one of them"
    )

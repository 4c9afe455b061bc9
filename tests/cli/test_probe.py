"""`openrouter-probe models` (offline, input, tolerant), `endpoints` on odd data, and what the CLI says
when the network fails."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from openrouter_probe.cli import cli
from tests.conftest import CAPTURES

UNREACHABLE = "http://127.0.0.1:9/api/v1"  # port 9 on loopback refuses connections


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def test_models_offline_is_the_bundled_capture(runner: CliRunner) -> None:
    result = runner.invoke(cli, ["models", "--offline", "--format", "json"])
    assert result.exit_code == 0, result.output
    capture = json.loads((CAPTURES / "models-list-2026-01-28.json").read_text())
    assert json.loads(result.stdout) == capture["data"]  # byte-exact copy, 347 models
    (note,) = result.stderr.strip().splitlines()
    assert note.startswith("models: the bundled list of 2026-01-28, a public capture of GET /api")
    assert "Crashthatch/openroutermodeltable" in note and "changed since" in note


def test_models_offline_table_needs_no_network(
    runner: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENROUTER_BASE_URL", UNREACHABLE)
    result = runner.invoke(cli, ["models", "--offline"])
    assert result.exit_code == 0, result.output
    assert "347 models" in result.stdout and "moonshotai/kimi-k2.5" in result.stdout


def test_offline_and_input_exclude_each_other(runner: CliRunner) -> None:
    path = str(CAPTURES / "models-list-2026-01-28.json")
    result = runner.invoke(cli, ["models", "--offline", "--input", path])
    assert result.exit_code == 2 and "exclude each other" in result.stderr


def test_models_input_skips_a_broken_model_with_one_line(runner: CliRunner, tmp_path: Path) -> None:
    body = {
        "data": [
            {
                "id": "~z-ai/glm-latest",
                "pricing": {"prompt": "0.0000006", "completion": "0.0000022"},
                "alias_target": {"name": "Z.AI: GLM 4.7", "slug": "z-ai/glm-4.7"},
            },
            {"id": "x/broken", "pricing": {"prompt": ["0.1"], "completion": "0"}},
            {"id": "a/old", "alias_target": "a/new", "architecture": "text", "pricing": {}},
        ]
    }
    path = tmp_path / "models.json"
    path.write_text(json.dumps(body))
    result = runner.invoke(cli, ["models", "--input", str(path), "--format", "json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert [r["id"] for r in rows] == ["~z-ai/glm-latest", "a/old"]
    assert rows[0]["alias_target"] == {"name": "Z.AI: GLM 4.7", "slug": "z-ai/glm-4.7"}
    assert rows[1]["alias_target"] == "a/new"  # kept as it came
    assert result.stderr.strip().splitlines() == [
        "skipped 1 of 3 models that could not be read; first: data[1] (x/broken): "
        "pricing.prompt: Input should be a valid string"
    ]


def test_models_input_reads_gzip(runner: CliRunner, tmp_path: Path) -> None:
    path = tmp_path / "models.json.gz"
    path.write_bytes(gzip.compress((CAPTURES / "models-list-2026-01-28.json").read_bytes()))
    result = runner.invoke(cli, ["models", "--input", str(path), "--format", "csv"])
    assert result.exit_code == 0, result.output
    assert len(result.stdout.strip().splitlines()) == 348  # header and 347 models


def test_models_input_that_is_not_a_list(runner: CliRunner, tmp_path: Path) -> None:
    path = tmp_path / "endpoints.json"
    path.write_text((CAPTURES / "kimi-k3-endpoints-2026-08-25-reduced.json").read_text())
    result = runner.invoke(cli, ["models", "--input", str(path)])
    assert result.exit_code == 1
    assert result.stderr.startswith(f"Error: {path}: not a GET /models body (data: Input should")
    assert result.stderr.strip().endswith(
        "save one with `curl https://openrouter.ai/api/v1/models > models.json`"
    )


def test_unreachable_models_is_one_short_line_naming_real_options(
    runner: CliRunner, monkeypatch: pytest.MonkeyPatch, retry_waits: list[float]
) -> None:
    monkeypatch.setenv("OPENROUTER_BASE_URL", UNREACHABLE)
    result = runner.invoke(cli, ["models"])
    assert result.exit_code == 1
    assert result.stderr.strip().splitlines() == [
        "Error: cannot reach http://127.0.0.1:9: connection refused. Use --offline for the "
        "bundled list of 2026-01-28, or --input FILE for a saved GET /models body"
    ]
    assert retry_waits == []  # refused: no retries


def test_unreachable_endpoints_gives_its_hint_once(
    runner: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENROUTER_BASE_URL", UNREACHABLE)
    result = runner.invoke(cli, ["endpoints", "moonshotai/kimi-k2.5"])
    assert result.exit_code == 1
    *_, last = result.stderr.strip().splitlines()
    assert last.startswith("Error: ") and len(last) < 320
    assert result.stderr.count("--offline") == 1
    assert result.stderr.count("connection refused") == 3  # the API, the page, both in the end


def test_each_retry_is_said_then_one_final_line(
    runner: CliRunner, replay_server, monkeypatch: pytest.MonkeyPatch, retry_waits: list[float]
) -> None:
    base, routes, seen = replay_server
    routes["/api/v1/models"] = (
        503,
        '{"error":{"message":"Service temporarily unavailable","code":503}}',
        "application/json",
    )
    monkeypatch.setenv("OPENROUTER_BASE_URL", f"{base}/api/v1")
    result = runner.invoke(cli, ["models"])
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert len(seen) == 5 and len(retry_waits) == 4
    assert [line.split(" in ")[0] for line in lines[:4]] == [
        f"{base}/api/v1/models: HTTP 503; retry {n} of 4" for n in range(1, 5)
    ]
    assert lines[4] == (
        "Error: Service temporarily unavailable; gave up after 5 attempts. Use --offline for the "
        "bundled list of 2026-01-28, or --input FILE for a saved GET /models body"
    )
    assert len(lines) == 5 and "stamina" not in result.stderr


def test_empty_key_is_said_on_stderr(
    runner: CliRunner, replay_server, monkeypatch: pytest.MonkeyPatch
) -> None:
    base, routes, seen = replay_server
    routes["/api/v1/models"] = (
        200,
        (CAPTURES / "models-list-2026-01-28.json").read_text(),
        "application/json",
    )
    monkeypatch.setenv("OPENROUTER_BASE_URL", f"{base}/api/v1")
    monkeypatch.setenv("OPENROUTER_API_KEY", "")
    result = runner.invoke(cli, ["models", "--format", "csv"])
    assert result.exit_code == 0, result.output
    assert result.stderr.strip().splitlines() == [
        "OPENROUTER_API_KEY is set but empty; going on without a key "
        "(latency and throughput come back null)"
    ]
    assert "authorization" not in seen[0]


def test_endpoints_snapshot_with_an_unreadable_endpoint(runner: CliRunner, tmp_path: Path) -> None:
    body = json.loads((CAPTURES / "kimi-k3-endpoints-2026-08-25-reduced.json").read_text())
    body["data"]["endpoints"][1]["pricing"] = "see website"  # Alibaba: no price to compute from
    body["data"]["endpoints"][0]["service_tier"] = {"name": "standard"}  # odd, not core: kept
    path = tmp_path / "k3.json"
    path.write_text(json.dumps(body))
    result = runner.invoke(
        cli, ["endpoints", "moonshotai/kimi-k3", "--snapshot", str(path), "--format", "json"]
    )
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert [r["tag"] for r in rows] == ["fireworks", "fireworks/fast", "morph/fast"]
    assert rows[0]["service_tier"] == {"name": "standard"}
    skip_lines = [line for line in result.stderr.splitlines() if line.startswith("skipped")]
    assert skip_lines == [
        "skipped 1 of 4 endpoints of moonshotai/kimi-k3 that could not be read; first: "
        "endpoints[1] (alibaba): pricing: Input should be a valid dictionary or instance of Pricing"
    ]

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from openrouter_probe.cli import cli
from tests.conftest import CAPTURES, ROOT


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def test_endpoints_offline_table(runner: CliRunner) -> None:
    result = runner.invoke(cli, ["endpoints", "moonshotai/kimi-k2.5", "--offline"])
    assert result.exit_code == 0, result.output
    out = result.stdout
    for tag in ("chutes/int4", "deepinfra/int4", "baseten/fp4", "fireworks", "venice"):
        assert tag in out
    assert "2.20" in out and "3.75" in out  # output $/M, Chutes and Venice
    assert "Reconstructed, not a live capture" in result.stderr
    assert "Reconstructed" not in out


def test_endpoints_offline_json_uses_openrouter_field_names(runner: CliRunner) -> None:
    result = runner.invoke(
        cli, ["endpoints", "moonshotai/kimi-k2.5", "--offline", "--format", "json"]
    )
    assert result.exit_code == 0
    rows = json.loads(result.stdout)
    assert len(rows) == 11
    chutes = rows[0]
    assert chutes["provider_name"] == "Chutes"
    assert chutes["tag"] == "chutes/int4"
    assert chutes["quantization"] == "int4"
    assert chutes["pricing"] == {"prompt": "0.00000045", "completion": "0.0000022", "discount": 0}


def test_endpoints_offline_csv(runner: CliRunner) -> None:
    result = runner.invoke(
        cli, ["endpoints", "moonshotai/kimi-k2.5", "--offline", "--format", "csv"]
    )
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    by_tag = {r["tag"]: r for r in rows}
    assert by_tag["chutes/int4"]["output_usd_per_m"] == "2.2"
    assert by_tag["siliconflow/int4"]["cache_read_usd_per_m"] == "0.07"
    assert by_tag["baseten/fp4"]["quantization"] == "fp4"
    assert by_tag["venice"]["status"] == "-2"


def test_save_then_snapshot_path(runner: CliRunner, tmp_path: Path) -> None:
    path = tmp_path / "k25.json"
    first = runner.invoke(
        cli,
        ["endpoints", "moonshotai/kimi-k2.5", "--offline", "--save", str(path), "--format", "json"],
    )
    assert first.exit_code == 0 and path.exists()
    second = runner.invoke(
        cli, ["endpoints", "moonshotai/kimi-k2.5", "--snapshot", str(path), "--format", "json"]
    )
    assert second.exit_code == 0
    assert json.loads(second.stdout) == json.loads(first.stdout)
    assert "loaded from file" in second.stderr


def test_snapshot_bundled_equals_offline(runner: CliRunner) -> None:
    a = runner.invoke(
        cli, ["endpoints", "moonshotai/kimi-k2.5", "--snapshot", "bundled", "--format", "csv"]
    )
    b = runner.invoke(cli, ["endpoints", "moonshotai/kimi-k2.5", "--offline", "--format", "csv"])
    assert a.stdout == b.stdout


def test_base_url_points_at_a_server_with_real_bodies(
    runner: CliRunner, replay_server, monkeypatch: pytest.MonkeyPatch
) -> None:
    base, routes, seen = replay_server
    routes["/api/v1/models"] = (
        200,
        (CAPTURES / "models-list-2026-01-28.json").read_text(),
        "application/json",
    )
    routes["/api/v1/models/moonshotai/kimi-k3/endpoints"] = (
        200,
        (CAPTURES / "kimi-k3-endpoints-2026-08-25-reduced.json").read_text(),
        "application/json",
    )
    monkeypatch.setenv("OPENROUTER_BASE_URL", f"{base}/api/v1")
    models = runner.invoke(cli, ["models", "--format", "json"])
    assert models.exit_code == 0, models.output
    ids = [m["id"] for m in json.loads(models.stdout)]
    assert len(ids) == 347 and "moonshotai/kimi-k2.5" in ids
    eps = runner.invoke(cli, ["endpoints", "moonshotai/kimi-k3", "--format", "json"])
    assert eps.exit_code == 0, eps.output
    assert [e["tag"] for e in json.loads(eps.stdout)] == [
        "fireworks",
        "alibaba",
        "fireworks/fast",
        "morph/fast",
    ]
    assert "from api" in eps.stderr
    assert all(s.get("authorization") == "Bearer test-key-not-real" for s in seen)


def test_missing_key_says_stats_need_one(
    runner: CliRunner, replay_server, monkeypatch: pytest.MonkeyPatch
) -> None:
    base, routes, seen = replay_server
    body = json.loads((CAPTURES / "kimi-k3-endpoints-2026-08-25-reduced.json").read_text())
    for e in body["data"]["endpoints"]:
        e["latency_last_30m"] = e["throughput_last_30m"] = None
    routes["/api/v1/models/moonshotai/kimi-k3/endpoints"] = (
        200,
        json.dumps(body),
        "application/json",
    )
    monkeypatch.setenv("OPENROUTER_BASE_URL", f"{base}/api/v1")
    monkeypatch.delenv("OPENROUTER_API_KEY")
    result = runner.invoke(cli, ["endpoints", "moonshotai/kimi-k3"])
    assert result.exit_code == 0
    assert "only returns them with an API key" in result.stderr
    assert "authorization" not in seen[0]


def test_models_from_file(runner: CliRunner) -> None:
    result = runner.invoke(
        cli, ["models", "--input", str(CAPTURES / "models-list-2026-01-28.json"), "--format", "csv"]
    )
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    k25 = next(r for r in rows if r["id"] == "moonshotai/kimi-k2.5")
    assert k25["output_usd_per_m"] == "3.0"


@pytest.mark.parametrize(
    ("route", "status", "body", "message"),
    [
        (
            "/api/v1/models/x/y/endpoints",
            404,
            '{"error":{"message":"No endpoints found for x/y.","code":404}}',
            "Error: No endpoints found for x/y. Check the model id",
        ),
        (
            "/api/v1/models/x/y/endpoints",
            401,
            '{"error":{"message":"User not found.","code":401}}',
            "User not found. OpenRouter rejected the API key: check OPENROUTER_API_KEY",
        ),
    ],
)
def test_api_errors_are_one_line_exit_1(
    runner: CliRunner,
    replay_server,
    monkeypatch: pytest.MonkeyPatch,
    route: str,
    status: int,
    body: str,
    message: str,
) -> None:
    base, routes, _ = replay_server
    routes[route] = (status, body, "application/json")
    # the API's root answers, as OpenRouter's does: a 404 is the model's, not the URL's
    routes["/api/v1/models"] = (200, '{"data": []}', "application/json")
    monkeypatch.setenv("OPENROUTER_BASE_URL", f"{base}/api/v1")
    result = runner.invoke(cli, ["endpoints", "x/y"])
    assert result.exit_code == 1
    assert message in result.stderr
    assert "Traceback" not in result.output
    assert len(result.stderr.strip().splitlines()) <= 2


def test_malformed_json_and_bad_snapshot(
    runner: CliRunner, replay_server, monkeypatch, tmp_path
) -> None:
    base, routes, _ = replay_server
    routes["/api/v1/models"] = (200, "{not json", "application/json")
    monkeypatch.setenv("OPENROUTER_BASE_URL", f"{base}/api/v1")
    result = runner.invoke(cli, ["models"])
    assert result.exit_code == 1 and "is not JSON" in result.stderr
    bad = tmp_path / "bad.json"
    bad.write_text('{"hello": 1}')
    result = runner.invoke(cli, ["endpoints", "moonshotai/kimi-k2.5", "--snapshot", str(bad)])
    assert result.exit_code == 1
    assert f"Error: {bad}: not a snapshot" in result.stderr


def test_page_without_data_is_a_snapshot_error(runner, replay_server, monkeypatch) -> None:
    base, routes, _ = replay_server
    routes["/api/v1/models/a/b/endpoints"] = (500, "oops", "text/plain")
    routes["/a/b/providers"] = (200, "<html><body>Providers for a/b</body></html>", "text/html")
    monkeypatch.setenv("OPENROUTER_BASE_URL", f"{base}/api/v1")
    result = runner.invoke(cli, ["endpoints", "a/b"])
    assert result.exit_code == 1
    assert "providerTableEndpointStats" in result.stderr
    assert "Traceback" not in result.output


def test_debug_env_shows_traceback(runner: CliRunner, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENROUTER_PROBE_DEBUG", "1")
    result = runner.invoke(cli, ["endpoints", "x/y", "--offline"])
    assert result.exit_code == 1
    assert result.exception is not None and type(result.exception).__name__ == "SnapshotError"


def test_usage_errors_exit_2(runner: CliRunner) -> None:
    assert runner.invoke(cli, ["endpoints"]).exit_code == 2
    assert runner.invoke(cli, ["endpoints", "a/b", "--format", "xml"]).exit_code == 2
    both = runner.invoke(cli, ["endpoints", "a/b", "--offline", "--snapshot", "x.json"])
    assert both.exit_code == 2


def test_version_and_help(runner: CliRunner) -> None:
    assert runner.invoke(cli, ["--version"]).stdout.startswith("openrouter-probe 0.2.0")
    help_text = runner.invoke(cli, ["-h"]).stdout
    assert "endpoints" in help_text and "models" in help_text


def test_generate_and_verify_on_the_bundled_snapshot_say_it_is_reconstructed(
    runner: CliRunner, tmp_path: Path
) -> None:
    """Review of 0.3: every command on the bundled snapshot says so, but ``generate --offline``
    and ``verify --offline`` said nothing: their plans were priced on reconstructed figures."""
    prompts = tmp_path / "p.jsonl"
    prompts.write_text('{"prompt": "hi"}\n')
    policy = str(ROOT / "policies" / "kimi-k2.5.yaml")
    dry = runner.invoke(
        cli,
        ["generate", str(prompts), "--policy", policy, "--out", str(tmp_path / "o.jsonl"),
         "--dry-run", "--offline"],
    )  # fmt: skip
    assert dry.exit_code == 0, dry.output
    text = " ".join(dry.stdout.split())
    assert "endpoints and prices from a snapshot: moonshotai/kimi-k2.5: 11 endpoints from" in text
    assert "Reconstructed, not a live capture" in text
    plan = runner.invoke(
        cli,
        ["verify", "moonshotai/kimi-k2.5", "--endpoints", "chutes/int4", "--offline",
         "--dry-run"],
    )  # fmt: skip
    assert plan.exit_code == 0, plan.output
    assert "snapshot: moonshotai/kimi-k2.5: 11 endpoints" in plan.stderr
    assert "Reconstructed, not a live capture" in plan.stderr


def test_generate_offline_sends_nothing_as_verify_offline(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review of 0.3: ``--offline`` meant "no network, no spending" in every verb but
    ``generate``, where it priced on the bundled snapshot and still sent the paid requests (and
    then, as a dry run, still read the key's limit)."""
    from openrouter_probe.fake import serve
    from openrouter_probe.run import checks

    read_keys: list[object] = []
    monkeypatch.setattr(checks, "key_check", lambda *a, **k: read_keys.append(a))

    prompts = tmp_path / "p.jsonl"
    prompts.write_text('{"prompt": "hi"}\n')
    policy = str(ROOT / "policies" / "kimi-k2.5.yaml")
    out = tmp_path / "o.jsonl"
    with serve(speed=0) as fake:
        env = {"OPENROUTER_API_KEY": "sk-fake", "OPENROUTER_BASE_URL": fake.base_url}
        result = runner.invoke(
            cli,
            ["generate", str(prompts), "--policy", policy, "--out", str(out), "--offline",
             "--budget-usd", "1"],
            env=env,
        )  # fmt: skip
        assert len(fake.ledger) == 0
    assert read_keys == []  # no GET /key either: --offline touches no network
    assert result.exit_code == 0, result.output
    assert "generate: --offline sends nothing, so this is the dry run only" in result.stderr
    assert "dry run: 1 row to send" in result.stdout
    assert not out.exists()


def test_an_unknown_command_names_the_nearest(runner: CliRunner) -> None:
    """Review of 0.3: ``openrouter-probe fake`` said "No such command 'fake'." only."""
    result = runner.invoke(cli, ["fake", "--help"])
    assert result.exit_code == 2
    assert "No such command 'fake'. Did you mean 'fake-server'?" in result.output
    assert "Did you mean 'compile'?" in runner.invoke(cli, ["policy", "compil"]).output
    assert "Did you mean" not in runner.invoke(cli, ["zzz"]).output

"""Issue 34's last gaps: a shard stopped by its key's limit names the key (from the key file)
with its limit and usage (``GET /key``), and the dry run of a sharded job says every shard's rows
and worst case."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pytest
from click.testing import CliRunner

from openrouter_probe.api.keys import KeysClient
from openrouter_probe.cli import cli
from openrouter_probe.fake import serve
from openrouter_probe.generation.keyfile import read_key_file
from tests._generate import POLICY, prompt_rows, records, write_prompts

MANAGER = "mgmt-gaps-key"


def test_a_shard_stopped_by_its_key_limit_names_the_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(120))
    keys = tmp_path / "keys.json"
    with serve(speed=0, seed=7, management_key=MANAGER, median_tokens=250) as fake:
        monkeypatch.setenv("OPENROUTER_MANAGEMENT_KEY", MANAGER)
        monkeypatch.setenv("OPENROUTER_BASE_URL", fake.base_url)
        monkeypatch.delenv("OPENROUTER_API_KEY", raising=False)
        made = CliRunner().invoke(
            cli,
            ["keys", "create", "--shards", "2", "--budget-usd", "0.01",
             "--name", "gapjob", "-o", str(keys)],
        )  # fmt: skip
        assert made.exit_code == 0, made.output
        key = read_key_file(keys).keys[1]
        assert key.name == "gapjob-1of2" and key.limit_usd == Decimal("0.005")
        out = tmp_path / "shard-1.jsonl"
        result = CliRunner().invoke(
            cli,
            ["generate", str(tmp_path / "prompts.jsonl"), "--policy", str(POLICY),
             "-o", str(out), "--shard", "1/2", "--key-file", str(keys),
             "--budget-usd", "10", "--snapshot", "bundled", "--max-tokens", "300",
             "--concurrency", "4", "--quiet", "--format", "json"],
        )  # fmt: skip
        assert result.exit_code == 1, result.output
        summary = json.loads(result.stdout)
        assert summary["stop_reason"] == "key-limit"
        message = summary["message"]
        # the key by its name and hash from the key file, its limit and usage from GET /key
        assert f"shard 1/2's key {key.name!r}" in message, message
        assert key.hash[:12] in message and str(keys) in message
        with KeysClient(management_key=MANAGER, base_url=fake.base_url) as client:
            usage = client.get(key.hash).usage_usd
        assert 0 < usage <= key.limit_usd == Decimal("0.005")
        assert fake.ledger.total_usd == usage
        assert "the key's limit is $0.005" in message, message
        assert "used" in message and "GET /key" in message
        assert key.secret not in result.output and key.secret not in out.read_text()
        statuses = [r["status"] for r in records(out)]
        assert statuses and "failed" not in statuses, statuses

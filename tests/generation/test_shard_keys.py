"""A key per shard on the fake: the management API (``fake.keys``), its client (``api.keys``), the
key file (``generation.keyfile``), a shard held by the server to its key's limit, and the job's
books across shards (``generation.books``)."""

from __future__ import annotations

import asyncio
import json
import os
import stat
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import requests
from click.testing import CliRunner

from openrouter_probe.api.keys import KeysClient
from openrouter_probe.cli import cli
from openrouter_probe.errors import APIStatusError, ConfigError
from openrouter_probe.fake import serve
from openrouter_probe.generation import generate
from openrouter_probe.generation.books import expand_outputs, job_books
from openrouter_probe.generation.keyfile import (
    create_shard_keys,
    read_key_file,
    revoke_shard_keys,
    shard_secret,
    split_budget,
)
from openrouter_probe.run.money.journal import journal_path
from tests._generate import POLICY, no_sleep, prompt_rows, records, write_prompts

MANAGER = "mgmt-test-key"


def _post(url: str, key: str, body: dict[str, Any]) -> requests.Response:
    return requests.post(url, json=body, headers={"Authorization": f"Bearer {key}"}, timeout=10)


def _chat(base: str, key: str, max_tokens: int = 64) -> requests.Response:
    body = {
        "model": "moonshotai/kimi-k2.5",
        "messages": [{"role": "user", "content": "What is 37 * 41?"}],
        "max_tokens": max_tokens,
    }
    return _post(f"{base}/chat/completions", key, body)


def test_the_fake_serves_the_management_api_and_holds_each_key_to_its_limit() -> None:
    with serve(speed=0, seed=4, management_key=MANAGER) as fake:
        base = fake.base_url
        with KeysClient(management_key=MANAGER, base_url=base) as keys:
            made = keys.create("job-0of1", limit_usd=Decimal("0.01"))
            assert made.secret.startswith("sk-or-v1-") and made.secret not in repr(made)
            assert made.info.limit_usd == Decimal("0.01") and made.info.usage_usd == 0
            assert [k.hash for k in keys.list_keys()] == [made.info.hash]
            # a management key cannot call completions; an inference key cannot manage keys
            refused = _chat(base, MANAGER)
            assert refused.status_code == 403
            assert "Management keys cannot be used" in refused.json()["error"]["message"]
            assert _post(f"{base}/keys", made.secret, {"name": "x"}).status_code == 401
            statuses = [_chat(base, made.secret, max_tokens=2000).status_code for _ in range(40)]
            ok = statuses.count(200)
            assert ok >= 1 and statuses[-1] in (402, 403)
            spent = keys.get(made.info.hash).usage_usd
            assert spent == fake.ledger.total_usd <= Decimal("0.01")  # never over the limit
            last = _chat(base, made.secret, max_tokens=2000)
            error = last.json()["error"]
            if last.status_code == 402:  # the worst case does not fit what is left
                assert error["metadata"]["limit_source"] == "openrouter_key_limit"
                assert "can only afford" in error["message"]
            else:  # nothing left: the key's own budget spent
                assert error["message"].startswith("Key limit exceeded (total limit)")
            # /key answers for the key itself; activity sums what it spent
            own = requests.get(
                f"{base}/key", headers={"Authorization": f"Bearer {made.secret}"}, timeout=10
            ).json()["data"]
            assert own["limit"] == 0.01 and Decimal(str(own["usage"])) == spent
            activity = keys.activity(api_key_hash=made.info.hash)
            assert sum(a["requests"] for a in activity) == ok
            assert sum(Decimal(str(a["usage"])) for a in activity) == spent
            # disabled: refused; deleted: gone
            assert keys.update(made.info.hash, disabled=True).disabled is True
            assert _chat(base, made.secret).status_code == 403
            assert keys.list_keys() == [] and len(keys.list_keys(include_disabled=True)) == 1
            assert keys.delete(made.info.hash) is True
            assert _chat(base, made.secret).status_code == 401
            with pytest.raises(APIStatusError) as gone:
                keys.get(made.info.hash)
            assert gone.value.status_code == 404
    assert fake.ledger.total_usd == spent


def test_split_budget_never_sums_above_it() -> None:
    assert split_budget(Decimal(2), 4) == [Decimal("0.5")] * 4
    thirds = split_budget(Decimal(1), 3)
    assert sum(thirds) <= 1 and all(t == Decimal("0.333333") or t > 0 for t in thirds)
    assert split_budget(Decimal(2), 2, [3, 1]) == [Decimal("1.5"), Decimal("0.5")]
    with pytest.raises(ConfigError, match="2 weights for 3 shards"):
        split_budget(Decimal(1), 3, [1, 2])


def _run_shard(tmp: Path, base: str, i: int, n: int, budget: float, **more: Any) -> Any:
    return asyncio.run(
        generate(tmp / "prompts.jsonl", policy=POLICY, out=tmp / "out" / f"shard-{i}.jsonl",
                 base_url=base, api_key=shard_secret(tmp / "keys.json", f"{i}/{n}"), shard=f"{i}/{n}", budget_usd=budget,
                 snapshot="bundled", sleep=no_sleep, max_tokens=300, concurrency=8, **more)
    )  # fmt: skip


def test_a_key_per_shard_holds_the_job_under_its_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(400))
    (tmp_path / "out").mkdir()
    with serve(speed=0, seed=5, management_key=MANAGER, median_tokens=250) as fake:
        monkeypatch.setenv("OPENROUTER_MANAGEMENT_KEY", MANAGER)
        monkeypatch.setenv("OPENROUTER_BASE_URL", fake.base_url)
        result = CliRunner().invoke(
            cli,
            [
                "keys",
                "create",
                "--shards",
                "4",
                "--budget-usd",
                "0.08",
                "--name",
                "job",
                "-o",
                str(tmp_path / "keys.json"),
            ],
        )
        assert result.exit_code == 0, result.output
        keyfile = read_key_file(tmp_path / "keys.json")
        assert stat.S_IMODE(os.stat(tmp_path / "keys.json").st_mode) == 0o600
        assert [k.limit_usd for k in keyfile.keys] == [Decimal("0.02")] * 4
        secrets = [k.secret for k in keyfile.keys]
        assert not any(s in result.output for s in secrets)  # hashes only
        # shards 1..3 with their right budgets; shard 0 by hand with 10x its key's limit
        for i in (1, 2, 3):
            _run_shard(tmp_path, fake.base_url, i, 4, 0.02)
        wrong = _run_shard(tmp_path, fake.base_url, 0, 4, 10.0)
        assert wrong.stop_reason != "done", wrong  # stopped by the server at its key's limit
        assert "key's limit" in wrong.message  # what the current run makes of the key's 402
        with KeysClient(management_key=MANAGER, base_url=fake.base_url) as keys:
            usage = {k.hash: k.usage_usd for k in keys.list_keys()}
        for key in keyfile.keys:
            assert usage[key.hash] <= key.limit_usd  # each key within its limit
        assert fake.ledger.total_usd == sum(usage.values()) <= Decimal("0.08")
        # every row answered at most once across the shards' outputs
        outs = expand_outputs([tmp_path / "out"])
        assert len(outs) == 4  # the journals beside them are left out
        ids = [r["id"] for out in outs for r in records(out) if r["status"] in ("ok", "truncated")]
        assert len(ids) == len(set(ids))
        books = job_books(keyfile, [tmp_path / "out"])
        assert books.keys_usage_usd == fake.ledger.total_usd
        assert books.journals_usd >= books.keys_usage_usd  # counted >= billed
        # each key against its own shard's journal (the run's header names the shard)
        assert books.unmatched == [] and books.problems == []
        for line in books.keys:
            assert line.usage_usd is not None and line.journals_usd is not None
            assert line.journals_usd >= line.usage_usd > 0, line
        assert sum(k.journals_usd or 0 for k in books.keys) == books.journals_usd
        status = CliRunner().invoke(
            cli,
            [
                "keys",
                "status",
                str(tmp_path / "keys.json"),
                str(tmp_path / "out"),
                "--format",
                "json",
            ],
        )
        assert status.exit_code == 0, status.output
        shown = json.loads(status.stdout)
        assert Decimal(shown["keys_usage_usd"]) == fake.ledger.total_usd
        assert [Decimal(k["journals_usd"]) for k in shown["keys"]] == [
            k.journals_usd for k in books.keys
        ]
        assert not any(s in status.output for s in secrets)
        assert shown["live"] == [k.name for k in keyfile.keys]  # all can still spend
        # audit and export over the folder: every shard's rows, the money against the keys
        audited = CliRunner().invoke(
            cli,
            ["audit", str(tmp_path / "out"), "--policy", str(POLICY), "--snapshot", "bundled",
             "--key-file", str(tmp_path / "keys.json"), "--format", "json"],
        )  # fmt: skip
        assert audited.exit_code == 0, audited.output
        body = json.loads(audited.stdout)
        assert sum(p["rows"] for p in body["providers"]) == len(ids)
        assert len(body["files"]) == 4
        assert Decimal(str(body["spent_usd"])) == books.journals_usd
        assert Decimal(body["keys"]["keys_usage_usd"]) == fake.ledger.total_usd
        assert Decimal(body["keys"]["journals_usd"]) == books.journals_usd
        exported = CliRunner().invoke(
            cli,
            ["export", str(tmp_path / "out" / "*.jsonl"), "--format", "jsonl",
             "--include-truncated", "-o", str(tmp_path / "train.jsonl")],
        )  # fmt: skip
        assert exported.exit_code == 0, exported.output
        exported_ids = [r["id"] for r in records(tmp_path / "train.jsonl")]
        assert set(exported_ids) <= set(ids) and len(exported_ids) == len(set(exported_ids))
        assert f"of {len(ids)} rows to" in exported.stderr  # every shard's rows were read
        # no file the job wrote holds a secret but the key file
        for path in (tmp_path / "out").iterdir():
            text = path.read_text(encoding="utf-8")
            assert not any(s in text for s in secrets), path
        revoked = CliRunner().invoke(cli, ["keys", "revoke", str(tmp_path / "keys.json")])
        assert revoked.exit_code == 0, revoked.output
        assert revoked.stdout.count(" disabled ") == 4
        with KeysClient(management_key=MANAGER, base_url=fake.base_url) as keys:
            assert keys.list_keys() == []  # no enabled key of the job left
            assert len(keys.list_keys(include_disabled=True)) == 4
        closed = CliRunner().invoke(cli, ["keys", "status", str(tmp_path / "keys.json")])
        assert closed.exit_code == 0, closed.output
        assert "no key is live (each one disabled or gone)" in closed.stderr


def test_key_file_refusals(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with serve(speed=0, management_key=MANAGER) as fake:
        client = KeysClient(management_key=MANAGER, base_url=fake.base_url)
        made = create_shard_keys("j", shards=2, budget_usd=1, out=tmp_path / "k.json",
                                 client=client)  # fmt: skip
        with pytest.raises(ConfigError, match="exists; revoke its keys first"):
            create_shard_keys("j", shards=2, budget_usd=1, out=tmp_path / "k.json", client=client)
        write_prompts(tmp_path / "p.jsonl", prompt_rows(3))
        result = CliRunner().invoke(
            cli,
            [
                "generate",
                str(tmp_path / "p.jsonl"),
                "--policy",
                str(POLICY),
                "-o",
                str(tmp_path / "o.jsonl"),
                "--key-file",
                str(tmp_path / "k.json"),
            ],
        )
        assert result.exit_code == 2 and "give --shard i/n or --shard auto" in result.stderr
        with pytest.raises(ConfigError, match="holds keys for 2 shards, not 3"):
            asyncio.run(generate(tmp_path / "p.jsonl", policy=POLICY, out=tmp_path / "o.jsonl",
                                 api_key=shard_secret(tmp_path / "k.json", "0/3"), shard="0/3", base_url=fake.base_url,
                                 snapshot="bundled"))  # fmt: skip
        done = revoke_shard_keys(made, delete=True, client=client)
        assert [what for _, what in done] == ["deleted", "deleted"]
        assert [what for _, what in revoke_shard_keys(made, client=client)] == ["gone", "gone"]
    monkeypatch.delenv("OPENROUTER_MANAGEMENT_KEY", raising=False)
    with pytest.raises(ConfigError, match="set OPENROUTER_MANAGEMENT_KEY"):
        KeysClient()


def test_a_key_billed_past_its_own_shards_journal_is_named(tmp_path: Path) -> None:
    """The job's total can hide a key used by the wrong shard: shard 0's key billed while only
    shard 1's journal counts the money. Each key is matched to its shard's journal."""
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(40))
    (tmp_path / "out").mkdir()
    with (
        serve(speed=0, seed=6, management_key=MANAGER) as fake,
        KeysClient(management_key=MANAGER, base_url=fake.base_url) as keys,
    ):
        keyfile = create_shard_keys(
            "job", shards=2, budget_usd=2, out=tmp_path / "keys.json", client=keys
        )
        # shard 1 runs with shard 0's key: its journal is shard 1's, the bill key 0's
        summary = asyncio.run(
            generate(tmp_path / "prompts.jsonl", policy=POLICY,
                     out=tmp_path / "out" / "shard-1.jsonl", base_url=fake.base_url,
                     api_key=keyfile.keys[0].secret, shard="1/2", budget_usd=1,
                     snapshot="bundled", sleep=no_sleep, max_tokens=300, concurrency=4)
        )  # fmt: skip
        assert summary.stop_reason == "done" and summary.spent_usd > 0
        books = job_books(keyfile, [tmp_path / "out"], client=keys)
        first, second = books.keys
        assert first.usage_usd == fake.ledger.total_usd and second.usage_usd == 0
        assert first.journals_usd is None and second.journals_usd == summary.spent_total_usd
        assert books.unmatched == [0]
        # the job's total agrees (one journal counts all the money); shard 0's key does not
        assert books.journals_usd >= books.keys_usage_usd
        assert books.problems == [] and books.exit_code == 0
        assert "no output here names shard(s) 0/2" in books.render()
        # with shard 0's output present (its journal counts nothing), the key is named
        (tmp_path / "out" / "shard-0.jsonl").write_text("")
        journal_path(tmp_path / "out" / "shard-0.jsonl").write_text(
            json.dumps({"run": "r0", "started_utc": "2026-12-03T00:00:00Z", "shard": "0/2"}) + "\n"
        )
        books = job_books(keyfile, [tmp_path / "out"], client=keys)
    assert books.exit_code == 1
    [problem] = books.problems
    assert problem.startswith(f"shard 0/2: key job-0of2 used ${first.usage_usd} but its shard's")

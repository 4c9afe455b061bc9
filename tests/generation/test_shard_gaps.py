"""A sharded run's gaps: a shard stopped by its key's limit names the key (from the key file)
with its limit and usage (``GET /key``), and the dry run of a sharded job says every shard's rows
and worst case."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from openrouter_probe.api.keys import KeysClient
from openrouter_probe.cli import cli
from openrouter_probe.errors import reason
from openrouter_probe.fake import serve
from openrouter_probe.generation.books import expand_outputs, job_books
from openrouter_probe.generation.keyfile import create_shard_keys, read_key_file
from openrouter_probe.generation.prompts import shard_of
from openrouter_probe.generation.shards import ShardShare, shard_shares_note
from openrouter_probe.rules.quantities import format_usd
from openrouter_probe.run.money.journal import journal_path
from openrouter_probe.run.money.replay import replay_journal
from tests._generate import POLICY, prompt_rows, records, write_prompts
from tests.conftest import ROOT

MANAGER = "mgmt-gaps-key"
EXAMPLE = ROOT / "examples" / "scale-out" / "datatrove_pipeline.py"


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
        # the journal's header names the shard and its key (keys status matches them by it)
        header = replay_journal(journal_path(out), repair=False).headers[-1]
        assert (header["shard"], header["key_hash"]) == ("1/2", key.hash)


def _dry(tmp: Path, *more: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    result = CliRunner().invoke(
        cli,
        ["generate", str(tmp / "prompts.jsonl"), "--policy", str(POLICY),
         "-o", str(tmp / "out.jsonl"), "--budget-usd", "1", "--snapshot", "bundled",
         "--max-tokens", "300", "--dry-run", "--format", "json", *more],
        env={"OPENROUTER_API_KEY": "", **(env or {})},
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    body: dict[str, Any] = json.loads(result.stdout)
    return body


def test_the_dry_run_of_a_sharded_job_says_every_shards_rows_and_worst_case(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = prompt_rows(90, datasets=2)
    write_prompts(tmp_path / "prompts.jsonl", rows)
    for name in ("SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_COUNT", "SLURM_PROCID",
                 "SLURM_NTASKS"):  # fmt: skip
        monkeypatch.delenv(name, raising=False)
    whole = _dry(tmp_path)
    assert whole["shard_shares"] == []  # not sharded: nothing more said
    by_hand = _dry(tmp_path, "--shard", "2/3")
    auto = _dry(tmp_path, "--shard", "auto", env={"RANK": "2", "WORLD_SIZE": "3"})
    for body in (by_hand, auto):
        shares = body["shard_shares"]
        assert [s["shard"] for s in shares] == ["0/3", "1/3", "2/3"]
        assert [s["this"] for s in shares] == [False, False, True]
        # each shard's rows are the row hash's, the same on every machine
        assert [s["rows"] for s in shares] == [
            sum(1 for r in rows if shard_of(r["id"], 3) == i) for i in range(3)
        ]
        assert shares[2]["rows"] == body["rows_to_send"]
        assert shares[2]["worst_usd"] == body["worst_case_usd"]
        # the shards' worst cases add up to the whole job's
        total = sum(Decimal(str(s["worst_usd"])) for s in shares)
        assert abs(total - Decimal(str(whole["worst_case_usd"]))) < Decimal("1e-9")
        note = next(n for n in body["notes"] if n.startswith("the job's 3 shards"))
        assert "2/3 (this one) " + f"{shares[2]['rows']} rows" in note
        assert note.endswith(f"all 90 rows, worst {format_usd(total)}")
    assert auto["shard_from"].startswith("shard 2/3 from the launcher (RANK=2")
    assert by_hand["shard_shares"] == auto["shard_shares"]


def test_the_shard_note_lists_this_one_and_the_extremes_past_eight() -> None:
    shares = [ShardShare(i, 12, 10 + i, Decimal("0.1"), i == 5) for i in range(12)]
    note = shard_shares_note(shares)
    assert note == (
        "the job's 12 shards (before resume): 0/12 10 rows, worst $0.10; 5/12 (this one) "
        "15 rows, worst $0.10; 11/12 21 rows, worst $0.10; all 186 rows, worst $1.20"
    )
    unknown = [ShardShare(0, 2, 3, None), ShardShare(1, 2, 4, Decimal(1), True)]
    assert shard_shares_note(unknown).endswith("all 7 rows, worst unknown")


#: the example in this process with its output's N-th record write followed by a real SIGKILL
#: (datatrove's local executor runs its tasks here with --workers 1: the task dies mid-run)
_KILLED_EXAMPLE = """
import os, runpy, signal, sys
from openrouter_probe.run.books.output import OutputLog
after, real, seen = int(os.environ["KILL_AFTER_WRITES"]), OutputLog.write, [0]
def write(self, *args, **kw):
    done = real(self, *args, **kw)
    seen[0] += 1
    if seen[0] >= after:
        os.kill(os.getpid(), signal.SIGKILL)
    return done
OutputLog.write = write
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def test_a_datatrove_task_killed_mid_run_resumes_without_paying_twice(tmp_path: Path) -> None:
    pytest.importorskip("datatrove")
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(60))
    out = tmp_path / "out"
    with serve(speed=0, seed=9, management_key=MANAGER) as fake:
        keys = KeysClient(management_key=MANAGER, base_url=fake.base_url)
        create_shard_keys("dt", shards=2, budget_usd=1, out=tmp_path / "keys.json", client=keys)
        env = {**os.environ, "OPENROUTER_BASE_URL": fake.base_url, "OPENROUTER_API_KEY": ""}
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
        command = [
            str(EXAMPLE), str(tmp_path / "prompts.jsonl"), str(out), "--tasks", "2",
            "--workers", "1", "--policy", str(POLICY), "--budget-usd", "1",
            "--key-file", str(tmp_path / "keys.json"), "--max-tokens", "300",
            "--concurrency", "4", "--snapshot", "bundled",
        ]  # fmt: skip
        rank_ids = [shard_of(r["id"], 2) for r in prompt_rows(60)]
        kill_at = rank_ids.count(0) + 10  # rank 0 done, rank 1 ten records in
        # its own process group: datatrove's multiprocess Manager (a forked server) outlives a
        # SIGKILL of the executor and holds its pipes, so it is ended with the group below
        log = tmp_path / "killed.log"
        with log.open("wb") as sink:
            killed = subprocess.Popen(
                [sys.executable, "-c", _KILLED_EXAMPLE, *command],
                env={**env, "KILL_AFTER_WRITES": str(kill_at)},
                stdout=sink, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
            try:
                code = killed.wait(timeout=300)
            finally:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(killed.pid, signal.SIGKILL)
        assert code == -signal.SIGKILL, log.read_text()[-3000:]
        completions = out / "logs" / "completions"
        assert sorted(p.name for p in completions.iterdir()) == ["00000"]
        rank1 = out / "rank-00001.jsonl"
        before = {r["id"]: r for r in records(rank1)}
        assert 10 <= len(before) < rank_ids.count(1)  # killed mid-run
        billed_before = len(fake.ledger)
        again = subprocess.run(
            [sys.executable, *command], env=env, capture_output=True, text=True, timeout=300,
            check=False,
        )  # fmt: skip
        assert again.returncode == 0, again.stderr[-3000:]
        assert sorted(p.name for p in completions.iterdir()) == ["00000", "00001"]
        outs = expand_outputs([out])
        answered = [r["id"] for o in outs for r in records(o) if r["status"] in ("ok", "truncated")]
        assert sorted(answered) == sorted(r["id"] for r in prompt_rows(60))  # each row once
        after = {r["id"]: r for r in records(rank1)}
        for row_id, record in before.items():  # what was recorded is kept, never bought again
            assert after[row_id]["generation_id"] == record["generation_id"]
        # the rerun bought at most the rows not recorded yet; what was answered in flight at
        # the kill (billed, never recorded) comes back from the response cache, unbilled: every
        # row billed once
        assert len(fake.ledger) - billed_before <= len(after) - len(before)
        assert len(fake.ledger) == len(answered) == 60
        # ... and the summed journals hold what the fake billed: the attempts in flight at the
        # kill with no generation id are settled by the cache hits of their resends (each hit's
        # source: issue 34), or stay counted at their worst case (a resend not answered from
        # the cache names none); each key's usage is its rank's
        books = job_books(read_key_file(tmp_path / "keys.json"), [out], client=keys)
        assert books.keys_usage_usd == fake.ledger.total_usd
        in_flight, unsettled = _unsettled_reserves(Path(f"{rank1}.ledger"))
        assert 1 <= len(in_flight) <= 4  # --concurrency 4
        assert books.possibly_billed_usd == sum(unsettled)
        counted = books.journals_usd - books.possibly_billed_usd
        assert counted <= fake.ledger.total_usd <= books.journals_usd
        # what the journals hold past the ledger is at most the worst case of those still
        # unsettled (a stream the kill cut is billed for what it sent and never cached)
        assert 0 <= books.journals_usd - fake.ledger.total_usd <= sum(unsettled)
        assert books.exit_code == 0
        keys.close()


def _unsettled_reserves(journal: Path) -> tuple[list[Decimal], list[Decimal]]:
    """The reserved worst case of every attempt the journal says was sent and never settled by
    its answer (in flight at a kill), and of those no ``reconciled`` line settled since."""
    sent: dict[tuple[str, int], Decimal] = {}
    reconciled: set[tuple[str, int]] = set()
    for line in journal.read_text(encoding="utf-8").splitlines():
        entry = json.loads(line)
        if "sent" in entry:
            sent[entry["run"], entry["sent"]] = Decimal(entry["reserved_usd"])
        elif "settled" in entry:
            sent.pop((entry["run"], entry["settled"]), None)
        elif "reconciled" in entry:
            reconciled.add((entry["run"], entry["reconciled"]))
    return list(sent.values()), [v for k, v in sent.items() if k not in reconciled]


def test_the_datatrove_step_says_a_rank_stopped_at_its_key_limit(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    pytest.importorskip("datatrove")
    from datatrove.data import Document

    from openrouter_probe.generation.datatrove_step import GenerateStep, RankIncomplete

    docs = [Document(text=f"question {i} " + "x" * 40, id=f"d{i}") for i in range(40)]
    keys = tmp_path / "keys.json"
    with serve(speed=0, seed=3, management_key=MANAGER) as fake:
        client = KeysClient(management_key=MANAGER, base_url=fake.base_url)
        made = create_shard_keys("st", shards=2, budget_usd="0.004", out=keys, client=client)
        step = GenerateStep(policy=POLICY, output=tmp_path / "out", budget_usd=10, key_file=keys,
                            base_url=fake.base_url, snapshot="bundled", max_tokens=300,
                            concurrency=2)  # fmt: skip
        answered: list[Document] = []
        with (
            caplog.at_level("ERROR", logger="openrouter_probe.generation.datatrove_step"),
            pytest.raises(RankIncomplete) as short,
        ):
            answered.extend(step.run(iter(docs), rank=1, world_size=2))
        record = client.get(made.keys[1].hash)
        client.close()
    # it yielded what it answered, then raised: datatrove leaves the task incomplete
    assert 0 < len(answered) < 40
    assert 0 < record.usage_usd <= Decimal("0.002") and fake.ledger.total_usd == record.usage_usd
    assert not record.disabled  # a rank that ended short keeps its key for the rerun
    message = reason(short.value)
    assert message.code == "rank-incomplete"
    assert str(message).startswith(
        f"rank 1/2 ended short of its rows (key-limit: shard 1/2's key 'st-1of2' (hash "
        f"{made.keys[1].hash[:12]}, {keys}, limit $0.002): "
    )
    assert f"): {len(answered)} of 40 answered; raise the key's limit (" in str(message)
    assert str(message).endswith("rerun the same pipeline to resume it (what was answered is "
                                 "not paid again)")  # fmt: skip
    assert [r.getMessage() for r in caplog.records] == [str(message)]  # said in the task's log
    assert made.keys[1].secret not in caplog.text + str(message)

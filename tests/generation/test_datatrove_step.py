"""datatrove, the optional extra: ``GenerateStep`` on the local executor, one key a rank, on the fake.

The example (``examples/scale-out/datatrove_pipeline.py``) runs as a user runs it, in its own
process (datatrove's executor starts its own workers); the fake serves it over loopback.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import pickle
import signal
import subprocess
import sys
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from openrouter_probe.api.keys import KeysClient
from openrouter_probe.errors import reason
from openrouter_probe.fake import serve
from openrouter_probe.generation import generate
from openrouter_probe.generation.books import expand_outputs, job_books
from openrouter_probe.generation.keyfile import create_shard_keys, read_key_file, shard_secret
from openrouter_probe.generation.prompts import shard_of
from tests._generate import POLICY, no_sleep, prompt_rows, records, write_prompts
from tests.conftest import ROOT

EXAMPLE = ROOT / "examples" / "scale-out" / "datatrove_pipeline.py"
MANAGER = "mgmt-datatrove"


def test_without_datatrove_the_import_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "datatrove", None)
    monkeypatch.setitem(sys.modules, "datatrove.data", None)
    monkeypatch.delitem(sys.modules, "openrouter_probe.generation.datatrove_step", raising=False)
    with pytest.raises(ImportError) as caught:
        importlib.import_module("openrouter_probe.generation.datatrove_step")
    assert str(caught.value) == (
        "GenerateStep needs datatrove: pip install 'openrouter-probe[datatrove]'"
    )


def test_the_example_on_four_tasks_with_a_key_each(tmp_path: Path) -> None:
    pytest.importorskip("datatrove")
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(120))
    with serve(speed=0, seed=7, management_key=MANAGER) as fake:
        keys = KeysClient(management_key=MANAGER, base_url=fake.base_url)
        create_shard_keys("job", shards=4, budget_usd=2, out=tmp_path / "keys.json", client=keys)
        env = _env(fake.base_url)
        command = [
            sys.executable, str(EXAMPLE), str(tmp_path / "prompts.jsonl"), str(tmp_path / "out"),
            "--tasks", "4", "--workers", "2", "--policy", str(POLICY), "--budget-usd", "2",
            "--key-file", str(tmp_path / "keys.json"), "--max-tokens", "300",
            "--snapshot", "bundled",
        ]  # fmt: skip
        run = subprocess.run(
            command, env=env, capture_output=True, text=True, timeout=300, check=False
        )
        assert run.returncode == 0, run.stderr[-3000:]
        assert sorted(p.name for p in (tmp_path / "out" / "logs" / "completions").iterdir()) == [
            f"{i:05d}" for i in range(4)
        ]
        outs = expand_outputs([tmp_path / "out"])
        assert [p.name for p in outs] == [f"rank-{i:05d}.jsonl" for i in range(4)]
        answered = [r["id"] for out in outs for r in records(out)]
        assert sorted(answered) == sorted(f"r{i}" for i in range(120))  # every row, once
        assert all(records(out) for out in outs)  # each rank had rows
        keyfile = read_key_file(tmp_path / "keys.json")
        books = job_books(keyfile, [tmp_path / "out"], client=keys)
        # the fake's ledger equals the summed journals, and each key's usage is its rank's
        assert books.journals_usd == fake.ledger.total_usd == books.keys_usage_usd
        assert fake.ledger.total_usd <= Decimal(2) and books.exit_code == 0
        # each rank completed: its key disabled, none left live
        assert [line.state for line in books.keys] == ["disabled"] * 4 and books.live == []
        assert "no key is live (each one disabled or gone)" in books.render()
        for i, line in enumerate(books.keys):
            assert line.record is not None
            rank_spent = sum(Decimal(str(r["cost_usd"])) for r in records(outs[i]))
            assert line.record.usage_usd == rank_spent
        secrets = [k.secret for k in keyfile.keys]
        for path in (tmp_path / "out").rglob("*"):
            if path.is_file():
                text = path.read_text(encoding="utf-8", errors="replace")
                assert not any(s in text for s in secrets), path
        assert not any(s in run.stdout + run.stderr for s in secrets)
        # rank 2 as if killed before datatrove marked it done: the rerun runs it again, it
        # resumes from its journal and sends nothing; the finished ranks are skipped
        billed = fake.ledger.total_usd
        (tmp_path / "out" / "logs" / "completions" / "00002").unlink()
        again = subprocess.run(
            command, env=env, capture_output=True, text=True, timeout=300, check=False
        )
        assert again.returncode == 0, again.stderr[-3000:]
        assert (tmp_path / "out" / "logs" / "completions" / "00002").exists()
        assert fake.ledger.total_usd == billed  # nothing paid twice
        assert sorted(r["id"] for out in outs for r in records(out)) == sorted(answered)
        # one shard run by hand with a budget 20x its key's limit: the server stops it there
        keys.update(keyfile.keys[0].hash, disabled=False)
        write_prompts(tmp_path / "more.jsonl", prompt_rows(3000, size=400))
        by_hand = asyncio.run(
            generate(tmp_path / "more.jsonl", policy=POLICY, out=tmp_path / "by-hand.jsonl",
                     base_url=fake.base_url, api_key=shard_secret(tmp_path / "keys.json", "0/4"), shard="0/4",
                     budget_usd=10, snapshot="bundled", sleep=no_sleep, max_tokens=4096,
                     concurrency=32)
        )  # fmt: skip
        assert by_hand.stop_reason != "done"
        assert "key's limit" in by_hand.message
        zero = keys.get(keyfile.keys[0].hash)
        assert zero.usage_usd <= Decimal("0.5")
        assert fake.ledger.total_usd <= Decimal(2)
        keys.close()


def test_the_step_streams_a_chunk_at_a_time(tmp_path: Path) -> None:
    """The Documents are read a chunk at a time, and each chunk's answers are yielded before the
    next chunk is read: the rank holds one chunk, never all its rows."""
    pytest.importorskip("datatrove")
    from datatrove.data import Document

    from openrouter_probe.generation.datatrove_step import GenerateStep

    read: list[str] = []
    out: list[Document] = []
    when: dict[str, int] = {}  # each Document read: how many answers had been yielded then

    def documents() -> Iterator[Document]:
        for i in range(10):
            read.append(f"d{i}")
            when[f"d{i}"] = len(out)
            yield Document(text=f"question {i}", id=f"d{i}")

    with serve(speed=0, seed=4) as fake:
        step = GenerateStep(policy=POLICY, output=tmp_path, base_url=fake.base_url,
                            api_key="sk-test", snapshot="bundled", max_tokens=64, chunk_rows=4,
                            concurrency=2)  # fmt: skip
        for doc in step.run(documents(), rank=0, world_size=1):
            out.append(doc)
        billed = len(fake.ledger)
    assert sorted(d.id for d in out) == sorted(read) and billed == 10
    # chunks of 4, 4 and 2: the 5th Document is read once the first 4 are answered
    assert [when[f"d{i}"] for i in (0, 3, 4, 7, 8, 9)] == [0, 0, 4, 4, 8, 8]
    # one prompts source for the output, holding the chunk answered last
    assert [p.name for p in (tmp_path / "prompts").iterdir()] == ["rank-00000.jsonl"]
    last = (tmp_path / "prompts" / "rank-00000.jsonl").read_text().splitlines()
    assert [json.loads(line)["id"] for line in last] == ["d8", "d9"]
    assert step.stats["rows_in"].total == 10 and step.stats["rows_answered"].total == 10
    # a rerun reads the same chunks, sends nothing, and yields every answer again (datatrove's
    # writer after the step rewrites the rank's file)
    with serve(speed=0, seed=4) as fake:
        again = GenerateStep(policy=POLICY, output=tmp_path, base_url=fake.base_url,
                             api_key="sk-test", snapshot="bundled", max_tokens=64, chunk_rows=4)  # fmt: skip
        redone = list(again.run(iter([Document(text=f"question {i}", id=f"d{i}")
                                      for i in range(10)])))  # fmt: skip
        assert len(fake.ledger) == 0
    assert sorted(d.id for d in redone) == sorted(read)
    assert [d.text for d in redone] == [d.text for d in out]


@pytest.mark.parametrize("executor", ["LOCAL", "RAY"])
def test_sigterm_between_two_chunks_stops_the_rank_before_the_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, executor: str
) -> None:
    """The rank stops before the next chunk. Its process ends (``RankInterrupted``), except on
    Ray (datatrove sets ``DATATROVE_EXECUTOR``), where no pool ends the rank's process: it
    raises ``RankIncomplete``, which goes back to the Ray task (ending the process would leave
    the task waiting for ever)."""
    pytest.importorskip("datatrove")
    from datatrove.data import Document

    from openrouter_probe.generation.datatrove_step import (
        GenerateStep,
        RankIncomplete,
        RankInterrupted,
    )

    monkeypatch.setenv("DATATROVE_EXECUTOR", executor)

    guarded: list[int] = []  # the handler the step replaces, and puts back at the end

    def guard(signum: int, frame: Any) -> None:
        guarded.append(signum)

    before = signal.signal(signal.SIGTERM, guard)

    def documents() -> Iterator[Document]:
        for i in range(10):
            if i == 5:  # read while the second chunk is written: no run is going
                os.kill(os.getpid(), signal.SIGTERM)
            yield Document(text=f"question {i}", id=f"d{i}")

    out: list[Document] = []
    try:
        with serve(speed=0, seed=6) as fake:
            step = GenerateStep(policy=POLICY, output=tmp_path, base_url=fake.base_url,
                                api_key="sk-test", snapshot="bundled", max_tokens=64,
                                chunk_rows=4)  # fmt: skip
            raised = RankInterrupted if executor == "LOCAL" else RankIncomplete
            with pytest.raises(raised) as stopped:
                out.extend(step.run(documents(), rank=0, world_size=1))
            billed = len(fake.ledger)
        assert guarded == [] and signal.getsignal(signal.SIGTERM) is guard
    finally:
        signal.signal(signal.SIGTERM, before)
    if isinstance(stopped.value, RankInterrupted):
        assert stopped.value.code == 130
    said = stopped.value.message if isinstance(stopped.value, RankInterrupted) else stopped.value
    assert str(said) == (
        "rank 0/1 ended short of its rows (interrupted: stopped by SIGTERM between two chunks): "
        "4 of 10 answered; the requests in flight were drained or journalled; datatrove leaves "
        "the task incomplete: rerun the same pipeline to resume it (what was answered is not "
        "paid again)"
    )
    assert billed == 4 and sorted(d.id for d in out) == ["d0", "d1", "d2", "d3"]


def _env(base_url: str) -> dict[str, str]:
    """The example's environment: the fake, no default key, the management key (it disables
    each rank's key when the rank completes)."""
    env = {**os.environ, "OPENROUTER_BASE_URL": base_url, "OPENROUTER_API_KEY": ""}
    env["OPENROUTER_MANAGEMENT_KEY"] = MANAGER
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    return env


def test_ranks_stopped_by_their_key_limits_stay_incomplete_and_a_rerun_finishes_them(
    tmp_path: Path,
) -> None:
    """Every rank's key too small: the ranks that hit their limits raise after writing what
    they have, datatrove marks them not completed (its pool ends the others with SIGTERM, a
    graceful stop); with the limits raised, the rerun answers every row once."""
    pytest.importorskip("datatrove")
    rows = prompt_rows(200)
    write_prompts(tmp_path / "prompts.jsonl", rows)
    out = tmp_path / "out"
    with serve(speed=0, seed=21, management_key=MANAGER) as fake:
        keys = KeysClient(management_key=MANAGER, base_url=fake.base_url)
        made = create_shard_keys(
            "short", shards=4, budget_usd="0.008", out=tmp_path / "keys.json", client=keys
        )
        command = [
            sys.executable, str(EXAMPLE), str(tmp_path / "prompts.jsonl"), str(out),
            "--tasks", "4", "--workers", "2", "--policy", str(POLICY), "--budget-usd", "2",
            "--key-file", str(tmp_path / "keys.json"), "--max-tokens", "300",
            "--concurrency", "4", "--snapshot", "bundled",
        ]  # fmt: skip
        first = subprocess.run(
            command, env=_env(fake.base_url), capture_output=True, text=True, timeout=300,
            check=False,
        )  # fmt: skip
        assert first.returncode == 1, first.stderr[-3000:]
        said = [x for x in first.stderr.splitlines() if x.startswith("datatrove_pipeline: ")]
        assert len(said) == 1, first.stderr[-3000:]
        assert " ended short of its rows (key-limit: shard " in said[0]
        assert "raise the key's limit" in said[0] and "rerun the same pipeline" in said[0]
        completions = out / "logs" / "completions"
        done = sorted(p.name for p in completions.iterdir()) if completions.exists() else []
        assert len(done) < 4
        billed = fake.ledger.total_usd
        assert 0 < billed <= Decimal("0.008")
        answered = {r["id"] for o in expand_outputs([out]) for r in records(o)
                    if r["status"] in ("ok", "truncated")}  # fmt: skip
        assert 0 < len(answered) < 200
        # the keys of the ranks left incomplete stay live for the rerun: raise their limits
        for key in made.keys:
            record = keys.get(key.hash)
            assert record.disabled == (f"{key.shard:05d}" in done)
            if not record.disabled:
                keys.update(key.hash, limit=1)
        again = subprocess.run(
            command, env=_env(fake.base_url), capture_output=True, text=True, timeout=300,
            check=False,
        )  # fmt: skip
        assert again.returncode == 0, again.stderr[-3000:]
        assert sorted(p.name for p in completions.iterdir()) == [f"{i:05d}" for i in range(4)]
        outs = expand_outputs([out])
        served = [r for o in outs for r in records(o) if r["status"] in ("ok", "truncated")]
        assert sorted(r["id"] for r in served) == sorted(r["id"] for r in rows)  # each once
        assert answered <= {r["id"] for r in served}
        # nothing paid twice: one billed generation a row (an answer cancelled in a drain the
        # pool's SIGTERM cut short comes back from the response cache, billed nothing)
        assert len(fake.ledger) == 200
        books = job_books(read_key_file(tmp_path / "keys.json"), [out], client=keys)
        assert books.keys_usage_usd == fake.ledger.total_usd
        # the journals count what was billed, and what no answer settled at its worst case
        counted = books.journals_usd - books.possibly_billed_usd
        assert counted <= fake.ledger.total_usd <= books.journals_usd
        assert books.live == []
        assert [line.limit_usd for line in books.keys] == [1] * 4  # as raised, not as created
        # the only problem said: the limits raised past the key file's budget, as asked
        assert books.problems == [
            f"the keys used ${books.keys_usage_usd}, over the job's budget of $0.008"
        ]
        for line in books.keys:  # each key checked against its own rank's journals
            assert line.usage_usd is not None and line.journals_usd is not None
            assert 0 < line.usage_usd <= line.journals_usd
        keys.close()


def test_the_step_alone_yields_the_answers(tmp_path: Path) -> None:
    pytest.importorskip("datatrove")
    from datatrove.data import Document

    from openrouter_probe.generation.datatrove_step import GenerateStep

    docs = [Document(text=f"question {i}", id=f"d{i}", metadata={"dataset": "x"}) for i in range(5)]
    with serve(speed=0, seed=8) as fake:
        step = GenerateStep(policy=POLICY, output=tmp_path, budget_usd=1, base_url=fake.base_url,
                            api_key="sk-test", snapshot="bundled", max_tokens=64)  # fmt: skip
        out = list(step.run(iter(docs), rank=1, world_size=2))
        assert sorted(d.id for d in out) == [f"d{i}" for i in range(5)]
        rows = records(tmp_path / "rank-00001.jsonl")
        assert {r["dataset"] for r in rows} == {"x"}
        assert sum(Decimal(str(d.metadata["cost_usd"])) for d in out) == fake.ledger.total_usd
        sent = [json.loads(line) for line in (tmp_path / "prompts" / "rank-00001.jsonl").open()]
        assert sent[0] == {"id": "d0", "prompt": "question 0", "dataset": "x"}
        assert step.stats["rows_answered"].total == 5


@pytest.mark.parametrize("way", ["api_key", "api_key_env", "key_file", "environment"])
def test_no_secret_reaches_the_logging_folder_whichever_way_the_key_is_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, way: str
) -> None:
    """datatrove's own ``save_executor_as_json`` dumps the step's attributes into
    ``executor.json``, and its ``_run_for_rank`` writes the task's log, stats and marker: no
    file under the logging folder holds the key's secret, which the run did spend through."""
    pytest.importorskip("datatrove")
    from datatrove.executor import LocalPipelineExecutor
    from datatrove.pipeline.readers import JsonlReader

    from openrouter_probe.generation.datatrove_step import GenerateStep

    rows = [{"id": f"s{i}", "prompt": f"question {i}"} for i in range(6)]
    write_prompts(tmp_path / "prompts.jsonl", rows)
    with serve(speed=0, seed=5, management_key=MANAGER) as fake:
        keys = KeysClient(management_key=MANAGER, base_url=fake.base_url)
        made = create_shard_keys("sec", shards=1, budget_usd=1, out=tmp_path / "keys.json",
                                 client=keys)  # fmt: skip
        secret = made.keys[0].secret
        monkeypatch.setenv("OPENROUTER_API_KEY", secret if way == "environment" else "")
        monkeypatch.setenv("RANK_KEY", secret)
        given: dict[str, Any] = {
            "api_key": {"api_key": secret},
            "api_key_env": {"api_key_env": "RANK_KEY"},
            "key_file": {"key_file": tmp_path / "keys.json", "keep_keys": True},
            "environment": {},
        }[way]
        step = GenerateStep(policy=POLICY, output=tmp_path / "out", base_url=fake.base_url,
                            snapshot="bundled", max_tokens=64, **given)  # fmt: skip
        assert pickle.loads(pickle.dumps(step)).run  # the ranks get it pickled
        executor = LocalPipelineExecutor(
            [JsonlReader(str(tmp_path), glob_pattern="prompts.jsonl", text_key="prompt"), step],
            tasks=1, workers=1, logging_dir=str(tmp_path / "out" / "logs"),
        )  # fmt: skip
        executor.save_executor_as_json()
        executor._run_for_rank(0)
        usage = keys.get(made.keys[0].hash).usage_usd
        keys.close()
    assert usage == fake.ledger.total_usd > 0  # every request went through that key
    assert len(records(tmp_path / "out" / "rank-00000.jsonl")) == 6
    logs = [p for p in (tmp_path / "out" / "logs").rglob("*") if p.is_file()]
    assert {"executor.json", "task_00000.log", "00000"} <= {p.name for p in logs}
    for path in logs:
        assert secret not in path.read_text(encoding="utf-8", errors="replace"), path
    dumped = json.loads((tmp_path / "out" / "logs" / "executor.json").read_text())
    options = dumped["pipeline"][1]
    if way == "api_key":
        assert options["_api_key"] == "**********"  # pydantic's SecretStr, masked
    assert "api_key" not in options["generate_options"]


#: the example in this process, sending itself SIGTERM after its output's N-th record (as Slurm
#: does at a time limit or a preemption): datatrove's executor runs the ranks here (--workers 1)
_SIGTERM_EXAMPLE = """
import os, runpy, signal, sys
from openrouter_probe.run.books.output import OutputLog
after, real, seen = int(os.environ["TERM_AFTER_WRITES"]), OutputLog.write, [0]
def write(self, *args, **kw):
    done = real(self, *args, **kw)
    seen[0] += 1
    if seen[0] == after:
        os.kill(os.getpid(), signal.SIGTERM)
    return done
OutputLog.write = write
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def test_sigterm_stops_a_rank_gracefully_and_the_rerun_completes_it(tmp_path: Path) -> None:
    pytest.importorskip("datatrove")
    rows = prompt_rows(60)
    write_prompts(tmp_path / "prompts.jsonl", rows)
    out = tmp_path / "out"
    with serve(speed=0, seed=13, management_key=MANAGER) as fake:
        keys = KeysClient(management_key=MANAGER, base_url=fake.base_url)
        create_shard_keys("term", shards=2, budget_usd=1, out=tmp_path / "keys.json", client=keys)
        command = [
            str(EXAMPLE), str(tmp_path / "prompts.jsonl"), str(out), "--tasks", "2",
            "--workers", "1", "--policy", str(POLICY), "--budget-usd", "1",
            "--key-file", str(tmp_path / "keys.json"), "--max-tokens", "300",
            "--concurrency", "4", "--snapshot", "bundled",
        ]  # fmt: skip
        rank0 = sum(1 for r in rows if shard_of(r["id"], 2) == 0)
        stopped = subprocess.run(
            [sys.executable, "-c", _SIGTERM_EXAMPLE, *command],
            env={**_env(fake.base_url), "TERM_AFTER_WRITES": str(rank0 + 10)},
            capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        assert stopped.returncode == 130, stopped.stderr[-3000:]
        assert "SIGTERM: no new requests" in stopped.stderr
        assert "rank 1/2 ended short of its rows (interrupted: stopped by SIGTERM): " in (
            stopped.stderr
        )
        completions = out / "logs" / "completions"
        assert sorted(p.name for p in completions.iterdir()) == ["00000"]  # rank 1 incomplete
        before = records(out / "rank-00001.jsonl")
        # drained: each request in flight at the signal finished and was recorded
        assert 10 <= len(before) < len(rows) - rank0
        assert all(r["status"] in ("ok", "truncated") for r in before)
        assert len(fake.ledger) == rank0 + len(before)
        again = subprocess.run(
            [sys.executable, *command], env=_env(fake.base_url), capture_output=True,
            text=True, timeout=300, check=False,
        )  # fmt: skip
        assert again.returncode == 0, again.stderr[-3000:]
        assert sorted(p.name for p in completions.iterdir()) == ["00000", "00001"]
        outs = expand_outputs([out])
        served = [r["id"] for o in outs for r in records(o) if r["status"] in ("ok", "truncated")]
        assert sorted(served) == sorted(r["id"] for r in rows)
        assert len(fake.ledger) == len(rows)  # nothing paid twice
        books = job_books(read_key_file(tmp_path / "keys.json"), [out], client=keys)
        assert books.journals_usd == fake.ledger.total_usd == books.keys_usage_usd
        assert books.possibly_billed_usd == 0 and books.exit_code == 0 and books.live == []
        keys.close()


def test_a_rank_stopped_by_its_budget_share_says_what_to_raise(tmp_path: Path) -> None:
    pytest.importorskip("datatrove")
    from datatrove.data import Document

    from openrouter_probe.generation.datatrove_step import GenerateStep, RankIncomplete

    docs = [Document(text=f"question {i} " + "x" * 40, id=f"d{i}") for i in range(40)]
    answered: list[Document] = []
    with serve(speed=0, seed=14) as fake:
        step = GenerateStep(policy=POLICY, output=tmp_path, budget_usd="0.004",
                            base_url=fake.base_url, api_key="sk-test", snapshot="bundled",
                            max_tokens=300, concurrency=2)  # fmt: skip
        with pytest.raises(RankIncomplete) as short:
            answered.extend(step.run(iter(docs), rank=0, world_size=2))
        billed = fake.ledger.total_usd
    message = reason(short.value)
    assert 0 < len(answered) < 40 and 0 < billed <= Decimal("0.002")
    assert str(message).startswith("rank 0/2 ended short of its rows (budget: ")
    assert f"): {len(answered)} of 40 answered; raise budget_usd= (the job's $0.004: this " in (
        str(message)
    )
    assert "this rank's share is $0.002); datatrove leaves the task incomplete" in str(message)


def test_a_completed_rank_without_a_management_key_says_its_key_stays_live(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    pytest.importorskip("datatrove")
    from datatrove.data import Document

    from openrouter_probe.generation.datatrove_step import GenerateStep

    monkeypatch.delenv("OPENROUTER_MANAGEMENT_KEY", raising=False)
    with serve(speed=0, seed=15, management_key=MANAGER) as fake:
        keys = KeysClient(management_key=MANAGER, base_url=fake.base_url)
        made = create_shard_keys("live", shards=1, budget_usd=1, out=tmp_path / "keys.json",
                                 client=keys)  # fmt: skip
        step = GenerateStep(policy=POLICY, output=tmp_path / "out", key_file=tmp_path / "keys.json",
                            base_url=fake.base_url, snapshot="bundled", max_tokens=64)  # fmt: skip
        with caplog.at_level("WARNING", logger="openrouter_probe.generation.datatrove_step"):
            out = list(step.run(iter([Document(text="hi", id="a")]), rank=0, world_size=1))
        record = keys.get(made.keys[0].hash)
        keys.close()
    assert [d.id for d in out] == ["a"] and not record.disabled
    said = [r.getMessage() for r in caplog.records if r.name.endswith("datatrove_step")]
    assert said == [
        f"rank 0/1 completed, but its key live-0of1 (hash {made.keys[0].hash[:12]}) stays live: "
        "no management key: set OPENROUTER_MANAGEMENT_KEY to a management key "
        "(https://openrouter.ai/settings/management-keys); an inference key cannot create keys; "
        "revoke the job's keys when it is done"
    ]


def test_the_step_takes_one_way_to_the_key_a_chunk_of_rows_above_zero_and_no_pilot() -> None:
    pytest.importorskip("datatrove")
    from openrouter_probe.errors import ConfigError, OptionError
    from openrouter_probe.generation.datatrove_step import GenerateStep

    with pytest.raises(ConfigError) as caught:
        GenerateStep(policy=POLICY, output="out", api_key="sk-x", api_key_env="KEY")
    assert str(caught.value) == "GenerateStep: api_key and api_key_env each give the key: give one"
    assert "sk-x" not in str(caught.value)
    with pytest.raises(ConfigError) as caught:
        GenerateStep(policy=POLICY, output="out", chunk_rows=0)
    assert str(caught.value) == "GenerateStep(chunk_rows=0): give a whole number of rows above 0"
    with pytest.raises(OptionError) as refused:
        GenerateStep(policy=POLICY, output="out", pilot=20, max_tokens=2048)
    assert refused.value.options == ("pilot", "max_tokens")
    assert str(refused.value) == (
        "GenerateStep(pilot=20): a step runs no pilot (each chunk of a rank would be a pilot of "
        "its own and the rank would end incomplete): run the pilot with generate first "
        "(generate(prompts, policy=..., out=..., pilot=N)), then give the step the max_tokens= "
        "its report says, without pilot="
    )
    missing = GenerateStep(policy=POLICY, output="out", api_key_env="NO_SUCH_KEY_VARIABLE")
    with pytest.raises(ConfigError) as caught:
        missing._api_key_of()
    assert str(caught.value) == (
        "GenerateStep(api_key_env='NO_SUCH_KEY_VARIABLE'): NO_SUCH_KEY_VARIABLE is not set in "
        "this rank's environment: set it where the ranks run (or give key_file=)"
    )

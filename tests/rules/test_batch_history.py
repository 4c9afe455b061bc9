"""A batch run records its accepted submit in the snapshot it was given, and the
commands that read that snapshot later say ``accepted`` instead of ``listed``.

The run is on the fake OpenRouter (``ManualClock``, moved by the run's injected sleep: no test
waits for a batch); the snapshot is a copy of examples/batch/kimi-k3.snapshot.json.
"""

from __future__ import annotations

import asyncio
import csv
import dataclasses
import io
import json
import os
import shutil
import stat
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import openrouter_probe as orp
from openrouter_probe.cli import cli
from openrouter_probe.errors import SnapshotError
from openrouter_probe.fake import ManualClock
from openrouter_probe.rules.batch import record_batch_acceptance
from tests.conftest import ROOT

HERE = ROOT / "examples" / "batch"
PROMPTS = HERE / "prompts.jsonl"
KEY = "sk-fake-batch-history"
MODEL = "moonshotai/kimi-k3"


@pytest.fixture
def snapshot_file(tmp_path: Path) -> Path:
    path = tmp_path / "kimi-k3.snapshot.json"
    shutil.copy(HERE / "kimi-k3.snapshot.json", path)
    return path


@pytest.fixture
def policy(tmp_path: Path, snapshot_file: Path) -> Path:
    compiled = orp.compile_policy(
        orp.load_spec(HERE / "kimi-k3.spec.yaml"), orp.load_snapshot(snapshot_file)
    )
    return compiled.save(tmp_path / "kimi-k3.yaml")


def _run(policy: Path, out: Path, snapshot: Any, seed: int = 7) -> tuple[Any, list[str]]:
    """A ``generate(batch=True)`` run on the fake; the summary and the fake's batch ids (a
    fake's ids are its clock's second and its seed's draw: another seed, another id)."""
    clock = ManualClock(time.time())

    async def sleep(seconds: float) -> None:
        clock.advance(seconds)
        await asyncio.sleep(0)

    async def go() -> tuple[Any, list[str]]:
        with orp.fake.serve(
            orp.load_snapshot(HERE / "kimi-k3.snapshot.json"), speed=0, seed=seed, clock=clock
        ) as fake:
            summary = await orp.generate(
                PROMPTS,
                policy=policy,
                out=out,
                max_tokens=256,
                budget_usd="5",
                api_key=KEY,
                base_url=fake.base_url,
                batch=True,
                snapshot=snapshot,
                sleep=sleep,
                clock=clock.now,
            )
            return summary, list(fake.fake.batches.batches)

    return asyncio.run(go())


def _invoke(*args: str) -> Any:
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == 0, result.output
    return result


def test_a_batch_run_records_its_accepted_submit_and_the_commands_say_accepted(
    tmp_path: Path, snapshot_file: Path, policy: Path
) -> None:
    before = orp.load_snapshot(snapshot_file)
    assert before.batch is not None and before.batch.status("together") == "listed"
    summary, made = _run(policy, tmp_path / "out.jsonl", str(snapshot_file))
    assert summary.stop_reason == "done" and summary.ok + summary.truncated == 8
    (batch_id,) = made
    after = orp.load_snapshot(snapshot_file)
    assert after.batch is not None
    assert [(a.tag, a.batch_id) for a in after.batch.accepted] == [("together", batch_id)]
    assert after.batch.status("together") == "accepted"
    # only the batch value changed: the file is what saving the snapshot with it would write,
    # the data and its sha256 are those the policy pinned
    (acceptance,) = after.batch.accepted
    expected = before.with_batch_acceptance("together", batch_id, at=acceptance.at)
    assert snapshot_file.read_text() == expected.save(tmp_path / "expected.json").read_text()
    assert json.loads(snapshot_file.read_text())["data"] == before.to_json()["data"]
    assert after.sha256 == before.sha256 == json.loads(snapshot_file.read_text())["sha256"]
    snap = str(snapshot_file)
    shown = _invoke("endpoints", MODEL, "--snapshot", snap)
    assert "1 :batch endpoint(s): together (accepted)" in shown.stderr
    matrix = _invoke("matrix", MODEL, "--snapshot", snap, "--format", "csv")
    header, *rows = list(csv.reader(io.StringIO(matrix.stdout)))
    column = header.index("batch_status")
    assert {r[header.index("tag")]: r[column] for r in rows if r[column]} == {
        "together": "accepted"
    }
    budget = _invoke(
        "budget", MODEL, "--snapshot", snap, "--budget-usd", "100", "--output-tokens", "60M",
        "--policy", str(policy),
    )  # fmt: skip
    assert "(together, accepted)" in budget.stdout
    explained = _invoke("policy", "explain", str(policy), "--snapshot", snap)
    explained_text = explained.stdout.replace("\n  ", " ")  # wrapped to the table's width
    assert "$15.00/M sync, 50%), accepted" in explained_text
    assert f"batch: together: a submit was accepted since the compile ({batch_id}" in (
        explained_text
    )
    spec = _invoke("policy", "explain", str(HERE / "kimi-k3.spec.yaml"), "--snapshot", snap)
    assert "batch: batches run on together (a submit was accepted)" in spec.stdout.replace(
        "\n  ", " "
    )
    # the policy pinned this snapshot's sha256: the history is no drift
    checked = CliRunner().invoke(cli, ["policy", "check", str(policy), "--snapshot", snap])
    assert checked.exit_code == 0, checked.output
    # a second run on another output records its own first acceptance beside the first
    _, made = _run(policy, tmp_path / "out2.jsonl", str(snapshot_file), seed=8)
    again = orp.load_snapshot(snapshot_file)
    assert again.batch is not None
    assert [a.batch_id for a in again.batch.accepted] == [batch_id, made[-1]]


def test_a_read_only_snapshot_is_left_alone_and_the_run_finishes(
    tmp_path: Path, snapshot_file: Path, policy: Path
) -> None:
    os.chmod(snapshot_file, stat.S_IRUSR | stat.S_IRGRP)
    text = snapshot_file.read_text()
    summary, (batch_id,) = _run(policy, tmp_path / "out.jsonl", str(snapshot_file))
    assert summary.stop_reason == "done" and summary.ok + summary.truncated == 8
    assert snapshot_file.read_text() == text
    (said,) = [w for w in summary.warnings if "read-only" in w]
    assert said == (
        f"{snapshot_file} is read-only: batch {batch_id} accepted for together is not recorded "
        "in its history; make it writable (chmod u+w) for later runs to record theirs "
        "(the run goes on)"
    )


def test_the_bundled_snapshot_is_never_written_and_says_how_to_keep_a_history(
    tmp_path: Path, policy: Path
) -> None:
    bundled = dataclasses.replace(
        orp.load_snapshot(HERE / "kimi-k3.snapshot.json"), source="bundled"
    )
    summary, (batch_id,) = _run(policy, tmp_path / "out.jsonl", bundled)
    assert summary.stop_reason == "done"
    (said,) = [w for w in summary.warnings if "accepted" in w]
    assert said.startswith(f"batch {batch_id} was accepted; the bundled snapshot (package data)")
    assert "pass snapshot=PATH" in said


def test_recording_keeps_every_other_byte_and_refuses_what_it_cannot_record(
    tmp_path: Path,
) -> None:
    # a hand-laid-out snapshot: its data keeps its own layout, only the batch value changes
    doc = orp.load_snapshot(HERE / "kimi-k3.snapshot.json").to_json()
    path = tmp_path / "compact.json"
    data_text = json.dumps(doc["data"], separators=(",", ":"))
    head = {k: v for k, v in doc.items() if k not in ("data", "batch")}
    path.write_text(
        json.dumps(head)[:-1] + f', "data": {data_text}, "batch": {json.dumps(doc["batch"])}}}\n'
    )
    assert record_batch_acceptance(path, "together", "batch-1") is True
    assert record_batch_acceptance(path, "together", "batch-1") is False  # once per batch id
    text = path.read_text()
    assert f'"data": {data_text}, "batch": {{' in text
    listing = orp.load_snapshot(path).batch
    assert listing is not None and [a.batch_id for a in listing.accepted] == ["batch-1"]
    with pytest.raises(SnapshotError, match="'fireworks' is not among its :batch endpoints"):
        record_batch_acceptance(path, "fireworks", "batch-2")
    raw = tmp_path / "raw.json"
    raw.write_text(json.dumps({"data": doc["data"]}))
    with pytest.raises(
        SnapshotError, match=r"raw.json: no :batch listing .* `orp\.probe\(MODEL\)\.save\(PATH\)`"
    ):
        record_batch_acceptance(raw, "together", "batch-3")
    assert raw.read_text() == json.dumps({"data": doc["data"]})

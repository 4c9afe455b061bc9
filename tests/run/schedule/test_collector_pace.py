"""The garbage collector's pace while a ``generate`` job runs: fewer collections, the process's
thresholds back when the last job ends, a collector switched off left off; held off altogether
through a command's setup, until its job sends."""

from __future__ import annotations

import asyncio
import atexit
import gc
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from click.testing import CliRunner

from openrouter_probe.run.paid import _run
from openrouter_probe.run.schedule.garbage import FIRST, OLDER, held, paced
from tests._generate import POLICY


@pytest.fixture(autouse=True)
def _thresholds() -> Iterator[None]:
    before, enabled = gc.get_threshold(), gc.isenabled()
    yield
    gc.set_threshold(*before)
    (gc.enable if enabled else gc.disable)()


def test_a_job_raises_the_thresholds_and_puts_them_back() -> None:
    gc.set_threshold(700, 10, 10)
    with paced():
        assert gc.get_threshold() == (FIRST, *OLDER)
    assert gc.get_threshold() == (700, 10, 10)


def test_overlapping_jobs_put_them_back_when_the_last_one_ends() -> None:
    gc.set_threshold(700, 10, 10)
    first, second = paced(), paced()
    first.__enter__()
    second.__enter__()
    first.__exit__(None, None, None)  # the first to start ends first: the second still runs
    assert gc.get_threshold() == (FIRST, *OLDER)
    second.__exit__(None, None, None)
    assert gc.get_threshold() == (700, 10, 10)


def test_higher_thresholds_and_a_collector_switched_off_are_kept() -> None:
    gc.set_threshold(50_000, 10, 200)
    with paced():
        assert gc.get_threshold() == (50_000, OLDER[0], 200)
    gc.set_threshold(0, 10, 10)  # off
    with paced():
        assert gc.get_threshold() == (0, 10, 10)
    assert gc.get_threshold() == (0, 10, 10)


def test_a_job_that_raises_puts_them_back() -> None:
    gc.set_threshold(700, 10, 10)
    with pytest.raises(RuntimeError), paced():
        raise RuntimeError("the job failed")
    assert gc.get_threshold() == (700, 10, 10)


def test_a_held_collector_runs_again_once_the_job_sends() -> None:
    gc.set_threshold(700, 10, 10)
    gc.enable()
    with held():
        assert not gc.isenabled()  # the setup: imports, the policy, the prompts
        assert gc.get_freeze_count() == 0
        with paced():
            assert gc.isenabled()
            assert gc.get_threshold() == (FIRST, *OLDER)
            assert gc.get_freeze_count() > 0  # what the setup left alive: walked no more
        assert gc.isenabled()
    assert gc.isenabled()
    assert gc.get_freeze_count() == 0  # the process's objects collectable again
    assert gc.get_threshold() == (700, 10, 10)


def test_a_command_that_ends_before_sending_lets_the_collector_go() -> None:
    gc.enable()
    inside = []

    def refuse() -> None:
        with held():
            inside.append(gc.isenabled())
            raise SystemExit(2)  # a refusal, before any job

    with pytest.raises(SystemExit):
        refuse()
    assert inside == [False]
    assert gc.isenabled()
    assert gc.get_freeze_count() == 0


def test_a_collector_switched_off_stays_off_through_a_hold_and_a_job() -> None:
    gc.disable()
    with held(), paced():
        assert not gc.isenabled()
    assert not gc.isenabled()


def test_the_commands_that_hold_the_collector_are_the_clis_job_commands() -> None:
    from openrouter_probe.cli import cli
    from openrouter_probe.cli._common import RUNS_A_JOB

    assert set(cli.commands) >= RUNS_A_JOB


def test_a_held_collector_runs_while_earlier_batches_are_taken_up() -> None:
    # a batch resume fetches earlier batches' results (``before``) before it sends anything new
    seen: list[tuple[bool, int]] = []

    async def before() -> None:
        seen.append((gc.isenabled(), gc.get_threshold()[0]))

    async def run() -> Any:
        return "done"

    gc.set_threshold(700, 10, 10)
    gc.enable()
    with held():
        job: Any = SimpleNamespace(run=run)
        result: Any = asyncio.run(_run(job, False, before=before()))
    assert result == "done"
    assert seen == [(True, FIRST)]


def test_only_the_clis_own_process_skips_the_collection_at_its_exit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # in a notebook or click's CliRunner the process goes on: its exit still collects the cyclic
    # garbage and runs the finalizers
    from openrouter_probe.cli import cli

    registered: list[object] = []
    monkeypatch.setattr(atexit, "register", lambda f, *a, **k: registered.append(f))
    prompts = tmp_path / "p.jsonl"
    prompts.write_text(json.dumps({"id": "r0", "prompt": "what is 6 * 7?"}) + "\n")
    args = ["generate", str(prompts), "--policy", str(POLICY), "-o", str(tmp_path / "o.jsonl")]
    args += ["--snapshot", "bundled", "--dry-run"]
    gc.enable()
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert gc.freeze not in registered
    assert gc.isenabled() and gc.get_freeze_count() == 0
    monkeypatch.setattr(sys, "argv", ["openrouter-probe", *args])  # the console script's call
    with pytest.raises(SystemExit) as ended:
        cli.main(standalone_mode=False)
    assert ended.value.code == 0
    assert registered.count(gc.freeze) == 1
    assert gc.isenabled() and gc.get_freeze_count() == 0

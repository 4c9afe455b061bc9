"""The output's lock (``run.lock``): one holder, nothing left behind, no race on its removal."""

from __future__ import annotations

import asyncio
import fcntl
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from openrouter_probe.errors import ConfigError
from openrouter_probe.generation import generate
from openrouter_probe.run.lock import OutputLock, _same_file, lock_path
from tests._generate import POLICY, LedgerSender, no_sleep, prompt_rows, write_prompts
from tests.conftest import PYTEST_OPENROUTER_KEY


def test_a_run_leaves_no_lock_file_behind(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    with OutputLock(out, command="generate"):
        assert lock_path(out).name == ".out.jsonl.lock"
        assert '"command": "generate"' in lock_path(out).read_text()
    assert list(tmp_path.iterdir()) == []


def test_a_second_holder_is_refused_naming_the_first(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    with (
        OutputLock(out, command="verify"),
        pytest.raises(ConfigError, match=r"is in use by `verify` \(pid \d+ on "),
    ):
        OutputLock(out, command="generate").acquire()
    with OutputLock(out, command="generate"):  # free again once the first ends
        pass


def test_a_file_locked_after_its_removal_is_not_the_lock(tmp_path: Path) -> None:
    """A run that opened the lock file just before the holder removed it, and locked it just
    after, holds a file nobody else can see: it must notice and lock the new one."""
    out = tmp_path / "out.jsonl"
    first = OutputLock(out, command="generate").acquire()
    late = lock_path(out).open("a+", encoding="utf-8")  # opened while the first holds it
    first.release()  # removes the file, then unlocks
    fcntl.flock(late.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)  # succeeds: on the removed file
    assert not _same_file(late, lock_path(out))
    with OutputLock(out, command="generate") as second:  # the path's file, a new one
        assert second._handle is not None and _same_file(second._handle, lock_path(out))
        with pytest.raises(ConfigError, match="is in use by"):
            OutputLock(out, command="generate").acquire()
    late.close()


# -- one writer per file, not per name (issue 30) -----------------------------------------------


def _links(tmp_path: Path, out: Path) -> dict[str, Path]:
    """A symlink beside it, a hard link in another folder, and the existing path spellings."""
    (tmp_path / "other").mkdir()
    (tmp_path / "sub").mkdir()
    (tmp_path / "linked").symlink_to(tmp_path)
    symlink = tmp_path / "link.jsonl"
    symlink.symlink_to(out)
    hard = tmp_path / "other" / "hard.jsonl"
    os.link(out, hard)
    return {
        "symlink": symlink,
        "hard link": hard,
        "./": Path(os.path.relpath(out)),
        "sub/../": tmp_path / "sub" / ".." / "out.jsonl",
        "linked folder": tmp_path / "linked" / "out.jsonl",
    }


def test_a_link_to_a_locked_output_is_refused_like_its_name(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    out.write_text('{"id":"r1","status":"ok"}\n')
    names = _links(tmp_path, out)
    with OutputLock(out, command="generate"):
        for how, name in names.items():
            with pytest.raises(ConfigError, match="is in use by") as info:
                OutputLock(name, command="generate").acquire()
            assert str(info.value).startswith(f"{name} is in use by"), how
            assert "one run per output" in str(info.value)
        with pytest.raises(ConfigError) as hard:
            OutputLock(names["hard link"], command="generate").acquire()
        assert f"(pid {os.getpid()}) under another name" in str(hard.value)
    for name in names.values():  # free again once the first ends; nothing left behind
        with OutputLock(name, command="generate"):
            pass
    assert not [p for p in tmp_path.rglob(".*.lock")]


def test_an_output_created_after_the_lock_is_locked_by_its_inode(tmp_path: Path) -> None:
    """The run takes its lock before the output exists; once it creates it (``claim``), a hard
    link made to it then is refused."""
    out = tmp_path / "out.jsonl"
    with OutputLock(out, command="generate") as lock:
        out.touch()
        lock.claim()
        os.link(out, tmp_path / "hard.jsonl")
        with pytest.raises(ConfigError, match="under another name"):
            OutputLock(tmp_path / "hard.jsonl", command="generate").acquire()
    with OutputLock(tmp_path / "hard.jsonl", command="generate"):
        pass


def test_a_symlink_to_an_output_not_yet_written_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    (tmp_path / "link.jsonl").symlink_to(out)  # dangling: the first run has not written yet
    with (
        OutputLock(out, command="generate"),
        pytest.raises(ConfigError, match=r"is in use by `generate`"),
    ):
        OutputLock(tmp_path / "link.jsonl", command="generate").acquire()
    assert not out.exists()  # the lock creates no output


def test_a_run_through_a_link_is_refused_dry_run_too_and_buys_nothing(tmp_path: Path) -> None:
    """Issue 30: `--out link.jsonl`, a symlink or a hard link to a running job's out.jsonl, was
    not refused (dry run neither): 33 and 34 rows bought twice."""
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(30))
    out = tmp_path / "out.jsonl"
    out.write_text("")  # the first run's output exists
    (tmp_path / "link.jsonl").symlink_to(out)
    os.link(out, tmp_path / "hard.jsonl")
    gate = asyncio.Event()
    first = LedgerSender(seed=1, gate=gate)
    second = LedgerSender(seed=2)

    def run(sender: LedgerSender, where: Path, **more: Any) -> Any:
        return generate(
            tmp_path / "prompts.jsonl",
            policy=POLICY,
            out=where,
            send=sender,
            snapshot="bundled",
            sleep=no_sleep,
            max_tokens=50,
            budget_usd="0.03",
            concurrency=10,
            **more,
        )

    async def scenario() -> tuple[list[str], Any]:
        task = asyncio.ensure_future(run(first, out))
        while first.in_flight < 10:
            await asyncio.sleep(0)
        refused = []
        for name in ("link.jsonl", "hard.jsonl"):
            for more in ({}, {"dry_run": True}):
                with pytest.raises(ConfigError) as info:
                    await run(second, tmp_path / name, **more)
                refused.append(str(info.value))
        gate.set()
        return refused, await task

    refused, summary = asyncio.run(scenario())
    assert second.bodies == [] and summary.stop_reason == "done"
    assert len(refused) == 4 and all("is in use by" in m and "\n" not in m for m in refused)
    assert not (tmp_path / "hard.jsonl.ledger").exists()
    assert not (tmp_path / "link.jsonl.ledger").exists()


def test_the_cli_refuses_a_hard_link_to_a_running_output(tmp_path: Path) -> None:
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(5))
    out = tmp_path / "out.jsonl"
    out.write_text("")
    os.link(out, tmp_path / "hard.jsonl")
    env = {**os.environ, "OPENROUTER_API_KEY": PYTEST_OPENROUTER_KEY}
    with OutputLock(out, command="generate"):
        for extra in ([], ["--dry-run"]):
            run = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "openrouter_probe",
                    "generate",
                    str(tmp_path / "prompts.jsonl"),
                    "--policy",
                    str(POLICY),
                    "--out",
                    str(tmp_path / "hard.jsonl"),
                    "--snapshot",
                    "bundled",
                    "--budget-usd",
                    "1",
                    "--quiet",
                    *extra,
                ],
                env={**env, "OPENROUTER_BASE_URL": "http://127.0.0.1:9/api/v1"},
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert run.returncode == 1, run.stderr
            assert "Traceback" not in run.stderr
            lines = run.stderr.strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith(f"Error: {tmp_path / 'hard.jsonl'} is")
            assert f"pid {os.getpid()}) under another name" in lines[0]
            assert "--out" in lines[0]  # the CLI's words
    assert not (tmp_path / "hard.jsonl.ledger").exists()

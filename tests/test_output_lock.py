"""The output's lock (``run.lock``): one holder, nothing left behind, no race on its removal."""

from __future__ import annotations

import fcntl
from pathlib import Path

import pytest

from openrouter_probe.errors import ConfigError
from openrouter_probe.run.lock import OutputLock, _same_file, lock_path


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

"""The shared mechanisms: atomic writes, torn-tail repair, bounded waits (no test waits)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from openrouter_probe.api.backoff import Backoff
from openrouter_probe.files import (
    append_line,
    atomic_write_text,
    ensure_not_input,
    repair_torn_tail,
)


def test_atomic_write_replaces_and_leaves_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "a.yaml"
    target.write_text("old\n")
    os.chmod(target, 0o640)
    atomic_write_text(target, "new\n")
    assert target.read_text() == "new\n"
    assert oct(target.stat().st_mode & 0o777) == "0o640"
    assert [p.name for p in tmp_path.iterdir()] == ["a.yaml"]


def test_atomic_write_failure_keeps_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "snap.json"
    target.write_text("good\n")

    def boom(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", boom)
    with pytest.raises(OSError, match="No space"):
        atomic_write_text(target, "half")
    assert target.read_text() == "good\n"
    assert [p.name for p in tmp_path.iterdir()] == ["snap.json"]


def test_atomic_write_makes_its_folders_and_takes_them_back_on_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file written whole makes its missing folders (``0700`` for a file of secrets); a
    write that fails leaves nothing it made behind (review of 0.3)."""
    secret = atomic_write_text(tmp_path / "keys" / "deep" / "k.json", "{}", mode=0o600)
    assert oct((tmp_path / "keys").stat().st_mode & 0o777) == "0o700"
    assert oct(secret.stat().st_mode & 0o777) == "0o600"
    atomic_write_text(tmp_path / "out" / "x.yaml", "a: 1\n")
    assert (tmp_path / "out" / "x.yaml").read_text() == "a: 1\n"

    def boom(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", boom)
    with pytest.raises(OSError, match="No space"):
        atomic_write_text(tmp_path / "new" / "er" / "y.yaml", "half")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keys", "out"]


def test_ensure_not_input(tmp_path: Path) -> None:
    spec = tmp_path / "s.spec.yaml"
    spec.write_text("x")
    with pytest.raises(ValueError, match="is the input"):
        ensure_not_input(tmp_path / "." / "s.spec.yaml", spec)
    ensure_not_input(tmp_path / "s.yaml", spec)


def test_repair_torn_tail(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    assert repair_torn_tail(out) is None
    with open(out, "a", encoding="utf-8") as handle:
        append_line(handle, '{"id": 1}')
        append_line(handle, '{"id": 2}\n')
        handle.write('{"id": 3, "con')
    assert repair_torn_tail(out) == b'{"id": 3, "con'
    assert out.read_text() == '{"id": 1}\n{"id": 2}\n'
    assert repair_torn_tail(out) is None
    out.write_bytes(b'{"torn')
    assert repair_torn_tail(out) == b'{"torn'
    assert out.read_bytes() == b""


def test_backoff_grows_and_is_capped() -> None:
    b = Backoff(wait_initial_s=0.5, wait_max_s=4.0, wait_jitter_s=1.0, attempts=10, timeout_s=None)
    waits = [b.next_wait(attempt=n, rand=lambda: 0.0).wait_s for n in range(1, 6)]
    assert waits == [0.5, 1.0, 2.0, 4.0, 4.0]
    assert b.next_wait(attempt=1, rand=lambda: 1.0).wait_s == 1.5
    assert b.next_wait(attempt=4, rand=lambda: 1.0).wait_s == 4.0  # jitter never passes the cap


def test_backoff_honours_retry_after_within_cap() -> None:
    b = Backoff(wait_max_s=20.0, attempts=5, timeout_s=60.0)
    d = b.next_wait(attempt=1, retry_after_s=3.0)
    assert (d.wait_s, d.give_up) == (3.0, False)
    assert b.next_wait(attempt=1, retry_after_s=0.0).wait_s == 0.0


def test_backoff_refuses_a_long_retry_after_at_once() -> None:
    b = Backoff(wait_max_s=20.0, attempts=5, timeout_s=60.0)
    d = b.next_wait(attempt=1, retry_after_s=3600.0)
    assert d.give_up
    assert d.retry_after_s == 3600.0
    assert "60 min" in d.reason and "20 s" in d.reason


def test_backoff_respects_deadline_and_attempts() -> None:
    b = Backoff(wait_initial_s=8.0, wait_max_s=20.0, wait_jitter_s=0.0, attempts=3, timeout_s=10.0)
    assert b.next_wait(attempt=1, elapsed_s=7.0).wait_s == 3.0  # only the time left
    assert b.next_wait(attempt=1, retry_after_s=5.0, elapsed_s=7.0).give_up
    assert b.next_wait(attempt=1, elapsed_s=10.0).give_up
    assert b.next_wait(attempt=3).give_up
    assert "3 attempts" in b.next_wait(attempt=3).reason

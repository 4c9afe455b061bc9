"""``openrouter_probe.files``: atomic writes, an output never written over its input, torn-tail
repair."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

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


def test_a_torn_line_longer_than_a_read_block_is_cut_whole(tmp_path: Path) -> None:
    """The tail is read backwards in 64 KiB blocks: a torn line of 200 KB behind a whole one of
    100 KB (the last newline two blocks back) is cut to that newline, nothing more or less."""
    out = tmp_path / "out.jsonl"
    whole, torn = b"w" * 100_000 + b"\n", b"t" * 200_000
    out.write_bytes(b"a\n" + whole + torn)
    assert repair_torn_tail(out) == torn
    assert out.read_bytes() == b"a\n" + whole
    out.write_bytes(b"x" * 150_000)  # one torn line, no newline anywhere
    assert repair_torn_tail(out) == b"x" * 150_000 and out.read_bytes() == b""

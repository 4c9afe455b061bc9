"""Every way the project touches a file on disk: atomic writes (a temp file beside the target,
fsynced, then ``os.replace``d over it, so a failed write leaves the old file whole), and the
appended files of a run (its output, its spend journal: ``append_line``, ``repair_torn_tail``,
``iter_jsonl``), where a row is finished once its line is flushed.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from openrouter_probe.errors import ConfigError, ProbeError

__all__ = [
    "WriteFailed",
    "WriteFailures",
    "append_line",
    "atomic_write_bytes",
    "atomic_write_text",
    "ensure_not_input",
    "iter_jsonl",
    "json_error",
    "load_yaml",
    "open_append",
    "repair_torn_tail",
    "same_file",
    "write_error",
]


log = logging.getLogger(__name__)


def atomic_write_bytes(
    path: str | Path, data: bytes | Iterable[bytes], *, mode: int | None = None
) -> Path:
    """Write ``data`` (bytes, or pieces of them written as they come: never all held) to
    ``path`` atomically and return the path.

    The bytes go to a temp file in the same folder (so ``os.replace`` never crosses a file system),
    are flushed and fsynced, and only then replace the target; the folder is fsynced too where the
    platform allows it. On any failure the temp file is removed and the old target is untouched.
    An ``OSError`` propagates for the caller to translate into its own error. ``mode`` (e.g.
    ``0o600`` for a file of secrets) is the new file's mode from its first byte on; without it the
    replaced file's mode is kept (0644 for a new file). A missing parent folder is made (``-o
    out/x.yaml`` on a fresh tree; ``0700`` with ``mode``), and removed again when the write fails;
    a paid run's output, appended to and resumed, is never written here (``open_append``: a
    mistyped folder would start a new run).
    """
    target = Path(path)
    folder = target.parent if str(target.parent) else Path(".")
    made = _make_folders(folder, private=mode is not None)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=folder)
    except BaseException:
        _remove_folders(made)
        raise
    try:
        with os.fdopen(fd, "wb") as handle:
            if isinstance(data, bytes):
                handle.write(data)
            else:
                handle.writelines(data)
            handle.flush()
            os.fsync(handle.fileno())
        if mode is not None:
            os.chmod(tmp, mode)  # mkstemp created it 0600: never readable by others meanwhile
        else:
            with contextlib.suppress(OSError):
                # Keep the mode of the file being replaced (mkstemp creates 0600).
                os.chmod(tmp, os.stat(target).st_mode & 0o7777 if target.exists() else 0o644)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        _remove_folders(made)
        raise
    _fsync_dir(folder)
    return target


def _make_folders(folder: Path, *, private: bool) -> list[Path]:
    """Make ``folder`` and its missing parents (``0700`` for a file with a mode of its own, a
    file of secrets); return the ones made, deepest last."""
    missing: list[Path] = []
    for parent in (folder, *folder.parents):
        if parent.exists():
            break
        missing.append(parent)
    made: list[Path] = []
    try:
        for parent in reversed(missing):
            try:
                parent.mkdir(mode=0o700 if private else 0o777)
            except FileExistsError:  # made meanwhile by another writer: theirs
                continue
            made.append(parent)
    except BaseException:
        _remove_folders(made)
        raise
    return made


def _remove_folders(made: list[Path]) -> None:
    """Remove the folders a failed write made (nothing is left changed), deepest first."""
    for parent in reversed(made):
        with contextlib.suppress(OSError):
            parent.rmdir()


def atomic_write_text(path: str | Path, text: str, *, mode: int | None = None) -> Path:
    """Write ``text`` to ``path`` atomically, in UTF-8 (see :func:`atomic_write_bytes`)."""
    return atomic_write_bytes(path, text.encode("utf-8"), mode=mode)


def _fsync_dir(folder: Path) -> None:
    # A rename is durable only once its folder is synced; not every platform can open a folder.
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def same_file(a: str | Path, b: str | Path) -> bool:
    """Whether two paths name the same file (by resolved path, or by inode when both exist)."""
    pa, pb = Path(a), Path(b)
    if pa.exists() and pb.exists():
        return os.path.samefile(pa, pb)
    return pa.resolve() == pb.resolve()


def ensure_not_input(output: str | Path, *inputs: str | Path) -> None:
    """Raise ``ValueError`` when ``output`` is one of ``inputs``: a write must never replace its input.

    Callers translate the error into their own (``PolicyError``, a click usage error) with the fix.
    """
    for source in inputs:
        if same_file(output, source):
            raise ValueError(f"the output {output} is the input {source}")


class WriteFailed(ProbeError):
    """A file a run appends to could not take a line (a full disk, a read-only folder, a quota):
    what it guarded (a request about to leave) must not happen. The message is one line naming
    the file and the errno (``write_error``)."""


def write_error(path: str | Path, exc: OSError) -> str:
    """The one line that says a write to ``path`` failed: the file, the reason and the errno,
    and what to do (``ENOSPC``, ``EROFS``, ``EACCES``, ``EDQUOT``...)."""
    code = errno.errorcode.get(exc.errno or 0, str(exc.errno))
    return (
        f"{path}: cannot write ({exc.strerror or exc}, {code}): no new request was sent after it; "
        "make room on the disk (or make the folder writable), then rerun: it resumes"
    )


class WriteFailures:
    """The first failed write of a file a run appends to: ``line`` (``write_error``; ``None``
    while every write went through), and ``on_failure`` told it once (the run stops sending)."""

    def __init__(self, path: str | Path, on_failure: Callable[[str], None] | None = None) -> None:
        self.path = Path(path)
        self.line: str | None = None
        self.on_failure = on_failure

    def fail(self, exc: OSError) -> str:
        """Note a failed write (the first one only) and return its line."""
        if self.line is None:
            self.line = write_error(self.path, exc)
            if self.on_failure is not None:
                self.on_failure(self.line)
        return self.line

    def close(self, handle: IO[str] | None) -> None:
        """Close ``handle`` (if open): a failure to close is a failed write (data was lost)."""
        if handle is not None:
            try:
                handle.close()
            except OSError as exc:
                self.fail(exc)


def open_append(path: str | Path) -> IO[str]:
    """Open ``path`` for appending text (the output, the spend journal, the turns file): the one
    place they are opened, so that a test can give them a disk that fills."""
    return Path(path).open("a", encoding="utf-8")


def append_line(handle: IO[str], line: str) -> None:
    """Append one line (a newline is added) and flush it to the OS, so that a killed process never
    tears it silently (a power cut may still lose what the OS had not written)."""
    handle.write(line if line.endswith("\n") else line + "\n")
    handle.flush()


def repair_torn_tail(path: str | Path) -> bytes | None:
    """Cut a torn last line (no trailing newline) from an append-only file; return what was cut.

    A process killed mid-write can leave half a line at the end. Everything before the last newline
    is whole (each line is written and flushed in one piece); the torn rest is removed in place with
    ``truncate`` so that the next append starts on a fresh line. Returns ``None`` when nothing was
    torn or the file does not exist.
    """
    try:
        handle = open(path, "rb+")  # noqa: SIM115 (closed by the with below)
    except FileNotFoundError:
        return None
    with handle:
        size = os.fstat(handle.fileno()).st_size  # of the file opened, not of a name read before
        if size == 0:
            return None
        block = 65536
        pos = size
        tail = b""
        while pos > 0:
            start = max(0, pos - block)
            handle.seek(start)
            chunk = handle.read(pos - start)
            tail = chunk + tail
            if b"\n" in chunk:
                break
            pos = start
        if tail.endswith(b"\n"):
            return None
        cut = tail.rfind(b"\n") + 1  # 0 when the whole file is one torn line
        keep = size - (len(tail) - cut)
        torn = tail[cut:]
        handle.truncate(keep)
        handle.flush()
        os.fsync(handle.fileno())
    return torn


def iter_jsonl(
    path: str | Path, *, what: str, line: str, damaged: str
) -> Iterator[tuple[int, Any]]:
    """Yield ``(line number, value)`` for every non-blank line of an append-only JSONL file.

    The one reader of the files the project appends to. ``what`` names the file in errors ("the
    output file", "the spend journal"), ``line`` what each line is ("a spend journal line"), and
    ``damaged`` says what to do about a line that is not JSON.
    A file that cannot be opened, a line that is not UTF-8 text, and a line that is not JSON are
    each a one-line ``ConfigError`` naming the file and line, except a last line without a newline
    (a torn write that :func:`repair_torn_tail` has not cut yet), which is skipped with a warning.
    """
    p = Path(path)
    try:
        handle = p.open("rb")
    except OSError as exc:
        raise ConfigError(f"{p}: cannot read {what}: {exc.strerror}") from exc
    with handle:
        for lineno, raw in enumerate(handle, start=1):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise ConfigError(f"{p}:{lineno}: not UTF-8 text; {damaged}") from None
            if not text.strip():
                continue
            try:
                value = json.loads(text)
            except ValueError as exc:
                if not text.endswith("\n"):
                    log.warning("%s:%d: torn last line skipped (%d bytes)", p, lineno, len(raw))
                    continue
                raise ConfigError(
                    f"{p}:{lineno}: not {line} ({json_error(exc)}); {damaged}"
                ) from None
            yield lineno, value


def json_error(exc: ValueError) -> str:
    """Why a line is not JSON, with the column in that line (``json``'s own "line 2 column 1"
    counts lines inside the text, which reads wrong beside the file's line number)."""
    if isinstance(exc, json.JSONDecodeError):
        return f"{exc.msg.removesuffix(' at')} at column {exc.pos + 1}"
    return str(exc)


def load_yaml(text: str | bytes) -> Any:
    """``text`` parsed as YAML, safely, by libyaml's loader where there is one: ten times faster
    than the pure one on a policy. Its errors are ``yaml.YAMLError``."""
    import yaml

    return yaml.load(text, Loader=yaml.CSafeLoader if yaml.__with_libyaml__ else yaml.SafeLoader)

"""One writer per output: an exclusive lock held for a run's whole life, dry runs included.

Two runs on one ``--out`` would each keep their own cap and buy the same rows twice (what a user
sees, and why ``flock`` holds per machine only: docs/generate.md, "One writer per output" and
"Shards and machines"). The run takes ``fcntl.flock(LOCK_EX | LOCK_NB)`` on a hidden file beside
the output's real path (``out.jsonl`` -> ``.out.jsonl.lock``: a shell's ``out*`` never picks it
up), writes its PID, host, command and start time into it, and later locks the output's inode too
(``OutputLock.claim``: a hard link or symlink is refused like its own name). The holder removes the
file as it ends, still holding the lock; a run that opened the file before it was removed, and
locked it after, finds that the path no longer names the file it locked, and tries again.

A lock file rather than a lock on the spend journal: a dry run must take it too, and should create
nothing that counts money; and the holder's name never mixes with the journal's lines.
"""

from __future__ import annotations

import datetime
import errno
import json
import logging
import os
import socket
from pathlib import Path
from typing import IO, Any

from openrouter_probe.errors import ConfigError, Message

__all__ = ["LOCK_SUFFIX", "OutputLock", "lock_path", "running_holder"]

LOCK_SUFFIX = ".lock"

log = logging.getLogger(__name__)


def lock_path(out: str | Path) -> Path:
    """Return the lock file's path for the output ``out`` (``out.jsonl`` -> ``.out.jsonl.lock``)."""
    p = Path(out)
    return p.with_name(f".{p.name}{LOCK_SUFFIX}")


def running_holder(out: str | Path) -> str | None:
    """Who is writing ``out`` now, read without taking anything (a reader such as ``audit``
    must not refuse a run that starts beside it): the holder its lock file names while a
    ``flock`` is held on that file (``/proc/locks``: a reused PID of a killed run does not
    count); where the system lists no locks, while the PID it names is alive. ``None`` when no
    run holds it (no lock file, or one a killed run left). A lock file of another machine is
    said as one (this one cannot see its locks), not taken for a kill's."""
    path = lock_path(Path(out).resolve())
    try:
        with path.open(encoding="utf-8") as handle:
            text = handle.read()
            st = os.fstat(handle.fileno())
        info: Any = json.loads(text)
    except (OSError, ValueError):
        return None
    if not isinstance(info, dict):
        return None
    host = info.get("host")
    if host != (socket.gethostname() or "?"):
        return f"{_holder(text)} on another machine (whether it still runs cannot be seen here)"
    if os.path.exists("/proc/locks"):
        return None if _flock_pid(st) is None else _holder(text)
    pid = info.get("pid")
    if type(pid) is not int or pid <= 0:
        return None
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):
        return None
    except OSError:  # alive, another user's
        pass
    return _holder(text)


def _flock_pid(st: os.stat_result) -> str | None:
    """The PID holding a ``flock`` on the file ``st`` describes (``/proc/locks``, Linux), or
    ``None``."""
    dev = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    try:
        with open("/proc/locks", encoding="ascii", errors="replace") as handle:
            for line in handle:
                fields = line.split()
                if len(fields) > 5 and fields[1] == "FLOCK" and fields[5] == dev:
                    return fields[4]
    except OSError:
        pass
    return None


def _holder(text: str) -> str:
    try:
        info: Any = json.loads(text)
    except ValueError:
        info = None
    if not isinstance(info, dict):
        return "another process (it has not written its name yet)"
    return (
        f"`{info.get('command', '?')}` (pid {info.get('pid', '?')} on {info.get('host', '?')}, "
        f"since {info.get('since', '?')})"
    )


class OutputLock:
    """The exclusive lock on an output: ``with OutputLock(out, command="generate"):``."""

    def __init__(self, out: str | Path, *, command: str) -> None:
        self.out = Path(out)
        self.path = lock_path(self.out.resolve())
        self.command = command
        self._handle: IO[str] | None = None
        self._identity: int | None = None  # a descriptor of the output, locked (``claim``)

    def acquire(self) -> OutputLock:
        """Take the lock, or raise ``ConfigError`` naming the process that holds it."""
        for _ in range(100):
            handle = self._lock_once()
            if _same_file(handle, self.path):
                break
            handle.close()  # the holder removed it between our open and our lock: a new one
        else:  # pragma: no cover - a hundred holders in a row removed it under us
            raise ConfigError(f"{self.out}: its lock file keeps changing; try again")
        since = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        record = {
            "pid": os.getpid(),
            "host": socket.gethostname() or "?",
            "command": self.command,
            "since": since,
        }
        try:
            handle.seek(0)
            handle.truncate()
            handle.write(json.dumps(record) + "\n")
            handle.flush()
        except OSError as exc:  # a full disk: the lock holds all the same, unnamed
            log.warning("%s: cannot write the holder's name (%s)", self.path, exc.strerror)
        self._handle = handle
        try:
            self.claim()
        except BaseException:
            self.release()
            raise
        return self

    def claim(self) -> None:
        """Lock the output file itself (its inode), if it exists and is not locked yet: call it
        once the run has created the output. Raise ``ConfigError`` when another run holds it
        under another name (a hard link, a symlink's target)."""
        import fcntl

        if self._identity is not None:
            return
        try:
            fd = os.open(self.out, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return  # absent (nothing to link to yet), or unreadable: reading it says why
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            pid = _flock_pid(os.fstat(fd))
            holder = "another run" if pid is None else f"another run (pid {pid})"
            os.close(fd)
            raise ConfigError(
                Message(
                    "out-in-use-linked",
                    "{path:s} is in use by {holder:s} under another name (a link to the same "
                    "file): one run per output (two would each keep their own cap); wait for it "
                    "to end or stop it, or give this run another {out}",
                    path=str(self.out),
                    holder=str(holder),
                )
            ) from None
        self._identity = fd

    def _lock_once(self) -> IO[str]:
        import fcntl

        folder = self.path.parent
        try:
            handle = self.path.open("a+", encoding="utf-8")
        except OSError as exc:
            raise ConfigError(
                f"out={self.out}: cannot write in {folder if str(folder) else '.'} "
                f"({exc.strerror}); choose a folder you can write to"
            ) from exc
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.seek(0)
            holder = _holder(handle.read())
            handle.close()
            raise ConfigError(
                Message(
                    "out-in-use",
                    "{path:s} is in use by {holder:s}: one run per output (two would each keep "
                    "their own cap); wait for it to end or stop it, or give this run another {out}",
                    path=str(self.out),
                    holder=str(holder),
                )
            ) from None
        return handle

    def release(self) -> None:
        """Remove the lock file while holding it, then drop the lock (closing releases it)."""
        if self._identity is not None:
            os.close(self._identity)
            self._identity = None
        if self._handle is not None:
            try:
                if _same_file(self._handle, self.path):
                    self.path.unlink(missing_ok=True)
            except OSError as exc:  # a folder made read-only: harmless, never locked again
                log.warning(
                    "%s: cannot remove the lock file (%s, errno %s); it is not held, "
                    "remove it by hand",
                    self.path,
                    exc.strerror,
                    errno.errorcode.get(exc.errno or 0, exc.errno),
                )
            self._handle.close()
            self._handle = None

    def __enter__(self) -> OutputLock:
        return self.acquire()

    def __exit__(self, *exc_info: object) -> None:
        self.release()


def _same_file(handle: IO[str], path: Path) -> bool:
    """Whether ``path`` still names the file ``handle`` has open."""
    try:
        there = os.stat(path)
    except FileNotFoundError:
        return False
    here = os.fstat(handle.fileno())
    return (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino)

"""A write that fails stops the sending, and every exit path prints the summary.

The disk is simulated (no real disk is filled): the output and the spend journal are opened through
``files.open_append``, which these tests replace with files whose raw writes draw on one shared
budget of free bytes. Past it a write is short (a torn line, as a real full disk makes) and the next
raises ``ENOSPC`` (or ``EROFS``), under Python's own buffering, as the OS would.
"""

from __future__ import annotations

import asyncio
import errno
import io
import json
import logging
import os
import pathlib
from collections import Counter
from decimal import Decimal
from pathlib import Path
from typing import IO, Any

import pytest

from openrouter_probe.files import WriteFailed, open_append
from openrouter_probe.generation import generate
from openrouter_probe.run.money.journal import Journal
from openrouter_probe.run.money.replay import replay_journal
from openrouter_probe.run.report import render_result
from tests._generate import POLICY, LedgerSender, prompt_rows, records, write_prompts
from tests.conftest import ROOT


class Disk:
    """Free bytes shared by every file opened through it; ``sender`` is watched at the first
    failed write (what was in flight, what had been sent)."""

    def __init__(
        self, free: int, *, code: int = errno.ENOSPC, sender: Any = None, only: str = ""
    ) -> None:
        self.free = free
        self.only = only  # only the files whose names end so fill (the others have room)
        self.code = code
        self.sender = sender
        self.failures = 0
        self.in_flight_at_failure: int | None = None
        self.sent_at_failure: int | None = None

    def open(self, path: str | Path) -> IO[str]:
        if not str(path).endswith(self.only):
            return open_append(path)
        raw = _Raw(self, Path(path))
        return io.TextIOWrapper(io.BufferedWriter(raw), encoding="utf-8")


class _Raw(io.RawIOBase):
    def __init__(self, disk: Disk, path: Path) -> None:
        self.disk = disk
        self.file = open(path, "ab", buffering=0)  # noqa: SIM115 - closed in close()

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self.file.fileno()

    def write(self, data: Any) -> int:
        disk = self.disk
        n = min(len(data), disk.free)
        if n == 0:
            if disk.failures == 0 and disk.sender is not None:
                disk.in_flight_at_failure = disk.sender.in_flight
                disk.sent_at_failure = len(disk.sender.bodies)
            disk.failures += 1
            raise OSError(disk.code, os.strerror(disk.code))
        self.file.write(bytes(data[:n]))
        disk.free -= n
        return n

    def close(self) -> None:
        if not self.closed:
            self.file.close()
        super().close()


def _use(monkeypatch: pytest.MonkeyPatch, disk: Disk | None) -> None:
    opener = open_append if disk is None else disk.open
    monkeypatch.setattr("openrouter_probe.run.money.journal.open_append", opener)
    monkeypatch.setattr("openrouter_probe.run.books.output.open_append", opener)
    monkeypatch.setattr("openrouter_probe.run.books.turns.open_append", opener)


def _gen(tmp: Path, sender: LedgerSender, **options: Any) -> Any:
    return asyncio.run(
        generate(
            tmp / "prompts.jsonl",
            policy=POLICY,
            out=tmp / "out.jsonl",
            send=sender,
            snapshot="bundled",
            max_tokens=60,
            concurrency=16,
            **options,
        )
    )


@pytest.mark.parametrize(
    ("free", "code"),
    [(6_000, errno.ENOSPC), (25_000, errno.ENOSPC), (47_000, errno.ENOSPC), (9_000, errno.EROFS)],
)
def test_a_disk_that_fills_stops_the_sending_and_a_rerun_pays_only_what_was_in_flight(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    free: int,
    code: int,
) -> None:
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(300))
    sender = LedgerSender(seed=free)
    disk = Disk(free, code=code, sender=sender)
    _use(monkeypatch, disk)
    with caplog.at_level(logging.INFO, logger="openrouter_probe"):
        summary = _gen(tmp_path, sender, budget_usd="5")
    name = errno.errorcode[code]
    assert disk.failures >= 1 and disk.sent_at_failure is not None
    assert summary.stop_reason == "write-failed" and summary.exit_code == 1
    assert f"cannot write ({os.strerror(code)}, {name})" in summary.message
    assert (
        str(tmp_path / "out.jsonl") in summary.message
    )  # the path (the journal's or the output's)
    # no request left after the first failed write
    assert len(sender.bodies) == disk.sent_at_failure < 300
    said = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(said) == 1 and said[0].getMessage() == summary.message  # one line, the summary's
    assert "stopped: write-failed: " in " ".join(render_result(summary).split())
    in_flight = disk.in_flight_at_failure or 0

    # make room: the rerun resumes, and pays again only answers that were in flight (the one
    # whose record was being written when the disk filled included)
    _use(monkeypatch, None)
    again = _gen(tmp_path, sender, budget_usd="5")
    assert again.stop_reason == "done"
    done = [r["id"] for r in records(tmp_path / "out.jsonl")]
    assert sorted(done) == sorted(f"r{i}" for i in range(300))  # each row once, none torn
    paid = Counter(row for row, _, _ in sender.ledger)
    twice = sum(n - 1 for n in paid.values())
    assert twice <= in_flight + 1
    # the journal counts at least what the fake billed, and never above the cap
    journal = replay_journal(tmp_path / "out.jsonl.ledger", repair=False)
    assert sender.billed_usd <= journal.spent_usd <= Decimal(5)


@pytest.mark.parametrize("only", ["", ".turns", ".jsonl"])
def test_turn_by_turn_a_full_disk_stops_the_sending_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, only: str
) -> None:
    """``turns="all"``: the turns file fills too; a turn whose line cannot be kept stops the run
    (``WriteFailed``) instead of killing its worker; the rerun finishes every row."""
    rows = [
        {
            "id": f"r{i}",
            "messages": [
                {"role": "user", "content": f"question r{i} one"},
                {"role": "assistant", "content": "copied"},
                {"role": "user", "content": f"question r{i} two"},
                {"role": "assistant", "content": "copied"},
                {"role": "user", "content": f"question r{i} three"},
            ],
        }
        for i in range(60)
    ]
    write_prompts(tmp_path / "prompts.jsonl", rows)
    sender = LedgerSender(seed=4)
    disk = Disk(12_000 if not only else 4_000, sender=sender, only=only)
    _use(monkeypatch, disk)
    with caplog.at_level(logging.INFO, logger="openrouter_probe"):
        summary = _gen(tmp_path, sender, turns="all")
    assert summary.stop_reason == "write-failed" and "ENOSPC" in summary.message
    said = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert said == [summary.message]  # one line, the summary's
    if only:  # the file that filled
        name = {".turns": "out.jsonl.turns", ".jsonl": "out.jsonl"}[only]
        assert summary.message.startswith(f"{tmp_path / name}: cannot write")
    assert len(sender.bodies) == disk.sent_at_failure < 180
    in_flight = disk.in_flight_at_failure or 0
    _use(monkeypatch, None)
    again = _gen(tmp_path, sender, turns="all")
    assert again.stop_reason == "done"
    assert sorted(r["id"] for r in records(tmp_path / "out.jsonl")) == sorted(
        f"r{i}" for i in range(60)
    )
    paid = Counter(row for row, _, _ in sender.ledger)
    kept = {r["id"]: len(r["turns"]) for r in records(tmp_path / "out.jsonl")}
    assert all(paid[row] >= n for row, n in kept.items())
    # a row whose record was lost buys its (up to 3) turns again: only rows in flight
    assert sum(paid[row] - n for row, n in kept.items()) <= 3 * (in_flight + 1)


def test_a_rerun_while_still_full_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(20))
    sender = LedgerSender()
    _use(monkeypatch, Disk(0))
    with pytest.raises(WriteFailed) as info:
        _gen(tmp_path, sender)
    assert sender.bodies == []
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"{tmp_path / 'out.jsonl.ledger'}: cannot write (")
    assert "ENOSPC" in message and "rerun" in message


def test_a_lock_that_cannot_be_removed_keeps_the_finished_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A folder made read-only mid-run: every row finished, then unlinking the lock fails
    (EACCES): a warning, and the summary, not a traceback."""
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(30))
    real = pathlib.Path.unlink

    def unlink(self: Path, missing_ok: bool = False) -> None:
        if self.name.endswith(".lock"):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(self))
        real(self, missing_ok=missing_ok)

    monkeypatch.setattr(pathlib.Path, "unlink", unlink)
    with caplog.at_level(logging.INFO, logger="openrouter_probe"):
        summary = _gen(tmp_path, LedgerSender())
    assert summary.stop_reason == "done" and summary.ok + summary.truncated == 30
    warned = [r.getMessage() for r in caplog.records if "lock file" in r.getMessage()]
    assert len(warned) == 1 and "EACCES" in warned[0] and ".out.jsonl.lock" in warned[0]


@pytest.mark.parametrize("unknown", [False, True])
def test_a_settled_line_is_in_the_file_within_one_turn_of_the_loop(
    tmp_path: Path, unknown: bool
) -> None:
    """The docs say a ``settled`` line reaches the file within one turn of the loop: it reached
    it only with the next flushed line (a batch row recorded before a kill stayed at its worst
    case)."""
    path = tmp_path / "j.ledger"

    async def scenario() -> tuple[str, str]:
        with Journal(path) as ledger:
            number = ledger.sent('"r1"', Decimal("0.01"))
            if unknown:
                ledger.settle_unknown(number)
            else:
                ledger.settle(number, Decimal("0.002"))
            before = path.read_text()
            await asyncio.sleep(0)  # one turn of the loop
            return before, path.read_text()

    before, after = asyncio.run(scenario())
    assert '"settled":1' not in before
    last = json.loads(after.splitlines()[-1])
    assert last["settled"] == 1
    assert last.get("unknown") is True if unknown else last["cost_usd"] == "0.002"


@pytest.mark.parametrize(("free", "code"), [(8_000, errno.ENOSPC), (8_000, errno.EROFS), (0, 28)])
def test_the_cli_says_a_full_disk_in_one_line_and_prints_the_summary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, free: int, code: int
) -> None:
    """Issue 30: a disk that filled mid-run ended in 168 lines of stderr (ten "Exception in
    callback Journal.flush()", an unhandled OSError), no summary and a torn output line; a rerun
    while still full crashed the same way."""
    from click.testing import CliRunner

    from openrouter_probe.cli import cli
    from openrouter_probe.fake import serve

    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(120))
    _use(monkeypatch, Disk(free, code=code))
    args = [
        "generate",
        str(tmp_path / "prompts.jsonl"),
        "--policy",
        str(POLICY),
        "--out",
        str(tmp_path / "out.jsonl"),
        "--max-tokens",
        "60",
        "--budget-usd",
        "2",
        "--concurrency",
        "8",
        "--snapshot",
        "bundled",
        "--quiet",
    ]
    with serve(speed=0, seed=3) as fake:
        env = {"OPENROUTER_BASE_URL": fake.base_url, "OPENROUTER_API_KEY": "sk-fake"}
        result = CliRunner().invoke(cli, args, env=env)
        billed = len(fake.ledger.entries)
    name = errno.errorcode[code]
    assert result.exit_code == 1
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert "Traceback" not in result.stderr and "Exception in callback" not in result.stderr
    said = [line for line in result.stderr.splitlines() if name in line]
    assert len(said) == 1 and "out.jsonl" in said[0] and "rerun" in said[0], result.stderr
    if free == 0:  # still full from the start: the one line is the error, and nothing is sent
        assert said[0].startswith("Error: ") and billed == 0 and result.stdout == ""
    else:
        assert billed < 120
        stopped = " ".join(result.stdout[result.stdout.index("stopped: ") :].split())
        assert stopped == f"stopped: write-failed: {said[0]}"  # the summary, with the same line
        assert "spent" in result.stdout


@pytest.mark.parametrize("free", [900, 1_300, 1_700])
def test_a_batch_run_on_a_full_disk_submits_nothing_unjournaled_and_resumes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, free: int
) -> None:
    """``batch=True``: a batch whose plan line cannot be flushed is never submitted (its lines
    answer "not submitted"), the run ends (no hang) and the rerun finishes every row once."""
    import time

    import openrouter_probe as orp
    from openrouter_probe.fake import ManualClock

    here = ROOT / "examples" / "batch"
    snap = orp.load_snapshot(here / "kimi-k3.snapshot.json")
    policy = orp.compile_policy(orp.load_spec(here / "kimi-k3.spec.yaml"), snap).save(
        tmp_path / "kimi-k3.yaml"
    )
    clock = ManualClock(time.time())
    out = tmp_path / "out.jsonl"

    async def sleep(seconds: float) -> None:
        clock.advance(seconds)
        await asyncio.sleep(0)

    async def run(fake: Any) -> Any:
        return await asyncio.wait_for(
            orp.generate(
                here / "prompts.jsonl",
                policy=policy,
                out=out,
                api_key="sk-fake",
                base_url=fake.base_url,
                clock=clock.now,
                batch=True,
                sleep=sleep,
                max_tokens=256,
                budget_usd="5",
            ),
            timeout=60,
        )

    with orp.fake.serve(snap, speed=0, seed=7, clock=clock) as fake:
        _use(monkeypatch, Disk(free, only=".ledger"))
        first = asyncio.run(run(fake))
        billed_first = len(fake.ledger.entries)
        planned = '"batch_plan"' in (tmp_path / "out.jsonl.ledger").read_text()
        _use(monkeypatch, None)
        second = asyncio.run(run(fake))
        billed = Counter(e.tag for e in fake.ledger.entries)
        total = fake.ledger.total_usd
    assert first.stop_reason == "write-failed" and "out.jsonl.ledger" in first.message
    assert "ENOSPC" in first.message
    assert billed_first == 0 or planned  # nothing submitted without its plan in the journal
    assert second.stop_reason == "done"
    ids = [r["id"] for r in records(out) if r["status"] in ("ok", "truncated")]
    assert len(ids) == len(set(ids)) == 8
    assert len(fake.ledger.entries) == 8 and len(billed) >= 1
    journal = replay_journal(tmp_path / "out.jsonl.ledger", repair=False)
    assert total <= journal.spent_usd <= Decimal(5)


def test_adopting_records_on_a_full_disk_is_one_line_and_sends_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A journal deleted, the output's records adopted on the next start: on a full disk that
    start stops with the one line (it said "cannot write the spend journal" without the errno)."""
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(10))
    _gen(tmp_path, LedgerSender(), budget_usd="1")
    (tmp_path / "out.jsonl.ledger").unlink()
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(20))
    _use(monkeypatch, Disk(0))
    again = LedgerSender()
    with pytest.raises(WriteFailed) as info:
        _gen(tmp_path, again, budget_usd="1")
    assert again.bodies == []
    assert str(info.value).startswith(f"{tmp_path / 'out.jsonl.ledger'}: cannot write (")
    assert "ENOSPC" in str(info.value)

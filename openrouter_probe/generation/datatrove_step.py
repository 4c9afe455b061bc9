"""A datatrove ``PipelineStep`` that runs our job on its rank: ``pip install 'openrouter-probe[datatrove]'``.

datatrove places the work (its executors run one task a rank, its readers hand each rank its
Documents, a finished rank leaves a completion marker); ``GenerateStep`` answers the rank's
Documents with ``generate`` a chunk at a time into ``OUTPUT/rank-0000i.jsonl`` and yields one
Document per answered row. A rank that ends short raises (``RankIncomplete``, or on a signal
``RankInterrupted``) so datatrove leaves its task incomplete and a rerun resumes it from its
journal, paying nothing twice. ``docs/scale-out.md`` ("datatrove") says each rule and why.

Example (the local executor; ``examples/scale-out/datatrove_pipeline.py`` is the runnable one)::

    from datatrove.executor import LocalPipelineExecutor
    from datatrove.pipeline.readers import JsonlReader
    from openrouter_probe.generation.datatrove_step import GenerateStep

    LocalPipelineExecutor(
        [JsonlReader("prompts/", text_key="prompt"),
         GenerateStep(policy="policy.yaml", output="out/", budget_usd=2, key_file="keys.json")],
        tasks=4, logging_dir="out/logs",
    ).run()
"""

from __future__ import annotations

import asyncio
import gc
import itertools
import json
import logging
import os
import signal
import threading
from collections.abc import Iterable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

try:
    from datatrove.data import Document
    from datatrove.pipeline.base import PipelineStep
except ImportError:  # pragma: no cover - the message is the test
    raise ImportError(
        "GenerateStep needs datatrove: pip install 'openrouter-probe[datatrove]'"
    ) from None

from pydantic import SecretStr

from openrouter_probe.errors import ConfigError, Message, OptionError, ProbeError
from openrouter_probe.files import atomic_write_bytes
from openrouter_probe.rules.quantities import format_usd
from openrouter_probe.run.result import RunResult
from openrouter_probe.run.stop import StopReason

__all__ = ["GenerateStep", "RankIncomplete", "RankInterrupted", "rank_output"]

log = logging.getLogger(__name__)

#: The stops of a rank that did what it was asked: datatrove may mark it completed.
_COMPLETE = (StopReason.DONE, StopReason.TARGET)
#: The stops a signal made (SIGTERM, SIGINT): the process ends, the task incomplete.
_SIGNALLED = (StopReason.INTERRUPTED, StopReason.CANCELLED)


class RankIncomplete(ProbeError):
    """A rank ended short of its rows (its ``Message`` says what stopped it and what to raise):
    raised at the end of the step, after it yielded what it answered, so datatrove leaves the
    task incomplete and a rerun resumes it from its journal."""


class RankInterrupted(SystemExit):
    """A signal (SIGTERM from Slurm or datatrove's pool, SIGINT) stopped the rank: the requests
    in flight drained or journalled, the process exits (``code``: 130) with the task
    incomplete. A ``SystemExit``: a pool worker ends rather than wait for work that never
    comes; ``message`` says what stopped it."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(code)
        self.message = message

    def __reduce__(self) -> Any:  # pickled whole (a Ray task's error)
        return (RankInterrupted, (self.code, self.message))


def rank_output(output: str | Path, rank: int) -> Path:
    """The output file of ``rank`` in the folder ``output`` (its journal beside it)."""
    return Path(output) / f"rank-{rank:05d}.jsonl"


def _row(doc: Any) -> dict[str, Any]:
    meta = doc.metadata or {}
    row: dict[str, Any] = {"id": str(doc.id)}
    if isinstance(meta.get("messages"), list):
        row["messages"] = meta["messages"]
    else:
        row["prompt"] = doc.text
    for key in ("dataset", "max_tokens", "temperature", "tools"):
        if meta.get(key) is not None:
            row[key] = meta[key]
    return row


def _write_rows(path: Path, docs: Iterable[Any]) -> int:
    """A chunk of the rank's rows as datatrove hands them, one line each as they come (never
    all held), then put in place of the chunk before at once (``files.atomic_write_bytes``; the
    same on a rerun: the ids resume); their count. No rows: the file is left as it was."""
    rows = iter(docs)
    first = next(rows, None)
    if first is None:
        return 0
    count = 0

    def lines() -> Iterator[bytes]:
        nonlocal count
        for doc in itertools.chain([first], rows):
            count += 1
            yield (json.dumps(_row(doc), ensure_ascii=False) + "\n").encode()

    atomic_write_bytes(path, lines())
    return count


class _Signals:
    """The signals a rank got, whoever handled them: each chunk's run makes SIGTERM and SIGINT
    its graceful stop (its loop's handlers, noted here too); outside the runs SIGTERM is noted
    here, and the rank stops once the chunk's answers are yielded. A rank that got one ends its
    process, whatever stopped it first. The handler it replaced is put back at the end. In the
    main thread only (elsewhere no signal handler can be set)."""

    def __init__(self) -> None:
        self.signalled = False
        self._main = threading.current_thread() is threading.main_thread()
        self._before: Any = signal.getsignal(signal.SIGTERM) if self._main else None

    def _note(self, signum: int, frame: Any) -> None:
        log.warning("SIGTERM between two chunks: the rank stops after this chunk's answers")
        self.signalled = True

    def arm(self) -> None:
        if self._main:
            signal.signal(signal.SIGTERM, self._note)

    def run(self, coroutine: Any) -> Any:
        """``coroutine`` run to its end in a loop of its own that notes each signal its
        handlers take (``asyncio.run``'s, but for that)."""
        signals = self

        class _Loop(asyncio.SelectorEventLoop):
            def add_signal_handler(  # type: ignore[override]
                self, sig: int, callback: Any, *args: Any
            ) -> None:
                def noted(*given: Any) -> None:
                    signals.signalled = True
                    callback(*given)

                super().add_signal_handler(sig, noted, *args)

        with asyncio.Runner(loop_factory=_Loop) as runner:
            result = runner.run(coroutine)
        self.arm()  # the run's own handlers went with its loop
        return result

    def __enter__(self) -> _Signals:
        self.arm()
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._main:
            signal.signal(signal.SIGTERM, self._before or signal.SIG_DFL)


class _Answers:
    """The rank's output read as it grows: each call to ``new`` yields the records written since
    the last (the first: every record, those of earlier runs too), so each is read once and
    none is held."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0

    def new(self) -> Iterator[dict[str, Any]]:
        if not self.path.exists():
            return
        with self.path.open("rb") as handle:
            handle.seek(self.offset)
            for line in handle:
                if not line.endswith(b"\n"):
                    return  # a torn last line (a crash): the next run cuts it
                self.offset += len(line)
                if line.strip():
                    yield json.loads(line)


def _document(record: dict[str, Any], out: Path) -> Any:
    return Document(
        text=str(record.get("content") or ""),
        id=str(record["id"]),
        metadata={
            "status": record.get("status"),
            "provider": record.get("provider"),
            "cost_usd": record.get("cost_usd"),
            "finish_reason": record.get("finish_reason"),
            "rank_output": str(out),
        },
    )


class GenerateStep(PipelineStep):  # type: ignore[misc]  # datatrove is untyped
    """Answer each rank's Documents with ``generate`` into ``output`` (a folder), per rank.

    ``policy``: the compiled policy; ``budget_usd``: the job's, split equally between ranks
    (each also capped by its key's limit); ``key_file``: ``keys create --shards N``'s file (N
    the executor's ``tasks``: one key a rank, held by OpenRouter to its limit), each key
    disabled when its rank completes (``keep_keys=True``: kept; disabling needs
    ``OPENROUTER_MANAGEMENT_KEY`` in the ranks' environment); ``api_key_env``: the name of the
    variable holding the key (default ``OPENROUTER_API_KEY``; an ``api_key=`` given anyway is
    kept out of ``executor.json``); ``chunk_rows``: rows a chunk (16 times ``concurrency``,
    2,000 at least); other keyword arguments go to ``generate`` as they are (``max_tokens=``,
    ``concurrency=``, ``snapshot=``...), but ``pilot=`` (each chunk would be a pilot of its own:
    run the pilot with ``generate`` first).
    """

    name = "openrouter-probe generate"
    type = "🤖 - GENERATE"

    def __init__(
        self,
        *,
        policy: str | Path,
        output: str | Path,
        budget_usd: float | str | Decimal | None = None,
        key_file: str | Path | None = None,
        api_key_env: str | None = None,
        keep_keys: bool = False,
        chunk_rows: int | None = None,
        **generate_options: Any,
    ) -> None:
        super().__init__()
        self.policy = str(policy)
        self.output = str(output)
        self.budget_usd = None if budget_usd is None else str(budget_usd)
        self.key_file = None if key_file is None else str(key_file)
        self.api_key_env = api_key_env
        self.keep_keys = keep_keys
        if chunk_rows is not None and (isinstance(chunk_rows, bool) or chunk_rows < 1):
            raise ConfigError(
                Message(
                    "step-chunk-rows",
                    "GenerateStep(chunk_rows={given:s}): give a whole number of rows above 0",
                    given=repr(chunk_rows),
                )
            )
        self.chunk_rows = chunk_rows
        if "pilot" in generate_options:  # a chunk a pilot, the rank never complete
            raise OptionError(
                "GenerateStep({pilot=}): a step runs no pilot (each chunk of a rank would be a "
                "pilot of its own and the rank would end incomplete): run the pilot with "
                "generate first (generate(prompts, policy=..., out=..., {pilot=N})), then give "
                "the step the {max_tokens} its report says, without {pilot}",
                pilot=generate_options["pilot"],
                max_tokens=generate_options.get("max_tokens"),
            )
        given = generate_options.pop("api_key", None)
        given_ways = [w for w, v in (("api_key", given), ("key_file", key_file),
                                     ("api_key_env", api_key_env)) if v is not None]  # fmt: skip
        if len(given_ways) > 1:
            raise ConfigError(
                Message(
                    "step-keys",
                    "GenerateStep: {ways:s} each give the key: give one",
                    ways=" and ".join(given_ways),
                )
            )
        #: kept for the ranks (pickled with the step) but never in ``executor.json`` (datatrove
        #: dumps the step's attributes, each by its ``str``) nor any repr: shown masked
        self._api_key = None if given is None else SecretStr(str(given))
        self.generate_options = generate_options

    def _budget(self, rank: int, world_size: int) -> Decimal | None:
        if self.budget_usd is None:
            return None
        from openrouter_probe.generation.keyfile import split_budget

        return split_budget(Decimal(self.budget_usd), world_size)[rank]

    def _api_key_of(self) -> str | None:
        if self._api_key is not None:
            return self._api_key.get_secret_value()
        if self.api_key_env is None:
            return None  # generate reads OPENROUTER_API_KEY
        value = os.environ.get(self.api_key_env, "")
        if not value.strip():
            raise ConfigError(
                Message(
                    "step-key-env",
                    "GenerateStep(api_key_env={quoted:s}): {name:s} is not set in this rank's "
                    "environment: set it where the ranks run (or give key_file=)",
                    quoted=repr(self.api_key_env),
                    name=self.api_key_env,
                )
            )
        return value

    def run(
        self, data: Iterator[Any] | None = None, rank: int = 0, world_size: int = 1
    ) -> Iterator[Any]:
        from openrouter_probe.generation.keyfile import read_key_file, shard_key

        out = rank_output(self.output, rank)
        # beside, not among, the outputs; one source for the output, each chunk's rows in turn
        prompts = out.parent / "prompts" / out.name
        prompts.parent.mkdir(parents=True, exist_ok=True)
        key = None
        if self.key_file is not None:
            key = shard_key(read_key_file(self.key_file), (rank, world_size))
        docs = iter(data or ())
        answers = _Answers(out)
        rows = answered = 0
        with _Signals() as signals:
            while True:
                given = _write_rows(prompts, itertools.islice(docs, self._chunk_rows()))
                if not given:
                    break
                rows += given
                self.stat_update("rows_in", value=given)
                stop, why = StopReason.INTERRUPTED, "stopped by SIGTERM between two chunks"
                if not signals.signalled:
                    summary = self._generate(prompts, out, rank, world_size, key, signals)
                    stop, why = StopReason(summary.stop_reason), summary.message
                    for record in answers.new():
                        status = record.get("status")
                        if status not in ("ok", "truncated"):
                            self.stat_update(f"rows_{status}")
                            continue
                        self.stat_update("rows_answered")
                        answered += 1
                        yield _document(record, out)
                if signals.signalled and stop in _COMPLETE:
                    stop, why = StopReason.INTERRUPTED, "stopped by a signal after this chunk"
                if stop not in _COMPLETE:
                    unread = sum(1 for _ in docs)  # counted for the message, never held or sent
                    self.stat_update("rows_in", value=unread)
                    self._stopped_short(
                        stop, why, rank, world_size, answered, rows + unread, signals.signalled
                    )
            if signals.signalled:  # while the last rows were read: the process ends all the same
                why = "stopped by SIGTERM after its last chunk"
                self._stopped_short(StopReason.INTERRUPTED, why, rank, world_size, answered, rows)
        if key is not None and not self.keep_keys:  # every row answered: it spends no more
            self._close_key(key, rank, world_size)

    def _chunk_rows(self) -> int:
        """Rows a chunk: ``chunk_rows``, or 16 times the requests in flight (2,000 at least)."""
        if self.chunk_rows is not None:
            return self.chunk_rows
        return max(2000, 16 * int(self.generate_options.get("concurrency", 256)))

    def _generate(
        self, prompts: Path, out: Path, rank: int, world_size: int, key: Any, signals: _Signals
    ) -> RunResult:
        """One chunk's run into the rank's output (its cap, across the chunks, the rank's)."""
        from openrouter_probe.generation import generate
        from openrouter_probe.generation.keyfile import name_spent_key

        header = {"shard": f"{rank}/{world_size}", **({"key_hash": key.hash} if key else {})}
        options = {"handle_signals": True, **self.generate_options}
        summary: RunResult = signals.run(
            generate(
                prompts,
                policy=self.policy,
                out=out,
                budget_usd=self._budget(rank, world_size),
                api_key=key.secret if key is not None else self._api_key_of(),
                journal_header=header,
                **options,
            )
        )
        # the run's objects that hold each other (its books, client, loop) go now, not at the
        # next full collection: a rank of many chunks would hold several runs' worth at once
        gc.collect()
        if self.key_file is not None:
            summary = name_spent_key(summary, self.key_file, (rank, world_size))
        self.stat_update("requests", value=summary.requests)
        self.stat_update("spent_micro_usd", value=int(summary.spent_usd * 1_000_000))
        return summary

    def _stopped_short(
        self,
        stop: StopReason,
        why: str,
        rank: int,
        world_size: int,
        answered: int,
        rows: int,
        signalled: bool = False,
    ) -> None:
        """Raise for a rank that ended short: what stopped it, what to raise, and that the
        rerun resumes it (its journal; the task incomplete). A rank that got SIGTERM ends its
        process (``RankInterrupted``) whatever stopped it: datatrove's pool, terminating,
        waits for its workers to exit, and one that went back for work would wait for ever.
        Not on Ray, whose pool never ends the rank's process: there it raises
        ``RankIncomplete``, which the Ray task gets (its process ending, the task would
        wait for ever)."""
        message = Message(
            "rank-incomplete",
            "rank {rank:d}/{ranks:d} ended short of its rows ({stop:s}: {why:s}): {answered:,} "
            "of {rows:,} answered; {advice:s}; datatrove leaves the task incomplete: rerun the "
            "same pipeline to resume it (what was answered is not paid again)",
            rank=rank,
            ranks=world_size,
            stop=str(stop),
            why=why or "no message",
            answered=answered,
            rows=rows,
            advice=self._advice(stop, rank, world_size),
        )
        log.error("%s", message)
        if (stop in _SIGNALLED or signalled) and os.environ.get("DATATROVE_EXECUTOR") != "RAY":
            raise RankInterrupted(StopReason.INTERRUPTED.exit_code, message)
        raise RankIncomplete(message)

    def _advice(self, stop: StopReason, rank: int, world_size: int) -> Message:
        if stop == StopReason.BUDGET:
            share = self._budget(rank, world_size)
            return Message(
                "rank-raise-budget",
                "raise {budget_usd} (the job's {job:s}: this rank's share is {share:s})",
                job=format_usd(Decimal(str(self.budget_usd))),
                share="none" if share is None else format_usd(share),
            )
        if stop == StopReason.KEY_LIMIT:
            return Message(
                "rank-raise-key-limit",
                "raise the key's limit (a management key's PATCH /api/v1/keys/HASH with a "
                "larger `limit`)",
            )
        if stop == StopReason.CREDITS:
            return Message("rank-add-credits", "add credits to the account")
        if stop in _SIGNALLED:
            return Message("rank-signalled", "the requests in flight were drained or journalled")
        return Message("rank-see-stop", "see the stop above")

    def _close_key(self, key: Any, rank: int, world_size: int) -> None:
        """Disable the key of a rank that answered all its rows (it can spend no more); a key
        that cannot be disabled is said, never silent: it stays live until revoked."""
        from openrouter_probe.api.keys import KeysClient
        from openrouter_probe.errors import APIError

        try:
            with KeysClient(base_url=self.generate_options.get("base_url")) as client:
                client.update(key.hash, disabled=True)
        except (APIError, ConfigError) as exc:
            log.warning(
                "%s",
                Message(
                    "rank-key-live",
                    "rank {rank:d}/{ranks:d} completed, but its key {name:s} (hash {hash:s}) "
                    "stays live: {why:s}; revoke the job's keys when it is done",
                    rank=rank,
                    ranks=world_size,
                    name=key.name,
                    hash=key.hash[:12],
                    why=str(exc),
                ),
            )
            return
        self.stat_update("keys_disabled")
        log.info("rank %d/%d completed: its key %s disabled", rank, world_size, key.name)

"""The one way to run a paid job: ``generate`` and ``verify`` both start their requests here.

``JobOptions.resolve`` checks what every paid run takes (the output, the budget, the concurrency,
the key and the base URL) before anything is read or sent. ``open_run`` opens the output for a run:
it reads what the output and its spend journal already record (what is finished, what was spent,
what was in flight when a run was killed). ``PaidRun.run`` then sends the rows: it checks the key's
limit, builds the cap over everything spent so far, opens the output and the journal for appending,
the transport and the progress bar, and runs the worker pool with its signals. A guarantee added
here (the journal, a lock on the output, the accounting of unknown costs) holds for both commands.

Example::

    options = JobOptions.resolve(command="generate", out="out.jsonl", inputs=["prompts.jsonl"],
                                 budget_usd=100, concurrency=256)
    with open_run(options) as paid:
        todo = [row for row in rows if row.id not in paid.state.finished]
        summary = paid.new_summary(policy="policies/kimi-k2.5.yaml", model=MODEL, ...)
        summary = await paid.run(todo, settings=settings, prices=prices, summary=summary)
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

from openrouter_probe.api.backoff import Backoff
from openrouter_probe.api.client import DEFAULT_BASE_URL
from openrouter_probe.api.schema import Endpoint
from openrouter_probe.errors import APIConnectionError, APIError, ConfigError, NoRouteError
from openrouter_probe.files import ensure_not_input
from openrouter_probe.rules.quantities import parse_decimal, whole_number
from openrouter_probe.run.ledger import Ledger, LedgerReplay, ledger_path, replay_ledger
from openrouter_probe.run.output import OutputLog, ResumeState, load_resume_state
from openrouter_probe.run.rows import PromptRow
from openrouter_probe.run.runner import Progress, Run, RunSettings, Sender
from openrouter_probe.run.spend import Prices, SpendCap
from openrouter_probe.run.summary import RunSummary

__all__ = ["JobOptions", "PaidRun", "endpoints_now", "open_run"]

log = logging.getLogger(__name__)

Sleep = Callable[[float], Awaitable[None]]


@dataclass(frozen=True)
class JobOptions:
    """What every paid run takes: where it writes, what it may spend, how it sends.

    Build it with :meth:`resolve`, which checks each value and names the option in its error.
    ``send`` and ``sleep`` replace the HTTP transport and the retry waits (tests).
    """

    command: str
    out: Path
    budget_usd: Decimal | None
    concurrency: int
    api_key: str
    base_url: str
    attempts: int = 6
    read_timeout_s: float = 300.0
    drain_timeout_s: float = 60.0
    handle_signals: bool = False
    progress: bool | Progress = False
    send: Sender | None = None
    sleep: Sleep = asyncio.sleep
    backoff: Backoff | None = None

    @property
    def journal(self) -> Path:
        """The spend journal beside the output (``out.jsonl.ledger``)."""
        return ledger_path(self.out)

    @classmethod
    def resolve(
        cls,
        *,
        command: str,
        out: str | Path,
        inputs: Sequence[str | Path] = (),
        budget_usd: float | int | str | Decimal | None = None,
        concurrency: int = 256,
        api_key: str | None = None,
        base_url: str | None = None,
        need_key: bool = True,
        key_hint: str = "",
        **rest: Any,
    ) -> JobOptions:
        """Check the options of a paid run and resolve the key and base URL from the environment.

        ``inputs`` are the files the run reads: neither the output nor its journal may be one of
        them. Without a key (``OPENROUTER_API_KEY``) and ``need_key``, the error says how to set
        one (``key_hint`` adds the command's own way out, such as ``--dry-run``).
        """
        concurrency = whole_number(concurrency, "--concurrency")
        budget = None if budget_usd is None else parse_decimal(budget_usd, "--budget-usd")
        if budget is not None and budget <= 0:
            raise ConfigError(f"--budget-usd {budget_usd}: a positive amount of USD, e.g. 100")
        target = Path(out)
        try:
            ensure_not_input(target, *inputs)
            ensure_not_input(ledger_path(target), *inputs)
        except ValueError as exc:
            raise ConfigError(f"--out: {exc}; name another file") from exc
        key = (api_key if api_key is not None else os.environ.get("OPENROUTER_API_KEY", "")).strip()
        url = (base_url or os.environ.get("OPENROUTER_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")
        if not key and need_key:
            raise ConfigError(
                f"{command} needs an API key: export OPENROUTER_API_KEY=... "
                f"(create one at https://openrouter.ai/settings/keys){key_hint}"
            )
        return cls(
            command=command,
            out=target,
            budget_usd=budget,
            concurrency=concurrency,
            api_key=key,
            base_url=url,
            **rest,
        )


def endpoints_now(
    model: str, snapshot: Any, *, api_key: str, base_url: str
) -> tuple[list[Endpoint], Any]:
    """The model's endpoints now: from ``snapshot`` (a Snapshot, a path or "bundled") or live."""
    from openrouter_probe.api.client import Client
    from openrouter_probe.errors import SnapshotError
    from openrouter_probe.rules.snapshot import (
        Snapshot,
        bundled_snapshot,
        load_snapshot,
        model_mismatch,
    )

    if isinstance(snapshot, Snapshot):
        snap = snapshot
    elif snapshot == "bundled":
        snap = bundled_snapshot(model)
    elif snapshot is not None:
        snap = load_snapshot(snapshot)
    else:
        try:
            with Client(api_key=api_key, base_url=base_url) as client:
                data = client.endpoints(model)
        except APIError as exc:
            if isinstance(exc, NoRouteError):
                raise
            # The client's own advice names --offline, which the paid commands do not have.
            reason = "no connection" if isinstance(exc, APIConnectionError) else str(exc)
            raise APIError(
                f"cannot read {model}'s endpoints from {base_url} to check the policy and price "
                f"the cap ({reason}); check the network or OPENROUTER_BASE_URL, or pass "
                "--snapshot bundled|PATH (snapshot= in Python) to use a saved one",
                url=exc.url,
            ) from exc
        snap = Snapshot.from_endpoints(
            data, model=model, source="api", origin=f"{base_url}/models/{model}/endpoints"
        )
    mismatch = model_mismatch(
        snap, model, source=str(snapshot) if isinstance(snapshot, str | Path) else None
    )
    if mismatch:
        raise SnapshotError(mismatch)
    return list(snap.endpoints), snap


def _key_warning(options: JobOptions) -> str | None:
    from openrouter_probe.api.client import Client

    budget = options.budget_usd
    try:
        with Client(
            api_key=options.api_key, base_url=options.base_url, attempts=2, retry_timeout=10
        ) as client:
            info = client.key()
    except APIError as exc:
        return f"could not read the key's limit (GET /key): {exc}"
    remaining = info.limit_remaining
    if budget is not None and remaining is not None and Decimal(str(remaining)) < budget:
        return (
            f"the key's remaining limit is ${remaining:,.2f}, below the ${budget:,.2f} budget: "
            "the run will stop with 402 before the budget is spent"
        )
    return None


class PaidRun:
    """An output opened for a run: what it already records, and ``run`` to send more rows."""

    def __init__(self, options: JobOptions, state: ResumeState, replay: LedgerReplay) -> None:
        self.options = options
        self.state = state
        self.replay = replay

    @property
    def spent_before_usd(self) -> Decimal:
        """What the output's records and its journal hold as spent before this run."""
        return self.state.spent_usd + self.replay.extra_usd

    def new_summary(self, **fields: Any) -> RunSummary:
        """A ``RunSummary`` for this run, with what the output held before filled in."""
        state, replay = self.state, self.replay
        return RunSummary(
            out=str(self.options.out),
            spent_before_usd=self.spent_before_usd,
            possibly_billed_before_usd=state.possibly_billed_usd + replay.possibly_billed_usd,
            cancelled_before_usd=state.possibly_billed_usd,
            killed_in_flight_before=replay.in_flight,
            unrecorded_before_usd=replay.unrecorded_usd,
            ledger=str(self.options.journal),
            budget_usd=self.options.budget_usd,
            **fields,
        )

    async def _warn(self, summary: RunSummary) -> None:
        """Say before sending what could surprise: the key's limit below the budget, no cap."""
        if self.options.send is None:
            warning = await asyncio.to_thread(_key_warning, self.options)
            if warning:
                summary.warnings.append(warning)
        if self.options.budget_usd is None:
            summary.warnings.append(
                "no --budget-usd: nothing caps this run's spend (--dry-run shows the worst case)"
            )
        for text in summary.warnings:
            log.warning("%s", text)

    async def run(
        self,
        rows: list[PromptRow],
        *,
        settings: RunSettings,
        prices: Prices,
        summary: RunSummary,
        header: dict[str, Any] | None = None,
        prices_for: Callable[[PromptRow], Prices] | None = None,
    ) -> RunSummary:
        """Send ``rows`` under one cap over everything the output has spent; return the summary.

        Warns when the key's limit is below the budget or when nothing caps the spend; stops at
        once (``budget``) when the output already spent the budget. ``header`` goes into the
        journal's run line.
        """
        options = self.options
        budget = options.budget_usd
        if not rows and not self.state.exists:
            return summary  # nothing to send, nothing recorded: create no empty output and journal
        await self._warn(summary)
        spent_before = self.spent_before_usd
        if budget is not None and spent_before >= budget:
            summary.stop_reason = "budget"
            summary.message = (
                f"{options.out} and {options.journal.name} already record ${spent_before:.6f} "
                f"spent of the ${budget} cap"
            )
            summary.not_sent = len(rows)
            return summary
        cap = SpendCap(budget, spent_usd=spent_before)
        bar = _progress_bar(options.progress, len(rows))
        journal_header = {
            "command": options.command,
            "out": options.out.name,
            "budget_usd": budget,
            **(header or {}),
        }
        with (
            OutputLog(options.out) as output,
            Ledger(options.journal, header=journal_header) as ledger,
            _showing(bar),
        ):

            def make(sender: Sender) -> Run:
                return Run(
                    rows,
                    settings=settings,
                    cap=cap,
                    prices=prices,
                    prices_for=prices_for,
                    output=output,
                    send=sender,
                    summary=summary,
                    tokens_before=self.state.output_tokens,
                    sleep=options.sleep,
                    progress=bar,
                    ledger=ledger,
                )

            if options.send is not None:
                return await _run(make(options.send), options.handle_signals)
            from openrouter_probe.run.transport import HttpTransport

            async with HttpTransport(
                base_url=options.base_url,
                api_key=options.api_key,
                limit=options.concurrency,
                read_timeout_s=options.read_timeout_s,
            ) as transport:
                return await _run(make(transport.send), options.handle_signals)


@contextlib.contextmanager
def open_run(options: JobOptions, *, redo_failed: bool = False) -> Iterator[PaidRun]:
    """Open ``options.out`` for a run: read what it and its journal record (a torn last line of
    either is cut first), and yield the ``PaidRun`` that sends the rest."""
    state = load_resume_state(options.out, redo_failed=redo_failed)
    # What the journal holds that no record does (requests in flight at a SIGKILL): spent too.
    replay = replay_ledger(options.journal, accounted=state.accounted, output_exists=state.exists)
    yield PaidRun(options, state, replay)


def _progress_bar(progress: bool | Progress, rows: int) -> Progress | None:
    if progress is True and rows:
        from openrouter_probe.run.progress import RichProgress

        return RichProgress(rows)
    return None if isinstance(progress, bool) else progress


@contextlib.contextmanager
def _showing(bar: Any) -> Iterator[None]:
    if bar is None or not hasattr(bar, "__enter__"):
        yield
        return
    with bar:
        yield


async def _run(run: Run, handle_signals: bool) -> RunSummary:
    remove = run.install_signal_handlers() if handle_signals else None
    known = len(run.summary.warnings)
    try:
        summary = await run.run()
    finally:
        if remove is not None:
            remove()
    for text in summary.warnings[known:]:
        log.warning("%s", text)
    return summary

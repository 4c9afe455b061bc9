"""What ``generate --batch`` sends, and how: the settings of the batch sender, a row's custom id,
a line's body, what one result line comes to, and the events the sender reports.

The batch sender (``run.send.batch_sender``) stands on these; the money of every line is the books'
(``run.books.books``: the reservation before the plan, the settlement from the batch's ``usage.cost``,
``allocate`` for each row's share). The sender holds no books: it reports each step of a plan
as a ``BatchEvent`` (``Planned`` before the POST, ``Submitted``, ``Closed``; ``Held`` for an
earlier run's open batch taken up, ``Claimed`` for a request that claims one of its lines,
``Released`` and ``SettledEarlier`` at its close, ``Said`` for what the run should say) to the
sink the run gives it, which journals them (``run.books.batch_books``) before the sender goes on.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

from openrouter_probe.errors import ConfigError, Message
from openrouter_probe.run.money.spend import Prices
from openrouter_probe.run.send.failure import Failure
from openrouter_probe.run.send.transport import Answer, parse_body

if TYPE_CHECKING:
    from openrouter_probe.run.money.replay import OpenBatch

__all__ = [
    "DEFAULT_LIVE_BATCHES",
    "MAX_BATCH_BYTES",
    "MAX_BATCH_LINES",
    "MAX_LIVE_BATCHES",
    "MAX_POLL_S",
    "MIN_POLL_S",
    "BatchEvent",
    "BatchOptions",
    "BatchSettings",
    "Claimed",
    "Closed",
    "Held",
    "Planned",
    "Released",
    "Said",
    "SettledEarlier",
    "Submitted",
    "custom_id",
    "line_body",
    "line_outcome",
    "priced_tokens",
]

#: OpenRouter's documented limits per batch: 5,000 requests, 200 MB.
MAX_BATCH_LINES = 5000
MAX_BATCH_BYTES = 200 * 1000 * 1000
#: Batches running at once by default: each waits up to 24 h, and the 429 on create was seen
#: after 16 creations in a row (docs/batch.md, open question 7).
DEFAULT_LIVE_BATCHES = 4
MAX_LIVE_BATCHES = 100
#: The first poll's wait, in seconds, that ``--batch-poll`` accepts.
MIN_POLL_S, MAX_POLL_S = 1.0, 3600.0
_PLAIN_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
#: The fields a batch line's body does not carry: the batch has them (or refuses them).
_NOT_IN_A_LINE = ("provider", "stream", "stream_options", "model")
#: A line's error types that another batch cannot fix (the row fails).
_ROW_ERRORS = frozenset({"context_length_exceeded", "invalid_request_error", "invalid_request"})


@dataclass(frozen=True, kw_only=True)
class BatchOptions:
    """What a caller asks of batch mode (``generate(batch=BatchOptions(...))``; ``batch=True`` is
    ``BatchOptions()``): ``size`` lines at most per batch, at most ``live`` batches running at once
    (each may run 24 h), polled every ``poll_s`` seconds at first; ``abandon`` forgets the batches
    an earlier run left running (there is no cancel: what completes is billed).
    """

    size: int = MAX_BATCH_LINES
    live: int = DEFAULT_LIVE_BATCHES
    poll_s: float = 15.0
    abandon: bool = False

    def __post_init__(self) -> None:
        size = self.size
        if isinstance(size, bool) or not isinstance(size, int) or not 1 <= size <= MAX_BATCH_LINES:
            raise ConfigError(
                Message(
                    "batch-size",
                    "{size=}: a whole number from 1 to {most:d} (OpenRouter's limit per batch)",
                    size=self.size,
                    most=MAX_BATCH_LINES,
                )
            )
        live = self.live
        if isinstance(live, bool) or not isinstance(live, int) or not 1 <= live <= MAX_LIVE_BATCHES:
            raise ConfigError(
                Message(
                    "batch-live",
                    "{live=}: a whole number from 1 to {most:d} (batches running at once; default "
                    "{default:d})",
                    live=live,
                    most=MAX_LIVE_BATCHES,
                    default=DEFAULT_LIVE_BATCHES,
                )
            )
        if isinstance(self.poll_s, bool) or not isinstance(self.poll_s, int | float):
            raise ConfigError(
                Message("batch-poll", "{poll_s=}: a number of seconds, e.g. 15", poll_s=self.poll_s)
            )
        if not MIN_POLL_S <= self.poll_s <= MAX_POLL_S:
            raise ConfigError(
                Message(
                    "batch-poll-range",
                    "{poll_s=}: seconds from {low:g} to {high:g} (the first poll's wait; it grows "
                    "by half up to 2 minutes, or to this if longer)",
                    poll_s=self.poll_s,
                    low=MIN_POLL_S,
                    high=MAX_POLL_S,
                )
            )


@dataclass(frozen=True, kw_only=True)
class BatchSettings:
    """How a run sends through the Batch API.

    ``model`` and ``provider`` (the compiled policy's batch block: ``only: [tag]``,
    ``allow_fallbacks: false``) go on every batch; ``prices`` are the ``:batch`` row's (the sync
    ones where no batch price is listed), which price each row's share of a batch's cost;
    ``size`` lines at most per batch; ``live`` batches at most running at once (those an earlier
    run left open count); polls every ``poll_s`` growing to ``poll_max_s`` (with jitter); a 404
    within ``not_written_s`` of the create is the asynchronous write; the list may lag
    ``list_lag_s`` (an orphan is searched for that long); a batch is polled ``window_s`` at most.
    ``abandon`` forgets the batches earlier runs left running (what completes is billed).
    ``history`` is the snapshot file that records the first accepted submit of the run
    (``rules.batch``; ``None``: none, and ``history_off`` says why, once, if not empty).
    Made from a ``BatchOptions`` (``generation.admission``), which checked what the caller gave.
    """

    model: str
    provider: dict[str, Any] | None
    prices: Prices
    size: int = MAX_BATCH_LINES
    live: int = DEFAULT_LIVE_BATCHES
    poll_s: float = 15.0
    poll_max_s: float = 120.0
    not_written_s: float = 60.0
    list_lag_s: float = 60.0
    window_s: float = 26 * 3600.0
    abandon: bool = False
    history: Path | None = None
    history_off: str | None = None


def custom_id(row_id: str) -> str:
    """The custom id of a row's line: the row id when it is 1-64 of ``[A-Za-z0-9_-]`` (what every
    provider accepts), else a readable prefix and a hash of it. Stable across runs."""
    if _PLAIN_ID.fullmatch(row_id):
        return row_id
    digest = hashlib.sha256(row_id.encode()).hexdigest()[:16]
    prefix = re.sub(r"[^A-Za-z0-9_-]+", "_", row_id)[:40].strip("_")
    return f"{prefix}-{digest}" if prefix else digest


def line_body(body: bytes) -> dict[str, Any]:
    """A batch line's ``body``: the sync body without what the batch carries (``model``,
    ``provider``) or refuses (``stream``)."""
    obj = json.loads(body)
    for name in _NOT_IN_A_LINE:
        obj.pop(name, None)
    return dict(obj)


def priced_tokens(answer: Answer, prices: Prices) -> Decimal:
    """What a line's own tokens come to at ``prices``: its weight in the batch's cost."""
    usage = answer.usage or {}
    prompt = usage.get("prompt_tokens")
    prompt = prompt if isinstance(prompt, int) and not isinstance(prompt, bool) else 0
    return (
        prompt * prices.input_usd_per_token + answer.completion_tokens * prices.output_usd_per_token
    )


def line_outcome(result: Any, *, batch_id: str, provider: str | None) -> Answer | Failure:
    """One result line (``api.batches.BatchResult``) as the run reads a sync answer: an ``Answer``
    (its ``provider`` the batch's, else the body's) or a ``Failure`` (a failed line is billed
    nothing; it goes into a later batch unless its error is the row's own)."""
    body = result.body
    if body is not None:
        outcome = parse_body(json.dumps(body))
        if isinstance(outcome, Answer):
            outcome.provider = provider or outcome.provider
            if outcome.usage is not None:
                outcome.usage = {k: v for k, v in outcome.usage.items() if k != "cost"}
        return outcome
    error = result.error or {}
    kind = error.get("error_type") or error.get("type") or ""
    message = str(error.get("message") or "no message")
    return Failure(
        "row" if kind in _ROW_ERRORS else "transient",
        f"batch {batch_id}: line {result.custom_id} failed ({kind or 'error'}): {message}"[:300],
        status=200,  # the batch answered: not a server out of reach
        rate_limited=kind == "rate_limit_exceeded",
    )


# -- the events the batch sender reports (the run journals them) ---------------------------------


@dataclass(frozen=True)
class Planned:
    """A batch about to be submitted: journal it (flushed) before the POST. Its lines' money is
    their attempts', each reserved and journaled before it was handed over."""

    plan: str
    model: str
    after: int
    worst_usd: Decimal
    lines: list[list[Any]]


@dataclass(frozen=True)
class Submitted:
    """The id of a plan's batch (its 202, or the orphan the list showed); ``run``: the run that
    journaled the plan (``None``: this one)."""

    run: str | None
    plan: str
    batch_id: str


@dataclass(frozen=True)
class Closed:
    """A plan is closed: its lines are settled, or it was never submitted (``status`` says)."""

    run: str | None
    plan: str
    status: str


@dataclass(frozen=True)
class Held:
    """An earlier run's open batch the sender takes up: a request for one of its rows claims its
    line, not bought again."""

    batch: OpenBatch


@dataclass(frozen=True)
class Claimed:
    """A request for row ``row_id`` claims the line an earlier batch holds for it; the sink
    answers the plan that journaled the move to this run (``None``: none moved)."""

    row_id: str


@dataclass(frozen=True)
class Released:
    """The sender closes: lines taken over that no attempt of this run carries count again."""


@dataclass(frozen=True)
class SettledEarlier:
    """An earlier run's batch lines served: ``costs`` (custom id -> its share) settle them."""

    batch: OpenBatch
    costs: Mapping[str, Decimal]


@dataclass(frozen=True)
class Said:
    """What the run should say (a warning)."""

    text: str


BatchEvent = Planned | Submitted | Closed | Held | Claimed | Released | SettledEarlier | Said
#: Where the sender reports its events: the run journals each before it returns (a journal
#: that cannot take ``Planned`` raises ``files.WriteFailed``: the batch is not made).
EventSink = Callable[[BatchEvent], str | None]

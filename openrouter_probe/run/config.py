"""The one plan of a paid run (``RunPlan``): each field declared once, with its default and the
CLI option that sets it (``cli``), and checked once, when it is made; ``generate``'s plan and
``verify``'s hold it whole (a plan only priced holds one without an output, ``out=None``). What a
job learns as it opens (the key's cap, the weights, the batch settings) is ``Learned``, beside it:
nothing replaces the plan's fields once it is built.

``RunPlan.resolve`` builds it from what a user gives (``generate``'s and ``verify``'s keywords, the
CLI's flags): it parses the budget, checks the output and its folder, and reads the key and the base
URL from the environment. The retry schedule is one ``Backoff``, made here (``default_backoff``) or
given whole; ``attempts`` and a ``backoff`` that disagree are refused, never one silently winning.
What a run's requests share (model, provider block, ``max_tokens``, sampling) is the
``RequestBuilder`` (``run.send.request``), beside it.

Example::

    options = RunPlan.resolve(command="generate", out="out.jsonl", inputs=["prompts.jsonl"],
                                 budget_usd=100, concurrency=256, read_timeout_s=120)
    options.ceiling_s(4096)   # 120 + 4096 / 4: the longest one attempt may take
"""

from __future__ import annotations

import os
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from openrouter_probe.api.connection import Connection
from openrouter_probe.errors import ConfigError, Message, OptionError

if TYPE_CHECKING:
    from decimal import Decimal

    from openrouter_probe.api.backoff import Backoff
    from openrouter_probe.run.books.reconcile import Lookup
    from openrouter_probe.run.send.batch_plan import BatchSettings
    from openrouter_probe.run.send.sender import Sender

__all__ = [
    "DEFAULT_ATTEMPTS",
    "CliFlag",
    "Learned",
    "Progress",
    "RunPlan",
    "cli",
    "default_backoff",
]

Sleep = Callable[[float], Awaitable[None]]
#: Tries per row, the first included, unless ``attempts`` or a ``backoff`` says otherwise.
DEFAULT_ATTEMPTS = 6


class Progress(Protocol):
    """What shows a run's progress (``run.progress.RichProgress``): told of every record, and
    redrawn on ``tick`` (``run`` is the ``run.schedule.runner.Run``)."""

    def row_done(self, record: dict[str, Any], run: Any) -> None: ...

    def tick(self, run: Any) -> None: ...


@dataclass(frozen=True)
class CliFlag:
    """The command-line option that sets a plan's field: its flag and its ``--help`` text, from
    which the CLI makes the option (``cli.options.field_option``; ``generate --help`` imports this
    module, so what only ``resolve`` needs is imported there)."""

    flag: str
    help: str


def cli(flag: str, help: str) -> dict[str, CliFlag]:
    """A plan field's metadata: the option that sets it, e.g.
    ``field(default=None, metadata=cli("--budget-usd", help="Spend cap in USD ..."))``."""
    return {"cli": CliFlag(flag, help)}


def default_backoff(attempts: int = DEFAULT_ATTEMPTS) -> Backoff:
    """The run's retry schedule: 1 s doubling to 60 s, ``attempts`` tries within 10 minutes."""
    from openrouter_probe.api.backoff import Backoff

    return Backoff(wait_initial_s=1.0, wait_max_s=60.0, attempts=attempts, timeout_s=600.0)


def _asyncio_sleep() -> Sleep:
    """``asyncio.sleep``, imported when a plan is made: ``--help`` reads the fields only."""
    import asyncio

    return asyncio.sleep


@dataclass(frozen=True, kw_only=True)
class RunPlan:
    """What every paid run takes: where it writes, what it may spend, how it sends and waits
    (each option's meaning: its field's ``cli`` help).

    ``read_timeout_s`` with ``min_tokens_per_s`` gives each attempt its ceiling (``ceiling_s``).
    ``send``, ``lookup`` (``/generation``), ``sleep``, ``clock`` and ``wall_clock`` replace the HTTP
    sender, the reconciler's lookups, the waits and the time (tests). Build it with
    :meth:`resolve`, which names the option in its errors.
    """

    command: str
    #: ``None``: a plan only priced (``verify``'s without a run), which no run opens (``output``)
    out: Path | None = field(
        metadata=cli(
            "--out", "The output JSONL: appended to; rerunning the same command resumes from it."
        )
    )
    budget_usd: Decimal | None = field(
        default=None,
        metadata=cli(
            "--budget-usd",
            "Spend cap in USD for this output file, across runs (per shard with --shard); "
            "default: the key's remaining limit (none: exit 2).",
        ),
    )
    concurrency: int = field(
        default=256, metadata=cli("--concurrency", "Requests in flight at most.")
    )
    #: the key and the API root, resolved once (``resolve``); its repr never shows the key
    connection: Connection = field(default_factory=Connection)
    backoff: Backoff = field(
        default_factory=default_backoff,
        metadata=cli(
            "--attempts", "Tries per row, the first included, before the row is recorded as failed."
        ),
    )
    read_timeout_s: float = field(
        default=300.0,
        metadata=cli(
            "--read-timeout",
            "Seconds without data, or a stream without a token (keep-alives only), before an "
            "attempt counts as stalled.",
        ),
    )
    min_tokens_per_s: float = 4.0
    drain_timeout_s: float = field(
        default=60.0,
        metadata=cli(
            "--drain-timeout", "After the first Ctrl-C, seconds to wait for requests in flight."
        ),
    )
    max_wait_s: float = field(
        default=60.0,
        metadata=cli(
            "--max-wait",
            "Longest wait, in seconds, for a rate limit: OpenRouter's own 429 on the key (longer: "
            "stop) and a provider's 429 Retry-After.",
        ),
    )
    target_tokens: int | None = field(
        default=None,
        metadata=cli(
            "--target-tokens",
            "Stop each dataset at this many billed output tokens (reasoning included), e.g. 10M.",
        ),
    )
    pilot: int | None = field(
        default=None,
        metadata=cli(
            "--pilot",
            "Send only the first N rows of each dataset, as the full run would, then report "
            "their answer lengths and the --max-tokens that keeps 95% and 99% whole; the same "
            "command without --pilot resumes with the rest.",
        ),
    )
    lower_max_tokens: bool = field(
        default=False,
        metadata=cli(
            "--lower-max-tokens",
            'On a 402 "can only afford N", retry that row with max_tokens N instead of stopping.',
        ),
    )
    handle_signals: bool = False
    progress: bool | Progress = field(
        default=False, metadata=cli("--quiet", "No progress bar (for scripts).")
    )
    send: Sender | None = None
    lookup: Lookup | None = None
    #: ask OpenRouter's response cache for every request, answers kept this many seconds
    #: (``None``: never ask; ``verify`` never does, its repeats must be generated anew)
    response_cache_ttl_s: int | None = field(
        default=None,
        metadata=cli(
            "--no-response-cache",
            "Do not ask OpenRouter's response cache (X-OpenRouter-Cache, 24 h) for the "
            "requests; by default it answers a row resent after a lost answer free.",
        ),
    )
    sleep: Sleep = field(default_factory=_asyncio_sleep)
    clock: Callable[[], float] = time.monotonic
    wall_clock: Callable[[], float] = time.time

    def __post_init__(self) -> None:
        for name in ("read_timeout_s", "min_tokens_per_s", "drain_timeout_s"):
            value = getattr(self, name)
            if not value > 0:
                raise OptionError(f"{{{name}=}}: a number of seconds above 0", **{name: value})
        if self.max_wait_s < 0:
            raise OptionError(
                "{max_wait_s=}: a number of seconds, 0 or more", max_wait_s=self.max_wait_s
            )
        if self.pilot is not None and (
            isinstance(self.pilot, bool) or not isinstance(self.pilot, int) or self.pilot < 1
        ):
            raise OptionError("{pilot=}: a whole number of rows >= 1", pilot=self.pilot)
        if self.target_tokens is not None and self.target_tokens < 1:
            raise OptionError(
                "{target_tokens=}: a whole number >= 1", target_tokens=self.target_tokens
            )

    @property
    def attempts(self) -> int:
        """Tries per row, the first included (the backoff's)."""
        return self.backoff.attempts

    @property
    def output(self) -> Path:
        """The output a run writes: ``out``, which a plan only priced lacks (refused here)."""
        if self.out is None:
            said = (
                "this plan was only priced (planned without an output, e.g. plan_verify "
                "without run=): send the check with verify_precision(..., {out})"
            )
            raise ConfigError(Message("run-without-out", said))
        return self.out

    @property
    def journal(self) -> Path:
        """The spend journal beside the output (``out.jsonl.ledger``)."""
        from openrouter_probe.run.money.journal import journal_path

        return journal_path(self.output)

    def ceiling_s(self, max_tokens: int) -> float:
        """How long one attempt may take at most, from its send to its last byte."""
        return self.read_timeout_s + max_tokens / self.min_tokens_per_s

    @classmethod
    def resolve(
        cls,
        *,
        command: str,
        out: str | Path,
        inputs: Sequence[str | Path] = (),
        budget_usd: float | int | str | Decimal | None = None,
        concurrency: int | None = None,
        api_key: str | None = None,
        base_url: str | None = None,
        attempts: int | None = None,
        backoff: Backoff | None = None,
        need_key: bool = True,
        key_hint: str = "",
        **fields: Any,
    ) -> RunPlan:
        """Check the options of a paid run and resolve the key and base URL from the environment.

        ``inputs`` are the files the run reads: neither the output nor its journal may be one of
        them. Without a key (``OPENROUTER_API_KEY``) and ``need_key``, the error says how to set
        one (``key_hint`` adds the command's own way out, such as ``dry_run=True``). ``attempts``
        builds the default backoff; with a ``backoff`` it must agree with ``backoff.attempts``.
        ``fields`` are the other fields, as they are (their defaults are the class's).
        """
        from openrouter_probe.files import ensure_not_input
        from openrouter_probe.rules.quantities import positive_usd, whole_number
        from openrouter_probe.run.books.turns import turns_path
        from openrouter_probe.run.money.journal import journal_path

        budget = None if budget_usd is None else positive_usd(budget_usd, "budget_usd")
        target = Path(out)
        try:
            ensure_not_input(target, *inputs)
            ensure_not_input(journal_path(target), *inputs)
            ensure_not_input(turns_path(target), *inputs)
        except ValueError as exc:
            raise ConfigError(
                Message("out-is-input", "{out}: {why:s}; name another file", why=str(exc))
            ) from exc
        _check_writable(target)
        connection = Connection.resolve(api_key=api_key, base_url=base_url)
        if need_key:
            connection.require_key(command, key_hint)
        if concurrency is not None:
            fields["concurrency"] = whole_number(concurrency, "concurrency")
        return cls(
            command=command,
            out=target,
            budget_usd=budget,
            connection=connection,
            backoff=_backoff(attempts, backoff),
            **fields,
        )


@dataclass(frozen=True, kw_only=True)
class Learned:
    """What a job learns as it opens, beside its plan (``RunPlan``), never written into it:
    ``cap_usd``, the spend cap (the plan's ``budget_usd``, or with ``budget_usd="key"`` what the
    key's limit has left, ``run.checks.key_budget``); ``weights``, each dataset's share of the cap
    (parsed against the prompts' datasets, unnamed ones weigh 1); ``batch``, the batch sender's
    settings (``generate --batch``, from the policy and the endpoints; ``None``: sync)."""

    cap_usd: Decimal | None
    weights: Mapping[str, float] = field(default_factory=dict)
    batch: BatchSettings | None = None

    def __post_init__(self) -> None:
        for dataset, weight in self.weights.items():
            if not 0 < weight < float("inf"):
                raise ConfigError(f"weights {dataset}={weight}: a weight is a number above 0")

    @classmethod
    def nothing(cls, options: RunPlan) -> Learned:
        """What a run that learns nothing runs with (``verify``): the plan's cap, no weights,
        sync."""
        return cls(cap_usd=options.budget_usd)


def _backoff(attempts: int | None, backoff: Backoff | None) -> Backoff:
    """The one retry schedule: ``backoff`` as given, else the default with ``attempts`` tries."""
    from openrouter_probe.rules.quantities import whole_number

    if attempts is not None:
        attempts = whole_number(attempts, "attempts")
    if backoff is None:
        return default_backoff(DEFAULT_ATTEMPTS if attempts is None else attempts)
    if attempts is not None and attempts != backoff.attempts:
        raise ConfigError(
            Message(
                "attempts-and-backoff",
                "{attempts=} and a backoff with attempts={tries:d}: give one (the backoff's "
                "attempts count every try)",
                attempts=attempts,
                tries=backoff.attempts,
            )
        )
    return backoff


def _check_writable(out: Path) -> None:
    """The output's folder exists and takes new files; an existing output can be appended to."""
    folder = out.parent if str(out.parent) else Path(".")
    blocking = next((p for p in (folder, *folder.parents) if p.exists()), None)
    if blocking is not None and not blocking.is_dir():
        raise ConfigError(
            Message(
                "out-parent-is-a-file",
                "{out=}: {file:s} is a file, not a folder; give {out} a path in a folder",
                out=Path(out),
                file=str(blocking),
            )
        )
    if not folder.is_dir():
        raise ConfigError(
            Message(
                "out-folder-missing",
                "{out=}: the folder {folder:s} does not exist; create it first",
                out=Path(out),
                folder=str(folder),
            )
        )
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ConfigError(
            Message(
                "out-folder-read-only",
                "{out=}: cannot write in {folder:s}; choose a folder you can write to",
                out=Path(out),
                folder=str(folder),
            )
        )
    if out.exists() and not os.access(out, os.W_OK):
        raise ConfigError(
            Message(
                "out-read-only",
                "{out=}: the file is read-only; make it writable or choose another",
                out=Path(out),
            )
        )

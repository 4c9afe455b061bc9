"""Turns: a multi-turn row regenerated turn by turn (``generate --turns all``).

Each assistant message after the first user message is replaced by the model's own answer, asked
with the history regenerated so far, as SpecForge's ``scripts/regenerate_train_data.py`` does
(sgl-project/SpecForge at a6b6b0230009d15ec2a97a57384e6f53f0f96946, ``call_sglang``); earlier
turns' reasoning goes back only to a model that reads it (``rules.sampling.history_reasoning``,
``TurnBook.start(..., reasoning_back=True)``). ``plan_turns`` says which turns a row has: ``index``
is the position in ``messages`` of the assistant message a turn replaces, or ``len(messages)`` for
the answer after the last message; a row holding ``tool`` messages or tool calls is one request.

Each turn is its own request (reserved on its real body, journaled, retried, settled). A turn
answered before the row's last is kept, flushed, in the **turns file** beside the output
(``out.jsonl`` -> ``out.jsonl.turns``); the output gets the row's line when its last turn is done.
A resume reads the turns file and starts each unfinished row at its first missing turn. What a user
sees (the record, the turns file's lines, the reasoning sent back): docs/generate.md, "Multi-turn
rows".

Example::

    from openrouter_probe.run.books.turns import plan_turns

    plan_turns([{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"},
                {"role": "user", "content": "And?"}])          # (1, 3)
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from decimal import Decimal
from pathlib import Path
from typing import IO, Any

from openrouter_probe.errors import ConfigError
from openrouter_probe.files import WriteFailed, WriteFailures, append_line, iter_jsonl, open_append
from openrouter_probe.run.rows import PromptRow
from openrouter_probe.run.send.request import dumps
from openrouter_probe.run.send.transport import Answer

__all__ = [
    "TURNS_MODES",
    "TURNS_SUFFIX",
    "RowTurns",
    "TurnBook",
    "TurnLog",
    "plan_turns",
    "read_turns",
    "row_totals",
    "tool_rows",
    "turns_path",
]

log = logging.getLogger(__name__)

#: ``--turns``: ``last`` answers after the last message; ``all`` regenerates every assistant turn.
TURNS_MODES = ("last", "all")
TURNS_SUFFIX = ".turns"
#: What to do about a damaged line of the turns file.
_DAMAGED = (
    "the file is damaged. Restore it, or remove that line (that row is then regenerated from "
    "the turn it held), or delete the file (every row it holds turns of is regenerated from its "
    "first turn); the money stays counted in the spend journal"
)
_ZERO = Decimal(0)


def turns_path(out: str | Path) -> Path:
    """The turns file beside the output (``out.jsonl`` -> ``out.jsonl.turns``)."""
    p = Path(out)
    return p.with_name(p.name + TURNS_SUFFIX)


def _has_tools(messages: list[dict[str, Any]]) -> bool:
    return any(m.get("role") == "tool" or m.get("tool_calls") for m in messages)


def plan_turns(messages: list[dict[str, Any]]) -> tuple[int, ...]:
    """The turns of a row, by the position each takes; ``()``: one request, as ``last`` sends it.

    Every assistant message after the first user message, then ``len(messages)`` when the last
    message is not an assistant's. A row without such an assistant message, or with ``tool``
    messages or tool calls, is one request.
    """
    if _has_tools(messages):
        return ()
    first_user = next((i for i, m in enumerate(messages) if m.get("role") == "user"), None)
    if first_user is None:
        return ()
    turns = [
        i for i in range(first_user + 1, len(messages)) if messages[i].get("role") == "assistant"
    ]
    if not turns:
        return ()
    if messages[-1].get("role") != "assistant":
        turns.append(len(messages))
    return tuple(turns)


def tool_rows(rows: Iterable[PromptRow]) -> list[str]:
    """The ids of rows with assistant turns that ``--turns all`` sends once (tool messages)."""
    return [
        r.id
        for r in rows
        if _has_tools(r.messages) and any(m.get("role") == "assistant" for m in r.messages[:-1])
    ]


def _sum_usage(total: dict[str, Any], usage: Mapping[str, Any]) -> None:
    """Add ``usage`` into ``total``: numbers summed, nested objects summed key by key, the rest the
    last turn's."""
    for key, value in usage.items():
        before = total.get(key)
        if isinstance(value, Mapping):
            inner = before if isinstance(before, dict) else {}
            _sum_usage(inner, value)
            total[key] = inner
        elif isinstance(value, int | float) and not isinstance(value, bool):
            if type(before) is int and type(value) is int:
                total[key] = before + value
            elif isinstance(before, int | float) and not isinstance(before, bool):
                total[key] = float(Decimal(str(before)) + Decimal(str(value)))
            else:
                total[key] = value
        else:
            total[key] = value


def _usd_sum(turns: list[dict[str, Any]], key: str) -> float | None:
    values = [t.get(key) for t in turns if t.get(key) is not None]
    if not values:
        return None
    return float(sum((Decimal(str(v)) for v in values), _ZERO))


def row_totals(turns: list[dict[str, Any]]) -> dict[str, Any]:
    """The output record's fields of a row made of ``turns``: the last turn's provider, model,
    answer and generation id; ``usage`` summed; ``cost_usd`` the sum (``None`` when a turn's cost
    is unknown: ``possibly_billed_usd`` then holds their worst cases); ``attempts`` summed; and
    ``turns`` itself."""
    last = turns[-1]
    usage: dict[str, Any] = {}
    for turn in turns:
        if isinstance(turn.get("usage"), Mapping):
            _sum_usage(usage, turn["usage"])
    unknown = any(t.get("cost_usd") is None for t in turns)
    fields: dict[str, Any] = {
        "provider": last.get("provider"),
        "model": last.get("model"),
        "finish_reason": last.get("finish_reason"),
        "content": last.get("content"),
        "reasoning": last.get("reasoning"),
        "usage": usage or None,
        "cost_usd": None if unknown else _usd_sum(turns, "cost_usd"),
        "generation_id": last.get("generation_id"),
        "attempts": sum(int(t.get("attempts") or 0) for t in turns),
    }
    if last.get("tool_calls"):
        fields["tool_calls"] = last["tool_calls"]
    for key in ("possibly_billed_usd", "failed_attempts_cost_usd"):
        total = _usd_sum(turns, key)
        if total is not None:
            fields[key] = total
    fields["turns"] = list(turns)
    return fields


def new_turn(
    index: int,
    answer: Answer,
    *,
    attempts: int,
    cost: Decimal | None,
    worst: Decimal,
    extra_cost: Decimal,
    run_id: str | None,
    max_tokens: int | None = None,
) -> dict[str, Any]:
    """One turn's record, as the output's ``turns`` and the turns file hold it (``max_tokens``:
    the limit it was asked under, what ``audit`` measures an overshoot against)."""
    turn: dict[str, Any] = {
        "index": index,
        "content": answer.content,
        "reasoning": answer.reasoning,
        "tool_calls": answer.tool_calls,
        "finish_reason": answer.finish_reason,
        "usage": answer.usage,
        "cost_usd": None if cost is None else float(cost),
        "provider": answer.provider,
        "model": answer.model,
        "generation_id": answer.generation_id,
        "attempts": attempts,
        "run_id": run_id,
    }
    if cost is None:
        turn["possibly_billed_usd"] = float(worst)
    if extra_cost:
        turn["failed_attempts_cost_usd"] = float(extra_cost)
    if answer.logprobs is not None:
        turn["logprobs"] = answer.logprobs
    if max_tokens is not None:
        turn["max_tokens"] = max_tokens
    if answer.cache_hit:
        turn["response_cache"] = "hit"  # a replay of an earlier answer, billed nothing
    if answer.reasoning_details:
        turn["reasoning_details"] = answer.reasoning_details  # verbatim: what goes back
    return turn


def read_turns(path: str | Path) -> Iterator[tuple[int, str, str, dict[str, Any]]]:
    """Yield ``(line number, row id, dataset, turn)`` for every line of a turns file (absent: nothing).

    A torn last line is skipped with a warning (``files.iter_jsonl``; cut it first under the
    output's lock); a line that is not a turn is a ``ConfigError`` naming the file and line.
    """
    p = Path(path)
    if not p.exists():
        return
    for lineno, line in iter_jsonl(
        p, what="the turns file", line="a line of the turns file", damaged=_DAMAGED
    ):
        turn = line.get("turn") if isinstance(line, dict) else None
        ident = line.get("id") if isinstance(line, dict) else None
        index = turn.get("index") if isinstance(turn, dict) else None
        if (
            not isinstance(ident, str)
            or not isinstance(turn, dict)
            or not isinstance(index, int)
            or isinstance(index, bool)
        ):
            raise ConfigError(
                f"{p}:{lineno}: not a turn of `generate` answering every turn (needs id and "
                "turn.index); " + _DAMAGED
            )
        dataset = line.get("dataset")
        yield lineno, ident, dataset if isinstance(dataset, str) else "default", turn


class TurnLog:
    """The turns file open for appending (lazily: a run that keeps no turn creates no file)."""

    def __init__(self, path: str | Path, on_failure: Callable[[str], None] | None = None) -> None:
        self.path = Path(path)
        self._handle: IO[str] | None = None
        #: the first failed write (``line``; ``on_failure`` is told it): nothing is written after it
        self.writes = WriteFailures(self.path, on_failure)

    def keep(self, row: PromptRow, turn: dict[str, Any]) -> None:
        """Append one finished turn and flush it: once this returns, a resume will not buy it
        again."""
        if self.writes.line is not None:  # nothing after a failed write (a torn one stays)
            raise WriteFailed(self.writes.line)
        try:
            if self._handle is None:
                self._handle = open_append(self.path)
            line = {"id": row.id, "dataset": row.dataset, "turn": turn}
            append_line(self._handle, dumps(line))
        except OSError as exc:  # a full disk: the run stops sending (``files.WriteFailed``)
            raise WriteFailed(self.writes.fail(exc)) from exc

    def close(self) -> None:
        handle, self._handle = self._handle, None
        self.writes.close(handle)


@dataclasses.dataclass
class RowTurns:
    """One row's turns: its prompt, the positions of its turns, and the turns done so far."""

    row: PromptRow
    plan: tuple[int, ...]
    done: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    resumed: int = 0  # turns the turns file held when the run started
    #: whether earlier turns go back with their reasoning (the model reads it)
    reasoning_back: bool = False

    @property
    def next_index(self) -> int:
        return self.plan[len(self.done)]

    @property
    def last(self) -> bool:
        """Whether the next turn is the row's last."""
        return len(self.done) == len(self.plan) - 1

    def history(self, index: int) -> list[dict[str, Any]]:
        """The messages before the turn at ``index``, every earlier turn the model's own (its
        content, and its reasoning with ``reasoning_back``; a turn not answered yet is empty: the
        dry run's bound adds it)."""
        by_index = {t["index"]: t for t in self.done}
        messages = []
        for i, message in enumerate(self.row.messages[:index]):
            if i in self.plan:
                turn = by_index.get(i) or {}
                said: dict[str, Any] = {"role": "assistant", "content": turn.get("content") or ""}
                if self.reasoning_back:
                    for key in ("reasoning", "reasoning_details"):
                        if turn.get(key):
                            said[key] = turn[key]
                messages.append(said)
            else:
                messages.append(message)
        return messages

    def request(self) -> PromptRow:
        """The request of the next turn: the row, its messages the history so far."""
        return dataclasses.replace(self.row, messages=self.history(self.next_index))

    def planned(self) -> list[tuple[PromptRow, int]]:
        """The dry run's requests still to send: each with the number of earlier turns whose
        answers its prompt will carry (each at most ``max_tokens`` tokens)."""
        first = len(self.done)
        return [
            (dataclasses.replace(self.row, messages=self.history(index)), k - first)
            for k, index in enumerate(self.plan)
            if k >= first
        ]


def _chain(plan: tuple[int, ...], kept: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], bool]:
    """The turns a row resumes from: the kept turns, in the order they were kept, that follow its
    plan from its first turn (a turn at the plan's first index starts a new chain: a run that
    began the row afresh). The last turn is never kept (its answer goes into the output line).
    Returns the chain and whether kept turns did not fit (the prompts changed under the id)."""
    chain: list[dict[str, Any]] = []
    broken = False
    for turn in kept:
        index = turn.get("index")
        if index == plan[0]:
            chain, broken = [turn], False
        elif chain and len(chain) < len(plan) - 1 and index == plan[len(chain)]:
            chain.append(turn)
        else:
            chain, broken = [], True
    if len(plan) < 2:
        chain, broken = [], bool(kept)
    return chain, broken


class TurnBook:
    """The rows of a run that go turn by turn, by id, and the turns file they keep turns in."""

    def __init__(self, out: str | Path, *, reasoning_back: bool = False) -> None:
        self.path = turns_path(out)
        self.rows: dict[str, RowTurns] = {}
        self.dropped: list[str] = []  # rows whose kept turns no longer fit their messages
        #: whether earlier turns go back with their reasoning (``rules.sampling.history_reasoning``)
        self.reasoning_back = reasoning_back

    @classmethod
    def start(
        cls,
        out: str | Path,
        rows: Iterable[PromptRow],
        kept: Mapping[str, list[dict[str, Any]]],
        *,
        reasoning_back: bool = False,
    ) -> TurnBook:
        """The book of ``rows`` (those still to send), with the turns the turns file kept for them
        (``ResumeState.turns``): each row starts at its first missing turn; ``reasoning_back``:
        earlier turns go back with their reasoning."""
        book = cls(out, reasoning_back=reasoning_back)
        for row in rows:
            plan = plan_turns(row.messages)
            if not plan:
                continue
            progress = RowTurns(row, plan, reasoning_back=reasoning_back)
            chain, broken = _chain(plan, kept.get(row.id, []))
            if broken:
                book.dropped.append(row.id)
            progress.done = chain
            progress.resumed = len(chain)
            book.rows[row.id] = progress
        return book

    def requests(self, rows: Iterable[PromptRow]) -> list[PromptRow]:
        """What the run queues for ``rows``: each row's next turn, or the row itself."""
        return [self.rows[r.id].request() if r.id in self.rows else r for r in rows]

    @property
    def resumed(self) -> int:
        return sum(p.resumed for p in self.rows.values())

    def to_send(self, rows: Iterable[PromptRow]) -> int:
        """Requests to send for ``rows``: a row's missing turns, or 1."""
        return sum(
            len(self.rows[r.id].plan) - len(self.rows[r.id].done) if r.id in self.rows else 1
            for r in rows
        )

    def started(self, row_id: str) -> bool:
        """Whether the row has finished turns (it stopped mid-way if it stops now)."""
        progress = self.rows.get(row_id)
        return progress is not None and bool(progress.done)

    def prompt(self, row: PromptRow) -> list[dict[str, Any]]:
        """The prompt's messages of the row a request belongs to."""
        progress = self.rows.get(row.id)
        return row.messages if progress is None else progress.row.messages

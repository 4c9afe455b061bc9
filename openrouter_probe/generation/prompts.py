"""Prompts: the input rows of a generation job, from any source, as each family writes them.

Each row of a source (``generation.sources``) is read by its family's shape
(``generation.shapes``); its id is its own, else a stable hash of its content (messages, dataset
and parameters), so that a rerun finds the same ids. A row that cannot be sent is skipped with its
file, line and reason (``strict=True`` refuses the source instead); a duplicate id is sent once;
a source with no row is an error, a shard that gets none is not. ``turns="last"`` keeps a trailing
assistant answer as the row's ``original``. ``docs/inputs.md`` says each rule.

Example::

    from openrouter_probe.generation.prompts import read_prompts

    rows = read_prompts("prompts.jsonl")
    rows.rows[0].id, rows.duplicates, rows.skipped
"""

from __future__ import annotations

import dataclasses
import hashlib
import heapq
import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from openrouter_probe.errors import ConfigError, Message, OptionError, reason
from openrouter_probe.generation.shapes import FieldMap, ShapeProblem, read_row
from openrouter_probe.generation.sources import Source, open_source
from openrouter_probe.generation.transcripts import OASST_MESSAGE, OasstTrees, oasst_paths
from openrouter_probe.run.rows import PromptRow

__all__ = [
    "PromptSet",
    "Selection",
    "parse_shard",
    "read_prompts",
    "row_id",
    "shard_of",
    "with_samples",
]

log = logging.getLogger(__name__)

#: How many bad lines one error message lists before it says "and N more".
_SHOWN = 10


@dataclass
class PromptSet:
    """The rows of a prompt source, in source order, with the duplicates that were dropped and
    the rows skipped (``"FILE:LINE: why"``)."""

    path: str
    rows: list[PromptRow]
    duplicates: list[tuple[str, int, int]] = field(default_factory=list)  # (id, first line, line)
    skipped: list[str] = field(default_factory=list)
    #: rows (of ``rows``) whose conversation in the source ends on an assistant turn
    ending_on_assistant: int = 0
    #: where the rows come from (a manifest's: each dataset's own, ``sources``)
    source: Source | None = None
    sources: dict[str, Source] = field(default_factory=dict)
    #: with a shard: the rows of every shard (the dry run's per-shard rows and worst case)
    every_shard: list[PromptRow] = field(default_factory=list)
    #: what the reading says once per source (a column kept unsent: ``source_notes``)
    notes: list[str] = field(default_factory=list)

    def where(self, row: PromptRow) -> str:
        """``path:LINE`` (JSONL) or ``path: row N`` of ``row``: what a message names."""
        source = self.sources.get(row.dataset, self.source)
        return source.where(row.line) if source is not None else f"{self.path}:{row.line}"

    def drop(self, why: dict[str, str]) -> None:
        """Skip the rows whose ids ``why`` holds (each with its reason), as if never read."""
        gone = [r for r in self.rows if r.id in why]
        self.rows = [r for r in self.rows if r.id not in why]
        self.skipped.extend(f"{self.where(r)}: {why[r.id]}" for r in gone)
        self.ending_on_assistant -= sum(_ends_on_assistant(r) for r in gone)

    def __iter__(self) -> Iterator[PromptRow]:
        return iter(self.rows)

    def __len__(self) -> int:
        return len(self.rows)

    @property
    def datasets(self) -> list[str]:
        return sorted({r.dataset for r in self.rows})


@dataclass(frozen=True)
class Selection:
    """Which of a source's rows to take: the first ``limit``, or ``sample`` of them picked by a
    hash of ``seed`` and each row's id (the same rows on every rerun)."""

    limit: int | None = None
    sample: int | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        if self.limit is not None and self.sample is not None:
            raise OptionError("give {limit} or {sample}, not both", limit=self.limit,
                              sample=self.sample)  # fmt: skip
        for name, value in (("limit", self.limit), ("sample", self.sample)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                      or value < 1):  # fmt: skip
                raise OptionError(f"{{{name}=}}: give a whole number >= 1", **{name: value})

    def rank(self, ident: str) -> int:
        """The row's place in the sample order (lowest first): stable for an id and a seed."""
        digest = hashlib.sha256(f"{self.seed}\0{ident}".encode()).digest()
        return int.from_bytes(digest[:8], "big")


def _ends_on_assistant(row: PromptRow) -> bool:
    """Whether the row's conversation ends on an assistant turn (kept as its ``original``)."""
    return (
        bool(row.extra and "original" in row.extra) or row.messages[-1].get("role") == "assistant"
    )


def row_id(messages: list[dict[str, Any]], dataset: str, params: dict[str, Any]) -> str:
    """Return the stable content id of a row without an ``id``: ``h-`` and 24 hex digits."""
    canonical = json.dumps(
        {"messages": messages, "dataset": dataset, "params": params},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return "h-" + hashlib.sha256(canonical.encode()).hexdigest()[:24]


def shard_of(row_id_: str, shards: int) -> int:
    """Return the shard (0-based) of an id among ``shards``: a stable hash, the same everywhere."""
    digest = hashlib.sha256(row_id_.encode()).digest()
    return int.from_bytes(digest[:8], "big") % shards


def parse_shard(text: str) -> tuple[int, int]:
    """Parse ``shard="i/n"`` (``--shard i/n``) (``0 <= i < n``) into ``(i, n)``; ``"auto"``:
    the launcher's rank and world size (``generation.shards``)."""
    if text.strip() == "auto":
        from openrouter_probe.generation.shards import shard_from_launcher

        return shard_from_launcher().pair
    try:
        left, right = text.split("/")
        index, count = int(left), int(right)
    except ValueError:
        raise ConfigError(
            Message(
                "shard-form",
                "{shard=}: give i/n, e.g. 0/4 (shards are numbered from 0)",
                shard=text,
            )
        ) from None
    if count < 1 or not 0 <= index < count:
        raise ConfigError(
            Message(
                "shard-range",
                "{shard=}: needs 0 <= i < n, e.g. 0/{most:d}",
                shard=text,
                most=max(count, 2),
            )
        )
    return index, count


@dataclass(frozen=True)
class _Reading:
    """How to read each row of one source."""

    fields: FieldMap
    dataset: str | None  # every row's dataset (a manifest entry), whatever the row says
    turns: str | None
    folder: Path | None = None  # where a row's relative image paths are read from


def _prompt_row(obj: Any, number: int, how: _Reading, notes: dict[str, int]) -> PromptRow:
    shape = read_row(obj, how.fields, folder=how.folder)
    for note in shape.notes:
        notes[note] = notes.get(note, 0) + 1
    dataset = how.dataset or shape.dataset or "default"
    messages = shape.messages
    params = shape.params if shape.id_params is None else shape.id_params
    ident = shape.given_id or row_id(messages, dataset, params)
    extra: dict[str, Any] = {}
    if how.turns == "last" and messages[-1].get("role") == "assistant":
        extra["original"] = messages[-1]
        messages = messages[:-1]
    if shape.meta:
        extra["meta"] = shape.meta  # the dataset's other columns: kept, never sent
    return PromptRow(ident, dataset, messages, shape.params, number, extra=extra or None)


def _notes(label: str, notes: dict[str, int]) -> list[str]:
    """What the reading says once per source: the columns named like request parameters kept
    as data (never sent unless named), a system column left for the conversation's own."""
    out: list[str] = []
    params = sorted(k.partition(":")[2] for k in notes if k.startswith("param:"))
    if params:
        out.append(
            Message(
                "columns-not-sent",
                "{label:s}: {names:s}: dataset columns, kept in `meta` and never sent (a column "
                "is a request parameter only when named: {row_params=NAMES})",
                label=label,
                names=", ".join(f"`{name}`" for name in params),
            )
        )
    for key in sorted(k for k in notes if k.startswith("system:")):
        out.append(
            f"{label}: {notes[key]:,} row(s) open with their own system turn: their "
            f"`{key.partition(':')[2]}` column is kept in `meta`, not sent"
        )
    return out


@dataclass
class _Found:
    rows: list[PromptRow] = field(default_factory=list)
    duplicates: list[tuple[str, int, int]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    ending: set[str] = field(default_factory=set)
    notes: dict[str, int] = field(default_factory=dict)  # note -> rows it is about


def _gathered(rows: Iterator[tuple[int, Any, str | None]], fields: FieldMap) -> Iterator[Any]:
    """The source's rows; an OpenAssistant tree as one row per path to a leaf, its message rows
    (one message each) gathered into their trees first, each tree at its initial prompt's
    number after the other rows (``transcripts``)."""
    trees = OasstTrees()
    for number, obj, error in rows:
        if isinstance(obj, dict) and not fields.named:
            if "message_id" in obj and all(k in obj for k in OASST_MESSAGE):
                trees.add(number, obj)
                continue
            if "message_tree_id" in obj and isinstance(obj.get("prompt"), dict):
                yield from _paths(number, obj)
                continue
        yield number, obj, error
    if trees.rows:
        roots, orphans = trees.trees()
        for number, tree in roots:
            yield from _paths(number, tree)
        yield from ((number, None, why) for number, why in orphans)


def _paths(number: int, tree: dict[str, Any]) -> Iterator[Any]:
    """An OpenAssistant tree as its paths to a leaf, each a row (its id the leaf's)."""
    paths = oasst_paths(tree["prompt"])
    if not paths:
        yield number, None, "an oasst tree whose initial prompt is deleted"
    rest = {k: v for k, v in tree.items() if k != "prompt"}
    for leaf, chain in paths:
        yield number, {**rest, "path_id": leaf, "prompt": chain}, None


def _read_rows(source: Source, how: _Reading, selection: Selection) -> _Found:
    """Every row of the source (first of each id), the duplicates, the bad and skipped rows;
    ``limit`` stops reading once it has its rows, ``sample`` keeps the lowest ranks."""
    found = _Found()
    seen: dict[str, int] = {}
    heap: list[tuple[int, int, PromptRow]] = []  # (-rank, -number, row): the sample so far
    for number, obj, error in _gathered(source.rows(), how.fields):
        if error is None:
            try:
                row = _prompt_row(obj, number, how, found.notes)
            except ShapeProblem as exc:
                found.skipped.append(f"{source.where(number)}: {exc}")
                continue
            except ValueError as exc:
                error = reason(exc)
        if error is not None:
            bad = Message("bad-row", "{where:s}: {why:s}", where=source.where(number), why=error)
            found.errors.append(bad)
            found.skipped.append(bad)
            continue
        if row.id in seen:
            found.duplicates.append((row.id, seen[row.id], number))
            continue
        seen[row.id] = number
        if _ends_on_assistant(row):
            found.ending.add(row.id)
        if selection.sample is None:
            found.rows.append(row)
            if selection.limit is not None and len(found.rows) >= selection.limit:
                break
            continue
        item = (-selection.rank(row.id), -number, row)
        if len(heap) < selection.sample:
            heapq.heappush(heap, item)
        elif item[:2] > heap[0][:2]:
            heapq.heapreplace(heap, item)
    if selection.sample is not None:
        found.rows = sorted((r for _, _, r in heap), key=lambda r: r.line)
    return found


def read_prompts(
    path: str | Path,
    *,
    shard: tuple[int, int] | None = None,
    dataset: str | None = None,
    turns: str | None = None,
    fields: FieldMap | None = None,
    selection: Selection | None = None,
    config: str | None = None,
    split: str | None = None,
    strict: bool = False,
) -> PromptSet:
    """Read the prompt source ``path`` (a file, a folder or ``hf:OWNER/NAME`` with ``config`` and
    ``split``) as the module says: ``fields`` names the conversation, prompt or id field;
    ``dataset`` tags every row; ``selection`` keeps a limit or a sample; ``shard=(i, n)`` keeps
    the rows whose id hashes to shard ``i``; ``strict=True`` refuses a source with a bad row."""
    source = open_source(path, config=config, split=split)
    folder = None if source.kind == "hf" else Path(source.spec).parent
    how = _Reading(fields or FieldMap(), dataset, turns, folder)
    found = _read_rows(source, how, selection or Selection())
    label = source.spec
    if (strict and found.skipped) or (found.errors and not found.rows):
        errors = found.skipped if strict else found.errors
        more = f"\n... and {len(errors) - _SHOWN} more bad lines" if len(errors) > _SHOWN else ""
        raise ConfigError(
            Message(
                "bad-rows",
                "{label:s}: {count:d} bad {unit:s}(s); each row is a JSON object with a "
                "conversation (`messages`, `conversations`) or a prompt (`prompt`, `question`, "
                "...):\n{lines:s}{more:s}",
                label=label,
                count=len(errors),
                unit=source.unit,
                lines=Message.joined("bad-rows", "\n", errors[:_SHOWN]),
                more=more,
            )
        )
    rows = found.rows
    if not rows:
        if found.skipped:
            raise ConfigError(
                f"{label}: no rows to send: all {len(found.skipped)} are skipped, e.g. "
                f"{found.skipped[0]}"
            )
        raise ConfigError(
            f"{label}: no rows, the file is empty; write one JSON object per line with "
            '`messages` or `prompt`, e.g. {"id": "q1", "prompt": "Hello"}'
        )
    prompts = PromptSet(label, rows, found.duplicates, skipped=found.skipped, source=source,
                        notes=_notes(label, found.notes))  # fmt: skip
    if shard is not None:
        prompts.every_shard = rows
        prompts.rows = [r for r in rows if shard_of(r.id, shard[1]) == shard[0]]
        if not prompts.rows:
            log.warning(
                "%s: shard %d/%d gets none of the file's %d rows: nothing to send",
                label,
                shard[0],
                shard[1],
                len(rows),
            )
    prompts.ending_on_assistant = sum(1 for r in prompts.rows if r.id in found.ending)
    return prompts


def _sample_rows(rows: list[PromptRow], samples: int, path: str) -> list[PromptRow]:
    """Each row ``samples`` times, as ``id#0`` ... (``samples`` 1: the rows as they are)."""
    if samples == 1:
        return rows
    out = [dataclasses.replace(row, id=f"{row.id}#{k}") for row in rows for k in range(samples)]
    seen: set[str] = set()
    for row in out:
        if row.id in seen:
            raise ConfigError(
                Message(
                    "sample-id-taken",
                    "{path:s}: the row id {id:s} is also a sample's id with {samples=}: rename "
                    "that row (an id ending in #N names a sample)",
                    path=path,
                    id=row.id,
                    samples=samples,
                )
            )
        seen.add(row.id)
    return out


def with_samples(rows: PromptSet, samples: int) -> PromptSet:
    """``samples`` rows of each prompt (``id#k``, ``k`` from 0), each its own draw and cache
    identity; a resume counts them as rows (``samples`` 1: ``rows`` as read)."""
    if samples == 1:
        return rows
    return dataclasses.replace(
        rows,
        rows=_sample_rows(rows.rows, samples, rows.path),
        every_shard=_sample_rows(rows.every_shard, samples, rows.path),
        ending_on_assistant=rows.ending_on_assistant * samples,
    )

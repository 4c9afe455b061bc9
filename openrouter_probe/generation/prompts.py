"""Prompts: the input rows of a generation job, read from JSONL.

One JSON object per line: ``messages`` (chat format) or ``prompt`` (a string, sent as one user
message), an optional ``id``, an optional ``dataset`` and optional per-row request parameters
(``max_tokens``, ``temperature``, ``reasoning``, ...). A row's id is its ``id``, else a stable hash of
its content (messages, dataset and parameters), so that a rerun finds the same ids. A malformed line
is named by file and line number; duplicate ids are reported with both line numbers and sent once.
A UTF-8 byte order mark at the start of the file (Windows editors write one) is skipped. A file
with no row is an error (an empty input is almost always a wrong path or a failed step before);
a shard (``--shard i/n``) that gets none of a file's rows is not: it has nothing to send, and says
so in one line.

Example::

    from openrouter_probe.generation.prompts import read_prompts

    rows = read_prompts("prompts.jsonl")
    rows.rows[0].id, rows.duplicates
"""

from __future__ import annotations

import codecs
import hashlib
import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from openrouter_probe.errors import ConfigError
from openrouter_probe.files import json_error
from openrouter_probe.run.rows import PromptRow

__all__ = ["PromptSet", "parse_shard", "read_prompts", "row_id", "shard_of"]

log = logging.getLogger(__name__)

#: Keys a row may not set: the policy and the run decide them.
_RESERVED = frozenset({"model", "provider", "stream", "models", "route"})
_ROLES = frozenset({"system", "user", "assistant", "tool", "developer"})
#: How many bad lines one error message lists before it says "and N more".
_SHOWN = 10


@dataclass
class PromptSet:
    """The rows of a prompts file, in file order, with the duplicates that were dropped."""

    path: str
    rows: list[PromptRow]
    duplicates: list[tuple[str, int, int]] = field(default_factory=list)  # (id, first line, line)
    in_file: int = 0  # distinct rows in the file, every shard's

    def duplicate_lines(self) -> list[str]:
        """One line per duplicate id, naming the file and both line numbers."""
        return [
            f"{self.path}:{again}: id {ident!r} already on line {first}; sent once"
            for ident, first, again in self.duplicates
        ]

    def __iter__(self) -> Iterator[PromptRow]:
        return iter(self.rows)

    def __len__(self) -> int:
        return len(self.rows)

    @property
    def datasets(self) -> list[str]:
        return sorted({r.dataset for r in self.rows})


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
    """Parse ``--shard i/n`` (``0 <= i < n``) into ``(i, n)``."""
    try:
        left, right = text.split("/")
        index, count = int(left), int(right)
    except ValueError:
        raise ConfigError(
            f"--shard {text!r}: give i/n, e.g. 0/4 (shards are numbered from 0)"
        ) from None
    if count < 1 or not 0 <= index < count:
        raise ConfigError(f"--shard {text!r}: needs 0 <= i < n, e.g. 0/{max(count, 2)}")
    return index, count


def _messages(obj: dict[str, Any]) -> list[dict[str, Any]]:
    if "messages" in obj and "prompt" in obj:
        raise ValueError("has both `messages` and `prompt`; give one")
    if "prompt" in obj:
        prompt = obj["prompt"]
        if not isinstance(prompt, str) or not prompt:
            raise ValueError("`prompt` must be a non-empty string")
        return [{"role": "user", "content": prompt}]
    if "messages" not in obj:
        raise ValueError("needs `messages` (a list of {role, content}) or `prompt` (a string)")
    messages = obj["messages"]
    if not isinstance(messages, list) or not messages:
        raise ValueError("`messages` must be a non-empty list of {role, content} objects")
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            raise ValueError(f"messages[{i}] is not an object")
        role = m.get("role")
        if role not in _ROLES:
            raise ValueError(
                f"messages[{i}].role is {role!r}; use one of {', '.join(sorted(_ROLES))}"
            )
        if "content" not in m:
            raise ValueError(f"messages[{i}] has no `content`")
    return messages


def _parse_line(text: str, *, default_dataset: str, line: int) -> PromptRow:
    try:
        obj = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"not JSON ({json_error(exc)})") from None
    if not isinstance(obj, dict):
        raise ValueError(f"a row is a JSON object, not {type(obj).__name__}")
    messages = _messages(obj)
    given = obj.get("id")
    if given is not None and (not isinstance(given, str | int) or isinstance(given, bool)):
        raise ValueError("`id` must be a string or an integer")
    dataset = obj.get("dataset", default_dataset)
    if not isinstance(dataset, str) or not dataset:
        raise ValueError("`dataset` must be a non-empty string")
    reserved = sorted(_RESERVED & obj.keys())
    if reserved:
        raise ValueError(
            f"sets {', '.join(reserved)}: the policy (--policy) and the run decide those, not a row"
        )
    params = {k: v for k, v in obj.items() if k not in ("id", "dataset", "messages", "prompt")}
    if "max_tokens" in params and (
        not isinstance(params["max_tokens"], int) or params["max_tokens"] < 1
    ):
        raise ValueError("`max_tokens` must be a whole number >= 1")
    ident = str(given) if given is not None else row_id(messages, dataset, params)
    size = len(json.dumps(messages, ensure_ascii=False).encode())
    return PromptRow(ident, dataset, messages, params, line, size)


def read_prompts(
    path: str | Path, *, shard: tuple[int, int] | None = None, default_dataset: str = "default"
) -> PromptSet:
    """Read a prompts JSONL file; raise ``ConfigError`` naming every bad line (file:line: why).

    Blank lines are skipped, and a UTF-8 byte order mark before the first line. With
    ``shard=(i, n)`` only the rows whose id hashes to shard ``i`` are kept. Rows with an id seen
    before are dropped and listed in ``duplicates`` (``duplicate_lines`` names both lines of each).
    A file without a row is a ``ConfigError``; a shard without one logs a warning.
    """
    p = Path(path)
    try:
        handle = p.open("rb")
    except OSError as exc:
        raise ConfigError(f"{p}: cannot read the prompts file: {exc.strerror}") from exc
    with handle:
        found = _read_lines(p, handle, default_dataset)
    rows, duplicates, errors = found
    if errors:
        more = f"\n... and {len(errors) - _SHOWN} more bad lines" if len(errors) > _SHOWN else ""
        raise ConfigError(
            f"{p}: {len(errors)} bad line(s); each row is a JSON object with `messages` or `prompt`:\n"
            + "\n".join(errors[:_SHOWN])
            + more
        )
    if not rows:
        raise ConfigError(
            f"{p}: no rows, the file is empty; write one JSON object per line with `messages` or "
            '`prompt`, e.g. {"id": "q1", "prompt": "Hello"}'
        )
    prompts = PromptSet(str(p), rows, duplicates, in_file=len(rows))
    if shard is not None:
        prompts.rows = [r for r in rows if shard_of(r.id, shard[1]) == shard[0]]
        if not prompts.rows:
            log.warning(
                "%s: shard %d/%d gets none of the file's %d rows: nothing to send",
                p,
                shard[0],
                shard[1],
                len(rows),
            )
    return prompts


def _read_lines(
    p: Path, handle: IO[bytes], default_dataset: str
) -> tuple[list[PromptRow], list[tuple[str, int, int]], list[str]]:
    """Every row of the file (first of each id), the duplicates, and the bad lines' messages."""
    rows: list[PromptRow] = []
    seen: dict[str, int] = {}
    duplicates: list[tuple[str, int, int]] = []
    errors: list[str] = []
    for lineno, raw in enumerate(handle, start=1):
        if lineno == 1 and raw.startswith(codecs.BOM_UTF8):
            raw = raw[len(codecs.BOM_UTF8) :]
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            errors.append(f"{p}:{lineno}: not UTF-8 text ({exc.reason})")
            continue
        if not text.strip():
            continue
        try:
            row = _parse_line(text, default_dataset=default_dataset, line=lineno)
        except ValueError as exc:
            errors.append(f"{p}:{lineno}: {exc}")
            continue
        if row.id in seen:
            duplicates.append((row.id, seen[row.id], lineno))
            continue
        seen[row.id] = lineno
        rows.append(row)
    return rows, duplicates, errors

"""The records of ``generate``'s output files: every one in file order (``records``; the spend
journals and turns files beside them skipped), and one finished record per row id over several
files, a shard's or a redo's (``merged_records``). ``audit``, ``export`` and ``--redo-truncated``
read them so; ``truncated_rows``: the rows ``--redo-truncated`` sends again.

Example::

    from openrouter_probe.generation.records import merged_records

    served = [r for r in merged_records(["out-0.jsonl", "out-1.jsonl"]) if r["status"] == "ok"]
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from openrouter_probe.errors import Message
from openrouter_probe.run.books.output import FINISHED, iter_records, output_tokens_of
from openrouter_probe.run.books.turns import TURNS_SUFFIX
from openrouter_probe.run.money.journal import JOURNAL_SUFFIX
from openrouter_probe.run.rows import PromptRow

if TYPE_CHECKING:
    from openrouter_probe.generation.prompts import PromptSet

__all__ = ["beside", "merged_records", "reasoning_tokens_of", "records", "truncated_rows"]


def beside(path: str | Path) -> str | None:
    """What ``path`` is when it is a file ``generate`` keeps beside an output (``"spend
    journal"``, ``"turns file"``), else ``None``."""
    if str(path).endswith(JOURNAL_SUFFIX):
        return "spend journal"
    return "turns file" if str(path).endswith(TURNS_SUFFIX) else None


def reasoning_tokens_of(answer: Mapping[str, Any]) -> int:
    """Reasoning tokens of a record or a turn (``usage.completion_tokens_details``; 0: none)."""
    usage = answer.get("usage")
    details = usage.get("completion_tokens_details") if isinstance(usage, dict) else None
    value = details.get("reasoning_tokens") if isinstance(details, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def records(paths: Iterable[str | Path]) -> Iterator[dict[str, Any]]:
    """Every record of the output files ``paths``, in file order; spend journals and turns files
    (``OUT.jsonl.ledger``, ``OUT.jsonl.turns``, given by a glob such as ``out/*``) are skipped
    with a warning."""
    for path in paths:
        what = beside(path)
        if what is not None:
            logging.getLogger(__name__).warning(
                "%s: skipped: the %s of `generate`, not an output file", path, what
            )
            continue
        for _, record in iter_records(path):
            yield record


def merged_records(
    paths: Iterable[str | Path], *, superseded: list[str] | None = None
) -> Iterator[dict[str, Any]]:
    """Yield one finished record per row id over several output files (shards).

    A served record (``ok`` or ``truncated``) wins over a ``failed`` one, wherever it is: a row
    that failed and was sent again with ``--redo-failed`` is recorded twice, failed first. A
    later served record supersedes a ``truncated`` one (``--redo-truncated`` sent the row again);
    the ids superseded are appended to ``superseded``. Each row's first served record takes its
    place in file order; rows that only failed come last. Spend journals are skipped."""
    served: dict[str, dict[str, Any]] = {}
    failed: dict[str, dict[str, Any]] = {}
    for record in records(paths):
        ident = str(record["id"])
        status = record.get("status")
        if status in FINISHED and status != "failed":
            before = served.get(ident)
            if before is None:
                served[ident] = record
                failed.pop(ident, None)
            elif before.get("status") == "truncated":
                served[ident] = record  # keeps its place: a dict keeps the first key's
                if superseded is not None:
                    superseded.append(ident)
        elif status == "failed" and ident not in served:
            failed.setdefault(ident, record)
    yield from served.values()
    yield from failed.values()


def truncated_rows(
    rows: PromptSet, out: str | Path, max_tokens: int
) -> tuple[list[PromptRow], list[str], dict[str, str]]:
    """``--redo-truncated``: the rows whose answer in ``out`` is the one cut at ``max_tokens``
    (a later answer supersedes it), each with the new limit; what to warn about them; and the
    dataset each cut record names (a dataset renamed since is counted where it was)."""
    if not Path(out).is_file():  # a fresh output: no answer was cut, nothing to redo
        fresh = Message(
            "redo-truncated-fresh",
            "{redo_truncated=True}: {path:s} holds no answer yet, so none was cut: nothing to redo",
            path=str(out),
        )
        return [], [fresh], {}
    records = [r for r in merged_records([out]) if r.get("status") == "truncated"]
    cut = {str(r["id"]): output_tokens_of(r) for r in records}
    recorded = {str(r["id"]): str(r.get("dataset") or "default") for r in records}
    # a redo is a new answer, never the cached cut one (the same request at the same limit):
    # its cache identity names the answer it redoes, the same on a resend after a kill
    kind = {str(r["id"]): f"redo:{r.get('generation_id') or output_tokens_of(r)}" for r in records}
    todo = [
        replace(
            r,
            params={**r.params, "max_tokens": max_tokens} if "max_tokens" in r.params else r.params,
            cache_kind=kind[r.id],
        )
        for r in rows
        if r.id in cut
    ]
    warnings: list[str] = []
    longest = max((cut[r.id] for r in todo), default=0)
    if todo and max_tokens <= longest:
        warnings.append(
            Message(
                "redo-truncated-same-limit",
                "{redo_truncated=True}: {max_tokens=} is no more than the {longest:,} output "
                "tokens some were cut at: they may be cut again; raise it above {above:s}",
                max_tokens=max_tokens,
                longest=longest,
                above=Message("above", "{max_tokens=}", max_tokens=longest),
            )
        )
    return todo, warnings, recorded

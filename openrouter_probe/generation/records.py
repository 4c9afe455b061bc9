"""The records of ``generate``'s output files: every one in file order (``records``; the spend
journals and turns files beside them skipped), and one finished record per row id over several
files, a shard's or a redo's (``merged_records``). ``audit``, ``export`` and ``--redo-truncated``
read them so.

Example::

    from openrouter_probe.generation.records import merged_records

    served = [r for r in merged_records(["out-0.jsonl", "out-1.jsonl"]) if r["status"] == "ok"]
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from openrouter_probe.run.books.output import FINISHED, iter_records
from openrouter_probe.run.books.turns import TURNS_SUFFIX
from openrouter_probe.run.money.journal import JOURNAL_SUFFIX

__all__ = ["beside", "merged_records", "records"]


def beside(path: str | Path) -> bool:
    """Whether ``path`` is a file ``generate`` keeps beside an output (its journal, its turns)."""
    return str(path).endswith((JOURNAL_SUFFIX, TURNS_SUFFIX))


def records(paths: Iterable[str | Path]) -> Iterator[dict[str, Any]]:
    """Every record of the output files ``paths``, in file order; spend journals and turns files
    (``OUT.jsonl.ledger``, ``OUT.jsonl.turns``, given by a glob such as ``out/*``) are skipped
    with a warning."""
    for path in paths:
        if beside(path):
            what = "spend journal" if str(path).endswith(JOURNAL_SUFFIX) else "turns file"
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

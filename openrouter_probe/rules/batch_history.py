"""A snapshot file's batch history: recording, in place, a submit OpenRouter accepted.

A ``generate --batch`` run given ``--snapshot PATH`` records its first accepted submit per
``:batch`` endpoint in that file (``record_batch_acceptance``; docs/batch.md, "Where a run's
acceptance goes"). Only the top-level ``batch`` value changes: every other byte (``data``,
``sha256``, the key order and layout) stays, so a policy that pins the snapshot's ``sha256`` still
matches it. The file is replaced atomically, keeping its mode. A file that is read-only, not a
saved snapshot, or lists no such endpoint is left alone with a ``SnapshotError`` that says why (the
sender warns and the run goes on).
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from openrouter_probe.errors import Message, SnapshotError
from openrouter_probe.files import atomic_write_text
from openrouter_probe.rules.batch import BatchAcceptance, BatchListing, listing_from_json

__all__ = ["record_batch_acceptance"]

_DECODER = json.JSONDecoder()


def record_batch_acceptance(
    path: str | Path, tag: str, batch_id: str, *, at: datetime | None = None
) -> bool:
    """Record in the snapshot file ``path`` that OpenRouter accepted batch ``batch_id`` (a 202)
    for its ``:batch`` endpoint ``tag``; return ``False`` when that batch was already recorded.

    Only the file's ``batch`` value is rewritten (see the module). Raises ``SnapshotError``
    naming the file and the fix when it cannot be recorded.

    Example::

        record_batch_acceptance("kimi-k3.snapshot.json", "together", "batch-1788697047-yF7D")
    """
    target = Path(path)
    try:
        text = target.read_text(encoding="utf-8")
        doc = json.loads(text)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise SnapshotError(f"{target}: cannot read it to record batch {batch_id}: {exc}") from exc
    listing = _listing(doc, target, tag)
    when = (at or datetime.now(UTC)).astimezone(UTC).replace(microsecond=0)
    grown = listing.with_acceptance(BatchAcceptance(tag, batch_id, when))
    if grown is listing:
        return False
    if not os.access(target, os.W_OK) or not os.stat(target).st_mode & 0o222:
        # a file marked read-only is left alone, even by a user (root) who could replace it
        raise SnapshotError(
            f"{target} is read-only: batch {batch_id} accepted for {tag} is not recorded in its "
            "history; make it writable (chmod u+w) for later runs to record theirs"
        )
    new_text = _replace_value(text, "batch", grown.to_json())
    try:
        atomic_write_text(target, new_text)
    except OSError as exc:
        raise SnapshotError(
            f"cannot write {target} to record batch {batch_id}: {exc.strerror}; check the "
            "folder is writable"
        ) from exc
    return True


def _listing(doc: Any, target: Path, tag: str) -> BatchListing:
    """The file's batch listing, when it is a saved snapshot that lists ``tag``."""
    if not isinstance(doc, dict) or "format" not in doc or not isinstance(doc.get("batch"), dict):
        raise SnapshotError(
            Message(
                "no-batch-listing",
                "{target:s}: no :batch listing to record an accepted submit in (a snapshot saved "
                "before batches were probed, or a raw /endpoints body); save a fresh one with "
                "{@save_snapshot}",
                target=str(target),
            )
        )
    listing = listing_from_json(doc["batch"], where=str(target))
    if tag not in {e.tag for e in listing.endpoints}:
        raise SnapshotError(
            Message(
                "not-a-batch-endpoint",
                "{target:s}: {tag:s} is not among its :batch endpoints; re-probe it with "
                "{@save_snapshot}",
                target=str(target),
                tag=repr(tag),
            )
        )
    return listing


def _replace_value(text: str, key: str, value: Any) -> str:
    """``text`` (a JSON object) with the value of its top-level ``key`` replaced by ``value``,
    laid out as ``Snapshot.save`` lays it out, and every other byte as it was."""
    start, end = _value_span(text, key)
    laid_out = json.dumps(value, indent=2, ensure_ascii=False).replace("\n", "\n  ")
    return text[:start] + laid_out + text[end:]


def _value_span(text: str, key: str) -> tuple[int, int]:
    """Where the value of the top-level ``key`` of the JSON object ``text`` starts and ends
    (the last one, as ``json.loads`` keeps the last of a repeated key)."""
    i = _skip(text, 0)
    if not text.startswith("{", i):
        raise ValueError("not a JSON object")
    i = _skip(text, i + 1)
    found: tuple[int, int] | None = None
    while not text.startswith("}", i):
        name, i = _DECODER.raw_decode(text, i)  # the key: a JSON string
        i = _skip(text, _skip(text, i) + 1)  # past the colon
        _, end = _DECODER.raw_decode(text, i)
        if name == key:
            found = (i, end)
        i = _skip(text, end)
        if text.startswith(",", i):
            i = _skip(text, i + 1)
    if found is None:
        raise ValueError(f"no top-level {key!r}")
    return found


def _skip(text: str, i: int) -> int:
    """The first index at or after ``i`` that is not white space."""
    while i < len(text) and text[i] in " \t\r\n":
        i += 1
    return i

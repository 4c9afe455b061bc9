"""Export generator output for training a drafter: ShareGPT, plain JSONL or parquet.

Rows come from one or more output files (shards merged by row id). Only answered rows are exported:
``ok`` ones, and ``truncated`` ones when asked (``include_truncated``); failed rows never. The prompt's
messages and the assistant's answer make the conversation; the reasoning is kept beside the answer
as ``reasoning_content``.

- ``sharegpt``: ``{"id", "conversations": [{"from": "system"|"human"|"gpt", "value"}...]}``, the last
  turn with ``reasoning_content``;
- ``jsonl``: ``{"id", "dataset", "messages": [...the prompt, {"role": "assistant", "content",
  "reasoning_content"}], "provider", "model", "finish_reason", "usage"}``;
- ``parquet``: the ``jsonl`` rows as a table (pandas; needs ``pyarrow``), messages as JSON text.

Every format is written atomically (a temp file, then a rename): an export never leaves half a file.

Example::

    from openrouter_probe.generate.export import export

    export(["out.jsonl"], fmt="sharegpt", output="train.jsonl")
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

from openrouter_probe.errors import ConfigError
from openrouter_probe.files import atomic_write_bytes, atomic_write_text, ensure_not_input

__all__ = ["EXPORT_FORMATS", "export", "to_jsonl_row", "to_sharegpt"]

ExportFormat = Literal["sharegpt", "jsonl", "parquet"]
EXPORT_FORMATS: tuple[str, ...] = ("sharegpt", "jsonl", "parquet")
_SHAREGPT_ROLES = {"system": "system", "user": "human", "assistant": "gpt", "tool": "tool"}


def _text(content: Any) -> str:
    """A message's content as text (multi-part content keeps its text parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(p.get("text", ""))
            for p in content
            if isinstance(p, dict) and p.get("type") == "text"
        )
    return "" if content is None else str(content)


def to_sharegpt(record: dict[str, Any]) -> dict[str, Any]:
    """Turn one output record into a ShareGPT conversation."""
    turns = [
        {
            "from": _SHAREGPT_ROLES.get(str(m.get("role")), str(m.get("role"))),
            "value": _text(m.get("content")),
        }
        for m in record.get("messages") or []
    ]
    answer: dict[str, Any] = {"from": "gpt", "value": record.get("content") or ""}
    if record.get("reasoning"):
        answer["reasoning_content"] = record["reasoning"]
    turns.append(answer)
    return {"id": record["id"], "conversations": turns}


def to_jsonl_row(record: dict[str, Any]) -> dict[str, Any]:
    """Turn one output record into a chat-format training row."""
    answer: dict[str, Any] = {"role": "assistant", "content": record.get("content") or ""}
    if record.get("reasoning"):
        answer["reasoning_content"] = record["reasoning"]
    return {
        "id": record["id"],
        "dataset": record.get("dataset"),
        "messages": [*(record.get("messages") or []), answer],
        "provider": record.get("provider"),
        "model": record.get("model"),
        "finish_reason": record.get("finish_reason"),
        "usage": record.get("usage"),
    }


def export(
    paths: Iterable[str | Path],
    *,
    fmt: str,
    output: str | Path,
    include_truncated: bool = False,
) -> int:
    """Write the answered rows of ``paths`` to ``output`` in ``fmt``; return how many rows."""
    from openrouter_probe.generate.audit import merged_records

    if fmt not in EXPORT_FORMATS:
        raise ConfigError(f"--format {fmt!r}: use one of {', '.join(EXPORT_FORMATS)}")
    files = [str(p) for p in paths]
    try:
        ensure_not_input(output, *files)
    except ValueError as exc:
        raise ConfigError(f"-o: {exc}; name another file") from exc
    keep = {"ok", "truncated"} if include_truncated else {"ok"}
    records = [r for r in merged_records(files) if r.get("status") in keep]
    if any("messages" not in r for r in records):
        raise ConfigError(
            "some records have no `messages` (written by another tool?): the export needs the "
            "prompt of every row"
        )
    if fmt == "sharegpt":
        rows = [to_sharegpt(r) for r in records]
    else:
        rows = [to_jsonl_row(r) for r in records]
    if fmt == "parquet":
        _write_parquet(rows, Path(output))
    else:
        atomic_write_text(output, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    return len(rows)


def _write_parquet(rows: list[dict[str, Any]], output: Path) -> None:
    import io

    import pandas as pd

    frame = pd.DataFrame(
        [
            {
                **r,
                "messages": json.dumps(r["messages"], ensure_ascii=False),
                "usage": json.dumps(r["usage"], ensure_ascii=False),
            }
            for r in rows
        ],
        columns=["id", "dataset", "messages", "provider", "model", "finish_reason", "usage"],
    )
    buffer = io.BytesIO()
    try:
        frame.to_parquet(buffer, index=False)
    except ImportError as exc:
        raise ConfigError(
            f"parquet needs pyarrow ({exc}): pip install pyarrow, or use --format jsonl"
        ) from exc
    atomic_write_bytes(output, buffer.getvalue())

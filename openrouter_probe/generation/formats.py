"""The export formats, one registry (``FORMATS``): each names its row, its output and its writer.

``generation.export`` reads and filters the records and asks the format for the rest; a new
format is one entry here (``docs/training-data.md`` describes each).
"""

from __future__ import annotations

import importlib
import io
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from openrouter_probe.errors import ConfigError, Message
from openrouter_probe.files import atomic_write_bytes, atomic_write_text
from openrouter_probe.generation.conversation import (
    Conversation,
    sharegpt_turns,
    specforge_row,
)

__all__ = ["EXPORT_FORMATS", "FORMATS", "ExportFormat", "Target"]

_JSONL_COLUMNS = (
    "id", "dataset", "conversations", "tools", "provider", "model", "finish_reason", "usage",
    "meta", "sampling_params",
)  # fmt: skip
_PARQUET_EXTRA = "pip install 'openrouter-probe[parquet]'"

#: One exported pair: the output record and the row written for it.
Pair = tuple[Mapping[str, Any], Mapping[str, Any]]


@dataclass(frozen=True)
class Target:
    """Where and how an export writes: the output, one JSON array or lines, the output files
    read (a dataset card names them), the command that ran, the truncated answers superseded."""

    output: Path
    json_array: bool = False
    files: tuple[str, ...] = ()
    command: str | None = None
    superseded: int = 0


@dataclass(frozen=True)
class ExportFormat:
    """One export format (see the module).

    ``row(record, conversation, tools, preserve_thinking)`` is the exported row, or the
    ``LEFT_OUT_REASONS`` key of why the format cannot hold it; ``check(output)`` refuses an
    output the format cannot write (``ConfigError``); ``write(pairs, target)`` writes the rows.
    ``arrays``: ``-o NAME.json`` writes one JSON array; ``options``: the ``export`` keywords
    the format alone reads; ``folder``: it writes a folder, which ``push_to_hub`` uploads.
    """

    name: str
    row: Callable[[dict[str, Any], Conversation, Any, bool], dict[str, Any] | str]
    check: Callable[[Path], None]
    write: Callable[[Sequence[Pair], Target], None]
    arrays: bool = False
    options: frozenset[str] = frozenset()
    folder: bool = False


def _sharegpt_row(
    record: dict[str, Any], conv: Conversation, tools: Any, preserve_thinking: bool
) -> dict[str, Any]:
    row: dict[str, Any] = {"id": record["id"], "conversations": sharegpt_turns(conv)}
    if tools:
        row["tools"] = tools
    if "sampling_params" in record:  # where speculators' regenerate-responses keeps it
        row["metadata"] = {"sampling_params": record["sampling_params"]}
    return row


def _specforge_row(
    record: dict[str, Any], conv: Conversation, tools: Any, preserve_thinking: bool
) -> dict[str, Any] | str:
    row = specforge_row(conv, record["id"], preserve_thinking=preserve_thinking)
    if isinstance(row, dict) and "sampling_params" in record:
        row["sampling_params"] = record["sampling_params"]  # what the answers were sampled with
    return row


def _jsonl_row(
    record: dict[str, Any], conv: Conversation, tools: Any, preserve_thinking: bool
) -> dict[str, Any]:
    row: dict[str, Any] = {
        "id": record["id"],
        "dataset": record.get("dataset"),
        "conversations": conv.messages,
        "tools": tools or None,
        "provider": record.get("provider"),
        "model": record.get("model"),
        "finish_reason": record.get("finish_reason"),
        "usage": record.get("usage"),
        "meta": record.get("meta"),  # the prompt row's other columns (the dataset's data)
        "sampling_params": record.get("sampling_params"),  # as sent (None: not recorded)
    }
    if isinstance(record.get("turns"), list):
        row["turns"] = [
            {k: v for k, v in t.items() if k not in ("content", "reasoning", "tool_calls")}
            for t in record["turns"]
        ]
    return row


def _check_folder(target: Path) -> None:
    """The folder ``target`` goes in exists, or can be made (a missing one is made at the write):
    no part of its path is a file."""
    for parent in target.parents:
        if parent.exists():
            if not parent.is_dir():
                raise ConfigError(
                    Message(
                        "output-parent-is-file",
                        "{output=}: {parent:s} is a file, not a folder; name a file in a folder",
                        output=target,
                        parent=str(parent),
                    )
                )
            return


def _check_specforge(target: Path) -> None:
    if target.suffix.lower() == ".json":
        raise ConfigError(
            f"output={target}: SpecForge's scripts read JSON Lines (validate_regenerated_data.py reads "
            f"line by line; expand_reasoning_conversations.py wants .jsonl): name it "
            f"{target.with_suffix('.jsonl')}"
        )
    _check_folder(target)


def _check_hf(target: Path) -> None:
    if target.is_file():
        raise ConfigError(
            Message("hf-needs-folder", "{output=}: {fmt=hf} writes a folder; name a folder",
                    output=target)
        )  # fmt: skip
    _check_folder(target)
    from openrouter_probe.generation.hub import pyarrow_modules

    pyarrow_modules()


def _check_parquet(target: Path) -> None:
    if target.suffix.lower() in (".json", ".jsonl"):
        raise ConfigError(
            Message(
                "parquet-suffix",
                "{output=}: {fmt=parquet} writes parquet: name it {name:s}",
                output=target,
                name=str(target.with_suffix(".parquet")),
            )
        )
    _check_folder(target)
    try:
        importlib.import_module("pyarrow")
    except ImportError:
        raise ConfigError(
            Message(
                "parquet-needs-pyarrow",
                "{fmt=parquet} needs pyarrow: {extra:s} (or use {fmt=jsonl})",
                extra=_PARQUET_EXTRA,
            )
        ) from None
    import pandas as pd

    try:  # pandas' own check that this pyarrow is one it can write with (pandas 3: 16 or newer)
        pd.DataFrame().to_parquet(io.BytesIO(), engine="pyarrow")
    except ImportError as exc:
        raise ConfigError(
            Message(
                "parquet-needs-pyarrow",
                "{fmt=parquet} needs a newer pyarrow ({why:s}): pip install -U pyarrow (or use "
                "{fmt=jsonl})",
                why=" ".join(str(exc).split()),
            )
        ) from None


def _write_file(body: Callable[[list[dict[str, Any]], Target], None]) -> Callable[..., None]:
    """A writer of one file: its folder made, an error that says which output and the fix."""

    def write(pairs: Sequence[Pair], target: Target) -> None:
        output = target.output
        try:
            output.parent.mkdir(parents=True, exist_ok=True)  # -o hub/x.jsonl on a fresh tree
            body([dict(row) for _, row in pairs], target)
        except FileNotFoundError:
            raise ConfigError(
                Message(
                    "output-folder-missing",
                    "{output=}: the folder {folder:s} does not exist; create it (mkdir -p "
                    "{folder:s}) or name a file in a folder that exists",
                    output=output,
                    folder=str(output.parent),
                )
            ) from None
        except PermissionError:
            raise ConfigError(
                Message(
                    "output-permission",
                    "{output=}: permission denied writing in {folder:s}; name a file in a folder "
                    "you can write to",
                    output=output,
                    folder=str(output.parent),
                )
            ) from None
        except OSError as exc:
            raise ConfigError(
                Message(
                    "output-unwritable",
                    "{output=}: cannot write the export: {why:s}",
                    output=output,
                    why=str(exc.strerror or exc),
                )
            ) from None

    return write


def _json_body(rows: list[dict[str, Any]], target: Target) -> None:
    if target.json_array:
        inner = ",\n".join(json.dumps(r, ensure_ascii=False) for r in rows)
        atomic_write_text(target.output, f"[\n{inner}\n]\n" if rows else "[]\n")
    else:
        text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
        atomic_write_text(target.output, text)


def _parquet_body(rows: list[dict[str, Any]], target: Target) -> None:

    import pandas as pd

    nested = ("conversations", "tools", "usage", "turns", "sampling_params")
    columns = [*_JSONL_COLUMNS, "turns"]
    cells = [
        [
            json.dumps(r[k], ensure_ascii=False)
            if k in nested and r.get(k) is not None
            else r.get(k)
            for k in columns
        ]
        for r in rows
    ]
    frame = pd.DataFrame(cells, columns=columns, dtype=object)
    buffer = io.BytesIO()
    frame.to_parquet(buffer, index=False)  # (pyarrow: checked by _check_parquet before reading)
    atomic_write_bytes(target.output, buffer.getvalue())


def _write_hf(pairs: Sequence[Pair], target: Target) -> None:
    from openrouter_probe.generation import hub

    card = hub.HubCard(command=target.command, superseded=target.superseded)
    hub.write_hub_folder(pairs, target.output, card, list(target.files))


_JSON = _write_file(_json_body)

#: Every export format by name, in the order ``--format`` lists them.
FORMATS: dict[str, ExportFormat] = {
    f.name: f
    for f in (
        ExportFormat("sharegpt", _sharegpt_row, _check_folder, _JSON, arrays=True),
        ExportFormat(
            "specforge",
            _specforge_row,
            _check_specforge,
            _JSON,
            options=frozenset({"preserve_thinking"}),
        ),
        ExportFormat("jsonl", _jsonl_row, _check_folder, _JSON, arrays=True),
        ExportFormat("parquet", _jsonl_row, _check_parquet, _write_file(_parquet_body)),
        ExportFormat("hf", _jsonl_row, _check_hf, _write_hf, folder=True),
    )
}
EXPORT_FORMATS: tuple[str, ...] = tuple(FORMATS)

"""Sources: where a prompt set's rows come from, one decoded row at a time.

- a JSON Lines file: one object per line;
- a file holding one JSON array of objects (its first character is ``[``; ``export -o NAME.json``
  writes one);
- a ``.parquet`` file, or a folder of ``*.parquet`` files (``export --format hf`` writes one),
  read in batches through ``pyarrow`` (the ``parquet`` extra);
- a folder written by ``datasets``' ``save_to_disk`` (memory-mapped, not loaded);
- ``hf:OWNER/NAME`` (with ``config`` and ``split``): ``datasets.load_dataset`` with
  ``streaming=True``, so a million-row set is read as it streams, through the library's cache and
  its offline mode (``HF_HUB_OFFLINE=1`` reads what the cache holds). ``datasets`` is the ``hf``
  extra; without it, a ``hf:`` source or a ``save_to_disk`` folder says what to install.

Each row comes as ``(number, row, error)``: the line (JSONL) or the row's position from 1, the
decoded row, or why it could not be decoded (JSONL: not UTF-8, not JSON).

Example::

    from openrouter_probe.generation.sources import open_source

    source = open_source("hf:openai/gsm8k", config="main", split="train")
    for number, row, error in source.rows():
        ...
"""

from __future__ import annotations

import codecs
import importlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from openrouter_probe.api.jsontext import kind_of
from openrouter_probe.errors import ConfigError, Message
from openrouter_probe.files import json_error

__all__ = [
    "HF_EXTRA",
    "HF_PREFIX",
    "Source",
    "hf_only",
    "open_source",
    "parquet_files",
    "read_from_note",
]

HF_PREFIX = "hf:"
HF_EXTRA = "pip install 'openrouter-probe[hf]'"
_PARQUET_EXTRA = "pip install 'openrouter-probe[parquet]'"
_BATCH_ROWS = 1024


def _import(name: str, what: str, extra: str) -> Any:
    try:
        return importlib.import_module(name)
    except ImportError:
        raise ConfigError(f"{what} needs the `{name}` library: {extra}") from None


@dataclass(frozen=True)
class Source:
    """One prompt source: a path or ``hf:OWNER/NAME``, with its ``config`` and ``split``."""

    spec: str
    kind: str  # jsonl, json, parquet, disk, hf
    config: str | None = None
    split: str | None = None

    @property
    def unit(self) -> str:
        """What a row's number counts: lines of a JSONL file, rows of anything else."""
        return "line" if self.kind == "jsonl" else "row"

    def where(self, number: int) -> str:
        """``path:LINE`` (JSONL) or ``path: row N``: what an error message names."""
        return f"{self.spec}:{number}" if self.kind == "jsonl" else f"{self.spec}: row {number}"

    def rows(self) -> Iterator[tuple[int, Any, str | None]]:
        """Every row in order: ``(number, decoded row, None)`` or ``(number, None, why not)``."""
        reader = {
            "jsonl": self._jsonl,
            "json": self._json,
            "parquet": self._parquet,
            "disk": self._disk,
            "hf": self._hf,
        }[self.kind]
        return reader()

    def _jsonl(self) -> Iterator[tuple[int, Any, str | None]]:
        path = Path(self.spec)
        try:
            handle = path.open("rb")
        except OSError as exc:
            raise ConfigError(f"{path}: cannot read the prompts file: {exc.strerror}") from exc
        with handle:
            for number, raw in enumerate(handle, start=1):
                if number == 1 and raw.startswith(codecs.BOM_UTF8):
                    raw = raw[len(codecs.BOM_UTF8) :]
                try:
                    text = raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    yield number, None, f"not UTF-8 text ({exc.reason})"
                    continue
                if not text.strip():
                    continue
                try:
                    yield number, json.loads(text), None
                except ValueError as exc:
                    yield number, None, f"not JSON ({json_error(exc)})"

    def _json(self) -> Iterator[tuple[int, Any, str | None]]:
        path = Path(self.spec)
        try:
            data = json.loads(path.read_text(encoding="utf-8-sig"))
        except OSError as exc:
            raise ConfigError(f"{path}: cannot read the prompts file: {exc.strerror}") from exc
        except UnicodeDecodeError as exc:
            raise ConfigError(f"{path}: not UTF-8 text ({exc.reason})") from None
        except ValueError as exc:
            raise ConfigError(
                f"{path}: not JSON ({json_error(exc)}); a .json prompts file is one array of "
                "rows (name a JSON Lines file .jsonl)"
            ) from None
        if not isinstance(data, list):
            raise ConfigError(
                f"{path}: a .json prompts file is one JSON array of rows, not "
                f"{kind_of(data)} (name a JSON Lines file .jsonl)"
            )
        for number, row in enumerate(data, start=1):
            yield number, row, None

    def _parquet(self) -> Iterator[tuple[int, Any, str | None]]:
        pq = _import("pyarrow.parquet", f"{self.spec} (Parquet)", _PARQUET_EXTRA)
        path = Path(self.spec)
        files = parquet_files(path) if path.is_dir() else [path]
        number = 0
        for file in files:
            try:
                parquet = pq.ParquetFile(file)
            except (OSError, ValueError) as exc:
                raise ConfigError(f"{file}: not a Parquet file ({exc})") from None
            for batch in parquet.iter_batches(batch_size=_BATCH_ROWS):
                for row in batch.to_pylist():
                    number += 1
                    yield number, row, None

    def _disk(self) -> Iterator[tuple[int, Any, str | None]]:
        datasets = _import("datasets", f"{self.spec} (a datasets folder)", HF_EXTRA)
        try:
            loaded = datasets.load_from_disk(self.spec)
        except (OSError, ValueError) as exc:
            raise ConfigError(f"{self.spec}: not a datasets save_to_disk folder ({exc})") from None
        yield from _numbered(self._split_of(loaded))

    def _hf(self) -> Iterator[tuple[int, Any, str | None]]:
        datasets = _import("datasets", self.spec, HF_EXTRA)
        name = self.spec[len(HF_PREFIX) :]
        try:
            loaded = datasets.load_dataset(
                name, self.config, split=self.split or "train", streaming=True
            )
        except (OSError, ValueError, ConnectionError) as exc:
            offline = " (offline: only what the datasets cache holds)" if _offline() else ""
            raise ConfigError(
                Message(
                    "hub-unloadable",
                    "{spec:s}: cannot load it with datasets{offline:s}: {why:s}; check the name, "
                    "{config} and {split}",
                    spec=self.spec,
                    offline=offline,
                    why=str(exc).splitlines()[0] if str(exc) else type(exc).__name__,
                )
            ) from None
        yield from _numbered(loaded)

    def _split_of(self, loaded: Any) -> Any:
        """The split of a ``DatasetDict`` (``split``, else ``train``, else its only one)."""
        if not hasattr(loaded, "keys"):
            return loaded
        splits = sorted(loaded.keys())
        wanted = self.split or ("train" if "train" in splits or len(splits) != 1 else splits[0])
        if wanted not in splits:
            raise ConfigError(
                Message(
                    "hub-no-split",
                    "{spec:s}: no split {wanted:s}; it has {splits:s}: give {split}",
                    spec=self.spec,
                    wanted=repr(wanted),
                    splits=", ".join(splits),
                )
            )
        return loaded[wanted]


def _numbered(rows: Any) -> Iterator[tuple[int, Any, str | None]]:
    for number, row in enumerate(rows, start=1):
        yield number, row, None


def _offline() -> bool:
    try:
        config = importlib.import_module("datasets.config")
    except ImportError:
        return False
    return bool(getattr(config, "HF_HUB_OFFLINE", False))


def hf_only(spec: str | Path, *, config: str | None, split: str | None) -> str | None:
    """The keyword (``config``, ``split``) given for ``spec`` that only ``hf:`` ids and datasets
    folders read (a file has no config nor split), or ``None``."""
    if str(spec).startswith(HF_PREFIX):
        return None
    if config is not None:
        return "config"
    return "split" if split is not None and not Path(spec).is_dir() else None


def open_source(spec: str | Path, *, config: str | None = None, split: str | None = None) -> Source:
    """The source ``spec`` names (a path or ``hf:OWNER/NAME``); raise ``ConfigError`` naming the
    fix when it is none (a missing path, a ``hf:`` id without an owner)."""
    text = str(spec)
    if text.startswith(HF_PREFIX):
        name = text[len(HF_PREFIX) :]
        if name.count("/") != 1 or not all(name.split("/")):
            raise ConfigError(f"{text}: give hf:OWNER/NAME, e.g. hf:openai/gsm8k")
        return Source(text, "hf", config, split)
    wrong = hf_only(text, config=config, split=split)
    if wrong is not None:
        raise ConfigError(f"{wrong}= is for hf: ids and datasets folders, not the file {text}")
    path = Path(text)
    if path.is_dir():
        if _saved_dataset(path):
            return Source(text, "disk", None, split)
        if any(path.rglob("*.parquet")):
            return Source(text, "parquet")
        raise ConfigError(
            f"{path}: a folder that is neither a datasets save_to_disk folder nor holds "
            "*.parquet files; name a file, a dataset folder or hf:OWNER/NAME"
        )
    if not path.exists():
        raise ConfigError(f"{path}: cannot read the prompts file: No such file or directory")
    if path.suffix.lower() == ".parquet":
        return Source(text, "parquet")
    return Source(text, "json" if _is_json_array(path) else "jsonl")


def parquet_files(folder: Path) -> list[Path]:
    """The Parquet files a folder of them is read from: every ``*.parquet`` under it, in its
    sub-folders too (a ``datasets`` repository's ``data/train-*.parquet``), in name order."""
    return sorted(folder.rglob("*.parquet"))


def read_from_note(prompts: str | Path) -> str | None:
    """What a folder of Parquet files was read from, to say: the files (the first five and how
    many more), since every ``*.parquet`` under it counts. ``None`` for any other source."""
    path = Path(prompts)
    if not path.is_dir() or _saved_dataset(path):
        return None
    files = parquet_files(path)
    if not files:
        return None
    names = [str(f.relative_to(path)) for f in files[:5]]
    more = f" and {len(files) - 5} more" if len(files) > 5 else ""
    return f"{path}: read {len(files)} Parquet file(s) under it: {', '.join(names)}{more}"


def _saved_dataset(folder: Path) -> bool:
    """Whether ``folder`` is one ``datasets``' ``save_to_disk`` wrote."""
    return (folder / "dataset_dict.json").is_file() or (folder / "state.json").is_file()


def _is_json_array(path: Path) -> bool:
    """Whether the file holds one JSON array (its first character is ``[``), not JSON Lines. A
    file named JSON Lines (``.jsonl``, ``.ndjson``) is one only when the whole of it is one array
    (a mis-named file): otherwise its lines are rows, and a line that is an array is named as
    one, not read as the start of a ``.json`` file."""
    try:
        with path.open("rb") as handle:
            head = handle.read(4096)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the prompts file: {exc.strerror}") from exc
    if head.removeprefix(codecs.BOM_UTF8).lstrip()[:1] != b"[":
        return False
    if path.suffix.lower() not in (".jsonl", ".ndjson"):
        return True
    try:
        return isinstance(json.loads(path.read_text(encoding="utf-8-sig")), list)
    except (OSError, UnicodeDecodeError, ValueError):
        return False  # read line by line: each error names its line

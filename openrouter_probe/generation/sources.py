"""Sources: where a prompt set's rows come from, one decoded row at a time.

A JSON Lines file, a JSON array (or one object over many lines), CSV or TSV, any of them gzipped,
Parquet (a file or a folder of them, through ``pyarrow``), a ``datasets`` ``save_to_disk``
folder, or ``hf:OWNER/NAME`` (``datasets.load_dataset`` streaming, its cache and offline mode);
``docs/inputs.md`` ("Sources") says how each is read. Each row comes as ``(number, row, error)``:
the line (JSONL) or the row's position from 1, the decoded row, or why it could not be decoded.

Example::

    from openrouter_probe.generation.sources import open_source

    source = open_source("hf:openai/gsm8k", config="main", split="train")
    for number, row, error in source.rows():
        ...
"""

from __future__ import annotations

import codecs
import contextlib
import csv
import gzip
import importlib
import io
import json
import zlib
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
    kind: str  # jsonl, json, csv, tsv, parquet, disk, hf
    config: str | None = None
    split: str | None = None

    @property
    def unit(self) -> str:
        """What a row's number counts: lines of a JSONL file, rows of anything else."""
        return "line" if self.kind == "jsonl" else "row"

    def _open(self) -> Any:
        path = Path(self.spec)
        try:
            return _raw(path)
        except OSError as exc:
            raise ConfigError(f"{path}: cannot read the prompts file: {exc.strerror}") from exc

    def where(self, number: int) -> str:
        """``path:LINE`` (JSONL) or ``path: row N``: what an error message names."""
        return f"{self.spec}:{number}" if self.kind == "jsonl" else f"{self.spec}: row {number}"

    def rows(self) -> Iterator[tuple[int, Any, str | None]]:
        """Every row in order: ``(number, decoded row, None)`` or ``(number, None, why not)``."""
        reader = {
            "jsonl": self._jsonl,
            "json": self._json,
            "csv": self._csv,
            "tsv": self._csv,
            "parquet": self._parquet,
            "disk": self._disk,
            "hf": self._hf,
        }[self.kind]
        return reader()

    def _jsonl(self) -> Iterator[tuple[int, Any, str | None]]:
        with self._open() as handle, _gzip_errors(self.spec):
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
            with self._open() as handle, _gzip_errors(self.spec):
                data = json.loads(handle.read().decode("utf-8-sig"))
        except UnicodeDecodeError as exc:
            raise ConfigError(f"{path}: not UTF-8 text ({exc.reason})") from None
        except ValueError as exc:
            raise ConfigError(
                f"{path}: not JSON ({json_error(exc)}); a .json prompts file is one array of "
                "rows (name a JSON Lines file .jsonl)"
            ) from None
        if isinstance(data, dict):  # one JSON object over many lines: one row
            yield 1, data, None
            return
        if not isinstance(data, list):
            raise ConfigError(
                f"{path}: a .json prompts file is one JSON array of rows, not "
                f"{kind_of(data)} (name a JSON Lines file .jsonl)"
            )
        yield from _numbered(data)

    def _csv(self) -> Iterator[tuple[int, Any, str | None]]:
        """CSV or TSV rows by their header's column names (every value a string; a cell the
        record lacks is null; a record with more cells than the header is named)."""
        with self._open() as raw, _gzip_errors(self.spec):
            text = io.TextIOWrapper(raw, encoding="utf-8-sig", newline="")
            reader = csv.DictReader(text, delimiter="\t" if self.kind == "tsv" else ",")
            try:
                for number, row in enumerate(reader, start=1):
                    extra = row.pop(None, None)
                    if extra is not None:
                        yield number, None, f"has {len(extra)} more cell(s) than the header"
                        continue
                    yield number, row, None
            except UnicodeDecodeError as exc:
                raise ConfigError(f"{self.spec}: not UTF-8 text ({exc.reason})") from None
            except csv.Error as exc:
                where = f"{self.spec}: line {reader.line_num}"
                raise ConfigError(f"{where}: not {self.kind.upper()} ({exc})") from None

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
    suffix = _inner_suffix(path)
    if suffix == ".parquet":
        return Source(text, "parquet")
    if suffix in (".csv", ".tsv"):
        return Source(text, suffix[1:])
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


def _gzip(path: Path) -> bool:
    """Whether ``path`` is gzip: named ``.gz`` or starting with gzip's magic bytes."""
    if path.suffix.lower() == ".gz":
        return True
    try:
        with path.open("rb") as handle:
            return handle.read(2) == b"\x1f\x8b"
    except OSError:
        return False


def _inner_suffix(path: Path) -> str:
    """The suffix that says the format: ``.jsonl`` of ``rows.jsonl.gz``."""
    return (path.with_suffix("") if path.suffix.lower() == ".gz" else path).suffix.lower()


@contextlib.contextmanager
def _gzip_errors(spec: str) -> Iterator[None]:
    """A gzip file that is damaged or cut: one ``ConfigError`` naming it."""
    try:
        yield
    except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
        raise ConfigError(
            f"{spec}: a damaged or cut gzip file ({exc}); download it again"
        ) from None


def _raw(path: Path) -> Any:
    """The file's bytes (decompressed as read when it is gzip: ``NAME.gz``)."""
    return gzip.open(path, "rb") if _gzip(path) else path.open("rb")


def _head(path: Path) -> bytes:
    try:
        with _raw(path) as handle, _gzip_errors(str(path)):
            return bytes(handle.read(4096))
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the prompts file: {exc.strerror or exc}") from exc


def _whole(path: Path) -> Any:
    with _raw(path) as handle:
        return json.loads(handle.read().decode("utf-8-sig"))


def _is_json_array(path: Path) -> bool:
    """Whether the file holds one JSON array (its first character is ``[``) or one JSON object
    over many lines, not JSON Lines. A file named JSON Lines (``.jsonl``, ``.ndjson``) is one
    only when the whole of it is one array (a mis-named file): otherwise its lines are rows, and
    a line that is an array is named as one, not read as the start of a ``.json`` file."""
    head = _head(path).removeprefix(codecs.BOM_UTF8).lstrip()
    if head[:1] == b"{":  # JSON Lines, unless the first line opens a pretty-printed object
        if head.split(b"\n", 1)[0].strip() != b"{":
            return False  # (a broken first line of JSON Lines is named, never read whole)
        try:
            return isinstance(_whole(path), dict)
        except (OSError, UnicodeDecodeError, ValueError, EOFError, zlib.error):
            return False  # read line by line: each error names its line
    if head[:1] != b"[":
        return False
    if _inner_suffix(path) not in (".jsonl", ".ndjson"):
        return True
    try:
        return isinstance(_whole(path), list)
    except (OSError, UnicodeDecodeError, ValueError, EOFError, zlib.error):
        return False  # read line by line: each error names its line

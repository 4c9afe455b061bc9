"""``export --format hf DIR``: the rows as a Hugging Face dataset folder, with its card.

``DIR/data/<dataset>/train-*-<sha>.parquet`` (one schema for every row: ``hub_row``) and
``DIR/README.md``, the card: its YAML header's configs (``default`` and one per dataset) and the
rows' provenance; ``docs/inputs.md`` ("Out as a Hugging Face dataset") has the row's columns and
the card's fields. ``push_to_hub`` hands the folder to ``huggingface_hub``
(``HfApi.upload_folder``); the upload is that library's.
"""

from __future__ import annotations

import datetime
import hashlib
import importlib
import json
import re
import shutil
import tempfile
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import yaml

from openrouter_probe.errors import ConfigError, Message, ProbeError
from openrouter_probe.files import atomic_write_text
from openrouter_probe.generation.sources import HF_EXTRA

__all__ = ["HubCard", "push_to_hub", "pyarrow_modules", "write_hub_folder"]

#: Rows per Parquet shard (a shard of a few hundred MB at most for long reasoning rows).
SHARD_ROWS = 50_000


def folder_name(dataset: str) -> str:
    """The dataset's folder and config name: letters, digits, ``_``, ``.``, ``-`` only."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", dataset).strip("._") or "default"


def shard_name(index: int, shards: int, data: bytes) -> str:
    """A Parquet shard's file name, with the first 16 hex digits of its content's SHA-256:
    ``datasets`` keys its cache of a local folder on the files' names (not their content), so a
    re-export into the same folder must name its shards anew to be read back, not the cache."""
    digest = hashlib.sha256(data).hexdigest()[:16]
    return f"train-{index:05d}-of-{shards:05d}-{digest}.parquet"


def pyarrow_modules() -> Any:
    """``pyarrow`` and ``pyarrow.parquet``, or a ``ConfigError`` naming the extra to install."""
    try:
        return importlib.import_module("pyarrow"), importlib.import_module("pyarrow.parquet")
    except ImportError:
        raise ConfigError(
            Message("hf-needs-pyarrow", "{fmt=hf} needs pyarrow: {extra:s}", extra=HF_EXTRA)
        ) from None


def _text(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def _message(m: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "role": str(m.get("role")),
        "content": _text(m.get("content")) or "",
        "reasoning_content": m.get("reasoning_content")
        if isinstance(m.get("reasoning_content"), str)
        else None,
        "generated": bool(m.get("generated")),
        "tool_calls": _text(m.get("tool_calls")) if m.get("tool_calls") else None,
        "tool_call_id": m.get("tool_call_id"),
    }


def hub_row(row: Mapping[str, Any], original: Any = None) -> dict[str, Any]:
    """One exported ``jsonl`` row as the folder's Parquet row (one schema for every row)."""
    return {
        "id": str(row["id"]),
        "dataset": row.get("dataset"),
        "conversations": [_message(m) for m in row.get("conversations") or []],
        "tools": _text(row.get("tools")) if row.get("tools") else None,
        "provider": row.get("provider"),
        "model": row.get("model"),
        "finish_reason": row.get("finish_reason"),
        "usage": _text(row.get("usage")),
        "original": _text(original.get("content")) if isinstance(original, Mapping) else None,
        "meta": _text(row.get("meta")) if row.get("meta") else None,
        "sampling_params": _text(row.get("sampling_params")),
    }


def _schema(pa: Any) -> Any:
    message = pa.struct(
        [
            ("role", pa.string()),
            ("content", pa.string()),
            ("reasoning_content", pa.string()),
            ("generated", pa.bool_()),
            ("tool_calls", pa.string()),
            ("tool_call_id", pa.string()),
        ]
    )
    strings = ("id", "dataset", "tools", "provider", "model", "finish_reason", "usage", "original",
               "meta", "sampling_params")  # fmt: skip
    fields = [(name, pa.string()) for name in strings]
    fields.insert(2, ("conversations", pa.list_(message)))
    return pa.schema(fields)


@dataclass
class HubCard:
    """What the dataset card says: the provenance of the rows and how to load them."""

    rows_by_dataset: dict[str, int] = field(default_factory=dict)
    providers: Counter[str] = field(default_factory=Counter)  # answers (turns) per provider
    models: set[str] = field(default_factory=set)
    policy_sha256: set[str] = field(default_factory=set)
    policy: str | None = None
    model: str | None = None  # what the policy asks for (``models``: what answered)
    snapshot: dict[str, Any] = field(default_factory=dict)
    spent_usd: Decimal = Decimal(0)
    prompts: list[str] = field(default_factory=list)
    command: str | None = None
    superseded: int = 0
    #: rows of the prompts skipped, never sent (the runs' journal headers; the most any said)
    prompts_skipped: int = 0
    #: each dataset folder's shard files, as the card's configs name them (``write_hub_folder``)
    shards: dict[str, list[str]] = field(default_factory=dict)

    def count(self, record: Mapping[str, Any], row: Mapping[str, Any]) -> None:
        """Add one exported row: its dataset, the providers of its turns, model and policy."""
        name = str(row.get("dataset") or "default")
        self.rows_by_dataset[name] = self.rows_by_dataset.get(name, 0) + 1
        turns = record.get("turns")
        served = (
            [t.get("provider") for t in turns if isinstance(t, Mapping)]
            if isinstance(turns, list)
            else [record.get("provider")]
        )
        self.providers.update(str(p) for p in served if p)
        if record.get("model"):
            self.models.add(str(record["model"]))
        if record.get("policy_sha256"):
            self.policy_sha256.add(str(record["policy_sha256"]))

    def shares(self) -> dict[str, float]:
        total = sum(self.providers.values())
        return {p: round(n / total, 4) for p, n in self.providers.most_common()} if total else {}

    def _files(self, name: str | None) -> str | list[str]:
        """The shard files of dataset ``name`` (every dataset's: ``None``), each by name where
        they are known: ``datasets`` keys its cache of a local folder on this header, so the
        names (which carry each file's hash) make a re-export load as written, not from the
        cache."""
        if not self.shards:
            return "data/*/*.parquet" if name is None else f"data/{name}/*.parquet"
        chosen = sorted(self.shards) if name is None else [name]
        return [path for n in chosen for path in self.shards.get(n, [])]

    def header(self) -> dict[str, Any]:
        """The YAML header ``datasets`` reads: the configs (all rows; one per dataset)."""
        configs: list[dict[str, Any]] = [
            {
                "config_name": "default",
                "default": True,
                "data_files": [{"split": "train", "path": self._files(None)}],
            }
        ]
        for name in sorted({folder_name(n) for n in self.rows_by_dataset} - {"default"}):
            configs.append(
                {
                    "config_name": name,
                    "data_files": [{"split": "train", "path": self._files(name)}],
                }
            )
        return {"configs": configs, "tags": ["synthetic", "speculative-decoding", "openrouter"]}

    def provenance(self) -> dict[str, Any]:
        return {
            "generator": "openrouter-probe",
            "model": self.model,
            "served_models": sorted(self.models),
            "policy": self.policy,
            "policy_sha256": sorted(self.policy_sha256),
            "snapshot": self.snapshot or None,
            "providers": self.shares(),
            "spent_usd": float(self.spent_usd),
            "rows": dict(sorted(self.rows_by_dataset.items())),
            "superseded": self.superseded,
            "prompts": self.prompts,
            "prompts_skipped": self.prompts_skipped,
            "command": self.command,
            "exported_utc": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        }

    def render(self) -> str:
        """README.md: the YAML header, then the provenance for people and as YAML."""
        head = yaml.safe_dump(self.header(), sort_keys=False)
        prov = self.provenance()
        body = yaml.safe_dump({"provenance": prov}, sort_keys=False, allow_unicode=True)
        shares = ", ".join(f"{p} {s:.1%}" for p, s in prov["providers"].items()) or "none"
        datasets = ", ".join(f"{k} ({v:,} rows)" for k, v in prov["rows"].items())
        snap = self.snapshot or {}
        lines = [
            "---",
            head.rstrip(),
            "---",
            "",
            f"# {self.model or ', '.join(prov['served_models']) or 'model'}: generated "
            "conversations",
            "",
            f"Written by openrouter-probe from {', '.join(self.prompts) or 'its prompts'}: "
            f"{datasets}.",
            "",
            f"- model: {self.model or 'unknown'} (answered as "
            f"{', '.join(prov['served_models']) or 'unknown'})",
            f"- policy: {self.policy or 'unknown'} ({', '.join(prov['policy_sha256']) or '?'})",
            f"- snapshot: {snap.get('sha256', 'unknown')} taken {snap.get('taken_at', '?')}",
            f"- served by: {shares}",
            f"- spent: ${prov['spent_usd']:.6f} (what the spend journals record)",
            f"- command: `{self.command or 'unknown'}`",
            "",
            "Every assistant turn says whether the model wrote it in this job (`generated`);",
            "turns from the prompts are `generated: false` (mask them in training).",
            "",
            "```python",
            "from datasets import load_dataset",
            'rows = load_dataset("PATH_OR_REPO", split="train")  # or a dataset: ("...", "B3")',
            "```",
            "",
            "```yaml",
            body.rstrip(),
            "```",
            "",
        ]
        return "\n".join(lines)


def _policy_facts(card: HubCard, outputs: Iterable[str]) -> None:
    """The policy each output's journal names, its snapshot, and the journals' spend."""
    from openrouter_probe.policy.compiled import load_compiled_policy
    from openrouter_probe.run.money.journal import journal_path
    from openrouter_probe.run.money.replay import replay_journal

    for out in outputs:
        replay = replay_journal(journal_path(out), repair=False)
        card.spent_usd += replay.spent_usd
        for header in replay.headers:
            if header.get("prompts") and str(header["prompts"]) not in card.prompts:
                card.prompts.append(str(header["prompts"]))
            if card.policy is None and header.get("policy"):
                card.policy = str(header["policy"])
            skipped = header.get("rows_skipped")
            if isinstance(skipped, int) and not isinstance(skipped, bool):
                card.prompts_skipped = max(card.prompts_skipped, skipped)
    if card.policy is None:
        return
    try:
        compiled = load_compiled_policy(card.policy)
    except ProbeError:  # moved, edited or broken since the run: the card says less
        return
    card.model = compiled.model
    snap = compiled.provenance.get("snapshot") or {}
    card.snapshot = {k: snap[k] for k in ("sha256", "taken_at", "source") if k in snap}


def write_hub_folder(
    rows: Sequence[tuple[Mapping[str, Any], Mapping[str, Any]]],
    folder: Path,
    card: HubCard,
    outputs: list[str],
) -> None:
    """Write ``(record, exported row)`` pairs as Parquet shards per dataset and the card, into a
    temp folder renamed over ``folder`` at the end (never half a folder)."""
    pa, pq = pyarrow_modules()
    _policy_facts(card, outputs)
    schema = _schema(pa)
    by_dataset: dict[str, list[dict[str, Any]]] = {}
    for record, row in rows:
        card.count(record, row)
        by_dataset.setdefault(folder_name(str(row.get("dataset") or "default")), []).append(
            hub_row(row, record.get("original"))
        )
    folder.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
    try:
        for name, items in by_dataset.items():
            shards = max(1, -(-len(items) // SHARD_ROWS))
            (work / "data" / name).mkdir(parents=True)
            for i in range(shards):
                part = items[i * SHARD_ROWS : (i + 1) * SHARD_ROWS]
                table = pa.Table.from_pylist(part, schema=schema)
                shard = work / "data" / name / f"train-{i:05d}-of-{shards:05d}.parquet"
                pq.write_table(table, shard)
                named = shard.with_name(shard_name(i, shards, shard.read_bytes()))
                shard.rename(named)
                card.shards.setdefault(name, []).append(f"data/{name}/{named.name}")
        atomic_write_text(work / "README.md", card.render())
        if folder.exists():
            if not (folder / "README.md").is_file() and any(folder.iterdir()):
                raise ConfigError(
                    f"-o {folder}: a folder that holds files and no dataset card: name a new "
                    "folder (an export replaces only a folder it wrote)"
                )
            shutil.rmtree(folder)
        work.rename(folder)
    finally:
        if work.exists():
            shutil.rmtree(work, ignore_errors=True)


def push_to_hub(folder: Path, repo: str, *, api: Any = None, private: bool = True) -> str:
    """Upload ``folder`` to the dataset repo ``repo`` with ``huggingface_hub`` (its token, its
    retries); ``api`` replaces ``HfApi()`` (tests). Return the commit URL it reports."""
    if api is None:
        try:
            hub = importlib.import_module("huggingface_hub")
        except ImportError:
            raise ConfigError(
                Message(
                    "hub-needs-client",
                    "{push_to_hub} needs huggingface_hub: {extra:s}",
                    extra=HF_EXTRA,
                )
            ) from None
        api = hub.HfApi()
    api.create_repo(repo, repo_type="dataset", private=private, exist_ok=True)
    info = api.upload_folder(
        folder_path=str(folder),
        repo_id=repo,
        repo_type="dataset",
        commit_message="openrouter-probe export (hf)",
        # the shards of an earlier export have other names (their hashes): not left behind
        delete_patterns=["data/**"],
    )
    return str(getattr(info, "commit_url", info))

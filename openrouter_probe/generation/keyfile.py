"""A key per shard: the key file ``keys.create`` writes, and what ``generate``, ``status`` and
``revoke`` read from it.

Each shard spends through its own key, created with a ``limit`` by a management key
(``api.keys``), so OpenRouter holds the job's budget across machines (``docs/scale-out.md``, "A
key per shard"). The key file is the one place the secrets are written (mode 0600, atomically)::

    {"version": 1, "job": "JOB", "budget_usd": "2", "shards": 4, "created_utc": "...",
     "base_url": "https://openrouter.ai/api/v1",
     "keys": [{"shard": 0, "hash": "...", "name": "JOB-0of4", "limit_usd": "0.5",
               "key": "sk-or-v1-..."}, ...]}

No function here logs, prints or returns a secret except ``shard_key``, whose caller passes it
straight to the run (``api_key=``); the run's journal and output never hold it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from decimal import ROUND_DOWN, Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from openrouter_probe.api.keys import KeyRecord, KeysClient
from openrouter_probe.errors import APIError, ConfigError, Message
from openrouter_probe.files import atomic_write_text
from openrouter_probe.run.money.spend import allocate
from openrouter_probe.run.result import RunResult
from openrouter_probe.run.stop import StopReason

__all__ = [
    "KeyFile",
    "ShardKey",
    "create_shard_keys",
    "name_spent_key",
    "read_key_file",
    "revoke_shard_keys",
    "shard_key",
    "shard_secret",
    "split_budget",
]

log = logging.getLogger(__name__)
_MICRO = Decimal("0.000001")
VERSION = 1


@dataclass(frozen=True)
class ShardKey:
    """One shard's key as the key file holds it (``secret`` never in a repr)."""

    shard: int
    hash: str
    name: str
    limit_usd: Decimal
    secret: str = field(repr=False)

    def to_json(self) -> dict[str, Any]:
        return {
            "shard": self.shard,
            "hash": self.hash,
            "name": self.name,
            "limit_usd": str(self.limit_usd),
            "key": self.secret,
        }


@dataclass(frozen=True)
class KeyFile:
    """A job's keys, one per shard, and the budget their limits share."""

    path: Path
    job: str
    budget_usd: Decimal
    shards: int
    keys: tuple[ShardKey, ...]
    base_url: str = ""
    created_utc: str = ""

    def to_text(self) -> str:
        body = {
            "version": VERSION,
            "job": self.job,
            "budget_usd": str(self.budget_usd),
            "shards": self.shards,
            "created_utc": self.created_utc,
            "base_url": self.base_url,
            "keys": [k.to_json() for k in self.keys],
        }
        return json.dumps(body, indent=2) + "\n"


def split_budget(
    budget_usd: Decimal, shards: int, weights: Sequence[float] | None = None
) -> list[Decimal]:
    """The shards' limits: ``budget_usd`` in proportion to ``weights`` (equal without), each
    rounded down to $0.000001, so their sum never exceeds the budget."""
    if shards < 1:
        raise ConfigError(f"shards={shards}: give 1 or more")
    if budget_usd <= 0:
        raise ConfigError(f"budget_usd={budget_usd}: give an amount above 0")
    if weights is not None and len(weights) != shards:
        raise ConfigError(f"weights: {len(weights)} weights for {shards} shards; give one a shard")
    if weights is not None and any(not w > 0 for w in weights):
        raise ConfigError(f"weights={list(weights)}: every weight is a number above 0")
    parts = [Decimal(str(w)) for w in weights] if weights is not None else [Decimal(1)] * shards
    return [s.quantize(_MICRO, rounding=ROUND_DOWN) for s in allocate(budget_usd, parts)]


def _write(keyfile: KeyFile) -> None:
    atomic_write_text(keyfile.path, keyfile.to_text(), mode=0o600)


def create_shard_keys(
    job: str,
    *,
    shards: int,
    budget_usd: Decimal | float | str,
    out: str | Path,
    weights: Sequence[float] | None = None,
    expires_at: str | None = None,
    include_byok_in_limit: bool = False,
    client: KeysClient | None = None,
) -> KeyFile:
    """Create ``shards`` keys named ``JOB-IofN`` whose limits share ``budget_usd`` and write the
    key file ``out`` (mode 0600). ``out`` must not exist (its keys would be lost). A failure
    midway still writes the keys made so far, so that ``revoke_shard_keys`` can remove them."""
    target = Path(out)
    if target.exists():
        raise ConfigError(
            Message(
                "key-file-exists",
                "{path:s}: exists; revoke its keys first (or give another {out}): overwriting it "
                "would lose the secrets of keys that can still spend",
                path=str(target),
            )
        )
    if not job.strip():
        raise ConfigError("job: give the job a name (the keys are named after it)")
    try:
        budget = Decimal(str(budget_usd))
    except InvalidOperation:
        raise ConfigError(f"budget_usd={budget_usd!r}: not an amount") from None
    limits = split_budget(budget, shards, weights)
    made: list[ShardKey] = []
    with _client(client) as keys_client:
        keyfile = KeyFile(
            path=target,
            job=job,
            budget_usd=budget,
            shards=shards,
            keys=(),
            base_url=keys_client.base_url,
            created_utc=datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
        )
        try:
            for i, limit in enumerate(limits):
                name = f"{job}-{i}of{shards}"
                created = keys_client.create(
                    name,
                    limit_usd=limit,
                    include_byok_in_limit=include_byok_in_limit,
                    expires_at=expires_at,
                )
                made.append(ShardKey(i, created.info.hash, name, limit, created.secret))
        except (APIError, ConfigError) as exc:
            if made:
                _write(replace(keyfile, keys=tuple(made)))
                raise ConfigError(
                    f"{target}: created {len(made)} of {shards} keys, then: {exc}; the file "
                    "holds those made: revoke them, then create again"
                ) from exc
            raise
    keyfile = replace(keyfile, keys=tuple(made))
    _write(keyfile)
    return keyfile


def read_key_file(path: str | Path) -> KeyFile:
    """Read a key file; a readable-by-others file is said (a warning), a bad one a ``ConfigError``
    naming the file and the field."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
        mode = os.stat(p).st_mode
    except OSError as exc:
        raise ConfigError(f"{p}: cannot read the key file: {exc.strerror}") from None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        log.warning("%s: readable by others (mode %o); chmod 600 it", p, mode & 0o777)
    try:
        raw = json.loads(text)
        keys = tuple(
            ShardKey(
                int(k["shard"]),
                str(k["hash"]),
                str(k.get("name", "")),
                Decimal(str(k["limit_usd"])),
                str(k["key"]),
            )
            for k in raw["keys"]
        )
        keyfile = KeyFile(
            path=p,
            job=str(raw["job"]),
            budget_usd=Decimal(str(raw["budget_usd"])),
            shards=int(raw["shards"]),
            keys=keys,
            base_url=str(raw.get("base_url", "")),
            created_utc=str(raw.get("created_utc", "")),
        )
    except ValueError as exc:
        raise ConfigError(f"{p}: not a key file (not JSON: {exc})") from None
    except (KeyError, TypeError, InvalidOperation) as exc:
        raise ConfigError(f"{p}: not a key file (missing or bad field {exc})") from None
    return keyfile


def shard_key(keyfile: KeyFile, shard: tuple[int, int]) -> ShardKey:
    """The key of shard ``(i, n)``; ``n`` must be the file's shard count."""
    index, count = shard
    if count != keyfile.shards:
        raise ConfigError(
            Message(
                "key-file-shards",
                "{path:s}: holds keys for {shards:d} shards, not {count:d}: run the job as "
                "{shard=}",
                path=str(keyfile.path),
                shards=keyfile.shards,
                count=count,
                shard=f"i/{keyfile.shards}",
            )
        )
    for key in keyfile.keys:
        if key.shard == index:
            return key
    raise ConfigError(f"{keyfile.path}: no key for shard {index}/{count} (created midway?)")


def shard_secret(key_file: str | Path, shard: str | tuple[int, int] | None) -> str:
    """The secret of shard ``shard``'s key in ``key_file`` (``"i/n"``, ``"auto"`` or ``(i, n)``),
    for ``generate(api_key=...)``: the run's journal and output never hold it."""
    from openrouter_probe.generation.prompts import parse_shard

    if shard is None:
        raise ConfigError(
            Message(
                "key-file-needs-shard",
                "{key_file=} holds one key a shard: give {shard=i/n} or {shard=auto}",
                key_file=str(key_file),
            )
        )
    pair = parse_shard(shard) if isinstance(shard, str) else shard
    return shard_key(read_key_file(key_file), pair).secret


def name_spent_key(
    summary: RunResult, key_file: str | Path, shard: str | tuple[int, int]
) -> RunResult:
    """``summary`` of a run with ``key_file``'s key, its message naming the key when the run
    stopped at its limit (``key-limit``): its name and hash, the file, its limit there (never the
    secret)."""
    if summary.stop_reason != StopReason.KEY_LIMIT:
        return summary
    from openrouter_probe.generation.prompts import parse_shard
    from openrouter_probe.rules.quantities import format_usd

    pair = parse_shard(shard) if isinstance(shard, str) else shard
    key = shard_key(read_key_file(key_file), pair)
    named = (
        f"shard {pair[0]}/{pair[1]}'s key {key.name!r} (hash {key.hash[:12]}, {key_file}, "
        f"limit {format_usd(key.limit_usd)}): {summary.message}"
    )
    return replace(summary, message=named)


def key_records(keyfile: KeyFile, *, client: KeysClient | None = None) -> list[KeyRecord | None]:
    """What the server says of each key of the file now (``None``: a key it no longer has)."""
    with _client(client) as keys_client:
        known = {r.hash: r for r in keys_client.list_keys(include_disabled=True)}
    return [known.get(k.hash) for k in keyfile.keys]


def revoke_shard_keys(
    keyfile: KeyFile, *, delete: bool = False, client: KeysClient | None = None
) -> list[tuple[ShardKey, str]]:
    """Disable (``delete=True``: delete) every key of the file; per key what was done:
    ``disabled``, ``deleted`` or ``gone`` (the server no longer has it)."""
    done: list[tuple[ShardKey, str]] = []
    with _client(client) as keys_client:
        known = {r.hash for r in keys_client.list_keys(include_disabled=True)}
        for key in keyfile.keys:
            if key.hash not in known:
                done.append((key, "gone"))
            elif delete:
                keys_client.delete(key.hash)
                done.append((key, "deleted"))
            else:
                keys_client.update(key.hash, disabled=True)
                done.append((key, "disabled"))
    return done


def _client(client: KeysClient | None) -> contextlib.AbstractContextManager[KeysClient]:
    """``client`` left open for its owner, or a client of our own closed at the block's end."""
    return contextlib.nullcontext(client) if client is not None else KeysClient()

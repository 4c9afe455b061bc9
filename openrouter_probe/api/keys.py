"""The key management API client (``/api/v1/keys``, ``/api/v1/activity``), on ``requests``.

A ``KeysClient`` speaks for a management key (``OPENROUTER_MANAGEMENT_KEY``: a management key cannot
call completions, and an inference key cannot call these paths). Every call is one request
(``api.wire``): a create is not idempotent, so nothing here retries. The secret of a created key is
returned once, in ``CreatedKey.secret``; nothing here logs or quotes it, and its ``repr`` hides it.

Example::

    from openrouter_probe.api.keys import KeysClient

    with KeysClient() as keys:
        made = keys.create("job-0of4", limit_usd=0.5)
        print(made.info.hash, made.info.limit_usd)
        keys.update(made.info.hash, disabled=True)
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import requests

from openrouter_probe.api.connection import DEFAULT_TIMEOUT, Connection
from openrouter_probe.api.wire import Wire, Wired, read_body
from openrouter_probe.errors import APIError, ConfigError

__all__ = ["CreatedKey", "KeyRecord", "KeysClient"]


def _usd(value: Any) -> Decimal | None:
    return None if value is None else Decimal(str(value))


@dataclass(frozen=True)
class KeyRecord:
    """A key as ``/api/v1/keys`` describes it (no secret): its limit and its usage in USD."""

    hash: str
    name: str
    disabled: bool
    limit_usd: Decimal | None
    limit_remaining_usd: Decimal | None
    usage_usd: Decimal
    expires_at: str | None = None

    @classmethod
    def of(cls, data: Any) -> KeyRecord:
        if not isinstance(data, dict) or not isinstance(data.get("hash"), str):
            raise APIError(f"/api/v1/keys answered a key without a hash: {str(data)[:200]}")
        usage = _usd(data.get("usage"))
        return cls(
            hash=data["hash"],
            name=str(data.get("name") or ""),
            disabled=bool(data.get("disabled")),
            limit_usd=_usd(data.get("limit")),
            limit_remaining_usd=_usd(data.get("limit_remaining")),
            # unknown is not zero: a usage the server did not say is unknown, never $0
            usage_usd=usage if usage is not None else Decimal("NaN"),
            expires_at=data.get("expires_at"),
        )


@dataclass(frozen=True)
class CreatedKey:
    """A key just created: what the server says of it, and its secret (shown this once)."""

    info: KeyRecord
    secret: str = field(repr=False)


class KeysClient(Wired):
    """A client of the key management API. ``management_key`` defaults to
    ``OPENROUTER_MANAGEMENT_KEY``, ``base_url`` to ``OPENROUTER_BASE_URL``; ``timeout`` is
    ``(connect, read)`` seconds."""

    def __init__(
        self,
        *,
        management_key: str | None = None,
        base_url: str | None = None,
        timeout: tuple[float, float] = DEFAULT_TIMEOUT,
        session: requests.Session | None = None,
    ) -> None:
        key = (
            management_key
            if management_key is not None
            else os.environ.get("OPENROUTER_MANAGEMENT_KEY", "")
        )
        if not key.strip():
            raise ConfigError(
                "no management key: set OPENROUTER_MANAGEMENT_KEY to a management key "
                "(https://openrouter.ai/settings/management-keys); an inference key cannot "
                "create keys"
            )
        connection = Connection.resolve(api_key=key, base_url=base_url, timeout=timeout)
        super().__init__(Wire(connection, session=session))

    def __repr__(self) -> str:
        return f"KeysClient(base_url={self.base_url!r})"  # never the key

    def _call(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, str] | None = None,
        body: dict[str, Any] | None = None,
    ) -> Any:
        """One request (``api.wire``, never repeated: a create is not idempotent); its JSON."""
        answer = self._wire.send(method, path, params=params, json_body=body)
        return read_body(answer, quote=False)  # a create's answer holds the new key's secret

    def list_keys(self, *, include_disabled: bool = False) -> list[KeyRecord]:
        """Every key of the account (pages of 100, followed to the end)."""
        out: list[KeyRecord] = []
        while True:
            params = {"offset": str(len(out))}
            if include_disabled:
                params["include_disabled"] = "true"
            page = self._call("GET", "/keys", params=params).get("data") or []
            out.extend(KeyRecord.of(k) for k in page)
            if len(page) < 100:
                return out

    def create(
        self,
        name: str,
        *,
        limit_usd: Decimal | float | None = None,
        include_byok_in_limit: bool | None = None,
        expires_at: str | None = None,
    ) -> CreatedKey:
        """Create a key named ``name`` with a credit ``limit_usd`` (``None``: unlimited)."""
        options = {
            "limit": None if limit_usd is None else float(limit_usd),
            "include_byok_in_limit": include_byok_in_limit,
            "expires_at": expires_at,
        }
        body = {"name": name, **{k: v for k, v in options.items() if v is not None}}
        answer = self._call("POST", "/keys", body=body)
        secret = answer.get("key") if isinstance(answer, dict) else None
        if not isinstance(secret, str) or not secret:
            raise APIError("POST /api/v1/keys answered no `key`: the new key's secret is lost")
        return CreatedKey(KeyRecord.of(answer.get("data")), secret)

    def get(self, key_hash: str) -> KeyRecord:
        return KeyRecord.of(self._call("GET", f"/keys/{key_hash}").get("data"))

    def update(self, key_hash: str, **fields: Any) -> KeyRecord:
        """PATCH a key: ``disabled=True``, ``limit=``, ``name=``, ``include_byok_in_limit=``..."""
        return KeyRecord.of(self._call("PATCH", f"/keys/{key_hash}", body=fields).get("data"))

    def delete(self, key_hash: str) -> bool:
        return bool(self._call("DELETE", f"/keys/{key_hash}").get("deleted"))

    def activity(
        self, *, date: str | None = None, api_key_hash: str | None = None
    ) -> list[dict[str, Any]]:
        """``/api/v1/activity``: per day, model and endpoint, requests, tokens and ``usage`` USD."""
        params = {k: v for k, v in (("date", date), ("api_key_hash", api_key_hash)) if v}
        data = self._call("GET", "/activity", params=params).get("data")
        return list(data) if isinstance(data, list) else []

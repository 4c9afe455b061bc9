"""The fake's OpenRouter response cache (docs ``guides/features/response-caching``, beta).

A chat request with ``X-OpenRouter-Cache: true`` is looked up by a hash of its body, its key and its
stream mode; what a hit and a miss answer, and which answers are kept, is in
``docs/fake-server.md`` ("The response cache").
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass

from openrouter_probe.api.schema import Endpoint
from openrouter_probe.fake.content import Answer

__all__ = ["CachedAnswer", "ResponseCache", "cache_request"]

DEFAULT_TTL_S = 300
MAX_TTL_S = 86400
#: Entries kept at most (the oldest goes first).
_SIZE = 65536


@dataclass(frozen=True)
class CachedAnswer:
    """What a hit replays: the answer, whether reasoning was shown, who served it, and the
    generation it was cached from (a hit's ``/generation`` record names it as
    ``response_cache_source_id``)."""

    answer: Answer
    show: bool
    endpoint: Endpoint
    permaslug: str
    stored_s: float
    ttl_s: float
    source_id: str | None = None


def cache_request(headers: Mapping[str, str], raw: bytes, stream: bool) -> tuple[str, int] | None:
    """The cache key and TTL of a request that asks for the cache (``None``: it does not)."""
    if headers.get("X-OpenRouter-Cache", "").strip().lower() != "true":
        return None
    try:
        ttl = int(headers.get("X-OpenRouter-Cache-TTL", DEFAULT_TTL_S))
    except ValueError:
        ttl = DEFAULT_TTL_S
    ttl = min(MAX_TTL_S, max(1, ttl))
    key = headers.get("Authorization", "")
    digest = hashlib.sha256(key.encode() + b"\0" + (b"stream" if stream else b"body") + b"\0")
    digest.update(raw)
    return digest.hexdigest(), ttl


class ResponseCache:
    """The cached answers by request key; ``hits`` and ``stores`` count what it did."""

    def __init__(self) -> None:
        self._entries: OrderedDict[str, CachedAnswer] = OrderedDict()
        self.hits = 0
        self.stores = 0

    def get(self, key: str, now_s: float) -> CachedAnswer | None:
        """The answer kept for ``key``, if its TTL has not run out."""
        entry = self._entries.get(key)
        if entry is None:
            return None
        if now_s - entry.stored_s > entry.ttl_s:
            del self._entries[key]
            return None
        self.hits += 1
        return entry

    def put(self, key: str, entry: CachedAnswer) -> None:
        """Keep a whole 200 answer (a later identical request within its TTL replays it)."""
        self._entries[key] = entry
        self._entries.move_to_end(key)
        self.stores += 1
        if len(self._entries) > _SIZE:
            self._entries.popitem(last=False)

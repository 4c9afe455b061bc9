"""Where requests go and with what key: ``Connection``, resolved once.

``OPENROUTER_API_KEY`` and ``OPENROUTER_BASE_URL`` are read here and nowhere else: the sync
client (``api.client``), the batch client (``api.batches``), the key management client
(``api.keys``, for its base URL) and a paid run (``run.config.RunPlan``) each resolve one
``Connection`` from what the caller gave and the environment, with one rule: an argument wins,
then the environment, then the default; a key is stripped (blank is none); a base URL loses its
trailing ``/`` and must be http(s).

Example::

    conn = Connection.resolve()                       # the environment's key and URL
    conn = Connection.resolve(base_url=fake.base_url, api_key="sk-fake", timeout=(5, 30))
    conn.require_key("generate")                      # ConfigError: how to set one
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from openrouter_probe.errors import ConfigError, Message

__all__ = ["DEFAULT_BASE_URL", "DEFAULT_TIMEOUT", "KEYS_PAGE", "Connection"]

DEFAULT_BASE_URL = "https://openrouter.ai/api/v1"
#: ``(connect, read)`` seconds of a request, unless the caller gives its own (a batch does).
DEFAULT_TIMEOUT = (10.0, 60.0)
#: Where a person creates a key (said in every "needs an API key" error).
KEYS_PAGE = "https://openrouter.ai/settings/keys"


@dataclass(frozen=True, kw_only=True)
class Connection:
    """One way to OpenRouter: the key (``""``: none), the API root and ``(connect, read)``
    timeouts in seconds. ``key_is_blank``: the key came from an ``OPENROUTER_API_KEY`` that is
    set but empty (a person's mistake worth saying). Never shows the key in a repr."""

    api_key: str = field(default="", repr=False)
    base_url: str = DEFAULT_BASE_URL
    timeout: tuple[float, float] = DEFAULT_TIMEOUT
    key_is_blank: bool = False

    @classmethod
    def resolve(
        cls,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: tuple[float, float] = DEFAULT_TIMEOUT,
    ) -> Connection:
        """The connection of ``api_key`` and ``base_url``, the environment filling what is
        ``None`` (the module says how). A base URL that is not http(s) is refused with the way
        out."""
        url = (base_url or os.environ.get("OPENROUTER_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")
        if not url.startswith(("http://", "https://")):
            raise ConfigError(
                f"OPENROUTER_BASE_URL={url!r} is not an http(s) URL; unset it to use "
                f"{DEFAULT_BASE_URL}"
            )
        env_key = os.environ.get("OPENROUTER_API_KEY")
        key = api_key if api_key is not None else (env_key or "")
        blank = api_key is None and env_key is not None and not env_key.strip()
        return cls(
            api_key=key.strip(),
            base_url=url,
            timeout=timeout,
            key_is_blank=blank,
        )

    @property
    def has_key(self) -> bool:
        """Whether requests carry an API key."""
        return bool(self.api_key)

    @property
    def site(self) -> str:
        """The site that serves the API (``https://openrouter.ai``): the root without ``/api/vN``."""
        return re.sub(r"/api/v\d+$", "", self.base_url)

    def require_key(self, what: str, hint: str = "") -> str:
        """The key, or a ``ConfigError`` saying that ``what`` needs one and how to set it
        (``hint`` adds the caller's own way out)."""
        if not self.api_key:
            raise ConfigError(
                Message(
                    "no-key",
                    "{what:s} needs an API key: OPENROUTER_API_KEY {state:s}; export "
                    "OPENROUTER_API_KEY=... (create one at {page:s}){hint:s}",
                    what=what,
                    state="is set but empty" if self.key_is_blank else "is not set",
                    page=KEYS_PAGE,
                    hint=hint,
                )
            )
        return self.api_key

    def authorization(self) -> dict[str, str]:
        """The key's ``Authorization`` header (none without a key): the one place it is built,
        for the sync clients (``api.wire``) and a paid run's transport alike."""
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    def headers(self, *, accept: str = "application/json") -> dict[str, str]:
        """The headers of one request: ``Accept``, and the key's ``Authorization`` when there is
        one (never for public HTML: the provider page does not need it, so it never gets it)."""
        headers = {"Accept": accept}
        if accept != "text/html":
            headers.update(self.authorization())
        return headers

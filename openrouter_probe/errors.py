"""The exception tree of openrouter-probe.

Every error the library raises on purpose is a ``ProbeError``; the CLI shows it as one line and
exits 1. Foreign exceptions (``requests``, ``json``, ``yaml``, ``pydantic``) are translated into this
tree in one place each and chained with ``raise ... from exc``.

::

    ProbeError
    ├── ConfigError                 a missing key, a bad environment variable or option
    │   └── OptionError             a keyword's value, or a pair of keywords, refused (.options,
    │                               .values: the CLI names each as its flag and exits 2)
    ├── APIError                    talking to OpenRouter failed
    │   ├── APIConnectionError      no HTTP answer: DNS, refused, reset, timeout
    │   └── APIStatusError          an HTTP error status (.status_code, .code, .message, .metadata,
    │       │                       .body, .retry_after, .refusal: a 402/403's case, api.envelope,
    │       │                       .kind: final or not, api.error_rules)
    │       ├── RateLimitError      429
    │       ├── InsufficientCreditsError   402
    │       └── NoRouteError        404 for a model or route that has no endpoint
    ├── PolicyError                 a policy spec or provider block is invalid (.errors: loc/msg pairs)
    └── SnapshotError               a snapshot or page could not be read or holds no endpoints

A spend cap that is reached is not an error: the run stops sending, drains what is in flight and
says so in its ``RunSummary`` (``stop_reason``), so nothing here is raised for it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "APIConnectionError",
    "APIError",
    "APIStatusError",
    "ConfigError",
    "InsufficientCreditsError",
    "NoRouteError",
    "OptionError",
    "PolicyError",
    "ProbeError",
    "RateLimitError",
    "SnapshotError",
    "first_validation_error",
    "validation_errors",
]


class ProbeError(Exception):
    """Base class of every error openrouter-probe raises on purpose."""


class ConfigError(ProbeError):
    """The environment or the options are unusable (e.g. a key is needed but not set)."""


class OptionError(ConfigError):
    """A value given for a keyword (or a combination of keywords) is refused: a usage error.

    ``template`` names each keyword in braces; ``values`` holds each keyword's value as given.
    ``{name}`` is the keyword alone (``limit=``; ``{name:bare}``: ``limit``, for prose),
    ``{name=}`` the keyword with its value (``read_timeout_s=-1.0``), ``{name=text}`` the keyword
    with that value (``fmt='hf'``).
    ``str()`` is the library's wording; the CLI renders the same template with each command's
    own flags (``--read-timeout -1.0``) and exits 2.

    Example::

        OptionError("give {limit} or {sample}, not both", limit=2, sample=1)
        # str(): "give limit= or sample=, not both"; the CLI: "give --limit or --sample, not both"
    """

    def __init__(self, template: str, **values: Any) -> None:
        self.template = template
        self.values = values
        super().__init__(self.render(keyword_term))

    @property
    def options(self) -> tuple[str, ...]:
        """The keywords the error is about, in the order given."""
        return tuple(self.values)

    def render(self, term: Any) -> str:
        """The message with each ``{name}``, ``{name=}`` and ``{name=text}`` said by ``term(name,
        value, given)`` (``given``: whether a value is shown)."""
        values = self.values

        class _Term:
            def __init__(self, key: str) -> None:
                self.key = key

            def __format__(self, spec: str) -> str:
                name, eq, text = self.key.partition("=")
                if not eq:
                    said = str(term(name, None, False))
                    return said.removesuffix("=") if spec == "bare" else said
                value: Any = values.get(name) if not text else _literal(text)
                return str(term(name, value, True))

        class _Fields(dict[str, _Term]):
            def __missing__(self, key: str) -> _Term:
                return _Term(key)

        return self.template.format_map(_Fields())


def _literal(text: str) -> Any:
    return {"True": True, "False": False}.get(text, text)


def keyword_term(name: str, value: Any, given: bool) -> str:
    """A keyword as a Python caller passes it: ``name=`` alone, ``name=VALUE`` with its value."""
    return f"{name}={value!r}" if given else f"{name}="


class APIError(ProbeError):
    """Talking to the OpenRouter API failed."""

    def __init__(self, message: str, *, url: str | None = None) -> None:
        super().__init__(message)
        self.url = url


class APIConnectionError(APIError):
    """No HTTP response was received (connection refused or reset, DNS failure, timeout)."""


class APIStatusError(APIError):
    """OpenRouter answered with an error status.

    ``code``, ``message`` and ``metadata`` come from OpenRouter's error envelope
    ``{"error": {"code", "message", "metadata"}}`` when the body has one (``api.envelope``: a
    nested ``error.error`` read through, the message cleaned for a person).
    """

    def __init__(
        self,
        message: str,
        *,
        status_code: int,
        url: str | None = None,
        code: int | str | None = None,
        metadata: Mapping[str, Any] | None = None,
        body: str = "",
        retry_after: float | None = None,
        refusal: str | None = None,
        kind: str | None = None,
    ) -> None:
        super().__init__(message, url=url)
        self.status_code = status_code
        self.code = code
        self.message = message
        self.metadata: dict[str, Any] = dict(metadata or {})
        self.body = body
        self.retry_after = retry_after
        #: what a 402 or 403 says (``api.envelope.refusal``: ``in_flight``, ``key_limit``,
        #: ``too_large``, ``credits``, ``budget``, ``flagged``); ``None`` for other statuses
        self.refusal = refusal
        #: what the error table makes of it (``api.error_rules``: ``transient``, ``pause``,
        #: ``held``, ``row``, ``run``); the sync client retries the first three
        self.kind = kind


class RateLimitError(APIStatusError):
    """HTTP 429: OpenRouter or the upstream provider is rate limiting."""


class InsufficientCreditsError(APIStatusError):
    """HTTP 402: the account or key has too few credits for the request."""


class NoRouteError(APIStatusError):
    """HTTP 404: the model is unknown, or no endpoint satisfies the routing constraints."""


class PolicyError(ProbeError):
    """A policy spec or provider block is invalid.

    ``errors`` is a list of ``(loc, msg)`` pairs, ``loc`` naming the key (``provider.order[2]``).
    """

    def __init__(
        self,
        message: str,
        *,
        source: str | None = None,
        errors: Sequence[tuple[str, str]] = (),
    ) -> None:
        self.reason = message
        self.source = source
        self.errors = list(errors)
        detail = "; ".join(f"{loc}: {msg}" if loc else msg for loc, msg in self.errors)
        where = f"{source}: " if source else ""
        full = f"{where}{message}" + (f" ({detail})" if detail else "")
        super().__init__(full)


class SnapshotError(ProbeError):
    """A snapshot, endpoints body or provider page could not be read or holds no endpoints."""


_TYPE_TAGS = frozenset({"str", "int", "float", "bool", "list", "dict", "none", "decimal"})


def _is_type_tag(part: str) -> bool:
    """Pydantic puts union-member tags (``float``, ``literal[...]``, ``SortSpec``) in ``loc``;
    keys in our payloads are lowercase identifiers."""
    return "[" in part or "(" in part or part in _TYPE_TAGS or part[:1].isupper()


def validation_errors(exc: Any, *, prefix: str = "") -> list[tuple[str, str]]:
    """Turn a pydantic ``ValidationError`` into ``(loc, msg)`` pairs a person can act on.

    ``loc`` reads like the YAML it points at (``provider.order[2]``): union-member tags such as
    ``literal[...]`` or ``list[str]`` are dropped, and messages for the same key are merged.
    """
    merged: dict[str, list[str]] = {}
    for err in exc.errors():
        keep_all = err["type"] == "extra_forbidden"  # the loc *is* the unknown key: keep it as is
        parts = [p for p in err["loc"] if keep_all or isinstance(p, int) or not _is_type_tag(p)]
        loc = prefix + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in parts)
        loc = loc.lstrip(".")
        msg = str(err["msg"]).removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "not an accepted key"
        elif err["type"] == "missing":
            msg = "required"
        if msg not in merged.setdefault(loc, []):
            merged[loc].append(msg)
    return [(loc, "; or ".join(msgs)) for loc, msgs in merged.items()]


def first_validation_error(exc: Any, *, prefix: str = "") -> str:
    """The first of ``validation_errors(exc)`` as one ``"loc: msg"`` phrase (``<root>`` for the
    document itself): for messages that name one problem and the fix."""
    errors = validation_errors(exc, prefix=prefix)
    if not errors:
        return "<root>: invalid"
    loc, msg = errors[0]
    return f"{loc or '<root>'}: {msg}"

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
says so in its ``RunResult`` (``stop_reason``), so nothing here is raised for it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = [
    "ADVICE",
    "APIConnectionError",
    "APIError",
    "APIStatusError",
    "ConfigError",
    "InsufficientCreditsError",
    "Message",
    "NoRouteError",
    "OptionError",
    "PolicyError",
    "ProbeError",
    "RateLimitError",
    "Shown",
    "SnapshotError",
    "braced",
    "first_validation_error",
    "keyword_term",
    "reason",
    "render_template",
    "rendered",
    "validation_errors",
]


class ProbeError(Exception):
    """Base class of every error openrouter-probe raises on purpose."""


class ConfigError(ProbeError):
    """The environment or the options are unusable (e.g. a key is needed but not set)."""


class OptionError(ConfigError):
    """A value given for a keyword (or a combination of keywords) is refused: a usage error.

    ``template`` names each keyword in braces (``render_template``); ``values`` holds each
    keyword's value as given. ``str()`` is the library's wording; the CLI renders the same
    template with each command's own flags (``--read-timeout -1.0``) and exits 2.

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

    def render(self, term: Term) -> str:
        """The message with each ``{name}``, ``{name=}`` and ``{name=text}`` said by ``term(name,
        value, given)`` (``given``: whether a value is shown)."""
        return render_template(self.template, self.values, term)


#: How an interface says a keyword: ``term(name, value, given)`` (``keyword_term``, the CLI's
#: ``flag_of``).
Term = Callable[[str, Any, bool], str]


def render_template(template: str, values: Mapping[str, Any], term: Term) -> str:
    """``template`` with its fields said: ``{name}`` is a keyword alone (``term``: ``limit=`` /
    ``--limit``; ``{name:bare}``: ``limit``, for prose), ``{name=}`` with its value in ``values``
    (``max_wait_s=60`` / ``--max-wait 60``), ``{name=text}`` with that value (``fmt='hf'``);
    ``{@step}`` is advice, a step the interface says its own way (``term``
    gets ``"@step"``: ``ADVICE`` for the library, the CLI's whole command lines); a field with
    any other format spec (``{count:,}``, ``{path:s}``) is a plain value of ``values``
    formatted with it, the same in every interface (a ``Message`` value is rendered with
    ``term`` too)."""

    class _Field:
        def __init__(self, key: str) -> None:
            self.key = key

        def __format__(self, spec: str) -> str:
            if self.key.startswith("@"):  # advice: a step said in the interface's own terms
                return render_template(str(term(self.key, None, False)), values, term)
            name, eq, text = self.key.partition("=")
            if not eq:
                if spec and spec != "bare":
                    plain = values[name]
                    if isinstance(plain, Message):  # a message inside a message: said alike
                        return format(plain.render(term), spec)
                    return format(plain, spec)
                said = str(term(name, None, False))
                return said.removesuffix("=") if spec == "bare" else said
            value: Any = values.get(name) if not text else _literal(text)
            return str(term(name, value, True))

    class _Fields(dict[str, _Field]):
        def __missing__(self, key: str) -> _Field:
            return _Field(key)

    return template.format_map(_Fields())


class Shown(str):
    """A value said as it is, never quoted: a placeholder (``PATH``), a figure (``60M``)."""

    def __repr__(self) -> str:
        return str(self)


def braced(text: object) -> str:
    """``text`` to stand as itself in a template (``render_template``): its braces doubled."""
    return str(text).replace("{", "{{").replace("}", "}}")


def _literal(text: str) -> Any:
    if text.isupper():
        return Shown(text)
    return {"True": True, "False": False}.get(text, text)


class Message(str):
    """A message as data: a stable ``code``, a ``template`` and its ``values``.

    As a ``str`` it is the library's wording, keywords as a Python caller passes them
    (``render_template`` with ``keyword_term``); each interface renders the same template with
    its own names (``render(term)``: the CLI says each keyword as the running command's flag).
    Warnings, stop messages and errors carry one; ``str`` operations on it give plain text.

    Example::

        m = Message("wait-too-long", "the wait is {wait:.0f} s, over {max_wait_s=} s",
                    wait=90.0, max_wait_s=60)
        str(m)       # 'the wait is 90 s, over max_wait_s=60 s'
        m.code       # 'wait-too-long'
        m.render(lambda name, value, given: f"--{name} {value}")  # '... over --max_wait_s 60 s'
    """

    code: str
    template: str
    values: Mapping[str, Any]

    def __new__(cls, code: str, template: str, /, **values: Any) -> Message:
        self = super().__new__(cls, render_template(template, values, keyword_term))
        self.code, self.template, self.values = code, template, dict(values)
        return self

    def render(self, term: Term) -> str:
        """The message with each keyword said by ``term``."""
        return render_template(self.template, self.values, term)

    @classmethod
    def joined(cls, code: str, separator: str, parts: Sequence[object]) -> Message:
        """``parts`` (messages or plain text) joined by ``separator``, each still said by the
        interface that renders the whole."""
        template = braced(separator).join(f"{{p{i}:s}}" for i in range(len(parts)))
        return cls(code, template, **{f"p{i}": p for i, p in enumerate(parts)})

    def __reduce__(self) -> Any:  # copy and pickle keep the data
        return (functools.partial(Message, self.code, self.template, **self.values), ())


def reason(exc: BaseException) -> str:
    """What ``exc`` says: its ``Message`` where it carries one (kept as data), else its text."""
    return exc.args[0] if exc.args and isinstance(exc.args[0], Message) else str(exc)


def rendered(text: object, term: Term) -> str:
    """``text`` as ``term`` says it: a ``Message`` (or an error carrying one) rendered, anything
    else as its ``str``."""
    if isinstance(text, OptionError):
        return text.render(term)
    said = reason(text) if isinstance(text, BaseException) else text
    return said.render(term) if isinstance(said, Message) else str(said)


#: Advice as a Python caller takes it, by step (``{@step}`` in a template; the CLI has its own
#: table of the same steps as command lines).
ADVICE: dict[str, str] = {
    "save_snapshot": "`orp.probe(MODEL).save(PATH)`",
    "no_cap": "`budget_usd=None`",
    "save_model_snapshot": '`orp.probe("{model:s}").save(PATH)`',  # a message with ``model``
    "verify_evidence": "`orp.verify_precision(...)` and `report.to_evidence_yaml()`",
    "plan_verify": "`orp.plan_precision_check(...)`",
    # a policy's steps (``policy.spec``, ``policy.compiled``, ``policy.drift``): messages with
    # ``spec``, ``output``, ``policy`` as their values
    "compile_policy": '`orp.compile_policy(orp.load_spec("{spec:s}"), SNAPSHOT).save("{output:s}")`',
    "explain_policy": '`orp.load_compiled_policy("{policy:s}").decisions`',
    "explain_spec": "`orp.compile_policy(spec, snapshot, allow_empty=True).decisions`",
    "lint_policy": "`orp.lint_block(BLOCK, orp.probe(MODEL).endpoints, model=MODEL)`",
    "recompile_fresh": "`orp.compile_policy(spec, orp.probe(MODEL))`",
    "recheck_write": '`report.recompiled.save("{policy:s}")`',
    "recheck_with_spec": (
        "`orp.check_policy(policy, snapshot, spec=orp.load_spec(SPEC))`, then "
        '`report.recompiled.save("{policy:s}")`'
    ),
    "recheck_after_edit": "`orp.check_policy(policy, snapshot, spec=orp.load_spec(SPEC))` again",
}


def keyword_term(name: str, value: Any, given: bool) -> str:
    """A keyword as a Python caller passes it: ``name=`` alone, ``name=VALUE`` with its value
    (a text quoted, ``fmt='hf'``; anything else as it prints: ``out=/tmp/a.jsonl``,
    ``budget_usd=0.5``)."""
    if name.startswith("@"):
        return ADVICE[name[1:]]
    if not given:
        return f"{name}="
    return f"{name}={value!r}" if isinstance(value, str) else f"{name}={value}"


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
        full = Message(
            getattr(message, "code", "policy"),
            "{where:s}{reason:s}{detail:s}",
            where=where,
            reason=message,
            detail=f" ({detail})" if detail else "",
        )
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
        msg = _plain(str(err["msg"]).removeprefix("Value error, "), err["type"])
        if err["type"] == "extra_forbidden":
            msg = "not an accepted key"
        elif err["type"] == "missing":
            msg = "required"
        if msg not in merged.setdefault(loc, []):
            merged[loc].append(msg)
    return [(loc, "; or ".join(msgs)) for loc, msgs in merged.items()]


#: pydantic's words for a type, in the YAML's: a person edits a file, not a model class.
_PLAIN_TYPES = (
    ("a valid list", "a list"),
    ("a valid string", "a string"),
    ("a valid integer", "a whole number"),
    ("a valid number", "a number"),
    ("a valid boolean", "true or false"),
)


def _plain(msg: str, kind: str) -> str:
    """``msg`` in the file's words: "should be a mapping", not "Input should be a valid
    dictionary or instance of SortSpec" (review of 0.3: a model class leaked into lint)."""
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        return "should be a mapping"
    if msg.startswith("Input should be "):
        msg = msg.removeprefix("Input ")
        for words, plain in _PLAIN_TYPES:
            msg = msg.replace(words, plain)
    return msg


def first_validation_error(exc: Any, *, prefix: str = "") -> str:
    """The first of ``validation_errors(exc)`` as one ``"loc: msg"`` phrase (``<root>`` for the
    document itself): for messages that name one problem and the fix."""
    errors = validation_errors(exc, prefix=prefix)
    if not errors:
        return "<root>: invalid"
    loc, msg = errors[0]
    return f"{loc or '<root>'}: {msg}"

"""Faults the fake server injects, by rate or by schedule (the endpoints it degrades:
``fake.degrade``).

The ``--faults`` spec (``KIND[:TAG]=RATE|@N+M[/SECONDS]`` entries, or a YAML file) and what each
kind does are in ``docs/fake-server.md`` (``FAULT_KINDS`` here). Draws are seeded by the server's
seed, the request's number and the attempt, so a run with the same seed and the same arrival order
sees the same faults. Upstream faults are drawn per attempt: with fallbacks allowed a client sees
one only when every admitted endpoint failed, as with OpenRouter.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from openrouter_probe.api.schema import Endpoint
from openrouter_probe.errors import ConfigError, Message
from openrouter_probe.fake.refusals import ACCOUNT_REFUSALS
from openrouter_probe.fake.tags import check_tags, option_value, read_rate, refused_at
from openrouter_probe.rules.routing import matches

__all__ = [
    "FAULT_KINDS",
    "FaultPlan",
    "FaultRule",
    "check_fault_tags",
    "load_faults",
    "parse_faults",
    "uniform",
]

Phase = Literal["request", "upstream", "response", "batch"]

#: Every fault kind, the phase it strikes in and what it does.
FAULT_KINDS: dict[str, tuple[Phase, str]] = {
    "platform_429": (
        "request",
        "OpenRouter's own 429 with Retry-After SECONDS (default 10) and X-RateLimit-* headers",
    ),
    "key_429": (
        "request",
        "a 429 'Rate limit exceeded' that names no provider and has no X-RateLimit-* headers, "
        "Retry-After SECONDS (default 10) as an HTTP date",
    ),
    "in_flight_402": (
        "request",
        "the account's in-flight budget full: OpenRouter's 402 in_flight_budget_exhausted with "
        "Retry-After SECONDS (default 1)",
    ),
    **{kind: ("request", said) for kind, said in ACCOUNT_REFUSALS.items()},
    "upstream_429": ("upstream", "the provider's 429: 'Provider returned error', metadata.raw"),
    "upstream_502": ("upstream", "502 'Provider returned error' (invalid upstream response)"),
    "upstream_503": ("upstream", "503: the provider is overloaded"),
    "wrapped_400": ("upstream", "a 400 'Provider returned error' wrapping a transient 429/5xx"),
    "stream_error": ("response", "a mid-stream error chunk, finish_reason 'error', HTTP 200"),
    "length_error": (
        "response",
        "the whole answer, finish_reason 'length', then a mid-stream error 400 'Token limit "
        "reached' (streams)",
    ),
    "choice_error": ("response", "a 200 body whose choice carries an error (non-streaming)"),
    "finish_null": (
        "response",
        "the answer runs to max_tokens and ends with finish_reason null (xAI's way of a cut)",
    ),
    "overbill": (
        "response",
        "bills /FACTOR (default 6) x max_tokens output tokens, the excess as reasoning (providers "
        "that bill past the limit)",
    ),
    "byok": (
        "response",
        "the answer is billed to the user's own provider key: is_byok true, cost 0 (OpenRouter's "
        "tools' fees only), cost_details.upstream_inference_cost the tokens' price",
    ),
    "drop": ("response", "the connection closes mid-body"),
    "slow_first_byte": ("response", "the first byte waits SECONDS (default 30)"),
    "keepalive": (
        "response",
        "only keep-alives (': OPENROUTER PROCESSING', padding) for SECONDS (default 600), then the "
        "answer",
    ),
    "stall": ("response", "a stream stops for SECONDS (default 300), then the connection closes"),
    # The Batch API (fake/batches.py): @N counts batches, except line_fail's (lines of each batch).
    "batch_failed": ("batch", "the provider ends the batch as failed after validation"),
    "batch_expire": ("batch", "the batch runs to expires_at, then expired (half its lines billed)"),
    "stuck": ("batch", "the batch stays in_progress with nothing done until it expires"),
    "line_fail": ("batch", "a batch line fails with rate_limit_exceeded (not billed)"),
    "batch_404": ("batch", "GET answers 404 'Batch job ID not found.' for SECONDS (default 2)"),
}

DEFAULT_SECONDS = {
    "slow_first_byte": 30.0,
    "stall": 300.0,
    "platform_429": 10.0,
    "key_429": 10.0,
    "in_flight_402": 1.0,
    "in_flight_402_body": 120.0,
    "keepalive": 600.0,
    "overbill": 6.0,  # not seconds: the factor of max_tokens billed
    "batch_404": 2.0,
}

_MASK = (1 << 64) - 1


def uniform(*parts: int) -> float:
    """A draw in [0, 1) fixed by ``parts`` (integers mixed, then one splitmix64 finalizer).

    Cheap and stateless, so a draw depends on the seed and the request's number, not on the order
    in which concurrent requests happened to draw.
    """
    x = 0
    for part in parts:
        x = (x * 0x9E3779B97F4A7C15 + part + 0x632BE59BD9B4E019) & _MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK
    return ((x ^ (x >> 31)) >> 11) / 9007199254740992.0


@dataclass(frozen=True)
class FaultRule:
    """One fault: its kind, how often (``rate``) or when (``requests``), where, and how long."""

    kind: str
    rate: float = 0.0
    requests: frozenset[int] = frozenset()
    tag: str | None = None
    seconds: float | None = None

    @property
    def phase(self) -> Phase:
        return FAULT_KINDS[self.kind][0]

    @property
    def wait_s(self) -> float:
        return self.seconds if self.seconds is not None else DEFAULT_SECONDS.get(self.kind, 0.0)

    def applies_to(self, endpoint: Endpoint | None, *, stream: bool) -> bool:
        if self.kind in ("stream_error", "stall", "length_error") and not stream:
            return False
        if self.kind == "choice_error" and stream:
            return False
        return self.tag is None or (endpoint is not None and matches(self.tag, endpoint))

    def strikes(self, number: int, *draw: int) -> bool:
        """Whether the rule strikes request (or batch, or line) ``number``: listed, or drawn at
        its rate (``uniform(*draw)``)."""
        if self.requests:
            return number in self.requests
        return self.rate >= 1.0 or (self.rate > 0 and uniform(*draw) < self.rate)


@dataclass(frozen=True)
class FaultPlan:
    """The rules of a run and the seed their draws use."""

    rules: tuple[FaultRule, ...] = ()
    seed: int = 0

    def __bool__(self) -> bool:
        return bool(self.rules)

    def draw(
        self,
        phase: Phase,
        request_no: int,
        stream: bool,
        endpoint: Endpoint | None = None,
        attempt: int = 0,
    ) -> FaultRule | None:
        """The fault that strikes this request's ``attempt`` (0 first) in ``phase``, if any."""
        for index, rule in enumerate(self.rules):
            if rule.phase != phase or not rule.applies_to(endpoint, stream=stream):
                continue
            if rule.requests and attempt > 0:
                continue  # listed request numbers strike their first attempt only
            if rule.strikes(request_no, self.seed, request_no, attempt, index, 2):
                return rule
        return None


def _rule(
    kind: str,
    tag: str | None,
    rate: float | None,
    requests: Iterable[int],
    seconds: float | None,
    where: object,
) -> FaultRule:
    """One rule, checked (``where``: what to name in an error)."""
    if kind not in FAULT_KINDS:
        known = ", ".join(sorted(FAULT_KINDS))
        raise ConfigError(
            refused_at(
                where, "unknown fault {kind:s} (known: {known:s})", kind=repr(kind), known=known
            )
        )
    reqs = frozenset(requests)
    if any(n < 1 for n in reqs):
        raise ConfigError(refused_at(where, "request numbers count from 1"))
    if rate is None and not reqs:
        raise ConfigError(refused_at(where, "give a rate (0..1) or request numbers"))
    if seconds is not None and seconds < 0:
        raise ConfigError(refused_at(where, "seconds must not be negative"))
    return FaultRule(kind=kind, rate=rate or 0.0, requests=reqs, tag=tag, seconds=seconds)


def parse_faults(spec: str, *, seed: int = 0) -> FaultPlan:
    """Parse ``--faults``: ``KIND[:TAG]=RATE|@N+M[/SECONDS]`` entries separated by commas.

    Example: ``parse_faults("upstream_429=0.05,drop=@3")``. A path to a ``.yaml``/``.yml`` file is
    read with ``load_faults``.
    """
    text = spec.strip()
    if text.endswith((".yaml", ".yml")):
        return load_faults(text, seed=seed)
    rules = []
    for raw in filter(None, (part.strip() for part in text.split(","))):
        where = Message("faults-entry", "{faults:bare} entry {raw:s}", raw=repr(raw))
        if "=" not in raw:
            raise ConfigError(
                refused_at(where, "expected KIND=RATE or KIND=@N (e.g. upstream_429=0.05)")
            )
        left, right = raw.split("=", 1)
        kind, _, tag = left.partition(":")
        value, _, secs = right.partition("/")
        seconds = None
        if secs:
            try:
                seconds = float(secs.removesuffix("s"))
            except ValueError:
                raise ConfigError(
                    refused_at(where, "{secs:s} is not a number of seconds", secs=repr(secs))
                ) from None
        numbers: list[int] = []
        if value.startswith("@"):
            try:
                numbers = [int(n) for n in value[1:].split("+")]
            except ValueError:
                raise ConfigError(
                    refused_at(
                        where, "{value:s} is not @N or @N+M (request numbers)", value=repr(value)
                    )
                ) from None
        rate = None if numbers else read_rate(value, where)
        rules.append(_rule(kind.strip(), tag or None, rate, numbers, seconds, where))
    return FaultPlan(tuple(rules), seed)


def load_faults(path: str | Path, *, seed: int = 0) -> FaultPlan:
    """Read a fault plan from YAML: a list of rules, or a mapping with a ``faults`` list."""
    import yaml

    p = Path(path)
    try:
        doc = yaml.safe_load(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{p}: cannot read the fault file: {exc.strerror}") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"{p}: not YAML: {str(exc).splitlines()[0]}") from exc
    items = doc.get("faults") if isinstance(doc, Mapping) else doc
    if not isinstance(items, list):
        raise ConfigError(f"{p}: expected a list of faults (or a mapping with 'faults:')")
    rules = []
    for i, item in enumerate(items):
        where = f"{p}: faults[{i}]"
        if not isinstance(item, Mapping) or "kind" not in item:
            raise ConfigError(
                f"{where}: each fault is a mapping with 'kind' (and rate or requests)"
            )
        extra = sorted(set(item) - {"kind", "rate", "requests", "tag", "seconds"})
        if extra:
            raise ConfigError(
                f"{where}: unknown key {extra[0]!r} (kind, rate, requests, tag, seconds)"
            )
        requests = item.get("requests") or []
        if not isinstance(requests, list) or not all(isinstance(n, int) for n in requests):
            raise ConfigError(f"{where}.requests: a list of request numbers")
        rate = None if item.get("rate") is None else read_rate(str(item["rate"]), where)
        seconds = None if item.get("seconds") is None else float(item["seconds"])
        rules.append(_rule(str(item["kind"]), item.get("tag"), rate, requests, seconds, where))
    return FaultPlan(tuple(rules), seed)


def check_fault_tags(plan: FaultPlan, endpoints: Sequence[Endpoint]) -> None:
    """Refuse a fault whose ``TAG`` matches no served endpoint: it could never strike."""
    check_tags(
        (
            (option_value("faults", f"{rule.kind}:{rule.tag}"), rule.tag)
            for rule in plan.rules
            if rule.tag
        ),
        endpoints,
    )

"""Faults the fake server injects, by rate or by schedule, and endpoints it degrades.

A spec is a comma-separated list (``"upstream_429=0.05,drop=0.01"``) or a YAML file. Each entry is
``KIND[:TAG]=RATE`` (drawn per request, seeded) or ``KIND[:TAG]=@N+M`` (the Nth and Mth chat requests,
counting from 1), optionally followed by ``/SECONDS`` for the faults that wait. ``TAG`` limits an
upstream fault to the endpoints an ``order`` entry with that slug or tag would select::

    upstream_429:chutes/int4=1          chutes always answers 429 (requests fall back, if allowed)
    stall=0.01/60                       1% of streams stall for 60 s, then the connection closes
    drop=@3+7                           the 3rd and 7th requests lose their connection mid-body

The same in YAML::

    faults:
      - {kind: upstream_429, rate: 1, tag: chutes/int4}
      - {kind: stall, rate: 0.01, seconds: 60}
      - {kind: drop, requests: [3, 7]}

Draws are seeded by the server's seed, the request's number and the attempt, so a run with the same
seed and the same arrival order sees the same faults. Upstream faults are drawn per attempt: with
fallbacks allowed a client sees one only when every admitted endpoint failed, as with OpenRouter.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from email.utils import formatdate
from pathlib import Path
from typing import Any, Literal

from openrouter_probe.api.schema import Endpoint
from openrouter_probe.errors import ConfigError
from openrouter_probe.fake import bodies
from openrouter_probe.rules.routing import matches

__all__ = [
    "FAULT_KINDS",
    "AccountLimits",
    "Degradation",
    "FaultPlan",
    "FaultRule",
    "check_fault_tags",
    "check_tags",
    "load_faults",
    "parse_degrade",
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
    "keepalive": 600.0,
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
        *,
        request_no: int,
        attempt: int,
        endpoint: Endpoint | None,
        stream: bool,
    ) -> FaultRule | None:
        """The fault that strikes this request's ``attempt`` (0 first) in ``phase``, if any."""
        for index, rule in enumerate(self.rules):
            if rule.phase != phase or not rule.applies_to(endpoint, stream=stream):
                continue
            if rule.requests:
                if request_no in rule.requests and attempt == 0:
                    return rule
                continue
            if rule.rate >= 1.0:
                return rule
            if rule.rate > 0 and uniform(self.seed, request_no, attempt, index, 2) < rule.rate:
                return rule
        return None


def _rate(text: str, where: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ConfigError(f"{where}: rate {text!r} is not a number between 0 and 1") from None
    if not 0.0 <= value <= 1.0:
        raise ConfigError(f"{where}: rate {value} must be between 0 and 1")
    return value


def _rule(
    kind: str,
    *,
    tag: str | None,
    rate: float | None,
    requests: Iterable[int],
    seconds: float | None,
    where: str,
) -> FaultRule:
    if kind not in FAULT_KINDS:
        known = ", ".join(sorted(FAULT_KINDS))
        raise ConfigError(f"{where}: unknown fault {kind!r} (known: {known})")
    reqs = frozenset(requests)
    if any(n < 1 for n in reqs):
        raise ConfigError(f"{where}: request numbers count from 1")
    if rate is None and not reqs:
        raise ConfigError(f"{where}: give a rate (0..1) or request numbers")
    if seconds is not None and seconds < 0:
        raise ConfigError(f"{where}: seconds must not be negative")
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
        where = f"--faults entry {raw!r}"
        if "=" not in raw:
            raise ConfigError(f"{where}: expected KIND=RATE or KIND=@N (e.g. upstream_429=0.05)")
        left, right = raw.split("=", 1)
        kind, _, tag = left.partition(":")
        value, _, secs = right.partition("/")
        seconds = None
        if secs:
            try:
                seconds = float(secs.removesuffix("s"))
            except ValueError:
                raise ConfigError(f"{where}: {secs!r} is not a number of seconds") from None
        if value.startswith("@"):
            try:
                numbers = [int(n) for n in value[1:].split("+")]
            except ValueError:
                raise ConfigError(
                    f"{where}: {value!r} is not @N or @N+M (request numbers)"
                ) from None
            rules.append(
                _rule(
                    kind.strip(),
                    tag=tag or None,
                    rate=None,
                    requests=numbers,
                    seconds=seconds,
                    where=where,
                )
            )
        else:
            rules.append(
                _rule(
                    kind.strip(),
                    tag=tag or None,
                    rate=_rate(value, where),
                    requests=(),
                    seconds=seconds,
                    where=where,
                )
            )
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
        rate = item.get("rate")
        seconds = item.get("seconds")
        rules.append(
            _rule(
                str(item["kind"]),
                tag=item.get("tag"),
                rate=None if rate is None else _rate(str(rate), where),
                requests=requests,
                seconds=None if seconds is None else float(seconds),
                where=where,
            )
        )
    return FaultPlan(tuple(rules), seed)


def parse_degrade(
    specs: Iterable[str] | Mapping[str, float], *, option: str = "--degrade"
) -> dict[str, float]:
    """Parse ``--degrade TAG=RATE`` options (or another ``option`` of that form) into
    ``{tag: rate}`` (a mapping passes through, its rates checked)."""
    if isinstance(specs, Mapping):
        return {str(k): _rate(str(v), f"{option} {k}") for k, v in specs.items()}
    out: dict[str, float] = {}
    for spec in specs:
        tag, sep, rate = spec.partition("=")
        if not sep or not tag.strip():
            raise ConfigError(f"{option} {spec!r}: expected TAG=RATE (e.g. fireworks=0.2)")
        out[tag.strip()] = _rate(rate, f"{option} {spec!r}")
    return out


def check_tags(pairs: Iterable[tuple[str, str]], endpoints: Sequence[Endpoint]) -> None:
    """Raise ``ConfigError`` for the first ``(where, tag)`` that matches no endpoint (a fault or a
    degradation that could never strike), listing the tags and slugs that would."""
    for where, tag in pairs:
        if not any(matches(tag, e) for e in endpoints):
            tags = ", ".join(sorted({e.tag for e in endpoints}))
            slugs = ", ".join(sorted({e.slug for e in endpoints}))
            raise ConfigError(
                f"{where}: no endpoint matches {tag!r}; use a tag ({tags}) or a provider slug "
                f"({slugs})"
            )


_NO_RATES = (0.0, 0.0, 0.0)


@dataclass
class Degradation:
    """How endpoints answer differently: ``degrade`` (less accurate), ``flip`` (other items, the same
    accuracy), ``tools`` (broken tool calls), each ``{tag or slug: rate}``; ``noise`` on every
    endpoint; ``hard``, the share of arithmetic items the model gets wrong everywhere (at least the
    largest flip rate, so a flipped endpoint has items to be right on)."""

    degrade: dict[str, float] = field(default_factory=dict)
    flip: dict[str, float] = field(default_factory=dict)
    tools: dict[str, float] = field(default_factory=dict)
    noise: float = 0.0
    hard: float = 0.0
    _cache: dict[str, tuple[float, float, float]] = field(default_factory=dict, repr=False)
    #: Whether any answer can change (read once per request on the server's hot path).
    active: bool = False

    @classmethod
    def build(
        cls,
        endpoints: Sequence[Endpoint],
        *,
        degrade: Mapping[str, float] | Sequence[str] | None = None,
        flip: Mapping[str, float] | Sequence[str] | None = None,
        tools: Mapping[str, float] | Sequence[str] | None = None,
        noise: float = 0.0,
        hard: float = 0.0,
    ) -> Degradation:
        """Parse and check the options against the served ``endpoints`` (an unknown tag is one
        error naming the valid ones)."""
        out = cls(
            parse_degrade(degrade or {}),
            parse_degrade(flip or {}, option="--degrade-flip"),
            parse_degrade(tools or {}, option="--degrade-tools"),
            _rate(str(noise), "--noise"),
            _rate(str(hard), "--hard"),
        )
        for option, rates in (
            ("--degrade", out.degrade),
            ("--degrade-flip", out.flip),
            ("--degrade-tools", out.tools),
        ):
            check_tags(
                ((f"{option} {tag}={rate:g}", tag) for tag, rate in rates.items()), endpoints
            )
        largest = max(out.flip.values(), default=0.0)
        if largest > 0.5:
            raise ConfigError(
                f"--degrade-flip rate {largest:g}: must be at most 0.5 (the endpoint is wrong on "
                "that share of items and right on as many)"
            )
        out.hard = max(out.hard, largest)
        out.active = bool(out) or out.noise > 0
        return out

    def __bool__(self) -> bool:
        return bool(self.degrade or self.flip or self.tools)

    def rates_for(self, endpoint: Endpoint) -> tuple[float, float, float]:
        """``(degrade, flip, tools)`` rates of ``endpoint`` (the first matching entry of each)."""
        rates = self._cache.get(endpoint.tag)
        if rates is None:
            rates = tuple(  # type: ignore[assignment]
                next((r for tag, r in table.items() if matches(tag, endpoint)), 0.0)
                for table in (self.degrade, self.flip, self.tools)
            )
            assert rates is not None
            self._cache[endpoint.tag] = rates
        return rates


def check_fault_tags(plan: FaultPlan, endpoints: Sequence[Endpoint]) -> None:
    """Refuse a fault whose ``TAG`` matches no served endpoint: it could never strike."""
    check_tags(
        ((f"--faults {rule.kind}:{rule.tag}", rule.tag) for rule in plan.rules if rule.tag),
        endpoints,
    )


def _describe(rules: Iterable[FaultRule]) -> list[dict[str, Any]]:
    return [
        {
            "kind": r.kind,
            "rate": r.rate,
            "requests": sorted(r.requests),
            "tag": r.tag,
            "seconds": r.wait_s,
        }
        for r in rules
    ]


@dataclass
class AccountLimits:
    """The 2026 account limits the fake keeps beside its credit (OPENROUTER.md 18).

    The in-flight budget: each chat request holds its worst case (on the dearest endpoint of its
    chain, as the credit's reservation) while it is served; a request that would take the held
    total past ``in_flight_share`` of the balance left (the credit's limit less what was spent),
    or past ``in_flight_usd`` (the fixed ceiling), is answered OpenRouter's 402
    ``in_flight_budget_exhausted`` with ``Retry-After: retry_after_s`` (seconds; ``retry_date``:
    an HTTP date), or, when only settling costs hold it full, the seconds until enough of them
    settle. A finished request's real cost stays held for ``settle_s`` seconds of the
    server's clock ("for a short settlement window", the docs say), so that the budget can refuse
    with no request still running, as OpenRouter's can. The key's limit: once the ledger holds ``key_limit_usd``, every chat request is
    answered the 402 ``limit_source: openrouter_key_limit``.
    """

    in_flight_share: float | None = None
    in_flight_usd: Decimal | None = None
    key_limit_usd: Decimal | None = None
    retry_after_s: int = 1
    retry_date: bool = False
    settle_s: float = 0.0
    held_usd: Decimal = field(default_factory=Decimal)
    most_held_usd: Decimal = field(default_factory=Decimal)
    refused: int = 0
    #: what finished requests still hold while their costs settle: (until, cost), oldest first
    settling: deque[tuple[float, Decimal]] = field(default_factory=deque)
    _settling_usd: Decimal = field(default_factory=Decimal)

    def __post_init__(self) -> None:
        share = self.in_flight_share
        if share is not None and not 0 < share <= 1:
            raise ConfigError(f"--in-flight-share {share}: a fraction above 0, at most 1")
        for name in ("in_flight_usd", "key_limit_usd"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise ConfigError(f"{name} {value}: must not be negative")

    @classmethod
    def build(
        cls,
        *,
        credit_usd: float | Decimal | None,
        in_flight_share: float | None,
        in_flight_usd: float | Decimal | None,
        key_limit_usd: float | Decimal | None,
        retry_after_s: int = 1,
        settle_s: float = 0.0,
    ) -> AccountLimits:
        """The fake's options as limits (a share of the credit needs a credit)."""
        if in_flight_share is not None and credit_usd is None:
            raise ConfigError(
                "--in-flight-share is a share of the credit left: give --credit-usd too"
            )
        return cls(
            in_flight_share=in_flight_share,
            in_flight_usd=None if in_flight_usd is None else Decimal(str(in_flight_usd)),
            key_limit_usd=None if key_limit_usd is None else Decimal(str(key_limit_usd)),
            retry_after_s=retry_after_s,
            settle_s=settle_s,
        )

    @property
    def holds(self) -> bool:
        """Whether requests hold money in flight (an in-flight budget is set)."""
        return self.in_flight_share is not None or self.in_flight_usd is not None

    def budget_usd(self, balance_usd: Decimal | None) -> Decimal | None:
        """The in-flight budget now: the share of ``balance_usd``, at most the ceiling."""
        budget = self.in_flight_usd
        if self.in_flight_share is not None and balance_usd is not None:
            share = max(Decimal(0), balance_usd) * Decimal(str(self.in_flight_share))
            budget = share if budget is None else min(budget, share)
        return budget

    def refuse(
        self, need_usd: Decimal, *, balance_usd: Decimal | None, spent_usd: Decimal, now: float
    ) -> tuple[bytes, dict[str, str]] | None:
        """The 402 body and headers for a request that would hold ``need_usd``; ``None``: it may
        go (then ``hold`` it)."""
        if self.key_limit_usd is not None and spent_usd >= self.key_limit_usd:
            return bodies.key_limit_402(float(self.key_limit_usd)), {}
        budget = self.budget_usd(balance_usd)
        if budget is None or self.holding(now) + need_usd <= budget:
            return None
        self.refused += 1
        wait = float(self.retry_after_s)
        over = self.holding(now) + need_usd - budget
        if self.held_usd + need_usd <= budget:  # settling costs alone hold it: until they free
            for until, cost in self.settling:
                over -= cost
                if over <= 0:
                    wait = max(wait, until - now)
                    break
        wait = float(math.ceil(wait))
        if self.retry_date:
            retry = formatdate(now + wait, usegmt=True)
            headers = {"Retry-After": retry, "Date": formatdate(now, usegmt=True)}
        else:
            headers = {"Retry-After": str(int(wait))}
        return bodies.in_flight_402(), headers

    def holding(self, now: float) -> Decimal:
        """What is held now: the requests in flight, and the costs still settling."""
        settling = self.settling
        while settling and settling[0][0] <= now:
            self._settling_usd -= settling.popleft()[1]
        return self.held_usd + self._settling_usd

    def hold(self, amount_usd: Decimal) -> None:
        self.held_usd += amount_usd
        total = self.held_usd + self._settling_usd
        if total > self.most_held_usd:
            self.most_held_usd = total

    def release(self, amount_usd: Decimal, cost_usd: Decimal, now: float) -> None:
        """A request finished: its hold becomes its cost, held ``settle_s`` more."""
        self.held_usd -= amount_usd
        if self.settle_s > 0 and cost_usd > 0:
            self.settling.append((now + self.settle_s, cost_usd))
            self._settling_usd += cost_usd

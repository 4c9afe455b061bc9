"""The fake account's limits beside its credit (OpenRouter's 2026 in-flight budget,
``AccountLimits``), the checks a chat request passes before it is served, and what ``/key`` and
``/credits`` report of the account. A key's own limit is ``fake.keys``'.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from aiohttp import web

from openrouter_probe.api.schema import Endpoint
from openrouter_probe.errors import ConfigError, Message
from openrouter_probe.fake import bodies
from openrouter_probe.fake.billing import Credit, affordable_tokens, output_cap, worst_case_usd
from openrouter_probe.fake.degrade import template_tokens

if TYPE_CHECKING:
    from openrouter_probe.fake.ledger import LedgerEntry

__all__ = [
    "WORKSPACE_ID",
    "AccountLimits",
    "budget_entry",
    "credits_data",
    "default_key_data",
    "hold_for",
    "key_data",
    "reserve",
    "settle",
    "usage_fields",
]

#: how many changes of what is held ``AccountLimits.history`` keeps (two a request: a 300-row
#: scenario makes about 630; the tail of a long-running server, about 10 MB)
HISTORY = 100_000


@dataclass
class AccountLimits:
    """The 2026 account limits the fake keeps beside its credit (OPENROUTER.md 18).

    The in-flight budget: each chat request holds its worst case (on the dearest endpoint of its
    chain, as the credit's reservation) while it is served; a request that would take the held
    total past ``in_flight_share`` of the balance left (the credit's limit less what was spent),
    or past ``in_flight_usd`` (the fixed ceiling), is answered OpenRouter's 402
    ``in_flight_budget_exhausted`` with ``Retry-After: retry_after_s`` (seconds), or, when only settling costs hold it full, the seconds until enough of them
    settle. A finished request's real cost stays held for ``settle_s`` seconds of the
    server's clock ("for a short settlement window", the docs say), so that the budget can refuse
    with no request still running, as OpenRouter's can.
    """

    in_flight_share: float | None = None
    in_flight_usd: Decimal | None = None
    retry_after_s: int = 1
    settle_s: float = 0.0
    held_usd: Decimal = field(default_factory=Decimal)
    most_held_usd: Decimal = field(default_factory=Decimal)
    refused: int = 0
    #: what finished requests still hold while their costs settle: (until, cost), oldest first
    settling: deque[tuple[float, Decimal]] = field(default_factory=deque)
    _settling_usd: Decimal = field(default_factory=Decimal)
    #: the books' time-weighted integral of what is held, on the server's clock: (time, dollar-
    #: seconds so far, dollars held after) at each of the last ``HISTORY`` changes (a server
    #: that runs for days keeps a bounded tail); ``held_mean_usd`` reads it
    history: deque[tuple[float, float, float]] = field(
        default_factory=lambda: deque(maxlen=HISTORY)
    )
    first_refusal_s: float | None = None  # when the first in-flight 402 was answered
    _area: float = 0.0
    _mark: float | None = None

    def __post_init__(self) -> None:
        share = self.in_flight_share
        if share is not None and not 0 < share <= 1:
            raise ConfigError(
                Message(
                    "in-flight-share",
                    "{in_flight_share=}: a fraction above 0, at most 1",
                    in_flight_share=share,
                )
            )
        if self.in_flight_usd is not None and self.in_flight_usd < 0:
            raise ConfigError(f"in_flight_usd {self.in_flight_usd}: must not be negative")

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
        self, need_usd: Decimal, *, balance_usd: Decimal | None, now: float
    ) -> tuple[bytes, dict[str, str]] | None:
        """The 402 body and headers for a request that would hold ``need_usd``; ``None``: it may
        go (then ``hold`` it)."""
        budget = self.budget_usd(balance_usd)
        if budget is None or self.holding(now) + need_usd <= budget:
            return None
        self.refused += 1
        if self.first_refusal_s is None:
            self.first_refusal_s = now
        wait = float(self.retry_after_s)
        over = self.holding(now) + need_usd - budget
        if self.held_usd + need_usd <= budget:  # settling costs alone hold it: until they free
            for until, cost in self.settling:
                over -= cost
                if over <= 0:
                    wait = max(wait, until - now)
                    break
        return bodies.in_flight_402(), {"Retry-After": str(math.ceil(wait))}

    def holding(self, now: float) -> Decimal:
        """What is held now: the requests in flight, and the costs still settling (the integral
        of what was held runs to ``now``, each settled cost leaving it at its own time)."""
        mark = now if self._mark is None else self._mark
        level, settling = float(self.held_usd + self._settling_usd), self.settling
        while settling and settling[0][0] <= now:
            until, cost = settling.popleft()
            self._settling_usd -= cost
            if until > mark:
                self._area += level * (until - mark)
                mark = until
            level -= float(cost)
            self.history.append((mark, self._area, level))
        self._area += level * max(0.0, now - mark)
        self._mark = max(now, mark)
        return self.held_usd + self._settling_usd

    def hold(self, amount_usd: Decimal, now: float) -> None:
        self.holding(now)
        self.held_usd += amount_usd
        total = self.held_usd + self._settling_usd
        if total > self.most_held_usd:
            self.most_held_usd = total
        self.history.append((now, self._area, float(total)))

    def held_mean_usd(self, since: float, until: float) -> float:
        """The time-weighted mean of what was held from ``since`` to ``until`` (the server's
        clock; costs settling after the last change the books saw are not in them yet)."""
        if until <= since:
            raise ValueError(f"no time from {since:.3f} s to {until:.3f} s: no mean to take")
        history = self.history
        if len(history) == history.maxlen and since < history[0][0]:
            raise ValueError(
                f"the books keep the last {HISTORY:,} changes of what is held, from "
                f"{history[0][0]:.3f} s: ask for a mean since then"
            )
        return (self._area_at(until) - self._area_at(since)) / (until - since)

    def _area_at(self, when: float) -> float:
        """The integral of what was held up to ``when``, from ``history``."""
        at = bisect_right(self.history, when, key=lambda change: change[0]) - 1
        if at < 0:
            return 0.0
        mark, area, level = self.history[at]
        return area + level * (when - mark)

    def release(self, amount_usd: Decimal, cost_usd: Decimal, now: float) -> None:
        """A request finished: its hold becomes its cost, held ``settle_s`` more."""
        self.holding(now)
        self.held_usd -= amount_usd
        if self.settle_s > 0 and cost_usd > 0:
            self.settling.append((now + self.settle_s, cost_usd))
            self._settling_usd += cost_usd
        self.history.append((now, self._area, float(self.held_usd + self._settling_usd)))


def dearest_worst_case(
    chain: Sequence[Endpoint], prompt_tokens: int, max_tokens: int | None, now: datetime
) -> tuple[Decimal, Endpoint]:
    """The worst case of a request over ``chain`` and the endpoint that costs it (the dearest)."""
    costs = [
        worst_case_usd(
            e,
            prompt_tokens=prompt_tokens,
            max_tokens=output_cap(max_tokens, e, prompt_tokens),
            at=now,
        )
        for e in chain
    ]
    dearest = max(range(len(chain)), key=costs.__getitem__)
    return costs[dearest], chain[dearest]


def hold_for(
    fake: Any, chain: Sequence[Endpoint], prompt_tokens: int, max_tokens: int | None
) -> web.Response | Decimal:
    """The in-flight budget's 402, or what the request holds in flight (``AccountLimits``)."""
    limits = fake.limits
    if not limits.holds:
        return Decimal(0)
    need, _ = dearest_worst_case(chain, prompt_tokens, max_tokens, fake.now())
    refused = limits.refuse(need, balance_usd=fake.credit.remaining_usd, now=fake.clock.now())
    if refused is not None:
        payload, headers = refused
        fake.ledger.count_error("in_flight_budget")
        return bodies.json_response(402, payload, {**headers, "X-Fake-Fault": "in_flight_budget"})
    limits.hold(need, fake.clock.now())
    return need


def reserve(
    fake: Any,
    request: web.Request,
    chain: Sequence[Endpoint],
    prompt_tokens: int,
    max_tokens: int | None,
) -> tuple[web.Response | None, tuple[Decimal, Any, Decimal]]:
    """What a request holds before it is served: its worst case on the dearest endpoint of the
    chain, on the account's credit and on its key's limit (``fake.keys``: a managed key's, or the
    default key's ``key_limit_usd``); or its refusal: a key's 401/402/403, or the credit's 402s
    (none left: "Insufficient credits"; a worst case above what is left: "can only afford N"
    when some lower ``max_tokens`` would fit). Check and reservation run with no await in
    between, on the server's one loop: concurrent requests cannot both take the last of it."""
    now, reserved, nothing = fake.now(), Decimal(0), (Decimal(0), None, Decimal(0))
    if fake.template:  # another chat template counts more prompt tokens: hold the most of them
        prompt_tokens = max(template_tokens(fake.template, e, prompt_tokens) for e in chain)
    available = fake.credit.available_usd
    if available is not None:
        reserved, dearest = dearest_worst_case(chain, prompt_tokens, max_tokens, now)
        if reserved > available:
            fake.ledger.count_error("insufficient_credits")
            affordable = affordable_tokens(
                dearest, prompt_tokens=prompt_tokens, remaining_usd=available, at=now
            )
            message = "Insufficient credits. Add more using https://openrouter.ai/settings/credits"
            if affordable >= 1:
                message = (
                    "This request requires more credits, or fewer max_tokens. You requested up "
                    f"to {output_cap(max_tokens, dearest, prompt_tokens)} tokens, but can only "
                    f"afford {affordable}."
                )
            return bodies.error_response(402, message), nothing
        fake.credit.reserve(reserved)
    refused, own, own_reserved = fake.keys.admit(request, chain, prompt_tokens, max_tokens, now)
    if refused is not None:
        fake.credit.settle(reserved, Decimal(0))
        return refused, nothing
    return None, (reserved, own, own_reserved)


def settle(fake: Any, held: tuple[Decimal, Any, Decimal], billed: LedgerEntry | None) -> None:
    """Settle what ``reserve`` held to what the request cost (nothing when it was not billed)."""
    reserved, own, own_reserved = held
    if fake.credit.limit_usd is not None:
        fake.credit.settle(reserved, billed.cost_usd if billed is not None else Decimal(0))
    if own is not None:
        fake.keys.settle(own, own_reserved, billed)


def budget_entry(
    scope: str,
    limit_usd: float,
    spend_usd: float,
    *,
    remaining_usd: float | None = None,
    budget_id: str | None = None,
    reset_interval: str | None = None,
    resets_at: str | None = None,
) -> dict[str, Any]:
    """A ``/key`` ``budgets[]`` entry (``KeyBudget``); ``remaining_usd`` defaults to the limit
    less the spend."""
    return {
        "budget_id": budget_id,
        "guardrail_id": None,
        "include_byok": False,
        "limit_usd": limit_usd,
        "remaining_usd": limit_usd - spend_usd if remaining_usd is None else remaining_usd,
        "reset_interval": reset_interval,
        "resets_at": resets_at,
        "scope": scope,
        "spend_usd": spend_usd,
    }


#: The fake account's workspace (every account has a default one; the id format is the fake's own).
WORKSPACE_ID = "workspace_fake"
#: Free-model requests a day for an account that bought at least $10 of credits (OpenRouter's
#: ``FREE_MODEL_HAS_CREDITS_RPD``); the fake serves no ``:free`` variant, so none is ever used.
FREE_MODEL_DAILY_REQUESTS = 1000
#: What a lookup without a limit reports as credits bought: the fake never runs out without one.
UNLIMITED_CREDITS_USD = 1_000_000.0


def key_data(credit: Credit, workspace: dict[str, Any] | None = None) -> dict[str, Any]:
    """``GET /key``'s ``data`` for a key held to ``credit``: its limit, what is left, what was used
    (USD).

    A plain key of an individual account: no guardrail or workspace budget, so ``budgets`` holds
    the key's own limit when it has one (``effective_budget`` is then that entry), and
    ``rate_limit`` is the deprecated object that "will always return -1". A ``workspace`` budget
    (``workspace_budget``) comes first, as enforcement checks it before the key's own limit;
    ``effective_budget`` is a spent entry if one is, else the one with the least remaining."""
    limit_usd = None if credit.limit_usd is None else float(credit.limit_usd)
    remaining_usd = None if credit.remaining_usd is None else float(credit.remaining_usd)
    usage_usd = float(credit.spent_usd)
    budget = (
        None
        if limit_usd is None
        else budget_entry("key_limit", limit_usd, usage_usd, remaining_usd=remaining_usd)
    )
    layers = [b for b in (workspace, budget) if b is not None]
    return {
        "label": "fake-openrouter",
        "limit": limit_usd,
        "limit_remaining": remaining_usd,
        "limit_reset": None,
        "include_byok_in_limit": False,
        **usage_fields(usage_usd),
        "is_free_tier": False,
        "is_management_key": False,
        "is_provisioning_key": False,
        "creator_user_id": "user_fake",
        "organization_id": None,
        "workspace_id": WORKSPACE_ID,
        "allowed_data_regions": ["global"],
        "budgets": layers,
        "effective_budget": _effective(layers),
        "free_model_daily_requests": {
            "limit": FREE_MODEL_DAILY_REQUESTS,
            "remaining": FREE_MODEL_DAILY_REQUESTS,
            "used": 0,
        },
        "expires_at": None,
        "rate_limit": {
            "requests": -1,
            "interval": "10s",
            "note": "This field is deprecated and safe to ignore.",
        },
    }


def _effective(layers: list[dict[str, Any]]) -> dict[str, Any] | None:
    spent = [b for b in layers if b["remaining_usd"] <= 0]
    return spent[0] if spent else min(layers, key=lambda b: b["remaining_usd"], default=None)


def usage_fields(usage_usd: float) -> dict[str, float]:
    """A key's ``usage`` and (none) ``byok_usage``, every period alike (the fake keeps no days)."""
    periods = ("", "_daily", "_weekly", "_monthly")
    return {f"usage{p}": usage_usd for p in periods} | {f"byok_usage{p}": 0 for p in periods}


def credits_data(credit: Credit) -> dict[str, Any]:
    """``GET /credits``' ``data``: credits bought and used, in USD (the key's limit stands for
    what the account bought; without one, ``UNLIMITED_CREDITS_USD``)."""
    total = UNLIMITED_CREDITS_USD if credit.limit_usd is None else float(credit.limit_usd)
    return {"total_credits": total, "total_usage": float(credit.spent_usd)}


def default_key_data(fake: Any) -> dict[str, Any]:
    """``GET /key`` for any key the store did not make: the default key's own limit where it has
    one, else the account's credit, with the workspace budget when one is set."""
    default = fake.keys.default.credit  # the default key's own limit, beside the credit
    workspace = None
    if fake.workspace_budget_usd is not None:
        now = fake.now()  # a monthly budget resets on the first of the next month, 00:00 UTC
        year, month = (now.year + 1, 1) if now.month == 12 else (now.year, now.month + 1)
        workspace = budget_entry(
            "workspace",
            fake.workspace_budget_usd,
            float(fake.ledger.total_usd),
            budget_id="budget_fake_workspace",
            reset_interval="monthly",
            resets_at=datetime(year, month, 1, tzinfo=UTC).isoformat().replace("+00:00", "Z"),
        )
    return key_data(fake.credit if default.limit_usd is None else default, workspace)

"""What a paid run checks before it sends anything: the model's endpoints now (``endpoints_now``:
``rules.probing.resolve_snapshot`` with a live read of the API) and the key's budgets (``key_check``:
``GET /key``'s budget that blocks first, against the run's budget and the worst
case of one request), with what the account can hold in flight (``KeyCheck.balance_usd``:
``GET /credits``' balance, at most what that budget has left; where the run's dollar window
opens, ``run.money.limit.window_start``). ``run.paid`` and the dry runs of ``generate`` and
``verify`` call them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
from collections.abc import Sequence
from decimal import Decimal
from typing import TYPE_CHECKING, Any, NamedTuple

from openrouter_probe.api.chat import KeyBudget
from openrouter_probe.api.connection import Connection
from openrouter_probe.api.schema import Endpoint
from openrouter_probe.errors import (
    APIConnectionError,
    APIError,
    Message,
    NoRouteError,
    OptionError,
    braced,
)
from openrouter_probe.rules.quantities import format_usd
from openrouter_probe.run.config import RunPlan
from openrouter_probe.run.money.limit import WindowStart, window_start
from openrouter_probe.run.money.spend import Prices
from openrouter_probe.run.rows import PromptRow
from openrouter_probe.run.send.request import RequestBuilder

if TYPE_CHECKING:
    from openrouter_probe.api.client import Client

__all__ = ["KeyCheck", "account_window", "endpoints_now", "key_budget", "key_check"]

#: The window's start prices a request at the dearest worst case of this many first rows.
_WORST_OF_ROWS = 64

#: The management key ``GET /credits`` asks for (OPENROUTER.md 5): read when set.
MANAGEMENT_KEY_ENV = "OPENROUTER_MANAGEMENT_KEY"


class KeyCheck(NamedTuple):
    """What ``key_check`` read: what to say of the key's budget (``warning``), whether it blocks
    even one request (``blocks``), and what the account can spend (``balance_usd``: the balance
    ``GET /credits`` gives, at most what the key's blocking budget has left; ``None``: not read,
    ``unread`` says why)."""

    warning: str | None
    blocks: bool
    balance_usd: Decimal | None = None
    unread: str = ""


def endpoints_now(model: str, snapshot: Any, connection: Connection) -> tuple[list[Endpoint], Any]:
    """The model's endpoints now: from ``snapshot`` (a Snapshot, a path or "bundled") or live
    (``rules.probing.resolve_snapshot``, with the live read below, over ``connection``)."""
    from openrouter_probe.rules.probing import resolve_snapshot

    live = functools.partial(_live_snapshot, connection=connection)
    snap = resolve_snapshot(model, snapshot=snapshot, live=live)
    return list(snap.endpoints), snap


def _live_snapshot(model: str, *, connection: Connection) -> Any:
    """The model's endpoints from the API (``rules.probing.probe``: no page, no ``:batch`` listing,
    which a batch run reads when it opens) as a snapshot."""
    from openrouter_probe.api.client import Client
    from openrouter_probe.rules.probing import probe

    try:
        with Client(connection=connection) as client:
            return probe(model, client=client, use_page=False, batch=False)
    except APIError as exc:
        if isinstance(exc, NoRouteError):
            raise
        # The client's own advice names --offline, which the paid commands do not have.
        reason = "no connection" if isinstance(exc, APIConnectionError) else str(exc)
        raise APIError(
            Message(
                "endpoints-unreadable",
                "cannot read {model:s}'s endpoints from {base_url:s} to check the policy and "
                "price the cap ({reason:s}); check the network or OPENROUTER_BASE_URL, or pass "
                "{snapshot=bundled} or {snapshot=PATH} to use a saved one",
                model=model,
                base_url=connection.base_url,
                reason=reason,
            ),
            url=exc.url,
        ) from exc


def key_check(
    options: RunPlan,
    budget_usd: Decimal | None = None,
    shards: int | None = None,
    one_request_usd: Decimal | None = None,
    *,
    lower_max_tokens: bool = False,
) -> KeyCheck:
    """What to say about the budget that blocks the key's requests first (``/key``'s
    ``effective_budget``: a guardrail, workspace or key budget; for an older answer the key's own
    limit), whether what it has left is below ``one_request_usd``, the worst case of one request
    (then OpenRouter would refuse every request: send nothing), and the account's balance
    (``GET /credits``). With ``lower_max_tokens`` the key's own limit blocks only when nothing is
    left: its 402 says how many tokens the rest affords, and the run retries with that many."""
    budget = options.budget_usd if budget_usd is None else budget_usd
    management = os.environ.get(MANAGEMENT_KEY_ENV, "").strip()
    with _account(options) as client:  # its connection asks /credits too, without a management key
        try:
            info = client.key()
        except APIError as exc:
            said = f"could not read the key's limit (GET /key): {exc}"
            return KeyCheck(said, False, None, "GET /key could not be read")
        asked = _account(options, management) if management else contextlib.nullcontext(client)
        with asked as account:
            balance, unread = _balance(account, management)
    blocking = info.blocking_budget
    remaining = blocking.remaining if blocking is not None else None
    if balance is not None and remaining is not None:
        balance = min(balance, remaining)
    warning, blocks = _key_warning(
        options, blocking, remaining, budget, shards, one_request_usd, lower_max_tokens
    )
    return KeyCheck(warning, blocks, balance, unread)


def _account(options: RunPlan, api_key: str = "") -> Client:
    """The client of the account's reads (``GET /key``, ``GET /credits``): two tries, 10 s;
    ``api_key`` (a management key) in place of the run's."""
    from openrouter_probe.api.client import Client

    connection = options.connection
    if api_key:
        connection = dataclasses.replace(connection, api_key=api_key)
    return Client(connection=connection, attempts=2, retry_timeout=10)


def _balance(client: Client, management: str) -> tuple[Decimal | None, str]:
    """The account's balance (``GET /credits`` through ``client``: the management key's, when
    ``OPENROUTER_MANAGEMENT_KEY`` is set, else the one that read ``/key``), or ``None`` and why
    not."""
    try:
        balance = client.credits().balance
    except APIError as exc:
        status = getattr(exc, "status_code", None)
        said = f"GET /credits answered {status}" if status else "GET /credits failed"
        if management:
            return None, f"{said} to {MANAGEMENT_KEY_ENV}"
        return None, f"{said}: it needs a management key in {MANAGEMENT_KEY_ENV}"
    if balance is None:
        return None, "GET /credits did not say total_credits and total_usage"
    return balance, ""


def _key_warning(
    options: RunPlan,
    blocking: KeyBudget | None,
    remaining: Decimal | None,
    budget: Decimal | None,
    shards: int | None,
    one_request_usd: Decimal | None,
    lower_max_tokens: bool,
) -> tuple[str | None, bool]:
    """``key_check``'s warning and whether the key's budget blocks one request."""
    if blocking is None or remaining is None:
        return None, False
    what = blocking.describe()
    own = blocking.scope == "key_limit"
    status = "402" if own else "403"
    lowers = lower_max_tokens and own and remaining > 0
    if one_request_usd is not None and remaining < one_request_usd and not lowers:
        return (
            f"{what} is below the worst case of one request ({format_usd(one_request_usd)}): "
            f"OpenRouter would refuse every request ({status}); raise it or wait for its reset, "
            "then rerun",
            True,
        )
    if budget is None or remaining >= budget:
        return None, False
    said = f"the key's remaining limit is {format_usd(remaining)}," if own else f"{what} is"
    who = "the key's limit" if own else "it"
    cap = format_usd(budget)
    if shards:
        return (
            f"{said} below the {cap} that {shards} shards of {format_usd(options.budget_usd)} "
            f"may spend: {who} stops them first "
            f"({status}), whichever shards run"
        ), False
    return (
        f"{said} below the {cap} budget: the run will stop with {status} before the budget is spent"
    ), False


def account_window(
    options: RunPlan,
    check: KeyCheck | None,
    rows: Sequence[PromptRow],
    builder: RequestBuilder,
    prices: Prices,
    *,
    resumed_usd: Decimal | None = None,
) -> WindowStart:
    """Where a run's dollar window opens (``run.money.limit.window_start``): the last run's
    window (``resumed_usd``, from the journal), else what the balance ``check`` read covers of
    ``options.concurrency`` requests at the dearest worst case of the first rows (``check``
    ``None``: a sender of its own, no account to read)."""
    worst = max(
        (builder.build(r, prices).worst_usd for r in rows[:_WORST_OF_ROWS]),
        default=prices.worst_case_usd(prompt_tokens=0, max_tokens=builder.max_tokens),
    )
    return window_start(
        concurrency=options.concurrency,
        worst_usd=worst,
        balance_usd=None if check is None else check.balance_usd,
        resumed_usd=resumed_usd,
        unread="the run's sender is its own" if check is None else check.unread,
    )


def key_budget(options: RunPlan, spent_before: Decimal = Decimal(0)) -> Decimal:
    """A paid run's cap (``Learned.cap_usd``): what the budget that blocks the key first has left
    (``GET /key``) over what the output spent before (``spent_before``: the cap is the output's,
    across runs), said on stderr; no limit to read (none on the key, ``/key`` unreadable, an
    injected transport): an ``OptionError`` (exit 2 at the CLI), before anything is sent."""
    import logging

    why = "the key has no limit (GET /key)"
    if options.send is not None:
        why = "the run's own transport (send=) reads no key limit"
    else:
        try:
            with _account(options) as client:
                blocking = client.key().blocking_budget
        except APIError as exc:
            why = f"the key's limit could not be read (GET /key: {exc})"
        else:
            if blocking is not None and blocking.remaining is not None:
                cap = spent_before + max(blocking.remaining, Decimal(0))
                before = (
                    f" over the {format_usd(spent_before)} spent before" if spent_before else ""
                )
                logging.getLogger(__name__).warning(
                    "%s",
                    Message(
                        "budget-from-key",
                        "no {budget_usd:bare} given: this run is capped at {what:s}{before:s}: "
                        "{budget_usd=} (give {budget_usd} to choose another cap)",
                        what=blocking.describe(),
                        before=before,
                        budget_usd=cap,
                    ),
                )
                return cap
    raise OptionError(
        "no {budget_usd} and "
        + braced(why)
        + ": nothing would cap the spend; give {budget_usd=USD} (e.g. 10), or {@no_cap} to "
        "run with no cap",
        budget_usd=None,
    )

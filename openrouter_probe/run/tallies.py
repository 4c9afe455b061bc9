"""The frozen tallies of a run's result (``run.result``): per provider, per dataset; how one
answer adds to its provider's (``count_answer``: the books as a run goes, ``audit`` over the
records afterwards); and how a result's values are deep-frozen (``Frozen``: lists as tuples,
mappings as read-only ``types.MappingProxyType``) and added (``plus``, ``joined``, ``summed``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, fields
from decimal import Decimal
from types import MappingProxyType
from typing import Any, Self

__all__ = ["DatasetTally", "Frozen", "ProviderTally", "count_answer", "joined", "plus", "summed"]

_ZERO = Decimal(0)


def _frozen(value: Any) -> Any:
    """``value`` deep-frozen: lists and tuples as tuples, mappings as read-only mappings."""
    if isinstance(value, list | tuple):
        return tuple(_frozen(v) for v in value)
    if isinstance(value, Mapping):
        return MappingProxyType({k: _frozen(v) for k, v in value.items()})
    return value


def _thawed(value: Any) -> Any:
    """``value`` with its read-only mappings as dicts (a pickle cannot hold a mapping proxy)."""
    if isinstance(value, tuple):
        return tuple(_thawed(v) for v in value)
    if isinstance(value, MappingProxyType):
        return {k: _thawed(v) for k, v in value.items()}
    return value


def plus(a: Decimal | int | None, b: Decimal | int | None) -> Any:
    """``a + b``; unknown (``None``) when either is: unknown is not zero."""
    return None if a is None or b is None else a + b


def joined(a: tuple[Any, ...], b: tuple[Any, ...]) -> tuple[Any, ...]:
    """``a`` then what of ``b`` is not in it (a note both shards say is said once)."""
    return a + tuple(x for x in b if x not in a)


def summed(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    """Two mappings of counts or tallies added key by key."""
    out = dict(a)
    for key, value in b.items():
        out[key] = out[key] + value if key in out else value
    return out


class _Tally:
    """Figures that add (``a + b``: every figure summed, unknown when either is, ``plus``) and
    write as JSON (``to_dict``: dollars as floats, in the order declared)."""

    def __add__(self, other: Self) -> Self:
        figures = fields(self)  # type: ignore[arg-type]
        return type(self)(
            **{f.name: plus(getattr(self, f.name), getattr(other, f.name)) for f in figures}
        )

    def to_dict(self) -> dict[str, Any]:
        values = {f.name: getattr(self, f.name) for f in fields(self)}  # type: ignore[arg-type]
        return {k: float(v) if isinstance(v, Decimal) else v for k, v in values.items()}


@dataclass(frozen=True)
class ProviderTally(_Tally):
    """Rows, tokens and cost of the rows one provider (display name) served in this run."""

    rows: int = 0
    turns: int = 0  # answers to turns of rows regenerated turn by turn (``--turns all``)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    reasoning_tokens: int = 0
    cost_usd: Decimal = _ZERO
    byok_usd: Decimal = _ZERO  # of ``cost_usd``: billed by the provider to the user's own key
    truncated: int = 0


#: ``ProviderTally``'s figures before a provider's first answer, by name.
_NO_PROVIDER = {f.name: f.default for f in fields(ProviderTally)}


def count_answer(
    tallies: dict[str, dict[str, Any]],
    provider: str,
    usage: Mapping[str, Any] | None,
    cost: Decimal | None,
    byok_usd: Decimal | None,
    turn: bool,
    last: bool,
    truncated: bool,
) -> int:
    """Add one answer to ``provider``'s ``ProviderTally`` figures in ``tallies`` (by name, as
    counted); return its completion tokens. ``usage`` as it came; ``cost`` (unknown: none
    counted) and of it ``byok_usd``, a BYOK answer's provider's part; ``turn``: to one turn of a
    row going turn by turn; ``last``: it finishes its row, ``truncated`` (cut)."""
    tally = tallies.get(provider) or tallies.setdefault(provider, dict(_NO_PROVIDER))
    usage = usage or {}
    tokens, prompt = usage.get("completion_tokens"), usage.get("prompt_tokens")
    details = usage.get("completion_tokens_details")
    reasoning = details.get("reasoning_tokens") if isinstance(details, dict) else None
    tokens = tokens if type(tokens) is int else 0
    tally["turns"] += turn
    tally["prompt_tokens"] += prompt if type(prompt) is int else 0
    tally["completion_tokens"] += tokens
    tally["reasoning_tokens"] += reasoning if type(reasoning) is int else 0
    tally["cost_usd"] += cost or 0
    tally["byok_usd"] += byok_usd or 0
    if last:
        tally["rows"] += 1
        tally["truncated"] += truncated
    return tokens


@dataclass(frozen=True)
class DatasetTally(_Tally):
    """One dataset's rows and money: ``rows`` in the prompts, ``done`` finished (earlier runs
    included), ``not_sent`` this run, ``spent_usd`` counted against the cap (earlier runs too),
    ``share_usd`` its sub-cap when the cap was shared (unknown in a sum when either is)."""

    rows: int = 0
    done: int = 0
    not_sent: int = 0
    output_tokens: int = 0
    spent_usd: Decimal = _ZERO
    share_usd: Decimal | None = None


class Frozen:
    """Deep-freezes a dataclass's values as it is made (``_frozen``), and pickles it whole."""

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            value = getattr(self, f.name)
            if isinstance(value, list | tuple | Mapping):
                object.__setattr__(self, f.name, _frozen(value))

    def __reduce__(self) -> Any:
        values = {f.name: _thawed(getattr(self, f.name)) for f in dataclasses.fields(self)}  # type: ignore[arg-type]
        return (_made, (type(self), values))


def _made(cls: type[Any], values: dict[str, Any]) -> Any:
    return cls(**values)
